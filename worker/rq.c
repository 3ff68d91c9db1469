/*
 * rq: a Redis client connection on a libuv loop (see rq.h for the contract).
 *
 * The socket is ours: a non-blocking TCP (or unix) socket watched by one
 * uv_poll_t, with OpenSSL on top of it for rediss:// URLs. hiredis is kept
 * for the protocol only: redisFormatCommand* builds the commands and a
 * redisReader parses the replies. Replies arrive in the order the commands
 * were written, so each connection keeps a FIFO of commands in flight and
 * hands every reply to the head of it. Everything runs on the loop thread.
 *
 * Around that:
 *   - the connect timeout (covering DNS, TCP connect, the TLS handshake and
 *     the AUTH/SELECT/PING handshake) and per-command timeouts: one uv timer
 *     per client armed at the earliest deadline.
 *   - reconnection with exponential backoff and jitter.
 *   - commands issued while not connected, failed asynchronously.
 *   - Cluster ASK: a command the slot's owner answers "-ASK" is resent to
 *     the importing node after ASKING; replies of later commands wait on
 *     r->hold so callbacks keep the issue order.
 *   - clear messages for what an operator must fix: TLS verification (unknown
 *     CA, name mismatch), a TLS handshake timeout, WRONGPASS/NOAUTH, and an
 *     ACL that refuses a command (NOPERM), logged as errors naming it.
 *
 * Lifetimes. A connection is "detached" (r->conn = NULL) the moment we learn
 * it is dying, before any user code runs, so user code can never reach a
 * dying connection; its pending commands are then failed, each callback
 * exactly once. The struct rq_conn (poll handle, fd, SSL, reader) is freed in
 * the poll handle's close callback, on a later turn of the loop, so code that
 * still holds it during a callback may read c->closing. The struct rq itself
 * is freed after rq_close, in the last close callback of its timers and
 * connections.
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

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

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
	char cmd[24];               /* the command's name, for ACL messages */
	/* Cluster: ASK redirects. */
	char *bytes;                /* the formatted command (cluster mode only) */
	size_t nbytes;
	bool in_tx;                 /* sent inside MULTI/WATCH ... EXEC: never resent alone */
	struct rq_req *ask_for;     /* internal: resends this user command to the importing node */
	struct rq_req *hold_next;   /* on r->hold: completion in issue order */
	bool ready;                 /* on r->hold: reply (or held_err) known */
	redisReply *held;           /* on r->hold: the reply, owned until delivered */
	const char *held_err;
};

/* Where a connection is: TCP connect, TLS handshake, open (the AUTH/SELECT/
 * PING handshake and then the user's commands travel in the open phase). */
enum conn_phase { PH_CONNECT, PH_TLS, PH_OPEN };

/* What a connection is for: the data node (user commands), asking a Sentinel
 * where the master is, or a Sentinel subscription to +switch-master. */
enum conn_role { CR_DATA, CR_DISCOVER, CR_WATCH, CR_ASK };

/* One connection: socket, poll handle, TLS session, reply parser and the
 * commands written on it. Owned by the rq while current (r->conn); once
 * detached it lives until the poll handle's close callback. */
struct rq_conn {
	uv_poll_t poll;
	int fd;
	SSL *ssl;                   /* NULL without TLS */
	redisReader *reader;
	struct rq *r;
	enum conn_phase phase;
	int events;                 /* UV_READABLE | UV_WRITABLE being polled */
	int tls_want;               /* PH_TLS: what SSL_connect waits for */
	bool read_wants_write;      /* SSL_read needs the socket writable */
	bool closing;               /* detached, uv_close called */
	int handshake_left;         /* handshake replies still expected */
	char *out;                  /* formatted commands not written yet */
	size_t out_len, out_off, out_cap;
	struct rq_req pending;      /* sentinel: commands written, replies due */
	enum conn_role role;
	bool in_multi, watching;    /* user commands sent: inside MULTI / after WATCH */
	uint64_t asked;             /* CR_ASK: commands answered through ASKING */
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
	char where[640];            /* "host:port/db" or "path?db=N" for logs */
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

	/* Additions: transport, TLS and messages. */
	char host[256];             /* the address being connected to */
	int port;
	SSL_CTX *ssl_ctx;           /* rediss:// only */
	char tls_name[256];         /* name (or IP) the certificate must hold; SNI */
	char last_err[1024];        /* why the last attempt failed */
	char logged_err[1024];      /* the last error logged loudly */
	char perm_logged[16][24];   /* commands whose NOPERM was logged */
	int nperm;
	char acl_err[512];          /* the last NOPERM ("CMD: NOPERM ..."), "" = none or cleared */
	char acl_cmd[24];           /* its command: cleared when that command succeeds ("" for a
	                               refusal inside a script: another script may succeed) */
	uint64_t acl_at;            /* loop time of that refusal */

	/* Sentinel (url.sentinel). */
	enum conn_role next_role;   /* what the next attempt connects to */
	bool have_master;           /* master_host:master_port known */
	char master_host[256];
	int master_port;
	int sent_idx;               /* next sentinel to ask */
	struct sockaddr_storage sent_addr;  /* the sentinel that answered last */
	socklen_t sent_addrlen;
	char sent_name[256];        /* its host, for TLS */
	struct rq_conn *watch;      /* +switch-master subscription, NULL when none */
	uv_timer_t watch_timer;     /* restarts the watcher */
	uint64_t switches;          /* +switch-master events followed */
	bool connect_now;           /* the next attempt starts without backoff */
	bool keep_target;           /* this drop keeps master_host (a redirect) */
	int slot;                   /* Cluster: the hash slot we serve */
	/* Cluster ASK: commands answered by the importing node. Their replies,
	 * and those of every command issued after them, wait on r->hold so
	 * callbacks still run in the order the commands were issued. */
	struct rq_conn *askc;       /* connection to the importing node, NULL when none */
	char ask_host[256];
	int ask_port;
	struct rq_req *hold_head, *hold_tail;
	uint64_t asks;              /* commands resent with ASKING, in total */
	uint64_t tryagains;         /* TRYAGAIN replies delivered since the last MOVED */
};

static void conn_drop(struct rq *r, const char *why);
static void schedule_reconnect(struct rq *r);
static void on_poll(uv_poll_t *h, int status, int events);
static void acl_check(struct rq *r, struct rq_req *q, const redisReply *reply);
static void target_pick(struct rq *r);
static void watch_message(struct rq *r, const redisReply *m);
static void watch_start(struct rq *r);
static void watch_drop(struct rq *r, const char *why);
static void on_backoff(uv_timer_t *t);
static bool cluster_redirect(struct rq *r, struct rq_conn *c, const redisReply *reply);
static void ask_close(struct rq *r);
static void hold_drain(struct rq *r, bool all);
static struct rq_conn *conn_new(struct rq *r, const struct sockaddr *sa, socklen_t salen,
                                const char *tls_name, char *why, size_t cap);

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
	free(q->bytes);
	q->bytes = NULL;
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
	SSL_CTX_free(r->ssl_ctx);
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
	if (r->watch)
		watch_drop(r, "closed");
	r->state = RQ_CLOSED;
	uv_close((uv_handle_t *)&r->watch_timer, on_handle_closed);
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

/* ---- the transport: our own socket, optional TLS, hiredis's reader -------- */

/* Remembers why the last attempt failed (for the periodic "cannot reach"
 * warning) and, when loud (a configuration problem: TLS verification,
 * authentication, a handshake timeout), logs it at once as an error, unless
 * the same message was the last one logged. */
static void attempt_error(struct rq *r, const char *why, bool loud)
{
	snprintf(r->last_err, sizeof r->last_err, "%s", why);
	if (loud && strcmp(r->logged_err, why)) {
		snprintf(r->logged_err, sizeof r->logged_err, "%s", why);
		LOGE(NULL, NULL, "redis %s: %s: %s", r->name, r->where, why);
	}
}

static void on_conn_closed(uv_handle_t *h)
{
	struct rq_conn *c = h->data;
	struct rq *r = c->r;
	if (c->ssl)
		SSL_free(c->ssl);
	if (c->fd >= 0)
		close(c->fd);
	redisReaderFree(c->reader);
	free(c->out);
	free(c);
	rq_release(r);
}

/* The connection c is gone or going: detach it so nothing new is sent on it,
 * tell the user, and plan the next attempt. Only acts if c is the current
 * connection. Never frees anything. */
static void conn_lost(struct rq *r, struct rq_conn *c, const char *why)
{
	if (c != r->conn)
		return;
	bool was_ready = r->state == RQ_READY;
	r->conn = NULL;
	r->state = RQ_IDLE;
	if ((r->url.sentinel || r->url.cluster) && c->role == CR_DATA && !r->keep_target)
		r->have_master = false;         /* ask the sentinels / the cluster where it is now */
	r->keep_target = false;
	uv_timer_stop(&r->connect_timer);
	uv_timer_stop(&r->cmd_timer);
	r->cmd_timer_due = 0;
	if (r->closing)
		return;
	if (was_ready)
		LOGW(NULL, NULL, "redis %s: connection to %s lost: %s", r->name, r->where, why);
	else
		attempt_error(r, why, false);
	schedule_reconnect(r);
	if (was_ready && r->on_disconnect)
		r->on_disconnect(r, why, r->data);
}

/* Detaches the current connection and closes it: every command pending on it
 * gets NULL ("timeout" if it timed out, else "closed" when closing, else
 * "disconnected"), after on_disconnect. The struct is freed in the poll
 * handle's close callback, so a caller holding c may still read c->closing. */
static void conn_drop(struct rq *r, const char *why)
{
	struct rq_conn *c = r->conn;
	if (!c)
		return;
	conn_lost(r, c, why);       /* may run on_disconnect, which may call rq_close */
	c->closing = true;
	uv_close((uv_handle_t *)&c->poll, on_conn_closed);
	ask_close(r);
	hold_drain(r, true);        /* issued before what is still pending on c */
	while (c->pending.next != &c->pending) {
		struct rq_req *q = c->pending.next;
		list_del(q);
		req_finish(r, q, NULL, q->timed_out ? "timeout" : r->closing ? "closed" : "disconnected");
	}
}

/* A failure of connection c: the current one (conn_drop) or the Sentinel
 * watcher (watch_drop). */
