/*
 * rq: a Redis client connection on a libuv loop (see rq.h for the contract).
 *
 * hiredis 0.14's async API does the protocol; this file does everything
 * around it:
 *   - the event-loop adapter: one uv_poll_t per connection, started and
 *     stopped through hiredis's addRead/delRead/addWrite/delWrite hooks (only
 *     when the event set really changes, since uv_poll_start re-registers the
 *     fd with epoll). A poll callback with status < 0 (libuv reports EPOLLERR,
 *     e.g. a reset socket, as UV_EBADF and stops the handle) drops the
 *     connection; hiredis's own 0.14 adapter ignores it and hangs.
 *   - the connect timeout (covering DNS, TCP connect and the AUTH/SELECT/PING
 *     handshake) and per-command timeouts: one uv timer per client armed at
 *     the earliest deadline, so a command costs no timer syscalls.
 *   - reconnection with exponential backoff and jitter.
 *   - commands issued while not connected, failed asynchronously.
 *
 * Lifetimes. hiredis runs every pending reply callback exactly once: with the
 * reply, or with NULL while the context is being freed. We rely on that for
 * "exactly once" and only ever free a context through redisAsyncFree (which
 * hiredis defers while it is inside a reply callback). A context is
 * "detached" (r->conn = NULL) the moment we learn it is dying, before any user
 * code runs, so user code can never reach a dying context. A struct rq_conn
 * (poll handle + context) is freed in the poll handle's close callback, which
 * libuv runs after hiredis called our cleanup hook, i.e. after every callback
 * of that context ran. The struct rq itself is freed after rq_close, in the
 * last close callback of its timers and connections.
 */
#include "rq.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <hiredis/async.h>

#include "log.h"
#include "metrics.h"
#include "util.h"

#define RQ_DEFAULT_CONNECT_MS 2000
#define RQ_DEFAULT_CMD_MS 5000
#define RQ_BACKOFF_MIN_MS 50
#define RQ_BACKOFF_MAX_MS 5000
#define RQ_NO_DEADLINE UINT64_MAX
#define RQ_FREE_REQS_MAX 4096           /* request records kept for reuse */

/* Connection state of a struct rq (independent of the closing flag). */
enum rq_state {
	RQ_IDLE,        /* no connection; the backoff timer will start one */
	RQ_RESOLVING,   /* uv_getaddrinfo in flight (struct rq_gai owned by the loop) */
	RQ_CONNECTING,  /* r->conn exists: TCP connect + handshake in flight */
	RQ_READY,       /* handshake done; user commands are sent on r->conn */
	RQ_CLOSED,      /* rq_close finished its teardown; handles are closing */
};

/* One command whose callback has not run yet. Owned by the rq: on a
 * connection's pending list (hiredis holds it as privdata), on the deferred
 * list (failed without being sent), or on the free list. */
struct rq_req {
	struct rq_req *next, *prev;
	rq_cb *cb;
	void *data;
	uint64_t deadline;          /* loop time in ms; RQ_NO_DEADLINE */
	const char *err;            /* deferred failure reason */
	bool timed_out;             /* its deadline passed: report "timeout" */
	bool internal;              /* handshake command, not counted in r->pending */
};

/* One hiredis context and its poll handle. Owned by the rq while current
 * (r->conn); once detached it lives until the poll handle's close callback. */
struct rq_conn {
	uv_poll_t poll;
	redisAsyncContext *ac;      /* NULL once hiredis ran our cleanup hook */
	struct rq *r;
	int events;                 /* UV_READABLE | UV_WRITABLE wanted by hiredis */
	bool closing;               /* uv_close called on poll */
	int handshake_left;         /* handshake replies still expected */
	struct rq_req pending;      /* sentinel: commands sent on this context */
};

/* A name resolution in flight. Owned by libuv until its callback; r is set to
 * NULL when the rq gives up on it (connect timeout, rq_close). */
struct rq_gai {
	uv_getaddrinfo_t req;
	struct rq *r;
};

struct rq {
	uv_loop_t *loop;
	char *name;
	struct rq_url url;
	char where[300];            /* "host:port/db" or "path?db=N" for logs */
	uint32_t connect_timeout_ms, cmd_timeout_ms;
	void (*on_connect)(struct rq *r, void *data);
	void (*on_disconnect)(struct rq *r, const char *why, void *data);
	void *data;

	enum rq_state state;
	bool closing;               /* rq_close called */
	struct rq_conn *conn;       /* current connection, NULL when none */
	struct rq_gai *gai;         /* current resolution, NULL when none */

	uv_timer_t backoff_timer;   /* next connection attempt */
	uv_timer_t connect_timer;   /* connect + handshake deadline */
	uv_timer_t cmd_timer;       /* earliest command deadline */
	uv_timer_t defer_timer;     /* deferred failures, close teardown */
	uint64_t cmd_timer_due;     /* when cmd_timer fires; 0 = not armed */

