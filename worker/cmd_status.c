/*
 * `arbiter status [--json] [settings]`: a one-shot view of the queue for
 * operators. From Redis: the jobs stream's length and oldest entry, the
 * consumer group's lag and pending count, pending entries and idle time per
 * consumer (XINFO CONSUMERS), the delayed (rate-limit) set and the
 * dead-letter stream. From PostgreSQL: queued/evaluating counts, the oldest
 * queued submission, and per-evaluator results of the last hour.
 *
 * This is a command-line tool, not the daemon: Redis through the worker's
 * own transport used blocking (rq_sync, rq.h: TLS, Sentinel and Cluster URLs
 * work as for the worker), libpq blocking, both with short timeouts. Settings come from config_load (flags >
 * ARBITER_* environment > --config file), like `arbiter worker`. Exit 0 when
 * both servers answered, 1 when one of them did not (what could be read is
 * still printed), 2 on a usage or configuration error.
 *
 * Also `arbiter pause` / `arbiter resume` (the pause switches of worker/pause.h,
 * shown by status), and `arbiter metrics-names` (hidden): the metric family
 * names the binary exports, one per line, for the deployment tests.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include "cmd.h"
#include "config.h"
#include "redact.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"
#include "lanes.h"
#include "opsctl.h"
#include "pause.h"
#include "ratelimit.h"
#include "rq.h"
#include "rkeys.h"
#include "status.h"
#include "util.h"

#define STATUS_TIMEOUT_SECS 5

struct consumer {
	char *name;
	long long pending, idle_ms, inactive_ms;   /* inactive_ms -1 when Redis < 7.2 */
	long long last_seen_ms;                    /* age of its heartbeat; -1: none */
	char version[64];                          /* from its heartbeat; "" unknown */
	bool pruned;                               /* removed by --prune */
};

struct evaluator_row {
	char *name;
	long long results, wins, draws, losses;
	double avg_score;
};

struct status {
	/* Redis */
	bool redis_ok;
	char redis_err[256];
	long long xlen, lag, pending, delayed, dead, entries_read, bulk;
	long long judge_lane;                        /* judged jobs waiting for a judge slot */
	char stream[512], other_stream[512];         /* status_keys: jobs and other_jobs */
	const char *style;
	long long other_len;                         /* XLEN of other_stream; -1: not looked at */
	bool group_exists, lag_exact;
	char last_delivered[64];
	char oldest_entry[64];
	long long oldest_entry_age_ms;               /* -1: empty stream */
	long long next_delayed_due_ms;               /* relative to now; -1: none */
	long long delayed_by[4];                     /* rate_limit, pause, retry, image (rl_lua_delayed_causes) */
	struct consumer *consumers;
	size_t nconsumers;
	bool paused;                                 /* arbiter pause */
	long long paused_since_ms;
	char **paused_challenges;                    /* arbiter pause --challenge SLUG */
	size_t npaused_challenges;
	long long prune_idle_ms;                     /* --prune threshold; -1: no pruning */
	size_t pruned;                               /* --prune: consumers removed */
	long long heartbeats_age_ms;                 /* since the first heartbeat; -1: none yet */
	long long heartbeats_now_ms;                 /* Redis TIME when they were read; -1 unknown */
	/* PostgreSQL */
	bool pg_ok;
	char pg_err[256];
	int schema_version;                          /* applied migrations; -1 unknown */
	long long queued, evaluating;
	char oldest_queued_id[64];                  /* "" when none */
	double oldest_queued_age_s;
	struct evaluator_row *evals;
	size_t nevals;
};

static long long now_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ---- Redis ---- */

static redisReply *cmd(struct rq_sync *c, struct status *st, int argc, const char **argv)
{
	redisReply *r = rq_sync_cmdv(c, argc, argv, st->redis_err, sizeof(st->redis_err));
	if (r && r->type == REDIS_REPLY_ERROR) {
		snprintf(st->redis_err, sizeof(st->redis_err), "%s: %s", argv[0], r->str);
		freeReplyObject(r);
		return NULL;
	}
	return r;
}

/* In a flat [k1, v1, k2, v2, ...] reply, the value for key, or NULL. */
static const redisReply *field(const redisReply *r, const char *key)
{
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < r->elements; i += 2) {
		const redisReply *k = r->element[i];
		if ((k->type == REDIS_REPLY_STRING || k->type == REDIS_REPLY_STATUS) &&
		    !strcmp(k->str, key))
			return r->element[i + 1];
	}
	return NULL;
}

static long long as_int(const redisReply *v, long long dflt)
{
	if (!v)
		return dflt;
	if (v->type == REDIS_REPLY_INTEGER)
		return v->integer;
	if (v->type == REDIS_REPLY_STRING)
		return strtoll(v->str, NULL, 10);
	return dflt;
}

int status_keys(const struct config *cfg, struct status_keys *sk, char *err, size_t errlen)
{
	struct rkeys k;
	if (rkeys_init(&k, cfg->prefix, rkeys_style_for_url(cfg->redis_keys, cfg->redis_url), err,
	               errlen) < 0)
		return -1;
	snprintf(sk->jobs, sizeof(sk->jobs), "%s", k.jobs);
	snprintf(sk->dead, sizeof(sk->dead), "%s", k.dead);
	snprintf(sk->delayed, sizeof(sk->delayed), "%s", k.delayed);
	snprintf(sk->group, sizeof(sk->group), "%s", k.group);
	snprintf(sk->paused, sizeof(sk->paused), "%s" PAUSE_KEY_SUFFIX, k.base);
	snprintf(sk->pausedc, sizeof(sk->pausedc), "%s" PAUSE_CHALLENGES_KEY_SUFFIX, k.base);
	snprintf(sk->bulk, sizeof(sk->bulk), "%s" LANES_BULK_FROM_JOBS, k.jobs);
	char *jl = rkeys_judge_lane(&k);
	snprintf(sk->judge_lane, sizeof(sk->judge_lane), "%s", jl);
	free(jl);
	sk->style = k.legacy ? "plain" : "tagged";
	char *hb = rkeys_heartbeats(&k);
	snprintf(sk->heartbeats, sizeof(sk->heartbeats), "%s", hb);
	free(hb);
	char *stats = rkeys_stats(&k);
	snprintf(sk->stats, sizeof(sk->stats), "%s", stats);
	free(stats);
	struct rq_url u;
	char uerr[256];
	bool cluster = rq_url_parse(cfg->redis_url, &u, uerr, sizeof uerr) == 0 && u.cluster;
	char *other = cluster ? NULL : rkeys_other_jobs(&k, cfg->prefix);
	snprintf(sk->other_jobs, sizeof(sk->other_jobs), "%s", other ? other : "");
	free(other);
	rkeys_free(&k);
	return 0;
}

