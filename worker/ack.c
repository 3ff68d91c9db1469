/*
 * ack: acknowledging finished entries, many per round trip. Every job that is
 * done (committed, duplicate, dead-lettered, released) waits in w->ack_q; one
 * script per batch of up to ACK_BATCH_MAX entries (ackscript.h) writes, entry
 * by entry, the dead-letter or release copy (XADD) and only if Redis accepted
 * it does the XACK and XDEL; each entry's outcome comes back. At most
 * MAX_ACKS_INFLIGHT batches are in flight. A failed batch is retried per job
 * with backoff; after ACK_MAX_TRIES the entry is left pending (reclaimed later
 * by XAUTOCLAIM, and found done). A batch holds the entries of one stream (the
 * live stream or the judge lane, job.stream): the script acknowledges them in that
 * stream's group, and a release copy goes back to that stream.
 */
#include "ack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ackscript.h"
#include "log.h"
#include "metrics.h"
#include "rq.h"
#include "util.h"

#define ACK_BATCH_MAX 512
#define DEAD_ERROR_MAX 400   /* bytes of last_error in a dead-letter reason ("failed: ...") */
#define MAX_ACKS_INFLIGHT 4
#define ACK_MAX_TRIES 40

struct abatch {
	struct worker *w;
	int n;
	struct job *jobs[];
};

static void finish_job(struct worker *w, struct job *j)
{
	if (j->outcome != OUTCOME_NONE) {
		metrics_job(pipeline_evaluator(j), job_outcome_name(j->outcome));
		if (j->outcome == OUTCOME_REJECTED && j->reason != REASON_NONE)
			metrics_rejected(job_reason_name(j->reason));
	}
	pipeline_drop(w, j);
}

/* Retries (or, past ACK_MAX_TRIES or while stopping, gives up on) one job
 * whose acknowledgement did not happen; its entry is still pending. */
static void ack_again(struct worker *w, struct job *j, const char *why)
{
	if (w->state == W_STOPPING || ++j->ack_tries > ACK_MAX_TRIES) {
		LOGE(j->sub[0] ? j->sub : NULL, j->id, "%s; giving up (the entry stays pending "
		     "and is reclaimed later)", why);
		pipeline_drop(w, j);
		return;
	}
	pipeline_retry(w, j, STAGE_ACK, false, why);
}

static void on_ack(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct abatch *b = data;
	struct worker *w = b->w;
	char why[512];
	const char **errs = xcalloc((size_t)b->n + 1, sizeof *errs);
	(void)r;

	w->acks_inflight--;
	if (err) {
		for (int i = 0; i < b->n; i++)
			errs[i] = err;
	} else {
		ackscript_parse(reply, b->n, errs);
	}
	/* Entry by entry: only an entry whose copy (if any) Redis accepted was
	 * acknowledged and deleted; the others are still pending and retried. */
	for (int i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];
		if (!errs[i]) {
			if (j->ack == ACK_DEAD)
				LOGI(j->sub[0] ? j->sub : NULL, j->id, "dead-lettered to %s", w->k_dead);
			finish_job(w, j);
			continue;
		}
		snprintf(why, sizeof why, "redis acknowledgement failed: %s", errs[i]);
		ack_again(w, j, why);
	}
	free(errs);
	free(b);
	pipeline_kick(w);
}

/* The dead-letter entry's reason, written into buf (n bytes): valid UTF-8 whatever the
 * job's text holds, cut at a character boundary (deploy/README.md "Dead letters: `scripts/dlq`"). */
static const char *dead_reason(const struct job *j, char *buf, size_t n)
{
	struct strbuf sb = { 0 };
	if (j->ack_reason) {
		strbuf_add_valid_utf8(&sb, j->ack_reason, strlen(j->ack_reason));
	} else if (j->op_eff == OP_FAIL || j->op == OP_FAIL) {
		const char *e = j->last_error ? j->last_error : "unknown error";
		strbuf_addlit(&sb, "failed: ");
		strbuf_add_valid_utf8(&sb, e, utf8_cut(e, DEAD_ERROR_MAX));
	} else {
		strbuf_addlit(&sb, "unknown");
	}
	size_t len = utf8_cut(sb.buf, n - 1);
	memcpy(buf, sb.buf, len);
	buf[len] = '\0';
	strbuf_free(&sb);
	return buf;
}

