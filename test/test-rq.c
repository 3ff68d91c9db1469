/*
 * Service test for rq (worker/rq.c) against a real redis-server started by
 * test/services.py (ARBITER_TEST_REDIS_URL, ARBITER_TEST_REDIS_PORT), plus a
 * tiny in-process fake server on the same loop for what a real server will
 * not do on demand: reset a connection (RST) and never answer the handshake.
 *
 * Covers: connect + PING/SET/GET, 10,000 pipelined INCRs in order, binary-safe
 * argv, error replies, "not connected" (always asynchronous), SELECT, AUTH,
 * command timeout during CLIENT PAUSE then recovery, CLIENT KILL, a reset
 * socket (the poll-error path), connect timeout, redis-server SHUTDOWN and
 * restart on the same port, unix sockets, blocking XREADGROUP on its own
 * connection, rq_close with commands pending and from inside a callback.
 */
#undef NDEBUG
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "log.h"
#include "rq.h"
#include "tap.h"

static uv_loop_t loop_s, *loop = &loop_s;
static uv_timer_t tick;
static int in_api;              /* > 0 while inside an rq_* call */
static int sync_violations;     /* callbacks that ran inside an rq_* call */
static char redis_url[256];
static int redis_port;

static void on_tick(uv_timer_t *t)
{
	(void)t;
}

/* Runs the loop until cond holds or ms elapse. */
#define WAIT(cond, ms) do { \
	uint64_t end_ = uv_now(loop) + (ms); \
	uv_timer_start(&tick, on_tick, 5, 5); \
	while (!(cond) && uv_now(loop) < end_) \
		uv_run(loop, UV_RUN_ONCE); \
	uv_timer_stop(&tick); \
} while (0)

static int api_done(int rc)
{
	in_api--;
	return rc;
}
#define CMDF(r, to, cb, d, ...) (in_api++, api_done(rq_cmdf(r, to, cb, d, __VA_ARGS__)))
#define CMDV(r, to, cb, d, n, v, l) (in_api++, api_done(rq_cmdv(r, to, cb, d, n, v, l)))

/* ---- a client with counters ----------------------------------------------- */

struct client {
	struct rq *r;
	int connects, disconnects;
	char why[160];
	int closed;                 /* done callback ran */
};

static void cl_on_connect(struct rq *r, void *data)
{
	struct client *c = data;
	(void)r;
	if (in_api)
		sync_violations++;
	c->connects++;
}

static void cl_on_disconnect(struct rq *r, const char *why, void *data)
{
	struct client *c = data;
	(void)r;
	if (in_api)
		sync_violations++;
	c->disconnects++;
	snprintf(c->why, sizeof c->why, "%s", why);
}

static void cl_done(void *data)
{
	struct client *c = data;
	c->closed++;
	c->r = NULL;
}

static int cl_open(struct client *c, const char *url, uint32_t connect_ms, uint32_t cmd_ms,
                   const char *name)
{
	memset(c, 0, sizeof *c);
	struct rq_opts o = {
		.url = url, .connect_timeout_ms = connect_ms, .cmd_timeout_ms = cmd_ms,
		.on_connect = cl_on_connect, .on_disconnect = cl_on_disconnect, .data = c,
		.name = name,
	};
	in_api++;
	int rc = rq_new(loop, &o, &c->r);
	in_api--;
	return rc;
}

static void cl_close(struct client *c)
{
	if (!c->r)
		return;
	in_api++;
	rq_close(c->r, cl_done, c);
	in_api--;
	WAIT(c->closed, 5000);
}

/* ---- a captured result ------------------------------------------------------ */

struct res {
	int done;
	int type;                   /* -1 when no reply */
	long long integer;
	char str[512];
	size_t len;
	size_t elements;
	char err[32];
	uint64_t at;                /* uv_now when the callback ran */
};

static void cap_cb(struct rq *r, redisReply *rep, const char *err, void *data)
{
	struct res *x = data;
	(void)r;
	if (in_api)
		sync_violations++;
	x->done++;
	x->at = uv_now(loop);
	x->type = rep ? rep->type : -1;
	snprintf(x->err, sizeof x->err, "%s", err ? err : "");
	if (rep) {
		x->integer = rep->integer;
		x->elements = rep->elements;
		if (rep->str) {
			x->len = rep->len < sizeof x->str ? rep->len : sizeof x->str - 1;
			memcpy(x->str, rep->str, x->len);
			x->str[x->len] = '\0';
		}
	}
	if ((rep == NULL) != (err != NULL))
		x->done += 1000;        /* contract violation, shows up as done != 1 */
}

static void res_init(struct res *x)
{
	memset(x, 0, sizeof *x);
	x->type = -2;
}

