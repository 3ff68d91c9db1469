/*
 * `arbiter console [--listen ADDR] [--token-file FILE] [settings]`: the operator console,
 * a small web server of its own (deploy/README.md "Operator console"). It serves one static page
 * (worker/console/: HTML, script and style compiled in, nothing fetched from elsewhere) and
 * a JSON API the page polls:
 *
 *   GET  /api/overview            arbiter status --json's document, plus the delayed set
 *                                 split by cause and how long the reading took
 *   GET  /api/submission?id=UUID  a submission's story: its row, its evaluations and
 *                                 dimensions, and where its job is in Redis now
 *   GET  /api/dead?reason=&challenge=&since=&until=&before=&limit=   dead letters,
 *                                 newest first, paged, filtered
 *   GET  /api/dead/entry?id=ID    one dead letter, every field
 *   GET  /api/charts              completed/failed/rejected per second and latency
 *                                 percentiles over the last hour (the stats stream)
 *   GET  /api/standings?by=&challenge=&limit=&cap=   the leaderboard with its "as of"
 *                                 and the capped weights (the CLI's queries)
 *   POST /api/action              replay / drop a dead letter, requeue, pause / resume; only with
 *                                 the X-Arbiter-Token header equal to the configured token
 *
 * Why a command of its own and not a path on the worker's listener: the worker's loop
 * must never block, and these views are synchronous reads of Redis and PostgreSQL; the
 * metrics port is commonly reachable by a whole cluster's Prometheus, the console binds
 * to loopback and holds an operator token; and a console is started when needed, one per
 * deployment, not one per replica.
 *
 * One request at a time on one thread (an operator's tool, not a public site): each
 * request connects to Redis (status_redis_open) and PostgreSQL (a read-only transaction
 * with a 2 s statement timeout), reads what it needs and answers with Connection: close.
 * Every user value travels as JSON of valid UTF-8 (console_text) and the page sets it as
 * text, never as markup; every answer carries a strict Content-Security-Policy.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include "cmd.h"
#include "config.h"
#include "console.h"
#include "console_assets.h"
#include "metrics.h"
#include "redact.h"
#include "rq.h"
#include "standings.h"
#include "status.h"
#include "util.h"
#include "version.h"
#include "weights.h"

#define CONSOLE_DEFAULT_LISTEN "127.0.0.1:8790"
#define CONSOLE_IO_TIMEOUT_MS 3000
#define CONSOLE_SCAN_MAX 10000     /* stream entries / delayed members looked at per view */
#define CONSOLE_PAGE_MAX 200       /* dead letters per page */
#define CONSOLE_TOKEN_MIN 16
#define CONSOLE_REQUEUE_MAX 100000  /* submissions one requeue may select (else scripts/requeue) */
#define CONSOLE_REQUEUE_IDS 1000    /* ids one requeue may name */
#define CONSOLE_REQUEUE_BATCH 500   /* XADDs per script call */
#define CONSOLE_REQUEUE_CONFIRM_OVER 1000   /* scripts/requeue --confirm-over's default */
#define CONSOLE_REQUEUE_REPORT 50   /* skipped submissions listed in the answer */
#define CONSOLE_STANDINGS_MAX 500   /* leaderboard and weights rows per view */

static const char csp[] =
	"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
	"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

struct console {
	struct config cfg;
	struct status_keys sk;
	char token[256];            /* "" = read-only */
	int lfd;
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static long long now_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ---- responses ---- */

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void respond(int fd, int code, const char *ctype, const char *body, size_t blen, bool head)
{
	const char *reason = code == 200 ? "OK" : code == 400 ? "Bad Request" : code == 401 ? "Unauthorized"
	                   : code == 403 ? "Forbidden" : code == 404 ? "Not Found"
	                   : code == 405 ? "Method Not Allowed" : code == 413 ? "Payload Too Large"
	                   : code == 502 ? "Bad Gateway" : "Error";
	char h[1024];
	int n = snprintf(h, sizeof h,
	                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	                 "Content-Security-Policy: %s\r\nX-Content-Type-Options: nosniff\r\n"
	                 "X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
	                 "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
	                 code, reason, ctype, blen, csp);
	send_all(fd, h, (size_t)n);
	if (!head)
		send_all(fd, body, blen);
}

/* Answers with the JSON document j (stolen). */
static void respond_json(int fd, int code, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
	json_decref(j);
	respond(fd, code, "application/json", s ? s : "{}", s ? strlen(s) : 2, false);
	free(s);
}

static void respond_error(int fd, int code, const char *msg)
{
	json_t *j = json_object();
	json_object_set_new(j, "error", console_text(msg, strlen(msg)));
	respond_json(fd, code, j);
}

/* ---- PostgreSQL ---- */

/* A connection for one view: read-only transaction, short statement timeout (read_only
 * false: a plain connection for an action). NULL with the reason in err. */
static PGconn *pg_open(const struct console *c, bool read_only, char *err, size_t errlen)
{
	const char *kw[] = { "dbname", "connect_timeout", "application_name", NULL };
	const char *val[] = { c->cfg.database_url, "5", "arbiter-console", NULL };
	char why[160];
	if (redact_check_conn(c->cfg.database_url, why, sizeof why) < 0) {
		snprintf(err, errlen, "invalid database URL: %s", why);
		return NULL;
	}
	PGconn *pg = PQconnectdbParams(kw, val, 1);
	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		snprintf(err, errlen, "PostgreSQL: %s", pg ? PQerrorMessage(pg) : "out of memory");
		err[strcspn(err, "\n")] = '\0';
		PQfinish(pg);
		return NULL;
	}
	if (read_only) {
		PQclear(PQexec(pg, "BEGIN READ ONLY"));
		PQclear(PQexec(pg, "SET LOCAL statement_timeout = '2s'"));
	}
	return pg;
}

static void pg_close(PGconn *pg)
{
	if (!pg)
		return;
	if (PQstatus(pg) == CONNECTION_OK && PQtransactionStatus(pg) != PQTRANS_IDLE)
		PQclear(PQexec(pg, "ROLLBACK"));
	PQfinish(pg);
}

/* One result cell as JSON: json/jsonb parsed, integers and booleans as such, numeric as
 * a number, everything else as text; NULL as null. */
