/*
 * claim: entries that were delivered but are not (or no longer) worked on.
 *  - Our own in-flight entries are kept from looking idle: XCLAIM ... JUSTID
 *    resets their idle time.
 *  - Entries of dead consumers are taken over with XAUTOCLAIM once idle for
 *    ARBITER_CLAIM_IDLE_MS, when we have free slots and a database.
 *  - Claimed entries (and our own pending ones at start) get their delivery
 *    count from XPENDING before they are dispatched.
 *
 * The timing is all derived from idle = ARBITER_CLAIM_IDLE_MS, the time after
 * which another consumer may take an entry:
 *  - the claim timer ticks every idle/4 (at least 20 ms) and refreshes the
 *    entries we last claimed idle/3 ago or more. An entry is therefore
 *    refreshed at the latest idle/3 + idle/4 = 7/12 of idle after its last
 *    claim: well before anyone may take it, with slack for a slow loop.
 *  - the refresh uses min-idle idle/4: an entry someone else claimed less
 *    than idle/4 ago (it is theirs now) is not taken back.
 *  - without a database for idle/2, we stop refreshing, so that after idle a
 *    replica that has one takes our entries over (if we finish first, theirs
 *    is a duplicate).
 *  - XAUTOCLAIM runs at most every idle/4 (at least 200 ms: a scan of the
 *    pending list is not free), for at most CLAIM_BATCH_MAX entries.
 */
#include "claim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "opsctl.h"
#include "pgc.h"
#include "rq.h"
#include "util.h"

#define CLAIM_TICK_DIV 4             /* timer period: idle / 4 ... */
#define CLAIM_TICK_MIN_MS 20         /* ... but at least this */
#define CLAIM_REFRESH_AGE_DIV 3      /* refresh entries claimed idle / 3 ago or more */
#define CLAIM_MIN_IDLE_DIV 4         /* XCLAIM min-idle-time: idle / 4 */
#define CLAIM_DB_DOWN_DIV 2          /* no database for idle / 2: stop refreshing */
#define CLAIM_AUTOCLAIM_DIV 4        /* XAUTOCLAIM at most every idle / 4 ... */
#define CLAIM_AUTOCLAIM_MIN_MS 200   /* ... and at most every 200 ms */
#define CLAIM_BATCH_MAX 100          /* entries per XAUTOCLAIM */
#define XCLAIM_HEAD_ARGS 5           /* XCLAIM key group consumer min-idle */
#define XCLAIM_MAX_IDS 257           /* ids per XCLAIM command */

/* idle / div, at least min_ms. */
static uint64_t period(int idle_ms, int div, int min_ms)
{
	return (uint64_t)(idle_ms / div > min_ms ? idle_ms / div : min_ms);
}

uint64_t claim_tick_ms(const struct config *cfg)
{
	return period(cfg->claim_idle_ms, CLAIM_TICK_DIV, CLAIM_TICK_MIN_MS);
}

/* Claimed entries (XAUTOCLAIM, or our own pending at start): their delivery
 * counts come from XPENDING before they are dispatched. */
struct claim_ctx {
	struct worker *w;
	int n, left;
	struct job *jobs[];
};

static void on_pending_count(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct job *j = data;
	struct worker *w = j->w;
	struct claim_ctx *c = (struct claim_ctx *)j->qnext;
	(void)r;
	(void)err;
	j->qnext = NULL;
	if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
	    reply->element[0]->type == REDIS_REPLY_ARRAY && reply->element[0]->elements >= 4 &&
	    reply->element[0]->element[3]->type == REDIS_REPLY_INTEGER) {
		long long d = reply->element[0]->element[3]->integer;
		if (d > j->attempts)
			j->attempts = (int)(d > 1000000 ? 1000000 : d);
	}
	if (--c->left > 0)
		return;
	for (int i = 0; i < c->n; i++) {
		struct job *x = c->jobs[i];
		if (w->state == W_STOPPING)
			pipeline_drop(w, x);
		else
			pipeline_dispatch(w, x);
	}
	free(c);
}

/* Adopts the entries of a stream reply array that came from a claim. */
void claim_adopt(struct worker *w, redisReply *entries)
{
	if (!entries || entries->type != REDIS_REPLY_ARRAY || entries->elements == 0)
		return;
	struct claim_ctx *c = xcalloc(1, sizeof *c + entries->elements * sizeof c->jobs[0]);
	c->w = w;
	for (size_t i = 0; i < entries->elements; i++) {
		redisReply *e = entries->element[i];
		if (e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
		    e->element[0]->type == REDIS_REPLY_STRING && pipeline_find(w, e->element[0]->str)) {
			struct job *x = pipeline_find(w, e->element[0]->str);
			x->claimed_at = uv_now(w->loop);
			continue;   /* ours and already in flight */
		}
		struct job *j = pipeline_entry_job(e, 2);
		if (!j)
			continue;
		pipeline_adopt(w, j);
		c->jobs[c->n++] = j;
	}
	if (!c->n) {
		free(c);
		return;
	}
	c->left = c->n;
	for (int i = 0; i < c->n; i++) {
		struct job *j = c->jobs[i];
		j->qnext = (struct job *)(void *)c;   /* the context, while XPENDING runs */
		const char *argv[] = { "XPENDING", w->k_jobs, w->k_group, j->id, j->id, "1" };
		if (rq_cmdv(w->rq_cmd, 0, on_pending_count, j, 6, argv, NULL) < 0) {
			j->qnext = NULL;
			if (--c->left == 0) {
				for (int k = 0; k < c->n; k++)
					pipeline_drop(w, c->jobs[k]);
				free(c);
				return;
			}
		}
	}
}