/* Runs one command to completion. */
static int run_cmd(struct rq *r, uint32_t to, struct res *x, const char *fmt, const char *a,
                   const char *b)
{
	res_init(x);
	if (CMDF(r, to, cap_cb, x, fmt, a, b) < 0)
		return -1;
	WAIT(x->done, 10000);
	return x->done == 1 ? 0 : -1;
}

/* ---- fake server ------------------------------------------------------------- */

enum fake_mode { FAKE_RESET, FAKE_SILENT };

struct fake {
	uv_tcp_t srv;
	enum fake_mode mode;
	int port;
	int accepted, resets, open;
	int srv_closed;
};

struct fconn {
	uv_tcp_t h;
	struct fake *f;
	char buf[4096];
};

static const char pong[] = "+PONG\r\n";

static void fc_alloc(uv_handle_t *h, size_t n, uv_buf_t *b)
{
	struct fconn *fc = h->data;
	(void)n;
	*b = uv_buf_init(fc->buf, sizeof fc->buf);
}

static void fc_closed(uv_handle_t *h)
{
	struct fconn *fc = h->data;
	fc->f->open--;
	free(fc);
}

static void fc_written(uv_write_t *w, int status)
{
	(void)status;
	free(w);
}

static void fc_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct fconn *fc = s->data;
	if (n < 0) {
		uv_close((uv_handle_t *)s, fc_closed);
		return;
	}
	if (n == 0 || fc->f->mode == FAKE_SILENT)
		return;
	if (memmem(b->base, (size_t)n, "PING", 4)) {
		uv_write_t *w = malloc(sizeof *w);
		uv_buf_t wb = uv_buf_init((char *)pong, sizeof pong - 1);
		uv_write(w, s, &wb, 1, fc_written);
	} else {
		fc->f->resets++;
		uv_tcp_close_reset(&fc->h, fc_closed);
	}
}

static void fake_on_conn(uv_stream_t *srv, int status)
{
	struct fake *f = srv->data;
	if (status < 0)
		return;
	struct fconn *fc = calloc(1, sizeof *fc);
	fc->f = f;
	uv_tcp_init(loop, &fc->h);
	fc->h.data = fc;
	if (uv_accept(srv, (uv_stream_t *)&fc->h) < 0) {
		uv_close((uv_handle_t *)&fc->h, NULL);
		free(fc);
		return;
	}
	f->accepted++;
	f->open++;
	uv_read_start((uv_stream_t *)&fc->h, fc_alloc, fc_read);
}

static int fake_start_at(struct fake *f, enum fake_mode mode, const char *ip)
{
	struct sockaddr_storage a, got;
	int len = sizeof got;
	memset(f, 0, sizeof *f);
	f->mode = mode;
	if (strchr(ip, ':'))
		uv_ip6_addr(ip, 0, (struct sockaddr_in6 *)&a);
	else
		uv_ip4_addr(ip, 0, (struct sockaddr_in *)&a);
	uv_tcp_init(loop, &f->srv);
	f->srv.data = f;
	if (uv_tcp_bind(&f->srv, (struct sockaddr *)&a, 0) < 0 ||
	    uv_listen((uv_stream_t *)&f->srv, 16, fake_on_conn) < 0 ||
	    uv_tcp_getsockname(&f->srv, (struct sockaddr *)&got, &len) < 0)
		return -1;
	f->port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
	                                          : ((struct sockaddr_in *)&got)->sin_port);
	return 0;
}

static int fake_start(struct fake *f, enum fake_mode mode)
{
	return fake_start_at(f, mode, "127.0.0.1");
}

static void fake_srv_closed(uv_handle_t *h)
{
	struct fake *f = h->data;
	f->srv_closed = 1;
}