static void conn_fail(struct rq *r, struct rq_conn *c, const char *why)
{
	if (c->closing)
		return;
	if (c == r->conn)
		conn_drop(r, why);
	else if (c == r->watch)
		watch_drop(r, why);
	else if (c == r->askc) {
		char w[600];
		snprintf(w, sizeof w, "cluster: the importing node %s:%d (ASK): %s", r->ask_host,
		         r->ask_port, why);
		conn_drop(r, w);        /* back to retrying on the slot's owner */
	}
}

/* conn_fail after a failure that is a configuration problem: logged at once. */
static void conn_fail_loud(struct rq *r, struct rq_conn *c, const char *why)
{
	if (c == r->conn)
		attempt_error(r, why, true);
	conn_fail(r, c, why);
}

static void conn_update_events(struct rq_conn *c)
{
	if (c->closing)
		return;
	int ev;
	switch (c->phase) {
	case PH_CONNECT:
		ev = UV_WRITABLE;
		break;
	case PH_TLS:
		ev = c->tls_want;
		break;
	default:
		ev = UV_READABLE;
		if (c->out_off < c->out_len || c->read_wants_write)
			ev |= UV_WRITABLE;
		break;
	}
	if (ev == c->events)
		return;
	c->events = ev;
	uv_poll_start(&c->poll, ev, on_poll);
}

/* One line naming a TLS failure: verification result first (unknown CA, name
 * mismatch), then OpenSSL's error queue. */
static void tls_describe(struct rq *r, struct rq_conn *c, int rc, int e, const char *stage,
                         char *why, size_t cap)
{
	long vr = SSL_get_verify_result(c->ssl);
	unsigned long ee = ERR_peek_last_error();
	char estr[256] = "";
	if (ee)
		ERR_error_string_n(ee, estr, sizeof estr);
	ERR_clear_error();
	if (ee && ERR_GET_REASON(ee) == SSL_R_CERTIFICATE_VERIFY_FAILED && vr != X509_V_OK) {
		switch (vr) {
		case X509_V_ERR_HOSTNAME_MISMATCH:
		case X509_V_ERR_IP_ADDRESS_MISMATCH:
			snprintf(why, cap, "TLS: name mismatch: the server's certificate is not valid "
			         "for \"%s\" (connect by a name the certificate holds, or set "
			         "ssl_server_name=)", r->tls_name);
			return;
		case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
		case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
		case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
		case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
		case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
			snprintf(why, cap, "TLS: unknown CA: the server's certificate is not signed by "
			         "a CA trusted here (%s; %s)",
			         r->url.tls_ca[0] ? "trusted: the ssl_ca_certs file" :
			         "trusted: the system store; name the CA with ssl_ca_certs=",
			         X509_verify_cert_error_string(vr));
			return;
		default:
			snprintf(why, cap, "TLS: the server's certificate was refused: %s",
			         X509_verify_cert_error_string(vr));
			return;
		}
	}
	if (ee) {
		const char *hint = strstr(estr, "certificate required") ?
			" (the server wants a client certificate: set ssl_certfile= and ssl_keyfile=)" :
			strstr(estr, "wrong version number") || strstr(estr, "packet length too long") ?
			" (is this a TLS port?)" : "";
		snprintf(why, cap, "TLS %s failed: %s%s", stage, estr, hint);
	} else if (e == SSL_ERROR_SYSCALL && rc == 0) {
		snprintf(why, cap, "TLS %s failed: the server closed the connection (is this a "
		         "TLS port? does the server want a client certificate?)", stage);
	} else if (e == SSL_ERROR_ZERO_RETURN) {
		snprintf(why, cap, "connection closed by the server");
	} else {
		snprintf(why, cap, "TLS %s failed: %s", stage,
		         e == SSL_ERROR_SYSCALL ? strerror(errno) : "error");
	}
}

/* True for the error replies with which a Cluster node says our slot is
 * (being) served elsewhere. */
static bool is_redirect(const redisReply *reply)
{
	return reply->type == REDIS_REPLY_ERROR && reply->str &&
	       (!strncmp(reply->str, "MOVED ", 6) || !strncmp(reply->str, "ASK ", 4) ||
	        !strncmp(reply->str, "TRYAGAIN", 8));
}

/* TRYAGAIN: a Cluster node will not run a multi-key command now (its slot is
 * migrating and the command's keys are not all on that node). */
static bool is_tryagain(const redisReply *reply)
{
	return reply->type == REDIS_REPLY_ERROR && reply->str && !strncmp(reply->str, "TRYAGAIN", 8);
}

/* Counts a TRYAGAIN answered to a user command; the first of a migration is logged
 * (at info: the command's caller retries it, nothing is lost). */
static void tryagain_note(struct rq *r, const redisReply *reply)
{
	if (!r->tryagains++)
		LOGI(NULL, NULL, "redis %s: cluster: slot %d is migrating: %s (a multi-key command "
		     "whose keys are not all on one node yet; its caller retries it, the connection "
		     "stays)", r->name, r->slot, reply->str);
	else
		LOGD(NULL, NULL, "redis %s: cluster: %s", r->name, reply->str);
}

/* A user command's outcome: delivered now, or, while earlier commands wait
 * for the importing node, kept on r->hold until they are answered. Takes rep. */
static void req_done(struct rq *r, struct rq_req *q, redisReply *rep, const char *err)
{
	if (r->hold_head) {
		q->held = rep;
		q->held_err = err;
		q->ready = true;
		q->hold_next = NULL;
		r->hold_tail->hold_next = q;
		r->hold_tail = q;
		return;
	}
	req_finish(r, q, rep, err);
	if (rep)
		freeReplyObject(rep);
}

static int ask_follow(struct rq *r, struct rq_req *q, const redisReply *reply);

/* A reply on the connection to the importing node: for ASKING's resent
 * command (q->ask_for) or the connection's own AUTH/ASKING. Returns -1 if a
 * connection was dropped. Takes rep. */
static int ask_deliver(struct rq *r, struct rq_conn *c, struct rq_req *q, redisReply *rep)
{
	struct rq_req *u = q->ask_for;
	if (!u) {
		req_finish(r, q, rep, NULL);        /* ask_internal_cb */
		freeReplyObject(rep);
		return c->closing ? -1 : 0;
	}
	req_put(r, q);
	if (is_tryagain(rep)) {
		/* The importing node will not serve it yet (a multi-key command naming
		 * a key that is not there, e.g. a set that does not exist until a
		 * job is deferred): the command's reply is this error, both
		 * connections stay; the caller retries. */
		tryagain_note(r, rep);
		c->asked++;
		u->held = rep;
		u->ready = true;
		hold_drain(r, false);
		return c->closing ? -1 : 0;
	}
	if (is_redirect(rep) && r->conn) {
		/* The importing node will not serve it either (MOVED: the migration
		 * ended meanwhile): fail it with everything in flight and retry on
		 * the owner, as without ASK. */
		u->held_err = "disconnected";
		u->ready = true;
		cluster_redirect(r, r->conn, rep);
		freeReplyObject(rep);
		return -1;
	}
	if (rep->type == REDIS_REPLY_ERROR && !r->closing)
		acl_check(r, u, rep);
	c->asked++;
	u->held = rep;
	u->ready = true;
	hold_drain(r, false);
	return c->closing ? -1 : 0;
}

/* Delivers every complete reply in the reader to its command. Returns -1 if
 * the connection was dropped (by a protocol error or from a callback). */
static int conn_deliver(struct rq *r, struct rq_conn *c)
{
	for (;;) {
		void *rep = NULL;
		if (redisReaderGetReply(c->reader, &rep) != REDIS_OK) {
			char why[200];
			snprintf(why, sizeof why, "protocol error: %s", c->reader->errstr);
			conn_fail(r, c, why);
			return -1;
		}
		if (!rep)
			return 0;
		struct rq_req *q = c->pending.next;
		if (q == &c->pending) {
			if (c->role == CR_WATCH) {          /* a pub/sub message */
				watch_message(r, rep);
				freeReplyObject(rep);
				if (c->closing)
					return -1;
				continue;
			}
			freeReplyObject(rep);
			conn_fail(r, c, "protocol error: a reply without a command");
			return -1;
		}
		list_del(q);
		redisReply *reply = rep;
		if (c->role == CR_ASK) {
			if (ask_deliver(r, c, q, reply) < 0)
				return -1;
			continue;
		}
		bool readonly = false;
		if (r->url.cluster && !r->closing && !q->internal && c == r->conn && is_tryagain(reply)) {
			/* TRYAGAIN (a multi-key command while our slot migrates, some of
			 * its keys on each node): this one command was not executed; the
			 * caller sees the error and retries on its own schedule. The
			 * connection stays (dropping it failed every command in flight
			 * and reconnected once per job). */
			tryagain_note(r, reply);
			req_done(r, q, reply, NULL);
			continue;
		}
		if (r->url.cluster && !r->closing && !q->internal && c == r->conn && is_redirect(reply)) {
			/* ASK: this one command goes to the importing node, with
			 * ASKING; the connection stays. */
			if (!strncmp(reply->str, "ASK ", 4) && ask_follow(r, q, reply) == 0) {
				freeReplyObject(rep);
				continue;
			}
			/* Not executed: it fails like the rest of the connection. */
			req_done(r, q, NULL, "disconnected");
			cluster_redirect(r, c, reply);
			freeReplyObject(rep);
			return -1;
		}
		if (reply->type != REDIS_REPLY_ERROR && !q->internal && r->acl_cmd[0] &&
		    !strcmp(q->cmd, r->acl_cmd))
			r->acl_err[0] = r->acl_cmd[0] = '\0';   /* the ACL allows it now */
		if (reply->type == REDIS_REPLY_ERROR && !r->closing) {
			acl_check(r, q, reply);
			/* Sentinel: the node we write to was demoted to a replica. */
			readonly = r->url.sentinel && reply->str && !strncmp(reply->str, "READONLY", 8);
		}
		if (r->closing && !q->internal) {
			req_finish(r, q, NULL, "closed");
			freeReplyObject(rep);
		} else if (!q->internal) {
			req_done(r, q, reply, NULL);
		} else {
			req_finish(r, q, reply, NULL);
			freeReplyObject(rep);
		}
		if (c->closing)
			return -1;
		if (readonly) {
			r->have_master = false;
			conn_fail(r, c, "the node is a replica now (READONLY): asking the sentinels "
			          "for the master");
			return -1;
		}
	}
}

