/*
 * reconcile: PostgreSQL is the source of truth (worker/README.md "Jobs"). Every
 * ARBITER_RECONCILE_MS one replica (SET {prefix}:reconcile:lock NX PX) looks
 * for submissions still queued/evaluating, older than a grace period, that
 * Redis no longer holds (Redis restarted without persistence, FLUSHALL, an
 * API server that died between INSERT and XADD) and XADDs them again.
 *
 * 1. PostgreSQL: unfinished submissions older than the grace period
 *    (max(ARBITER_RECONCILE_MS, 1 s)), oldest first, in pages of 5000 (at
 *    most 20 pages a run).
 * 2. Redis, atomically (one Lua script): which of them appear neither in the
 *    stream where the group will still see them (pending for the group, or
 *    after its last-delivered id: entries are XDELed when done) nor in the
 *    delayed set of the rate limiter. Only those ids come back.
 * 3. PostgreSQL again: which of those are still unfinished (one finished
 *    between 1 and 2 was acknowledged and deleted, and must not come back).
 * 4. XADD the rest (kind evaluate, reconciled 1). Each XADD's reply is
 *    checked: only those Redis accepted are counted; a failure is logged and
 *    the next run tries again. A refused run lock (Redis out of memory, say)
 *    is logged too; that run does nothing.
 * A normal backlog is therefore never duplicated: whatever sits in the
 * stream or in the delayed set is left alone.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "pgc.h"
#include "rq.h"
#include "reconcile.h"

#define RECONCILE_PAGE 5000      /* candidates per query (the LIMIT above) */
#define RECONCILE_PAGES 20        /* pages per run: at most 100,000 submissions */

/* KEYS[1] stream, KEYS[2] delayed set, KEYS[3] the judge lane (worker/judgelane.h: every
 * entry there waits or is pending, done ones are deleted, so each counts); ARGV[1] the
 * consumer group, ARGV[2..]
 * candidate ids (lower case). Returns the ids found nowhere the group will
 * still deliver or finish: an entry counts only if it is pending for the
 * group (delivered, not acknowledged) or after the group's last-delivered id
 * (not delivered yet). An entry before that id and not pending (after
 * XGROUP SETID $, say) will never be delivered, so it does not count. With
 * no group yet, every entry counts (the group is created from 0). Pending
 * ids whose entry was deleted count as missing. */
static const char LUA_MISSING[] =
	"local want = {}\n"
	"for i = 2, #ARGV do want[ARGV[i]] = true end\n"
	"local function seen(f)\n"
	"  for i = 1, #f, 2 do\n"
	"    if f[i] == 'submission_id' then want[string.lower(f[i + 1])] = nil; return end\n"
	"  end\n"
	"end\n"
	"for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do\n"
	"  local ok, obj = pcall(cjson.decode, m)\n"
	"  if ok and type(obj) == 'table' and type(obj.submission_id) == 'string' then\n"
	"    want[string.lower(obj.submission_id)] = nil\n"
	"  end\n"
	"end\n"
	"local from = '-'\n"
	"local has_group = false\n"
	"if redis.call('EXISTS', KEYS[1]) == 1 then\n"
	"  local groups = redis.pcall('XINFO', 'GROUPS', KEYS[1])\n"
	"  if type(groups) == 'table' and not groups.err then\n"
	"    for _, g in ipairs(groups) do\n"
	"      local name, last\n"
	"      for i = 1, #g, 2 do\n"
	"        if g[i] == 'name' then name = g[i + 1] end\n"
	"        if g[i] == 'last-delivered-id' then last = g[i + 1] end\n"
	"      end\n"
	"      if name == ARGV[1] and last then from = '(' .. last; has_group = true end\n"
	"    end\n"
	"  end\n"
	"end\n"
	"local start = from\n"
	"while true do\n"
	"  local entries = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 1000)\n"
	"  for _, e in ipairs(entries) do seen(e[2]) end\n"
	"  if #entries < 1000 then break end\n"
	"  start = '(' .. entries[#entries][1]\n"
	"end\n"
	"start = '-'\n"
	"while KEYS[3] do\n"
	"  local entries = redis.call('XRANGE', KEYS[3], start, '+', 'COUNT', 1000)\n"
	"  for _, e in ipairs(entries) do seen(e[2]) end\n"
	"  if #entries < 1000 then break end\n"
	"  start = '(' .. entries[#entries][1]\n"
	"end\n"
	"if has_group then\n"
	"  start = '-'\n"
	"  while true do\n"
	"    local pend = redis.call('XPENDING', KEYS[1], ARGV[1], start, '+', 1000)\n"
	"    for _, p in ipairs(pend) do\n"
	"      local e = redis.call('XRANGE', KEYS[1], p[1], p[1])\n"
	"      if e[1] then seen(e[1][2]) end\n"
	"    end\n"
	"    if #pend < 1000 then break end\n"
	"    start = '(' .. pend[#pend][1]\n"
	"  end\n"
	"end\n"
	"local out = {}\n"
	"for i = 2, #ARGV do\n"
	"  local id = ARGV[i]\n"
	"  if want[id] then out[#out + 1] = id; want[id] = nil end\n"
	"end\n"
	"return out\n";