/* A connection to cfg's Redis through the worker's transport (rq.h: every
 * URL the worker takes, TLS, Sentinel and Cluster included), or NULL with
 * the reason in err. */
struct rq_sync *status_redis_open(const struct config *cfg, const struct status_keys *sk,
                                  char *err, size_t errlen)
{
	struct rq_sync *c;
	/* The transport's own lines: only its errors (a TLS or ACL problem), as
	 * text; the outcome is reported by the command itself. */
	log_setup(LOG_ERROR, NULL);
	log_set_text(1);
	if (rq_sync_open(cfg->redis_url, sk->jobs, STATUS_TIMEOUT_SECS * 1000, &c, err, errlen) < 0)
		return NULL;
	return c;
}

/* An integer reply of argv into *out. */
static int gather_int(struct rq_sync *c, struct status *st, int argc, const char **argv,
                      long long *out)
{
	redisReply *r = cmd(c, st, argc, argv);
	if (!r)
		return -1;
	*out = r->integer;
	freeReplyObject(r);
	return 0;
}

/* arbiter pause: the global switch and the paused challenges. */
static int gather_pause(struct rq_sync *c, struct status *st, const struct status_keys *sk)
{
	redisReply *r;
	const char *g[] = { "GET", sk->paused };
	if (!(r = cmd(c, st, 2, g)))
		return -1;
	if (r->type == REDIS_REPLY_STRING) {
		st->paused = true;
		st->paused_since_ms = strtoll(r->str, NULL, 10);
	}
	freeReplyObject(r);
	const char *m[] = { "SMEMBERS", sk->pausedc };
	if (!(r = cmd(c, st, 2, m)))
		return -1;
	if (r->type == REDIS_REPLY_ARRAY && r->elements) {
		st->paused_challenges = xcalloc(r->elements, sizeof(char *));
		for (size_t i = 0; i < r->elements; i++)
			if (r->element[i]->type == REDIS_REPLY_STRING)
				st->paused_challenges[st->npaused_challenges++] = xstrdup(r->element[i]->str);
	}
	freeReplyObject(r);
	return 0;
}

/* The jobs stream: length and oldest entry. */
static int gather_stream(struct rq_sync *c, struct status *st, const struct status_keys *sk)
{
	const char *l[] = { "XLEN", sk->jobs };
	if (gather_int(c, st, 2, l, &st->xlen) < 0)
		return -1;
	snprintf(st->stream, sizeof st->stream, "%s", sk->jobs);
	snprintf(st->other_stream, sizeof st->other_stream, "%s", sk->other_jobs);
	st->style = sk->style;
	st->other_len = -1;
	const char *lo[] = { "XLEN", sk->other_jobs };
	if (sk->other_jobs[0] && gather_int(c, st, 2, lo, &st->other_len) < 0)
		return -1;
	const char *a[] = { "XRANGE", sk->jobs, "-", "+", "COUNT", "1" };
	redisReply *r = cmd(c, st, 6, a);
	if (!r)
		return -1;
	st->oldest_entry_age_ms = -1;
	if (r->type == REDIS_REPLY_ARRAY && r->elements && r->element[0]->type == REDIS_REPLY_ARRAY &&
	    r->element[0]->elements && r->element[0]->element[0]->type == REDIS_REPLY_STRING) {
		const char *id = r->element[0]->element[0]->str;
		snprintf(st->oldest_entry, sizeof(st->oldest_entry), "%s", id);
		long long age = now_ms() - strtoll(id, NULL, 10);
		st->oldest_entry_age_ms = age < 0 ? 0 : age;
	}
	freeReplyObject(r);
	return 0;
}

/* One XINFO GROUPS entry, if it is our group: pending, last delivered, lag. */
static void group_entry(struct status *st, const redisReply *g, const char *group)
{
	const redisReply *name = field(g, "name");
	if (!name || name->type != REDIS_REPLY_STRING || strcmp(name->str, group))
		return;
	st->group_exists = true;
	st->pending = as_int(field(g, "pending"), 0);
	const redisReply *ld = field(g, "last-delivered-id");
	if (ld && ld->type == REDIS_REPLY_STRING)
		snprintf(st->last_delivered, sizeof(st->last_delivered), "%s", ld->str);
	st->entries_read = as_int(field(g, "entries-read"), -1);
	const redisReply *lag = field(g, "lag");
	if (lag && lag->type == REDIS_REPLY_INTEGER) {
		st->lag = lag->integer;
		st->lag_exact = true;
	} else {
		/* Redis < 7 or an unknown lag: the worker XDELs finished
		 * entries, so the stream is backlog + pending. */
		st->lag = st->xlen - st->pending;
		if (st->lag < 0)
			st->lag = 0;
	}
}

/* The consumer group (XINFO GROUPS) and its consumers (XINFO CONSUMERS). */
static int gather_group(struct rq_sync *c, struct status *st, const struct status_keys *sk)
{
	/* XINFO GROUPS fails with "no such key" when the stream does not exist yet. */
	const char *a[] = { "XINFO", "GROUPS", sk->jobs };
	redisReply *r = rq_sync_cmdv(c, 3, a, st->redis_err, sizeof(st->redis_err));
	if (!r)
		return -1;
	st->pending = 0;
	st->lag = st->xlen;
	if (r->type == REDIS_REPLY_ARRAY)
		for (size_t i = 0; i < r->elements; i++)
			group_entry(st, r->element[i], sk->group);
	freeReplyObject(r);
	if (!st->group_exists)
		return 0;
	const char *b[] = { "XINFO", "CONSUMERS", sk->jobs, sk->group };
	if (!(r = cmd(c, st, 4, b)))
		return -1;
	if (r->type == REDIS_REPLY_ARRAY && r->elements) {
		st->consumers = xcalloc(r->elements, sizeof(*st->consumers));
		for (size_t i = 0; i < r->elements; i++) {
			const redisReply *e = r->element[i];
			const redisReply *name = field(e, "name");
			if (!name || name->type != REDIS_REPLY_STRING)
				continue;
			struct consumer *k = &st->consumers[st->nconsumers++];
			k->name = xstrdup(name->str);
			k->pending = as_int(field(e, "pending"), 0);
			k->idle_ms = as_int(field(e, "idle"), -1);
			k->inactive_ms = as_int(field(e, "inactive"), -1);
		}
	}
	freeReplyObject(r);
	return 0;
}