	int attempts;               /* failed attempts since the last success */
	uint64_t nconnects, reconnects;
	uint64_t rng;

	struct rq_req *defer_head, *defer_tail;
	struct rq_req *free_reqs;
	size_t nfree;
	size_t pending;             /* user callbacks not run yet */
	int live;                   /* handles and connections not closed yet */

	void (*done)(void *data);
	void *done_data;
};

static void conn_drop(struct rq *r, const char *why);
static void schedule_reconnect(struct rq *r);
static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* ---- helpers ------------------------------------------------------------ */

static uint32_t rq_random(struct rq *r)
{
	/* xorshift64*: jitter only, not security. */
	r->rng ^= r->rng >> 12;
	r->rng ^= r->rng << 25;
	r->rng ^= r->rng >> 27;
	return (uint32_t)((r->rng * 2685821657736338717ULL) >> 32);
}

static struct rq_req *req_get(struct rq *r)
{
	struct rq_req *q = r->free_reqs;
	if (q) {
		r->free_reqs = q->next;
		r->nfree--;
	} else {
		q = xmalloc(sizeof *q);
	}
	memset(q, 0, sizeof *q);
	return q;
}

static void req_put(struct rq *r, struct rq_req *q)
{
	if (r->nfree >= RQ_FREE_REQS_MAX) {
		free(q);
		return;
	}
	q->next = r->free_reqs;
	r->free_reqs = q;
	r->nfree++;
}

static void list_init(struct rq_req *s)
{
	s->next = s->prev = s;
}

static void list_add_tail(struct rq_req *s, struct rq_req *q)
{
	q->prev = s->prev;
	q->next = s;
	s->prev->next = q;
	s->prev = q;
}

static void list_del(struct rq_req *q)
{
	q->prev->next = q->next;
	q->next->prev = q->prev;
	q->next = q->prev = NULL;
}

/* Runs q's callback and recycles q. */
static void req_finish(struct rq *r, struct rq_req *q, redisReply *reply, const char *err)
{
	rq_cb *cb = q->cb;
	void *data = q->data;
	if (!q->internal)
		r->pending--;
	req_put(r, q);
	if (cb)
		cb(r, reply, err, data);
}

/* One handle or connection of r finished closing; frees r after the last
 * one once rq_close's teardown ran, then calls done. */
static void rq_release(struct rq *r)
{
	if (--r->live > 0 || r->state != RQ_CLOSED)
		return;
	void (*done)(void *) = r->done;
	void *done_data = r->done_data;
	while (r->free_reqs) {
		struct rq_req *q = r->free_reqs;
		r->free_reqs = q->next;
		free(q);
	}
	free(r->name);
	free(r);
	if (done)
		done(done_data);
}

static void on_handle_closed(uv_handle_t *h)
{
	rq_release(h->data);
}

/* ---- deferred failures -------------------------------------------------- */

static void on_defer(uv_timer_t *t);

/* Fails a command asynchronously (from the defer timer). */
static void defer_fail(struct rq *r, rq_cb *cb, void *data, const char *err)
{
	struct rq_req *q = req_get(r);
	q->cb = cb;
	q->data = data;
	q->err = err;
	r->pending++;
	if (r->defer_tail)
		r->defer_tail->next = q;
	else
		r->defer_head = q;
	r->defer_tail = q;
	if (!uv_is_active((uv_handle_t *)&r->defer_timer))
		uv_timer_start(&r->defer_timer, on_defer, 0, 0);
}

static void flush_deferred(struct rq *r)
{
	struct rq_req *q = r->defer_head;
	r->defer_head = r->defer_tail = NULL;
	while (q) {
		struct rq_req *next = q->next;
		req_finish(r, q, NULL, q->err);
		q = next;
	}
}

static void teardown(struct rq *r)
{
	while (r->defer_head)
		flush_deferred(r);
	if (r->conn)
		conn_drop(r, "closed");
	if (r->gai) {
		r->gai->r = NULL;
		uv_cancel((uv_req_t *)&r->gai->req);
		r->gai = NULL;
	}
	r->state = RQ_CLOSED;
	uv_close((uv_handle_t *)&r->backoff_timer, on_handle_closed);
	uv_close((uv_handle_t *)&r->connect_timer, on_handle_closed);
	uv_close((uv_handle_t *)&r->cmd_timer, on_handle_closed);
	uv_close((uv_handle_t *)&r->defer_timer, on_handle_closed);
}

static void on_defer(uv_timer_t *t)
{
	struct rq *r = t->data;
	flush_deferred(r);          /* callbacks may add more, or call rq_close */
	if (r->closing) {
		if (r->state != RQ_CLOSED)
			teardown(r);
	} else if (r->defer_head) {
		uv_timer_start(&r->defer_timer, on_defer, 0, 0);
	}
}