static json_t *pg_cell(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return json_null();
	const char *v = PQgetvalue(res, row, col);
	size_t n = (size_t)PQgetlength(res, row, col);
	switch (PQftype(res, col)) {
	case 16:    /* bool */
		return json_boolean(v[0] == 't');
	case 20: case 21: case 23:    /* int8, int2, int4 */
		return json_integer(strtoll(v, NULL, 10));
	case 700: case 701: case 1700:    /* float4, float8, numeric */
		return json_real(strtod(v, NULL));
	case 114: case 3802: {    /* json, jsonb */
		json_t *j = json_loadb(v, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		return j ? j : console_text(v, n);
	}
	default:
		return console_text(v, n);
	}
}

static json_t *pg_row(const PGresult *res, int row)
{
	json_t *o = json_object();
	for (int c = 0; c < PQnfields(res); c++)
		json_object_set_new(o, PQfname(res, c), pg_cell(res, row, c));
	return o;
}

/* A result's rows as an array of objects (pg_row). */
static json_t *pg_result_rows(const PGresult *res)
{
	json_t *a = json_array();
	for (int r = 0; r < PQntuples(res); r++)
		json_array_append_new(a, pg_row(res, r));
	return a;
}

/* err := "PostgreSQL: " and a failed result's message, its first line. */
static void pg_err(char *err, size_t errlen, const PGresult *res)
{
	snprintf(err, errlen, "PostgreSQL: %s", PQresultErrorMessage(res));
	err[strcspn(err, "\n")] = '\0';
}

/* Runs sql with one text parameter (NULL: none); the rows as an array of objects, or NULL
 * with the reason in err. */
static json_t *pg_rows(PGconn *pg, const char *sql, const char *param, char *err, size_t errlen)
{
	PGresult *res = PQexecParams(pg, sql, param ? 1 : 0, NULL, param ? &param : NULL, NULL,
	                             NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_err(err, errlen, res);
		PQclear(res);
		return NULL;
	}
	json_t *a = pg_result_rows(res);
	PQclear(res);
	return a;
}

/* ---- Redis ---- */

static redisReply *ccmd(struct rq_sync *r, int argc, const char **argv, char *err, size_t errlen)
{
	redisReply *x = rq_sync_cmdv(r, argc, argv, err, errlen);
	if (x && x->type == REDIS_REPLY_ERROR) {
		snprintf(err, errlen, "Redis %s: %s", argv[0], x->str);
		freeReplyObject(x);
		return NULL;
	}
	return x;
}

/* In a flat [k1, v1, ...] reply of strings, the value of key (binary-safe), or NULL. */
static const redisReply *fieldv(const redisReply *f, const char *key)
{
	if (!f || f->type != REDIS_REPLY_ARRAY)
		return NULL;
	size_t kl = strlen(key);
	for (size_t i = 0; i + 1 < f->elements; i += 2) {
		const redisReply *k = f->element[i];
		if (k->type == REDIS_REPLY_STRING && k->len == kl && !memcmp(k->str, key, kl) &&
		    f->element[i + 1]->type == REDIS_REPLY_STRING)
			return f->element[i + 1];
	}
	return NULL;
}

/* A stream entry [id, [fields]] as {"id", "fields": {name: value}}. */
static json_t *entry_json(const redisReply *e)
{
	json_t *o = json_object(), *f = json_object();
	json_object_set_new(o, "id", console_text(e->element[0]->str, e->element[0]->len));
	const redisReply *fv = e->element[1];
	for (size_t i = 0; fv->type == REDIS_REPLY_ARRAY && i + 1 < fv->elements; i += 2) {
		const redisReply *k = fv->element[i], *v = fv->element[i + 1];
		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		json_t *kt = console_text(k->str, k->len);
		json_object_set_new(f, json_string_value(kt), console_text(v->str, v->len));
		json_decref(kt);
	}
	json_object_set_new(o, "fields", f);
	return o;
}

static bool entry_ok(const redisReply *e)
{
	return e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
	       e->element[0]->type == REDIS_REPLY_STRING && e->element[1]->type == REDIS_REPLY_ARRAY;
}

/* Looks for sub's job in stream key (oldest first, at most CONSOLE_SCAN_MAX entries);
 * appends what it finds to places ({"where", "id", and for the jobs stream and lanes the
 * pending consumer, idle time and deliveries}). *scanned gets the entries looked at.
 * Returns 0 or -1 with err. */
static int find_in_stream(struct console *c, struct rq_sync *r, const char *key, const char *where,
                          bool reverse, const char *sub, json_t *places, long long *scanned,
                          char *err, size_t errlen)
{
	char start[64];
	snprintf(start, sizeof start, "%s", reverse ? "+" : "-");
	*scanned = 0;
	while (*scanned < CONSOLE_SCAN_MAX) {
		const char *a[] = { reverse ? "XREVRANGE" : "XRANGE", key, start, reverse ? "-" : "+",
		                    "COUNT", "500" };
		redisReply *x = ccmd(r, 6, a, err, errlen);
		if (!x)
			return -1;
		size_t n = x->type == REDIS_REPLY_ARRAY ? x->elements : 0;
		for (size_t i = 0; i < n; i++) {
			const redisReply *e = x->element[i];
			if (!entry_ok(e))
				continue;
			const redisReply *s = fieldv(e->element[1], "submission_id");
			if (!s || s->len != strlen(sub) || strncasecmp(s->str, sub, s->len))
				continue;
			json_t *p = entry_json(e);
			json_object_set_new(p, "where", json_string(where));
			if (!reverse) {
				const char *pa[] = { "XPENDING", key, c->sk.group, e->element[0]->str,
				                     e->element[0]->str, "1" };
				char perr[256];
				redisReply *pr = rq_sync_cmdv(r, 6, pa, perr, sizeof perr);
				if (pr && pr->type == REDIS_REPLY_ARRAY && pr->elements == 1 &&
				    pr->element[0]->type == REDIS_REPLY_ARRAY && pr->element[0]->elements == 4) {
					const redisReply *pe = pr->element[0];
					json_object_set_new(p, "consumer",
					                    console_text(pe->element[1]->str, pe->element[1]->len));
					json_object_set_new(p, "idle_ms", json_integer(pe->element[2]->integer));
					json_object_set_new(p, "deliveries", json_integer(pe->element[3]->integer));
				} else {
					json_object_set_new(p, "consumer", json_null());
				}
				if (pr)
					freeReplyObject(pr);
			}
			json_array_append_new(places, p);
		}
		*scanned += (long long)n;
		if (n < 500) {
			freeReplyObject(x);
			break;
		}
		/* the next page starts after the last id (exclusive ranges, Redis 6.2) */
		snprintf(start, sizeof start, "(%s", x->element[n - 1]->element[0]->str);
		freeReplyObject(x);
	}
	return 0;
}

/* The delayed set's members as scanned: a member holds the job's fields as JSON (plus
 * _token, and _cause: rate_limit, pause, retry or image, as `arbiter status` counts them; a
 * member written before _cause existed is a retry when it has attempt, else a rate-limit
 * deferral). For sub (NULL: none) the matching members go to places; counts get one count
 * per cause and "scanned". Returns 0 or -1. */
static int scan_delayed(struct rq_sync *r, const char *key, const char *sub, json_t *places,
                        json_t *counts, char *err, size_t errlen)
{
	static const char *const causes[] = { "rate_limit", "pause", "retry", "image" };
	enum { NCAUSE = sizeof causes / sizeof causes[0] };
	static const char *const shown[NCAUSE] = { "rate limit", "challenge paused", "retry",
	                                           "waiting for its image" };
	char stop[32];
	snprintf(stop, sizeof stop, "%d", CONSOLE_SCAN_MAX - 1);
	const char *a[] = { "ZRANGE", key, "0", stop, "WITHSCORES" };
	redisReply *x = ccmd(r, 5, a, err, errlen);
	if (!x)
		return -1;
	long long n[NCAUSE] = { 0 }, scanned = 0, now = now_ms();
	for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i + 1 < x->elements; i += 2) {
		const redisReply *m = x->element[i], *s = x->element[i + 1];
		if (m->type != REDIS_REPLY_STRING)
			continue;
		json_t *j = json_loadb(m->str, m->len, 0, NULL);
		const char *cs = j ? json_string_value(json_object_get(j, "_cause")) : NULL;
		size_t c = j && json_object_get(j, "attempt") ? 2 : 0;
		for (size_t k = 0; cs && k < NCAUSE; k++)
			if (!strcmp(cs, causes[k]))
				c = k;
		n[c]++;
		scanned++;
		const char *js = j ? json_string_value(json_object_get(j, "submission_id")) : NULL;
		if (sub && js && !strcasecmp(js, sub)) {
			json_t *p = json_object();
			json_object_set_new(p, "where", json_string("delayed"));
			json_object_set_new(p, "cause", json_string(shown[c]));
			long long due = s->type == REDIS_REPLY_STRING ? (long long)strtod(s->str, NULL) : 0;
			json_object_set_new(p, "due_in_ms", json_integer(due - now));
			json_object_set_new(p, "fields", json_incref(j));
			json_array_append_new(places, p);
		}
		json_decref(j);
	}
	for (size_t k = 0; k < NCAUSE; k++)
		json_object_set_new(counts, causes[k], json_integer(n[k]));
	json_object_set_new(counts, "scanned", json_integer(scanned));
	freeReplyObject(x);
	return 0;
}

/* ---- views ---- */

static void view_overview(struct console *c, int fd)
{
	long long t0 = now_ms();
	int code;
	json_t *doc = json_object();
	json_object_set_new(doc, "status", status_document(&c->cfg, &code));
	json_object_set_new(doc, "status_exit", json_integer(code));
	char err[512] = "";
	json_t *split = json_object();
	struct rq_sync *r = status_redis_open(&c->cfg, &c->sk, err, sizeof err);
	if (!r || scan_delayed(r, c->sk.delayed, NULL, NULL, split, err, sizeof err) < 0)
		json_object_set_new(split, "error", console_text(err, strlen(err)));
	rq_sync_close(r);
	json_object_set_new(doc, "delayed_split", split);
	/* Submissions: exact counts of the unfinished ones come from status (a partial
	 * index); the table's size is the planner's estimate (no scan of a large table). */
	PGconn *pg = pg_open(c, true, err, sizeof err);
	json_t *est = pg ? pg_rows(pg, "SELECT greatest(reltuples, 0)::bigint AS submissions_estimate "
	                               "FROM pg_class WHERE oid = 'submissions'::regclass",
	                           NULL, err, sizeof err) : NULL;
	if (est && json_array_size(est) == 1)
		json_object_set(doc, "table", json_array_get(est, 0));
	json_decref(est);
	/* Exact counts by status: counters kept by triggers (sql/009_console.sql),
	 * a handful of rows whatever the table's size. */
	json_t *counts = pg ? pg_rows(pg, "SELECT status, n FROM submission_counts()", NULL, err,
	                              sizeof err) : NULL;
	json_t *by = json_object();
	size_t ci;
	json_t *cr;
	json_array_foreach(counts, ci, cr)
		json_object_set(by, json_string_value(json_object_get(cr, "status")),
		                json_object_get(cr, "n"));
	if (!counts)
		json_object_set_new(by, "error", console_text(err, strlen(err)));
	json_decref(counts);
	json_object_set_new(doc, "by_status", by);
	pg_close(pg);
	json_object_set_new(doc, "read_only", json_boolean(!c->token[0]));
	json_object_set_new(doc, "version", json_string(ARBITER_VERSION));
	json_object_set_new(doc, "served_at_ms", json_integer(now_ms()));
	json_object_set_new(doc, "took_ms", json_integer(now_ms() - t0));
	respond_json(fd, 200, doc);
}

static const char sub_sql[] =
	"SELECT s.id, s.status, s.attempts, s.last_error, s.reject_reason, s.submitted_at,"
	"       s.match_id, s.agent_id, a.name AS agent, c.slug AS challenge,"
	"       m.status AS match_status, m.result AS match_result, m.score AS match_score,"
	"       m.elo_before, m.elo_after, m.elo_change, m.attempt_number,"
	"       left(s.answer::text, 4000) AS answer, octet_length(s.answer::text) AS answer_bytes,"
	"       s.metadata"
	"  FROM submissions s JOIN matches m ON m.id = s.match_id"
	"  JOIN agents a ON a.id = s.agent_id JOIN challenges c ON c.id = m.challenge_id"
	" WHERE s.id = $1";
