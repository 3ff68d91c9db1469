/*
 * gauges: the worker's periodic look at itself and at Redis (w->t_gauges,
 * every GAUGES_MS): jobs in flight, sandbox and judge figures, the stream's
 * length, lag and pending entries, the delayed set by cause and the dead
 * letters for /metrics; the heartbeat and the lasting Redis cause (opsctl);
 * a warning when the other key style's stream holds entries no worker reads;
 * and the schema check (arbiter_migrations' version against this binary's).
 * Event-loop thread only.
 */
#include "gauges.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator.h"
#include "judge.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"
#include "opsctl.h"
#include "pgc.h"
#include "ratelimit.h"
#include "standings_apply.h"
#include "rq.h"
#include "util.h"

#define GAUGES_MS 2000
#define MIGCHECK_MS 30000

struct gauges_ctx {
	struct worker *w;
	int left;
	long len, lag, pending, dead;
};

static void gauge_done(struct gauges_ctx *g)
{
	if (--g->left > 0)
		return;
	if (g->w->state != W_STOPPING)
		metrics_queue(g->len, g->lag, g->pending, g->dead);
	g->w->gauges_busy = false;
	free(g);
}

static void on_gauge_int(struct rq *r, redisReply *reply, const char *err, void *data)
{
	long *slot = data;
	(void)r;
	if (!err && reply && reply->type == REDIS_REPLY_INTEGER)
		*slot = (long)reply->integer;
}

/* The delayed set by cause ({rate_limit, pause, retry, image}): arbiter_delayed_jobs{cause}. */
static void on_delayed_causes(struct rq *r, redisReply *reply, const char *err, void *data)
{
	(void)r;
	(void)data;
	if (err || !reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 4)
		return;
	long v[4];
	for (size_t i = 0; i < 4; i++) {
		if (reply->element[i]->type != REDIS_REPLY_INTEGER)
			return;
		v[i] = (long)reply->element[i]->integer;
	}
	metrics_delayed(v[0], v[1], v[2], v[3]);
}

#define OTHER_STREAM_LOG_MS (5 * 60 * 1000)   /* repeat of the warning while it lasts */

/* XLEN of the other key style's stream: a producer that XADDs there is never read. */
static void on_other_stream(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct worker *w = data;
	(void)r;
	if (err || !reply || reply->type != REDIS_REPLY_INTEGER)
		return;
	long n = (long)reply->integer;
	metrics_other_stream(n);
	uint64_t now = uv_now(w->loop);
	if (n > 0 && (w->other_jobs_len <= 0 || now - w->other_jobs_logged >= OTHER_STREAM_LOG_MS)) {
		LOGW(NULL, NULL, "the stream %s holds %ld entr%s that no worker reads: this worker "
		     "reads %s (key style %s). Make the producers XADD to %s, or set "
		     "ARBITER_REDIS_KEYS=%s on every worker (the reconciler re-enqueues queued "
		     "submissions only after ARBITER_RECONCILE_MS, and never re-evaluations)",
		     w->k_other_jobs, n, n == 1 ? "y" : "ies", w->k_jobs, w->key_style, w->k_jobs,
		     strcmp(w->key_style, "plain") ? "plain" : "tagged");
		w->other_jobs_logged = now;
	}
	w->other_jobs_len = n;
}

/* The last of the four commands: finishes the context. */
static void on_gauge_last(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct gauges_ctx *g = data;
	on_gauge_int(r, reply, err, &g->dead);
	g->left = 1;
	gauge_done(g);
}

static void on_xinfo(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct gauges_ctx *g = data;
	(void)r;
	if (err || !reply || reply->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = 0; i < reply->elements; i++) {
		redisReply *grp = reply->element[i];
		bool ours = false;
		long lag = -1, pending = -1;
		if (grp->type != REDIS_REPLY_ARRAY)
			continue;
		for (size_t k = 0; k + 1 < grp->elements; k += 2) {
			redisReply *key = grp->element[k], *v = grp->element[k + 1];
			if (key->type != REDIS_REPLY_STRING && key->type != REDIS_REPLY_STATUS)
				continue;
			if (!strcmp(key->str, "name") && v->type == REDIS_REPLY_STRING)
				ours = !strcmp(v->str, g->w->k_group);
			else if (!strcmp(key->str, "lag") && v->type == REDIS_REPLY_INTEGER)
				lag = (long)v->integer;
			else if (!strcmp(key->str, "pending") && v->type == REDIS_REPLY_INTEGER)
				pending = (long)v->integer;
		}
		if (ours) {
			g->lag = lag;
			g->pending = pending;
		}
	}
}