/* Reads what the socket has, feeds the reader and delivers replies. */
static int conn_read(struct rq *r, struct rq_conn *c)
{
	char buf[16384];
	c->read_wants_write = false;
	for (;;) {
		ssize_t n;
		if (c->ssl) {
			ERR_clear_error();
			int k = SSL_read(c->ssl, buf, (int)sizeof buf);
			if (k <= 0) {
				int e = SSL_get_error(c->ssl, k);
				if (e == SSL_ERROR_WANT_READ)
					return 0;
				if (e == SSL_ERROR_WANT_WRITE) {
					c->read_wants_write = true;
					return 0;
				}
				char why[400];
				tls_describe(r, c, k, e, "read", why, sizeof why);
				if (r->state == RQ_CONNECTING)
					conn_fail_loud(r, c, why);
				else
					conn_fail(r, c, why);
				return -1;
			}
			n = k;
		} else {
			n = read(c->fd, buf, sizeof buf);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					return 0;
				if (errno == EINTR)
					continue;
				char why[160];
				snprintf(why, sizeof why, "read: %s", strerror(errno));
				conn_fail(r, c, why);
				return -1;
			}
			if (n == 0) {
				conn_fail(r, c, "connection closed by the server");
				return -1;
			}
		}
		if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
			conn_fail(r, c, "protocol error");
			return -1;
		}
		if (conn_deliver(r, c) < 0)
			return -1;
		/* A short plain read drained the socket; TLS must read until
		 * WANT_READ (records may sit decrypted inside OpenSSL). */
		if (!c->ssl && (size_t)n < sizeof buf)
			return 0;
	}
}

/* Writes as much of the output buffer as the socket takes. */
static int conn_write(struct rq *r, struct rq_conn *c)
{
	while (c->out_off < c->out_len) {
		size_t left = c->out_len - c->out_off;
		if (c->ssl) {
			/* A retried SSL_write must ask for at least as much as before. */
			int len = left > 65536 ? 65536 : (int)left;
			ERR_clear_error();
			int k = SSL_write(c->ssl, c->out + c->out_off, len);
			if (k <= 0) {
				int e = SSL_get_error(c->ssl, k);
				if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
					return 0;
				char why[400];
				tls_describe(r, c, k, e, "write", why, sizeof why);
				conn_fail(r, c, why);
				return -1;
			}
			c->out_off += (size_t)k;
		} else {
			ssize_t n = send(c->fd, c->out + c->out_off, left, MSG_NOSIGNAL);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					return 0;
				if (errno == EINTR)
					continue;
				char why[160];
				snprintf(why, sizeof why, "write: %s", strerror(errno));
				conn_fail(r, c, why);
				return -1;
			}
			c->out_off += (size_t)n;
		}
	}
	c->out_off = c->out_len = 0;
	return 0;
}

static void conn_io(struct rq *r, struct rq_conn *c, int events)
{
	if ((events & UV_READABLE) || (c->read_wants_write && (events & UV_WRITABLE)))
		if (conn_read(r, c) < 0)
			return;
	if (c->out_off < c->out_len && conn_write(r, c) < 0)
		return;
	conn_update_events(c);
}

static void tls_step(struct rq *r, struct rq_conn *c)
{
	ERR_clear_error();
	int rc = SSL_connect(c->ssl);
	if (rc == 1) {
		c->phase = PH_OPEN;
		LOGD(NULL, NULL, "redis %s: %s to %s", r->name, SSL_get_version(c->ssl), r->where);
		conn_io(r, c, UV_WRITABLE);
		return;
	}
	int e = SSL_get_error(c->ssl, rc);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		c->tls_want = e == SSL_ERROR_WANT_READ ? UV_READABLE : UV_WRITABLE;
		conn_update_events(c);
		return;
	}
	char why[400];
	tls_describe(r, c, rc, e, "handshake", why, sizeof why);
	conn_fail_loud(r, c, why);
}

/* A socket error on a TLS connection: a server that refuses the handshake
 * late (TLS 1.3: after the client's Finished, e.g. no client certificate
 * with tls-auth-clients yes) sends an alert and closes, and the close is a
 * reset when our first commands sit unread. The alert arrived before the
 * reset and can still be read: report it instead of the reset. Returns
 * true when it did (c failed). */
static bool tls_alert(struct rq *r, struct rq_conn *c)
{
	char buf[512];
	ERR_clear_error();
	int k = SSL_read(c->ssl, buf, (int)sizeof buf);
	if (k > 0 || SSL_get_error(c->ssl, k) != SSL_ERROR_SSL) {
		ERR_clear_error();
		return false;
	}
	char why[400];
	tls_describe(r, c, k, SSL_ERROR_SSL, "handshake", why, sizeof why);
	if (r->state == RQ_CONNECTING)
		conn_fail_loud(r, c, why);
	else
		conn_fail(r, c, why);
	return true;
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct rq_conn *c = h->data;
	struct rq *r = c->r;
	if (c->closing)
		return;
	/* A connection that is not closing is always the current one. */
	int soerr = 0;
	socklen_t len = sizeof soerr;
	if (status < 0 || c->phase == PH_CONNECT) {
		char why[200];
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			soerr = errno;
		if (status < 0 || soerr) {
			/* libuv reports EPOLLERR (a reset, a refused connect) as an
			 * error and has already stopped the handle. */
			if (c->ssl && c->phase != PH_CONNECT && tls_alert(r, c))
				return;
			snprintf(why, sizeof why, "%s: %s", c->phase == PH_CONNECT ? "connect" : "socket error",
			         soerr ? strerror(soerr) : uv_strerror(status));
			conn_fail(r, c, why);
			return;
		}
		if (c->ssl) {
			c->phase = PH_TLS;
			tls_step(r, c);
		} else {
			c->phase = PH_OPEN;
			conn_io(r, c, UV_WRITABLE);
		}
		return;
	}
	if (c->phase == PH_TLS)
		tls_step(r, c);
	else
		conn_io(r, c, events);
}

/* ---- connecting ---------------------------------------------------------- */

static void handshake_cb(struct rq *r, redisReply *reply, const char *err, void *data);

/* Queues a formatted command on c (sent once the connection is open). */
static void conn_send(struct rq_conn *c, struct rq_req *q, const char *cmd, size_t len)
{
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + len)
			cap *= 2;
		c->out = xrealloc(c->out, cap);
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, cmd, len);
	c->out_len += len;
	list_add_tail(&c->pending, q);
	if (c->phase == PH_OPEN)
		conn_update_events(c);
}

/* Sends one of rq's own commands (no deadline, never seen by the user) on c; cb gets c. */
static void internal_send(struct rq *r, struct rq_conn *c, int argc, const char **argv,
                          rq_cb *cb)
{
	sds cmd;
	int len = redisFormatSdsCommandArgv(&cmd, argc, argv, NULL);
	if (len < 0)
		abort();                /* only fails on out-of-memory */
	struct rq_req *q = req_get(r);
	q->cb = cb;
	q->data = c;
	q->deadline = RQ_NO_DEADLINE;
	q->internal = true;
	snprintf(q->cmd, sizeof q->cmd, "%s", argv[0]);
	conn_send(c, q, cmd, (size_t)len);
	sdsfree(cmd);
}

static void handshake_send(struct rq *r, struct rq_conn *c, int argc, const char **argv)
{
	internal_send(r, c, argc, argv, handshake_cb);
	c->handshake_left++;
}

/* AUTH [user] password on c during the handshake; nothing without a password. */
static void handshake_auth(struct rq *r, struct rq_conn *c, const char *user, const char *password)
{
	if (!password[0])
		return;
	const char *argv[3] = { "AUTH", user, password };
	if (user[0]) {
		handshake_send(r, c, 3, argv);
	} else {
		argv[1] = password;
		handshake_send(r, c, 2, argv);
	}
}

static void conn_ready(struct rq *r)
{
	uv_timer_stop(&r->connect_timer);
	r->state = RQ_READY;
	r->attempts = 0;
	r->nconnects++;
	r->last_err[0] = r->logged_err[0] = '\0';
	if (r->nconnects > 1) {
		r->reconnects++;
		metrics_reconnect("redis");
		LOGI(NULL, NULL, "redis %s: reconnected to %s", r->name, r->where);
	} else {
		LOGI(NULL, NULL, "redis %s: connected to %s", r->name, r->where);
	}
	if (r->url.sentinel)
		watch_start(r);
	if (r->on_connect)
		r->on_connect(r, r->data);
}

/* A Sentinel's answer to SENTINEL GET-MASTER-ADDR-BY-NAME: remember the
 * master and connect to it next. */
static void discovered_cluster(struct rq *r, struct rq_conn *c, const redisReply *reply);

static void discovered(struct rq *r, struct rq_conn *c, const redisReply *reply)
{
	char why[800];
	if (r->url.cluster) {
		discovered_cluster(r, c, reply);
		return;
	}
	if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
	    reply->element[0]->type != REDIS_REPLY_STRING ||
	    reply->element[1]->type != REDIS_REPLY_STRING) {
		snprintf(why, sizeof why, "sentinel %s:%d does not know a master named \"%s\"",
		         r->host, r->port, r->url.master_name);
		conn_fail_loud(r, c, why);
		return;
	}
	long port = strtol(reply->element[1]->str, NULL, 10);
	if (port < 1 || port > 65535 || reply->element[0]->len >= sizeof r->master_host) {
		snprintf(why, sizeof why, "sentinel %s:%d: bad address for \"%s\"", r->host, r->port,
		         r->url.master_name);
		conn_fail_loud(r, c, why);
		return;
	}
	if (!r->have_master || strcmp(r->master_host, reply->element[0]->str) ||
	    r->master_port != (int)port)
		LOGI(NULL, NULL, "redis %s: sentinel %s:%d: master \"%s\" is %s:%ld", r->name, r->host,
		     r->port, r->url.master_name, reply->element[0]->str, port);
	snprintf(r->master_host, sizeof r->master_host, "%s", reply->element[0]->str);
	r->master_port = (int)port;
	r->have_master = true;
	r->sent_addrlen = sizeof r->sent_addr;
	if (getpeername(c->fd, (struct sockaddr *)&r->sent_addr, &r->sent_addrlen) < 0)
		r->sent_addrlen = 0;
	snprintf(r->sent_name, sizeof r->sent_name, "%s", r->host);
	r->sent_idx--;                  /* ask the same sentinel first next time */
	r->connect_now = true;          /* connect to the master at once */
	conn_drop(r, "master found");
}

/* A node's answer to CLUSTER SLOTS: [[start, end, [ip, port, id], replicas...], ...].
 * Remember the master of our slot and connect to it next. */