static const char evals_sql[] =
	"SELECT id, eval_seq, evaluator, score, result, verified, score_breakdown,"
	"       submission_warnings, constraint_violations, worker_id, started_at, completed_at,"
	"       job_id, elo_before, elo_change, k_factor"
	"  FROM evaluation_results WHERE submission_id = $1 ORDER BY eval_seq LIMIT 50";
static const char dims_sql[] =
	"SELECT d.result_id, d.key, d.score, d.weight, d.weighted, d.reasoning"
	"  FROM evaluation_dimensions d JOIN evaluation_results r ON r.id = d.result_id"
	" WHERE r.submission_id = $1 ORDER BY d.result_id, d.key LIMIT 2000";

static void view_submission(struct console *c, int fd, const char *q)
{
	char id[64], err[512] = "";
	if (!console_param(q, "id", id, sizeof id) || !console_is_uuid(id)) {
		respond_error(fd, 400, "id must be a submission id (a UUID)");
		return;
	}
	long long t0 = now_ms();
	json_t *doc = json_object();
	PGconn *pg = pg_open(c, true, err, sizeof err);
	json_t *rows = pg ? pg_rows(pg, sub_sql, id, err, sizeof err) : NULL;
	json_t *evals = rows ? pg_rows(pg, evals_sql, id, err, sizeof err) : NULL;
	json_t *dims = evals ? pg_rows(pg, dims_sql, id, err, sizeof err) : NULL;
	pg_close(pg);
	if (!dims) {
		json_object_set_new(doc, "db_error", console_text(err, strlen(err)));
	} else {
		json_object_set_new(doc, "found", json_boolean(json_array_size(rows) == 1));
		if (json_array_size(rows) == 1)
			json_object_set(doc, "row", json_array_get(rows, 0));
		size_t i, k;
		json_t *e, *d;
		json_array_foreach(evals, i, e) {
			json_t *mine = json_array();
			json_array_foreach(dims, k, d)
				if (json_integer_value(json_object_get(d, "result_id")) ==
				    json_integer_value(json_object_get(e, "id")))
					json_array_append(mine, d);
			json_object_set_new(e, "dimensions", mine);
		}
		json_object_set(doc, "evaluations", evals);
	}
	json_decref(rows);
	json_decref(evals);
	json_decref(dims);

	json_t *places = json_array(), *scanned = json_object(), *split = json_object();
	err[0] = '\0';
	struct rq_sync *r = status_redis_open(&c->cfg, &c->sk, err, sizeof err);
	struct { const char *key, *where; bool rev; } streams[] = {
		{ c->sk.jobs, "stream", false }, { c->sk.bulk, "bulk lane", false },
		{ c->sk.judge_lane, "judge lane", false }, { c->sk.dead, "dead letters", true },
	};
	int rc = r ? 0 : -1;
	for (size_t i = 0; rc == 0 && i < sizeof streams / sizeof streams[0]; i++) {
		long long n = 0;
		rc = find_in_stream(c, r, streams[i].key, streams[i].where, streams[i].rev, id, places,
		                    &n, err, sizeof err);
		json_object_set_new(scanned, streams[i].where, json_integer(n));
	}
	if (rc == 0)
		rc = scan_delayed(r, c->sk.delayed, id, places, split, err, sizeof err);
	json_object_set_new(scanned, "delayed", json_incref(json_object_get(split, "scanned")));
	json_decref(split);
	rq_sync_close(r);
	json_t *redis = json_object();
	json_object_set_new(redis, "places", places);
	json_object_set_new(redis, "scanned", scanned);
	json_object_set_new(redis, "scan_limit", json_integer(CONSOLE_SCAN_MAX));
	if (rc < 0)
		json_object_set_new(redis, "error", console_text(err, strlen(err)));
	json_object_set_new(doc, "redis", redis);
	json_object_set_new(doc, "took_ms", json_integer(now_ms() - t0));
	respond_json(fd, 200, doc);
}

/* The challenge slug of each entry of the array list (entry_json objects) whose
 * submission_id is a UUID, set as its "challenge" (null when unknown): one lookup by
 * primary key for the whole batch. Returns 0 or -1 with err. */
static int dead_challenges(PGconn *pg, json_t *list, char *err, size_t errlen)
{
	struct strbuf arr = { 0 };
	size_t i;
	json_t *e;
	strbuf_addlit(&arr, "{");
	json_array_foreach(list, i, e) {
		const char *sid = json_string_value(json_object_get(json_object_get(e, "fields"), "submission_id"));
		if (sid && console_is_uuid(sid))
			strbuf_addf(&arr, "%s%s", arr.len > 1 ? "," : "", sid);
	}
	strbuf_addlit(&arr, "}");
	const char *p[] = { arr.buf };
	PGresult *res = PQexecParams(pg, "SELECT s.id::text, c.slug FROM submissions s"
	                             " JOIN matches m ON m.id = s.match_id JOIN challenges c ON c.id = m.challenge_id"
	                             " WHERE s.id = ANY($1::uuid[])", 1, NULL, p, NULL, NULL, 0);
	strbuf_free(&arr);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_err(err, errlen, res);
		PQclear(res);
		return -1;
	}
	json_array_foreach(list, i, e) {
		const char *sid = json_string_value(json_object_get(json_object_get(e, "fields"), "submission_id"));
		json_t *slug = json_null();
		for (int r = 0; sid && r < PQntuples(res); r++)
			if (!strcasecmp(PQgetvalue(res, r, 0), sid)) {
				json_decref(slug);
				slug = pg_cell(res, r, 1);
				break;
			}
		json_object_set_new(e, "challenge", slug);
	}
	PQclear(res);
	return 0;
}

/* Dead letters, newest first, each with its submission's challenge: before (exclusive
 * entry id) pages; reason filters by a substring, challenge by slug, since and until
 * (milliseconds since the epoch) by the time of death (the entry id's time, so a range of
 * the stream is read, not the whole stream); at most CONSOLE_SCAN_MAX entries are looked
 * at per request. */
static void view_dead(struct console *c, int fd, const char *q)
{
	char reason[256] = "", before[64] = "", lim[16] = "", slug[128] = "", since[24] = "",
	     until[24] = "";
	console_param(q, "reason", reason, sizeof reason);
	console_param(q, "challenge", slug, sizeof slug);
	console_param(q, "since", since, sizeof since);
	console_param(q, "until", until, sizeof until);
	if (console_param(q, "before", before, sizeof before) && before[0] &&
	    !console_is_entry_id(before)) {
		respond_error(fd, 400, "before must be a stream entry id");
		return;
	}
	if ((since[0] && !console_is_entry_id(since)) || (until[0] && !console_is_entry_id(until)) ||
	    strchr(since, '-') || strchr(until, '-')) {
		respond_error(fd, 400, "since and until are milliseconds since the epoch");
		return;
	}
	long limit = console_param(q, "limit", lim, sizeof lim) ? strtol(lim, NULL, 10) : 50;
	if (limit <= 0 || limit > CONSOLE_PAGE_MAX)
		limit = 50;
	long long t0 = now_ms();
	char err[512] = "", start[72], stop[32];
	/* XREVRANGE from the newest wanted (before, else until's last id) down to since */
	if (before[0])
		snprintf(start, sizeof start, "(%s", before);
	else
		snprintf(start, sizeof start, until[0] ? "%s-18446744073709551615" : "+", until);
	snprintf(stop, sizeof stop, "%s", since[0] ? since : "-");
	struct rq_sync *r = status_redis_open(&c->cfg, &c->sk, err, sizeof err);
	if (!r) {
		respond_error(fd, 502, err);
		return;
	}
	PGconn *pg = pg_open(c, true, err, sizeof err);
	if (!pg && slug[0]) {
		rq_sync_close(r);
		respond_error(fd, 502, err);
		return;
	}
	json_t *list = json_array();
	long long scanned = 0;
	char last[64] = "";
	bool more = true;
	err[0] = '\0';
	while (more && (long)json_array_size(list) < limit && scanned < CONSOLE_SCAN_MAX) {
		const char *a[] = { "XREVRANGE", c->sk.dead, start, stop, "COUNT", "200" };
		redisReply *x = ccmd(r, 6, a, err, sizeof err);
		if (!x)
			break;
		size_t n = x->type == REDIS_REPLY_ARRAY ? x->elements : 0;
		more = n == 200;
		json_t *batch = json_array();
		for (size_t i = 0; i < n; i++) {
			const redisReply *e = x->element[i];
			if (!entry_ok(e))
				continue;
			const redisReply *rs = fieldv(e->element[1], "reason");
			if (reason[0] && (!rs || !memmem(rs->str, rs->len, reason, strlen(reason))))
				continue;
			json_array_append_new(batch, entry_json(e));
		}
		if (pg && json_array_size(batch) && dead_challenges(pg, batch, err, sizeof err) < 0) {
			json_decref(batch);
			freeReplyObject(x);
			break;
		}
		/* take the batch in order until the page is full; the next page starts after the
		 * last entry taken (or the last one looked at, when none is left over) */
		size_t taken = 0, i;
		json_t *e;
		json_array_foreach(batch, i, e) {
			if ((long)json_array_size(list) >= limit)
				break;
			taken++;
			snprintf(last, sizeof last, "%s", json_string_value(json_object_get(e, "id")));
			const char *cs = json_string_value(json_object_get(e, "challenge"));
			if (slug[0] && (!cs || strcmp(cs, slug)))
				continue;
			json_array_append(list, e);
		}
		scanned += (long long)n;    /* looked at; what was not taken is the next page's */
		if (taken == json_array_size(batch)) {
			if (n)
				snprintf(last, sizeof last, "%s", x->element[n - 1]->element[0]->str);
		} else {
			more = true;
		}
		if (last[0])
			snprintf(start, sizeof start, "(%s", last);
		json_decref(batch);
		freeReplyObject(x);
	}
	pg_close(pg);
	const char *l[] = { "XLEN", c->sk.dead };
	char lerr[256];
	redisReply *x = ccmd(r, 2, l, lerr, sizeof lerr);
	json_t *doc = json_object();
	json_object_set_new(doc, "entries", list);
	json_object_set_new(doc, "total", json_integer(x ? x->integer : -1));
	json_object_set_new(doc, "scanned", json_integer(scanned));
	json_object_set_new(doc, "next_before", more && last[0] ? json_string(last) : json_null());
	if (err[0])
		json_object_set_new(doc, "error", console_text(err, strlen(err)));
	if (x)
		freeReplyObject(x);
	rq_sync_close(r);
	json_object_set_new(doc, "took_ms", json_integer(now_ms() - t0));
	respond_json(fd, 200, doc);
}