/* The replicas' heartbeats (opsctl_heartbeat): each consumer's last_seen_ms, and how long
 * heartbeats have been written at all, by Redis's own clock. */
static int gather_heartbeats(struct rq_sync *c, struct status *st, const struct status_keys *sk)
{
	const char *t[] = { "TIME" };
	redisReply *r = cmd(c, st, 1, t);
	if (!r)
		return -1;
	long long now = -1;
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_STRING)
		now = strtoll(r->element[0]->str, NULL, 10) * 1000 + strtoll(r->element[1]->str, NULL, 10) / 1000;
	freeReplyObject(r);
	st->heartbeats_now_ms = now;
	char since[600];
	snprintf(since, sizeof since, "%s:since", sk->heartbeats);
	const char *g[] = { "GET", since };
	if (!(r = cmd(c, st, 2, g)))
		return -1;
	st->heartbeats_age_ms = now >= 0 && r->type == REDIS_REPLY_STRING ? now - strtoll(r->str, NULL, 10) : -1;
	freeReplyObject(r);
	for (size_t i = 0; i < st->nconsumers; i++) {
		struct consumer *k = &st->consumers[i];
		const char *h[] = { "HGET", sk->heartbeats, k->name };
		if (!(r = cmd(c, st, 3, h)))
			return -1;
		k->last_seen_ms = now >= 0 && r->type == REDIS_REPLY_STRING ? now - strtoll(r->str, NULL, 10) : -1;
		/* "<ms> <version>" (opsctl_heartbeat); older workers wrote the time alone */
		const char *sp = r->type == REDIS_REPLY_STRING ? strchr(r->str, ' ') : NULL;
		snprintf(k->version, sizeof k->version, "%s", sp ? sp + 1 : "");
		freeReplyObject(r);
	}
	return 0;
}

/* --prune: consumers that hold nothing and are provably gone (a stopped replica, e.g. a
 * deleted Kubernetes pod). Idleness alone proves nothing: below Redis 7.2 a live worker
 * that finds no job keeps a growing IDLE and there is no INACTIVE. So a consumer goes only
 * when, besides no pending entry and idle (inactive where Redis has it) at least the
 * threshold, its heartbeat is older than max(threshold, OPSCTL_HEARTBEAT_STALE_MS) — or it
 * has none while heartbeats have been written for that long (a worker that stopped before
 * its first one). Where no heartbeat was ever written (no worker of this version has run
 * against this Redis) nothing can be proven and idleness decides, as it did before
 * heartbeats. Stale heartbeats of consumers no longer in the group are deleted too. */
static int prune_consumers(struct rq_sync *c, struct status *st, const struct status_keys *sk)
{
	if (st->prune_idle_ms < 0)
		return 0;
	long long stale = st->prune_idle_ms > OPSCTL_HEARTBEAT_STALE_MS ? st->prune_idle_ms
	                                                                 : OPSCTL_HEARTBEAT_STALE_MS;
	for (size_t i = 0; i < st->nconsumers; i++) {
		struct consumer *k = &st->consumers[i];
		long long idle = k->inactive_ms >= 0 ? k->inactive_ms : k->idle_ms;
		if (k->pending || idle < st->prune_idle_ms)
			continue;
		if (k->last_seen_ms >= 0 ? k->last_seen_ms < stale
		                         : st->heartbeats_age_ms >= 0 && st->heartbeats_age_ms < stale)
			continue;
		const char *a[] = { "XGROUP", "DELCONSUMER", sk->jobs, sk->group, k->name };
		redisReply *r = cmd(c, st, 5, a);
		if (!r)
			return -1;
		freeReplyObject(r);
		const char *h[] = { "HDEL", sk->heartbeats, k->name };
		if (!(r = cmd(c, st, 3, h)))
			return -1;
		freeReplyObject(r);
		k->pruned = true;
		st->pruned++;
	}
	/* Heartbeats of consumers that left the group (a clean exit deletes its own) */
	const char *all[] = { "HGETALL", sk->heartbeats };
	redisReply *r = cmd(c, st, 2, all);
	if (!r)
		return -1;
	long long now = st->heartbeats_now_ms;
	for (size_t i = 0; now >= 0 && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
		const redisReply *n = r->element[i], *v = r->element[i + 1];
		if (n->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
		    now - strtoll(v->str, NULL, 10) < stale)
			continue;
		bool member = false;
		for (size_t j = 0; j < st->nconsumers && !member; j++)
			member = !st->consumers[j].pruned && !strcmp(st->consumers[j].name, n->str);
		if (member)
			continue;
		const char *h[] = { "HDEL", sk->heartbeats, n->str };
		redisReply *d = cmd(c, st, 3, h);
		if (!d)
			break;
		freeReplyObject(d);
	}
	freeReplyObject(r);
	return 0;
}

/* The delayed set (size, next due) and the dead-letter stream's length. */
static int gather_delayed_dead(struct rq_sync *c, struct status *st, const struct status_keys *sk)
{
	const char *z[] = { "ZCARD", sk->delayed };
	if (gather_int(c, st, 2, z, &st->delayed) < 0)
		return -1;
	const char *a[] = { "ZRANGE", sk->delayed, "0", "0", "WITHSCORES" };
	redisReply *r = cmd(c, st, 5, a);
	if (!r)
		return -1;
	st->next_delayed_due_ms = -1;
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING) {
		long long due = (long long)strtod(r->element[1]->str, NULL) - now_ms();
		st->next_delayed_due_ms = due < 0 ? 0 : due;
	}
	freeReplyObject(r);
	/* By cause: rate-limit deferrals, challenge-pause holds, retries and image waits share
	 * the set. */
	const char *e[] = { "EVAL", rl_lua_delayed_causes, "1", sk->delayed };
	r = cmd(c, st, 4, e);
	if (!r)
		return -1;
	for (size_t i = 0; i < 4; i++)
		st->delayed_by[i] = r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
		                    r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : -1;
	freeReplyObject(r);
	const char *d[] = { "XLEN", sk->dead };
	return gather_int(c, st, 2, d, &st->dead);
}