static void discovered_cluster(struct rq *r, struct rq_conn *c, const redisReply *reply)
{
	char why[800];
	const redisReply *owner = NULL;
	if (reply->type == REDIS_REPLY_ARRAY) {
		for (size_t i = 0; i < reply->elements && !owner; i++) {
			const redisReply *e = reply->element[i];
			if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
			    e->element[0]->type == REDIS_REPLY_INTEGER &&
			    e->element[1]->type == REDIS_REPLY_INTEGER &&
			    e->element[0]->integer <= r->slot && r->slot <= e->element[1]->integer &&
			    e->element[2]->type == REDIS_REPLY_ARRAY && e->element[2]->elements >= 2 &&
			    e->element[2]->element[0]->type == REDIS_REPLY_STRING &&
			    e->element[2]->element[1]->type == REDIS_REPLY_INTEGER)
				owner = e->element[2];
		}
	}
	if (!owner) {
		snprintf(why, sizeof why, "cluster node %s:%d: no master serves slot %d (CLUSTER SLOTS)",
		         r->host, r->port, r->slot);
		conn_fail_loud(r, c, why);
		return;
	}
	const char *ip = owner->element[0]->str;
	long long port = owner->element[1]->integer;
	if (!*ip || !strcmp(ip, "?"))
		ip = r->host;                   /* "": the node we asked */
	if (port < 1 || port > 65535 || strlen(ip) >= sizeof r->master_host) {
		snprintf(why, sizeof why, "cluster node %s:%d: bad address for slot %d", r->host,
		         r->port, r->slot);
		conn_fail_loud(r, c, why);
		return;
	}
	if (!r->have_master || strcmp(r->master_host, ip) || r->master_port != (int)port)
		LOGI(NULL, NULL, "redis %s: cluster: slot %d is served by %s:%lld", r->name, r->slot,
		     ip, port);
	snprintf(r->master_host, sizeof r->master_host, "%s", ip);
	r->master_port = (int)port;
	r->have_master = true;
	r->sent_idx--;
	r->connect_now = true;
	conn_drop(r, "slot owner found");
}

/* Cluster: an error reply that says our slot is (being) served elsewhere.
 * MOVED: follow it at once; ASK, TRYAGAIN (a migration in progress): come
 * back shortly. Returns true when c was dropped. */
static bool cluster_redirect(struct rq *r, struct rq_conn *c, const redisReply *reply)
{
	const char *s = reply->str;
	if (!s)
		return false;
	bool moved = !strncmp(s, "MOVED ", 6), ask = !strncmp(s, "ASK ", 4);
	if (!moved && !ask && strncmp(s, "TRYAGAIN", 8))
		return false;
	char why[400];
	if (moved) {
		int slot;
		char host[256];
		int port;
		const char *hp = strchr(s + 6, ' ');
		const char *colon = hp ? strrchr(hp, ':') : NULL;
		if (sscanf(s + 6, "%d", &slot) != 1 || !colon || (size_t)(colon - hp - 1) >= sizeof host ||
		    sscanf(colon + 1, "%d", &port) != 1 || port < 1 || port > 65535) {
			r->have_master = false;
		} else {
			memcpy(host, hp + 1, (size_t)(colon - hp - 1));
			host[colon - hp - 1] = '\0';
			if (!host[0])
				snprintf(host, sizeof host, "%s", r->host);
			/* At once to another node; a MOVED to where we are is retried
			 * with the usual backoff, never in a tight loop. */
			r->connect_now = strcmp(host, r->host) || port != r->port;
			snprintf(r->master_host, sizeof r->master_host, "%s", host);
			r->master_port = port;
			r->have_master = true;
			r->keep_target = true;
		}
		if (r->tryagains)
			LOGI(NULL, NULL, "redis %s: cluster: %llu command(s) answered TRYAGAIN during "
			     "the migration of slot %d (retried by their callers)", r->name,
			     (unsigned long long)r->tryagains, r->slot);
		r->tryagains = 0;
		snprintf(why, sizeof why, "cluster: %s: following it", s);
		LOGI(NULL, NULL, "redis %s: %s", r->name, why);
	} else {
		r->keep_target = true;      /* same node, after the usual short backoff */
		snprintf(why, sizeof why, "cluster: %s: slot %d is migrating, retrying", s, r->slot);
		LOGD(NULL, NULL, "redis %s: %s", r->name, why);
	}
	conn_fail(r, c, why);
	return true;
}

/* ---- Cluster: ASK redirects ---------------------------------------------- */

/* Runs the held commands' callbacks in issue order: those answered (all:
 * every one, an unanswered one failing "timeout", "closed" or
 * "disconnected"). */
static void hold_drain(struct rq *r, bool all)
{
	while (r->hold_head && (all || r->hold_head->ready)) {
		struct rq_req *q = r->hold_head;
		r->hold_head = q->hold_next;
		if (!r->hold_head)
			r->hold_tail = NULL;
		redisReply *rep = q->held;
		const char *err = q->held_err ? q->held_err : "disconnected";
		if (q->timed_out && !q->ready)
			err = "timeout";
		else if (r->closing)
			err = "closed";
		if (rep && r->closing) {
			freeReplyObject(rep);
			rep = NULL;
		}
		req_finish(r, q, rep, rep ? NULL : err);
		if (rep)
			freeReplyObject(rep);
	}
}

/* Closes the connection to the importing node (its resent commands stay on
 * r->hold: the caller fails or keeps them). */
static void ask_close(struct rq *r)
{
	struct rq_conn *c = r->askc;
	if (!c)
		return;
	r->askc = NULL;
	if (c->asked)
		LOGI(NULL, NULL, "redis %s: cluster: %llu command(s) answered by the importing node "
		     "%s:%d through ASKING during the migration of slot %d", r->name,
		     (unsigned long long)c->asked, r->ask_host, r->ask_port, r->slot);
	c->closing = true;
	uv_close((uv_handle_t *)&c->poll, on_conn_closed);
	while (c->pending.next != &c->pending) {
		struct rq_req *q = c->pending.next;
		list_del(q);
		if (q->ask_for)
			req_put(r, q);
		else
			req_finish(r, q, NULL, "disconnected");
	}
}

/* AUTH and ASKING on the importing node: a refusal ends the ASK path (the
 * owner's connection is dropped and the commands retried, as without ASK). */
static void ask_internal_cb(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct rq_conn *c = data;
	if (c != r->askc || c->closing || r->closing)
		return;
	if (!reply || reply->type == REDIS_REPLY_ERROR) {
		char why[600];
		snprintf(why, sizeof why, "refused: %s", reply && reply->str ? reply->str :
		         err ? err : "no reply");
		conn_fail(r, c, why);
	}
}

static void ask_internal_send(struct rq *r, struct rq_conn *c, int argc, const char **argv)
{
	internal_send(r, c, argc, argv, ask_internal_cb);
}

/* Opens the connection to the importing node host:port (numeric address;
 * "localhost" as 127.0.0.1), with AUTH when the URL has a password. */
static struct rq_conn *ask_open(struct rq *r, const char *host, int port)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	socklen_t len;
	const char *h = !strcasecmp(host, "localhost") ? "127.0.0.1" : host;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, h, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		len = sizeof *s4;
	} else if (inet_pton(AF_INET6, h, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		len = sizeof *s6;
	} else {
		LOGD(NULL, NULL, "redis %s: cluster: ASK to %s: not a numeric address, retrying on "
		     "the owner instead", r->name, host);
		return NULL;
	}
	char why[200];
	const char *name = r->url.tls_server_name[0] ? r->url.tls_server_name : host;
	struct rq_conn *c = conn_new(r, (struct sockaddr *)&ss, len, name, why, sizeof why);
	if (!c) {
		LOGD(NULL, NULL, "redis %s: cluster: ASK to %s:%d: %s", r->name, host, port, why);
		return NULL;
	}
	c->role = CR_ASK;
	snprintf(r->ask_host, sizeof r->ask_host, "%s", host);
	r->ask_port = port;
	if (r->url.password[0]) {
		const char *argv[3] = { "AUTH", r->url.user, r->url.password };
		if (r->url.user[0])
			ask_internal_send(r, c, 3, argv);
		else {
			argv[1] = r->url.password;
			ask_internal_send(r, c, 2, argv);
		}
	}
	LOGI(NULL, NULL, "redis %s: cluster: slot %d is migrating to %s:%d: commands on keys "
	     "already moved go there with ASKING", r->name, r->slot, host, port);
	return c;
}

/* "-ASK <slot> <host>:<port>" for user command q (not executed): resends it,
 * once, to the importing node after ASKING and keeps it on r->hold until the
 * answer comes. Returns 0, or -1 when it cannot be resent that way (inside
 * MULTI/WATCH, not a numeric address, another migration's connection still
 * busy); the caller then fails it like the rest of the connection. */
static int ask_follow(struct rq *r, struct rq_req *q, const redisReply *reply)
{
	const char *s = reply->str;
	const char *hp = strchr(s + 4, ' ');
	const char *colon = hp ? strrchr(hp, ':') : NULL;
	char host[256];
	int port;
	if (!q->bytes || q->in_tx || !colon || (size_t)(colon - hp - 1) >= sizeof host ||
	    sscanf(colon + 1, "%d", &port) != 1 || port < 1 || port > 65535)
		return -1;
	memcpy(host, hp + 1, (size_t)(colon - hp - 1));
	host[colon - hp - 1] = '\0';
	if (!host[0])
		snprintf(host, sizeof host, "%s", r->host);
	if (r->askc && (strcmp(r->ask_host, host) || r->ask_port != port)) {
		if (r->hold_head)
			return -1;
		ask_close(r);
	}
	if (!r->askc && !(r->askc = ask_open(r, host, port)))
		return -1;
	struct rq_conn *c = r->askc;
	const char *argv[1] = { "ASKING" };
	ask_internal_send(r, c, 1, argv);
	struct rq_req *p = req_get(r);
	p->internal = true;
	p->ask_for = q;
	p->deadline = RQ_NO_DEADLINE;
	snprintf(p->cmd, sizeof p->cmd, "%s", q->cmd);
	conn_send(c, p, q->bytes, q->nbytes);
	conn_update_events(c);
	q->ready = false;
	q->held = NULL;
	q->held_err = NULL;
	q->hold_next = NULL;
	if (r->hold_tail)
		r->hold_tail->hold_next = q;
	else
		r->hold_head = q;
	r->hold_tail = q;
	r->asks++;
	LOGD(NULL, NULL, "redis %s: cluster: %s: %s resent with ASKING", r->name, s, q->cmd);
	return 0;
}