static void view_dead_entry(struct console *c, int fd, const char *q)
{
	char id[64], err[512] = "";
	if (!console_param(q, "id", id, sizeof id) || !console_is_entry_id(id)) {
		respond_error(fd, 400, "id must be a stream entry id");
		return;
	}
	struct rq_sync *r = status_redis_open(&c->cfg, &c->sk, err, sizeof err);
	const char *a[] = { "XRANGE", c->sk.dead, id, id };
	redisReply *x = r ? ccmd(r, 4, a, err, sizeof err) : NULL;
	if (!x)
		respond_error(fd, 502, err);
	else if (x->type != REDIS_REPLY_ARRAY || x->elements != 1 || !entry_ok(x->element[0]))
		respond_error(fd, 404, "no such dead letter");
	else
		respond_json(fd, 200, entry_json(x->element[0]));
	if (x)
		freeReplyObject(x);
	rq_sync_close(r);
}

/* The capped weights (arbiter weights' arithmetic, common/weights.h) of every agent's
 * window sum (standings_window_scores), into doc: cap, effective cap, agents, positive,
 * capped, and the first `limit` agents by weight. Returns 0 or -1 with err. */
static int standings_weights_json(PGconn *pg, uint64_t cap_num, uint64_t cap_den, long limit,
                                  json_t *doc, char *err, size_t errlen)
{
	PGresult *res = standings_window_scores(pg);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_err(err, errlen, res);
		PQclear(res);
		return -1;
	}
	size_t n = (size_t)PQntuples(res);
	int64_t *scores = xcalloc(n + 1, sizeof *scores);
	uint64_t *units = xcalloc(n + 1, sizeof *units);
	for (size_t i = 0; i < n; i++)
		scores[i] = strtoll(PQgetvalue(res, (int)i, 2), NULL, 10);
	struct weights_out w = { .units = units };
	int rc = weights_capped(scores, n, cap_num, cap_den, WEIGHTS_SCALE, &w);
	if (rc < 0) {
		snprintf(err, errlen, "the window sums are out of range for the weights");
	} else {
		char cap[64];
		snprintf(cap, sizeof cap, "%llu/%llu", (unsigned long long)w.cap_num,
		         (unsigned long long)w.cap_den);
		json_object_set_new(doc, "effective_cap", json_string(cap));
		json_object_set_new(doc, "agents", json_integer((json_int_t)n));
		json_object_set_new(doc, "positive", json_integer((json_int_t)w.positive));
		json_object_set_new(doc, "capped", json_integer((json_int_t)w.capped));
		json_t *rows = json_array();
		for (size_t i = 0; i < n && (long)i < limit; i++) {
			char wt[32];
			weights_units_str(units[i], wt);
			json_t *o = json_object();
			json_object_set_new(o, "agent_id", pg_cell(res, (int)i, 0));
			json_object_set_new(o, "name", pg_cell(res, (int)i, 1));
			json_object_set_new(o, "window_sum", json_integer(scores[i]));
			json_object_set_new(o, "weight", json_string(wt));
			json_array_append_new(rows, o);
		}
		json_object_set_new(doc, "rows", rows);
	}
	free(scores);
	free(units);
	PQclear(res);
	return rc < 0 ? -1 : 0;
}

/* The standings: the projection's "as of" (standings_as_of: watermark, lag, results not
 * applied yet), the leaderboard (standings_leaderboard: by window, elo or best, overall or
 * for one challenge) and the capped weights (cap, default 0.15). Parameters: by,
 * challenge (a slug), limit (rows, 1..500, default 50), cap. */
static void view_standings(struct console *c, int fd, const char *q)
{
	char by[16] = "", slug[128] = "", lim[16] = "", cap[24] = "0.15", err[512] = "";
	console_param(q, "by", by, sizeof by);
	console_param(q, "challenge", slug, sizeof slug);
	console_param(q, "cap", cap, sizeof cap);
	if (!by[0])
		snprintf(by, sizeof by, "%s", slug[0] ? "best" : "window");
	if (strcmp(by, "window") && strcmp(by, "elo") && strcmp(by, "best")) {
		respond_error(fd, 400, "by must be window, elo or best");
		return;
	}
	if (!strcmp(by, "best") && !slug[0]) {
		respond_error(fd, 400, "by=best needs a challenge");
		return;
	}
	long limit = console_param(q, "limit", lim, sizeof lim) ? strtol(lim, NULL, 10) : 50;
	if (limit <= 0 || limit > CONSOLE_STANDINGS_MAX)
		limit = 50;
	uint64_t cap_num, cap_den;
	if (weights_parse_cap(cap, &cap_num, &cap_den) < 0) {
		respond_error(fd, 400, "cap must be a decimal in (0, 1] with at most 9 places");
		return;
	}
	long long t0 = now_ms();
	json_t *doc = json_object();
	json_object_set_new(doc, "by", json_string(by));
	json_object_set_new(doc, "challenge", slug[0] ? console_text(slug, strlen(slug)) : json_null());
	PGconn *pg = pg_open(c, true, err, sizeof err);
	struct standings_asof a;
	long long waiting = 0;
	char chid[64] = "";
	int found = 1;
	if (!pg || standings_as_of(pg, &a, err, sizeof err) < 0 ||
	    standings_pending(pg, &waiting, err, sizeof err) < 0 ||
	    (slug[0] && (found = standings_challenge_id(pg, slug, chid, sizeof chid, err, sizeof err)) < 0))
		goto fail;
	json_t *asof = json_object();
	json_object_set_new(asof, "as_of", console_text(a.as_of, strlen(a.as_of)));
	json_object_set_new(asof, "lag_seconds", json_real(a.lag_secs));
	json_object_set_new(asof, "results_not_applied", json_integer(a.pending));
	json_object_set_new(asof, "results_applied", json_integer(a.applied));
	json_object_set_new(asof, "agents_waiting_for_backfill", json_integer(waiting));
	json_object_set_new(doc, "as_of", asof);
	if (!found) {
		json_object_set_new(doc, "error", json_string("no challenge with this slug"));
	} else {
		PGresult *res = standings_leaderboard(pg, by, slug[0] ? chid : NULL, limit);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			snprintf(err, sizeof err, "PostgreSQL: %s", PQresultErrorMessage(res));
			PQclear(res);
			goto fail;
		}
		json_object_set_new(doc, "rows", pg_result_rows(res));
		PQclear(res);
	}
	json_t *wdoc = json_object();
	json_object_set_new(wdoc, "cap", json_string(cap));
	if (standings_weights_json(pg, cap_num, cap_den, limit, wdoc, err, sizeof err) < 0)
		json_object_set_new(wdoc, "error", console_text(err, strlen(err)));
	json_object_set_new(doc, "weights", wdoc);
	pg_close(pg);
	json_object_set_new(doc, "took_ms", json_integer(now_ms() - t0));
	respond_json(fd, 200, doc);
	return;
fail:
	err[strcspn(err, "\n")] = '\0';
	pg_close(pg);
	json_object_set_new(doc, "db_error", console_text(err, strlen(err)));
	json_object_set_new(doc, "took_ms", json_integer(now_ms() - t0));
	respond_json(fd, 200, doc);
}

#define CHARTS_SPAN_MS 3600000LL    /* the last hour */
#define CHARTS_STEP_MS 30000LL      /* one point per 30 s */
#define CHARTS_POINTS (CHARTS_SPAN_MS / CHARTS_STEP_MS)
#define CHARTS_ENTRIES_MAX 100000   /* stats entries read per view (10 s x replicas x 1 h) */