static int redis_gather(const struct config *cfg, struct status *st)
{
	struct status_keys sk;
	if (status_keys(cfg, &sk, st->redis_err, sizeof(st->redis_err)) < 0)
		return -1;
	struct rq_sync *c = status_redis_open(cfg, &sk, st->redis_err, sizeof(st->redis_err));
	if (!c)
		return -1;
	const char *b[] = { "XLEN", sk.bulk };
	int rc = gather_int(c, st, 2, b, &st->bulk);
	const char *jlv[] = { "XLEN", sk.judge_lane };
	if (rc == 0)
		rc = gather_int(c, st, 2, jlv, &st->judge_lane);
	if (rc == 0)
		rc = gather_pause(c, st, &sk);
	if (rc == 0)
		rc = gather_stream(c, st, &sk);
	if (rc == 0)
		rc = gather_group(c, st, &sk);
	if (rc == 0)
		rc = gather_heartbeats(c, st, &sk);
	if (rc == 0)
		rc = prune_consumers(c, st, &sk);
	if (rc == 0)
		rc = gather_delayed_dead(c, st, &sk);
	st->redis_ok = rc == 0;
	rq_sync_close(c);
	return rc;
}

/* ---- PostgreSQL ---- */

static PGresult *query(PGconn *pg, struct status *st, const char *sql)
{
	PGresult *res = PQexec(pg, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		const char *m = PQresultErrorMessage(res);
		snprintf(st->pg_err, sizeof(st->pg_err), "%s", m && *m ? m : PQerrorMessage(pg));
		st->pg_err[strcspn(st->pg_err, "\n")] = '\0';
		PQclear(res);
		return NULL;
	}
	return res;
}

/* Long on purpose: ONE read-only transaction runs the three queries in turn, each filling its
 * part of *st with its own error path; split up, the connection and the transaction's state
 * would have to travel between helpers, and the single exit that ends the transaction (for
 * PgBouncer) would be harder to see. */
static int pg_gather(const struct config *cfg, struct status *st)
{
	const char *kw[] = { "dbname", "connect_timeout", "application_name", NULL };
	const char *val[] = { cfg->database_url, "5", "arbiter-status", NULL };
	PGresult *res;
	int rc = -1;
	char why[160];
	if (redact_check_conn(cfg->database_url, why, sizeof why) < 0) {
		snprintf(st->pg_err, sizeof(st->pg_err), "invalid database URL: %s", why);
		return -1;
	}
	PGconn *pg = PQconnectdbParams(kw, val, 1);

	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		snprintf(st->pg_err, sizeof(st->pg_err), "connect: %s",
		         pg ? PQerrorMessage(pg) : "out of memory");
		st->pg_err[strcspn(st->pg_err, "\n")] = '\0';
		goto out;
	}
	/* Read-only, and never wait long on a lock or a slow scan. Everything runs in ONE
	 * read-only transaction with transaction-scoped settings: a session-level SET would
	 * stay on a pooled server connection behind PgBouncer (transaction pooling) and
	 * make the API server's next inserts fail with "read-only transaction". */
	res = PQexec(pg, "BEGIN READ ONLY");
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		snprintf(st->pg_err, sizeof(st->pg_err), "BEGIN READ ONLY: %s", PQerrorMessage(pg));
		st->pg_err[strcspn(st->pg_err, "\n")] = '\0';
		PQclear(res);
		goto out;
	}
	PQclear(res);
	PQclear(PQexec(pg, "SET LOCAL statement_timeout = '10s'"));

	/* The schema first, as the workers' /readyz sees it: without it nothing below exists. */
	res = PQexec(pg, "SELECT coalesce(max(version), 0) FROM arbiter_migrations");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (state && !strcmp(state, "42P01"))
			snprintf(st->pg_err, sizeof(st->pg_err), "the database has no arbiter schema "
			         "(no arbiter_migrations table): run `arbiter migrate`");
		else
			snprintf(st->pg_err, sizeof(st->pg_err), "reading the schema version: %s",
			         PQresultErrorMessage(res));
		st->pg_err[strcspn(st->pg_err, "\n")] = '\0';
		st->schema_version = 0;
		PQclear(res);
		goto out;
	}
	st->schema_version = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);

	/* From 009 on, the counters kept by triggers (sql/009_console.sql): a few rows, where
	 * the partial index fetches every unfinished row (a backlog of 100,000 read them all). */
	if (!(res = query(pg, st, st->schema_version >= 9
	        ? "SELECT coalesce(sum(n) FILTER (WHERE status = 'queued'), 0),"
	          "       coalesce(sum(n) FILTER (WHERE status = 'evaluating'), 0)"
	          "  FROM submission_status_counts WHERE status IN ('queued', 'evaluating')"
	        : "SELECT count(*) FILTER (WHERE status = 'queued'),"
	          "       count(*) FILTER (WHERE status = 'evaluating')"
	          "  FROM submissions WHERE status IN ('queued', 'evaluating')")))
		goto out;
	st->queued = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	st->evaluating = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);

	if (!(res = query(pg, st,
	        "SELECT id, extract(epoch FROM now() - submitted_at)"
	        "  FROM submissions WHERE status IN ('queued', 'evaluating') AND status = 'queued'"
	        " ORDER BY submitted_at LIMIT 1")))
		goto out;
	if (PQntuples(res) == 1) {
		snprintf(st->oldest_queued_id, sizeof(st->oldest_queued_id), "%s", PQgetvalue(res, 0, 0));
		st->oldest_queued_age_s = strtod(PQgetvalue(res, 0, 1), NULL);
	}
	PQclear(res);

	if (!(res = query(pg, st,
	        "SELECT evaluator, count(*),"
	        "       count(*) FILTER (WHERE result = 'win'),"
	        "       count(*) FILTER (WHERE result = 'draw'),"
	        "       count(*) FILTER (WHERE result = 'loss'),"
	        "       coalesce(avg(score), 0)"
	        "  FROM evaluation_results WHERE completed_at > now() - interval '1 hour'"
	        " GROUP BY evaluator ORDER BY evaluator")))
		goto out;
	st->nevals = (size_t)PQntuples(res);
	st->evals = st->nevals ? xcalloc(st->nevals, sizeof(*st->evals)) : NULL;
	for (size_t i = 0; i < st->nevals; i++) {
		struct evaluator_row *e = &st->evals[i];
		e->name = xstrdup(PQgetvalue(res, (int)i, 0));
		e->results = strtoll(PQgetvalue(res, (int)i, 1), NULL, 10);
		e->wins = strtoll(PQgetvalue(res, (int)i, 2), NULL, 10);
		e->draws = strtoll(PQgetvalue(res, (int)i, 3), NULL, 10);
		e->losses = strtoll(PQgetvalue(res, (int)i, 4), NULL, 10);
		e->avg_score = strtod(PQgetvalue(res, (int)i, 5), NULL);
	}
	PQclear(res);
	st->pg_ok = true;
	rc = 0;