static void gauges_cb(uv_timer_t *t)
{
	struct worker *w = t->data;
	if (w->state == W_STOPPING)
		return;
	metrics_inflight(w->njobs);
	if (w->sp)
		metrics_sandbox_busy(sandbox_pool_busy(w->sp));
	if (w->judge) {
		struct judge_stats js;
		judge_stats(w->judge, &js);
		struct metrics_judge mj = { js.cached, js.fresh, js.invalid, js.unavailable, js.requests,
		                            js.tokens_in, js.tokens_out, js.cost_usd, js.breakers_open,
		                            judge_inflight(w->judge) };
		metrics_judge(&mj);
	}
	if (w->ops) {
		opsctl_redis_cause(w->ops, NULL, 0);   /* logs a lasting Redis cause every 30 s */
		opsctl_heartbeat(w->ops);
		opsctl_stats(w->ops);
	}
	if (!w->migcheck_busy && (!w->migrations_ok ||
	    uv_now(w->loop) - w->migcheck_at >= MIGCHECK_MS))
		gauges_check_schema(w);
	if (w->gauges_busy || !rq_connected(w->rq_cmd))
		return;
	struct gauges_ctx *g = xcalloc(1, sizeof *g);
	g->w = w;
	g->len = g->lag = g->pending = g->dead = -1;
	g->left = 1;
	w->gauges_busy = true;
	/* Commands on one connection complete in order: the last one closes. */
	rq_cmdf(w->rq_cmd, 0, on_gauge_int, &g->len, "XLEN %s", w->k_jobs);
	rq_cmdf(w->rq_cmd, 0, on_xinfo, g, "XINFO GROUPS %s", w->k_jobs);
	const char *dargv[] = { "EVAL", rl_lua_delayed_causes, "1", w->k_delayed };
	(void)rq_cmdv(w->rq_cmd, 0, on_delayed_causes, NULL, 4, dargv, NULL);
	if (w->k_other_jobs)
		rq_cmdf(w->rq_cmd, 0, on_other_stream, w, "XLEN %s", w->k_other_jobs);
	if (rq_cmdf(w->rq_cmd, 0, on_gauge_last, g, "XLEN %s", w->k_dead) < 0) {
		w->gauges_busy = false;
		free(g);
	}
}

static void on_migcheck(const struct pgc_result *r, void *data)
{
	struct worker *w = data;
	w->migcheck_busy = false;
	w->migcheck_at = uv_now(w->loop);
	if (w->state == W_STOPPING)
		return;
	if (r->err) {
		if (!r->transient) {
			if (w->migrations_ok || w->db_version >= 0)
				LOGW(NULL, NULL, "migrations table not readable: %s (run `arbiter migrate`)",
				     r->err);
			w->migrations_ok = false;
			w->db_version = -1;
		}
		return;
	}
	int v = (int)pgc_get_i64(r->res[0], 0, 0);
	bool ok = v >= migrate_latest();
	if (!ok && (w->migrations_ok || w->db_version != v))
		LOGW(NULL, NULL, "database schema at version %d, this worker needs %d: run `arbiter "
		     "migrate`", v, migrate_latest());
	w->db_version = v;
	w->migrations_ok = ok;
	if (ok) {
		sapply_kick(w);     /* the projection's first call (standings_apply.h) */
		pipeline_kick(w);   /* read now (maybe_read), not at its next poll */
	}
}

/* Reads the schema version (on_migcheck). The first check (the schema not checked yet) is
 * sent even before a connection is up: pgc_run waits for the first one, so the answer comes
 * one round trip after it; later checks are skipped while no connection is up. */
void gauges_check_schema(struct worker *w)
{
	static const struct pgc_stmt st = {
		"SELECT coalesce(max(version), 0) FROM arbiter_migrations", 0, NULL };
	if (!pgc_pool_ready(w->pg) && w->db_version != -2)
		return;
	w->migcheck_busy = true;
	if (pgc_run(w->pg, &st, 1, on_migcheck, w) < 0)
		w->migcheck_busy = false;
}

void gauges_start(struct worker *w)
{
	uv_timer_start(&w->t_gauges, gauges_cb, 200, GAUGES_MS);
}