/* One page of candidates, oldest first; $2/$3 continue after the previous page. */
static const char SQL_CANDIDATES[] =
	"SELECT id::text, submitted_at::text FROM submissions "
	"WHERE status IN ('queued', 'evaluating') "
	"AND submitted_at < now() - make_interval(secs => $1::float8 / 1000.0) "
	"AND ($2::timestamptz IS NULL OR (submitted_at, id) > ($2::timestamptz, $3::uuid)) "
	"ORDER BY submitted_at, id LIMIT 5000";

static const char SQL_RECHECK[] =
	"SELECT id::text FROM submissions WHERE id = ANY($1::uuid[]) "
	"AND status IN ('queued', 'evaluating')";

struct rctx {
	struct worker *w;
	int n;
	char **ids;
	int page;                  /* pages done in this run */
	bool full;                 /* the last page was full: there may be more */
	char after_ts[64], after_id[37];
	long total;                /* re-enqueues Redis accepted */
	long failed;               /* re-enqueues that failed or were not sent */
	int inflight;              /* XADDs of the current page awaiting their reply */
};

static void next_page(struct rctx *c);

static void done(struct rctx *c)
{
	if (c->total > 0) {
		metrics_reconciled(c->total);
		LOGW(NULL, NULL, "reconciler: re-enqueued %ld submission(s) that Redis had lost",
		     c->total);
	}
	if (c->failed > 0)
		LOGW(NULL, NULL, "reconciler: %ld re-enqueue(s) failed; retried next run", c->failed);
	c->w->reconcile_busy = false;
	for (int i = 0; i < c->n; i++)
		free(c->ids[i]);
	free(c->ids);
	free(c);
}

static void set_ids(struct rctx *c, int n)
{
	for (int i = 0; i < c->n; i++)
		free(c->ids[i]);
	free(c->ids);
	c->n = 0;
	c->ids = xcalloc((size_t)n + 1, sizeof *c->ids);
}

/* One re-enqueue XADD in flight: its reply decides whether it counts. */
struct xadd_ctx {
	struct rctx *c;
	char id[37];
};

static void xadd_settled(struct rctx *c)
{
	if (--c->inflight == 0)
		next_page(c);
}

static void on_xadd(struct rq *rq, redisReply *reply, const char *err, void *data)
{
	struct xadd_ctx *x = data;
	struct rctx *c = x->c;
	(void)rq;
	if (err || !reply || reply->type != REDIS_REPLY_STRING) {
		c->failed++;
		LOGW(x->id, NULL, "reconciler: re-enqueue failed (%s): the next run tries again",
		     err ? err : reply && reply->type == REDIS_REPLY_ERROR ? reply->str
		                                                          : "unexpected reply");
	} else {
		c->total++;
		LOGI(x->id, NULL, "reconciler: queued in PostgreSQL but missing from Redis: "
		     "re-enqueued as %s", reply->str);
	}
	free(x);
	xadd_settled(c);
}

static void on_recheck(const struct pgc_result *r, void *data)
{
	struct rctx *c = data;
	struct worker *w = c->w;
	if (w->state != W_RUNNING || r->err) {
		if (r->err)
			LOGW(NULL, NULL, "reconciler: %s", r->err);
		done(c);
		return;
	}
	PGresult *res = r->res[0];
	int n = PQntuples(res);
	char now[24];
	snprintf(now, sizeof now, "%lld", (long long)job_now_ms());
	/* One reference for this loop, so no callback can end the page early. */
	c->inflight = 1;
	for (int i = 0; i < n; i++) {
		const char *id = PQgetvalue(res, i, 0);
		const char *argv[] = { "XADD", w->k_jobs, "*", "submission_id", id, "kind", "evaluate",
		                       "enqueued_at", now, "reconciled", "1" };
		struct xadd_ctx *x = xcalloc(1, sizeof *x);
		x->c = c;
		snprintf(x->id, sizeof x->id, "%s", id);
		c->inflight++;
		if (rq_cmdv(w->rq_cmd, 0, on_xadd, x, 11, argv, NULL) < 0) {
			c->failed++;
			LOGW(id, NULL, "reconciler: re-enqueue not sent (Redis not connected): "
			     "the next run tries again");
			free(x);
			c->inflight--;
		}
	}
	xadd_settled(c);
}