static void handshake_cb(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct rq_conn *c = data;
	(void)err;
	if ((c != r->conn && c != r->watch) || !reply || c->closing)
		return;                 /* the connection was dropped meanwhile */
	if (reply->type == REDIS_REPLY_ERROR) {
		char why[512];
		const char *s = reply->str;
		const char *who = c->role == CR_DATA ? (r->url.user[0] ? r->url.user : "default")
		                                     : (r->url.sentinel_user[0] ? r->url.sentinel_user : "default");
		if (!strncmp(s, "WRONGPASS", 9))
			snprintf(why, sizeof why, "authentication refused for user \"%s\" (%s): check "
			         "the user name and password in the Redis URL%s", who, s,
			         c->role == CR_DATA ? "" : " (sentinel_password=)");
		else if (!strncmp(s, "NOAUTH", 6))
			snprintf(why, sizeof why, "the server wants a password (%s): give "
			         "user:password@ in the Redis URL%s", s,
			         c->role == CR_DATA ? "" : " (for a Sentinel: sentinel_password=)");
		else if (!strncmp(s, "NOPERM", 6))
			snprintf(why, sizeof why, "the ACL refuses the handshake (%s): user \"%s\" "
			         "needs +auth, +select, +ping%s", s, who,
			         r->url.sentinel ? ", +role (Sentinel: +sentinel, +subscribe)" : "");
		else
			snprintf(why, sizeof why, "handshake failed: %s", s);
		conn_fail_loud(r, c, why);
		return;
	}
	if (c->role == CR_DISCOVER) {
		if (--c->handshake_left == 0)       /* the last one: SENTINEL ... */
			discovered(r, c, reply);
		return;
	}
	if (c->role == CR_WATCH) {
		if (--c->handshake_left == 0)
			LOGD(NULL, NULL, "redis %s: watching +switch-master on sentinel %s", r->name,
			     r->sent_name);
		return;
	}
	if (r->url.sentinel && reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
	    reply->element[0]->type == REDIS_REPLY_STRING && c->handshake_left == 1) {
		/* ROLE: only a master takes our writes. */
		if (strcmp(reply->element[0]->str, "master")) {
			char why[700];
			snprintf(why, sizeof why, "%s:%d is a %s, not the master: asking the sentinels "
			         "again", r->host, r->port, reply->element[0]->str);
			r->have_master = false;
			conn_fail(r, c, why);
			return;
		}
	}
	if (--c->handshake_left == 0 && !r->closing)
		conn_ready(r);
}

/* A new connection to sa: socket, connect(2) under way, poll handle, TLS
 * session for tls_name. Returns NULL with a reason in why. */
static struct rq_conn *conn_new(struct rq *r, const struct sockaddr *sa, socklen_t salen,
                                const char *tls_name, char *why, size_t cap)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, cap, "socket: %s", strerror(errno));
		return NULL;
	}
	if (sa->sa_family != AF_UNIX) {
		/* No Nagle (pipelined commands); keepalive finds dead peers. */
		int on = 1, idle = 15, intvl = 5, cnt = 3;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
	}
	if (connect(fd, sa, salen) < 0 && errno != EINPROGRESS && errno != EAGAIN) {
		snprintf(why, cap, "connect: %s", strerror(errno));
		close(fd);
		return NULL;
	}
	struct rq_conn *c = xcalloc(1, sizeof *c);
	c->fd = fd;
	c->r = r;
	list_init(&c->pending);
	int rc = uv_poll_init(r->loop, &c->poll, fd);
	if (rc < 0) {
		snprintf(why, cap, "uv_poll_init: %s", uv_strerror(rc));
		close(fd);
		free(c);
		return NULL;
	}
	c->reader = redisReaderCreate();
	if (!c->reader)
		abort();
	if (r->ssl_ctx) {
		c->ssl = SSL_new(r->ssl_ctx);
		if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1)
			abort();            /* out of memory */
		struct in6_addr a6;
		struct in_addr a4;
		if (inet_pton(AF_INET, tls_name, &a4) == 1 || inet_pton(AF_INET6, tls_name, &a6) == 1) {
			X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), tls_name);
		} else {
			SSL_set_tlsext_host_name(c->ssl, tls_name);
			SSL_set1_host(c->ssl, tls_name);
		}
		SSL_set_connect_state(c->ssl);
	}
	c->poll.data = c;
	c->phase = PH_CONNECT;
	r->live++;
	return c;
}

/* Starts the current connection attempt to sa (TCP, or the unix socket):
 * to the data node, or to a Sentinel to find the master (r->next_role). */
static void conn_open(struct rq *r, const struct sockaddr *sa, socklen_t salen)
{
	char why[200];
	struct rq_conn *c = conn_new(r, sa, salen, r->tls_name, why, sizeof why);
	if (!c) {
		LOGD(NULL, NULL, "redis %s: %s: %s", r->name, r->where, why);
		attempt_error(r, why, false);
		uv_timer_stop(&r->connect_timer);
		r->state = RQ_IDLE;
		schedule_reconnect(r);
		return;
	}
	c->role = r->next_role;
	r->conn = c;
	r->state = RQ_CONNECTING;

	/* Queued now, sent once the connection (and TLS) is up; on_connect fires
	 * after the last reply. A PING when there is nothing else proves the
	 * server answers (a server still loading its data set replies -LOADING). */
	if (c->role == CR_DISCOVER && r->url.cluster) {
		handshake_auth(r, c, r->url.user, r->url.password);
		const char *argv[2] = { "CLUSTER", "SLOTS" };
		handshake_send(r, c, 2, argv);
		conn_update_events(c);
		return;
	}
	if (c->role == CR_DISCOVER) {
		handshake_auth(r, c, r->url.sentinel_user, r->url.sentinel_password);
		const char *argv[3] = { "SENTINEL", "GET-MASTER-ADDR-BY-NAME", r->url.master_name };
		handshake_send(r, c, 3, argv);
		conn_update_events(c);
		return;
	}
	handshake_auth(r, c, r->url.user, r->url.password);
	if (r->url.db != 0) {
		char db[16];
		snprintf(db, sizeof db, "%d", r->url.db);
		const char *argv[2] = { "SELECT", db };
		handshake_send(r, c, 2, argv);
	}
	if (r->url.sentinel) {
		const char *argv[1] = { "ROLE" };
		handshake_send(r, c, 1, argv);
	} else if (c->handshake_left == 0) {
		const char *argv[1] = { "PING" };
		handshake_send(r, c, 1, argv);
	}
	conn_update_events(c);
}

/* ---- Sentinel: following +switch-master ------------------------------------ */

static void on_watch_timer(uv_timer_t *t)
{
	watch_start(t->data);
}

/* Subscribes to +switch-master on the sentinel that told us the master (a
 * second connection, commands never travel on it). */
static void watch_start(struct rq *r)
{
	if (r->watch || r->closing || !r->sent_addrlen)
		return;
	char why[200];
	struct rq_conn *c = conn_new(r, (struct sockaddr *)&r->sent_addr, r->sent_addrlen,
	                             r->sent_name, why, sizeof why);
	if (!c) {
		LOGW(NULL, NULL, "redis %s: cannot watch sentinel %s: %s", r->name, r->sent_name, why);
		uv_timer_start(&r->watch_timer, on_watch_timer, 1000, 0);
		return;
	}
	c->role = CR_WATCH;
	r->watch = c;
	handshake_auth(r, c, r->url.sentinel_user, r->url.sentinel_password);
	const char *argv[2] = { "SUBSCRIBE", "+switch-master" };
	handshake_send(r, c, 2, argv);
	conn_update_events(c);
}

/* The watcher is gone: try again in a second (it matters most while the
 * master is down). */
static void watch_drop(struct rq *r, const char *why)
{
	struct rq_conn *c = r->watch;
	if (!c)
		return;
	r->watch = NULL;
	c->closing = true;
	uv_close((uv_handle_t *)&c->poll, on_conn_closed);
	while (c->pending.next != &c->pending) {
		struct rq_req *q = c->pending.next;
		list_del(q);
		req_finish(r, q, NULL, "disconnected");
	}
	if (r->closing)
		return;
	LOGD(NULL, NULL, "redis %s: sentinel watch on %s lost: %s", r->name, r->sent_name, why);
	uv_timer_start(&r->watch_timer, on_watch_timer, 1000, 0);
}

/* A message on the watcher: "+switch-master <name> <old ip> <old port> <new
 * ip> <new port>". For our master, follow it at once. */
static void watch_message(struct rq *r, const redisReply *m)
{
	if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
	    m->element[0]->type != REDIS_REPLY_STRING || strcmp(m->element[0]->str, "message") ||
	    m->element[2]->type != REDIS_REPLY_STRING)
		return;
	char name[128], oldh[256], newh[256];
	int oldp, newp;
	if (sscanf(m->element[2]->str, "%127s %255s %d %255s %d", name, oldh, &oldp, newh, &newp) != 5 ||
	    strcmp(name, r->url.master_name) || newp < 1 || newp > 65535)
		return;
	r->switches++;
	LOGW(NULL, NULL, "redis %s: +switch-master: \"%s\" moved from %s:%d to %s:%d", r->name, name,
	     oldh, oldp, newh, newp);
	snprintf(r->master_host, sizeof r->master_host, "%s", newh);
	r->master_port = newp;
	r->have_master = true;
	if (r->conn && (strcmp(r->host, newh) || r->port != newp)) {
		r->connect_now = true;
		r->keep_target = true;
		conn_drop(r, "+switch-master: following the new master");
	} else if (!r->conn && !r->gai && !r->closing) {
		uv_timer_start(&r->backoff_timer, on_backoff, 0, 0);   /* waiting to retry: now */
	}
}

static void conn_open_addr(struct rq *r, const struct addrinfo *ai)
{
	struct sockaddr_storage ss;
	memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
	((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)r->port);  /* same offset in _in6 */
	conn_open(r, (struct sockaddr *)&ss, ai->ai_addrlen);
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
	if (status < 0 || !res) {
		char why[300];
		snprintf(why, sizeof why, "cannot resolve %s: %s", r->host,
		         status ? uv_strerror(status) : "no address");
		LOGW(NULL, NULL, "redis %s: %s", r->name, why);
		attempt_error(r, why, false);
		uv_freeaddrinfo(res);
		uv_timer_stop(&r->connect_timer);
		r->state = RQ_IDLE;
		schedule_reconnect(r);
		return;
	}
	conn_open_addr(r, res);
	uv_freeaddrinfo(res);
}