struct chart_point {
	uint64_t c, f, r;
	uint64_t h[METRICS_E2E_BUCKETS];
};

/* Adds the comma-separated bucket counts of s[0..n) to h. */
static void add_hist(uint64_t *h, const char *s, size_t n)
{
	size_t i = 0;
	const char *p = s, *end = s + n;
	while (p < end && i < METRICS_E2E_BUCKETS) {
		h[i++] += strtoull(p, NULL, 10);
		const char *comma = memchr(p, ',', (size_t)(end - p));
		if (!comma)
			break;
		p = comma + 1;
	}
}

static json_t *quantile_json(const uint64_t *h, const double *bounds, size_t nb, double q)
{
	double v = console_quantile(h, bounds, nb, q);
	return v < 0 ? json_null() : json_real(v);
}

/* The charts: jobs completed, failed and rejected per second and the end-to-end latency's
 * p50/p90/p99 over the last hour, one point per 30 s, from the workers' stats stream
 * (opsctl_stats; by Redis's clock). One XRANGE of the last hour's entries. */
static void view_charts(struct console *c, int fd)
{
	long long t0 = now_ms();
	char err[512] = "";
	struct rq_sync *r = status_redis_open(&c->cfg, &c->sk, err, sizeof err);
	const char *ta[] = { "TIME" };
	redisReply *x = r ? ccmd(r, 1, ta, err, sizeof err) : NULL;
	if (!x) {
		rq_sync_close(r);
		respond_error(fd, 502, err);
		return;
	}
	long long now = x->type == REDIS_REPLY_ARRAY && x->elements == 2
	                ? strtoll(x->element[0]->str, NULL, 10) * 1000 + strtoll(x->element[1]->str, NULL, 10) / 1000
	                : now_ms();
	freeReplyObject(x);
	/* the points end at now's step boundary; the last one is partial */
	long long end = (now / CHARTS_STEP_MS + 1) * CHARTS_STEP_MS, start = end - CHARTS_SPAN_MS;
	struct chart_point *pt = xcalloc(CHARTS_POINTS, sizeof *pt), all = { 0 };
	size_t nb;
	const double *bounds = metrics_e2e_bounds(&nb);
	long long entries = 0;
	char from[40];
	snprintf(from, sizeof from, "%lld", start);
	while (entries < CHARTS_ENTRIES_MAX) {
		const char *a[] = { "XRANGE", c->sk.stats, from, "+", "COUNT", "1000" };
		if (!(x = ccmd(r, 6, a, err, sizeof err)))
			break;
		size_t n = x->type == REDIS_REPLY_ARRAY ? x->elements : 0;
		for (size_t i = 0; i < n; i++) {
			const redisReply *e = x->element[i];
			if (!entry_ok(e))
				continue;
			long long at = strtoll(e->element[0]->str, NULL, 10);
			long long k = (at - start) / CHARTS_STEP_MS;
			if (k < 0 || k >= CHARTS_POINTS)
				continue;
			const redisReply *f = e->element[1], *v;
			struct chart_point *p = &pt[k];
			uint64_t dc = (v = fieldv(f, "c")) ? strtoull(v->str, NULL, 10) : 0;
			uint64_t df = (v = fieldv(f, "f")) ? strtoull(v->str, NULL, 10) : 0;
			uint64_t dr = (v = fieldv(f, "r")) ? strtoull(v->str, NULL, 10) : 0;
			p->c += dc, p->f += df, p->r += dr;
			if ((v = fieldv(f, "h")))
				add_hist(p->h, v->str, v->len);
		}
		entries += (long long)n;
		if (n < 1000) {
			freeReplyObject(x);
			break;
		}
		snprintf(from, sizeof from, "(%s", x->element[n - 1]->element[0]->str);
		freeReplyObject(x);
	}
	rq_sync_close(r);
	json_t *doc = json_object(), *pts = json_array();
	double secs = CHARTS_STEP_MS / 1000.0;
	for (long long k = 0; k < CHARTS_POINTS; k++) {
		all.c += pt[k].c, all.f += pt[k].f, all.r += pt[k].r;   /* the hour: every point */
		for (size_t b = 0; b < METRICS_E2E_BUCKETS; b++)
			all.h[b] += pt[k].h[b];
		json_t *o = json_object();
		json_object_set_new(o, "t", json_integer(start + k * CHARTS_STEP_MS));
		json_object_set_new(o, "completed", json_real((double)pt[k].c / secs));
		json_object_set_new(o, "failed", json_real((double)pt[k].f / secs));
		json_object_set_new(o, "rejected", json_real((double)pt[k].r / secs));
		json_object_set_new(o, "p50", quantile_json(pt[k].h, bounds, nb, 0.5));
		json_object_set_new(o, "p90", quantile_json(pt[k].h, bounds, nb, 0.9));
		json_object_set_new(o, "p99", quantile_json(pt[k].h, bounds, nb, 0.99));
		json_array_append_new(pts, o);
	}
	free(pt);
	json_t *hour = json_object();
	json_object_set_new(hour, "completed", json_integer((json_int_t)all.c));
	json_object_set_new(hour, "failed", json_integer((json_int_t)all.f));
	json_object_set_new(hour, "rejected", json_integer((json_int_t)all.r));
	json_object_set_new(hour, "p50", quantile_json(all.h, bounds, nb, 0.5));
	json_object_set_new(hour, "p90", quantile_json(all.h, bounds, nb, 0.9));
	json_object_set_new(hour, "p99", quantile_json(all.h, bounds, nb, 0.99));
	json_object_set_new(doc, "hour", hour);
	json_object_set_new(doc, "points", pts);
	json_object_set_new(doc, "step_ms", json_integer(CHARTS_STEP_MS));
	json_object_set_new(doc, "now_ms", json_integer(now));
	json_object_set_new(doc, "entries", json_integer(entries));
	if (err[0])
		json_object_set_new(doc, "error", console_text(err, strlen(err)));
	json_object_set_new(doc, "took_ms", json_integer(now_ms() - t0));
	respond_json(fd, 200, doc);
}

/* ---- actions ---- */

/* Replay: the entry's job fields (without the dead-letter ones) back to the jobs stream
 * and the entry deleted, atomically and byte for byte (scripts/dlq replay). KEYS: dead,
 * jobs. ARGV: entry id. Returns the new id, 0 when no job field is left, nil when gone. */
static const char replay_lua[] =
	"local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])\n"
	"if #e == 0 then return false end\n"
	"local f, args = e[1][2], {}\n"
	"local skip = { reason = true, failed_at = true, original_id = true, worker_id = true }\n"
	"for i = 1, #f, 2 do\n"
	"  if not skip[f[i]] then args[#args + 1] = f[i]; args[#args + 1] = f[i + 1] end\n"
	"end\n"
	"if #args == 0 then return 0 end\n"
	"local id = redis.call('XADD', KEYS[2], '*', unpack(args))\n"
	"redis.call('XDEL', KEYS[1], ARGV[1])\n"
	"return id\n";

/* The dead letter's submission set back from failed to queued (an evaluate job only, as
 * scripts/dlq does). Returns the rows changed, or -1 with err. */
static int reset_failed(struct console *c, struct rq_sync *r, const char *id, char *err,
                        size_t errlen)
{
	const char *a[] = { "XRANGE", c->sk.dead, id, id };
	redisReply *x = ccmd(r, 4, a, err, errlen);
	if (!x)
		return -1;
	char sub[64] = "";
	bool evaluate = true;
	if (x->type == REDIS_REPLY_ARRAY && x->elements == 1 && entry_ok(x->element[0])) {
		const redisReply *s = fieldv(x->element[0]->element[1], "submission_id");
		const redisReply *k = fieldv(x->element[0]->element[1], "kind");
		if (s && s->len < sizeof sub)
			memcpy(sub, s->str, s->len);
		evaluate = !k || (k->len == 8 && !memcmp(k->str, "evaluate", 8));
	}
	freeReplyObject(x);
	if (!evaluate || !console_is_uuid(sub))
		return 0;
	PGconn *pg = pg_open(c, false, err, errlen);
	if (!pg)
		return -1;
	const char *p = sub;
	PGresult *res = PQexecParams(pg, "UPDATE submissions SET status = 'queued', attempts = 0,"
	                             " last_error = NULL WHERE id = $1 AND status = 'failed'",
	                             1, NULL, &p, NULL, NULL, 0);
	int n = -1;
	if (PQresultStatus(res) == PGRES_COMMAND_OK)
		n = atoi(PQcmdTuples(res));
	else
		pg_err(err, errlen, res);
	PQclear(res);
	pg_close(pg);
	return n;
}


/* ---- requeue (scripts/requeue's rules, console_requeue_classify) ---- */

/* XADDs one job per (submission, kind) pair: KEYS 1 the stream; ARGV 1 enqueued_at, 2 elo,
 * 3 rejudge ("1" or ""), then submission id, kind pairs. Returns how many were added. */
