/*
 * standings_apply: the periodic call of standings_apply() (see
 * standings_apply.h). One statement in autocommit, so the lease, the
 * projection's writes and the watermark are one transaction: a replica killed
 * mid-batch leaves nothing applied and the lease free for the next caller.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "metrics.h"
#include "pgc.h"
#include "pipeline.h"
#include "standings_apply.h"

static const char SQL_APPLY[] =
	"SELECT applied, busy, caught_up, lag_seconds FROM standings_apply($1::int)";

uint64_t sapply_next_delay(const struct sapply_outcome *o, int interval_ms)
{
	if (interval_ms < 1)
		interval_ms = 1;
	if (o->failed) {
		uint64_t d = (uint64_t)interval_ms * 5;
		if (d > 5000)
			d = 5000;
		return d < (uint64_t)interval_ms ? (uint64_t)interval_ms : d;
	}
	if (!o->busy && !o->caught_up && o->applied > 0)
		return 0;
	return (uint64_t)interval_ms;
}

bool sapply_defer(int slots_used, int concurrency, bool backlog, double lag_ms,
                  uint64_t since_ms, int busy_lag_ms)
{
	if (busy_lag_ms <= 0 || isnan(lag_ms))
		return false;
	bool busy = (backlog && slots_used > 0) ||
	            (concurrency > 0 && (int64_t)slots_used * 2 >= (int64_t)concurrency);
	if (!busy)
		return false;
	return lag_ms + (double)since_ms < (double)busy_lag_ms;
}

static void tick(uv_timer_t *t);

static void schedule(struct worker *w, uint64_t ms)
{
	if (w->state == W_STOPPING)
		return;
	uv_timer_start(&w->t_standings, tick, ms, 0);
}

static void on_apply(const struct pgc_result *r, void *data)
{
	struct worker *w = data;
	struct sapply_outcome o = { 0 };
	w->standings_busy = false;
	if (w->state == W_STOPPING)
		return;   /* the pool closed under the call: nothing to report or schedule */
	if (r->err || r->nres < 1 || PQntuples(r->res[0]) != 1) {
		o.failed = true;
		w->standings_lag_ms = NAN;
		/* Once per failure streak: a worker whose schema is behind would repeat it. */
		if (!w->standings_failing)
			LOGW(NULL, NULL, "standings projection: %s", r->err ? r->err : "no answer");
		w->standings_failing = true;
	} else {
		PGresult *res = r->res[0];
		o.applied = atoi(PQgetvalue(res, 0, 0));
		o.busy = PQgetvalue(res, 0, 1)[0] == 't';
		o.caught_up = PQgetvalue(res, 0, 2)[0] == 't';
		double lag = PQgetisnull(res, 0, 3) ? NAN : atof(PQgetvalue(res, 0, 3));
		metrics_standings(o.applied, lag);
		w->standings_lag_ms = lag * 1000.0;
		w->standings_seen = uv_now(w->loop);
		if (w->standings_failing)
			LOGI(NULL, NULL, "standings projection: applying again");
		w->standings_failing = false;
	}
	schedule(w, sapply_next_delay(&o, w->cfg->standings_apply_ms));
}

static void tick(uv_timer_t *t)
{
	struct worker *w = t->data;
	uint64_t now = uv_now(w->loop);
	if (w->state != W_RUNNING || w->standings_busy || !w->migrations_ok ||
	    !pgc_pool_ready(w->pg) ||
	    sapply_defer(pipeline_slots_used(w), w->cfg->concurrency, w->read_backlog,
	                 w->standings_lag_ms, now - w->standings_seen,
	                 w->cfg->standings_busy_lag_ms)) {
		schedule(w, (uint64_t)w->cfg->standings_apply_ms);
		return;
	}
	char lim[16];
	snprintf(lim, sizeof lim, "%d", w->cfg->standings_batch);
	const char *p[] = { lim };
	struct pgc_stmt st = { SQL_APPLY, 1, p };
	if (pgc_run(w->pg, &st, 1, on_apply, w) < 0) {
		schedule(w, (uint64_t)w->cfg->standings_apply_ms);
		return;
	}
	w->standings_busy = true;
}

void sapply_kick(struct worker *w)
{
	if (w->cfg->standings_apply_ms <= 0 || w->standings_kicked)
		return;
	w->standings_kicked = true;
	tick(&w->t_standings);
}

void sapply_start(struct worker *w)
{
	w->standings_lag_ms = NAN;   /* the first call is sapply_kick's */
}