out:
	if (pg) {
		/* End the transaction explicitly (also after an error), so a pooler gets
		 * its server connection back clean. */
		if (PQstatus(pg) == CONNECTION_OK && PQtransactionStatus(pg) != PQTRANS_IDLE)
			PQclear(PQexec(pg, "ROLLBACK"));
		PQfinish(pg);
	}
	return rc;
}

/* Frees what the gatherers allocated in *st (not st itself). */
static void status_free(struct status *st)
{
	for (size_t i = 0; i < st->nconsumers; i++)
		free(st->consumers[i].name);
	free(st->consumers);
	for (size_t i = 0; i < st->npaused_challenges; i++)
		free(st->paused_challenges[i]);
	free(st->paused_challenges);
	for (size_t i = 0; i < st->nevals; i++)
		free(st->evals[i].name);
	free(st->evals);
}

/* ---- output ---- */

static void fmt_duration(char *buf, size_t n, double secs)
{
	if (secs < 0)
		snprintf(buf, n, "-");
	else if (secs < 60)
		snprintf(buf, n, "%.1fs", secs);
	else if (secs < 3600)
		snprintf(buf, n, "%dm%02ds", (int)(secs / 60), (int)secs % 60);
	else if (secs < 86400)
		snprintf(buf, n, "%dh%02dm", (int)(secs / 3600), (int)(secs / 60) % 60);
	else
		snprintf(buf, n, "%dd%02dh", (int)(secs / 86400), (int)(secs / 3600) % 24);
}

/* The pause switches (human form). */
static void human_pause(const struct status *st)
{
	if (st->paused) {
		time_t t = (time_t)(st->paused_since_ms / 1000);
		struct tm tm;
		char when[32] = "?";
		if (st->paused_since_ms > 0 && gmtime_r(&t, &tm))
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("  %-28s yes, since %s (arbiter resume)\n", "PAUSED", when);
	} else {
		printf("  %-28s no\n", "paused");
	}
	if (st->npaused_challenges) {
		printf("  %-28s", "paused challenges");
		for (size_t i = 0; i < st->npaused_challenges; i++)
			printf("%s%s", i ? ", " : " ", st->paused_challenges[i]);
		printf("\n");
	}
}

/* The consumers table (human form). */
static void human_consumers(const struct status *st)
{
	char d1[32], d2[32];
	if (st->prune_idle_ms >= 0)
		printf("  %-28s %zu (no pending entries, idle >= %lld ms, no heartbeat for as long)\n",
		       "consumers pruned", st->pruned, st->prune_idle_ms);
	if (!st->nconsumers)
		return;
	char d3[32];
	printf("\n  %-36s %8s %10s %10s %10s  %s\n", "CONSUMER", "PENDING", "IDLE", "INACTIVE", "LAST SEEN",
	       "VERSION");
	for (size_t i = 0; i < st->nconsumers; i++) {
		const struct consumer *k = &st->consumers[i];
		fmt_duration(d1, sizeof(d1), k->idle_ms < 0 ? -1 : k->idle_ms / 1000.0);
		fmt_duration(d2, sizeof(d2), k->inactive_ms < 0 ? -1 : k->inactive_ms / 1000.0);
		fmt_duration(d3, sizeof(d3), k->last_seen_ms < 0 ? -1 : k->last_seen_ms / 1000.0);
		printf("  %-36s %8lld %10s %10s %10s  %s%s\n", k->name, k->pending, d1, d2, d3,
		       k->version[0] ? k->version : "-", k->pruned ? "  (pruned)" : "");
	}
}

/* The Redis section (human form). */
static void human_redis(const struct status *st, const char *redis_url)
{
	char d1[32];
	printf("Redis %s\n", redis_url);
	if (!st->redis_ok) {
		printf("  unavailable: %s\n", st->redis_err);
		return;
	}
	fmt_duration(d1, sizeof(d1), st->oldest_entry_age_ms < 0 ? -1 : st->oldest_entry_age_ms / 1000.0);
	printf("  %-28s %s (key style %s)\n", "stream", st->stream, st->style);
	printf("  %-28s %lld", "stream length", st->xlen);
	if (st->oldest_entry_age_ms >= 0)
		printf("  (oldest entry %s old)", d1);
	printf("\n");
	if (st->other_len > 0)
		printf("  %-28s %s holds %lld entr%s that no worker reads: producers XADD to the "
		       "wrong name (make them use %s, or set ARBITER_REDIS_KEYS=%s everywhere)\n",
		       "WARNING other-style stream", st->other_stream, st->other_len,
		       st->other_len == 1 ? "y" : "ies", st->stream,
		       strcmp(st->style, "plain") ? "plain" : "tagged");
	if (st->group_exists) {
		printf("  %-28s %lld%s\n", "consumer group lag", st->lag,
		       st->lag_exact ? "" : " (estimated: length - pending)");
		printf("  %-28s %lld\n", "pending (delivered, unacked)", st->pending);
	} else {
		printf("  %-28s not created yet (no worker has started)\n", "consumer group");
	}
	printf("  %-28s %lld%s\n", "bulk lane (re-evaluations)", st->bulk,
	       st->bulk ? "  (fed to the stream as live jobs leave room)" : "");
	printf("  %-28s %lld%s\n", "judge lane (judged jobs)", st->judge_lane,
	       st->judge_lane ? "  (read by the workers as judge slots free up)" : "");
	fmt_duration(d1, sizeof(d1), st->next_delayed_due_ms / 1000.0);
	printf("  %-28s %lld", "delayed", st->delayed);
	if (st->next_delayed_due_ms >= 0)
		printf("  (next due in %s)", d1);
	printf("\n");
	static const char *const why[] = { "rate limit", "paused challenge", "retry (failing job)",
	                                   "image (not imported yet)" };
	for (size_t i = 0; i < 4; i++)
		if (st->delayed_by[i] >= 0)
			printf("    %-26s %lld\n", why[i], st->delayed_by[i]);
	printf("  %-28s %lld%s\n", "dead letters", st->dead,
	       st->dead ? "  (scripts/dlq list)" : "");
	human_pause(st);
	human_consumers(st);
}