static void fake_stop(struct fake *f)
{
	uv_close((uv_handle_t *)&f->srv, fake_srv_closed);
	WAIT(f->open == 0 && f->srv_closed, 2000);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_basic(struct client *m)
{
	struct res x;

	/* Issued before the connection is up: "not connected", asynchronously. */
	res_init(&x);
	is_int(CMDF(m->r, 0, cap_cb, &x, "PING"), 0, "command before connect is accepted");
	is_int(x.done, 0, "its callback did not run synchronously");
	WAIT(x.done, 1000);
	is_str(x.err, "not connected", "command before connect: not connected");

	WAIT(m->connects, 3000);
	is_int(m->connects, 1, "on_connect ran once");
	ok(rq_connected(m->r), "rq_connected");

	run_cmd(m->r, 0, &x, "PING", NULL, NULL);
	ok(x.type == REDIS_REPLY_STATUS && !strcmp(x.str, "PONG"), "PING -> PONG (%s)", x.str);
	run_cmd(m->r, 0, &x, "SET %s %s", "rq:k", "hello");
	ok(x.type == REDIS_REPLY_STATUS && !strcmp(x.str, "OK"), "SET -> OK");
	run_cmd(m->r, 0, &x, "GET %s", "rq:k", NULL);
	ok(x.type == REDIS_REPLY_STRING && !strcmp(x.str, "hello") && !x.err[0], "GET -> hello");
	run_cmd(m->r, 0, &x, "GET %s", "rq:missing", NULL);
	is_int(x.type, REDIS_REPLY_NIL, "GET missing -> nil");
}

static void test_errors(struct client *m)
{
	struct res x;
	run_cmd(m->r, 0, &x, "INCR %s", "rq:k", NULL);
	ok(x.type == REDIS_REPLY_ERROR && !x.err[0] && strstr(x.str, "not an integer"),
	   "error reply delivered as a reply (%s)", x.str);
	run_cmd(m->r, 0, &x, "NOSUCHCOMMAND %s", "a", NULL);
	ok(x.type == REDIS_REPLY_ERROR && !x.err[0], "unknown command is an error reply");
	ok(rq_connected(m->r), "still connected after error replies");

	res_init(&x);
	is_int(CMDF(m->r, 0, cap_cb, &x, "SUBSCRIBE %s", "ch"), -1, "SUBSCRIBE refused");
	is_int(CMDF(m->r, 0, cap_cb, &x, "select %d", 1), -1, "SELECT refused");
	is_int(CMDF(m->r, 0, cap_cb, &x, "CLIENT reply %s", "off"), -1, "CLIENT REPLY refused");
	is_int(CMDF(m->r, 0, cap_cb, &x, "GET %y"), -1, "bad format refused");
	is_int(CMDV(m->r, 0, cap_cb, &x, 0, NULL, NULL), -1, "empty argv refused");
	WAIT(0, 20);
	is_int(x.done, 0, "refused commands never call back");
	run_cmd(m->r, 0, &x, "CLIENT %s", "ID", NULL);
	is_int(x.type, REDIS_REPLY_INTEGER, "other CLIENT subcommands pass");
}

static void test_binary(struct client *m)
{
	static const char val[] = "a\0b\r\n$3\r\n\xff\x00z";
	const size_t vlen = sizeof val - 1;
	const char *argv[3] = { "SET", "rq:bin\0key", val };
	size_t lens[3] = { 3, 10, vlen };
	struct res x;
	res_init(&x);
	is_int(CMDV(m->r, 0, cap_cb, &x, 3, argv, lens), 0, "binary SET issued");
	WAIT(x.done, 2000);
	ok(x.type == REDIS_REPLY_STATUS, "binary SET -> OK");
	const char *gargv[2] = { "GET", "rq:bin\0key" };
	size_t glens[2] = { 3, 10 };
	res_init(&x);
	CMDV(m->r, 0, cap_cb, &x, 2, gargv, glens);
	WAIT(x.done, 2000);
	ok(x.type == REDIS_REPLY_STRING && x.len == vlen && !memcmp(x.str, val, vlen),
	   "binary GET returns the same %zu bytes (got %zu)", vlen, x.len);
}

struct incr_state {
	int next;                   /* expected index of the next callback */
	int bad_order, bad_value, errors;
	int done;
};

static void incr_cb(struct rq *r, redisReply *rep, const char *err, void *data)
{
	struct incr_state *s = data;
	(void)r;
	if (in_api)
		sync_violations++;
	if (err || !rep || rep->type != REDIS_REPLY_INTEGER)
		s->errors++;
	else if (rep->integer != s->next + 1)
		s->bad_value++;
	s->next++;
	s->done++;
}

static void test_pipeline(struct client *m, int n, const char *key)
{
	struct incr_state s = { 0 };
	struct res x;
	run_cmd(m->r, 0, &x, "DEL %s", key, NULL);
	uint64_t t0 = uv_hrtime();
	int issued = 0;
	for (int i = 0; i < n; i++)
		if (CMDF(m->r, 0, incr_cb, &s, "INCR %s", key) == 0)
			issued++;
	is_int(issued, n, "%d INCRs issued", n);
	ok(rq_pending(m->r) == (size_t)n, "rq_pending = %zu", rq_pending(m->r));
	WAIT(s.done == n, 30000);
	double secs = (double)(uv_hrtime() - t0) / 1e9;
	is_int(s.done, n, "all %d INCRs answered", n);
	ok(s.errors == 0 && s.bad_value == 0, "in order, values 1..%d (errors %d, out of order %d)",
	   n, s.errors, s.bad_value);
	diag("%d pipelined INCRs in %.1f ms (%.0f/s)", n, secs * 1e3, n / secs);
	is_int(rq_pending(m->r), 0, "nothing pending afterwards");
}

/* Each reply issues the next command from inside the callback. */
struct chain {
	struct rq *r;
	int left, got;
};

static void chain_cb(struct rq *r, redisReply *rep, const char *err, void *data)
{
	struct chain *c = data;
	if (!err && rep && rep->type == REDIS_REPLY_STATUS)
		c->got++;
	if (--c->left > 0)
		rq_cmdf(r, 0, chain_cb, c, "PING");
}

static void test_chain(struct client *m)
{
	struct chain c = { m->r, 1000, 0 };
	CMDF(m->r, 0, chain_cb, &c, "PING");
	WAIT(c.left == 0, 10000);
	is_int(c.got, 1000, "1000 commands chained from inside callbacks");
}

static void test_select(struct client *m)
{
	char url[300];
	struct client d;
	struct res x;
	snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", redis_port);
	cl_open(&d, url, 0, 0, "db3");
	WAIT(d.connects, 3000);
	ok(d.connects == 1, "connected with /3");
	run_cmd(d.r, 0, &x, "SET %s %s", "rq:db3", "three");
	run_cmd(m->r, 0, &x, "GET %s", "rq:db3", NULL);
	is_int(x.type, REDIS_REPLY_NIL, "key set through /3 is not in db 0");
	run_cmd(d.r, 0, &x, "GET %s", "rq:db3", NULL);
	is_str(x.str, "three", "key readable through /3");
	cl_close(&d);
	is_int(d.closed, 1, "closed db3 client");
}

static void test_timeout(struct client *m, struct client *admin)
{
	struct res p, a, b, c;
	int connects = m->connects, disconnects = m->disconnects;
	uint64_t reconnects = rq_reconnects(m->r);

	run_cmd(admin->r, 0, &p, "CLIENT PAUSE %s %s", "1200", "ALL");
	is_str(p.str, "OK", "CLIENT PAUSE 1200 ALL");
	uint64_t t0 = uv_now(loop);
	res_init(&a);
	res_init(&b);
	CMDF(m->r, 200, cap_cb, &a, "GET %s", "rq:k");
	CMDF(m->r, 5000, cap_cb, &b, "GET %s", "rq:k");
	WAIT(a.done && b.done, 3000);
	is_str(a.err, "timeout", "command with a 200 ms timeout: timeout");
	ok(a.at - t0 >= 190 && a.at - t0 < 800, "after %llu ms", (unsigned long long)(a.at - t0));
	is_str(b.err, "disconnected", "the other pending command: disconnected");
	is_int(a.done + b.done, 2, "each callback ran once");
	is_int(m->disconnects, disconnects + 1, "on_disconnect ran");
	diag("why: %s", m->why);
	ok(!rq_connected(m->r), "not connected right after the timeout");
	/* The new connection's PING waits for the pause to end, then recovers. */
	WAIT(m->connects > connects, 4000);
	is_int(m->connects, connects + 1, "reconnected after the pause (%llu ms)",
	       (unsigned long long)(uv_now(loop) - t0));
	is_int(rq_reconnects(m->r), reconnects + 1, "rq_reconnects counts it");
	run_cmd(m->r, 0, &c, "GET %s", "rq:k", NULL);
	is_str(c.str, "hello", "commands work again");
}

static void test_kill(struct client *m, struct client *admin)
{
	struct res blk, k, x;
	int connects = m->connects, disconnects = m->disconnects;
	res_init(&blk);
	CMDF(m->r, 15000, cap_cb, &blk, "BLPOP %s %s", "rq:emptylist", "10");
	WAIT(0, 100);
	is_int(blk.done, 0, "BLPOP is blocked");
	uint64_t t0 = uv_now(loop);
	run_cmd(admin->r, 0, &k, "CLIENT KILL TYPE %s SKIPME %s", "normal", "yes");
	ok(k.type == REDIS_REPLY_INTEGER && k.integer >= 1, "CLIENT KILL killed %lld", k.integer);
	WAIT(blk.done, 3000);
	is_str(blk.err, "disconnected", "pending BLPOP: disconnected");
	ok(blk.at - t0 < 500, "promptly (%llu ms)", (unsigned long long)(blk.at - t0));
	is_int(m->disconnects, disconnects + 1, "on_disconnect ran (%s)", m->why);
	WAIT(m->connects > connects, 3000);
	is_int(m->connects, connects + 1, "reconnected by itself (%llu ms)",
	       (unsigned long long)(uv_now(loop) - t0));
	run_cmd(m->r, 0, &x, "PING", NULL, NULL);
	is_str(x.str, "PONG", "PING after the kill");
}

static void test_reset(void)
{
	struct fake f;
	struct client c;
	char url[128];
	struct res x;
	if (fake_start(&f, FAKE_RESET) < 0) {
		ok(0, "fake server");
		return;
	}
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", f.port);
	cl_open(&c, url, 1000, 5000, "fake-reset");
	WAIT(c.connects, 2000);
	is_int(c.connects, 1, "connected to the fake server");
	res_init(&x);
	uint64_t t0 = uv_now(loop);
	CMDF(c.r, 0, cap_cb, &x, "GET %s", "x");
	WAIT(x.done, 6000);
	is_str(x.err, "disconnected", "reset connection: pending command disconnected");
	ok(x.at - t0 < 1000, "promptly, not after the 5 s timeout (%llu ms)",
	   (unsigned long long)(x.at - t0));
	is_int(f.resets, 1, "the server reset one connection");
	ok(strstr(c.why, "reset") != NULL, "on_disconnect why: %s", c.why);
	WAIT(c.connects == 2, 2000);
	is_int(c.connects, 2, "reconnected after the reset");
	cl_close(&c);
	is_int(c.closed, 1, "closed");
	fake_stop(&f);

	/* The same over IPv6 loopback, when the machine has it. */
	if (fake_start_at(&f, FAKE_RESET, "::1") < 0) {
		diag("no IPv6 loopback, skipping the [::1] case");
		fake_stop(&f);
		return;
	}
	snprintf(url, sizeof url, "redis://[::1]:%d/0", f.port);
	cl_open(&c, url, 1000, 5000, "fake-v6");
	WAIT(c.connects, 2000);
	is_int(c.connects, 1, "connected to [::1] (handshake PING answered)");
	res_init(&x);
	CMDF(c.r, 0, cap_cb, &x, "GET %s", "x");
	WAIT(x.done, 6000);
	is_str(x.err, "disconnected", "reset over IPv6: disconnected");
	cl_close(&c);
	fake_stop(&f);
}

static void test_connect_timeout(void)
{
	struct fake f;
	struct client c;
	char url[128];
	struct res x;
	if (fake_start(&f, FAKE_SILENT) < 0) {
		ok(0, "fake server");
		return;
	}
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", f.port);
	cl_open(&c, url, 150, 0, "fake-silent");
	WAIT(0, 1000);
	is_int(c.connects, 0, "a server that never answers the handshake: no on_connect");
	ok(f.accepted >= 3, "kept retrying after connect timeouts (%d attempts in 1 s)", f.accepted);
	ok(!rq_connected(c.r), "not connected");
	res_init(&x);
	CMDF(c.r, 0, cap_cb, &x, "PING");
	WAIT(x.done, 1000);
	is_str(x.err, "not connected", "commands fail with not connected");
	cl_close(&c);
	is_int(c.closed, 1, "rq_close while connecting");
	fake_stop(&f);

	/* Nothing listening at all: refused connections, backoff, then close. */
	struct client d;
	snprintf(url, sizeof url, "redis://127.0.0.1:%d", f.port);
	cl_open(&d, url, 200, 0, "refused");
	WAIT(0, 300);
	ok(!rq_connected(d.r) && d.connects == 0, "refused: not connected, no crash");
	cl_close(&d);
	is_int(d.closed, 1, "rq_close during backoff");

	/* A host name is resolved off the loop (uv_getaddrinfo). */
	snprintf(url, sizeof url, "redis://localhost:%d/0", redis_port);
	cl_open(&d, url, 0, 0, "localhost");
	WAIT(d.connects, 3000);
	is_int(d.connects, 1, "redis://localhost connects");
	cl_close(&d);
	snprintf(url, sizeof url, "redis://ip6-localhost.invalid:%d/0", redis_port);
	cl_open(&d, url, 300, 0, "unresolvable");
	WAIT(0, 400);
	ok(d.connects == 0, "unresolvable host: no connection, no crash");
	cl_close(&d);
	is_int(d.closed, 1, "rq_close while resolving/backing off");
}

static pid_t spawned;

static pid_t spawn_redis(int port, const char *dir)
{
	char portbuf[16], sock[300];
	snprintf(portbuf, sizeof portbuf, "%d", port);
	snprintf(sock, sizeof sock, "%s/redis.sock", dir);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp("redis-server", "redis-server", "--port", portbuf, "--bind", "127.0.0.1",
		       "--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no",
		       "--protected-mode", "no", "--unixsocket", sock, "--unixsocketperm", "700",
		       (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void test_restart(struct client *m, struct client *admin, const char *dir)
{
	struct res x, y;
	int connects = m->connects, disconnects = m->disconnects;
	res_init(&x);
	CMDF(admin->r, 0, cap_cb, &x, "SHUTDOWN %s", "NOSAVE");
	WAIT(x.done, 3000);
	is_str(x.err, "disconnected", "SHUTDOWN NOSAVE: the server went away");
	WAIT(m->disconnects > disconnects, 2000);
	is_int(m->disconnects, disconnects + 1, "on_disconnect after the shutdown (%s)", m->why);
	res_init(&y);
	CMDF(m->r, 0, cap_cb, &y, "PING");
	WAIT(y.done, 1000);
	is_str(y.err, "not connected", "command while the server is down: not connected");
	WAIT(0, 300);                       /* a few refused attempts */
	uint64_t t0 = uv_now(loop);
	spawned = spawn_redis(redis_port, dir);
	ok(spawned > 0, "started redis-server again on port %d", redis_port);
	WAIT(m->connects > connects, 10000);
	is_int(m->connects, connects + 1, "reconnected to the restarted server (%llu ms)",
	       (unsigned long long)(uv_now(loop) - t0));
	run_cmd(m->r, 0, &x, "PING", NULL, NULL);
	is_str(x.str, "PONG", "PING after the restart");
	WAIT(admin->connects >= 2, 5000);
	ok(rq_connected(admin->r), "the admin client reconnected too");

	/* The same server over its unix socket, database 2. */
	char url[400];
	struct client u;
	snprintf(url, sizeof url, "unix://%s/redis.sock?db=2", dir);
	cl_open(&u, url, 0, 0, "unix");
	WAIT(u.connects, 3000);
	is_int(u.connects, 1, "connected over the unix socket");
	run_cmd(u.r, 0, &x, "SET %s %s", "rq:unix", "u");
	run_cmd(u.r, 0, &x, "GET %s", "rq:unix", NULL);
	is_str(x.str, "u", "SET/GET over the unix socket");
	run_cmd(m->r, 0, &x, "GET %s", "rq:unix", NULL);
	is_int(x.type, REDIS_REPLY_NIL, "db=2 was selected");
	cl_close(&u);
}

static void test_auth(struct client *admin)
{
	struct res x;
	char url[300];
	struct client a;
	run_cmd(admin->r, 0, &x, "ACL SETUSER tester on >s3cret ~* &* +@all", NULL, NULL);
	is_str(x.str, "OK", "ACL SETUSER tester");
	snprintf(url, sizeof url, "redis://tester:s3cret@127.0.0.1:%d/1", redis_port);
	cl_open(&a, url, 0, 0, "acl");
	WAIT(a.connects, 3000);
	is_int(a.connects, 1, "AUTH user password + SELECT");
	run_cmd(a.r, 0, &x, "ACL WHOAMI", NULL, NULL);
	is_str(x.str, "tester", "authenticated as tester");
	cl_close(&a);

	snprintf(url, sizeof url, "redis://tester:wrong@127.0.0.1:%d/0", redis_port);
	cl_open(&a, url, 0, 0, "badpass");
	WAIT(0, 500);
	ok(a.connects == 0 && !rq_connected(a.r), "wrong password: never connected");
	cl_close(&a);

	run_cmd(admin->r, 0, &x, "CONFIG SET requirepass %s", "pw%2", NULL);
	is_str(x.str, "OK", "requirepass set");
	snprintf(url, sizeof url, "redis://:pw%%252@127.0.0.1:%d", redis_port);
	cl_open(&a, url, 0, 0, "pass");
	WAIT(a.connects, 3000);
	is_int(a.connects, 1, "AUTH password (percent-encoded in the URL)");
	run_cmd(admin->r, 0, &x, "CONFIG SET requirepass %s", "", NULL);
	cl_close(&a);
}

/* rq_last_error and rq_acl_refusal: what the worker's /readyz reports. */
static void test_errors_kept(struct client *admin)
{
	struct res x;
	char url[300];
	struct client a;
	snprintf(url, sizeof url, "redis://tester:wrong@127.0.0.1:%d/0", redis_port);
	cl_open(&a, url, 0, 0, "badpass");
	WAIT(0, 500);
	ok(strstr(rq_last_error(a.r), "WRONGPASS") && strstr(rq_last_error(a.r), "\"tester\""),
	   "rq_last_error names WRONGPASS and the user (%s)", rq_last_error(a.r));
	cl_close(&a);

	snprintf(url, sizeof url, "redis://127.0.0.1:%d/99", redis_port);
	cl_open(&a, url, 0, 0, "baddb");
	WAIT(0, 500);
	ok(strstr(rq_last_error(a.r), "DB index") != NULL, "rq_last_error names a bad DB index (%s)",
	   rq_last_error(a.r));
	cl_close(&a);

	run_cmd(admin->r, 0, &x, "ACL SETUSER nodel on >pw ~* &* +@all -del", NULL, NULL);
	is_str(x.str, "OK", "ACL SETUSER nodel");
	snprintf(url, sizeof url, "redis://nodel:pw@127.0.0.1:%d/0", redis_port);
	cl_open(&a, url, 0, 0, "nodel");
	WAIT(a.connects, 3000);
	is_str(rq_last_error(a.r), "", "connected: rq_last_error is empty");
	ok(rq_acl_refusal(a.r, 60000) == NULL, "no refusal yet");
	run_cmd(a.r, 0, &x, "DEL %s", "rq:nodel", NULL);
	ok(x.type == REDIS_REPLY_ERROR && !strncmp(x.str, "NOPERM", 6), "DEL refused (%s)", x.str);
	const char *acl = rq_acl_refusal(a.r, 60000);
	ok(acl && strstr(acl, "DEL") && strstr(acl, "NOPERM") && strstr(acl, "\"nodel\""),
	   "rq_acl_refusal names the command, NOPERM and the user (%s)", acl ? acl : "NULL");
	run_cmd(a.r, 0, &x, "GET %s", "rq:nodel", NULL);
	ok(rq_acl_refusal(a.r, 60000) != NULL, "another command's success keeps it");
	WAIT(0, 20);
	ok(rq_acl_refusal(a.r, 5) == NULL, "older than within_ms: not reported");
	run_cmd(admin->r, 0, &x, "ACL SETUSER nodel +del", NULL, NULL);
	run_cmd(a.r, 0, &x, "DEL %s", "rq:nodel", NULL);
	is_int(x.type, REDIS_REPLY_INTEGER, "DEL allowed now");
	ok(rq_acl_refusal(a.r, 60000) == NULL, "the same command's success clears the refusal");
	/* Redis 7.0 reports a refusal inside a script as an ERR, not NOPERM. */
	run_cmd(admin->r, 0, &x, "ACL SETUSER nodel -xack", NULL, NULL);
	run_cmd(a.r, 0, &x, "EVAL %s 0", "return redis.call('XACK', 'rq:s', 'g', '1-0')", NULL);
	ok(x.type == REDIS_REPLY_ERROR && rq_is_acl_refusal(x.str), "a script's refused command is "
	   "an ACL refusal (%s)", x.str);
	acl = rq_acl_refusal(a.r, 60000);
	ok(acl && strstr(acl, "EVAL"), "rq_acl_refusal names the script's command (%s)",
	   acl ? acl : "NULL");
	run_cmd(a.r, 0, &x, "EVAL %s 0", "return 1", NULL);
	ok(rq_acl_refusal(a.r, 60000) != NULL, "another script's success does not clear it");
	ok(!rq_is_acl_refusal("ERR unknown command") && !rq_is_acl_refusal(NULL) &&
	   rq_is_acl_refusal("NOPERM this user has no permissions"), "rq_is_acl_refusal: only refusals");
	cl_close(&a);
}

static void test_xreadgroup(struct client *m)
{
	struct client b;
	struct res x, r1, r2;
	run_cmd(m->r, 0, &x, "DEL %s", "rq:stream", NULL);
	run_cmd(m->r, 0, &x, "XGROUP CREATE %s %s 0 MKSTREAM", "rq:stream", "g");
	is_str(x.str, "OK", "XGROUP CREATE");
	cl_open(&b, redis_url, 0, 0, "blocking");
	WAIT(b.connects, 3000);
	uint64_t t0 = uv_now(loop);
	res_init(&r1);
	CMDF(b.r, 5000, cap_cb, &r1, "XREADGROUP GROUP g c1 COUNT 10 BLOCK 3000 STREAMS %s >",
	     "rq:stream");
	WAIT(0, 300);
	is_int(r1.done, 0, "XREADGROUP BLOCK waits");
	run_cmd(m->r, 0, &x, "XADD %s * f %s", "rq:stream", "v1");
	is_int(x.type, REDIS_REPLY_STRING, "XADD from the other connection");
	WAIT(r1.done, 4000);
	ok(r1.type == REDIS_REPLY_ARRAY && r1.elements == 1 && !r1.err[0],
	   "XREADGROUP returned the entry (after %llu ms)", (unsigned long long)(r1.at - t0));
	res_init(&r2);
	t0 = uv_now(loop);
	CMDF(b.r, 2000, cap_cb, &r2, "XREADGROUP GROUP g c1 COUNT 10 BLOCK 300 STREAMS %s >",
	     "rq:stream");
	WAIT(r2.done, 3000);
	ok(r2.type == REDIS_REPLY_NIL && r2.at - t0 >= 290,
	   "empty XREADGROUP BLOCK 300 -> nil after %llu ms", (unsigned long long)(r2.at - t0));
	cl_close(&b);
}

static void test_close_pending(void)
{
	struct client c;
	static struct res each[1000];
	cl_open(&c, redis_url, 0, 0, "close");
	WAIT(c.connects, 3000);
	for (int i = 0; i < 1000; i++) {
		res_init(&each[i]);
		CMDF(c.r, 0, cap_cb, &each[i], "INCR %s", "rq:close");
	}
	in_api++;
	rq_close(c.r, cl_done, &c);
	in_api--;
	is_int(each[0].done, 0, "no callback inside rq_close");
	WAIT(c.closed, 3000);
	int n_closed = 0, n_once = 0;
	for (int i = 0; i < 1000; i++) {
		n_once += each[i].done == 1;
		n_closed += !strcmp(each[i].err, "closed");
	}
	is_int(n_once, 1000, "all 1000 pending callbacks ran exactly once");
	is_int(n_closed, 1000, "all with \"closed\"");
	is_int(c.closed, 1, "done ran once, after the callbacks");
	is_int(c.disconnects, 0, "no on_disconnect after rq_close");
}

/* rq_close called from inside a reply callback. */
struct closer {
	struct client *c;
	int replies, closed, other, calls, after_close_rc;
};

static void closer_cb(struct rq *r, redisReply *rep, const char *err, void *data)
{
	struct closer *k = data;
	k->calls++;
	if (rep && !err)
		k->replies++;
	else if (err && !strcmp(err, "closed"))
		k->closed++;
	else
		k->other++;
	if (k->calls == 10) {
		rq_close(r, cl_done, k->c);
		rq_close(r, cl_done, k->c);                 /* a second call is ignored */
	}
	if (k->calls == 50)
		k->after_close_rc = rq_cmdf(r, 0, closer_cb, k, "PING");
}

static void test_close_in_callback(void)
{
	struct client c;
	struct closer k = { &c, 0, 0, 0, 0, 0 };
	cl_open(&c, redis_url, 0, 0, "close-cb");
	WAIT(c.connects, 3000);
	for (int i = 0; i < 100; i++)
		CMDF(c.r, 0, closer_cb, &k, "PING");
	WAIT(c.closed, 3000);
	is_int(k.calls, 100, "100 callbacks");
	is_int(k.replies, 10, "10 replies up to the one that closed");
	is_int(k.closed, 90, "90 closed");
	is_int(k.other, 0, "nothing else");
	is_int(k.after_close_rc, -1, "rq_cmdf after rq_close returns -1");
	is_int(c.closed, 1, "done ran once");

	/* rq_close from on_connect's first command, right after rq_new: never connected. */
	struct client d;
	cl_open(&d, redis_url, 0, 0, "close-early");
	cl_close(&d);
	is_int(d.closed, 1, "rq_close right after rq_new");
}

int main(void)
{
	const char *url = getenv("ARBITER_TEST_REDIS_URL");
	const char *port = getenv("ARBITER_TEST_REDIS_PORT");
	if (!url || !port) {
		printf("1..0 # SKIP ARBITER_TEST_REDIS_URL/PORT not set (run under test/services.py)\n");
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(redis_url, sizeof redis_url, "%s", url);
	redis_port = atoi(port);
	log_setup(getenv("RQ_TEST_DEBUG") ? LOG_DEBUG : LOG_ERROR, "test-rq");
	char dir[] = "/tmp/arbiter-test-rq-XXXXXX";
	if (!mkdtemp(dir)) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	uv_loop_init(loop);
	uv_timer_init(loop, &tick);

	struct client m, admin;
	is_int(cl_open(&m, redis_url, 0, 0, "main"), 0, "rq_new");
	struct rq *bad;
	struct rq_opts bo = { .url = "http://nope" };
	is_int(rq_new(loop, &bo, &bad), -1, "rq_new refuses an invalid URL");
	test_basic(&m);
	cl_open(&admin, redis_url, 0, 0, "admin");
	WAIT(admin.connects, 3000);
	test_errors(&m);
	test_binary(&m);
	test_pipeline(&m, 10000, "rq:counter");
	test_chain(&m);
	test_select(&m);
	test_xreadgroup(&m);
	test_close_pending();
	test_close_in_callback();
	test_reset();
	test_connect_timeout();
	test_timeout(&m, &admin);
	test_kill(&m, &admin);
	test_pipeline(&m, 100000, "rq:counter2");
	test_restart(&m, &admin, dir);
	test_auth(&admin);
	test_errors_kept(&admin);

	cl_close(&admin);
	cl_close(&m);
	is_int(sync_violations, 0, "no callback ever ran inside an rq_* call");
	uv_close((uv_handle_t *)&tick, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	is_int(uv_loop_close(loop), 0, "every handle closed");

	if (spawned > 0) {
		kill(spawned, SIGTERM);
		waitpid(spawned, NULL, 0);
	}
	char sock[300];
	snprintf(sock, sizeof sock, "%s/redis.sock", dir);
	unlink(sock);
	rmdir(dir);
	return tap_done();
}
