/*
 * claim: entries that were delivered but are not (or no longer) worked on.
 *  - Our own in-flight entries are kept from looking idle: XCLAIM ... JUSTID
 *    resets their idle time.
 *  - Entries of dead consumers are taken over with XAUTOCLAIM once idle for
 *    ARBITER_CLAIM_IDLE_MS, when we have free slots and a database.
 *  - Claimed entries (and our own pending ones at start) get their delivery
 *    count from XPENDING before they are dispatched.
 *  - All of this on both streams a job may be in (job.stream): the live stream
 *    and the judge lane (judgelane.h), each in its own group. Lane entries of a
 *    dead consumer are taken over only as far as judge slots are free.
 *
 * The timing is all derived from idle = ARBITER_CLAIM_IDLE_MS, the time after
 * which another consumer may take an entry (claim_timing; test/test-claim.c checks these
 * rules over the setting's whole range):
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

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judgelane.h"
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

struct claim_timing claim_timing(int idle_ms)
{
	struct claim_timing t = {
		.tick = period(idle_ms, CLAIM_TICK_DIV, CLAIM_TICK_MIN_MS),
		.refresh_age = (uint64_t)idle_ms / CLAIM_REFRESH_AGE_DIV,
		.min_idle = (uint64_t)idle_ms / CLAIM_MIN_IDLE_DIV,
		.db_down = (uint64_t)idle_ms / CLAIM_DB_DOWN_DIV,
		.autoclaim = period(idle_ms, CLAIM_AUTOCLAIM_DIV, CLAIM_AUTOCLAIM_MIN_MS),
	};
	return t;
}

int claim_autoclaim_count(int room)
{
	return room <= 0 ? 0 : room > CLAIM_BATCH_MAX ? CLAIM_BATCH_MAX : room;
}

uint64_t claim_tick_ms(const struct config *cfg)
{
	return claim_timing(cfg->claim_idle_ms).tick;
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
void claim_adopt(struct worker *w, redisReply *entries, enum job_stream s)
{
	if (!entries || entries->type != REDIS_REPLY_ARRAY || entries->elements == 0)
		return;
	struct claim_ctx *c = xcalloc(1, sizeof *c + entries->elements * sizeof c->jobs[0]);
	c->w = w;
	for (size_t i = 0; i < entries->elements; i++) {
		redisReply *e = entries->element[i];
		if (e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
		    e->element[0]->type == REDIS_REPLY_STRING && pipeline_find(w, s, e->element[0]->str)) {
			struct job *x = pipeline_find(w, s, e->element[0]->str);
			x->claimed_at = uv_now(w->loop);
			continue;   /* ours and already in flight */
		}
		struct job *j = pipeline_entry_job(e, 2);
		if (!j)
			continue;
		pipeline_adopt(w, j, s);
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
		const char *argv[] = { "XPENDING", pipeline_stream_key(w, s), w->k_group, j->id, j->id,
		                       "1" };
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

static void autoclaimed(struct worker *w, redisReply *reply, const char *err, enum job_stream s)
{
	if (w->state != W_RUNNING)
		return;
	if (err || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2) {
		if (!err && reply->type == REDIS_REPLY_ERROR && !strstr(reply->str, "NOGROUP"))
			LOGW(NULL, NULL, "XAUTOCLAIM%s: %s", s == JOB_STREAM_LANE ? " (judge lane)" : "",
			     reply->str);
		return;
	}
	redisReply *entries = reply->element[1];
	if (entries->type == REDIS_REPLY_ARRAY && entries->elements > 0) {
		LOGI(NULL, NULL, "reclaimed %zu %sentries idle for %d ms", entries->elements,
		     s == JOB_STREAM_LANE ? "judge lane " : "", w->cfg->claim_idle_ms);
		claim_adopt(w, entries, s);
	}
	pipeline_kick(w);
}

static void on_autoclaim(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct worker *w = data;
	(void)r;
	w->reclaim_busy = false;
	autoclaimed(w, reply, err, JOB_STREAM_LIVE);
}

static void on_autoclaim_lane(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct worker *w = data;
	(void)r;
	w->lane_reclaim_busy = false;
	autoclaimed(w, reply, err, JOB_STREAM_LANE);
}
#define XCLAIM_WHAT "XCLAIM (keeping our entries claimed)"



/* XCLAIM ... JUSTID for our in-flight entries of stream s claimed `every` ms ago or more. */
static void refresh_stream(struct worker *w, enum job_stream s, uint64_t now, uint64_t every,
                           const char *minidle)
{
	const char **argv = NULL;
	int argc = 0, cap = 0;
	for (struct job *j = w->jobs; j; j = j->lnext) {
		if (j->state == JOB_ABANDONED || j->stream != s || now - j->claimed_at < every)
			continue;
		if (argc == 0) {
			cap = XCLAIM_HEAD_ARGS + XCLAIM_MAX_IDS + 1;   /* + JUSTID */
			argv = xcalloc((size_t)cap, sizeof *argv);
			argv[argc++] = "XCLAIM";
			argv[argc++] = pipeline_stream_key(w, s);
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

/* Keeps our own in-flight entries (of both streams) from looking idle to other consumers. */
static void refresh_claims(struct worker *w)
{
	uint64_t now = uv_now(w->loop);
	struct claim_timing t = claim_timing(w->cfg->claim_idle_ms);
	/* Without a database connection for a while, stop keeping our entries:
	 * after ARBITER_CLAIM_IDLE_MS a replica that has one takes them over (a
	 * worker cut off from PostgreSQL, e.g. by its connection limit, must not
	 * hold jobs forever). If we get them done first, theirs is a duplicate. */
	if (w->db_down_since && now - w->db_down_since >= t.db_down)
		return;
	char minidle[24];
	snprintf(minidle, sizeof minidle, "%" PRIu64, t.min_idle);
	refresh_stream(w, JOB_STREAM_LIVE, now, t.refresh_age, minidle);
	if (w->jlane)
		refresh_stream(w, JOB_STREAM_LANE, now, t.refresh_age, minidle);
}

/* XAUTOCLAIM of up to count entries of stream s idle for ARBITER_CLAIM_IDLE_MS. */
static void autoclaim(struct worker *w, enum job_stream s, int count, bool *busy, rq_cb *cb)
{
	count = claim_autoclaim_count(count);
	if (count == 0)
		return;
	char idle[24], cnt[16];
	snprintf(idle, sizeof idle, "%d", w->cfg->claim_idle_ms);
	snprintf(cnt, sizeof cnt, "%d", count);
	const char *argv[] = { "XAUTOCLAIM", pipeline_stream_key(w, s), w->k_group, w->cfg->worker_id,
	                       idle, "0-0", "COUNT", cnt };
	*busy = true;
	if (rq_cmdv(w->rq_cmd, 0, cb, w, 8, argv, NULL) < 0)
		*busy = false;
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
	uint64_t claim_every = claim_timing(w->cfg->claim_idle_ms).autoclaim;
	if (w->autoclaim_at && now - w->autoclaim_at + 5 < claim_every)
		return;
	w->autoclaim_at = now;
	autoclaim(w, JOB_STREAM_LIVE, w->cfg->concurrency - pipeline_slots_used(w), &w->reclaim_busy,
	          on_autoclaim);
	/* The lane's entries of dead consumers: as many as judge slots are free (each one
	 * waits for a judge slot here). */
	if (w->jlane && judgelane_ready(w->jlane) && !w->lane_reclaim_busy)
		autoclaim(w, JOB_STREAM_LANE, pipeline_judge_room(w), &w->lane_reclaim_busy,
		          on_autoclaim_lane);
}