/* The PostgreSQL section (human form). */
static void human_pg(const struct status *st, const char *db_url)
{
	char d1[32];
	printf("\nPostgreSQL %s\n", db_url);
	if (!st->pg_ok) {
		printf("  unavailable: %s\n", st->pg_err);
		return;
	}
	if (st->schema_version >= migrate_latest())
		printf("  %-28s %d (current)\n", "schema version", st->schema_version);
	else
		printf("  %-28s %d, this binary needs %d: run `arbiter migrate` (until then no worker "
		       "of this version is ready or takes jobs)\n", "SCHEMA BEHIND",
		       st->schema_version, migrate_latest());
	printf("  %-28s %lld\n", "submissions queued", st->queued);
	printf("  %-28s %lld\n", "submissions evaluating", st->evaluating);
	if (st->oldest_queued_id[0]) {
		fmt_duration(d1, sizeof(d1), st->oldest_queued_age_s);
		printf("  %-28s %s  (%s old)\n", "oldest queued", st->oldest_queued_id, d1);
	} else {
		printf("  %-28s none\n", "oldest queued");
	}
	printf("\n  evaluations in the last hour:\n");
	if (!st->nevals) {
		printf("    none\n");
		return;
	}
	printf("    %-16s %8s %6s %6s %6s %10s\n", "EVALUATOR", "RESULTS", "WIN", "DRAW", "LOSS",
	       "AVG SCORE");
	for (size_t i = 0; i < st->nevals; i++) {
		const struct evaluator_row *e = &st->evals[i];
		printf("    %-16s %8lld %6lld %6lld %6lld %10.1f\n", e->name, e->results, e->wins,
		       e->draws, e->losses, e->avg_score);
	}
}

static void print_human(const struct config *cfg, const struct status *st, const char *redis_url,
                        const char *db_url)
{
	printf("arbiter status (prefix %s)\n\n", cfg->prefix);
	human_redis(st, redis_url);
	human_pg(st, db_url);
}

/* The consumers (JSON form). */
static json_t *json_consumers(const struct status *st)
{
	json_t *cs = json_array();
	for (size_t i = 0; i < st->nconsumers; i++) {
		const struct consumer *k = &st->consumers[i];
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(k->name));
		json_object_set_new(o, "pending", json_integer(k->pending));
		json_object_set_new(o, "idle_ms", k->idle_ms >= 0 ? json_integer(k->idle_ms) : json_null());
		json_object_set_new(o, "inactive_ms",
		                    k->inactive_ms >= 0 ? json_integer(k->inactive_ms) : json_null());
		json_object_set_new(o, "last_seen_ms",
		                    k->last_seen_ms >= 0 ? json_integer(k->last_seen_ms) : json_null());
		json_object_set_new(o, "version", k->version[0] ? json_string(k->version) : json_null());
		json_object_set_new(o, "pruned", json_boolean(k->pruned));
		json_array_append_new(cs, o);
	}
	return cs;
}

/* The Redis section (JSON form). */
static json_t *json_redis(const struct status *st, const char *redis_url)
{
	json_t *redis = json_object();
	json_object_set_new(redis, "url", json_string(redis_url));
	json_object_set_new(redis, "ok", json_boolean(st->redis_ok));
	if (!st->redis_ok) {
		json_object_set_new(redis, "error", json_string(st->redis_err));
		return redis;
	}
	json_object_set_new(redis, "stream", json_string(st->stream));
	json_object_set_new(redis, "key_style", json_string(st->style ? st->style : ""));
	json_object_set_new(redis, "stream_length", json_integer(st->xlen));
	if (st->other_stream[0]) {
		json_object_set_new(redis, "other_style_stream", json_string(st->other_stream));
		json_object_set_new(redis, "other_style_stream_length",
		                    st->other_len >= 0 ? json_integer(st->other_len) : json_null());
	}
	json_object_set_new(redis, "oldest_entry_id",
	                    st->oldest_entry[0] ? json_string(st->oldest_entry) : json_null());
	json_object_set_new(redis, "oldest_entry_age_ms",
	                    st->oldest_entry_age_ms >= 0 ? json_integer(st->oldest_entry_age_ms) : json_null());
	json_object_set_new(redis, "group_exists", json_boolean(st->group_exists));
	json_object_set_new(redis, "lag", json_integer(st->lag));
	json_object_set_new(redis, "lag_exact", json_boolean(st->lag_exact));
	json_object_set_new(redis, "pending", json_integer(st->pending));
	json_object_set_new(redis, "last_delivered_id",
	                    st->last_delivered[0] ? json_string(st->last_delivered) : json_null());
	json_object_set_new(redis, "delayed", json_integer(st->delayed));
	json_t *by = json_object();
	static const char *const cause[] = { "rate_limit", "pause", "retry", "image" };
	for (size_t i = 0; i < 4; i++)
		json_object_set_new(by, cause[i], st->delayed_by[i] >= 0 ?
		                    json_integer(st->delayed_by[i]) : json_null());
	json_object_set_new(redis, "delayed_by_cause", by);
	json_object_set_new(redis, "bulk_lane", json_integer(st->bulk));
	json_object_set_new(redis, "judge_lane", json_integer(st->judge_lane));
	json_object_set_new(redis, "next_delayed_due_ms",
	                    st->next_delayed_due_ms >= 0 ? json_integer(st->next_delayed_due_ms) : json_null());
	json_object_set_new(redis, "dead", json_integer(st->dead));
	json_object_set_new(redis, "consumers", json_consumers(st));
	json_object_set_new(redis, "paused", json_boolean(st->paused));
	json_object_set_new(redis, "paused_since_ms",
	                    st->paused ? json_integer(st->paused_since_ms) : json_null());
	json_t *pc = json_array();
	for (size_t i = 0; i < st->npaused_challenges; i++)
		json_array_append_new(pc, json_string(st->paused_challenges[i]));
	json_object_set_new(redis, "paused_challenges", pc);
	json_object_set_new(redis, "pruned", json_integer((json_int_t)st->pruned));
	return redis;
}

/* The PostgreSQL section (JSON form). */
static json_t *json_pg(const struct status *st, const char *db_url)
{
	json_t *pg = json_object();
	json_object_set_new(pg, "url", json_string(db_url));
	json_object_set_new(pg, "ok", json_boolean(st->pg_ok));
	json_object_set_new(pg, "schema_version",
	                    st->schema_version >= 0 ? json_integer(st->schema_version) : json_null());
	json_object_set_new(pg, "schema_needed", json_integer(migrate_latest()));
	json_object_set_new(pg, "schema_current", json_boolean(st->schema_version >= migrate_latest()));
	if (!st->pg_ok) {
		json_object_set_new(pg, "error", json_string(st->pg_err));
		return pg;
	}
	json_object_set_new(pg, "queued", json_integer(st->queued));
	json_object_set_new(pg, "evaluating", json_integer(st->evaluating));
	if (st->oldest_queued_id[0]) {
		json_t *o = json_object();
		json_object_set_new(o, "id", json_string(st->oldest_queued_id));
		json_object_set_new(o, "age_seconds", json_real(st->oldest_queued_age_s));
		json_object_set_new(pg, "oldest_queued", o);
	} else {
		json_object_set_new(pg, "oldest_queued", json_null());
	}
	json_t *ev = json_object();
	for (size_t i = 0; i < st->nevals; i++) {
		const struct evaluator_row *e = &st->evals[i];
		json_t *o = json_object();
		json_object_set_new(o, "results", json_integer(e->results));
		json_object_set_new(o, "win", json_integer(e->wins));
		json_object_set_new(o, "draw", json_integer(e->draws));
		json_object_set_new(o, "loss", json_integer(e->losses));
		json_object_set_new(o, "avg_score", json_real(e->avg_score));
		json_object_set_new(ev, e->name, o);
	}
	json_object_set_new(pg, "last_hour", ev);
	return pg;
}

