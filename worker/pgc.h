/*
 * pgc: a small pool of PostgreSQL connections on a libuv loop.
 *
 * Everything is non-blocking: connections are opened with PQconnectStartParams
 * + PQconnectPoll, statements are sent in pipeline mode (one round trip for a
 * whole batch or transaction), and sockets are driven by uv_poll. Timeouts are
 * uv timers; a query timeout drops the connection (PQcancel would block) and
 * reports a transient error. A lost connection is re-opened with backoff. pgc
 * never resends a statement by itself: in-flight work fails with a transient
 * error and the caller decides whether to retry.
 *
 * All functions must be called on the loop's thread.
 */
#ifndef ARBITER_PGC_H
#define ARBITER_PGC_H

#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>
#include <uv.h>

struct pgc_pool;
struct pgc_conn;

struct pgc_opts {
	const char *conninfo;          /* libpq conninfo or URI (copied) */
	int size;                      /* connections, default 4 (0 = default) */
	uint32_t connect_timeout_ms;   /* default 5000 (0 = default) */
	uint32_t query_timeout_ms;     /* per pgc_send, default 30000 (0 = default) */
	/* Session settings sent in the startup packet (libpq `options`, after any the conninfo
	 * has), so they win over role- and database-level settings an operator may change:
	 * statement_timeout (0 = 9/10 of query_timeout_ms, so the server cancels a slow statement
	 * with SQLSTATE 57014 before the client gives up and drops the connection) and
	 * lock_timeout (0 = not set). */
	uint32_t statement_timeout_ms;
	uint32_t lock_timeout_ms;
};

/* Creates the pool and starts connecting its connections in the background.
 * Returns 0 and *out, or -1 if the options are invalid (no conninfo, or a conninfo that
 * does not parse: logged without its password). The pool
 * lives until pgc_pool_close's done callback. */
int pgc_pool_new(uv_loop_t *loop, const struct pgc_opts *o, struct pgc_pool **out);

/* Why the last connection attempt failed (one line, no password; "" once a connection
 * succeeded). For /readyz and status. */
const char *pgc_pool_last_error(const struct pgc_pool *p);

/* True when at least one connection is up (idle or busy). */
bool pgc_pool_ready(const struct pgc_pool *p);

/* Closes the pool: waiters get a NULL connection, in-flight statements fail
 * with err "closed" (transient), connections are finished. done(data) runs
 * (asynchronously) once every handle is closed and the pool is freed. A
 * connection held by a caller when the pool closes must still be released by
 * pgc_release (its server connection is already gone; sends return -1): done
 * waits for that. */
void pgc_pool_close(struct pgc_pool *p, void (*done)(void *), void *data);

/* One statement with text parameters; params[i] NULL = SQL NULL. */
struct pgc_stmt { const char *sql; int nparams; const char *const *params; };

#define PGC_MAX_PREPARED 32

/* Statements with exactly this text (fixed text sent often: the worker's
 * batches) are prepared once per server connection and then executed by
 * name, which saves parsing and, once PostgreSQL settles on a generic plan,
 * planning. Results are the same either way. sql is copied. At most
 * PGC_MAX_PREPARED texts; returns 0, or -1 when the table is full. */
int pgc_pool_prepare(struct pgc_pool *p, const char *sql);

struct pgc_result {
	int nres; PGresult **res;      /* one per statement, in order; borrowed during the callback */
	const char *err;               /* NULL on success; else message (first failing statement) */
	char sqlstate[6];              /* "" when the connection failed */
	bool transient;                /* connection loss, timeout, or sqlstate_transient (sqlstate.h) */
};
typedef void pgc_cb(const struct pgc_result *r, void *data);
typedef void pgc_conn_cb(struct pgc_conn *c, void *data);  /* c NULL if the pool is closing */

/* Reserves a connection (FIFO queue when all are busy); cb never runs synchronously.
 * While the server is unreachable the request waits (no timeout); it gets NULL only when the
 * pool closes. Returns 0, or -1 (bad arguments, or the pool is closing). */
int pgc_acquire(struct pgc_pool *p, pgc_conn_cb *cb, void *data);

/* Sends n statements in one pipeline on c and calls cb once with all results (or the first
 * error; later statements are skipped). Statements may be BEGIN/COMMIT: a transaction can span
 * several pgc_send calls on the same reserved connection. Never calls cb synchronously.
 * s and everything it points to is only read during the call (pgc_send copies what it needs).
 * On error, r->nres is the number of statements that completed before the failing one (their
 * results are in r->res). Note PostgreSQL's pipeline rule: outside an explicit BEGIN, the
 * statements of one pgc_send form ONE implicit transaction, so an error also rolls back the
 * statements before it. After a connection loss or a timeout (transient) the fate of the
 * statements is unknown to the caller only if it sent COMMIT; pgc never resends anything.
 * Returns 0, or -1 (cb is then not called) if c is NULL or not reserved, a statement is
 * invalid (sql NULL, nparams outside 0..65535), a send is already in flight on c, or the pool
 * is closing. If the connection was lost while reserved, cb gets a transient error, and so
 * does every later send on c until pgc_release (a transaction never continues on another
 * connection). */
int pgc_send(struct pgc_conn *c, const struct pgc_stmt *s, int n, pgc_cb *cb, void *data);

/* Returns c to the pool; if a transaction is still open it is rolled back first.
 * Must not be called while a pgc_send on c is in flight (call it from the callback or later).
 * NULL is ignored. */
void pgc_release(struct pgc_conn *c);

/* acquire + send + release. Never calls cb synchronously. The statements are copied, so s may
 * live on the caller's stack. If no connection is free within query_timeout_ms, cb gets a
 * transient error ("timeout waiting for a database connection"). Returns 0 or -1 (bad
 * arguments, or the pool is closing). */
int pgc_run(struct pgc_pool *p, const struct pgc_stmt *s, int n, pgc_cb *cb, void *data);

/* The integer at (row, col) of a result, 0 when NULL (the worker's NOT NULL columns and
 * coalesced aggregates; a NULL it must tell apart is read with PQgetisnull). */
int64_t pgc_get_i64(const PGresult *res, int row, int col);

#endif