static const char requeue_lua[] =
	"local n = 0\n"
	"for i = 4, #ARGV, 2 do\n"
	"  local f = { 'submission_id', ARGV[i], 'kind', ARGV[i + 1], 'enqueued_at', ARGV[1] }\n"
	"  if ARGV[i + 1] == 'reevaluate' then f[#f + 1] = 'elo'; f[#f + 1] = ARGV[2] end\n"
	"  if ARGV[3] == '1' then f[#f + 1] = 'rejudge'; f[#f + 1] = '1' end\n"
	"  redis.call('XADD', KEYS[1], '*', unpack(f))\n"
	"  n = n + 1\n"
	"end\n"
	"return n\n";

/* scripts/requeue's SELECT: id, status, whether it has a result */
#define REQUEUE_SELECT "SELECT s.id::text, s.status, EXISTS (SELECT 1 FROM evaluation_results r" \
                       " WHERE r.submission_id = s.id) FROM submissions s"

struct rq_job {
	char id[40];
	bool reevaluate, reset;
};

/* True when s ends with a time zone (Z, or +hh:mm / -hhmm after the time), as
 * scripts/requeue demands of --from and --to: a zoneless time would be read in the
 * server's zone. */
static bool has_zone(const char *s)
{
	size_t n = strlen(s);
	if (n && (s[n - 1] == 'Z' || s[n - 1] == 'z'))
		return true;
	const char *t = strpbrk(s, "Tt ");
	const char *z = t ? strpbrk(t, "+-") : NULL;
	return z && strlen(z) >= 3 && isdigit((unsigned char)z[1]) && isdigit((unsigned char)z[2]);
}

/* Adds a skipped submission to the report (the first CONSOLE_REQUEUE_REPORT). */
static void requeue_skip(json_t *skipped, long *nskip, const char *id, const char *why)
{
	if ((*nskip)++ < CONSOLE_REQUEUE_REPORT) {
		json_t *o = json_object();
		json_object_set_new(o, "id", console_text(id, strlen(id)));
		json_object_set_new(o, "why", json_string(why));
		json_array_append_new(skipped, o);
	}
}

/* The requeue action: body fields ids (an array of submission ids) | challenge (slug or
 * id) | from + to (submitted_at range, ISO 8601 with a zone); elo keep|adjust, rejudge,
 * include_failed, lane bulk|live, dry_run, confirmed. Without confirmed, a bulk requeue
 * (console_requeue_confirm) is answered 409 with the question in out's "confirm", nothing
 * done. Returns the HTTP code with the outcome in msg. */
static int run_requeue(struct console *c, json_t *body, char *msg, size_t n, json_t *out)
{
	json_t *ids = json_object_get(body, "ids");
	const char *ch = json_string_value(json_object_get(body, "challenge"));
	const char *from = json_string_value(json_object_get(body, "from"));
	const char *to = json_string_value(json_object_get(body, "to"));
	const char *elo = json_string_value(json_object_get(body, "elo"));
	const char *lane = json_string_value(json_object_get(body, "lane"));
	bool rejudge = json_is_true(json_object_get(body, "rejudge"));
	bool include_failed = json_is_true(json_object_get(body, "include_failed"));
	bool dry = json_is_true(json_object_get(body, "dry_run"));
	bool confirmed = json_is_true(json_object_get(body, "confirmed"));
	if (ch && !ch[0])
		ch = NULL;
	if (from && !from[0])
		from = NULL;
	if (to && !to[0])
		to = NULL;
	if (!elo)
		elo = "keep";
	if (!lane)
		lane = "bulk";
	int sel = (json_is_array(ids) && json_array_size(ids) > 0) + (ch != NULL) + (from || to);
	if (sel != 1 || (from && !to) || (to && !from)) {
		snprintf(msg, n, "requeue needs one selection: ids, a challenge, or from and to");
		return 400;
	}
	if (from && (!has_zone(from) || !has_zone(to))) {
		snprintf(msg, n, "from and to must be ISO 8601 timestamps with a time zone "
		         "(e.g. 2025-01-01T00:00:00Z)");
		return 400;
	}
	if (strcmp(elo, "keep") && strcmp(elo, "adjust")) {
		snprintf(msg, n, "elo must be keep or adjust");
		return 400;
	}
	if (strcmp(lane, "bulk") && strcmp(lane, "live")) {
		snprintf(msg, n, "lane must be bulk or live");
		return 400;
	}
	if (json_is_array(ids) && json_array_size(ids) > CONSOLE_REQUEUE_IDS) {
		snprintf(msg, n, "at most %d ids per request", CONSOLE_REQUEUE_IDS);
		return 400;
	}
	const char *stream = !strcmp(lane, "bulk") ? c->sk.bulk : c->sk.jobs;
	json_t *skipped = json_array();
	json_object_set_new(out, "skipped", skipped);
	long nskip = 0;
	char err[512] = "";
	int code = 200;
	struct strbuf arr = { 0 };
	struct rq_job *jobs = NULL;
	long njobs = 0, nre = 0, nreset = 0;
	PGconn *pg = pg_open(c, true, err, sizeof err);
	if (!pg) {
		snprintf(msg, n, "%s", err);
		return 502;
	}
	/* selections are operator actions, not views: a challenge or a time range may take
	 * longer than a view's 2 s (the range is a scan of submissions, as in scripts/requeue) */
	PQclear(PQexec(pg, "SET LOCAL statement_timeout = '60s'"));
	PGresult *res = NULL;
	char lim[24];
	snprintf(lim, sizeof lim, "%d", CONSOLE_REQUEUE_MAX + 1);
	if (json_is_array(ids)) {
		size_t i;
		json_t *v;
		strbuf_addlit(&arr, "{");
		json_array_foreach(ids, i, v) {
			const char *s = json_string_value(v);
			if (!s || !console_is_uuid(s)) {
				requeue_skip(skipped, &nskip, s ? s : "(not a string)", "not a UUID");
				continue;
			}
			strbuf_addf(&arr, "%s%s", arr.len > 1 ? "," : "", s);
		}
		strbuf_addlit(&arr, "}");
		const char *p[] = { arr.buf };
		res = PQexecParams(pg, REQUEUE_SELECT " WHERE s.id = ANY($1::uuid[]) ORDER BY s.submitted_at, s.id",
		                   1, NULL, p, NULL, NULL, 0);
	} else if (ch) {
		const char *p1[] = { ch };
		res = PQexecParams(pg, console_is_uuid(ch)
		                   ? "SELECT id::text FROM challenges WHERE id = $1::uuid OR slug = $1 LIMIT 1"
		                   : "SELECT id::text FROM challenges WHERE slug = $1", 1, NULL, p1, NULL,
		                   NULL, 0);
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 0) {
			snprintf(msg, n, "no challenge with slug or id '%.200s'", ch);
			code = 404;
			goto out;
		}
		if (PQresultStatus(res) == PGRES_TUPLES_OK) {
			char cid[64];
			snprintf(cid, sizeof cid, "%s", PQgetvalue(res, 0, 0));
			PQclear(res);
			const char *p[] = { cid, lim };
			res = PQexecParams(pg, REQUEUE_SELECT " JOIN matches m ON m.id = s.match_id"
			                   " WHERE m.challenge_id = $1::uuid ORDER BY s.submitted_at, s.id"
			                   " LIMIT $2", 2, NULL, p, NULL, NULL, 0);
		}
	} else {
		const char *p[] = { from, to, lim };
		res = PQexecParams(pg, REQUEUE_SELECT " WHERE s.submitted_at >= $1::timestamptz AND s.submitted_at < $2::timestamptz"
		                   " ORDER BY s.submitted_at, s.id LIMIT $3", 3, NULL, p, NULL, NULL, 0);
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_err(msg, n, res);
		code = strstr(msg, "timestamp") || strstr(msg, "time zone") ? 400 : 502;
		goto out;
	}
	if (PQntuples(res) > CONSOLE_REQUEUE_MAX) {
		snprintf(msg, n, "more than %d submissions selected: use scripts/requeue for a "
		         "requeue this large", CONSOLE_REQUEUE_MAX);
		code = 413;
		goto out;
	}
	int nr = PQntuples(res);
	jobs = xcalloc((size_t)nr + 1, sizeof *jobs);
	for (int i = 0; i < nr; i++) {
		const char *why;
		enum console_requeue k = console_requeue_classify(PQgetvalue(res, i, 1),
		                                                  PQgetvalue(res, i, 2)[0] == 't',
		                                                  include_failed, &why);
		if (k == CONSOLE_REQUEUE_SKIP) {
			requeue_skip(skipped, &nskip, PQgetvalue(res, i, 0), why);
			continue;
		}
		struct rq_job *j = &jobs[njobs++];
		snprintf(j->id, sizeof j->id, "%s", PQgetvalue(res, i, 0));
		j->reevaluate = k == CONSOLE_REQUEUE_REEVALUATE;
		j->reset = k == CONSOLE_REQUEUE_RESET;
		nre += j->reevaluate;
		nreset += j->reset;
	}
	if (json_is_array(ids)) {    /* ids that matched no row */
		size_t i;
		json_t *v;
		json_array_foreach(ids, i, v) {
			const char *s = json_string_value(v);
			bool seen = false;
			for (int r = 0; s && console_is_uuid(s) && r < nr && !seen; r++)
				seen = !strcasecmp(PQgetvalue(res, r, 0), s);
			if (s && console_is_uuid(s) && !seen)
				requeue_skip(skipped, &nskip, s, "no such submission");
		}
	}
	PQclear(res);
	res = NULL;
	pg_close(pg);
	pg = NULL;
	json_object_set_new(out, "jobs", json_integer(njobs));
	json_object_set_new(out, "reevaluate", json_integer(nre));
	json_object_set_new(out, "evaluate", json_integer(njobs - nre));
	json_object_set_new(out, "reset_failed", json_integer(nreset));
	json_object_set_new(out, "skipped_count", json_integer(nskip));
	json_object_set_new(out, "stream", json_string(stream));
	char why[300];
	if (dry) {
		snprintf(msg, n, "dry run: would enqueue %ld job%s to %s (reevaluate %ld with elo=%s, "
		         "evaluate %ld); skipped %ld", njobs, njobs == 1 ? "" : "s", stream, nre, elo,
		         njobs - nre, nskip);
		goto out;
	}
	if (!confirmed && console_requeue_confirm(njobs, CONSOLE_REQUEUE_CONFIRM_OVER,
	                                          !strcmp(elo, "adjust"), json_is_array(ids), nre,
	                                          why, sizeof why)) {
		char q[1400];
		snprintf(q, sizeof q, "Enqueue %ld job(s) to %s: %s. Continue?", njobs, stream, why);
		json_object_set_new(out, "confirm", json_string(q));
		snprintf(msg, n, "needs confirmation: %s; nothing enqueued", why);
		code = 409;
		goto out;
	}
	if (nreset > 0) {    /* failed -> queued first, as scripts/requeue does */
		struct strbuf rs = { 0 };
		strbuf_addlit(&rs, "{");
		for (long i = 0; i < njobs; i++)
			if (jobs[i].reset)
				strbuf_addf(&rs, "%s%s", rs.len > 1 ? "," : "", jobs[i].id);
		strbuf_addlit(&rs, "}");
		pg = pg_open(c, false, err, sizeof err);
		const char *p[] = { rs.buf };
		res = pg ? PQexecParams(pg, "UPDATE submissions SET status = 'queued', attempts = 0,"
		                        " last_error = NULL WHERE id = ANY($1::uuid[]) AND status = 'failed'"
		                        " AND NOT EXISTS (SELECT 1 FROM evaluation_results r"
		                        "                 WHERE r.submission_id = submissions.id)"
		                        " RETURNING id::text", 1, NULL, p, NULL, NULL, 0) : NULL;
		strbuf_free(&rs);
		if (!pg || PQresultStatus(res) != PGRES_TUPLES_OK) {
			snprintf(msg, n, "%s", pg ? PQresultErrorMessage(res) : err);
			msg[strcspn(msg, "\n")] = '\0';
			code = 502;
			goto out;
		}
		long kept = 0;
		for (long i = 0; i < njobs; i++) {
			bool ok = !jobs[i].reset;
			for (int r = 0; !ok && r < PQntuples(res); r++)
				ok = !strcasecmp(PQgetvalue(res, r, 0), jobs[i].id);
			if (ok)
				jobs[kept++] = jobs[i];
			else
				requeue_skip(skipped, &nskip, jobs[i].id, "no longer failed (changed meanwhile)");
		}
		njobs = kept;
		PQclear(res);
		res = NULL;
		pg_close(pg);
		pg = NULL;
	}
	struct rq_sync *r = status_redis_open(&c->cfg, &c->sk, err, sizeof err);
	if (!r) {
		snprintf(msg, n, "%s", err);
		code = 502;
		goto out;
	}
	char at[24];
	snprintf(at, sizeof at, "%lld", now_ms());
	long done = 0;
	for (long i = 0; i < njobs && code == 200; i += CONSOLE_REQUEUE_BATCH) {
		long m = njobs - i < CONSOLE_REQUEUE_BATCH ? njobs - i : CONSOLE_REQUEUE_BATCH;
		const char **a = xcalloc((size_t)(7 + 2 * m), sizeof *a);
		int k = 0;
		a[k++] = "EVAL"; a[k++] = requeue_lua; a[k++] = "1"; a[k++] = stream;
		a[k++] = at; a[k++] = elo; a[k++] = rejudge ? "1" : "";
		for (long j = i; j < i + m; j++) {
			a[k++] = jobs[j].id;
			a[k++] = jobs[j].reevaluate ? "reevaluate" : "evaluate";
		}
		redisReply *x = ccmd(r, k, a, err, sizeof err);
		free(a);
		if (!x) {
			snprintf(msg, n, "Redis error after %ld of %ld jobs: %s", done, njobs, err);
			code = 502;
		} else {
			done += x->type == REDIS_REPLY_INTEGER ? (long)x->integer : 0;
			freeReplyObject(x);
		}
	}
	rq_sync_close(r);
	if (code == 200) {
		/* (nre is still right: the reset filter above drops only reset jobs) */
		snprintf(msg, n, "enqueued %ld job%s to %s (reevaluate %ld with elo=%s, evaluate %ld%s); "
		         "skipped %ld", done, done == 1 ? "" : "s", stream, nre, elo, njobs - nre,
		         rejudge ? ", rejudge" : "", nskip);
	}
	json_object_set_new(out, "skipped_count", json_integer(nskip));