/* The --json document. */
static json_t *status_root(const struct config *cfg, const struct status *st, const char *redis_url,
                           const char *db_url)
{
	json_t *root = json_object();
	json_object_set_new(root, "prefix", json_string(cfg->prefix));
	json_object_set_new(root, "redis", json_redis(st, redis_url));
	json_object_set_new(root, "postgres", json_pg(st, db_url));
	return root;
}

static void print_json(const struct config *cfg, const struct status *st, const char *redis_url,
                       const char *db_url)
{
	json_t *root = status_root(cfg, st, redis_url, db_url);
	char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
	printf("%s\n", s);
	free(s);
	json_decref(root);
}

static void status_usage(FILE *f)
{
	fprintf(f, "usage: arbiter status [--json] [--prune [--prune-idle DUR]] [--config FILE]\n"
	           "                      [--redis-url URL] [--database-url URL] [--prefix P]\n"
	           "  Queue and database overview (Redis stream, consumer group, delayed and\n"
	           "  dead-letter jobs, pause switches; queued submissions and last-hour results).\n"
	           "  --prune removes consumers that hold no pending entry and were idle for\n"
	           "  --prune-idle (default 10m; units ms, s, m, h), e.g. of deleted pods.\n"
	           "  Exit 0, or 1 when Redis or PostgreSQL could not be read.\n"
	           "  Takes the same settings as `arbiter worker` (see arbiter worker --help).\n");
}

int cmd_status(int argc, char **argv)
{
	bool json = false;
	char **args = xcalloc((size_t)argc + 1, sizeof(char *));
	int nargs = 0;
	char err[512];
	struct config cfg;
	struct status st;
	int rc;

	long long prune_idle_ms = -1;
	bool prune = false;
	for (int i = 0; i < argc; i++) {
		if (i > 0 && !strcmp(argv[i], "--json")) {
			json = true;
		} else if (i > 0 && !strcmp(argv[i], "--prune")) {
			prune = true;
		} else if (i > 0 && (!strcmp(argv[i], "--prune-idle") || !strncmp(argv[i], "--prune-idle=", 13))) {
			const char *v = argv[i][12] == '=' ? argv[i] + 13 : (i + 1 < argc ? argv[++i] : "");
			char why[128];
			if (config_parse_duration_ms(v, &prune_idle_ms, why, sizeof why) < 0) {
				snprintf(err, sizeof err, "--prune-idle: '%s' %s", v, why);
				config_report("status", err);
				free(args);
				return 2;
			}
			prune = true;
		} else if (i > 0 && (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))) {
			status_usage(stdout);
			free(args);
			return 0;
		} else {
			args[nargs++] = argv[i];
		}
	}
	rc = config_load(nargs, args, &cfg, err, sizeof(err));
	free(args);
	if (rc != 0) {
		if (rc < 0)
			config_report("status", err);
		return rc < 0 ? 2 : 0;
	}
	if (config_validate(&cfg, err, sizeof err) < 0) {
		config_report("status", err);
		config_free(&cfg);
		return 2;
	}

	memset(&st, 0, sizeof(st));
	st.schema_version = -1;
	st.prune_idle_ms = prune ? (prune_idle_ms >= 0 ? prune_idle_ms : 600000) : -1;
	redis_gather(&cfg, &st);
	pg_gather(&cfg, &st);

	char *redis_url = log_redact_url(cfg.redis_url);
	char *db_url = log_redact_url(cfg.database_url);
	if (json)
		print_json(&cfg, &st, redis_url, db_url);
	else
		print_human(&cfg, &st, redis_url, db_url);
	fflush(stdout);
	free(redis_url);
	free(db_url);

	/* A schema older than this binary: the workers are not ready (/readyz), nor is this. */
	rc = st.redis_ok && st.pg_ok && st.schema_version >= migrate_latest() ? 0 : 1;
	status_free(&st);
	config_free(&cfg);
	return rc;
}

json_t *status_document(const struct config *cfg, int *code)
{
	struct status st;
	memset(&st, 0, sizeof(st));
	st.schema_version = -1;
	st.prune_idle_ms = -1;
	redis_gather(cfg, &st);
	pg_gather(cfg, &st);
	char *redis_url = log_redact_url(cfg->redis_url);
	char *db_url = log_redact_url(cfg->database_url);
	json_t *root = status_root(cfg, &st, redis_url, db_url);
	free(redis_url);
	free(db_url);
	if (code)
		*code = st.redis_ok && st.pg_ok && st.schema_version >= migrate_latest() ? 0 : 1;
	status_free(&st);
	return root;
}

int status_pause_set(const struct config *cfg, bool resume, const char *slug, bool all,
                     char *msg, size_t msglen)
{
	struct status_keys sk;
	char err[768], now[32];
	if (status_keys(cfg, &sk, err, sizeof err) < 0) {
		snprintf(msg, msglen, "%s", err);
		return 2;
	}
	struct rq_sync *c = status_redis_open(cfg, &sk, err, sizeof err);
	if (!c) {
		snprintf(msg, msglen, "Redis: %s", err);
		return 1;
	}
	snprintf(now, sizeof now, "%lld", now_ms());
	const char *argv[3] = { "DEL", sk.paused, NULL };
	int argc = 2;
	if (!resume && !slug) {
		argv[0] = "SET";
		argv[2] = now;
		argc = 3;
	} else if (slug) {
		argv[0] = resume ? "SREM" : "SADD";
		argv[1] = sk.pausedc;
		argv[2] = slug;
		argc = 3;
	} else if (all) {
		argv[2] = sk.pausedc;   /* DEL both */
		argc = 3;
	}
	redisReply *r = rq_sync_cmdv(c, argc, argv, err, sizeof err);
	int rc = 0;
	if (!r || r->type == REDIS_REPLY_ERROR) {
		snprintf(msg, msglen, "Redis: %s", r ? r->str : err);
		rc = 1;
	} else if (slug) {
		snprintf(msg, msglen, "%s challenge %s (prefix %s)%s", resume ? "resumed" : "paused", slug,
		         cfg->prefix, r->type == REDIS_REPLY_INTEGER && r->integer == 0
		             ? (resume ? ": it was not paused" : ": it was paused already") : "");
	} else {
		snprintf(msg, msglen, "%s every replica (prefix %s)", resume ? "resumed" : "paused",
		         cfg->prefix);
	}
	if (r)
		freeReplyObject(r);
	rq_sync_close(c);
	return rc;
}