/* ---- the libuv adapter ---------------------------------------------------- */

static void on_conn_closed(uv_handle_t *h)
{
	struct rq_conn *c = h->data;
	struct rq *r = c->r;
	free(c);
	rq_release(r);
}

/* The connection c is gone or going: detach it so nothing new is sent on it,
 * tell the user, and plan the next attempt. Idempotent; only acts if c is the
 * current connection. Never frees anything. */
static void conn_lost(struct rq *r, struct rq_conn *c, const char *why)
{
	if (c != r->conn)
		return;
	bool was_ready = r->state == RQ_READY;
	r->conn = NULL;
	r->state = RQ_IDLE;
	uv_timer_stop(&r->connect_timer);
	uv_timer_stop(&r->cmd_timer);
	r->cmd_timer_due = 0;
	if (r->closing)
		return;
	if (was_ready)
		LOGW(NULL, NULL, "redis %s: connection to %s lost: %s", r->name, r->where, why);
	schedule_reconnect(r);
	if (was_ready && r->on_disconnect)
		r->on_disconnect(r, why, r->data);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct rq_conn *c = h->data;
	if (!c->ac)
		return;
	if (status < 0) {
		/* libuv reports EPOLLERR (e.g. a connection reset or a refused
		 * connect) as an error and has already stopped the handle. */
		char why[160];
		int soerr = 0;
		socklen_t len = sizeof soerr;
		if (getsockopt(c->ac->c.fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr)
			snprintf(why, sizeof why, "socket error: %s", strerror(soerr));
		else
			snprintf(why, sizeof why, "socket error: %s", uv_strerror(status));
		/* A detached context is always freed before control returns to
		 * the loop, so c is the current connection here. */
		if (c == c->r->conn)
			conn_drop(c->r, why);
		return;
	}
	if (events & UV_READABLE)
		redisAsyncHandleRead(c->ac);
	if (c->ac && (events & UV_WRITABLE))
		redisAsyncHandleWrite(c->ac);
}

static void ev_update(struct rq_conn *c, int events)
{
	if (c->closing || events == c->events)
		return;
	c->events = events;
	if (events)
		uv_poll_start(&c->poll, events, on_poll);
	else
		uv_poll_stop(&c->poll);
}

static void ev_add_read(void *p)
{
	struct rq_conn *c = p;
	ev_update(c, c->events | UV_READABLE);
}

static void ev_del_read(void *p)
{
	struct rq_conn *c = p;
	ev_update(c, c->events & ~UV_READABLE);
}

static void ev_add_write(void *p)
{
	struct rq_conn *c = p;
	ev_update(c, c->events | UV_WRITABLE);
}

static void ev_del_write(void *p)
{
	struct rq_conn *c = p;
	ev_update(c, c->events & ~UV_WRITABLE);
}

/* Called by hiredis while freeing the context, after every pending callback
 * ran and before the fd is closed. */
static void ev_cleanup(void *p)
{
	struct rq_conn *c = p;
	redisAsyncContext *ac = c->ac;
	conn_lost(c->r, c, ac && ac->err ? ac->errstr : "connection closed");
	c->ac = NULL;
	c->closing = true;
	uv_close((uv_handle_t *)&c->poll, on_conn_closed);
}

/* ---- connecting ---------------------------------------------------------- */

static void handshake_cb(struct rq *r, redisReply *reply, const char *err, void *data);

static int conn_send(struct rq_conn *c, struct rq_req *q, const char *cmd, size_t len)
{
	if (redisAsyncFormattedCommand(c->ac, on_reply, q, cmd, len) != REDIS_OK)
		return -1;
	list_add_tail(&c->pending, q);
	return 0;
}

static void handshake_send(struct rq *r, struct rq_conn *c, int argc, const char **argv)
{
	sds cmd;
	int len = redisFormatSdsCommandArgv(&cmd, argc, argv, NULL);
	if (len < 0)
		abort();                /* only fails on out-of-memory */
	struct rq_req *q = req_get(r);
	q->cb = handshake_cb;
	q->data = c;
	q->deadline = RQ_NO_DEADLINE;
	q->internal = true;
	if (conn_send(c, q, cmd, (size_t)len) < 0)
		req_put(r, q);          /* not reachable on a fresh context */
	else
		c->handshake_left++;
	sdsfree(cmd);
}

static void conn_ready(struct rq *r)
{
	uv_timer_stop(&r->connect_timer);
	r->state = RQ_READY;
	r->attempts = 0;
	r->nconnects++;
	if (r->nconnects > 1) {
		r->reconnects++;
		metrics_reconnect("redis");
		LOGI(NULL, NULL, "redis %s: reconnected to %s", r->name, r->where);
	} else {
		LOGI(NULL, NULL, "redis %s: connected to %s", r->name, r->where);
	}
	if (r->on_connect)
		r->on_connect(r, r->data);
}

static void handshake_cb(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct rq_conn *c = data;
	(void)err;
	if (c != r->conn || !reply)
		return;                 /* the connection was dropped meanwhile */
	if (reply->type == REDIS_REPLY_ERROR) {
		char why[256];
		snprintf(why, sizeof why, "handshake failed: %s", reply->str);
		LOGW(NULL, NULL, "redis %s: %s: %s", r->name, r->where, why);
		conn_drop(r, why);
		return;
	}
	if (--c->handshake_left == 0 && !r->closing)
		conn_ready(r);
}

/* Opens a hiredis context to host (numeric) or to the unix socket. */
static void conn_open(struct rq *r, const char *host)
{
	redisAsyncContext *ac;
	if (r->url.path[0])
		ac = redisAsyncConnectUnix(r->url.path);
	else
		ac = redisAsyncConnect(host, r->url.port);
	if (!ac)
		abort();                /* hiredis returns NULL only on out-of-memory */
	if (ac->err) {
		LOGD(NULL, NULL, "redis %s: connect to %s: %s", r->name, r->where, ac->errstr);
		redisAsyncFree(ac);
		uv_timer_stop(&r->connect_timer);
		r->state = RQ_IDLE;
		schedule_reconnect(r);
		return;
	}
	struct rq_conn *c = xcalloc(1, sizeof *c);
	c->r = r;
	list_init(&c->pending);
	int rc = uv_poll_init(r->loop, &c->poll, ac->c.fd);
	if (rc < 0) {
		LOGW(NULL, NULL, "redis %s: uv_poll_init: %s", r->name, uv_strerror(rc));
		redisAsyncFree(ac);
		free(c);
		uv_timer_stop(&r->connect_timer);
		r->state = RQ_IDLE;
		schedule_reconnect(r);
		return;
	}
	c->poll.data = c;
	c->ac = ac;
	r->live++;
	if (!r->url.path[0])
		redisEnableKeepAlive(&ac->c);   /* setsockopt only; finds dead peers */
	ac->data = c;
	ac->ev.data = c;
	ac->ev.addRead = ev_add_read;
	ac->ev.delRead = ev_del_read;
	ac->ev.addWrite = ev_add_write;
	ac->ev.delWrite = ev_del_write;
	ac->ev.cleanup = ev_cleanup;
	r->conn = c;
	r->state = RQ_CONNECTING;

	/* Queued now, sent once connect(2) completes; on_connect fires after the
	 * last reply. A PING when there is nothing else proves the server answers
	 * (a server still loading its data set replies -LOADING). */
	if (r->url.password[0]) {
		const char *argv[3] = { "AUTH", r->url.user, r->url.password };
		if (r->url.user[0])
			handshake_send(r, c, 3, argv);
		else {
			argv[1] = r->url.password;
			handshake_send(r, c, 2, argv);
		}
	}
	if (r->url.db != 0) {
		char db[16];
		snprintf(db, sizeof db, "%d", r->url.db);
		const char *argv[2] = { "SELECT", db };
		handshake_send(r, c, 2, argv);
	}
	if (c->handshake_left == 0) {
		const char *argv[1] = { "PING" };
		handshake_send(r, c, 1, argv);
	}
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct rq_gai *g = req->data;
	struct rq *r = g->r;
	free(g);
	if (!r) {                   /* abandoned */
		uv_freeaddrinfo(res);
		return;
	}
	r->gai = NULL;
	char host[INET6_ADDRSTRLEN] = "";
	if (status == 0 && res) {
		const void *a = res->ai_family == AF_INET6
			? (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr
			: (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;
		inet_ntop(res->ai_family, a, host, sizeof host);
	}
	uv_freeaddrinfo(res);
	if (!host[0]) {
		LOGW(NULL, NULL, "redis %s: cannot resolve %s: %s", r->name, r->url.host,
		     status ? uv_strerror(status) : "no address");
		uv_timer_stop(&r->connect_timer);
		r->state = RQ_IDLE;
		schedule_reconnect(r);
		return;
	}
	conn_open(r, host);
}

static void on_connect_timeout(uv_timer_t *t)
{
	struct rq *r = t->data;
	if (r->closing)
		return;
	LOGD(NULL, NULL, "redis %s: connect to %s timed out", r->name, r->where);
	if (r->gai) {
		r->gai->r = NULL;
		uv_cancel((uv_req_t *)&r->gai->req);
		r->gai = NULL;
		r->state = RQ_IDLE;
		schedule_reconnect(r);
	} else if (r->conn && r->state == RQ_CONNECTING) {
		conn_drop(r, "connect timeout");
	}
}

static bool host_is_numeric(const char *host)
{
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = AI_NUMERICHOST;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return false;
	freeaddrinfo(res);
	return true;
}

static void on_backoff(uv_timer_t *t)
{
	struct rq *r = t->data;
	if (r->closing || r->conn || r->gai)
		return;
	uv_timer_start(&r->connect_timer, on_connect_timeout, r->connect_timeout_ms, 0);
	if (r->url.path[0]) {
		conn_open(r, NULL);
	} else if (!strcasecmp(r->url.host, "localhost")) {
		conn_open(r, "127.0.0.1");
	} else if (host_is_numeric(r->url.host)) {
		conn_open(r, r->url.host);
	} else {
		struct rq_gai *g = xcalloc(1, sizeof *g);
		struct addrinfo hints;
		memset(&hints, 0, sizeof hints);
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		g->r = r;
		g->req.data = g;
		int rc = uv_getaddrinfo(r->loop, &g->req, on_resolved, r->url.host, NULL, &hints);
		if (rc < 0) {
			free(g);
			LOGW(NULL, NULL, "redis %s: uv_getaddrinfo: %s", r->name, uv_strerror(rc));
			uv_timer_stop(&r->connect_timer);
			schedule_reconnect(r);
			return;
		}
		r->gai = g;
		r->state = RQ_RESOLVING;
	}
}

static void schedule_reconnect(struct rq *r)
{
	if (r->closing)
		return;
	r->attempts++;
	int shift = r->attempts - 1 < 7 ? r->attempts - 1 : 7;
	uint32_t cap = (uint32_t)RQ_BACKOFF_MIN_MS << shift;
	if (cap > RQ_BACKOFF_MAX_MS)
		cap = RQ_BACKOFF_MAX_MS;
	/* "Equal jitter": half fixed, half random. */
	uint32_t delay = cap / 2 + rq_random(r) % (cap / 2 + 1);
	if (r->attempts > 1)
		LOGD(NULL, NULL, "redis %s: attempt %d to reach %s failed, retrying in %u ms",
		     r->name, r->attempts - 1, r->where, delay);
	if (r->attempts == 2 || r->attempts % 20 == 0)
		LOGW(NULL, NULL, "redis %s: cannot reach %s (%d attempts), retrying",
		     r->name, r->where, r->attempts - 1);
	uv_timer_start(&r->backoff_timer, on_backoff, delay, 0);
}

/* Detaches the current connection and frees its context: every command
 * pending on it gets NULL ("timeout" if it timed out, else "closed" when
 * closing, else "disconnected"). */
static void conn_drop(struct rq *r, const char *why)
{
	struct rq_conn *c = r->conn;
	if (!c)
		return;
	redisAsyncContext *ac = c->ac;
	conn_lost(r, c, why);       /* may run on_disconnect, which may call rq_close */
	if (ac)
		redisAsyncFree(ac);     /* deferred by hiredis inside its callbacks */
}

/* ---- commands ------------------------------------------------------------ */

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct rq_conn *c = ac->data;
	struct rq *r = c->r;
	struct rq_req *q = privdata;
	redisReply *rep = reply;
	const char *err = NULL;

	list_del(q);
	if (!rep) {
		/* hiredis passes NULL only while freeing the context. */
		err = q->timed_out ? "timeout" : r->closing ? "closed" : "disconnected";
		conn_lost(r, c, ac->err ? ac->errstr : "connection lost");
	} else if (r->closing && !q->internal) {
		rep = NULL;
		err = "closed";
	}
	req_finish(r, q, rep, err);
}

static void arm_cmd_timer(struct rq *r, uint64_t deadline);

static void on_cmd_timer(uv_timer_t *t)
{
	struct rq *r = t->data;
	struct rq_conn *c = r->conn;
	r->cmd_timer_due = 0;
	if (!c || r->closing)
		return;
	uint64_t now = uv_now(r->loop), min = RQ_NO_DEADLINE;
	size_t expired = 0;
	for (struct rq_req *q = c->pending.next; q != &c->pending; q = q->next) {
		if (q->deadline <= now) {
			q->timed_out = true;
			expired++;
		} else if (q->deadline < min) {
			min = q->deadline;
		}
	}
	if (expired) {
		LOGW(NULL, NULL, "redis %s: %zu command(s) timed out, reconnecting to %s",
		     r->name, expired, r->where);
		conn_drop(r, "command timeout");
	} else if (min != RQ_NO_DEADLINE) {
		arm_cmd_timer(r, min);
	}
}

static void arm_cmd_timer(struct rq *r, uint64_t deadline)
{
	if (r->cmd_timer_due && r->cmd_timer_due <= deadline)
		return;
	uint64_t now = uv_now(r->loop);
	r->cmd_timer_due = deadline;
	uv_timer_start(&r->cmd_timer, on_cmd_timer, deadline > now ? deadline - now : 0, 0);
}

/* The i-th argument of a RESP-formatted command ("*N\r\n$L\r\nARG\r\n..."). */
static bool resp_arg(const char *cmd, size_t len, int i, const char **arg, size_t *alen)
{
	const char *p = cmd, *end = cmd + len;
	const char *nl = memchr(p, '\n', len);
	if (!nl)
		return false;
	p = nl + 1;
	for (int k = 0; ; k++) {
		if (p >= end || *p != '$')
			return false;
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return false;
		long n = strtol(p + 1, NULL, 10);
		if (n < 0 || n > end - (nl + 1))
			return false;
		if (k == i) {
			*arg = nl + 1;
			*alen = (size_t)n;
			return true;
		}
		p = nl + 1 + n + 2;
	}
}

static bool arg_is(const char *a, size_t n, const char *word)
{
	return n == strlen(word) && !strncasecmp(a, word, n);
}

/* Commands whose replies hiredis 0.14 cannot match one-to-one (pub/sub push
 * messages, MONITOR, RESP3, suppressed replies) or that would silently undo
 * the handshake (SELECT, RESET). cmd is RESP-formatted. */
static bool cmd_unsupported(const char *cmd, size_t len)
{
	static const char *const names[] = {
		"subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe",
		"sunsubscribe", "monitor", "hello", "select", "reset",
	};
	const char *a;
	size_t n;
	if (!resp_arg(cmd, len, 0, &a, &n))
		return false;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (arg_is(a, n, names[i]))
			return true;
	return arg_is(a, n, "client") && resp_arg(cmd, len, 1, &a, &n) && arg_is(a, n, "reply");
}

static int submit(struct rq *r, uint32_t timeout_ms, rq_cb *cb, void *data,
                  const char *cmd, size_t len)
{
	if (cmd_unsupported(cmd, len)) {
		LOGE(NULL, NULL, "redis %s: unsupported command (pub/sub, MONITOR, HELLO, "
		     "SELECT, RESET, CLIENT REPLY)", r->name);
		return -1;
	}
	if (r->state != RQ_READY || !r->conn) {
		defer_fail(r, cb, data, "not connected");
		return 0;
	}
	struct rq_req *q = req_get(r);
	q->cb = cb;
	q->data = data;
	if (timeout_ms == 0)
		timeout_ms = r->cmd_timeout_ms;
	q->deadline = timeout_ms == RQ_TIMEOUT_NONE ? RQ_NO_DEADLINE
	                                            : uv_now(r->loop) + timeout_ms;
	r->pending++;
	if (conn_send(r->conn, q, cmd, len) < 0) {
		/* Not reachable while r->conn is current; fail it anyway. */
		r->pending--;
		req_put(r, q);
		defer_fail(r, cb, data, "disconnected");
		return 0;
	}
	if (q->deadline != RQ_NO_DEADLINE)
		arm_cmd_timer(r, q->deadline);
	return 0;
}

int rq_cmdv(struct rq *r, uint32_t timeout_ms, rq_cb *cb, void *data,
            int argc, const char **argv, const size_t *argvlen)
{
	if (!r || r->closing || argc <= 0 || !argv)
		return -1;
	sds cmd;
	int len = redisFormatSdsCommandArgv(&cmd, argc, argv, argvlen);
	if (len < 0)
		return -1;
	int rc = submit(r, timeout_ms, cb, data, cmd, (size_t)len);
	sdsfree(cmd);
	return rc;
}

int rq_cmdf(struct rq *r, uint32_t timeout_ms, rq_cb *cb, void *data, const char *fmt, ...)
{
	if (!r || r->closing || !fmt)
		return -1;
	char *cmd;
	va_list ap;
	va_start(ap, fmt);
	int len = redisvFormatCommand(&cmd, fmt, ap);
	va_end(ap);
	if (len < 0)
		return -1;
	int rc = submit(r, timeout_ms, cb, data, cmd, (size_t)len);
	redisFreeCommand(cmd);
	return rc;
}

/* ---- lifecycle ------------------------------------------------------------ */

int rq_new(uv_loop_t *loop, const struct rq_opts *o, struct rq **out)
{
	struct rq_url url;
	char err[160] = "no loop or options";
	const char *name = o && o->name ? o->name : "redis";
	*out = NULL;
	if (!loop || !o || rq_url_parse(o->url, &url, err, sizeof err) < 0) {
		LOGE(NULL, NULL, "redis %s: invalid URL: %s", name, err);
		return -1;
	}
	struct rq *r = xcalloc(1, sizeof *r);
	r->loop = loop;
	r->name = xstrdup(name);
	r->url = url;
	if (url.path[0])
		snprintf(r->where, sizeof r->where, "%s?db=%d", url.path, url.db);
	else if (strchr(url.host, ':'))
		snprintf(r->where, sizeof r->where, "[%s]:%d/%d", url.host, url.port, url.db);
	else
		snprintf(r->where, sizeof r->where, "%s:%d/%d", url.host, url.port, url.db);
	r->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : RQ_DEFAULT_CONNECT_MS;
	r->cmd_timeout_ms = o->cmd_timeout_ms ? o->cmd_timeout_ms : RQ_DEFAULT_CMD_MS;
	r->on_connect = o->on_connect;
	r->on_disconnect = o->on_disconnect;
	r->data = o->data;
	r->rng = uv_hrtime() ^ (uint64_t)(uintptr_t)r ^ 0x9e3779b97f4a7c15ULL;
	if (!r->rng)
		r->rng = 1;
	uv_timer_init(loop, &r->backoff_timer);
	uv_timer_init(loop, &r->connect_timer);
	uv_timer_init(loop, &r->cmd_timer);
	uv_timer_init(loop, &r->defer_timer);
	r->backoff_timer.data = r->connect_timer.data = r->cmd_timer.data = r->defer_timer.data = r;
	r->live = 4;
	r->state = RQ_IDLE;
	/* First attempt on the next loop iteration: nothing runs inside rq_new. */
	uv_timer_start(&r->backoff_timer, on_backoff, 0, 0);
	*out = r;
	return 0;
}

void rq_close(struct rq *r, void (*done)(void *data), void *data)
{
	if (!r || r->closing)
		return;
	r->closing = true;
	r->done = done;
	r->done_data = data;
	uv_timer_stop(&r->backoff_timer);
	uv_timer_stop(&r->connect_timer);
	uv_timer_stop(&r->cmd_timer);
	r->cmd_timer_due = 0;
	/* The teardown (failing what is pending with "closed") runs on the next
	 * turn of the loop, never inside rq_close. Replies read meanwhile are
	 * reported as "closed" too. */
	uv_timer_start(&r->defer_timer, on_defer, 0, 0);
}

bool rq_connected(const struct rq *r)
{
	return r && r->state == RQ_READY && !r->closing;
}

uint64_t rq_reconnects(const struct rq *r)
{
	return r ? r->reconnects : 0;
}

size_t rq_pending(const struct rq *r)
{
	return r ? r->pending : 0;
}

/* ---- URL parsing --------------------------------------------------------- */

static int url_fail(char *err, size_t errlen, const char *msg)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", msg);
	return -1;
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Percent-decodes s[0..n) into out (size cap, NUL-terminated). */
static int pct_decode(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int ch = (unsigned char)s[i];
		if (ch == '%') {
			int hi, lo;
			if (i + 2 >= n || (hi = hexval(s[i + 1])) < 0 || (lo = hexval(s[i + 2])) < 0)
				return -1;
			ch = hi * 16 + lo;
			if (ch == 0)
				return -1;
			i += 2;
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = (char)ch;
	}
	out[o] = '\0';
	return 0;
}

static int parse_int(const char *s, size_t n, long min, long max, long *out)
{
	if (n == 0 || n > 10)
		return -1;
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_userinfo(const char *s, size_t n, struct rq_url *u, char *err, size_t errlen)
{
	const char *colon = memchr(s, ':', n);
	if (!colon)
		return url_fail(err, errlen, "user info without ':': use redis://:password@host "
		                "or redis://user:password@host");
	if (pct_decode(s, (size_t)(colon - s), u->user, sizeof u->user) < 0)
		return url_fail(err, errlen, "invalid or too long user name");
	if (pct_decode(colon + 1, n - (size_t)(colon + 1 - s), u->password, sizeof u->password) < 0)
		return url_fail(err, errlen, "invalid or too long password");
	return 0;
}

static int parse_query(const char *s, size_t n, struct rq_url *u, char *err, size_t errlen)
{
	const char *end = s + n;
	while (s < end) {
		const char *amp = memchr(s, '&', (size_t)(end - s));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(s, '=', (size_t)(pe - s));
		if (!eq)
			return url_fail(err, errlen, "URL parameter without '='");
		size_t kl = (size_t)(eq - s), vl = (size_t)(pe - eq - 1);
		long v;
		if (kl == 2 && !strncmp(s, "db", 2)) {
			if (parse_int(eq + 1, vl, 0, INT_MAX, &v) < 0)
				return url_fail(err, errlen, "db must be a non-negative integer");
			u->db = (int)v;
		} else if (kl == 8 && !strncmp(s, "password", 8)) {
			if (pct_decode(eq + 1, vl, u->password, sizeof u->password) < 0)
				return url_fail(err, errlen, "invalid or too long password");
		} else if ((kl == 4 && !strncmp(s, "user", 4)) || (kl == 8 && !strncmp(s, "username", 8))) {
			if (pct_decode(eq + 1, vl, u->user, sizeof u->user) < 0)
				return url_fail(err, errlen, "invalid or too long user name");
		} else {
			return url_fail(err, errlen, "unknown URL parameter (db, password, user)");
		}
		s = amp ? amp + 1 : end;
	}
	return 0;
}

int rq_url_parse(const char *url, struct rq_url *u, char *err, size_t errlen)
{
	memset(u, 0, sizeof *u);
	u->port = 6379;
	if (!url || !*url)
		return url_fail(err, errlen, "empty Redis URL");
	bool is_unix;
	const char *p;
	if (!strncasecmp(url, "redis://", 8)) {
		p = url + 8;
		is_unix = false;
	} else if (!strncasecmp(url, "unix://", 7)) {
		p = url + 7;
		is_unix = true;
	} else if (!strncasecmp(url, "rediss://", 9)) {
		return url_fail(err, errlen, "rediss:// (TLS) is not supported");
	} else {
		return url_fail(err, errlen, "expected redis://host:port/db or unix:///path");
	}
	if (strchr(p, '#'))
		return url_fail(err, errlen, "unexpected '#' in URL");
	const char *qm = strchr(p, '?');
	const char *end = qm ? qm : p + strlen(p);

	if (is_unix) {
		/* unix://[[user]:password@]/path */
		if (*p != '/') {
			const char *at = NULL;
			for (const char *s = p; s + 1 < end; s++)
				if (s[0] == '@' && s[1] == '/')
					at = s;
			if (!at)
				return url_fail(err, errlen, "unix:// URL needs an absolute path");
			if (parse_userinfo(p, (size_t)(at - p), u, err, errlen) < 0)
				return -1;
			p = at + 1;
		}
		if (pct_decode(p, (size_t)(end - p), u->path, sizeof u->path) < 0)
			return url_fail(err, errlen, "invalid or too long socket path");
		if (u->path[0] != '/' || u->path[1] == '\0')
			return url_fail(err, errlen, "unix:// URL needs an absolute path");
	} else {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		const char *auth_end = slash ? slash : end;
		const char *at = NULL;
		for (const char *s = p; s < end; s++)     /* the last '@' of the URL */
			if (*s == '@')
				at = s;
		if (at) {
			if (parse_userinfo(p, (size_t)(at - p), u, err, errlen) < 0)
				return -1;
			p = at + 1;
			slash = memchr(p, '/', (size_t)(end - p));
			auth_end = slash ? slash : end;
		}
		const char *hs = p, *he, *port = NULL;
		if (*p == '[') {
			const char *rb = memchr(p, ']', (size_t)(auth_end - p));
			if (!rb)
				return url_fail(err, errlen, "missing ']' after IPv6 address");
			hs = p + 1;
			he = rb;
			if (rb + 1 < auth_end) {
				if (rb[1] != ':')
					return url_fail(err, errlen, "unexpected text after ']'");
				port = rb + 2;
			}
		} else {
			const char *colon = memchr(p, ':', (size_t)(auth_end - p));
			he = colon ? colon : auth_end;
			if (colon) {
				if (memchr(colon + 1, ':', (size_t)(auth_end - colon - 1)))
					return url_fail(err, errlen, "IPv6 addresses must be in [brackets]");
				port = colon + 1;
			}
		}
		size_t hl = (size_t)(he - hs);
		if (hl >= sizeof u->host)
			return url_fail(err, errlen, "host name too long");
		for (size_t i = 0; i < hl; i++) {
			unsigned char ch = (unsigned char)hs[i];
			if (ch <= ' ' || ch == '%' || ch == '@' || ch == '/' || ch == '\\')
				return url_fail(err, errlen, "invalid character in host");
		}
		if (hl == 0)
			strcpy(u->host, "127.0.0.1");
		else
			memcpy(u->host, hs, hl);
		if (port) {
			long v;
			if (parse_int(port, (size_t)(auth_end - port), 1, 65535, &v) < 0)
				return url_fail(err, errlen, "port must be 1..65535");
			u->port = (int)v;
		}
		if (slash && slash + 1 < end) {
			long v;
			if (parse_int(slash + 1, (size_t)(end - slash - 1), 0, INT_MAX, &v) < 0)
				return url_fail(err, errlen, "database (after '/') must be a non-negative integer");
			u->db = (int)v;
		}
	}
	if (qm && parse_query(qm + 1, strlen(qm + 1), u, err, errlen) < 0)
		return -1;
	if (u->user[0] && !u->password[0])
		return url_fail(err, errlen, "a user name needs a password");
	return 0;
}
