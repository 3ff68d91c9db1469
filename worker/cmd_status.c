/*
 * `arbiter status [--json] [settings]`: a one-shot view of the queue for
 * operators. From Redis: the jobs stream's length and oldest entry, the
 * consumer group's lag and pending count, pending entries and idle time per
 * consumer (XINFO CONSUMERS), the delayed (rate-limit) set and the
 * dead-letter stream. From PostgreSQL: queued/evaluating counts, the oldest
 * queued submission, and per-evaluator results of the last hour.
 *
 * This is a command-line tool, not the daemon: it uses blocking hiredis and
 * libpq with short timeouts. Settings come from config_load (flags >
 * ARBITER_* environment > --config file), like `arbiter worker`. Exit 0 when
 * both servers answered, 1 when one of them did not (what could be read is
 * still printed), 2 on a usage or configuration error.
 *
 * Also `arbiter metrics-names` (hidden): the metric family names the binary
 * exports, one per line, for the deployment tests.
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
#include "log.h"
#include "metrics.h"
#include "rq.h"
#include "rkeys.h"
#include "util.h"

#define STATUS_TIMEOUT_SECS 5

struct consumer {
	char *name;
	long long pending, idle_ms, inactive_ms;   /* inactive_ms -1 when Redis < 7.2 */
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
	long long xlen, lag, pending, delayed, dead, entries_read;
	bool group_exists, lag_exact;
	char last_delivered[64];
	char oldest_entry[64];
	long long oldest_entry_age_ms;               /* -1: empty stream */
	long long next_delayed_due_ms;               /* relative to now; -1: none */
	struct consumer *consumers;
	size_t nconsumers;
	/* PostgreSQL */
	bool pg_ok;
	char pg_err[256];
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