static void on_missing(struct rq *rq, redisReply *reply, const char *err, void *data)
{
	struct rctx *c = data;
	struct worker *w = c->w;
	(void)rq;
	if (w->state != W_RUNNING || err || reply->type != REDIS_REPLY_ARRAY) {
		if (err || (reply && reply->type == REDIS_REPLY_ERROR))
			LOGW(NULL, NULL, "reconciler: scanning Redis failed: %s", err ? err : reply->str);
		done(c);
		return;
	}
	if (reply->elements == 0) {
		next_page(c);
		return;
	}
	struct strbuf arr = { 0 };
	strbuf_addlit(&arr, "{");
	for (size_t i = 0; i < reply->elements; i++) {
		redisReply *e = reply->element[i];
		if (e->type != REDIS_REPLY_STRING || !job_uuid_ok(e->str, NULL))
			continue;
		if (arr.len > 1)
			strbuf_addlit(&arr, ",");
		strbuf_add(&arr, e->str, e->len);
	}
	strbuf_addlit(&arr, "}");
	const char *params[] = { arr.buf };
	struct pgc_stmt st = { SQL_RECHECK, 1, params };
	int rc = pgc_run(w->pg, &st, 1, on_recheck, c);
	strbuf_free(&arr);
	if (rc < 0)
		done(c);
}

static void on_candidates(const struct pgc_result *r, void *data)
{
	struct rctx *c = data;
	struct worker *w = c->w;
	if (w->state != W_RUNNING || r->err) {
		if (r->err && !r->transient)
			LOGW(NULL, NULL, "reconciler: %s", r->err);
		done(c);
		return;
	}
	PGresult *res = r->res[0];
	int n = PQntuples(res);
	c->page++;
	c->full = n >= RECONCILE_PAGE;
	if (n == 0) {
		done(c);
		return;
	}
	snprintf(c->after_ts, sizeof c->after_ts, "%s", PQgetvalue(res, n - 1, 1));
	snprintf(c->after_id, sizeof c->after_id, "%s", PQgetvalue(res, n - 1, 0));
	set_ids(c, n);
	for (int i = 0; i < n; i++)
		c->ids[c->n++] = xstrdup(PQgetvalue(res, i, 0));

	int argc = 7 + c->n;
	const char **argv = xcalloc((size_t)argc, sizeof *argv);
	argv[0] = "EVAL";
	argv[1] = LUA_MISSING;
	argv[2] = "3";
	argv[3] = w->k_jobs;
	argv[4] = w->k_delayed;
	argv[5] = w->k_judge_lane;
	argv[6] = w->k_group;
	for (int i = 0; i < c->n; i++)
		argv[7 + i] = c->ids[i];
	int rc = rq_cmdv(w->rq_cmd, 0, on_missing, c, argc, argv, NULL);
	free(argv);
	if (rc < 0)
		done(c);
}

static void on_lock(struct rq *rq, redisReply *reply, const char *err, void *data)
{
	struct rctx *c = data;
	struct worker *w = c->w;
	(void)rq;
	if (w->state != W_RUNNING || err || reply->type != REDIS_REPLY_STATUS) {
		/* nil: another replica reconciles this period. An error (OOM,
		 * NOPERM, READONLY...) is Redis refusing the write: said, so that a
		 * reconciler that cannot run is not mistaken for one with nothing
		 * to do. */
		if (w->state == W_RUNNING && (err || reply->type == REDIS_REPLY_ERROR))
			LOGW(NULL, NULL, "reconciler: cannot take the run lock (%s): the next period tries again",
			     err ? err : reply->str);
		done(c);
		return;
	}
	next_page(c);
}

/* Queries the next page of candidates, or ends the run. */
static void next_page(struct rctx *c)
{
	struct worker *w = c->w;
	char grace[24];
	if (w->state != W_RUNNING || (c->page > 0 && !c->full) || c->page >= RECONCILE_PAGES) {
		done(c);
		return;
	}
	snprintf(grace, sizeof grace, "%d", w->cfg->reconcile_ms > 1000 ? w->cfg->reconcile_ms : 1000);
	const char *params[] = { grace, c->page ? c->after_ts : NULL, c->page ? c->after_id : NULL };
	struct pgc_stmt st = { SQL_CANDIDATES, 3, params };
	if (pgc_run(w->pg, &st, 1, on_candidates, c) < 0)
		done(c);
}

void reconcile_run(struct worker *w)
{
	struct rctx *c = xcalloc(1, sizeof *c);
	char px[24];
	c->w = w;
	/* The lock expires by itself a little before the next period: at most one
	 * run per period across all replicas, and no unlock to get wrong. */
	int ttl = w->cfg->reconcile_ms - w->cfg->reconcile_ms / 10;
	snprintf(px, sizeof px, "%d", ttl > 50 ? ttl : 50);
	const char *argv[] = { "SET", w->k_lock, w->cfg->worker_id, "NX", "PX", px };
	if (rq_cmdv(w->rq_cmd, 0, on_lock, c, 6, argv, NULL) < 0)
		done(c);
}