/* Takes up to max jobs of the first job's stream out of w->ack_q into out (in queue
 * order; the others keep their places). Returns how many. */
static int take_batch(struct worker *w, struct job **out, int max)
{
	enum job_stream s = w->ack_q.head->stream;
	struct jobq rest = { NULL, NULL, 0 };
	int n = 0;
	struct job *j;
	while (n < max && (j = jobq_pop(&w->ack_q))) {
		if (j->stream == s)
			out[n++] = j;
		else
			jobq_push(&rest, j);
	}
	if (rest.n) {   /* back in front, in their order */
		rest.tail->qnext = w->ack_q.head;
		if (!w->ack_q.head)
			w->ack_q.tail = rest.tail;
		w->ack_q.head = rest.head;
		w->ack_q.n += rest.n;
	}
	return n;
}

void ack_flush(struct worker *w)
{
	while (w->acks_inflight < MAX_ACKS_INFLIGHT && w->ack_q.n > 0 &&
	       w->state != W_STOPPING) {
		int n = w->ack_q.n < ACK_BATCH_MAX ? w->ack_q.n : ACK_BATCH_MAX;
		struct abatch *b = xmalloc(sizeof *b + (size_t)n * sizeof b->jobs[0]);
		n = take_batch(w, b->jobs, n);
		const char *k_stream = pipeline_stream_key(w, b->jobs[0]->stream);
		struct ackscript_entry *e = xcalloc((size_t)n, sizeof *e);
		const char ***cargv = xcalloc((size_t)n, sizeof *cargv);
		size_t **clens = xcalloc((size_t)n, sizeof *clens);
		struct job_argv_bufs *bufs = xcalloc((size_t)n, sizeof *bufs);
		char (*rbuf)[480] = xcalloc((size_t)n, sizeof *rbuf);
		char *nbuf = xcalloc((size_t)n, 12);
		int64_t now = job_now_ms();

		b->w = w;
		b->n = n;
		for (int i = 0; i < n; i++) {
			struct job *j = b->jobs[i];
			job_set_state(j, JOB_ACKING);
			e[i].id = j->id;
			e[i].mode = ACKSCRIPT_ACK;
			if (j->ack == ACK_PLAIN)
				continue;
			/* The copy's fields: job_xadd_argv's vector after "XADD stream *". */
			int argc = job_xadd_argv(j, j->ack == ACK_DEAD ? w->k_dead : k_stream,
			                         j->ack == ACK_DEAD, dead_reason(j, rbuf[i], sizeof rbuf[i]),
			                         w->cfg->worker_id, now, &bufs[i], &cargv[i], &clens[i]);
			e[i].mode = j->ack == ACK_DEAD ? ACKSCRIPT_DEAD : ACKSCRIPT_RELEASE;
			e[i].nf = argc - 3;
			e[i].f = cargv[i] + 3;
			e[i].flen = clens[i] + 3;
		}
		const char **argv;
		size_t *lens;
		int argc = ackscript_argv(k_stream, w->k_dead, w->k_group, e, n, nbuf, &argv, &lens);
		w->acks_inflight++;
		int rc = rq_cmdv(w->rq_cmd, 0, on_ack, b, argc, argv, lens);
		free(argv);
		free(lens);
		for (int i = 0; i < n; i++) {
			free(cargv[i]);
			free(clens[i]);
		}
		free(cargv);
		free(clens);
		free(bufs);
		free(rbuf);
		free(nbuf);
		free(e);
		if (rc < 0) {
			/* Only when the connection object is closing: fail the batch now. */
			w->acks_inflight--;
			for (int i = 0; i < n; i++)
				pipeline_drop(w, b->jobs[i]);
			free(b);
			return;
		}
	}
}