static void on_connect_timeout(uv_timer_t *t)
{
	struct rq *r = t->data;
	if (r->closing)
		return;
	char why[400];
	LOGD(NULL, NULL, "redis %s: connect to %s timed out", r->name, r->where);
	if (r->gai) {
		r->gai->r = NULL;
		uv_cancel((uv_req_t *)&r->gai->req);
		r->gai = NULL;
		r->state = RQ_IDLE;
		snprintf(why, sizeof why, "resolving %s timed out after %u ms", r->host,
		         r->connect_timeout_ms);
		attempt_error(r, why, false);
		schedule_reconnect(r);
	} else if (r->conn && r->state == RQ_CONNECTING) {
		enum conn_phase ph = r->conn->phase;
		if (ph == PH_TLS) {
			snprintf(why, sizeof why, "TLS handshake timed out after %u ms (is this a TLS "
			         "port? is the server overloaded?)", r->connect_timeout_ms);
			conn_fail_loud(r, r->conn, why);
		} else if (ph == PH_CONNECT) {
			snprintf(why, sizeof why, "connect timed out after %u ms", r->connect_timeout_ms);
			conn_drop(r, why);
		} else {
			snprintf(why, sizeof why, "no answer to the handshake (AUTH/SELECT/PING) within "
			         "%u ms", r->connect_timeout_ms);
			conn_drop(r, why);
		}
	}
}

static void on_backoff(uv_timer_t *t)
{
	struct rq *r = t->data;
	if (r->closing || r->conn || r->gai)
		return;
	target_pick(r);
	uv_timer_start(&r->connect_timer, on_connect_timeout, r->connect_timeout_ms, 0);
	if (r->url.path[0]) {
		struct sockaddr_un sun;
		memset(&sun, 0, sizeof sun);
		sun.sun_family = AF_UNIX;
		snprintf(sun.sun_path, sizeof sun.sun_path, "%s", r->url.path);
		conn_open(r, (struct sockaddr *)&sun, sizeof sun);
		return;
	}
	const char *host = !strcasecmp(r->host, "localhost") ? "127.0.0.1" : r->host;
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = AI_NUMERICHOST;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) == 0 && res) {
		conn_open_addr(r, res);
		freeaddrinfo(res);
		return;
	}
	struct rq_gai *g = xcalloc(1, sizeof *g);
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	g->r = r;
	g->req.data = g;
	int rc = uv_getaddrinfo(r->loop, &g->req, on_resolved, r->host, NULL, &hints);
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

static void schedule_reconnect(struct rq *r)
{
	if (r->closing)
		return;
	if (r->connect_now) {       /* Sentinel told us where to go: no backoff */
		r->connect_now = false;
		uv_timer_start(&r->backoff_timer, on_backoff, 0, 0);
		return;
	}
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
		LOGW(NULL, NULL, "redis %s: cannot reach %s (%d attempts), retrying: %s",
		     r->name, r->where, r->attempts - 1, r->last_err[0] ? r->last_err : "?");
	uv_timer_start(&r->backoff_timer, on_backoff, delay, 0);
}

