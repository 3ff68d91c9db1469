/*
 * ack: acknowledging finished entries, many per round trip. Every job that is
 * done (committed, duplicate, dead-lettered, released) waits in w->ack_q; one
 * MULTI per batch of up to ACK_BATCH_MAX entries writes the dead-letter or
 * release copies (XADD), then XACK and XDEL, EXEC. At most
 * MAX_ACKS_INFLIGHT batches are in flight. A failed batch is retried per job
 * with backoff; after ACK_MAX_TRIES the entry is left pending (reclaimed later
 * by XAUTOCLAIM, and found done).
 */
#include "ack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "rq.h"
#include "util.h"

#define ACK_BATCH_MAX 512
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

static void on_ack(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct abatch *b = data;
	struct worker *w = b->w;
	char why[256];
	(void)r;

	w->acks_inflight--;
	if (!err && reply && reply->type == REDIS_REPLY_ARRAY) {
		for (int i = 0; i < b->n; i++)
			finish_job(w, b->jobs[i]);
		free(b);
		pipeline_kick(w);
		return;
	}
	if (err)
		snprintf(why, sizeof why, "redis acknowledgement failed: %s", err);
	else if (reply && reply->type == REDIS_REPLY_ERROR)
		snprintf(why, sizeof why, "redis acknowledgement failed: %s", reply->str);
	else
		snprintf(why, sizeof why, "redis acknowledgement failed: transaction aborted");
	for (int i = 0; i < b->n; i++) {
		struct job *j = b->jobs[i];
		if (w->state == W_STOPPING || ++j->ack_tries > ACK_MAX_TRIES) {
			LOGE(j->sub[0] ? j->sub : NULL, j->id, "%s; giving up (the entry stays pending "
			     "and is reclaimed later)", why);
			pipeline_drop(w, j);
			continue;
		}
		pipeline_retry(w, j, STAGE_ACK, false, why);
	}
	free(b);
}

static const char *dead_reason(const struct job *j, char *buf, size_t n)
{
	if (j->ack_reason)
		return j->ack_reason;
	if (j->op_eff == OP_FAIL || j->op == OP_FAIL) {
		snprintf(buf, n, "failed: %.400s", j->last_error ? j->last_error : "unknown error");
		return buf;
	}
	return "unknown";
}

void ack_flush(struct worker *w)
{
	while (w->acks_inflight < MAX_ACKS_INFLIGHT && w->ack_q.n > 0 &&
	       w->state != W_STOPPING) {
		int n = w->ack_q.n < ACK_BATCH_MAX ? w->ack_q.n : ACK_BATCH_MAX;
		struct abatch *b = xmalloc(sizeof *b + (size_t)n * sizeof b->jobs[0]);
		const char **ack = xcalloc((size_t)n + 3, sizeof *ack);
		const char **del = xcalloc((size_t)n + 2, sizeof *del);
		int64_t now = job_now_ms();
		bool ok = true;

		b->w = w;
		b->n = n;
		ack[0] = "XACK";
		ack[1] = w->k_jobs;
		ack[2] = w->k_group;
		del[0] = "XDEL";
		del[1] = w->k_jobs;
		for (int i = 0; i < n; i++) {
			struct job *j = jobq_pop(&w->ack_q);
			job_set_state(j, JOB_ACKING);
			b->jobs[i] = j;
			ack[3 + i] = j->id;
			del[2 + i] = j->id;
		}
		static const char *multi[] = { "MULTI" };
		static const char *exec[] = { "EXEC" };
		if (rq_cmdv(w->rq_cmd, 0, NULL, NULL, 1, multi, NULL) < 0)
			ok = false;
		for (int i = 0; ok && i < n; i++) {
			struct job *j = b->jobs[i];
			if (j->ack == ACK_PLAIN)
				continue;
			const char **argv;
			size_t *lens;
			struct job_argv_bufs bufs;
			char rbuf[480];
			int argc = job_xadd_argv(j, j->ack == ACK_DEAD ? w->k_dead : w->k_jobs,
			                         j->ack == ACK_DEAD, dead_reason(j, rbuf, sizeof rbuf),
			                         w->cfg->worker_id, now, &bufs, &argv, &lens);
			if (rq_cmdv(w->rq_cmd, 0, NULL, NULL, argc, argv, lens) < 0)
				ok = false;
			free(argv);
			free(lens);
		}
		if (ok && rq_cmdv(w->rq_cmd, 0, NULL, NULL, 3 + n, ack, NULL) < 0)
			ok = false;
		if (ok && rq_cmdv(w->rq_cmd, 0, NULL, NULL, 2 + n, del, NULL) < 0)
			ok = false;
		free(ack);
		free(del);
		w->acks_inflight++;
		if (!ok || rq_cmdv(w->rq_cmd, 0, on_ack, b, 1, exec, NULL) < 0) {
			/* Only when the connection object is closing: fail the batch now. */
			w->acks_inflight--;
			for (int i = 0; i < n; i++)
				pipeline_drop(w, b->jobs[i]);
			free(b);
			return;
		}
	}
}
