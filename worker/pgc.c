/*
 * pgc: a non-blocking PostgreSQL connection pool on libuv (see pgc.h).
 *
 * Each pool slot (struct pgc_conn) is a small state machine that owns at most
 * one PGconn at a time, a uv_poll handle for its socket (replaced whenever
 * libpq's socket changes) and one uv timer (connect timeout, reconnect
 * backoff, or query timeout: only one is ever needed at a time). Slots are
 * persistent: a caller's struct pgc_conn pointer stays valid while reserved,
 * even if the server connection under it is lost (it is then "broken": every
 * pgc_send fails with a transient error until pgc_release, so a transaction
 * can never silently continue on a fresh connection).
 *
 * Everything that must not run synchronously (acquire callbacks, failures
 * detected inside pgc_send, pool close) is delivered from one zero-delay
 * "kick" timer. Results that arrive from the socket are delivered directly
 * from the poll callback.
 *
 * pgc never resends a statement: after a connection loss or a timeout the
 * in-flight statements fail with transient = true and the caller decides.
 */
#include "pgc.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "redact.h"
#include "sqlstate.h"
#include "metrics.h"
#include "util.h"

/* While connection attempts keep failing, their reason is logged at most this often. */
#define PGC_ERR_LOG_MS 30000

#define PGC_DEFAULT_SIZE 4
#define PGC_DEFAULT_CONNECT_MS 5000
#define PGC_DEFAULT_QUERY_MS 30000
#define PGC_BACKOFF_MIN_MS 100
#define PGC_BACKOFF_MAX_MS 5000
#define PGC_MAX_ADDRS 8

/* A slot's connection state. The slot itself always belongs to the pool;
 * `reserved` says whether a caller holds it. */
enum conn_state {
	CS_DOWN,        /* no server connection; the timer runs the backoff before the next attempt
	                   (none while `broken`: the slot waits for pgc_release) */
	CS_RESOLVING,   /* uv_getaddrinfo of the host in flight; the timer is the connect timeout */
	CS_CONNECTING,  /* PQconnectPoll steps on the poll handle; the timer is the connect timeout */
	CS_READY,       /* connected, non-blocking; idle, reserved, or running an op */
	CS_CLOSED,      /* the pool is closing: no connection and no more attempts */
};

enum op_kind {
	OP_NONE,
	OP_USER,        /* pgc_send by the holder of the slot */
	OP_SETUP,       /* session settings right after connecting (pool-owned) */
	OP_ROLLBACK,    /* pgc_release found a transaction open (pool-owned) */
};

/* One pipeline in flight on a slot: n statements followed by one Sync. A
 * statement to prepare adds a group of results of its own (the Parse) before
 * its execution's: results are read by group. */
struct op {
	enum op_kind kind;
	int n;
	int ngroups;             /* result groups: n + the prepares sent */
	int *gstmt;              /* group -> statement index */
	int *gprep;              /* group -> prepared entry it creates, or -1 (an execution) */
	int cur;                 /* group whose results are being read */
	PGresult **res;          /* n slots, filled in order */
	int failed;              /* index of the first failing statement, or -1 */
	char *err;               /* malloc'd message of the failure, or NULL */
	char sqlstate[6];
	bool transient;
	bool pending;            /* finished; the callback waits for the kick timer */
	pgc_cb *cb;
	void *data;
};

struct dnsreq {
	uv_getaddrinfo_t req;
	struct pgc_conn *conn;   /* NULL once abandoned (timeout, close) */
};

/* A statement prepared on the current server connection. */
struct prepared {
	char *sql;               /* its text (owned); NULL = unused entry */
	char name[16];
};

struct pgc_conn {
	struct pgc_pool *pool;
	int idx;
	struct prepared prep[PGC_MAX_PREPARED];
	int prep_seq;            /* names handed out on this slot */
	enum conn_state state;
	PGconn *pg;
	uv_poll_t *poll;         /* heap: closing one and opening the next can overlap */
	int poll_fd;
	int poll_events;         /* events the active poll handle watches */
	uv_timer_t timer;
	struct dnsreq *dns;
	bool reserved;           /* a caller holds the slot (pgc_acquire .. pgc_release) */
	bool broken;             /* lost while reserved: sends fail until pgc_release */
	bool release_after_op;   /* pgc_release was called with an op in flight */
	bool renew;              /* refused a write as read-only: reconnect when released */
	bool ever_connected;
	bool failing;            /* the last connection attempt failed (log the first one only) */
	uint32_t backoff_ms;
	struct op op;
};

/* A queued pgc_acquire, or a pgc_run waiting for a connection. */
struct waiter {
	struct waiter *next;
	pgc_conn_cb *cb;
	void *data;
	struct run *run;         /* non-NULL for pgc_run */
};

/* pgc_run's private copy of its statements. */
struct run {
	struct pgc_pool *pool;
	int n;
	struct pgc_stmt *stmts;
	char **strs;             /* every copied string, freed with the run */
	int nstrs;
	pgc_cb *cb;
	void *data;
	uint64_t deadline;       /* loop time by which a connection must be found */
};

struct pgc_pool {
	uv_loop_t *loop;
	int size;
	char *prepare[PGC_MAX_PREPARED];   /* texts to prepare (pgc_pool_prepare), owned */
	int nprepare;
	uint32_t connect_timeout_ms, query_timeout_ms;
	/* Parsed conninfo: keywords/values passed to PQconnectStartParams. */
	int nkv;
	char **keys, **vals;
	int options_at;          /* index of "options" in keys/vals (the session settings) */
	char *options_orig;      /* the conninfo's own options ("" when none), owned */
	bool no_session_options; /* the server refused the options parameter: sent without ours */
	char *dns_host;          /* a single host name to resolve ourselves, or NULL */
	struct pgc_conn *conns;
	struct waiter *whead, *wtail;
	uv_timer_t kick;
	uv_timer_t wtimer;       /* expires pgc_run waiters */
	char last_err[512];      /* why the last connection attempt failed ("" after a success) */
	uint64_t last_err_logged; /* loop time of the last warning about it (rate bound) */
	bool closing;
	bool all_closed;         /* close_all ran: every handle is closing */
	bool finished;
	int open_handles;        /* handles not yet closed (pool's + slots') */
	int dns_pending;         /* abandoned getaddrinfo requests not yet returned */
	int nreserved;
	void (*done)(void *);
	void *done_data;
};

