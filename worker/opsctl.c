/* opsctl: the worker's operator controls (pause, readiness gate, leaving the group); see
 * opsctl.h. */
#include "opsctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "job.h"
#include "lanes.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"
#include "pause.h"
#include "pgc.h"
#include "rq.h"
#include "util.h"
#include "version.h"
#include "pipeline.h"

/* While the worker may not take jobs, the cause is logged at most this often. */
#define CAUSE_LOG_MS 30000

/* Hold: XACK + XDEL the entry and park its fields in the delayed set (the member format of
 * worker/ratelimit.c: a JSON object of the fields plus _token = the entry id), due in
 * ARGV[3] ms by Redis TIME. KEYS: 1 stream, 2 delayed set. ARGV: 1 group, 2 entry id,
 * 3 delay ms, 4.. field, value pairs (a field given twice keeps its first value). Returns 1,
 * or 0 when the entry is no longer pending for the group (someone else handled it). */
static const char hold_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end\n"
	"redis.call('XDEL', KEYS[1], ARGV[2])\n"
	"local job = {}\n"
	"for i = 4, #ARGV - 1, 2 do\n"
	"  if job[ARGV[i]] == nil then job[ARGV[i]] = ARGV[i + 1] end\n"
	"end\n"
	"job['_token'] = ARGV[2]\n"
	"redis.call('ZADD', KEYS[2], string.format('%.0f', now + tonumber(ARGV[3])), cjson.encode(job))\n"
	"return 1\n";

/* Leave: delete the consumer ARGV[2] of group ARGV[1] on the streams KEYS (the jobs stream,
 * and the judge lane when the worker reads it) only if it has no pending entry in any.
 * Returns 1 deleted, 0 kept (pending entries), -1 no such group. */
static const char leave_lua[] =
	"local found = false\n"
	"for i = 1, #KEYS do\n"
	"  local ok, p = pcall(redis.call, 'XPENDING', KEYS[i], ARGV[1], '-', '+', 1, ARGV[2])\n"
	"  if ok then\n"
	"    found = true\n"
	"    if #p > 0 then return 0 end\n"
	"  end\n"
	"end\n"
	"if not found then return -1 end\n"
	"for i = 1, #KEYS do pcall(redis.call, 'XGROUP', 'DELCONSUMER', KEYS[i], ARGV[1], ARGV[2]) end\n"
	"return 1\n";

/* Heartbeat: KEYS 1 the heartbeats hash, 2 its ":since" key; ARGV 1 the consumer, 2 this
 * binary's version. The value is "<ms> <version>": the time is Redis's, so replicas' clocks
 * never matter, and a reader that takes the leading integer (strtoll, as releases before
 * the version did) still reads the time. */
static const char heartbeat_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"redis.call('HSET', KEYS[1], ARGV[1], now .. ' ' .. ARGV[2])\n"
	"redis.call('SET', KEYS[2], now, 'NX')\n"
	"return now\n";

/* Stats: KEYS 1 the stats stream; ARGV 1 how long to keep (ms), then the fields. The
 * entry's id and the trimming are by Redis's clock. */