out:
	PQclear(res);
	pg_close(pg);
	free(jobs);
	strbuf_free(&arr);
	return code;
}

/* Runs the action of body; *msg gets what was done or why not, out (an object) any
 * further fields of the answer. Returns the HTTP code. */
static int run_action(struct console *c, json_t *body, char *msg, size_t n, json_t *out)
{
	const char *act = json_string_value(json_object_get(body, "action"));
	const char *id = json_string_value(json_object_get(body, "id"));
	const char *ch = json_string_value(json_object_get(body, "challenge"));
	if (ch && !ch[0])
		ch = NULL;
	if (!act) {
		snprintf(msg, n, "no action");
		return 400;
	}
	if (!strcmp(act, "pause") || !strcmp(act, "resume")) {
		bool all = json_is_true(json_object_get(body, "all"));
		int rc = status_pause_set(&c->cfg, !strcmp(act, "resume"), ch, all && !ch, msg, n);
		return rc == 0 ? 200 : 502;
	}
	if (!strcmp(act, "requeue"))
		return run_requeue(c, body, msg, n, out);
	if (strcmp(act, "replay") && strcmp(act, "drop")) {
		snprintf(msg, n, "unknown action");
		return 400;
	}
	if (!id || !console_is_entry_id(id)) {
		snprintf(msg, n, "id must be a dead letter's entry id");
		return 400;
	}
	char err[512] = "";
	struct rq_sync *r = status_redis_open(&c->cfg, &c->sk, err, sizeof err);
	if (!r) {
		snprintf(msg, n, "%s", err);
		return 502;
	}
	int code = 200;
	if (!strcmp(act, "drop")) {
		const char *a[] = { "XDEL", c->sk.dead, id };
		redisReply *x = ccmd(r, 3, a, err, sizeof err);
		if (!x)
			snprintf(msg, n, "%s", err), code = 502;
		else if (x->integer == 0)
			snprintf(msg, n, "no dead letter %s (dropped or replayed meanwhile)", id), code = 404;
		else
			snprintf(msg, n, "dropped %s", id);
		if (x)
			freeReplyObject(x);
	} else {
		int reset = reset_failed(c, r, id, err, sizeof err);
		const char *a[] = { "EVAL", replay_lua, "2", c->sk.dead, c->sk.jobs, id };
		redisReply *x = reset < 0 ? NULL : ccmd(r, 6, a, err, sizeof err);
		if (!x)
			snprintf(msg, n, "%s", err), code = 502;
		else if (x->type == REDIS_REPLY_NIL)
			snprintf(msg, n, "no dead letter %s (dropped or replayed meanwhile)", id), code = 404;
		else if (x->type == REDIS_REPLY_INTEGER)
			snprintf(msg, n, "%s has no job fields left to replay; drop it instead", id), code = 409;
		else
			snprintf(msg, n, "replayed %s -> %s %s%s", id, c->sk.jobs, x->str,
			         reset > 0 ? " (submission set back to queued)" : "");
		if (x)
			freeReplyObject(x);
	}
	rq_sync_close(r);
	return code;
}

/* One action line on stderr (JSON): when, from where, who (X-Arbiter-Operator), what and
 * the outcome; refused attempts too. */
static void log_action(const char *peer, const struct console_request *req, json_t *body,
                       int code, const char *msg)
{
	json_t *l = json_object();
	json_object_set_new(l, "ts_ms", json_integer(now_ms()));
	json_object_set_new(l, "msg", json_string("console action"));
	json_object_set_new(l, "peer", json_string(peer));
	json_object_set_new(l, "operator", console_text(req->operator_name, strlen(req->operator_name)));
	json_object_set(l, "request", body ? body : json_null());
	json_object_set_new(l, "code", json_integer(code));
	json_object_set_new(l, "outcome", console_text(msg, strlen(msg)));
	char *s = json_dumps(l, JSON_COMPACT);
	fprintf(stderr, "%s\n", s ? s : "{}");
	fflush(stderr);
	free(s);
	json_decref(l);
}