/* ---- commands ------------------------------------------------------------ */


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
	for (struct rq_req *q = r->hold_head; q; q = q->hold_next) {     /* at the importing node */
		if (q->ready)
			continue;
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

/* Cluster: keeps a copy of user command q (an ASK resends it) and notes
 * whether it is part of a MULTI/WATCH ... EXEC block on c (never resent alone:
 * the block would lose its atomicity). */
static void tx_track(struct rq_conn *c, struct rq_req *q, const char *cmd, size_t len)
{
	q->bytes = xmalloc(len);
	memcpy(q->bytes, cmd, len);
	q->nbytes = len;
	bool multi = !strcmp(q->cmd, "MULTI"), watch = !strcmp(q->cmd, "WATCH");
	q->in_tx = c->in_multi || c->watching || multi || watch;
	if (multi)
		c->in_multi = true;
	if (watch)
		c->watching = true;
	if (!strcmp(q->cmd, "EXEC") || !strcmp(q->cmd, "DISCARD"))
		c->in_multi = c->watching = false;
	if (!strcmp(q->cmd, "UNWATCH") && !c->in_multi)
		c->watching = false;
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
	const char *a;
	size_t n;
	if (resp_arg(cmd, len, 0, &a, &n)) {
		if (n >= sizeof q->cmd)
			n = sizeof q->cmd - 1;
		for (size_t i = 0; i < n; i++)
			q->cmd[i] = (char)((a[i] >= 'a' && a[i] <= 'z') ? a[i] - 32 : a[i]);
		q->cmd[n] = '\0';
	}
	if (r->url.cluster)
		tx_track(r->conn, q, cmd, len);
	conn_send(r->conn, q, cmd, len);
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

/* An error reply NOPERM: the ACL refuses this command (or its keys) to our
 * user. It will keep failing until someone changes the ACL, so it is logged
 * as an error naming the command, once per command and client. */
static void acl_check(struct rq *r, struct rq_req *q, const redisReply *reply)
{
	if (q->internal || !rq_is_acl_refusal(reply->str))
		return;
	snprintf(r->acl_cmd, sizeof r->acl_cmd, "%s", strncmp(reply->str, "NOPERM", 6) ? "" : q->cmd);
	snprintf(r->acl_err, sizeof r->acl_err, "%s refused to user \"%s\": %s",
	         q->cmd[0] ? q->cmd : "a command", r->url.user[0] ? r->url.user : "default", reply->str);
	r->acl_at = uv_now(r->loop);
	for (int i = 0; i < r->nperm; i++)
		if (!strcmp(r->perm_logged[i], q->cmd))
			return;
	if (r->nperm < (int)(sizeof r->perm_logged / sizeof r->perm_logged[0]))
		snprintf(r->perm_logged[r->nperm++], sizeof r->perm_logged[0], "%s", q->cmd);
	LOGE(NULL, NULL, "redis %s: the ACL refuses %s to user \"%s\" (%s): a permanent error, "
	     "every %s fails until the ACL allows it (README \"ACL users\" lists what arbiter "
	     "needs)", r->name, q->cmd[0] ? q->cmd : "a command",
	     r->url.user[0] ? r->url.user : "default", reply->str, q->cmd[0] ? q->cmd : "such command");
}

/* The address the next attempt connects to. */
static void target_pick(struct rq *r)
{
	r->next_role = CR_DATA;
	if (!r->url.sentinel && !r->url.cluster) {
		snprintf(r->host, sizeof r->host, "%s", r->url.host);
		r->port = r->url.port;
	} else if (r->have_master && r->url.cluster) {
		snprintf(r->host, sizeof r->host, "%s", r->master_host);
		r->port = r->master_port;
		snprintf(r->where, sizeof r->where, "%s%s%s:%d (cluster, slot %d%s)",
		         strchr(r->host, ':') ? "[" : "", r->host, strchr(r->host, ':') ? "]" : "",
		         r->port, r->slot, r->ssl_ctx ? ", TLS" : "");
	} else if (r->have_master) {
		snprintf(r->host, sizeof r->host, "%s", r->master_host);
		r->port = r->master_port;
		snprintf(r->where, sizeof r->where, "%s%s%s:%d/%d (master \"%s\"%s)",
		         strchr(r->host, ':') ? "[" : "", r->host, strchr(r->host, ':') ? "]" : "",
		         r->port, r->url.db, r->url.master_name, r->ssl_ctx ? ", TLS" : "");
	} else if (r->url.cluster) {
		int i = (r->sent_idx < 0 ? 0 : r->sent_idx) % r->url.nhosts;
		r->sent_idx = i + 1;
		snprintf(r->host, sizeof r->host, "%s", r->url.hosts[i].host);
		r->port = r->url.hosts[i].port;
		r->next_role = CR_DISCOVER;
		snprintf(r->where, sizeof r->where, "cluster node %s:%d (slot map%s)", r->host,
		         r->port, r->ssl_ctx ? ", TLS" : "");
	} else {
		int i = (r->sent_idx < 0 ? 0 : r->sent_idx) % r->url.nhosts;
		r->sent_idx = i + 1;
		snprintf(r->host, sizeof r->host, "%s", r->url.hosts[i].host);
		r->port = r->url.hosts[i].port;
		r->next_role = CR_DISCOVER;
		snprintf(r->where, sizeof r->where, "sentinel %s:%d (master \"%s\"%s)", r->host,
		         r->port, r->url.master_name, r->ssl_ctx ? ", TLS" : "");
	}
	if (r->ssl_ctx)
		snprintf(r->tls_name, sizeof r->tls_name, "%s",
		         r->url.tls_server_name[0] ? r->url.tls_server_name : r->host);
}

/* OpenSSL's last error as text (for configuration errors at start). */
static const char *ssl_errstr(char *buf, size_t cap)
{
	unsigned long e = ERR_get_error();
	if (!e)
		snprintf(buf, cap, "%s", strerror(errno));
	else
		ERR_error_string_n(e, buf, cap);
	ERR_clear_error();
	return buf;
}

/* The TLS settings of a rediss:// URL: server verification on unless
 * ssl_cert_reqs=none, the CA file or the system store, a client certificate
 * and key if given. */
static SSL_CTX *tls_ctx_new(const struct rq_url *u, char *err, size_t errlen)
{
	char e[256];
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		snprintf(err, errlen, "TLS: %s", ssl_errstr(e, sizeof e));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_verify(ctx, u->tls_noverify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
	if (u->tls_ca[0]) {
		if (SSL_CTX_load_verify_locations(ctx, u->tls_ca, NULL) != 1) {
			snprintf(err, errlen, "ssl_ca_certs %s: %s", u->tls_ca, ssl_errstr(e, sizeof e));
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		snprintf(err, errlen, "TLS: cannot load the system CA store: %s", ssl_errstr(e, sizeof e));
		goto fail;
	}
	if (!u->tls_cert[0] != !u->tls_key[0]) {
		snprintf(err, errlen, "ssl_certfile and ssl_keyfile go together");
		goto fail;
	}
	if (u->tls_cert[0]) {
		if (SSL_CTX_use_certificate_chain_file(ctx, u->tls_cert) != 1) {
			snprintf(err, errlen, "ssl_certfile %s: %s", u->tls_cert, ssl_errstr(e, sizeof e));
			goto fail;
		}
		if (SSL_CTX_use_PrivateKey_file(ctx, u->tls_key, SSL_FILETYPE_PEM) != 1) {
			snprintf(err, errlen, "ssl_keyfile %s: %s", u->tls_key, ssl_errstr(e, sizeof e));
			goto fail;
		}
		if (SSL_CTX_check_private_key(ctx) != 1) {
			snprintf(err, errlen, "ssl_keyfile %s does not belong to ssl_certfile %s",
			         u->tls_key, u->tls_cert);
			goto fail;
		}
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

/* ---- lifecycle ------------------------------------------------------------ */

/* rq_new without the logging: -1 with the reason in err. */
static int rq_create(uv_loop_t *loop, const struct rq_opts *o, struct rq **out, char *err,
                     size_t errlen)
{
	struct rq_url url;
	const char *name = o && o->name ? o->name : "redis";
	*out = NULL;
	if (!loop || !o) {
		snprintf(err, errlen, "no loop or options");
		return -1;
	}
	char why[600];
	if (rq_url_parse(o->url, &url, why, sizeof why) < 0) {
		snprintf(err, errlen, "invalid URL: %s", why);
		return -1;
	}
	SSL_CTX *ctx = NULL;
	if (url.tls && !(ctx = tls_ctx_new(&url, err, errlen))) {
		memset(&url, 0, sizeof url);
		return -1;
	}
	struct rq *r = xcalloc(1, sizeof *r);
	r->ssl_ctx = ctx;
	r->loop = loop;
	r->name = xstrdup(name);
	r->url = url;
	if (url.path[0])
		snprintf(r->where, sizeof r->where, "%s?db=%d", url.path, url.db);
	else if (strchr(url.host, ':'))
		snprintf(r->where, sizeof r->where, "[%s]:%d/%d", url.host, url.port, url.db);
	else
		snprintf(r->where, sizeof r->where, "%s:%d/%d", url.host, url.port, url.db);
	if (url.tls)
		strncat(r->where, " (TLS)", sizeof r->where - strlen(r->where) - 1);
	if (url.sentinel)
		snprintf(r->where, sizeof r->where, "sentinels of \"%s\"", url.master_name);
	r->slot = rq_key_slot(o->cluster_key ? o->cluster_key : "{arbiter}");
	if (url.cluster)
		snprintf(r->where, sizeof r->where, "cluster (slot %d)", r->slot);
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
	uv_timer_init(loop, &r->watch_timer);
	r->backoff_timer.data = r->connect_timer.data = r->cmd_timer.data = r->defer_timer.data = r;
	r->watch_timer.data = r;
	r->live = 5;
	r->state = RQ_IDLE;
	/* First attempt on the next loop iteration: nothing runs inside rq_new. */
	uv_timer_start(&r->backoff_timer, on_backoff, 0, 0);
	memset(&url, 0, sizeof url);
	*out = r;
	return 0;
}

int rq_new(uv_loop_t *loop, const struct rq_opts *o, struct rq **out)
{
	char err[700];
	if (rq_create(loop, o, out, err, sizeof err) < 0) {
		LOGE(NULL, NULL, "redis %s: %s", o && o->name ? o->name : "redis", err);
		return -1;
	}
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
	uv_timer_stop(&r->watch_timer);
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

bool rq_is_acl_refusal(const char *s)
{
	return s && (!strncmp(s, "NOPERM", 6) ||
	             strstr(s, "can't run this command or subcommand") != NULL);
}

bool rq_is_tryagain(const char *s)
{
	return s && !strncmp(s, "TRYAGAIN", 8);
}

const char *rq_last_error(const struct rq *r)
{
	return !r || rq_connected(r) ? "" : r->last_err;
}

const char *rq_acl_refusal(const struct rq *r, uint64_t within_ms)
{
	if (!r || !r->acl_err[0] || uv_now(r->loop) - r->acl_at > within_ms)
		return NULL;
	return r->acl_err;
}

uint64_t rq_reconnects(const struct rq *r)
{
	return r ? r->reconnects : 0;
}

size_t rq_pending(const struct rq *r)
{
	return r ? r->pending : 0;
}

/* ---- blocking use (command-line tools) ------------------------------------ */

struct rq_sync {
	uv_loop_t loop;
	uv_timer_t deadline;
	struct rq *r;
	uint32_t timeout_ms;
	bool connected, expired, closed;
};

/* The state of one rq_sync_cmdv call. */
struct sync_call {
	bool done;
	redisReply *reply;
	const char *err;
};

static void sync_on_connect(struct rq *r, void *data)
{
	(void)r;
	((struct rq_sync *)data)->connected = true;
}

static void sync_on_deadline(uv_timer_t *t)
{
	((struct rq_sync *)t->data)->expired = true;
}

static void sync_on_closed(void *data)
{
	((struct rq_sync *)data)->closed = true;
}

/* A deep copy of a reply, freeable with freeReplyObject (hiredis 0.14 frees
 * with free()). */
static redisReply *reply_dup(const redisReply *a)
{
	redisReply *b = xcalloc(1, sizeof *b);
	b->type = a->type;
	b->integer = a->integer;
	if (a->str) {
		b->str = xmalloc(a->len + 1);
		memcpy(b->str, a->str, a->len);
		b->str[a->len] = '\0';
		b->len = a->len;
	}
	if (a->element && a->elements) {
		b->element = xcalloc(a->elements, sizeof *b->element);
		b->elements = a->elements;
		for (size_t i = 0; i < a->elements; i++)
			b->element[i] = reply_dup(a->element[i]);
	}
	return b;
}

static void sync_cb(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct sync_call *c = data;
	(void)r;
	c->done = true;
	c->err = err;
	if (reply)
		c->reply = reply_dup(reply);
}

int rq_sync_open(const char *url, const char *cluster_key, uint32_t timeout_ms,
                 struct rq_sync **out, char *err, size_t errlen)
{
	struct rq_sync *s = xcalloc(1, sizeof *s);
	*out = NULL;
	s->timeout_ms = timeout_ms ? timeout_ms : RQ_DEFAULT_CMD_MS;
	if (uv_loop_init(&s->loop) < 0) {
		snprintf(err, errlen, "cannot create an event loop");
		free(s);
		return -1;
	}
	struct rq_opts o = {
		.url = url, .cluster_key = cluster_key, .name = "cli", .data = s,
		.on_connect = sync_on_connect, .cmd_timeout_ms = s->timeout_ms,
		.connect_timeout_ms = s->timeout_ms < RQ_DEFAULT_CONNECT_MS ? s->timeout_ms : 0,
	};
	if (rq_create(&s->loop, &o, &s->r, err, errlen) < 0) {
		uv_loop_close(&s->loop);
		free(s);
		return -1;
	}
	uv_timer_init(&s->loop, &s->deadline);
	s->deadline.data = s;
	uv_timer_start(&s->deadline, sync_on_deadline, s->timeout_ms, 0);
	while (!s->connected && !s->expired)
		uv_run(&s->loop, UV_RUN_ONCE);
	uv_timer_stop(&s->deadline);
	if (!s->connected) {
		snprintf(err, errlen, "cannot reach %s within %u ms: %s", s->r->where, s->timeout_ms,
		         s->r->last_err[0] ? s->r->last_err : "no answer");
		rq_sync_close(s);
		return -1;
	}
	*out = s;
	return 0;
}

redisReply *rq_sync_cmdv(struct rq_sync *s, int argc, const char **argv, char *err,
                         size_t errlen)
{
	struct sync_call c = { 0 };
	if (rq_cmdv(s->r, 0, sync_cb, &c, argc, argv, NULL) < 0) {
		snprintf(err, errlen, "%s: cannot be sent", argc > 0 ? argv[0] : "?");
		return NULL;
	}
	while (!c.done)
		uv_run(&s->loop, UV_RUN_ONCE);
	if (!c.reply)
		snprintf(err, errlen, "%s: %s (%s)", argv[0], c.err ? c.err : "no reply",
		         s->r->last_err[0] ? s->r->last_err : s->r->where);
	return c.reply;
}

void rq_sync_close(struct rq_sync *s)
{
	if (!s)
		return;
	rq_close(s->r, sync_on_closed, s);
	while (!s->closed)
		uv_run(&s->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&s->deadline, NULL);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	uv_loop_close(&s->loop);
	free(s);
}

/* ---- Cluster hash slots ------------------------------------------------------ */

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), the checksum Redis
 * Cluster hashes keys with. */
static uint16_t crc16(const char *s, size_t n)
{
	uint16_t crc = 0;
	for (size_t i = 0; i < n; i++) {
		crc ^= (uint16_t)((unsigned char)s[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
	}
	return crc;
}

int rq_key_slot(const char *key)
{
	size_t n = strlen(key);
	const char *l = memchr(key, '{', n);
	if (l) {
		const char *r = memchr(l + 1, '}', n - (size_t)(l + 1 - key));
		if (r && r > l + 1)
			return crc16(l + 1, (size_t)(r - l - 1)) & 16383;
	}
	return crc16(key, n) & 16383;
}

/* ---- URL parsing --------------------------------------------------------- */

static int url_fail(char *err, size_t errlen, const char *msg)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", msg);
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
			if (i + 2 >= n || (hi = hex_digit((unsigned char)s[i + 1])) < 0 ||
			    (lo = hex_digit((unsigned char)s[i + 2])) < 0)
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
		} else if (kl == 12 && !strncmp(s, "ssl_ca_certs", 12)) {
			if (pct_decode(eq + 1, vl, u->tls_ca, sizeof u->tls_ca) < 0 || !u->tls_ca[0])
				return url_fail(err, errlen, "invalid or too long ssl_ca_certs");
		} else if (kl == 12 && !strncmp(s, "ssl_certfile", 12)) {
			if (pct_decode(eq + 1, vl, u->tls_cert, sizeof u->tls_cert) < 0 || !u->tls_cert[0])
				return url_fail(err, errlen, "invalid or too long ssl_certfile");
		} else if (kl == 11 && !strncmp(s, "ssl_keyfile", 11)) {
			if (pct_decode(eq + 1, vl, u->tls_key, sizeof u->tls_key) < 0 || !u->tls_key[0])
				return url_fail(err, errlen, "invalid or too long ssl_keyfile");
		} else if (kl == 15 && !strncmp(s, "ssl_server_name", 15)) {
			if (pct_decode(eq + 1, vl, u->tls_server_name, sizeof u->tls_server_name) < 0 ||
			    !u->tls_server_name[0])
				return url_fail(err, errlen, "invalid or too long ssl_server_name");
		} else if (kl == 17 && !strncmp(s, "sentinel_password", 17) && u->sentinel) {
			if (pct_decode(eq + 1, vl, u->sentinel_password, sizeof u->sentinel_password) < 0)
				return url_fail(err, errlen, "invalid or too long sentinel_password");
		} else if (kl == 13 && !strncmp(s, "sentinel_user", 13) && u->sentinel) {
			if (pct_decode(eq + 1, vl, u->sentinel_user, sizeof u->sentinel_user) < 0)
				return url_fail(err, errlen, "invalid or too long sentinel_user");
		} else if (kl == 13 && !strncmp(s, "ssl_cert_reqs", 13)) {
			if (vl == 8 && !strncmp(eq + 1, "required", 8))
				u->tls_noverify = false;
			else if (vl == 4 && !strncmp(eq + 1, "none", 4))
				u->tls_noverify = true;
			else
				return url_fail(err, errlen, "ssl_cert_reqs must be required (the default) "
				                "or none");
		} else {
			return url_fail(err, errlen, "unknown URL parameter (db, password, user, "
			                "ssl_ca_certs, ssl_certfile, ssl_keyfile, ssl_cert_reqs, "
			                "ssl_server_name)");
		}
		s = amp ? amp + 1 : end;
	}
	return 0;
}

/* host[:port] or [v6]:port at s[0..n) into host/port (port default dport). */
/* host[:port] or [v6][:port] in s[0..n). multi (one of a Sentinel/Cluster
 * list): the host is required and may not hold ','; else an empty host is
 * 127.0.0.1. */
static int parse_hostport(const char *s, size_t n, char *host, size_t hcap, int *port, int dport,
                          bool multi, char *err, size_t errlen)
{
	const char *hs = s, *he, *ps = NULL, *end = s + n;
	if (n && *s == '[') {
		const char *rb = memchr(s, ']', n);
		if (!rb)
			return url_fail(err, errlen, "missing ']' after IPv6 address");
		hs = s + 1;
		he = rb;
		if (rb + 1 < end) {
			if (rb[1] != ':')
				return url_fail(err, errlen, "unexpected text after ']'");
			ps = rb + 2;
		}
	} else {
		const char *colon = memchr(s, ':', n);
		he = colon ? colon : end;
		if (colon) {
			if (memchr(colon + 1, ':', (size_t)(end - colon - 1)))
				return url_fail(err, errlen, "IPv6 addresses must be in [brackets]");
			ps = colon + 1;
		}
	}
	size_t hl = (size_t)(he - hs);
	if ((multi && hl == 0) || hl >= hcap)
		return url_fail(err, errlen, multi ? "missing or too long host" : "host name too long");
	for (size_t i = 0; i < hl; i++) {
		unsigned char ch = (unsigned char)hs[i];
		if (ch <= ' ' || ch == '%' || ch == '@' || ch == '/' || ch == '\\' || (multi && ch == ','))
			return url_fail(err, errlen, "invalid character in host");
	}
	if (hl == 0)
		snprintf(host, hcap, "127.0.0.1");
	else {
		memcpy(host, hs, hl);
		host[hl] = '\0';
	}
	*port = dport;
	if (ps) {
		long v;
		if (parse_int(ps, (size_t)(end - ps), 1, 65535, &v) < 0)
			return url_fail(err, errlen, "port must be 1..65535");
		*port = (int)v;
	}
	return 0;
}

/* The part of a Sentinel or Cluster URL after the scheme. */
/* What every form ends with: the query parameters (after '?', qm may be
 * NULL) and the checks across them. */
static int parse_finish(const char *qm, struct rq_url *u, const char *tls_hint, char *err,
                        size_t errlen)
{
	if (qm && parse_query(qm + 1, strlen(qm + 1), u, err, errlen) < 0)
		return -1;
	if (u->user[0] && !u->password[0])
		return url_fail(err, errlen, "a user name needs a password");
	if (!u->tls && (u->tls_ca[0] || u->tls_cert[0] || u->tls_key[0] || u->tls_server_name[0] ||
	                u->tls_noverify))
		return url_fail(err, errlen, tls_hint);
	return 0;
}

/* The last '@' in [p, end), or NULL. */
static const char *last_at(const char *p, const char *end)
{
	const char *at = NULL;
	for (const char *s = p; s < end; s++)
		if (*s == '@')
			at = s;
	return at;
}

/* Sentinel: MASTER[/db] in [ns, end). */
static int parse_master(const char *ns, const char *end, struct rq_url *u, char *err,
                        size_t errlen)
{
	const char *ne = memchr(ns, '/', (size_t)(end - ns));
	if (!ne)
		ne = end;
	if (ne == ns || pct_decode(ns, (size_t)(ne - ns), u->master_name, sizeof u->master_name) < 0)
		return url_fail(err, errlen, "missing, invalid or too long master name");
	for (const char *c = u->master_name; *c; c++)
		if ((unsigned char)*c <= ' ')
			return url_fail(err, errlen, "invalid character in the master name");
	if (ne < end && ne + 1 < end) {
		long v;
		if (parse_int(ne + 1, (size_t)(end - ne - 1), 0, INT_MAX, &v) < 0)
			return url_fail(err, errlen, "database (after the master name) must be a "
			                "non-negative integer");
		u->db = (int)v;
	}
	return 0;
}

static int parse_multi(const char *p, struct rq_url *u, char *err, size_t errlen)
{
	if (strchr(p, '#'))
		return url_fail(err, errlen, "unexpected '#' in URL");
	const char *qm = strchr(p, '?');
	const char *end = qm ? qm : p + strlen(p);
	const char *at = last_at(p, end);
	if (at) {
		if (parse_userinfo(p, (size_t)(at - p), u, err, errlen) < 0)
			return -1;
		p = at + 1;
	}
	const char *slash = memchr(p, '/', (size_t)(end - p));
	if (!slash && u->cluster)
		slash = end;
	if (!slash)
		return url_fail(err, errlen, "a Sentinel URL names the master: "
		                "redis+sentinel://host:26379,host2:26379/mymaster[/db]");
	for (const char *s = p; s < slash;) {
		const char *comma = memchr(s, ',', (size_t)(slash - s));
		const char *e = comma ? comma : slash;
		if (u->nhosts == RQ_MAX_HOSTS)
			return url_fail(err, errlen, "too many sentinels (at most 8)");
		int i = u->nhosts++;
		if (parse_hostport(s, (size_t)(e - s), u->hosts[i].host, sizeof u->hosts[i].host,
		                   &u->hosts[i].port, u->cluster ? 6379 : 26379, true, err, errlen) < 0)
			return -1;
		s = comma ? comma + 1 : slash;
	}
	if (u->nhosts == 0)
		return url_fail(err, errlen, u->cluster ? "a Cluster URL needs at least one node" :
		                "a Sentinel URL needs at least one sentinel host");
	if (u->cluster) {
		if (slash < end && slash + 1 < end && !(slash + 2 == end && slash[1] == '0'))
			return url_fail(err, errlen, "Redis Cluster has database 0 only");
	} else if (parse_master(slash + 1, end, u, err, errlen) < 0) {
		return -1;
	}
	snprintf(u->host, sizeof u->host, "%s", u->hosts[0].host);
	u->port = u->hosts[0].port;
	return parse_finish(qm, u, "ssl_* parameters need rediss+sentinel:// or rediss+cluster://",
	                    err, errlen);
}

/* unix://[[user]:password@]/path in [p, end). */
static int parse_unix(const char *p, const char *end, struct rq_url *u, char *err, size_t errlen)
{
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
	return 0;
}

/* [[user]:password@]host[:port][/db] in [p, end) (redis://, rediss://). */
static int parse_tcp(const char *p, const char *end, struct rq_url *u, char *err, size_t errlen)
{
	const char *at = last_at(p, end);
	if (at) {
		if (parse_userinfo(p, (size_t)(at - p), u, err, errlen) < 0)
			return -1;
		p = at + 1;
	}
	const char *slash = memchr(p, '/', (size_t)(end - p));
	const char *auth_end = slash ? slash : end;
	if (parse_hostport(p, (size_t)(auth_end - p), u->host, sizeof u->host, &u->port, 6379, false,
	                   err, errlen) < 0)
		return -1;
	if (slash && slash + 1 < end) {
		long v;
		if (parse_int(slash + 1, (size_t)(end - slash - 1), 0, INT_MAX, &v) < 0)
			return url_fail(err, errlen, "database (after '/') must be a non-negative integer");
		u->db = (int)v;
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
	if (!strncasecmp(url, "redis+sentinel://", 17) || !strncasecmp(url, "rediss+sentinel://", 18)) {
		u->tls = url[5] == 's' || url[5] == 'S';
		u->sentinel = true;
		return parse_multi(url + (u->tls ? 18 : 17), u, err, errlen);
	}
	if (!strncasecmp(url, "redis+cluster://", 16) || !strncasecmp(url, "rediss+cluster://", 17)) {
		u->tls = url[5] == 's' || url[5] == 'S';
		u->cluster = true;
		return parse_multi(url + (u->tls ? 17 : 16), u, err, errlen);
	}
	if (!strncasecmp(url, "redis://", 8)) {
		p = url + 8;
		is_unix = false;
	} else if (!strncasecmp(url, "unix://", 7)) {
		p = url + 7;
		is_unix = true;
	} else if (!strncasecmp(url, "rediss://", 9)) {
		p = url + 9;
		is_unix = false;
		u->tls = true;
	} else {
		return url_fail(err, errlen, "expected redis://host:port/db, rediss://host:port/db "
		                "(TLS) or unix:///path");
	}
	if (strchr(p, '#'))
		return url_fail(err, errlen, "unexpected '#' in URL");
	const char *qm = strchr(p, '?');
	const char *end = qm ? qm : p + strlen(p);
	if ((is_unix ? parse_unix : parse_tcp)(p, end, u, err, errlen) < 0)
		return -1;
	return parse_finish(qm, u, "ssl_* parameters need a rediss:// URL", err, errlen);
}

void rq_reply_logged(struct rq *r, redisReply *reply, const char *err, void *data)
{
	(void)r;
	if (err && !strcmp(err, "closed"))
		return;     /* shutting down */
	if (err || !reply || reply->type == REDIS_REPLY_ERROR)
		LOGW(NULL, NULL, "%s failed: %s", (const char *)data,
		     err ? err : reply ? reply->str : "no reply");
}