static const char stats_lua[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"return redis.call('XADD', KEYS[1], 'MINID', '~', now - tonumber(ARGV[1]), '*',\n"
	"                  unpack(ARGV, 2))\n";

/* A NOPERM reply counts as current for this long unless its command succeeds meanwhile
 * (the worker retries its reads and group creation every second or so). */
#define ACL_REFUSAL_MS 120000

/* The dead-letter stream is trimmed to ARBITER_DEAD_LETTER_MAX this often. */
#define DEAD_TRIM_MS 60000

struct opsctl {
	struct worker *w;
	uv_timer_t trim;            /* XTRIM of the dead-letter stream */
	bool trim_closed;
	struct pause_poller *pp;
	struct lanes *lanes;
	char cause[256];
	uint64_t cause_logged;
	char rcause[1024];          /* the Redis trouble last reported ("" = none) */
	uint64_t rcause_logged;
	char **held;                /* challenge ids of the paused slugs */
	size_t nheld;
	bool resolving, resolve_again;
	int refs;                   /* callbacks still to come (hold, leave, resolve) */
	bool closing;
	struct metrics_totals stats_sent;   /* the totals the stats stream has had */
	uint64_t stats_at;                  /* loop time of the last opsctl_stats write */
};

static void maybe_free(struct opsctl *o)
{
	if (!o->closing || o->refs || !o->trim_closed)
		return;
	for (size_t i = 0; i < o->nheld; i++)
		free(o->held[i]);
	free(o->held);
	free(o);
}

static void resolve(struct opsctl *o);

static void on_resolved(const struct pgc_result *r, void *data)
{
	struct opsctl *o = data;
	o->refs--;
	o->resolving = false;
	if (o->closing) {
		maybe_free(o);
		return;
	}
	if (r->err) {
		LOGW(NULL, NULL, "pause: cannot resolve the paused challenges: %s", r->err);
		o->resolve_again = true;    /* try again at the next poll that changes, or below */
	} else {
		for (size_t i = 0; i < o->nheld; i++)
			free(o->held[i]);
		free(o->held);
		int n = PQntuples(r->res[0]);
		o->held = n ? xcalloc((size_t)n, sizeof *o->held) : NULL;
		o->nheld = (size_t)n;
		for (int i = 0; i < n; i++)
			o->held[i] = xstrdup(PQgetvalue(r->res[0], i, 0));
	}
	if (o->resolve_again) {
		o->resolve_again = false;
		resolve(o);
	}
}

/* Resolves the paused slugs to challenge ids (one query; again if they change meanwhile). */
static void resolve(struct opsctl *o)
{
	const struct pause_state *st = pause_poller_state(o->pp);
	if (o->resolving) {
		o->resolve_again = true;
		return;
	}
	if (!st->nslugs) {
		for (size_t i = 0; i < o->nheld; i++)
			free(o->held[i]);
		free(o->held);
		o->held = NULL;
		o->nheld = 0;
		return;
	}
	/* A text[] literal: {"a","b"} with " and \ escaped. */
	struct strbuf arr = { 0 };
	strbuf_add(&arr, "{", 1);
	for (size_t i = 0; i < st->nslugs; i++) {
		strbuf_add(&arr, i ? ",\"" : "\"", i ? 2 : 1);
		for (const char *c = st->slugs[i]; *c; c++) {
			if (*c == '"' || *c == '\\')
				strbuf_add(&arr, "\\", 1);
			strbuf_add(&arr, c, 1);
		}
		strbuf_add(&arr, "\"", 1);
	}
	strbuf_add(&arr, "}", 1);
	const char *params[1] = { arr.buf };
	struct pgc_stmt s = { "SELECT id::text FROM challenges WHERE slug = ANY($1::text[])", 1, params };
	if (pgc_run(o->w->pg, &s, 1, on_resolved, o) == 0) {
		o->resolving = true;
		o->refs++;
	}
	strbuf_free(&arr);
}

static void on_pause_changed(void *data)
{
	struct opsctl *o = data;
	const struct pause_state *st = pause_poller_state(o->pp);
	metrics_paused(st->all, (int)st->nslugs);
	if (st->all)
		LOGW(NULL, NULL, "paused by `arbiter pause`: taking no new jobs (in-flight work finishes)");
	else
		LOGI(NULL, NULL, "not paused (%zu paused challenge(s))", st->nslugs);
	resolve(o);
	struct worker *w = o->w;
	if (st->all && w->reading && w->read_client_id > 0) {
		/* End the blocked XREADGROUP now, so nothing is delivered after the pause. */
		char id[24];
		snprintf(id, sizeof id, "%lld", w->read_client_id);
		const char *argv[] = { "CLIENT", "UNBLOCK", id };
		rq_cmdv(w->rq_cmd, 0, NULL, NULL, 3, argv, NULL);
	}
	pipeline_kick(w);
}

static void on_trimmed(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct opsctl *o = data;
	(void)r;
	o->refs--;
	if (!err && reply && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0)
		LOGI(NULL, NULL, "dead letters: trimmed %lld oldest entries (ARBITER_DEAD_LETTER_MAX %d)",
		     reply->integer, o->w->cfg->dead_letter_max);
	else if (!err && reply && reply->type == REDIS_REPLY_ERROR)
		LOGW(NULL, NULL, "dead letters: XTRIM: %s", reply->str);
	maybe_free(o);
}

static void trim_cb(uv_timer_t *t)
{
	struct opsctl *o = t->data;
	struct worker *w = o->w;
	char max[16];
	if (!w->cfg->dead_letter_max || !rq_connected(w->rq_cmd))
		return;
	snprintf(max, sizeof max, "%d", w->cfg->dead_letter_max);
	const char *argv[] = { "XTRIM", w->k_dead, "MAXLEN", max };
	if (rq_cmdv(w->rq_cmd, 0, on_trimmed, o, 4, argv, NULL) == 0)
		o->refs++;
}

static void on_trim_closed(uv_handle_t *h)
{
	struct opsctl *o = h->data;
	o->trim_closed = true;
	maybe_free(o);
}

struct opsctl *opsctl_new(struct worker *w)
{
	struct opsctl *o = xcalloc(1, sizeof *o);
	o->w = w;
	uv_timer_init(w->loop, &o->trim);
	o->trim.data = o;
	uv_timer_start(&o->trim, trim_cb, 5000, DEAD_TRIM_MS);
	/* The key base of rkeys.h ("arbiter" or "{arbiter}"): the jobs stream minus ":jobs". */
	size_t n = strlen(w->k_jobs);
	char *base = n > 5 && !strcmp(w->k_jobs + n - 5, ":jobs") ? xstrndup(w->k_jobs, n - 5)
	                                                          : xstrdup(w->cfg->prefix);
	o->pp = pause_poller_new(w->loop, w->rq_cmd, base, on_pause_changed, o);
	free(base);
	struct strbuf bulk = { 0 };
	strbuf_addf(&bulk, "%s" LANES_BULK_FROM_JOBS, w->k_jobs);
	o->lanes = lanes_new(w->loop, w->rq_cmd, w->k_jobs, bulk.buf, w->k_group,
	                     w->cfg->concurrency, w->cfg->bulk_share);
	strbuf_free(&bulk);
	metrics_paused(0, 0);
	return o;
}

void opsctl_free(struct opsctl *o)
{
	if (!o || o->closing)
		return;
	o->closing = true;
	uv_timer_stop(&o->trim);
	uv_close((uv_handle_t *)&o->trim, on_trim_closed);
	pause_poller_free(o->pp);
	o->pp = NULL;
	lanes_free(o->lanes);
	o->lanes = NULL;
	maybe_free(o);
}

bool opsctl_may_take(struct opsctl *o, char *why, size_t n)
{
	struct worker *w = o->w;
	char cause[256] = "";
	if (!w->migrations_ok) {
		if (w->db_version >= 0)
			snprintf(cause, sizeof cause, "database schema at version %d, this binary needs %d: "
			         "run arbiter migrate", w->db_version, migrate_latest());
		else if (w->db_version == -1)
			snprintf(cause, sizeof cause, "database schema unknown: the arbiter_migrations "
			         "table is not readable: run arbiter migrate");
		else
			snprintf(cause, sizeof cause, "database schema not checked yet");
	} else if (o->pp && pause_poller_state(o->pp)->all) {
		snprintf(cause, sizeof cause, "paused (arbiter resume)");
	}
	if (!cause[0]) {
		if (o->cause[0] && strncmp(o->cause, "database schema not checked", 27))
			LOGI(NULL, NULL, "taking jobs again (was: %s)", o->cause);
		o->cause[0] = '\0';
		return true;
	}
	uint64_t now = uv_now(w->loop);
	if (strcmp(cause, o->cause) || now - o->cause_logged >= CAUSE_LOG_MS) {
		if (strncmp(cause, "paused", 6) && strncmp(cause, "database schema not checked", 27))
			LOGW(NULL, NULL, "taking no jobs: %s", cause);
		o->cause_logged = now;
	}
	snprintf(o->cause, sizeof o->cause, "%s", cause);
	if (why && n)
		snprintf(why, n, "%s", cause);
	return false;
}

/* One client's trouble into buf: 0 fine; 1 not connected, no attempt failed yet (a blip);
 * 2 not connected with the last attempt's reason, or a recent ACL refusal. */
static int redis_client_trouble(const char *name, const struct rq *r, char *buf, size_t n)
{
	if (!rq_connected(r)) {
		const char *e = rq_last_error(r);
		snprintf(buf, n, "redis not connected (%s)%s%s", name, *e ? ": " : "", e);
		return *e ? 2 : 1;
	}
	const char *acl = rq_acl_refusal(r, ACL_REFUSAL_MS);
	if (acl) {
		snprintf(buf, n, "redis ACL (%s): %s (a permanent error: the ACL must allow it, README "
		         "\"ACL users\")", name, acl);
		return 2;
	}
	return 0;
}

bool opsctl_redis_cause(struct opsctl *o, char *why, size_t n)
{
	struct worker *w = o->w;
	char cause[1024];
	int t = redis_client_trouble("reader", w->rq_read, cause, sizeof cause);
	if (!t)
		t = redis_client_trouble("commands", w->rq_cmd, cause, sizeof cause);
	if (!t) {
		if (o->rcause[0])
			LOGI(NULL, NULL, "redis is usable again (was: %s)", o->rcause);
		o->rcause[0] = '\0';
		return false;
	}
	uint64_t now = uv_now(w->loop);
	if (t == 2 && (strcmp(cause, o->rcause) || now - o->rcause_logged >= CAUSE_LOG_MS)) {
		LOGW(NULL, NULL, "not ready: %s", cause);
		o->rcause_logged = now;
		snprintf(o->rcause, sizeof o->rcause, "%s", cause);
	}
	if (why && n)
		snprintf(why, n, "%s", cause);
	return true;
}

bool opsctl_holds(const struct opsctl *o, const struct job *j)
{
	for (size_t i = 0; i < o->nheld; i++)
		if (!strcmp(o->held[i], j->row.challenge_id))
			return true;
	return false;
}

struct hold_req {
	struct opsctl *o;
	struct job *j;
	int attempt;                /* 0: a pause hold; else the retry's attempt number */
	const char *cause;          /* the member's _cause: "pause", "retry", "image" (static) */
	uint32_t delay_ms;
	void (*done)(struct worker *w, struct job *j, bool ok);
};

static void on_hold(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct hold_req *h = data;
	struct opsctl *o = h->o;
	(void)r;
	o->refs--;
	bool ok = !err && reply && reply->type == REDIS_REPLY_INTEGER;
	if (!ok)
		LOGW(h->j->sub, h->j->id, "%s failed: %s", !strcmp(h->cause, "retry") ? "moving a "
		     "retry to the delayed set" : !strcmp(h->cause, "image") ? "moving a job waiting "
		     "for its image to the delayed set" : "holding a paused challenge's job",
		     err ? err : reply && reply->str ? reply->str : "unexpected reply");
	else if (reply->integer == 1 && !strcmp(h->cause, "image"))
		LOGD(h->j->sub, h->j->id, "waits %u ms in the delayed set for its image", h->delay_ms);
	else if (reply->integer == 1 && h->attempt)
		LOGD(h->j->sub, h->j->id, "attempt %d waits %u ms in the delayed set", h->attempt,
		     h->delay_ms);
	else if (reply->integer == 1)
		LOGD(h->j->sub, h->j->id, "challenge paused: job held for %u ms", h->delay_ms);
	/* integer 0: no longer pending for us, someone else handled it: drop it too. */
	h->done(o->w, h->j, ok);
	free(h);
	maybe_free(o);
}

/* The hold script for j, due in delay_ms, its member counted as cause ("pause", "retry",
 * "image"); attempt > 0 adds the field attempt and since_ms > 0 the field image_wait_since
 * (first, so they win over older ones). */
static void to_delayed(struct opsctl *o, struct job *j, uint32_t delay_ms, const char *cause,
                       int attempt, int64_t since_ms,
                       void (*done)(struct worker *w, struct job *j, bool ok))
{
	struct worker *w = o->w;
	int argc = 14 + 2 * j->nf;
	const char **argv = xcalloc((size_t)argc, sizeof *argv);
	size_t *lens = xcalloc((size_t)argc, sizeof *lens);
	char delay[16], att[16], since[24];
	snprintf(delay, sizeof delay, "%u", delay_ms);
	snprintf(att, sizeof att, "%d", attempt);
	snprintf(since, sizeof since, "%lld", (long long)since_ms);
	/* _cause (first, so it wins): what `arbiter status` and arbiter_delayed_jobs count the
	 * member as; the promotion drops it. */
	const char *head[14] = { "EVAL", hold_lua, "2", pipeline_stream_key(w, j->stream),
	                         w->k_delayed, w->k_group, j->id, delay, "_cause", cause };
	int nh = 10;
	if (attempt > 0) {
		head[nh++] = "attempt";
		head[nh++] = att;
	}
	if (since_ms > 0) {
		head[nh++] = "image_wait_since";
		head[nh++] = since;
	}
	for (int i = 0; i < nh; i++) {
		argv[i] = head[i];
		lens[i] = strlen(head[i]);
	}
	for (int i = 0; i < 2 * j->nf; i++) {
		argv[nh + i] = j->fields[i];
		lens[nh + i] = j->flens[i];
	}
	argc = nh + 2 * j->nf;
	struct hold_req *h = xcalloc(1, sizeof *h);
	h->o = o;
	h->j = j;
	h->attempt = attempt;
	h->cause = cause;
	h->delay_ms = delay_ms;
	h->done = done;
	o->refs++;
	if (rq_cmdv(w->rq_cmd, 0, on_hold, h, argc, argv, lens) < 0) {
		/* Not queued (closing): report through the same path on the next turn is not
		 * possible here, so fail it now (the caller retries it later). */
		o->refs--;
		free(h);
		free(argv);
		free(lens);
		done(w, j, false);
		return;
	}
	free(argv);
	free(lens);
}

void opsctl_hold(struct opsctl *o, struct job *j,
                 void (*done)(struct worker *w, struct job *j, bool ok))
{
	to_delayed(o, j, PAUSE_HOLD_MS, "pause", 0, 0, done);
}

void opsctl_park(struct opsctl *o, struct job *j, uint32_t delay_ms,
                 void (*done)(struct worker *w, struct job *j, bool ok))
{
	to_delayed(o, j, delay_ms, "retry", j->attempts, 0, done);
}

void opsctl_image_wait(struct opsctl *o, struct job *j, uint32_t delay_ms,
                       void (*done)(struct worker *w, struct job *j, bool ok))
{
	to_delayed(o, j, delay_ms, "image", j->attempts, j->image_since_ms, done);
}

struct leave_req {
	struct opsctl *o;
	void (*done)(struct worker *w);
};

static void on_leave(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct leave_req *l = data;
	struct worker *w = l->o->w;
	(void)r;
	l->o->refs--;
	if (err || !reply || reply->type != REDIS_REPLY_INTEGER)
		LOGW(NULL, NULL, "leaving the consumer group failed (the consumer stays; `arbiter "
		     "status --prune` removes it): %s",
		     err ? err : reply && reply->str ? reply->str : "unexpected reply");
	else if (reply->integer == 1) {
		LOGI(NULL, NULL, "left the consumer group (consumer %s removed)", w->cfg->worker_id);
		const char *hdel[] = { "HDEL", w->k_heartbeats, w->cfg->worker_id };
		(void)rq_cmdv(w->rq_cmd, 2000, NULL, NULL, 3, hdel, NULL);
	}
	else if (reply->integer == 0)
		LOGI(NULL, NULL, "consumer %s kept: it still has pending entries", w->cfg->worker_id);
	void (*done)(struct worker *) = l->done;
	struct opsctl *o = l->o;
	free(l);
	done(w);
	maybe_free(o);
}

void opsctl_heartbeat(struct opsctl *o)
{
	struct worker *w = o->w;
	if (o->closing || !rq_connected(w->rq_cmd))
		return;
	char since[600];
	snprintf(since, sizeof since, "%s:since", w->k_heartbeats);
	const char *argv[] = { "EVAL", heartbeat_lua, "2", w->k_heartbeats, since, w->cfg->worker_id,
	                       ARBITER_VERSION };
	(void)rq_cmdv(w->rq_cmd, 2000, NULL, NULL, 7, argv, NULL);
}

void opsctl_stats(struct opsctl *o)
{
	struct worker *w = o->w;
	if (o->closing || !rq_connected(w->rq_cmd) || uv_now(w->loop) - o->stats_at < OPSCTL_STATS_MS)
		return;
	o->stats_at = uv_now(w->loop);
	struct metrics_totals now;
	metrics_totals(&now);
	char c[24], f[24], r[24], keep[24], h[METRICS_E2E_BUCKETS * 21 + 1];
	uint64_t any = 0;
	size_t hn = 0;
	for (size_t i = 0; i < METRICS_E2E_BUCKETS; i++) {
		uint64_t d = now.e2e[i] - o->stats_sent.e2e[i];
		any |= d;
		hn += (size_t)snprintf(h + hn, sizeof h - hn, "%s%llu", i ? "," : "", (unsigned long long)d);
	}
	uint64_t dc = now.completed - o->stats_sent.completed, df = now.failed - o->stats_sent.failed;
	uint64_t dr = now.rejected - o->stats_sent.rejected;
	if (!(any | dc | df | dr))
		return;
	snprintf(c, sizeof c, "%llu", (unsigned long long)dc);
	snprintf(f, sizeof f, "%llu", (unsigned long long)df);
	snprintf(r, sizeof r, "%llu", (unsigned long long)dr);
	snprintf(keep, sizeof keep, "%d", OPSCTL_STATS_KEEP_MS);
	const char *argv[] = { "EVAL", stats_lua, "1", w->k_stats, keep, "w", w->cfg->worker_id,
	                       "c", c, "f", f, "r", r, "h", h };
	if (rq_cmdv(w->rq_cmd, 2000, NULL, NULL, 15, argv, NULL) == 0)
		o->stats_sent = now;
}

void opsctl_leave_group(struct opsctl *o, void (*done)(struct worker *w))
{
	struct worker *w = o->w;
	struct leave_req *l = xcalloc(1, sizeof *l);
	l->o = o;
	l->done = done;
	/* KEYS: the jobs stream, and the judge lane when this worker reads it */
	const char *argv[7] = { "EVAL", leave_lua, w->jlane ? "2" : "1", w->k_jobs };
	int argc = 4;
	if (w->jlane)
		argv[argc++] = w->k_judge_lane;
	argv[argc++] = w->k_group;
	argv[argc++] = w->cfg->worker_id;
	o->refs++;
	if (!rq_connected(w->rq_cmd) || rq_cmdv(w->rq_cmd, 2000, on_leave, l, argc, argv, NULL) < 0) {
		o->refs--;
		free(l);
		if (w->consumer_made)
			LOGW(NULL, NULL, "Redis unavailable at exit: consumer %s stays in the group "
			     "(`arbiter status --prune` removes it)", w->cfg->worker_id);
		else
			LOGI(NULL, NULL, "Redis unavailable at exit: consumer %s was never created "
			     "(this worker never read from the group); nothing to remove",
			     w->cfg->worker_id);
		done(w);
	}
}