static redisReply *cmd(redisContext *c, struct status *st, int argc, const char **argv)
{
	redisReply *r = redisCommandArgv(c, argc, argv, NULL);
	if (!r) {
		snprintf(st->redis_err, sizeof(st->redis_err), "%s: %s", argv[0],
		         c->errstr[0] ? c->errstr : "no reply");
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
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

static int redis_gather(const struct config *cfg, struct status *st)
{
	struct rq_url u;
	redisContext *c;
	redisReply *r;
	struct timeval tv = { .tv_sec = STATUS_TIMEOUT_SECS };
	char jobs[512], dead[512], delayed[512], group[512];
	int rc = -1;

	if (rq_url_parse(cfg->redis_url, &u, st->redis_err, sizeof(st->redis_err)) < 0)
		return -1;
	if (u.tls || u.sentinel || u.cluster) {
		/* This command uses a plain blocking hiredis connection. */
		snprintf(st->redis_err, sizeof(st->redis_err), "arbiter status does not speak %s yet: "
		         "read the worker's /metrics (arbiter_stream_length, ...) instead",
		         u.sentinel ? "Sentinel" : u.cluster ? "Cluster" : "TLS");
		return -1;
	}
	c = u.path[0] ? redisConnectUnixWithTimeout(u.path, tv)
	              : redisConnectWithTimeout(u.host, u.port, tv);
	if (!c || c->err) {
		snprintf(st->redis_err, sizeof(st->redis_err), "connect: %s",
		         c ? c->errstr : "out of memory");
		goto out;
	}
	redisSetTimeout(c, tv);
	if (u.password[0]) {
		const char *a[] = { "AUTH", u.user, u.password };
		if (u.user[0])
			r = cmd(c, st, 3, a);
		else {
			const char *b[] = { "AUTH", u.password };
			r = cmd(c, st, 2, b);
		}
		if (!r)
			goto out;
		freeReplyObject(r);
	}
	if (u.db) {
		char db[16];
		snprintf(db, sizeof(db), "%d", u.db);
		const char *a[] = { "SELECT", db };
		if (!(r = cmd(c, st, 2, a)))
			goto out;
		freeReplyObject(r);
	}

	{
		/* Key names: rkeys.h. */
		struct rkeys k;
		char kerr[256];
		if (rkeys_init(&k, cfg->prefix, rkeys_style_for_url(cfg->redis_keys, cfg->redis_url), kerr, sizeof kerr) < 0) {
			snprintf(st->redis_err, sizeof(st->redis_err), "%s", kerr);
			goto out;
		}
		snprintf(jobs, sizeof(jobs), "%s", k.jobs);
		snprintf(dead, sizeof(dead), "%s", k.dead);
		snprintf(delayed, sizeof(delayed), "%s", k.delayed);
		snprintf(group, sizeof(group), "%s", k.group);
		rkeys_free(&k);
	}

	{
		const char *a[] = { "XLEN", jobs };
		if (!(r = cmd(c, st, 2, a)))
			goto out;
		st->xlen = r->integer;
		freeReplyObject(r);
	}
	{
		const char *a[] = { "XRANGE", jobs, "-", "+", "COUNT", "1" };
		if (!(r = cmd(c, st, 6, a)))
			goto out;
		st->oldest_entry_age_ms = -1;
		if (r->type == REDIS_REPLY_ARRAY && r->elements && r->element[0]->type == REDIS_REPLY_ARRAY &&
		    r->element[0]->elements && r->element[0]->element[0]->type == REDIS_REPLY_STRING) {
			const char *id = r->element[0]->element[0]->str;
			snprintf(st->oldest_entry, sizeof(st->oldest_entry), "%s", id);
			long long age = now_ms() - strtoll(id, NULL, 10);
			st->oldest_entry_age_ms = age < 0 ? 0 : age;
		}
		freeReplyObject(r);
	}
	{
		/* XINFO GROUPS fails with "no such key" when the stream does not exist yet. */
		const char *a[] = { "XINFO", "GROUPS", jobs };
		r = redisCommandArgv(c, 3, a, NULL);
		if (!r) {
			snprintf(st->redis_err, sizeof(st->redis_err), "XINFO: %s", c->errstr);
			goto out;
		}
		st->pending = 0;
		st->lag = st->xlen;
		if (r->type == REDIS_REPLY_ARRAY) {
			for (size_t i = 0; i < r->elements; i++) {
				const redisReply *g = r->element[i];
				const redisReply *name = field(g, "name");
				if (!name || name->type != REDIS_REPLY_STRING || strcmp(name->str, group))
					continue;
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
		}
		freeReplyObject(r);
	}
	if (st->group_exists) {
		const char *a[] = { "XINFO", "CONSUMERS", jobs, group };
		if (!(r = cmd(c, st, 4, a)))
			goto out;
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
	}
	{
		const char *a[] = { "ZCARD", delayed };
		if (!(r = cmd(c, st, 2, a)))
			goto out;
		st->delayed = r->integer;
		freeReplyObject(r);
	}
	{
		const char *a[] = { "ZRANGE", delayed, "0", "0", "WITHSCORES" };
		if (!(r = cmd(c, st, 5, a)))
			goto out;
		st->next_delayed_due_ms = -1;
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
		    r->element[1]->type == REDIS_REPLY_STRING) {
			long long due = (long long)strtod(r->element[1]->str, NULL) - now_ms();
			st->next_delayed_due_ms = due < 0 ? 0 : due;
		}
		freeReplyObject(r);
	}
	{
		const char *a[] = { "XLEN", dead };
		if (!(r = cmd(c, st, 2, a)))
			goto out;
		st->dead = r->integer;
		freeReplyObject(r);
	}
	st->redis_ok = true;
	rc = 0;
out:
	if (c)
		redisFree(c);
	memset(&u, 0, sizeof(u));   /* the password */
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

static int pg_gather(const struct config *cfg, struct status *st)
{
	const char *kw[] = { "dbname", "connect_timeout", "application_name", NULL };
	const char *val[] = { cfg->database_url, "5", "arbiter-status", NULL };
	PGconn *pg = PQconnectdbParams(kw, val, 1);
	PGresult *res;
	int rc = -1;

	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		snprintf(st->pg_err, sizeof(st->pg_err), "connect: %s",
		         pg ? PQerrorMessage(pg) : "out of memory");
		st->pg_err[strcspn(st->pg_err, "\n")] = '\0';
		goto out;
	}
	/* Read-only, and never wait long on a lock or a slow scan. */
	PQclear(PQexec(pg, "SET statement_timeout = '10s'"));
	PQclear(PQexec(pg, "SET default_transaction_read_only = on"));

	if (!(res = query(pg, st,
	        "SELECT count(*) FILTER (WHERE status = 'queued'),"
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
	if (pg)
		PQfinish(pg);
	return rc;
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

static void print_human(const struct config *cfg, const struct status *st, const char *redis_url,
                        const char *db_url)
{
	char d1[32], d2[32];

	printf("arbiter status (prefix %s)\n\n", cfg->prefix);
	printf("Redis %s\n", redis_url);
	if (!st->redis_ok) {
		printf("  unavailable: %s\n", st->redis_err);
	} else {
		fmt_duration(d1, sizeof(d1), st->oldest_entry_age_ms < 0 ? -1 : st->oldest_entry_age_ms / 1000.0);
		printf("  %-28s %lld", "stream length", st->xlen);
		if (st->oldest_entry_age_ms >= 0)
			printf("  (oldest entry %s old)", d1);
		printf("\n");
		if (st->group_exists) {
			printf("  %-28s %lld%s\n", "consumer group lag", st->lag,
			       st->lag_exact ? "" : " (estimated: length - pending)");
			printf("  %-28s %lld\n", "pending (delivered, unacked)", st->pending);
		} else {
			printf("  %-28s not created yet (no worker has started)\n", "consumer group");
		}
		fmt_duration(d1, sizeof(d1), st->next_delayed_due_ms / 1000.0);
		printf("  %-28s %lld", "delayed (rate limit)", st->delayed);
		if (st->next_delayed_due_ms >= 0)
			printf("  (next due in %s)", d1);
		printf("\n");
		printf("  %-28s %lld%s\n", "dead letters", st->dead,
		       st->dead ? "  (scripts/dlq list)" : "");
		if (st->nconsumers) {
			printf("\n  %-36s %8s %10s %10s\n", "CONSUMER", "PENDING", "IDLE", "INACTIVE");
			for (size_t i = 0; i < st->nconsumers; i++) {
				const struct consumer *k = &st->consumers[i];
				fmt_duration(d1, sizeof(d1), k->idle_ms < 0 ? -1 : k->idle_ms / 1000.0);
				fmt_duration(d2, sizeof(d2), k->inactive_ms < 0 ? -1 : k->inactive_ms / 1000.0);
				printf("  %-36s %8lld %10s %10s\n", k->name, k->pending, d1, d2);
			}
		}
	}
	printf("\nPostgreSQL %s\n", db_url);
	if (!st->pg_ok) {
		printf("  unavailable: %s\n", st->pg_err);
		return;
	}
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

static void print_json(const struct config *cfg, const struct status *st, const char *redis_url,
                       const char *db_url)
{
	json_t *root = json_object(), *redis = json_object(), *pg = json_object();

	json_object_set_new(root, "prefix", json_string(cfg->prefix));
	json_object_set_new(redis, "url", json_string(redis_url));
	json_object_set_new(redis, "ok", json_boolean(st->redis_ok));
	if (!st->redis_ok) {
		json_object_set_new(redis, "error", json_string(st->redis_err));
	} else {
		json_object_set_new(redis, "stream_length", json_integer(st->xlen));
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
		json_object_set_new(redis, "next_delayed_due_ms",
		                    st->next_delayed_due_ms >= 0 ? json_integer(st->next_delayed_due_ms) : json_null());
		json_object_set_new(redis, "dead", json_integer(st->dead));
		json_t *cs = json_array();
		for (size_t i = 0; i < st->nconsumers; i++) {
			const struct consumer *k = &st->consumers[i];
			json_t *o = json_object();
			json_object_set_new(o, "name", json_string(k->name));
			json_object_set_new(o, "pending", json_integer(k->pending));
			json_object_set_new(o, "idle_ms", k->idle_ms >= 0 ? json_integer(k->idle_ms) : json_null());
			json_object_set_new(o, "inactive_ms",
			                    k->inactive_ms >= 0 ? json_integer(k->inactive_ms) : json_null());
			json_array_append_new(cs, o);
		}
		json_object_set_new(redis, "consumers", cs);
	}
	json_object_set_new(root, "redis", redis);

	json_object_set_new(pg, "url", json_string(db_url));
	json_object_set_new(pg, "ok", json_boolean(st->pg_ok));
	if (!st->pg_ok) {
		json_object_set_new(pg, "error", json_string(st->pg_err));
	} else {
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
	}
	json_object_set_new(root, "postgres", pg);

	char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
	printf("%s\n", s);
	free(s);
	json_decref(root);
}

static void status_usage(FILE *f)
{
	fprintf(f, "usage: arbiter status [--json] [--config FILE] [--redis-url URL] "
	           "[--database-url URL] [--prefix P]\n"
	           "  Queue and database overview (Redis stream, consumer group, delayed and\n"
	           "  dead-letter jobs; queued submissions and last-hour results).\n"
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

	for (int i = 0; i < argc; i++) {
		if (i > 0 && !strcmp(argv[i], "--json")) {
			json = true;
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
			fprintf(stderr, "arbiter status: %s\n", err);
		return rc < 0 ? 2 : 0;
	}

	memset(&st, 0, sizeof(st));
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

	rc = st.redis_ok && st.pg_ok ? 0 : 1;
	for (size_t i = 0; i < st.nconsumers; i++)
		free(st.consumers[i].name);
	free(st.consumers);
	for (size_t i = 0; i < st.nevals; i++)
		free(st.evals[i].name);
	free(st.evals);
	config_free(&cfg);
	return rc;
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
