/*
 * Tests for worker/pgc.c against a real PostgreSQL (run under test/services.py, which exports
 * ARBITER_TEST_DATABASE_URL and ARBITER_TEST_PGDATA): simple queries, a 1,000-statement
 * pipeline, a transaction across two sends, rollback on release, an error mid-pipeline, a
 * deadlock classified transient, a query timeout, more waiters than connections, pgc_run's
 * connection-wait timeout, host name resolution, pool close, and a PostgreSQL restart in the
 * middle of work (the test stops the postmaster and starts its own, then stops it at the end).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "log.h"
#include "metrics.h"
#include "pgc.h"
#include "tap.h"
#include "util.h"

static uv_loop_t *loop;
static const char *dburl;

/* Runs the loop until *flag >= want or ms pass. A repeating guard timer keeps uv_run from
 * blocking forever. */
static void guard_cb(uv_timer_t *t) { (void)t; }
static bool run_until(const int *flag, int want, uint64_t ms)
{
	uv_timer_t guard;
	uv_timer_init(loop, &guard);
	uv_timer_start(&guard, guard_cb, 10, 10);
	uv_update_time(loop);
	uint64_t end = uv_now(loop) + ms;
	while (*flag < want && uv_now(loop) < end)
		uv_run(loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&guard, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
	return *flag >= want;
}

static void sleep_ms(int ms)
{
	int never = 0;
	run_until(&never, 1, (uint64_t)ms);
}

static bool wait_ready(struct pgc_pool *p, uint64_t ms)
{
	uv_update_time(loop);
	uint64_t end = uv_now(loop) + ms;
	while (!pgc_pool_ready(p) && uv_now(loop) < end)
		sleep_ms(20);
	return pgc_pool_ready(p);
}

static void pool_closed(void *data) { (*(int *)data)++; }

static void close_pool(struct pgc_pool *p)
{
	int closed = 0;
	pgc_pool_close(p, pool_closed, &closed);
	ok(run_until(&closed, 1, 5000), "pool closed (done callback ran)");
}

static struct pgc_pool *new_pool(const char *url, int size, uint32_t query_ms)
{
	struct pgc_opts o = { .conninfo = url, .size = size, .connect_timeout_ms = 2000,
	                      .query_timeout_ms = query_ms };
	struct pgc_pool *p = NULL;
	if (pgc_pool_new(loop, &o, &p) < 0)
		return NULL;
	return p;
}

/* A captured result: the first value of each statement's first row, and the error. */
struct cap {
	int done;
	int nres;
	char vals[8][64];
	int ntuples[8];
	char err[512];
	char sqlstate[6];
	bool transient;
	bool failed;
};

static void capture(const struct pgc_result *r, void *data)
{
	struct cap *c = data;
	c->nres = r->nres;
	for (int i = 0; i < r->nres && i < 8; i++) {
		c->ntuples[i] = PQntuples(r->res[i]);
		if (PQntuples(r->res[i]) > 0 && PQnfields(r->res[i]) > 0)
			snprintf(c->vals[i], sizeof c->vals[i], "%s",
			         PQgetisnull(r->res[i], 0, 0) ? "NULL" : PQgetvalue(r->res[i], 0, 0));
	}
	c->failed = r->err != NULL;
	snprintf(c->err, sizeof c->err, "%s", r->err ? r->err : "");
	memcpy(c->sqlstate, r->sqlstate, sizeof c->sqlstate);
	c->transient = r->transient;
	c->done++;
}

/* pgc_run of one statement, waiting for its result. */
static void run1(struct pgc_pool *p, const char *sql, int np, const char *const *params,
                 struct cap *c, uint64_t ms)
{
	struct pgc_stmt s = { sql, np, params };
	memset(c, 0, sizeof *c);
	if (pgc_run(p, &s, 1, capture, c) < 0) {
		snprintf(c->err, sizeof c->err, "pgc_run returned -1");
		c->failed = true;
		return;
	}
	if (!run_until(&c->done, 1, ms)) {
		snprintf(c->err, sizeof c->err, "no callback within %llu ms", (unsigned long long)ms);
		c->failed = true;
	}
}

/* Blocking helper for set-up/inspection (outside the loop's work: tests only). */
static char *sync_value(const char *sql)
{
	PGconn *pg = PQconnectdb(dburl);
	char *out = NULL;
	if (PQstatus(pg) == CONNECTION_OK) {
		PGresult *r = PQexec(pg, sql);
		ExecStatusType st = PQresultStatus(r);
		if (st == PGRES_TUPLES_OK && PQntuples(r) > 0)
			out = xstrdup(PQgetvalue(r, 0, 0));
		else if (st == PGRES_COMMAND_OK)
			out = xstrdup("");
		else
			diag("sync_value(%s): %s", sql, PQresultErrorMessage(r));
		PQclear(r);
	}
	PQfinish(pg);
	return out;
}

static void sync_exec(const char *sql)
{
	free(sync_value(sql));
}

/* ---- simple queries ------------------------------------------------------------------- */

static void test_simple(struct pgc_pool *p)
{
	struct cap c;
	const char *params[] = { "41" };
	run1(p, "SELECT $1::int + 1", 1, params, &c, 5000);
	ok(!c.failed, "simple query succeeds (%s)", c.err);
	is_str(c.vals[0], "42", "simple query result");

	const char *nullp[] = { NULL };
	run1(p, "SELECT $1::text IS NULL", 1, nullp, &c, 5000);
	is_str(c.vals[0], "t", "NULL parameter reaches SQL as NULL");

	run1(p, "SELECT current_setting('application_name') || ' ' || "
	        "current_setting('client_connection_check_interval')", 0, NULL, &c, 5000);
	is_str(c.vals[0], "arbiter 1s", "session: application_name and client_connection_check_interval");

	const char *inj[] = { "x'); DROP TABLE pgc_t; --" };
	run1(p, "SELECT length($1)", 1, inj, &c, 5000);
	is_str(c.vals[0], "25", "parameter text is data, never SQL");
}

/* ---- prepared statements (pgc_pool_prepare) -------------------------------------------- */

#define PREP_SQL "SELECT $1::int * 2"
#define PREP_BAD "SELECT no_such_column_pgc FROM pg_class WHERE relname = $1"
#define PREP_COUNT "SELECT count(*) FROM pg_prepared_statements WHERE statement = '" PREP_SQL "'"

struct prep { int got; struct pgc_conn *conn; };
static void prep_acq(struct pgc_conn *c, void *data) { struct prep *x = data; x->conn = c; x->got++; }

/* One pgc_send on c, waited for. */
static void send_wait(struct pgc_conn *c, const struct pgc_stmt *s, int n, struct cap *cap)
{
	memset(cap, 0, sizeof *cap);
	if (pgc_send(c, s, n, capture, cap) < 0 || !run_until(&cap->done, 1, 5000)) {
		cap->failed = true;
		snprintf(cap->err, sizeof cap->err, "no result");
	}
}

static void test_prepared(struct pgc_pool *p)
{
	static const char *two[] = { "21" }, *three[] = { "3" }, *rel[] = { "pg_class" };
	struct prep x = { 0 };
	struct cap c;

	ok(pgc_pool_prepare(p, PREP_SQL) == 0 && pgc_pool_prepare(p, PREP_BAD) == 0 &&
	   pgc_pool_prepare(p, PREP_SQL) == 0, "texts registered (twice is harmless)");
	ok(pgc_acquire(p, prep_acq, &x) == 0 && run_until(&x.got, 1, 5000), "acquire");
	/* The same text twice in one pipeline, then what the session holds. */
	struct pgc_stmt s1[] = {
		{ PREP_SQL, 1, two }, { PREP_SQL, 1, three }, { PREP_COUNT, 0, NULL },
	};
	send_wait(x.conn, s1, 3, &c);
	ok(!c.failed, "prepared statement runs (%s)", c.err);
	is_str(c.vals[0], "42", "first execution's result");
	is_str(c.vals[1], "6", "second execution's result (same pipeline)");
	is_str(c.vals[2], "1", "prepared once on the connection");
	send_wait(x.conn, s1, 3, &c);
	ok(!c.failed && !strcmp(c.vals[0], "42") && !strcmp(c.vals[2], "1"),
	   "next send: executed by name, not prepared again (%s)", c.err);

	/* A text that cannot be prepared: the error is the statement's, the next one runs. */
	struct pgc_stmt s2[] = { { PREP_BAD, 1, rel }, { PREP_SQL, 1, two } };
	send_wait(x.conn, s2, 2, &c);
	ok(c.failed && strstr(c.err, "no_such_column_pgc") && c.nres == 0,
	   "a failing prepare is reported as its statement's error (%s)", c.err);
	struct pgc_stmt s3[] = { { PREP_SQL, 1, two } };
	send_wait(x.conn, s3, 1, &c);
	ok(!c.failed && !strcmp(c.vals[0], "42"), "the connection goes on (%s)", c.err);
	send_wait(x.conn, s2, 2, &c);
	ok(c.failed && strstr(c.err, "no_such_column_pgc"), "and the bad text is tried again");

	/* A new server connection has no prepared statements: they are made again. */
	struct pgc_stmt pid[] = { { "SELECT pg_backend_pid()", 0, NULL } };
	send_wait(x.conn, pid, 1, &c);
	char kill[128];
	snprintf(kill, sizeof kill, "SELECT pg_terminate_backend(%s)", c.vals[0]);
	pgc_release(x.conn);
	sync_exec(kill);
	bool fine = false;
	for (int i = 0; i < 40 && !fine; i++) {
		run1(p, PREP_SQL, 1, two, &c, 5000);
		fine = !c.failed && !strcmp(c.vals[0], "42");
		if (!fine && !c.transient) {
			diag("after a reconnect: %s", c.err);
			break;
		}
		if (!fine)
			sleep_ms(50);
	}
	ok(fine, "after the server connection is lost, the text is prepared again (%s)", c.err);
}

/* ---- 1,000 statements in one pipeline ------------------------------------------------- */

struct bulk { int got; struct pgc_conn *conn; struct cap cap; int nres; };

static void bulk_acquired(struct pgc_conn *c, void *data) { struct bulk *b = data; b->conn = c; b->got++; }
static void bulk_done(const struct pgc_result *r, void *data)
{
	struct bulk *b = data;
	b->nres = r->nres;
	capture(r, &b->cap);
}

static void test_pipeline_1000(struct pgc_pool *p)
{
	sync_exec("CREATE TABLE pgc_t (id serial PRIMARY KEY, v text)");
	struct bulk b = { 0 };
	ok(pgc_acquire(p, bulk_acquired, &b) == 0, "acquire");
	ok(run_until(&b.got, 1, 5000) && b.conn, "acquired a connection");

	enum { N = 1000 };
	struct pgc_stmt *s = xcalloc(N + 2, sizeof *s);
	char (*vals)[16] = xcalloc(N, sizeof *vals);
	const char **pv = xcalloc(N, sizeof *pv);
	s[0].sql = "BEGIN";
	for (int i = 0; i < N; i++) {
		snprintf(vals[i], sizeof vals[i], "v%d", i);
		pv[i] = vals[i];
		s[i + 1].sql = "INSERT INTO pgc_t (v) VALUES ($1)";
		s[i + 1].nparams = 1;
		s[i + 1].params = &pv[i];
	}
	s[N + 1].sql = "COMMIT";
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok(pgc_send(b.conn, s, N + 2, bulk_done, &b) == 0, "pgc_send of 1002 statements");
	free(s);   /* pgc_send copies everything it needs before returning */
	free(vals);
	free(pv);
	ok(run_until(&b.cap.done, 1, 20000), "pipeline completed");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ok(!b.cap.failed, "no error (%s)", b.cap.err);
	is_int(b.nres, N + 2, "one result per statement");
	diag("1,000 INSERTs + BEGIN/COMMIT in one pipeline: %.1f ms",
	     (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	pgc_release(b.conn);

	struct cap c;
	run1(p, "SELECT count(*) FROM pgc_t", 0, NULL, &c, 5000);
	is_str(c.vals[0], "1000", "1,000 rows committed");
}

/* ---- a transaction across two pgc_send calls; rollback on release --------------------- */

struct tx { int step; struct pgc_conn *conn; struct cap a, b; };

static void tx_second(const struct pgc_result *r, void *data)
{
	struct tx *t = data;
	capture(r, &t->b);
	t->step++;
}

static void tx_first(const struct pgc_result *r, void *data)
{
	struct tx *t = data;
	capture(r, &t->a);
	t->step++;
	if (r->err)
		return;
	static const char *params[] = { "second" };
	static const struct pgc_stmt s[] = {
		{ "INSERT INTO pgc_t (v) VALUES ($1)", 1, params },
		{ "COMMIT", 0, NULL },
	};
	if (pgc_send(t->conn, s, 2, tx_second, t) < 0)
		t->step = 100;
}

static void tx_acquired(struct pgc_conn *c, void *data)
{
	struct tx *t = data;
	t->conn = c;
	static const char *params[] = { "first" };
	static const struct pgc_stmt s[] = {
		{ "BEGIN", 0, NULL },
		{ "INSERT INTO pgc_t (v) VALUES ($1)", 1, params },
	};
	if (pgc_send(c, s, 2, tx_first, t) < 0)
		t->step = 100;
}

static void test_transaction(struct pgc_pool *p)
{
	struct tx t = { 0 };
	sync_exec("TRUNCATE pgc_t");
	ok(pgc_acquire(p, tx_acquired, &t) == 0, "acquire for a transaction");
	ok(run_until(&t.step, 2, 5000), "two sends completed");
	ok(!t.a.failed && !t.b.failed, "BEGIN+INSERT, then INSERT+COMMIT succeed");
	/* Not committed between the two sends from another session's view is hard to observe
	 * here; the count after COMMIT shows both inserts landed in one transaction. */
	char *n = sync_value("SELECT count(*) FROM pgc_t WHERE v IN ('first', 'second')");
	is_str(n, "2", "both rows committed");
	free(n);
	pgc_release(t.conn);
}

struct rb { int step; struct pgc_conn *conn; struct cap cap; };

static void rb_sent(const struct pgc_result *r, void *data) { struct rb *x = data; capture(r, &x->cap); x->step++; }
static void rb_acquired(struct pgc_conn *c, void *data)
{
	struct rb *x = data;
	x->conn = c;
	static const struct pgc_stmt s[] = {
		{ "BEGIN", 0, NULL },
		{ "INSERT INTO pgc_t (v) VALUES ('uncommitted')", 0, NULL },
	};
	pgc_send(c, s, 2, rb_sent, x);
}

static void test_rollback_on_release(void)
{
	/* A pool of one, so the next user gets the very same connection. */
	struct pgc_pool *p = new_pool(dburl, 1, 5000);
	ok(p && wait_ready(p, 5000), "pool of one ready");
	struct rb x = { 0 };
	pgc_acquire(p, rb_acquired, &x);
	ok(run_until(&x.step, 1, 5000) && !x.cap.failed, "BEGIN + INSERT sent (%s)", x.cap.err);
	pgc_release(x.conn);   /* transaction still open */
	struct cap c;
	run1(p, "SELECT count(*) FROM pgc_t WHERE v = 'uncommitted'", 0, NULL, &c, 5000);
	ok(!c.failed, "same connection usable after release (%s)", c.err);
	is_str(c.vals[0], "0", "release rolled the open transaction back");
	run1(p, "SELECT 1", 0, NULL, &c, 5000);
	is_str(c.vals[0], "1", "and is no longer inside a transaction");

	/* An error inside an explicit transaction leaves it aborted: release rolls back too. */
	memset(&x, 0, sizeof x);
	pgc_acquire(p, rb_acquired, &x);
	ok(run_until(&x.step, 1, 5000), "second transaction opened");
	struct cap e = { 0 };
	static const struct pgc_stmt bad = { "SELECT 1/0", 0, NULL };
	pgc_send(x.conn, &bad, 1, capture, &e);
	ok(run_until(&e.done, 1, 5000) && e.failed, "division by zero inside the transaction");
	pgc_release(x.conn);
	run1(p, "SELECT count(*) FROM pgc_t WHERE v = 'uncommitted'", 0, NULL, &c, 5000);
	ok(!c.failed && !strcmp(c.vals[0], "0"), "aborted transaction rolled back on release (%s)", c.err);
	close_pool(p);
}

/* ---- an error in the middle of a pipeline --------------------------------------------- */

struct mid { int step; struct pgc_conn *conn; struct cap cap, after; };
static void mid_after(const struct pgc_result *r, void *data) { struct mid *m = data; capture(r, &m->after); m->step++; }
static void mid_done(const struct pgc_result *r, void *data)
{
	struct mid *m = data;
	capture(r, &m->cap);
	m->step++;
	static const struct pgc_stmt s = { "SELECT 'still usable'", 0, NULL };
	pgc_send(m->conn, &s, 1, mid_after, m);
}
static void mid_acquired(struct pgc_conn *c, void *data)
{
	struct mid *m = data;
	m->conn = c;
	static const struct pgc_stmt s[] = {
		{ "SELECT 1", 0, NULL },
		{ "SELECT 2", 0, NULL },
		{ "SELECT 1/0", 0, NULL },
		{ "INSERT INTO pgc_t (v) VALUES ('skipped')", 0, NULL },
		{ "SELECT 5", 0, NULL },
	};
	pgc_send(c, s, 5, mid_done, m);
}

static void test_error_mid_pipeline(struct pgc_pool *p)
{
	struct mid m = { 0 };
	pgc_acquire(p, mid_acquired, &m);
	ok(run_until(&m.step, 2, 5000), "pipeline with an error completed, then a follow-up");
	ok(m.cap.failed, "error reported");
	is_str(m.cap.sqlstate, "22012", "SQLSTATE of the failing statement");
	ok(strstr(m.cap.err, "division by zero") != NULL, "message: %s", m.cap.err);
	is_int(m.cap.nres, 2, "results of the statements before the error");
	is_str(m.cap.vals[1], "2", "second statement's value");
	ok(!m.cap.transient, "a division by zero is not transient");
	ok(!m.after.failed, "connection usable after the error (%s)", m.after.err);
	is_str(m.after.vals[0], "still usable", "follow-up result");
	pgc_release(m.conn);
	char *n = sync_value("SELECT count(*) FROM pgc_t WHERE v = 'skipped'");
	is_str(n, "0", "statements after the error were skipped");
	free(n);
}

/* ---- deadlock → transient ------------------------------------------------------------- */

struct dl { int acquired, step, done; struct pgc_conn *a, *b; struct cap ca, cb; };

static void dl_a_acq(struct pgc_conn *c, void *data) { struct dl *d = data; d->a = c; d->acquired++; }
static void dl_b_acq(struct pgc_conn *c, void *data) { struct dl *d = data; d->b = c; d->acquired++; }
static void dl_step(const struct pgc_result *r, void *data)
{
	struct dl *d = data;
	if (r->err)
		diag("deadlock set-up failed: %s", r->err);
	d->step++;
}
static void dl_a_done(const struct pgc_result *r, void *data) { struct dl *d = data; capture(r, &d->ca); d->done++; }
static void dl_b_done(const struct pgc_result *r, void *data) { struct dl *d = data; capture(r, &d->cb); d->done++; }

static void test_deadlock(struct pgc_pool *p)
{
	sync_exec("CREATE TABLE pgc_d (id int PRIMARY KEY, v int)");
	sync_exec("INSERT INTO pgc_d VALUES (1, 0), (2, 0)");
	struct dl d = { 0 };
	pgc_acquire(p, dl_a_acq, &d);
	pgc_acquire(p, dl_b_acq, &d);
	ok(run_until(&d.acquired, 2, 5000), "two connections reserved");
	static const struct pgc_stmt a1[] = { { "BEGIN", 0, NULL }, { "UPDATE pgc_d SET v = 1 WHERE id = 1", 0, NULL } };
	static const struct pgc_stmt b1[] = { { "BEGIN", 0, NULL }, { "UPDATE pgc_d SET v = 2 WHERE id = 2", 0, NULL } };
	pgc_send(d.a, a1, 2, dl_step, &d);
	pgc_send(d.b, b1, 2, dl_step, &d);
	ok(run_until(&d.step, 2, 5000), "each holds one row lock");
	static const struct pgc_stmt a2[] = { { "UPDATE pgc_d SET v = 1 WHERE id = 2", 0, NULL }, { "COMMIT", 0, NULL } };
	static const struct pgc_stmt b2[] = { { "UPDATE pgc_d SET v = 2 WHERE id = 1", 0, NULL }, { "COMMIT", 0, NULL } };
	pgc_send(d.a, a2, 2, dl_a_done, &d);
	sleep_ms(100);
	pgc_send(d.b, b2, 2, dl_b_done, &d);
	ok(run_until(&d.done, 2, 10000), "both finished (one was chosen as the deadlock victim)");
	struct cap *victim = d.ca.failed ? &d.ca : &d.cb, *other = d.ca.failed ? &d.cb : &d.ca;
	ok(victim->failed && !other->failed, "exactly one failed (%s / %s)", d.ca.err, d.cb.err);
	is_str(victim->sqlstate, "40P01", "deadlock_detected");
	ok(victim->transient, "a deadlock is transient");
	pgc_release(d.a);
	pgc_release(d.b);
}

/* ---- serialization failure → transient ------------------------------------------------ */

static void test_serialization(struct pgc_pool *p)
{
	struct dl d = { 0 };
	pgc_acquire(p, dl_a_acq, &d);
	pgc_acquire(p, dl_b_acq, &d);
	ok(run_until(&d.acquired, 2, 5000), "two connections reserved");
	static const struct pgc_stmt a1[] = {
		{ "BEGIN ISOLATION LEVEL REPEATABLE READ", 0, NULL },
		{ "SELECT v FROM pgc_d WHERE id = 1", 0, NULL },
	};
	pgc_send(d.a, a1, 2, dl_step, &d);
	ok(run_until(&d.step, 1, 5000), "A took its snapshot");
	static const struct pgc_stmt b1[] = { { "UPDATE pgc_d SET v = v + 10 WHERE id = 1", 0, NULL } };
	pgc_send(d.b, b1, 1, dl_step, &d);
	ok(run_until(&d.step, 2, 5000), "B updated the row and committed");
	static const struct pgc_stmt a2[] = { { "UPDATE pgc_d SET v = v + 1 WHERE id = 1", 0, NULL } };
	pgc_send(d.a, a2, 1, dl_a_done, &d);
	ok(run_until(&d.done, 1, 5000), "A's update finished");
	is_str(d.ca.sqlstate, "40001", "serialization_failure");
	ok(d.ca.transient, "a serialization failure is transient");
	pgc_release(d.a);
	pgc_release(d.b);
}

/* ---- query timeout -------------------------------------------------------------------- */

static void test_query_timeout(void)
{
	struct pgc_pool *p = new_pool(dburl, 1, 300);
	ok(p && wait_ready(p, 5000), "pool with a 300 ms query timeout ready");
	struct cap c;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	run1(p, "SELECT pg_sleep(5)", 0, NULL, &c, 4000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	ok(c.done && c.failed, "pg_sleep(5) failed (%s)", c.err);
	ok(strstr(c.err, "timeout") != NULL, "with a timeout message");
	ok(c.transient, "a timeout is transient");
	/* Well before the 5 s sleep; ARBITER_TEST_SLOW widens the bound, never past it. */
	double bound = 1500.0 * test_slow();
	ok(ms < (bound < 4500 ? bound : 4500), "reported after %.0f ms", ms);
	/* The pool reconnects by itself. */
	ok(wait_ready(p, 5000), "pool ready again");
	run1(p, "SELECT 'back'", 0, NULL, &c, 5000);
	is_str(c.vals[0], "back", "query after the timeout succeeds (%s)", c.err);
	/* client_connection_check_interval makes the server abandon the sleeping backend. */
	char *n = NULL;
	for (int i = 0; i < 30; i++) {
		free(n);
		n = sync_value("SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(5)'");
		if (n && !strcmp(n, "0"))
			break;
		usleep(100 * 1000);
	}
	is_str(n, "0", "the server ended the timed-out statement early");
	free(n);
	close_pool(p);
}

/* ---- session settings in the startup packet (#16) -------------------------------------- */

/* statement_timeout (and lock_timeout) come with the connection, so an operator's
 * role-level setting cannot stall the worker; a slow statement is cancelled by the
 * server (57014) before the client's own timeout, and the connection survives. */
static void test_session_settings(void)
{
	sync_exec("ALTER ROLE CURRENT_USER SET statement_timeout = '1h'");
	sync_exec("ALTER ROLE CURRENT_USER SET lock_timeout = 0");
	struct pgc_opts o = { .conninfo = dburl, .size = 1, .connect_timeout_ms = 2000,
	                      .query_timeout_ms = 2000, .lock_timeout_ms = 750 };
	struct pgc_pool *p = NULL;
	ok(pgc_pool_new(loop, &o, &p) == 0 && wait_ready(p, 5000), "pool ready");
	struct cap c;
	run1(p, "SHOW statement_timeout", 0, NULL, &c, 5000);
	is_str(c.vals[0], "1800ms", "statement_timeout 9/10 of the query timeout despite the role's 1h");
	run1(p, "SHOW lock_timeout", 0, NULL, &c, 5000);
	is_str(c.vals[0], "750ms", "lock_timeout as configured despite the role's 0");
	run1(p, "SELECT pg_backend_pid()::text", 0, NULL, &c, 5000);
	char pid[64];
	snprintf(pid, sizeof pid, "%s", c.vals[0]);
	run1(p, "SELECT pg_sleep(4)", 0, NULL, &c, 6000);
	ok(c.failed && !strcmp(c.sqlstate, "57014"), "a slow statement is cancelled by the server "
	   "(SQLSTATE %s: %s)", c.sqlstate, c.err);
	ok(c.transient, "and is transient");
	run1(p, "SELECT pg_backend_pid()::text", 0, NULL, &c, 5000);
	is_str(c.vals[0], pid, "the same connection goes on (no reconnect)");
	close_pool(p);
	sync_exec("ALTER ROLE CURRENT_USER RESET statement_timeout");
	sync_exec("ALTER ROLE CURRENT_USER RESET lock_timeout");
}

/* ---- a session that refused a write as read-only is replaced --------------------------- */

/* ALTER ROLE/DATABASE ... SET default_transaction_read_only reaches only sessions that
 * start afterwards, and its RESET likewise: a session opened while it was on refuses
 * writes for its whole life. pgc replaces a session that refused a write (25006). */
static void test_read_only_renewed(void)
{
	sync_exec("ALTER ROLE CURRENT_USER SET default_transaction_read_only = on");
	struct pgc_pool *p = new_pool(dburl, 1, 5000);
	ok(p && wait_ready(p, 5000), "pool of 1 ready (its session read-only)");
	struct cap c;
	run1(p, "SELECT pg_backend_pid()::text", 0, NULL, &c, 5000);
	char pid[64];
	snprintf(pid, sizeof pid, "%s", c.vals[0]);
	run1(p, "CREATE TABLE pgc_ro_probe (x int)", 0, NULL, &c, 5000);
	ok(c.failed && !strcmp(c.sqlstate, "25006"), "a write is refused as read-only (SQLSTATE %s: %s)",
	   c.sqlstate, c.err);
	sync_exec("BEGIN READ WRITE; ALTER ROLE CURRENT_USER RESET default_transaction_read_only; COMMIT");
	run1(p, "SELECT pg_backend_pid()::text", 0, NULL, &c, 5000);
	ok(!c.failed && strcmp(c.vals[0], pid) != 0, "the next statement runs on a new session "
	   "(backend %s, was %s)", c.vals[0], pid);
	run1(p, "SHOW transaction_read_only", 0, NULL, &c, 5000);
	is_str(c.vals[0], "off", "which takes writes after the RESET");
	run1(p, "CREATE TABLE pgc_ro_probe (x int)", 0, NULL, &c, 5000);
	ok(!c.failed, "the write goes through (%s)", c.err);
	run1(p, "DROP TABLE pgc_ro_probe", 0, NULL, &c, 5000);
	close_pool(p);
}

/* ---- more waiters than connections ---------------------------------------------------- */

#define NW 12
struct wt {
	int done, active, max_active;
	int order[NW], norder;
	struct pgc_conn *conns[NW];
	int idx[NW];
};
static struct wt wt;

static void wt_done(const struct pgc_result *r, void *data)
{
	int i = *(int *)data;
	if (r->err)
		diag("waiter %d: %s", i, r->err);
	wt.active--;
	pgc_release(wt.conns[i]);
	wt.done++;
}
static void wt_acq(struct pgc_conn *c, void *data)
{
	int i = *(int *)data;
	wt.conns[i] = c;
	wt.order[wt.norder++] = i;
	if (++wt.active > wt.max_active)
		wt.max_active = wt.active;
	static const struct pgc_stmt s = { "SELECT pg_sleep(0.03)", 0, NULL };
	pgc_send(c, &s, 1, wt_done, data);
}

static int run_done_count;
static int run_fail_count;
static void run_count(const struct pgc_result *r, void *data)
{
	(void)data;
	if (r->err)
		run_fail_count++;
	run_done_count++;
}

static void test_waiters(void)
{
	struct pgc_pool *p = new_pool(dburl, 3, 5000);
	ok(p && wait_ready(p, 5000), "pool of 3 ready");
	memset(&wt, 0, sizeof wt);
	for (int i = 0; i < NW; i++) {
		wt.idx[i] = i;
		pgc_acquire(p, wt_acq, &wt.idx[i]);
	}
	ok(run_until(&wt.done, NW, 10000), "%d waiters on 3 connections all served", NW);
	ok(wt.max_active <= 3, "never more than 3 reserved at once (max %d)", wt.max_active);
	bool fifo = true;
	for (int i = 0; i < wt.norder; i++)
		fifo = fifo && wt.order[i] == i;
	ok(fifo, "served in FIFO order");

	run_done_count = run_fail_count = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 500; i++) {
		char v[16];
		snprintf(v, sizeof v, "%d", i);
		const char *params[] = { v };   /* on the stack: pgc_run copies */
		struct pgc_stmt s = { "SELECT $1::int", 1, params };
		pgc_run(p, &s, 1, run_count, NULL);
	}
	ok(run_until(&run_done_count, 500, 20000), "500 queued pgc_run calls completed");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	diag("500 pgc_run on 3 connections: %.1f ms",
	     (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	is_int(run_fail_count, 0, "none failed");
	close_pool(p);
}

/* ---- pgc_run with no server; close with waiters --------------------------------------- */

struct acq_null { int calls, nulls; };
static void acq_null_cb(struct pgc_conn *c, void *data)
{
	struct acq_null *a = data;
	a->calls++;
	if (!c)
		a->nulls++;
}

static void test_no_server(void)
{
	/* Port 1 on loopback: connection refused, retried with backoff. */
	struct pgc_pool *p = new_pool("postgresql://postgres@127.0.0.1:1/arbiter", 2, 400);
	ok(p != NULL, "pool on a dead port created");
	sleep_ms(300);
	ok(!pgc_pool_ready(p), "not ready");
	struct cap c;
	run1(p, "SELECT 1", 0, NULL, &c, 3000);
	ok(c.done && c.failed && c.transient, "pgc_run fails transient when no connection comes (%s)", c.err);
	struct acq_null a = { 0 };
	pgc_acquire(p, acq_null_cb, &a);
	pgc_acquire(p, acq_null_cb, &a);
	sleep_ms(50);
	is_int(a.calls, 0, "acquire waits while the server is down");
	int closed = 0;
	pgc_pool_close(p, pool_closed, &closed);
	ok(run_until(&closed, 1, 5000), "pool closed");
	is_int(a.nulls, 2, "waiters got NULL at close");

	struct pgc_opts bad = { .conninfo = "host=x bogus_option=1" };
	struct pgc_pool *q = NULL;
	ok(pgc_pool_new(loop, &bad, &q) < 0, "invalid conninfo refused");
}

static void test_close_inflight(void)
{
	struct pgc_pool *p = new_pool(dburl, 1, 10000);
	ok(p && wait_ready(p, 5000), "pool ready");
	struct cap c = { 0 };
	static const struct pgc_stmt s = { "SELECT pg_sleep(2)", 0, NULL };
	pgc_run(p, &s, 1, capture, &c);
	sleep_ms(100);
	int closed = 0;
	pgc_pool_close(p, pool_closed, &closed);
	ok(run_until(&closed, 1, 5000), "pool closed with a statement in flight");
	ok(c.done == 1 && c.failed, "in-flight statement failed (%s)", c.err);
}

/* ---- host name resolved on the loop --------------------------------------------------- */

static void test_hostname(void)
{
	const char *at = strstr(dburl, "127.0.0.1");
	if (!at) {
		ok(1, "# SKIP database URL has no 127.0.0.1 to replace");
		return;
	}
	struct strbuf u = { 0 };
	strbuf_add(&u, dburl, (size_t)(at - dburl));
	strbuf_add(&u, "localhost", 9);
	strbuf_add(&u, at + 9, strlen(at + 9));
	struct pgc_pool *p = new_pool(u.buf, 1, 5000);
	ok(p && wait_ready(p, 5000), "pool on host 'localhost' ready (resolved asynchronously)");
	struct cap c;
	run1(p, "SELECT 7", 0, NULL, &c, 5000);
	is_str(c.vals[0], "7", "query through the resolved address");
	close_pool(p);
	strbuf_free(&u);
}

/* ---- PostgreSQL restarted mid-run ----------------------------------------------------- */

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	struct strbuf sb = { 0 };
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		strbuf_add(&sb, buf, n);
	fclose(f);
	return sb.buf ? sb.buf : xstrdup("");
}

/* postmaster.opts: the binary, then "quoted" arguments. */
static char **parse_opts(char *text)
{
	char **argv = xcalloc(64, sizeof *argv);
	int n = 0;
	char *p = text;
	while (*p && n < 63) {
		while (*p == ' ' || *p == '\n')
			p++;
		if (!*p)
			break;
		if (*p == '"') {
			char *e = strchr(p + 1, '"');
			if (!e)
				break;
			*e = '\0';
			argv[n++] = p + 1;
			p = e + 1;
		} else {
			char *e = p + strcspn(p, " \n");
			if (*e)
				*e++ = '\0';
			argv[n++] = p;
			p = e;
		}
	}
	return argv;
}

static pid_t our_postgres = -1;

static int start_postgres(const char *pgdata, char *opts_text)
{
	char **argv = parse_opts(opts_text);
	if (!argv[0]) {
		free(argv);
		return -1;
	}
	char logpath[4096];
	snprintf(logpath, sizeof logpath, "%s/../postgres-restarted.log", pgdata);
	/* Looked up before fork: the child of a threaded process should only call simple syscalls. */
	struct passwd *pw = geteuid() == 0 ? getpwnam("postgres") : NULL;
	uid_t uid = pw ? pw->pw_uid : 0;
	gid_t gid = pw ? pw->pw_gid : 0;
	if (geteuid() == 0 && !pw) {
		free(argv);
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setsid();
		if (geteuid() == 0 && (setgroups(1, &gid) || setgid(gid) || setuid(uid)))
			_exit(127);
		/* If this test dies, PostgreSQL shuts down fast instead of lingering. */
		prctl(PR_SET_PDEATHSIG, SIGINT);
		execv(argv[0], argv);
		_exit(127);
	}
	free(argv);
	our_postgres = pid;
	return pid > 0 ? 0 : -1;
}

struct rs { int step; struct pgc_conn *conn; struct cap cap; };
static void rs_acq(struct pgc_conn *c, void *data) { struct rs *r = data; r->conn = c; r->step++; }
static void rs_done(const struct pgc_result *r, void *data) { struct rs *x = data; capture(r, &x->cap); x->step++; }

static void test_restart(void)
{
	const char *pgdata = getenv("ARBITER_TEST_PGDATA");
	if (!pgdata) {
		ok(1, "# SKIP no ARBITER_TEST_PGDATA");
		return;
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/postmaster.opts", pgdata);
	char *opts = read_file(path);
	snprintf(path, sizeof path, "%s/postmaster.pid", pgdata);
	char *pidtext = read_file(path);
	ok(opts && pidtext, "found postmaster.opts and postmaster.pid");
	if (!opts || !pidtext) {
		free(opts);
		free(pidtext);
		return;
	}
	pid_t pm = (pid_t)atoi(pidtext);
	free(pidtext);

	struct pgc_pool *p = new_pool(dburl, 2, 2500);
	ok(p && wait_ready(p, 5000), "pool of 2 ready");
	sleep_ms(200);   /* both connections up */

	/* A reserved connection with an open transaction, and a statement in flight. */
	struct rs held = { 0 };
	pgc_acquire(p, rs_acq, &held);
	ok(run_until(&held.step, 1, 5000), "reserved a connection");
	static const struct pgc_stmt begin[] = { { "BEGIN", 0, NULL }, { "INSERT INTO pgc_t (v) VALUES ('restart')", 0, NULL } };
	pgc_send(held.conn, begin, 2, rs_done, &held);
	ok(run_until(&held.step, 2, 5000) && !held.cap.failed, "transaction open on it");

	struct cap inflight = { 0 };
	static const struct pgc_stmt slow = { "SELECT pg_sleep(3)", 0, NULL };
	pgc_run(p, &slow, 1, capture, &inflight);
	sleep_ms(200);

	ok(kill(pm, SIGINT) == 0, "fast shutdown of the postmaster (pid %d)", (int)pm);
	ok(run_until(&inflight.done, 1, 10000), "in-flight statement completed");
	ok(inflight.failed && inflight.transient, "in-flight statement failed transient (%s, %s)",
	   inflight.err, inflight.sqlstate);
	/* Wait until the postmaster is gone (it removes postmaster.pid last). */
	for (int i = 0; i < 300 && access(path, F_OK) == 0; i++)
		sleep_ms(20);
	ok(access(path, F_OK) != 0, "postmaster stopped");

	/* A send on the held connection (its transaction died with the server) fails transient
	 * and never silently continues on a new connection. */
	static const struct pgc_stmt commit = { "COMMIT", 0, NULL };
	struct cap cc = { 0 };
	ok(pgc_send(held.conn, &commit, 1, capture, &cc) == 0, "send on the broken reserved connection");
	ok(run_until(&cc.done, 1, 5000) && cc.failed && cc.transient, "fails transient (%s)", cc.err);
	pgc_release(held.conn);

	/* While down: pgc_run fails (transient), and keeps failing until the server is back. */
	struct cap down;
	run1(p, "SELECT 1", 0, NULL, &down, 15000);
	ok(down.failed && down.transient, "query while down fails transient (%s)", down.err);

	ok(start_postgres(pgdata, opts) == 0, "started PostgreSQL again");
	free(opts);
	int tries = 0, transient_failures = 0;
	bool back = false;
	for (tries = 0; tries < 100 && !back; tries++) {
		struct cap c;
		run1(p, "SELECT count(*) FROM pgc_t WHERE v = 'restart'", 0, NULL, &c, 15000);
		if (!c.failed) {
			back = true;
			is_str(c.vals[0], "0", "the uncommitted transaction was not applied");
		} else {
			if (c.transient)
				transient_failures++;
			else
				diag("non-transient failure while recovering: %s", c.err);
			sleep_ms(100);
		}
	}
	ok(back, "the pool recovered after the restart (%d attempts, %d transient failures)",
	   tries, transient_failures);
	ok(transient_failures == tries - 1, "every failure during recovery was transient");
	ok(wait_ready(p, 5000), "ready");
	close_pool(p);

	struct strbuf m = { 0 };
	metrics_render(&m);
	const char *line = m.buf ? strstr(m.buf, "arbiter_reconnects_total{target=\"postgres\"} ") : NULL;
	ok(line && atoi(line + strlen("arbiter_reconnects_total{target=\"postgres\"} ")) >= 1,
	   "reconnections counted in arbiter_reconnects_total{target=\"postgres\"}");
	strbuf_free(&m);
}

static void stop_our_postgres(void)
{
	if (our_postgres <= 0)
		return;
	kill(our_postgres, SIGINT);
	int st;
	waitpid(our_postgres, &st, 0);
	our_postgres = -1;
}

int main(void)
{
	dburl = getenv("ARBITER_TEST_DATABASE_URL");
	if (!dburl) {
		printf("1..0 # SKIP ARBITER_TEST_DATABASE_URL not set (run under test/services.py)\n");
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	log_setup(LOG_ERROR, "test-pgc");
	loop = uv_default_loop();

	struct pgc_pool *p = new_pool(dburl, 4, 10000);
	ok(p != NULL, "pgc_pool_new");
	ok(wait_ready(p, 5000), "pool ready");
	test_simple(p);
	test_pipeline_1000(p);
	test_transaction(p);
	test_error_mid_pipeline(p);
	test_deadlock(p);
	test_serialization(p);
	test_prepared(p);
	close_pool(p);

	test_rollback_on_release();
	test_query_timeout();
	test_session_settings();
	test_read_only_renewed();
	test_waiters();
	test_no_server();
	test_close_inflight();
	test_hostname();
	test_restart();
	stop_our_postgres();

	uv_run(loop, UV_RUN_NOWAIT);
	ok(uv_loop_close(loop) == 0, "every handle closed (no leak on the loop)");
	return tap_done();
}