static void do_action(struct console *c, int fd, const char *peer,
                      const struct console_request *req, const char *body, size_t blen)
{
	char msg[1024];
	int code;
	json_t *j = json_loadb(body, blen, 0, NULL), *doc = json_object();
	char origin[300];
	snprintf(origin, sizeof origin, "http://%s", req->host);
	if (!c->token[0]) {
		code = 403;
		snprintf(msg, sizeof msg, "the console is read-only: start it with ARBITER_CONSOLE_TOKEN "
		         "or --token-file to allow actions");
	} else if (!console_token_ok(c->token, req->token)) {
		code = 401;
		snprintf(msg, sizeof msg, "missing or wrong X-Arbiter-Token");
	} else if (req->origin[0] && strcmp(req->origin, origin)) {
		code = 403;
		snprintf(msg, sizeof msg, "cross-origin request refused");
	} else if (!json_is_object(j)) {
		code = 400;
		snprintf(msg, sizeof msg, "the body must be a JSON object");
	} else {
		code = run_action(c, j, msg, sizeof msg, doc);
	}
	log_action(peer, req, json_is_object(j) ? j : NULL, code, msg);
	json_decref(j);
	json_object_set_new(doc, code == 200 ? "done" : "error", console_text(msg, strlen(msg)));
	respond_json(fd, code, doc);
}

/* ---- the server ---- */

static void serve(struct console *c, int fd, const char *peer)
{
	char buf[CONSOLE_MAX_HEAD + CONSOLE_MAX_BODY + 1];
	size_t len = 0;
	struct console_request req;
	enum console_parse pr = CONSOLE_INCOMPLETE;
	long long deadline = now_ms() + CONSOLE_IO_TIMEOUT_MS;
	while (len < sizeof buf - 1) {
		if (pr == CONSOLE_INCOMPLETE) {
			pr = console_parse(buf, len, &req);
			if (pr != CONSOLE_INCOMPLETE && pr != CONSOLE_OK)
				break;
		}
		if (pr == CONSOLE_OK &&
		    len - req.head_len >= (size_t)(req.content_length > 0 ? req.content_length : 0))
			break;
		struct pollfd p = { fd, POLLIN, 0 };
		long long left = deadline - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return;
		ssize_t k = recv(fd, buf + len, sizeof buf - 1 - len, 0);
		if (k <= 0)
			return;
		len += (size_t)k;
	}
	if (pr == CONSOLE_INCOMPLETE)
		pr = console_parse(buf, len, &req);
	if (pr == CONSOLE_TOO_LARGE) {
		respond_error(fd, 413, "request too large");
		return;
	}
	if (pr != CONSOLE_OK) {
		respond_error(fd, 400, "bad request");
		return;
	}
	bool get = !strcmp(req.method, "GET"), head = !strcmp(req.method, "HEAD");
	const char *p = req.path;
	if (!strcmp(p, "/api/action")) {
		if (strcmp(req.method, "POST"))
			respond_error(fd, 405, "actions are POST requests");
		else
			do_action(c, fd, peer, &req, buf + req.head_len,
			          req.content_length > 0 ? (size_t)req.content_length : 0);
		return;
	}
	if (!get && !head) {
		respond_error(fd, 405, "read-only path: GET");
		return;
	}
	if (!strcmp(p, "/") || !strcmp(p, "/index.html"))
		respond(fd, 200, "text/html; charset=utf-8", console_index_html, strlen(console_index_html), head);
	else if (!strcmp(p, "/console.js"))
		respond(fd, 200, "text/javascript; charset=utf-8", console_js, strlen(console_js), head);
	else if (!strcmp(p, "/console.css"))
		respond(fd, 200, "text/css; charset=utf-8", console_css, strlen(console_css), head);
	else if (!strcmp(p, "/favicon.ico"))
		respond(fd, 200, "image/x-icon", "", 0, head);    /* none: no 404 in the browser's log */
	else if (!strcmp(p, "/api/overview"))
		view_overview(c, fd);
	else if (!strcmp(p, "/api/submission"))
		view_submission(c, fd, req.query);
	else if (!strcmp(p, "/api/dead"))
		view_dead(c, fd, req.query);
	else if (!strcmp(p, "/api/dead/entry"))
		view_dead_entry(c, fd, req.query);
	else if (!strcmp(p, "/api/charts"))
		view_charts(c, fd);
	else if (!strcmp(p, "/api/standings"))
		view_standings(c, fd, req.query);
	else
		respond_error(fd, 404, "no such page");
}

/* Binds addr ("host:port", "[v6]:port"). Returns the socket, or -1 with err. */
static int listen_on(const char *addr, int *port, char *err, size_t errlen)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	if (!colon || !colon[1] || (size_t)(colon - addr) >= sizeof host) {
		snprintf(err, errlen, "--listen: '%s' is not host:port", addr);
		return -1;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
	                          .ai_flags = AI_PASSIVE }, *ai;
	int e = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai);
	if (e) {
		snprintf(err, errlen, "--listen %s: %s", addr, gai_strerror(e));
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0) {
		snprintf(err, errlen, "--listen %s: %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
	                                      : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

/* The token: ARBITER_CONSOLE_TOKEN, or the first line of file. Returns 0 (token "" when
 * neither is given) or -1 with err. */
static int load_token(const char *file, char *token, size_t n, char *err, size_t errlen)
{
	const char *env = getenv("ARBITER_CONSOLE_TOKEN");
	token[0] = '\0';
	if (file) {
		FILE *f = fopen(file, "r");
		if (!f || !fgets(token, (int)n, f)) {
			snprintf(err, errlen, "--token-file %s: %s", file, f ? "empty" : strerror(errno));
			if (f)
				fclose(f);
			return -1;
		}
		fclose(f);
		token[strcspn(token, "\r\n")] = '\0';
	} else if (env) {
		snprintf(token, n, "%s", env);
	}
	if (token[0] && strlen(token) < CONSOLE_TOKEN_MIN) {
		snprintf(err, errlen, "the console token must be at least %d characters", CONSOLE_TOKEN_MIN);
		return -1;
	}
	return 0;
}

static void console_usage(FILE *f)
{
	fprintf(f, "usage: arbiter console [--listen HOST:PORT] [--token-file FILE] [--config FILE]\n"
	           "                       [--redis-url URL] [--database-url URL] [--prefix P]\n"
	           "  The operator console in a browser: overview and charts, a submission's\n"
	           "  story, dead letters, standings. Listens on " CONSOLE_DEFAULT_LISTEN " by default\n"
	           "  (loopback; port 0 picks one). Read-only unless a token is given\n"
	           "  (ARBITER_CONSOLE_TOKEN or --token-file, at least 16 characters): then\n"
	           "  replay/drop dead letters, requeue and pause/resume, by POST with the\n"
	           "  X-Arbiter-Token header.\n");
}

int cmd_console(int argc, char **argv)
{
	char **args = xcalloc((size_t)argc + 1, sizeof(char *));
	int nargs = 0, rc;
	const char *listen_addr = CONSOLE_DEFAULT_LISTEN, *token_file = NULL;
	char err[768];
	struct console c;
	memset(&c, 0, sizeof c);
	for (int i = 0; i < argc; i++) {
		if (i > 0 && (!strcmp(argv[i], "--listen") || !strcmp(argv[i], "--token-file")) &&
		    i + 1 < argc) {
			*(argv[i][2] == 'l' ? &listen_addr : &token_file) = argv[i + 1];
			i++;
		} else if (i > 0 && (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))) {
			console_usage(stdout);
			free(args);
			return 0;
		} else {
			args[nargs++] = argv[i];
		}
	}
	rc = config_load(nargs, args, &c.cfg, err, sizeof err);
	free(args);
	if (rc != 0) {
		if (rc < 0)
			config_report("console", err);
		return rc < 0 ? 2 : 0;
	}
	if (config_validate(&c.cfg, err, sizeof err) < 0 ||
	    status_keys(&c.cfg, &c.sk, err, sizeof err) < 0 ||
	    load_token(token_file, c.token, sizeof c.token, err, sizeof err) < 0) {
		config_report("console", err);
		config_free(&c.cfg);
		return 2;
	}
	int port;
	c.lfd = listen_on(listen_addr, &port, err, sizeof err);
	if (c.lfd < 0) {
		fprintf(stderr, "arbiter console: %s\n", err);
		config_free(&c.cfg);
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	char shown[300];
	snprintf(shown, sizeof shown, "%.*s:%d", (int)(strrchr(listen_addr, ':') - listen_addr),
	         listen_addr, port);
	fprintf(stderr, "arbiter console: listening on http://%s/ (%s)\n", shown,
	        c.token[0] ? "actions enabled with the token" : "read-only");
	fflush(stderr);
	while (!stopping) {
		struct pollfd p = { c.lfd, POLLIN, 0 };
		if (poll(&p, 1, 1000) <= 0)
			continue;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		int fd = accept4(c.lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct timeval tv = { CONSOLE_IO_TIMEOUT_MS / 1000, 0 };
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		char peer[INET6_ADDRSTRLEN + 8] = "?";
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, peer, sizeof peer);
		else if (ss.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, peer, sizeof peer);
		serve(&c, fd, peer);
		shutdown(fd, SHUT_WR);
		close(fd);
	}
	close(c.lfd);
	config_free(&c.cfg);
	return 0;
}