static void poll_cb(uv_poll_t *h, int status, int events);
static void timer_cb(uv_timer_t *t);
static void start_attempt(struct pgc_conn *c);
static void kick(struct pgc_pool *p);
static void maybe_finish(struct pgc_pool *p);
static void conn_lost(struct pgc_conn *c, const char *why, const char *sqlstate);

/* ---- helpers -------------------------------------------------------------------------- */


/* A copy of a libpq message as one line without the trailing newline. */
static char *one_line(const char *msg)
{
	char *s = xstrdup(msg && *msg ? msg : "unknown error");
	char *w = s;
	for (const char *r = s; *r; r++) {
		if (*r == '\n') {
			while (r[1] == '\t' || r[1] == ' ')
				r++;
			if (r[1])
				*w++ = ' ';
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
	return s;
}

static void notice_cb(void *arg, const char *message)
{
	struct pgc_conn *c = arg;
	char *m = one_line(message);
	if (!strncmp(m, "WARNING", 7))
		LOGW(NULL, NULL, "postgres[%d]: %s", c->idx, m);
	else
		LOGD(NULL, NULL, "postgres[%d]: %s", c->idx, m);
	free(m);
}

static uint32_t jitter(uint32_t ms)
{
	/* ±25%, enough to spread the reconnects of many slots and replicas (xorshift32 seeded per
	 * process, so replicas started together do not retry in lockstep). */
	static uint32_t x;
	if (!x)
		x = (uint32_t)uv_hrtime() ^ ((uint32_t)getpid() << 16) ^ 0x9e3779b9u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return ms - ms / 4 + x % (ms / 2 + 1);
}

/* ---- handles -------------------------------------------------------------------------- */

static void handle_closed(uv_handle_t *h)
{
	struct pgc_pool *p = h->data;
	p->open_handles--;
	maybe_finish(p);
}

static void poll_closed(uv_handle_t *h)
{
	struct pgc_pool *p = ((struct pgc_conn *)h->data)->pool;
	free(h);
	p->open_handles--;
	maybe_finish(p);
}

static void close_poll(struct pgc_conn *c)
{
	if (!c->poll)
		return;
	uv_close((uv_handle_t *)c->poll, poll_closed);
	c->poll = NULL;
	c->poll_fd = -1;
}

/* Watches libpq's current socket for events. rearm re-registers it even when the fd number is
 * unchanged: during connection set-up libpq may close a socket and open another that gets the
 * same number, which the kernel forgot and libuv would not re-add. Returns 0 or -1. */
static int watch(struct pgc_conn *c, int events, bool rearm)
{
	int fd = PQsocket(c->pg);
	if (fd < 0)
		return -1;
	if (c->poll && c->poll_fd != fd)
		close_poll(c);
	if (!c->poll) {
		c->poll = xmalloc(sizeof *c->poll);
		if (uv_poll_init(c->pool->loop, c->poll, fd) < 0) {
			free(c->poll);
			c->poll = NULL;
			return -1;
		}
		c->poll->data = c;
		c->poll_fd = fd;
		c->pool->open_handles++;
	} else if (!rearm && c->poll_events == events && uv_is_active((uv_handle_t *)c->poll)) {
		return 0;   /* uv_poll_start would unregister and re-register the fd for nothing */
	}
	/* uv_poll_start always re-registers the fd with epoll, which is what rearm needs. */
	c->poll_events = events;
	return uv_poll_start(c->poll, events, poll_cb) < 0 ? -1 : 0;
}

/* Forgets the server connection (if any): poll handle, timer, PGconn. */
static void drop_pg(struct pgc_conn *c)
{
	close_poll(c);
	uv_timer_stop(&c->timer);
	if (c->dns) {
		c->dns->conn = NULL;   /* its callback frees it */
		c->dns = NULL;
		c->pool->dns_pending++;
	}
	if (c->pg) {
		PQfinish(c->pg);
		c->pg = NULL;
	}
	/* Prepared statements die with the server connection. */
	for (int i = 0; i < PGC_MAX_PREPARED; i++) {
		free(c->prep[i].sql);
		c->prep[i].sql = NULL;
	}
}

static void schedule_retry(struct pgc_conn *c)
{
	if (c->pool->closing) {
		c->state = CS_CLOSED;
		return;
	}
	c->state = CS_DOWN;
	if (c->backoff_ms < PGC_BACKOFF_MIN_MS)
		c->backoff_ms = PGC_BACKOFF_MIN_MS;
	uv_timer_start(&c->timer, timer_cb, jitter(c->backoff_ms), 0);
	c->backoff_ms = c->backoff_ms * 2 > PGC_BACKOFF_MAX_MS ? PGC_BACKOFF_MAX_MS : c->backoff_ms * 2;
}

/* ---- ops ------------------------------------------------------------------------------ */

static void op_clear(struct op *o)
{
	if (o->res) {
		for (int i = 0; i < o->n; i++)
			PQclear(o->res[i]);
		free(o->res);
	}
	free(o->gstmt);
	free(o->gprep);
	free(o->err);
	memset(o, 0, sizeof *o);
	o->failed = -1;
}

/* The statement whose results are being read (the last one once all are read). */
static int op_stmt(const struct op *o)
{
	int g = o->cur < o->ngroups ? o->cur : o->ngroups - 1;
	return g >= 0 && o->gstmt ? o->gstmt[g] : 0;
}

static void op_fail(struct op *o, int at, const char *msg, const char *sqlstate, bool transient)
{
	if (o->failed >= 0 && o->err) {
		/* Keep the first statement's error; a later connection loss only makes it transient. */
		o->transient = o->transient || transient;
		return;
	}
	o->failed = at;
	free(o->err);
	o->err = one_line(msg);
	snprintf(o->sqlstate, sizeof o->sqlstate, "%s", sqlstate ? sqlstate : "");
	o->transient = transient;
}

static void release_now(struct pgc_conn *c);

/* Calls the op's callback with its results, after detaching it from the slot (so the callback
 * may pgc_send or pgc_release on c). */
static void deliver(struct pgc_conn *c)
{
	struct op o = c->op;
	memset(&c->op, 0, sizeof c->op);
	c->op.failed = -1;

	struct pgc_result r = { 0 };
	r.res = o.res;
	if (o.failed >= 0) {
		r.nres = o.failed;
		r.err = o.err ? o.err : "unknown error";
		memcpy(r.sqlstate, o.sqlstate, sizeof r.sqlstate);
		r.transient = o.transient;
		/* A session's default_transaction_read_only is fixed when it starts when it
		 * comes from ALTER DATABASE / ALTER ROLE ... SET: after a RESET only a new
		 * session takes writes. So a session that refused a write as read-only
		 * is replaced once its caller is done with it. */
		if (!strcmp(o.sqlstate, "25006"))
			c->renew = true;
		/* Only statements before the failing one are reported. */
		if (o.res)
			for (int i = o.failed; i < o.n; i++) {
				PQclear(o.res[i]);
				o.res[i] = NULL;
			}
	} else {
		r.nres = o.n;
	}
	if (o.cb)
		o.cb(&r, o.data);
	op_clear(&o);
}

/* The op ended inside a context where its callback must not run now: park it for the kick. */
static void defer_op(struct pgc_conn *c)
{
	uv_timer_stop(&c->timer);
	c->op.pending = true;
	kick(c->pool);
}

/* Internal ops' completions. */
static void setup_done(const struct pgc_result *r, void *data)
{
	struct pgc_conn *c = data;
	if (r->err && !r->transient)
		LOGW(NULL, NULL, "postgres[%d]: session setup: %s", c->idx, r->err);
}

static void rollback_done(const struct pgc_result *r, void *data)
{
	struct pgc_conn *c = data;
	if (r->err && c->state == CS_READY) {
		LOGW(NULL, NULL, "postgres[%d]: rollback on release failed: %s", c->idx, r->err);
		drop_pg(c);
		schedule_retry(c);
	}
}

/* Was this text registered with pgc_pool_prepare? */
static bool wants_prepared(const struct pgc_pool *p, const char *sql)
{
	for (int i = 0; i < p->nprepare; i++)
		if (p->prepare[i] == sql || !strcmp(p->prepare[i], sql))
			return true;
	return false;
}

/* The entry of c's prepared statements for this text: the one holding it,
 * else a free one (to prepare it), else -1 (the table is full: send it as
 * is). */
static int prepared_slot(struct pgc_conn *c, const char *sql)
{
	int free_slot = -1;
	for (int i = 0; i < PGC_MAX_PREPARED; i++) {
		if (!c->prep[i].sql) {
			if (free_slot < 0)
				free_slot = i;
		} else if (!strcmp(c->prep[i].sql, sql)) {
			return i;
		}
	}
	return free_slot;
}

/* A prepare did not succeed (error, or skipped after an earlier error): forget
 * it, so that the next use prepares it again. */
static void unprepare(struct pgc_conn *c, int k)
{
	if (k >= 0) {
		free(c->prep[k].sql);
		c->prep[k].sql = NULL;
	}
}

/* Queues s[0..n) plus a Sync on c and starts flushing. On a send failure the connection is
 * dropped and the op failed (deferred). */
static void op_start(struct pgc_conn *c, enum op_kind kind, const struct pgc_stmt *s, int n,
                     pgc_cb *cb, void *data)
{
	op_clear(&c->op);
	c->op.kind = kind;
	c->op.n = n;
	c->op.res = xcalloc((size_t)n, sizeof *c->op.res);
	c->op.gstmt = xcalloc((size_t)(2 * n + 1), sizeof *c->op.gstmt);
	c->op.gprep = xcalloc((size_t)(2 * n + 1), sizeof *c->op.gprep);
	c->op.cb = cb;
	c->op.data = data;

	for (int i = 0; i < n; i++) {
		int k = wants_prepared(c->pool, s[i].sql) ? prepared_slot(c, s[i].sql) : -1;
		int ok;
		if (k >= 0 && !c->prep[k].sql) {
			/* New on this connection: Parse it now, in the same pipeline. */
			c->prep[k].sql = xstrdup(s[i].sql);
			snprintf(c->prep[k].name, sizeof c->prep[k].name, "pgc_%d", c->prep_seq++);
			if (!PQsendPrepare(c->pg, c->prep[k].name, s[i].sql, s[i].nparams, NULL)) {
				conn_lost(c, PQerrorMessage(c->pg), NULL);
				return;
			}
			c->op.gstmt[c->op.ngroups] = i;
			c->op.gprep[c->op.ngroups++] = k;
		}
		if (k >= 0)
			ok = PQsendQueryPrepared(c->pg, c->prep[k].name, s[i].nparams, s[i].params, NULL,
			                         NULL, 0);
		else
			ok = PQsendQueryParams(c->pg, s[i].sql, s[i].nparams, NULL, s[i].params, NULL,
			                       NULL, 0);
		if (!ok) {
			conn_lost(c, PQerrorMessage(c->pg), NULL);
			return;
		}
		c->op.gstmt[c->op.ngroups] = i;
		c->op.gprep[c->op.ngroups++] = -1;
	}
	if (!PQpipelineSync(c->pg)) {
		conn_lost(c, PQerrorMessage(c->pg), NULL);
		return;
	}
	uv_timer_start(&c->timer, timer_cb, c->pool->query_timeout_ms, 0);
	int f = PQflush(c->pg);
	if (f < 0) {
		conn_lost(c, PQerrorMessage(c->pg), NULL);
		return;
	}
	if (watch(c, f ? UV_READABLE | UV_WRITABLE : UV_READABLE, false) < 0)
		conn_lost(c, "cannot watch the socket", NULL);
}

/* Reads every result available without blocking; delivers the op at its Sync. */
static void read_results(struct pgc_conn *c)
{
	struct op *o = &c->op;
	while (o->kind != OP_NONE && !o->pending && c->pg && !PQisBusy(c->pg)) {
		PGresult *r = PQgetResult(c->pg);
		if (!r) {
			if (o->cur < o->ngroups) {
				o->cur++;      /* end of group cur's results */
				continue;
			}
			break;
		}
		ExecStatusType st = PQresultStatus(r);
		if (st == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			uv_timer_stop(&c->timer);
			enum op_kind kind = o->kind;
			deliver(c);
			/* The slot may have been released, re-sent or dropped by the callback. */
			if (c->release_after_op && c->op.kind == OP_NONE) {
				c->release_after_op = false;
				release_now(c);
			} else if (kind != OP_USER && c->state == CS_READY && !c->reserved &&
			           c->op.kind == OP_NONE) {
				kick(c->pool);
			}
			return;
		}
		if (o->cur >= o->ngroups) {
			PQclear(r);
			continue;
		}
		int si = o->gstmt[o->cur], pk = o->gprep[o->cur];
		if (pk >= 0 && st != PGRES_FATAL_ERROR && st != PGRES_NONFATAL_ERROR &&
		    st != PGRES_BAD_RESPONSE) {
			/* A prepare's own result: done, or skipped after an earlier error. */
			if (st != PGRES_COMMAND_OK)
				unprepare(c, pk);
			PQclear(r);
			continue;
		}
		if (pk >= 0)
			unprepare(c, pk);
		switch (st) {
		case PGRES_PIPELINE_ABORTED:
			PQclear(r);    /* skipped because an earlier statement failed */
			break;
		case PGRES_FATAL_ERROR:
		case PGRES_NONFATAL_ERROR:
		case PGRES_BAD_RESPONSE: {
			const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
			const char *prim = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
			const char *detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
			char msg[1024];
			if (prim)
				snprintf(msg, sizeof msg, "%s%s%s", prim, detail ? ": " : "", detail ? detail : "");
			else
				snprintf(msg, sizeof msg, "%s", PQresultErrorMessage(r));
			op_fail(o, si, msg, state, sqlstate_transient(state));
			PQclear(r);
			break;
		}
		case PGRES_COPY_IN:
		case PGRES_COPY_OUT:
		case PGRES_COPY_BOTH:
			PQclear(r);
			conn_lost(c, "COPY is not supported by pgc", NULL);
			o->transient = false;
			return;
		default:
			if (!o->res[si])
				o->res[si] = r;
			else
				PQclear(r);
		}
	}
	if (c->pg && PQstatus(c->pg) == CONNECTION_BAD)
		conn_lost(c, PQerrorMessage(c->pg), NULL);
}

/* ---- connection life ------------------------------------------------------------------ */

/* The server connection under c failed. In-flight work fails (transient, deferred); the slot
 * reconnects unless a caller holds it (then it is broken until pgc_release). */
static void conn_lost(struct pgc_conn *c, const char *why, const char *sqlstate)
{
	char *msg = one_line(why);
	if (c->state == CS_READY)
		LOGW(NULL, NULL, "postgres[%d]: connection lost: %s", c->idx, msg);
	drop_pg(c);
	c->state = CS_DOWN;
	if (c->op.kind != OP_NONE && !c->op.pending) {
		op_fail(&c->op, op_stmt(&c->op), msg, sqlstate, true);
		c->op.transient = true;
		defer_op(c);
	}
	free(msg);
	if (c->reserved)
		c->broken = true;
	else
		schedule_retry(c);
}

static void attempt_failed(struct pgc_conn *c, const char *why)
{
	char *msg = one_line(why);
	struct pgc_pool *p = c->pool;
	uint64_t now = uv_now(p->loop);
	/* The first failure in a row is a warning, and while it lasts it is repeated at most
	 * every PGC_ERR_LOG_MS (a wrong password must not go silent); the other retries are
	 * debug lines. */
	bool repeat = p->last_err_logged == 0 || now - p->last_err_logged >= PGC_ERR_LOG_MS ||
	              strcmp(p->last_err, msg);
	snprintf(p->last_err, sizeof p->last_err, "%s", msg);
	if (!p->no_session_options && strstr(msg, "unsupported startup parameter: options")) {
		/* A pooler (PgBouncer) that refuses the parameter: connect without the
		 * session settings rather than not at all (deploy/README.md "Configuration"). */
		p->no_session_options = true;
		free(p->vals[p->options_at]);
		p->vals[p->options_at] = xstrdup(p->options_orig);
		LOGW(NULL, NULL, "postgres: the server (a pooler?) refuses the 'options' startup "
		     "parameter: connecting without the worker's session settings (statement_timeout, "
		     "lock_timeout come from the server's configuration)");
	}
	if (!c->failing || repeat) {
		LOGW(NULL, NULL, "postgres[%d]: cannot connect (retrying with backoff): %s", c->idx, msg);
		p->last_err_logged = now ? now : 1;
	} else {
		LOGD(NULL, NULL, "postgres[%d]: cannot connect: %s", c->idx, msg);
	}
	c->failing = true;
	free(msg);
	drop_pg(c);
	schedule_retry(c);
}

static void connected(struct pgc_conn *c)
{
	uv_timer_stop(&c->timer);
	if (PQsetnonblocking(c->pg, 1) != 0 || !PQenterPipelineMode(c->pg)) {
		attempt_failed(c, PQerrorMessage(c->pg));
		return;
	}
	c->state = CS_READY;
	c->backoff_ms = 0;
	c->failing = false;
	c->pool->last_err[0] = '\0';
	c->pool->last_err_logged = 0;
	if (c->ever_connected) {
		LOGI(NULL, NULL, "postgres[%d]: reconnected", c->idx);
		metrics_reconnect("postgres");
	} else {
		LOGD(NULL, NULL, "postgres[%d]: connected", c->idx);
	}
	c->ever_connected = true;
	if (watch(c, UV_READABLE, true) < 0) {
		conn_lost(c, "cannot watch the socket", NULL);
		return;
	}
	/* Let the server notice a vanished client (we drop connections on query timeouts) while
	 * it runs a long statement, instead of at its next write. */
	if (PQserverVersion(c->pg) >= 140000) {
		static const struct pgc_stmt setup = { "SET client_connection_check_interval = 1000", 0, NULL };
		op_start(c, OP_SETUP, &setup, 1, setup_done, c);
	} else {
		kick(c->pool);
	}
}

/* Continues connection set-up after PQconnectPoll returned ret. */
static void connect_step(struct pgc_conn *c, PostgresPollingStatusType ret)
{
	switch (ret) {
	case PGRES_POLLING_OK:
		connected(c);
		return;
	case PGRES_POLLING_READING:
		if (watch(c, UV_READABLE, true) < 0)
			attempt_failed(c, "cannot watch the socket");
		return;
	case PGRES_POLLING_WRITING:
		if (watch(c, UV_WRITABLE, true) < 0)
			attempt_failed(c, "cannot watch the socket");
		return;
	default:
		attempt_failed(c, PQerrorMessage(c->pg));
		return;
	}
}

/* Starts PQconnectStartParams, with hostaddr (a comma-separated list for host repeated as
 * often) when we resolved the host ourselves. */
static void begin_connect(struct pgc_conn *c, const char *host, const char *hostaddr)
{
	struct pgc_pool *p = c->pool;
	const char **keys = xcalloc((size_t)p->nkv + 3, sizeof *keys);
	const char **vals = xcalloc((size_t)p->nkv + 3, sizeof *vals);
	int k = 0;
	for (int i = 0; i < p->nkv; i++) {
		if (hostaddr && !strcmp(p->keys[i], "host"))
			continue;
		keys[k] = p->keys[i];
		vals[k++] = p->vals[i];
	}
	if (hostaddr) {
		keys[k] = "host";
		vals[k++] = host;
		keys[k] = "hostaddr";
		vals[k++] = hostaddr;
	}
	c->pg = PQconnectStartParams(keys, vals, 0);
	free(keys);
	free(vals);
	if (!c->pg)
		abort();   /* libpq only returns NULL when out of memory */
	if (PQstatus(c->pg) == CONNECTION_BAD) {
		attempt_failed(c, PQerrorMessage(c->pg));
		return;
	}
	PQsetNoticeProcessor(c->pg, notice_cb, c);
	c->state = CS_CONNECTING;
	/* As if PQconnectPoll had returned PGRES_POLLING_WRITING (libpq's documented start). */
	connect_step(c, PGRES_POLLING_WRITING);
}

static void dns_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct dnsreq *d = (struct dnsreq *)req;
	struct pgc_conn *c = d->conn;
	struct pgc_pool *p = req->data;
	free(d);
	if (!c) {
		/* Abandoned (connect timeout, close). */
		uv_freeaddrinfo(res);
		p->dns_pending--;
		maybe_finish(p);
		return;
	}
	c->dns = NULL;
	if (status < 0) {
		uv_freeaddrinfo(res);
		char msg[300];
		snprintf(msg, sizeof msg, "could not resolve \"%s\": %s", p->dns_host, uv_strerror(status));
		attempt_failed(c, msg);
		return;
	}
	/* Every address, so libpq still falls back from one to the next (::1 then 127.0.0.1). */
	struct strbuf hosts = { 0 }, addrs = { 0 };
	char seen[PGC_MAX_ADDRS][INET6_ADDRSTRLEN];
	int n = 0;
	for (struct addrinfo *ai = res; ai && n < PGC_MAX_ADDRS; ai = ai->ai_next) {
		char buf[INET6_ADDRSTRLEN];
		const void *a;
		if (ai->ai_family == AF_INET)
			a = &((struct sockaddr_in *)ai->ai_addr)->sin_addr;
		else if (ai->ai_family == AF_INET6)
			a = &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
		else
			continue;
		if (!inet_ntop(ai->ai_family, a, buf, sizeof buf))
			continue;
		bool dup = false;
		for (int i = 0; i < n; i++)
			dup = dup || !strcmp(seen[i], buf);
		if (dup)
			continue;
		memcpy(seen[n++], buf, sizeof buf);
		strbuf_addf(&hosts, "%s%s", hosts.len ? "," : "", p->dns_host);
		strbuf_addf(&addrs, "%s%s", addrs.len ? "," : "", buf);
	}
	uv_freeaddrinfo(res);
	if (!n) {
		char msg[300];
		snprintf(msg, sizeof msg, "could not resolve \"%s\": no address", p->dns_host);
		attempt_failed(c, msg);
	} else {
		begin_connect(c, hosts.buf, addrs.buf);
	}
	strbuf_free(&hosts);
	strbuf_free(&addrs);
}

static void start_attempt(struct pgc_conn *c)
{
	struct pgc_pool *p = c->pool;
	if (p->closing) {
		c->state = CS_CLOSED;
		return;
	}
	uv_timer_start(&c->timer, timer_cb, p->connect_timeout_ms, 0);
	if (!p->dns_host) {
		begin_connect(c, NULL, NULL);
		return;
	}
	struct dnsreq *d = xcalloc(1, sizeof *d);
	struct addrinfo hints = { 0 };
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	d->conn = c;
	d->req.data = p;
	c->dns = d;
	c->state = CS_RESOLVING;
	int rc = uv_getaddrinfo(p->loop, &d->req, dns_cb, p->dns_host, NULL, &hints);
	if (rc < 0) {
		c->dns = NULL;
		free(d);
		attempt_failed(c, uv_strerror(rc));
	}
}

static void timer_cb(uv_timer_t *t)
{
	struct pgc_conn *c = t->data;
	char msg[96];
	switch (c->state) {
	case CS_DOWN:
		start_attempt(c);
		break;
	case CS_RESOLVING:
	case CS_CONNECTING:
		snprintf(msg, sizeof msg, "connect timeout (%u ms)", c->pool->connect_timeout_ms);
		attempt_failed(c, msg);
		break;
	case CS_READY:
		if (c->op.kind != OP_NONE && !c->op.pending) {
			/* PQcancel would block: drop the connection; the server notices and aborts. */
			snprintf(msg, sizeof msg, "query timeout (%u ms)", c->pool->query_timeout_ms);
			conn_lost(c, msg, NULL);
		}
		break;
	case CS_CLOSED:
		break;
	}
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
	struct pgc_conn *c = h->data;
	if (c->poll != h)
		return;
	if (c->state == CS_CONNECTING) {
		/* Even on a poll error: libpq reads the socket error and may try the next address. */
		connect_step(c, PQconnectPoll(c->pg));
		return;
	}
	if (c->state != CS_READY)
		return;
	if (status < 0) {
		char msg[128];
		snprintf(msg, sizeof msg, "socket error: %s", uv_strerror(status));
		conn_lost(c, msg, NULL);
		return;
	}
	if ((events & UV_READABLE) && !PQconsumeInput(c->pg)) {
		conn_lost(c, PQerrorMessage(c->pg), NULL);
		return;
	}
	if (c->op.kind != OP_NONE && !c->op.pending) {
		int f = PQflush(c->pg);
		if (f < 0) {
			conn_lost(c, PQerrorMessage(c->pg), NULL);
			return;
		}
		if (watch(c, f ? UV_READABLE | UV_WRITABLE : UV_READABLE, false) < 0) {
			conn_lost(c, "cannot watch the socket", NULL);
			return;
		}
		read_results(c);
		return;
	}
	/* Idle: parse whatever arrived (notices, an administrator's termination). */
	(void)PQisBusy(c->pg);
	if (PQstatus(c->pg) == CONNECTION_BAD)
		conn_lost(c, PQerrorMessage(c->pg), NULL);
}

/* ---- dispatch ------------------------------------------------------------------------- */

static struct pgc_conn *find_idle(struct pgc_pool *p)
{
	for (int i = 0; i < p->size; i++) {
		struct pgc_conn *c = &p->conns[i];
		if (c->state == CS_READY && !c->reserved && !c->broken && c->op.kind == OP_NONE)
			return c;
	}
	return NULL;
}

static void run_free(struct run *r)
{
	for (int i = 0; i < r->nstrs; i++)
		free(r->strs[i]);
	free(r->strs);
	for (int i = 0; i < r->n; i++)
		free((void *)r->stmts[i].params);
	free(r->stmts);
	free(r);
}

static void run_fail(struct run *r, const char *msg)
{
	struct pgc_result res = { 0 };
	res.err = msg;
	res.transient = true;
	r->cb(&res, r->data);
	run_free(r);
}

struct run_ctx { struct run *run; struct pgc_conn *conn; };

static void run_done(const struct pgc_result *r, void *data)
{
	struct run_ctx *x = data;
	struct run *run = x->run;
	pgc_release(x->conn);
	free(x);
	run->cb(r, run->data);
	run_free(run);
}

static void run_start(struct pgc_conn *c, struct run *run)
{
	struct run_ctx *x = xmalloc(sizeof *x);
	x->run = run;
	x->conn = c;
	if (pgc_send(c, run->stmts, run->n, run_done, x) < 0) {
		free(x);
		pgc_release(c);
		run_fail(run, "internal error: cannot send");
	}
}

static void close_all(struct pgc_pool *p);

static void kick_cb(uv_timer_t *t)
{
	struct pgc_pool *p = t->data;
	bool progress = true;
	/* Deferred completions first (their callbacks may release slots). */
	while (progress) {
		progress = false;
		for (int i = 0; i < p->size; i++) {
			struct pgc_conn *c = &p->conns[i];
			if (c->op.kind == OP_NONE || !c->op.pending)
				continue;
			c->op.pending = false;
			deliver(c);
			progress = true;
			if (c->release_after_op && c->op.kind == OP_NONE) {
				c->release_after_op = false;
				release_now(c);
			}
		}
	}
	if (p->closing) {
		close_all(p);
		return;
	}
	while (p->whead) {
		struct pgc_conn *c = find_idle(p);
		if (!c)
			break;
		struct waiter *w = p->whead;
		p->whead = w->next;
		if (!p->whead)
			p->wtail = NULL;
		c->reserved = true;
		p->nreserved++;
		if (w->run)
			run_start(c, w->run);
		else
			w->cb(c, w->data);
		free(w);
		if (p->closing)
			return;   /* a callback closed the pool; its kick finishes the job */
	}
}

static void kick(struct pgc_pool *p)
{
	if (!uv_is_closing((uv_handle_t *)&p->kick) && !uv_is_active((uv_handle_t *)&p->kick))
		uv_timer_start(&p->kick, kick_cb, 0, 0);
}

static void wtimer_cb(uv_timer_t *t);

/* Runs the waiter timer until the earliest pgc_run deadline. */
static void arm_wtimer(struct pgc_pool *p)
{
	uint64_t now = uv_now(p->loop), first = UINT64_MAX;
	for (struct waiter *w = p->whead; w; w = w->next)
		if (w->run && w->run->deadline < first)
			first = w->run->deadline;
	if (first == UINT64_MAX || p->closing) {
		uv_timer_stop(&p->wtimer);
		return;
	}
	uv_timer_start(&p->wtimer, wtimer_cb, first > now ? first - now : 0, 0);
}

/* pgc_run waiters that found no connection in time fail with a transient error. */
static void wtimer_cb(uv_timer_t *t)
{
	struct pgc_pool *p = t->data;
	uint64_t now = uv_now(p->loop);
	struct waiter **pp = &p->whead, *prev = NULL;
	struct waiter *expired = NULL, **etail = &expired;
	while (*pp) {
		struct waiter *w = *pp;
		if (w->run && w->run->deadline <= now) {
			*pp = w->next;
			w->next = NULL;
			*etail = w;
			etail = &w->next;
			continue;
		}
		prev = w;
		pp = &w->next;
	}
	p->wtail = prev;
	while (expired) {
		struct waiter *w = expired;
		expired = w->next;
		run_fail(w->run, "timeout waiting for a database connection");
		free(w);
	}
	arm_wtimer(p);
}

static void conn_timer_closed(uv_handle_t *h)
{
	struct pgc_conn *c = h->data;
	struct pgc_pool *p = c->pool;
	p->open_handles--;
	maybe_finish(p);
}

/* The pool is closing (from the kick timer): fail everything, close every handle. */
static void close_all(struct pgc_pool *p)
{
	while (p->whead) {
		struct waiter *w = p->whead;
		p->whead = w->next;
		if (!p->whead)
			p->wtail = NULL;
		if (w->run)
			run_fail(w->run, "pool closed");
		else
			w->cb(NULL, w->data);
		free(w);
	}
	for (int i = 0; i < p->size; i++) {
		struct pgc_conn *c = &p->conns[i];
		if (c->op.kind != OP_NONE) {
			if (!c->op.pending)
				op_fail(&c->op, op_stmt(&c->op), "pool closed", NULL, true);
			c->op.pending = false;
			deliver(c);
		}
		drop_pg(c);
		c->state = CS_CLOSED;
		if (c->release_after_op) {
			c->release_after_op = false;
			release_now(c);
		}
	}
	for (int i = 0; i < p->size; i++)
		uv_close((uv_handle_t *)&p->conns[i].timer, conn_timer_closed);
	uv_close((uv_handle_t *)&p->wtimer, handle_closed);
	uv_close((uv_handle_t *)&p->kick, handle_closed);
	p->all_closed = true;
	maybe_finish(p);
}

static void pool_free(struct pgc_pool *p)
{
	for (int i = 0; i < p->nkv; i++) {
		free(p->keys[i]);
		free(p->vals[i]);
	}
	free(p->keys);
	free(p->vals);
	free(p->options_orig);
	free(p->dns_host);
	for (int i = 0; i < p->nprepare; i++)
		free(p->prepare[i]);
	for (int i = 0; p->conns && i < p->size; i++)
		for (int k = 0; k < PGC_MAX_PREPARED; k++)
			free(p->conns[i].prep[k].sql);
	free(p->conns);
	free(p);
}

int pgc_pool_prepare(struct pgc_pool *p, const char *sql)
{
	if (!p || !sql || p->nprepare >= PGC_MAX_PREPARED)
		return -1;
	if (!wants_prepared(p, sql))
		p->prepare[p->nprepare++] = xstrdup(sql);
	return 0;
}

static void maybe_finish(struct pgc_pool *p)
{
	if (!p->all_closed || p->finished || p->open_handles || p->dns_pending || p->nreserved)
		return;
	p->finished = true;
	void (*done)(void *) = p->done;
	void *data = p->done_data;
	pool_free(p);
	if (done)
		done(data);
}

/* ---- public API ----------------------------------------------------------------------- */

static bool is_numeric_addr(const char *h)
{
	unsigned char buf[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, h, buf) == 1 || inet_pton(AF_INET6, h, buf) == 1;
}

/* (Long: every check of the configuration happens here, before anything is started, so
 * that a bad URL fails at once and leaves nothing behind.) */
int pgc_pool_new(uv_loop_t *loop, const struct pgc_opts *o, struct pgc_pool **out)
{
	if (!loop || !o || !o->conninfo || !out)
		return -1;
	char why[160];
	if (redact_check_conn(o->conninfo, why, sizeof why) < 0) {
		LOGE(NULL, NULL, "invalid database URL (not shown): %s", why);
		return -1;
	}
	char *errmsg = NULL;
	PQconninfoOption *opts = PQconninfoParse(o->conninfo, &errmsg);
	if (!opts) {
		char *shown = log_redact_url(o->conninfo);
		/* libpq may quote part of the string: show it only if there is no password to leak. */
		bool safe = !strcmp(shown, o->conninfo);
		char *m = one_line(errmsg);
		LOGE(NULL, NULL, "invalid database URL %s%s%s", shown, safe ? ": " : "", safe ? m : "");
		free(m);
		free(shown);
		PQfreemem(errmsg);
		return -1;
	}

	struct pgc_pool *p = xcalloc(1, sizeof *p);
	p->loop = loop;
	p->size = o->size > 0 ? o->size : PGC_DEFAULT_SIZE;
	p->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : PGC_DEFAULT_CONNECT_MS;
	p->query_timeout_ms = o->query_timeout_ms ? o->query_timeout_ms : PGC_DEFAULT_QUERY_MS;

	int n = 0;
	for (PQconninfoOption *x = opts; x->keyword; x++)
		n++;
	/* Our defaults for settings the conninfo leaves unset: a name in pg_stat_activity, and TCP
	 * keepalives that notice a silently vanished server in about a minute, not hours. */
	static const char *const defaults[][2] = {
		{ "application_name", "arbiter" },
		{ "keepalives_idle", "30" },
		{ "keepalives_interval", "10" },
		{ "keepalives_count", "3" },
	};
	const size_t ndefaults = sizeof defaults / sizeof defaults[0];
	p->keys = xcalloc((size_t)n + ndefaults + 2, sizeof *p->keys);
	p->vals = xcalloc((size_t)n + ndefaults + 2, sizeof *p->vals);
	const char *host = NULL;
	bool has_hostaddr = false;
	for (PQconninfoOption *x = opts; x->keyword; x++) {
		if (!x->val) {
			for (size_t d = 0; d < ndefaults; d++)
				if (!strcmp(x->keyword, defaults[d][0])) {
					p->keys[p->nkv] = xstrdup(defaults[d][0]);
					p->vals[p->nkv++] = xstrdup(defaults[d][1]);
				}
			continue;
		}
		p->keys[p->nkv] = xstrdup(x->keyword);
		p->vals[p->nkv] = xstrdup(x->val);
		if (!strcmp(x->keyword, "host"))
			host = p->vals[p->nkv];
		if (!strcmp(x->keyword, "hostaddr") && x->val[0])
			has_hostaddr = true;
		p->nkv++;
	}
	PQconninfoFree(opts);
	/* Session settings in the startup packet, after the conninfo's own options. */
	{
		uint32_t st = o->statement_timeout_ms ? o->statement_timeout_ms
		                                      : p->query_timeout_ms / 10 * 9;
		if (st == 0)
			st = 1;
		struct strbuf ob = { 0 };
		int at = -1;
		for (int i = 0; i < p->nkv; i++)
			if (!strcmp(p->keys[i], "options"))
				at = i;
		p->options_orig = xstrdup(at >= 0 ? p->vals[at] : "");
		if (at >= 0 && p->vals[at][0])
			strbuf_addf(&ob, "%s ", p->vals[at]);
		strbuf_addf(&ob, "-c statement_timeout=%u", st);
		if (o->lock_timeout_ms)
			strbuf_addf(&ob, " -c lock_timeout=%u", o->lock_timeout_ms);
		if (at >= 0) {
			free(p->vals[at]);
			p->vals[at] = ob.buf;
		} else {
			at = p->nkv;
			p->keys[p->nkv] = xstrdup("options");
			p->vals[p->nkv++] = ob.buf;
		}
		p->options_at = at;
	}
	/* A single host name: resolve it on the loop (libpq's own lookup would block it). */
	if (host && host[0] && host[0] != '/' && host[0] != '@' && !strchr(host, ',') &&
	    !has_hostaddr && !is_numeric_addr(host))
		p->dns_host = xstrdup(host);

	p->conns = xcalloc((size_t)p->size, sizeof *p->conns);
	uv_timer_init(loop, &p->kick);
	uv_timer_init(loop, &p->wtimer);
	p->kick.data = p;
	p->wtimer.data = p;
	p->open_handles = 2 + p->size;
	for (int i = 0; i < p->size; i++) {
		struct pgc_conn *c = &p->conns[i];
		c->pool = p;
		c->idx = i;
		c->poll_fd = -1;
		c->op.failed = -1;
		uv_timer_init(loop, &c->timer);
		c->timer.data = c;
	}
	for (int i = 0; i < p->size; i++)
		start_attempt(&p->conns[i]);
	*out = p;
	return 0;
}

const char *pgc_pool_last_error(const struct pgc_pool *p)
{
	return p ? p->last_err : "";
}

bool pgc_pool_ready(const struct pgc_pool *p)
{
	if (!p || p->closing)
		return false;
	for (int i = 0; i < p->size; i++)
		if (p->conns[i].state == CS_READY)
			return true;
	return false;
}

void pgc_pool_close(struct pgc_pool *p, void (*done)(void *), void *data)
{
	if (!p || p->closing)
		return;
	p->closing = true;
	p->done = done;
	p->done_data = data;
	uv_timer_stop(&p->wtimer);
	if (!uv_is_active((uv_handle_t *)&p->kick))
		uv_timer_start(&p->kick, kick_cb, 0, 0);
}

int pgc_acquire(struct pgc_pool *p, pgc_conn_cb *cb, void *data)
{
	if (!p || !cb || p->closing)
		return -1;
	struct waiter *w = xcalloc(1, sizeof *w);
	w->cb = cb;
	w->data = data;
	if (p->wtail)
		p->wtail->next = w;
	else
		p->whead = w;
	p->wtail = w;
	kick(p);
	return 0;
}

static bool stmts_valid(const struct pgc_stmt *s, int n)
{
	if (!s || n < 1)
		return false;
	for (int i = 0; i < n; i++)
		if (!s[i].sql || s[i].nparams < 0 || s[i].nparams > 65535 ||
		    (s[i].nparams > 0 && !s[i].params))
			return false;
	return true;
}

int pgc_send(struct pgc_conn *c, const struct pgc_stmt *s, int n, pgc_cb *cb, void *data)
{
	if (!c || !cb || !stmts_valid(s, n) || !c->reserved || c->op.kind != OP_NONE ||
	    c->pool->closing)
		return -1;
	if (c->broken || c->state != CS_READY) {
		op_clear(&c->op);
		c->op.kind = OP_USER;
		c->op.n = n;
		c->op.res = xcalloc((size_t)n, sizeof *c->op.res);
		c->op.cb = cb;
		c->op.data = data;
		op_fail(&c->op, 0, "connection lost", NULL, true);
		defer_op(c);
		return 0;
	}
	op_start(c, OP_USER, s, n, cb, data);
	return 0;
}

static void release_now(struct pgc_conn *c)
{
	struct pgc_pool *p = c->pool;
	c->reserved = false;
	p->nreserved--;
	bool broken = c->broken;
	c->broken = false;
	if (p->closing) {
		maybe_finish(p);
		return;
	}
	if (broken || c->state != CS_READY) {
		c->renew = false;
		if (c->state == CS_DOWN && !uv_is_active((uv_handle_t *)&c->timer))
			schedule_retry(c);
		return;
	}
	if (c->renew) {
		c->renew = false;
		LOGI(NULL, NULL, "postgres[%d]: the session refused a write as read-only: "
		     "opening a new one (a new session gets the current read-only default)", c->idx);
		drop_pg(c);
		schedule_retry(c);
		return;
	}
	static const struct pgc_stmt rollback = { "ROLLBACK", 0, NULL };
	switch (PQtransactionStatus(c->pg)) {
	case PQTRANS_IDLE:
		kick(p);
		return;
	case PQTRANS_INTRANS:
	case PQTRANS_INERROR:
		op_start(c, OP_ROLLBACK, &rollback, 1, rollback_done, c);
		return;
	default:
		drop_pg(c);
		schedule_retry(c);
		return;
	}
}

void pgc_release(struct pgc_conn *c)
{
	if (!c || !c->reserved)
		return;
	if (c->op.kind != OP_NONE) {
		c->release_after_op = true;
		return;
	}
	release_now(c);
}

int pgc_run(struct pgc_pool *p, const struct pgc_stmt *s, int n, pgc_cb *cb, void *data)
{
	if (!p || !cb || !stmts_valid(s, n) || p->closing)
		return -1;
	struct run *r = xcalloc(1, sizeof *r);
	r->pool = p;
	r->n = n;
	r->cb = cb;
	r->data = data;
	r->stmts = xcalloc((size_t)n, sizeof *r->stmts);
	int total = 0;
	for (int i = 0; i < n; i++)
		total += 1 + s[i].nparams;
	r->strs = xcalloc((size_t)total, sizeof *r->strs);
	for (int i = 0; i < n; i++) {
		r->strs[r->nstrs] = xstrdup(s[i].sql);
		r->stmts[i].sql = r->strs[r->nstrs++];
		r->stmts[i].nparams = s[i].nparams;
		if (s[i].nparams) {
			const char **pv = xcalloc((size_t)s[i].nparams, sizeof *pv);
			for (int j = 0; j < s[i].nparams; j++) {
				if (s[i].params[j]) {
					r->strs[r->nstrs] = xstrdup(s[i].params[j]);
					pv[j] = r->strs[r->nstrs++];
				}
			}
			r->stmts[i].params = pv;
		}
	}
	r->deadline = uv_now(p->loop) + p->query_timeout_ms;
	struct waiter *w = xcalloc(1, sizeof *w);
	w->run = r;
	if (p->wtail)
		p->wtail->next = w;
	else
		p->whead = w;
	p->wtail = w;
	if (!uv_is_active((uv_handle_t *)&p->wtimer))
		arm_wtimer(p);
	kick(p);
	return 0;
}

int64_t pgc_get_i64(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? 0 : strtoll(PQgetvalue(res, row, col), NULL, 10);
}