static void on_autoclaim(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct worker *w = data;
	(void)r;
	w->reclaim_busy = false;
	if (w->state != W_RUNNING)
		return;
	if (err || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2) {
		if (!err && reply->type == REDIS_REPLY_ERROR && !strstr(reply->str, "NOGROUP"))
			LOGW(NULL, NULL, "XAUTOCLAIM: %s", reply->str);
		return;
	}
	redisReply *entries = reply->element[1];
	if (entries->type == REDIS_REPLY_ARRAY && entries->elements > 0) {
		LOGI(NULL, NULL, "reclaimed %zu entries idle for %d ms", entries->elements,
		     w->cfg->claim_idle_ms);
		claim_adopt(w, entries);
	}
	pipeline_kick(w);
}
#define XCLAIM_WHAT "XCLAIM (keeping our entries claimed)"



/* Keeps our own in-flight entries from looking idle to other consumers. */
static void refresh_claims(struct worker *w)
{
	uint64_t now = uv_now(w->loop);
	/* Without a database connection for a while, stop keeping our entries:
	 * after ARBITER_CLAIM_IDLE_MS a replica that has one takes them over (a
	 * worker cut off from PostgreSQL, e.g. by its connection limit, must not
	 * hold jobs forever). If we get them done first, theirs is a duplicate. */
	if (w->db_down_since && now - w->db_down_since >= (uint64_t)w->cfg->claim_idle_ms / CLAIM_DB_DOWN_DIV)
		return;
	uint64_t every = (uint64_t)w->cfg->claim_idle_ms / CLAIM_REFRESH_AGE_DIV;
	char minidle[24];
	const char **argv = NULL;
	int argc = 0, cap = 0;

	snprintf(minidle, sizeof minidle, "%d", w->cfg->claim_idle_ms / CLAIM_MIN_IDLE_DIV);
	for (struct job *j = w->jobs; j; j = j->lnext) {
		if (j->state == JOB_ABANDONED || now - j->claimed_at < every)
			continue;
		if (argc == 0) {
			cap = XCLAIM_HEAD_ARGS + XCLAIM_MAX_IDS + 1;   /* + JUSTID */
			argv = xcalloc((size_t)cap, sizeof *argv);
			argv[argc++] = "XCLAIM";
			argv[argc++] = w->k_jobs;
			argv[argc++] = w->k_group;
			argv[argc++] = w->cfg->worker_id;
			argv[argc++] = minidle;
		}
		argv[argc++] = j->id;
		j->claimed_at = now;
		if (argc == cap - 1) {
			argv[argc++] = "JUSTID";
			rq_cmdv(w->rq_cmd, 0, rq_reply_logged, (void *)XCLAIM_WHAT, argc, argv, NULL);
			free(argv);
			argv = NULL;
			argc = 0;
		}
	}
	if (argc > 0) {
		argv[argc++] = "JUSTID";
		rq_cmdv(w->rq_cmd, 0, rq_reply_logged, (void *)XCLAIM_WHAT, argc, argv, NULL);
		free(argv);
	}
}

void claim_tick(struct worker *w)
{
	if (w->state == W_STOPPING)
		return;
	if (pgc_pool_ready(w->pg))
		w->db_down_since = 0;
	else if (!w->db_down_since)
		w->db_down_since = uv_now(w->loop) ? uv_now(w->loop) : 1;
	if (!rq_connected(w->rq_cmd))
		return;
	refresh_claims(w);
	/* Take over dead consumers' entries only when we can work on them. */
	if (w->state != W_RUNNING || w->reclaim_busy || !w->group_ready || w->db_down_since ||
	    !opsctl_may_take(w->ops, NULL, 0))
		return;
	uint64_t now = uv_now(w->loop);
	uint64_t claim_every = period(w->cfg->claim_idle_ms, CLAIM_AUTOCLAIM_DIV, CLAIM_AUTOCLAIM_MIN_MS);
	if (w->autoclaim_at && now - w->autoclaim_at + 5 < claim_every)
		return;
	w->autoclaim_at = now;
	int free_slots = w->cfg->concurrency - pipeline_slots_used(w);
	if (free_slots <= 0)
		return;
	if (free_slots > CLAIM_BATCH_MAX)
		free_slots = CLAIM_BATCH_MAX;
	char idle[24], count[16];
	snprintf(idle, sizeof idle, "%d", w->cfg->claim_idle_ms);
	snprintf(count, sizeof count, "%d", free_slots);
	const char *argv[] = { "XAUTOCLAIM", w->k_jobs, w->k_group, w->cfg->worker_id, idle, "0-0",
	                       "COUNT", count };
	w->reclaim_busy = true;
	if (rq_cmdv(w->rq_cmd, 0, on_autoclaim, w, 8, argv, NULL) < 0)
		w->reclaim_busy = false;
}