/* `arbiter pause --challenge SLUG`: whether a challenge has that slug (a typo would pause
 * nothing, silently). Returns 0 it exists, 2 it does not (message printed), 1 the database
 * could not answer (message printed). */
static int challenge_exists(const struct config *cfg, const char *slug)
{
	const char *kw[] = { "dbname", "connect_timeout", "application_name", NULL };
	const char *val[] = { cfg->database_url, "5", "arbiter-pause", NULL };
	char *shown = log_redact_url(cfg->database_url);
	int rc = 1;
	PGconn *pg = PQconnectdbParams(kw, val, 1);
	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		const char *e = pg ? PQerrorMessage(pg) : "out of memory";
		fprintf(stderr, "arbiter pause: cannot check that challenge '%s' exists: database %s: "
		        "%.*s (--force pauses it unchecked)\n", slug, shown, (int)strcspn(e, "\n"), e);
		goto out;
	}
	const char *params[] = { slug };
	PGresult *res = PQexecParams(pg, "SELECT 1 FROM challenges WHERE slug = $1", 1, NULL,
	                             params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		const char *e = PQresultErrorMessage(res);
		fprintf(stderr, "arbiter pause: cannot check that challenge '%s' exists: %.*s "
		        "(--force pauses it unchecked)\n", slug, (int)strcspn(e, "\n"), e);
	} else if (PQntuples(res) == 0) {
		fprintf(stderr, "arbiter pause: no challenge has the slug '%s' (database %s): nothing "
		        "paused. Check the slug, or pass --force to pause a challenge created later\n",
		        slug, shown);
		rc = 2;
	} else {
		rc = 0;
	}
	PQclear(res);
out:
	PQfinish(pg);
	free(shown);
	return rc;
}

/* `arbiter pause|resume [--challenge SLUG [--force]] [--all] [settings]`. */
/* The Redis side of pause/resume (status_pause_set), printed as the commands print it.
 * Returns the exit status (0, 1 Redis failed, 2 bad settings). */
static int pause_apply(const struct config *cfg, const char *cmdname, bool resume,
                       const char *slug, bool all)
{
	char msg[1024];
	int rc = status_pause_set(cfg, resume, slug, all, msg, sizeof msg);
	if (rc == 2)
		config_report(cmdname, msg);
	else if (rc)
		fprintf(stderr, "arbiter %s: %s\n", cmdname, msg);
	else
		printf("%s\n", msg);
	return rc;
}

/* `arbiter pause|resume [--challenge SLUG] [--all] [settings]`. */
static int pause_resume(int argc, char **argv, bool resume)
{
	const char *cmdname = resume ? "resume" : "pause";
	char **args = xcalloc((size_t)argc + 1, sizeof(char *));
	int nargs = 0, rc;
	const char *slug = NULL;
	bool all = false, force = false;
	char err[512];
	struct config cfg;

	for (int i = 0; i < argc; i++) {
		if (i > 0 && !strcmp(argv[i], "--challenge")) {
			if (i + 1 >= argc || !argv[i + 1][0]) {
				fprintf(stderr, "arbiter %s: --challenge needs a slug\n", cmdname);
				free(args);
				return 2;
			}
			slug = argv[++i];
		} else if (i > 0 && !strncmp(argv[i], "--challenge=", 12) && argv[i][12]) {
			slug = argv[i] + 12;
		} else if (i > 0 && resume && !strcmp(argv[i], "--all")) {
			all = true;
		} else if (i > 0 && !resume && !strcmp(argv[i], "--force")) {
			force = true;
		} else if (i > 0 && (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))) {
			printf("usage: arbiter %s [--challenge SLUG%s]%s [--config FILE] [--redis-url URL] "
			       "[--prefix P]%s\n", cmdname, resume ? "" : " [--force]", resume ? " [--all]" : "",
			       resume ? "" : " [--database-url URL]");
			if (resume)
				printf("  Lifts the pause of every replica (or of one challenge; --all: the\n"
				       "  global pause and every challenge's). Honoured within a second.\n");
			else
				printf("  Every replica stops reading new jobs (with --challenge: holds back that\n"
				       "  challenge's jobs through the delayed set) within a second; work in\n"
				       "  flight finishes. Shown by arbiter status and the arbiter_paused metric.\n"
				       "  The slug must be a challenge's (checked in the database); --force\n"
				       "  pauses a slug no challenge has yet.\n");
			free(args);
			return 0;
		} else {
			args[nargs++] = argv[i];
		}
	}
	if (all && slug) {
		fprintf(stderr, "arbiter resume: give --challenge SLUG or --all, not both\n");
		free(args);
		return 2;
	}
	rc = config_load(nargs, args, &cfg, err, sizeof(err));
	free(args);
	if (rc != 0) {
		if (rc < 0)
			config_report(cmdname, err);
		return rc < 0 ? 2 : 0;
	}
	if (config_validate(&cfg, err, sizeof err) < 0) {
		config_report(cmdname, err);
		config_free(&cfg);
		return 2;
	}
	if (force && !slug) {
		fprintf(stderr, "arbiter pause: --force goes with --challenge SLUG\n");
		config_free(&cfg);
		return 2;
	}
	rc = !resume && slug && !force ? challenge_exists(&cfg, slug) : 0;
	if (rc == 0)
		rc = pause_apply(&cfg, cmdname, resume, slug, all);
	config_free(&cfg);
	return rc;
}

int cmd_pause(int argc, char **argv)
{
	return pause_resume(argc, argv, false);
}

int cmd_resume(int argc, char **argv)
{
	return pause_resume(argc, argv, true);
}

int cmd_metrics_names(int argc, char **argv)
{
	struct strbuf sb = { 0 };
	(void)argc;
	(void)argv;
	metrics_names(&sb);
	fputs(sb.buf ? sb.buf : "", stdout);
	strbuf_free(&sb);
	return 0;
}
