/*
 * Service test for rq's Redis Cluster ASK handling (worker/rq.c) against two
 * real cluster-enabled redis-servers the test starts itself (node A owns
 * every slot; the slot of "{arbiter}" is then put half way to node B with
 * CLUSTER SETSLOT IMPORTING/MIGRATING and one key MIGRATEd).
 *
 * Covers: a pipeline mixing commands A serves with commands answered -ASK:
 * every callback runs once, in issue order, with the importing node's
 * replies, and the connection stays (no reconnect); a write through ASK
 * lands on B; a command inside MULTI ... EXEC answered -ASK is not resent on
 * its own (the block fails "disconnected", nothing executed on B); a
 * multi-key command split between the nodes (TRYAGAIN) gets that reply alone and the
 * connection stays; after SETSLOT NODE, MOVED sends
 * the client to B.
 */
#undef NDEBUG
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "log.h"
#include "rq.h"
#include "tap.h"

static uv_loop_t loop_s, *loop = &loop_s;
static uv_timer_t tick;

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

/* ---- the two nodes ---- */

/* A free loopback port whose cluster-bus port (+10000) is free too. */
static int cluster_port(void)
{
	for (int tries = 0; tries < 200; tries++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET };
		socklen_t len = sizeof a;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
		    getsockname(s, (struct sockaddr *)&a, &len) < 0) {
			close(s);
			continue;
		}
		int port = ntohs(a.sin_port);
		close(s);
		if (port + 10000 > 65535)
			continue;
		s = socket(AF_INET, SOCK_STREAM, 0);
		a.sin_port = htons((uint16_t)(port + 10000));
		int free_bus = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
		close(s);
		if (free_bus)
			return port;
	}
	return -1;
}

static pid_t spawn_node(int port, const char *dir)
{
	char portbuf[16], conf[300];
	snprintf(portbuf, sizeof portbuf, "%d", port);
	snprintf(conf, sizeof conf, "nodes-%d.conf", port);
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
		       "--protected-mode", "no", "--cluster-enabled", "yes", "--cluster-config-file",
		       conf, "--cluster-node-timeout", "5000", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* A blocking control connection, retried until the server answers PING. */
static redisContext *ctl_connect(int port)
{
	for (int i = 0; i < 100; i++) {
		struct timeval tv = { .tv_sec = 2 };
		redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
		if (c && !c->err) {
			redisReply *r = redisCommand(c, "PING");
			bool up = r && r->type == REDIS_REPLY_STATUS;
			if (r)
				freeReplyObject(r);
			if (up)
				return c;
		}
		if (c)
			redisFree(c);
		usleep(100 * 1000);
	}
	return NULL;
}

/* A control command that must succeed; its reply (the caller frees). */
static redisReply *ctl(redisContext *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = redisvCommand(c, fmt, ap);
	va_end(ap);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		printf("# control command failed: %s: %s\n", fmt, r ? r->str : c->errstr);
		exit(1);
	}
	return r;
}

static void ctl_ok(redisContext *c, const char *fmt, const char *a, const char *b)
{
	freeReplyObject(ctl(c, fmt, a, b));
}

/* True when c's CLUSTER INFO says cluster_state:ok and it knows 2 nodes. */
static bool cluster_ok(redisContext *c)
{
	redisReply *r = ctl(c, "CLUSTER INFO");
	bool good = r->str && strstr(r->str, "cluster_state:ok") && strstr(r->str, "cluster_known_nodes:2");
	freeReplyObject(r);
	return good;
}

/* ---- the client ---- */

struct res {
	int done, order;
	char err[32];
	char str[64];
	long long integer;
	int type;
};

static int seq;                         /* callbacks run so far */
static bool connected;

static void cap_cb(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct res *x = data;
	(void)r;
	x->done++;
	x->order = seq++;
	if (err)
		snprintf(x->err, sizeof x->err, "%s", err);
	if (reply) {
		x->type = reply->type;
		x->integer = reply->integer;
		if (reply->str)
			snprintf(x->str, sizeof x->str, "%s", reply->str);
	}
}

static void on_connect(struct rq *r, void *data)
{
	(void)r;
	(void)data;
	connected = true;
}

static void issue(struct rq *r, struct res *x, int argc, const char **argv)
{
	memset(x, 0, sizeof *x);
	x->order = -1;
	ok(rq_cmdv(r, 0, cap_cb, x, argc, argv, NULL) == 0, "%s %s sent", argv[0], argv[1]);
}

static void on_closed(void *data)
{
	*(bool *)data = true;
}

int main(void)
{
	char dir[] = "/tmp/arbiter-rq-cluster-XXXXXX";
	log_setup(LOG_WARN, NULL);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	uv_loop_init(loop);
	uv_timer_init(loop, &tick);
	int pa = cluster_port(), pb = cluster_port();
	while (pb == pa)
		pb = cluster_port();
	pid_t na = spawn_node(pa, dir), nb = spawn_node(pb, dir);
	redisContext *a = ctl_connect(pa), *b = ctl_connect(pb);
	ok(a && b, "two cluster-enabled redis-servers up (:%d, :%d)", pa, pb);
	if (!a || !b)
		goto out;

	/* A owns every slot; B joins. */
	freeReplyObject(ctl(a, "CLUSTER ADDSLOTSRANGE 0 16383"));
	char pbs[16];
	snprintf(pbs, sizeof pbs, "%d", pb);
	ctl_ok(a, "CLUSTER MEET %s %s", "127.0.0.1", pbs);
	int waited = 0;
	while (!(cluster_ok(a) && cluster_ok(b)) && waited++ < 300)
		usleep(50 * 1000);
	ok(cluster_ok(a) && cluster_ok(b), "cluster of two nodes formed");

	const char *KA = "{arbiter}:a", *KB = "{arbiter}:b";
	int slot = rq_key_slot("{arbiter}");
	char slotbuf[16];
	snprintf(slotbuf, sizeof slotbuf, "%d", slot);
	redisReply *ida = ctl(a, "CLUSTER MYID"), *idb = ctl(b, "CLUSTER MYID");
	ctl_ok(a, "SET %s %s", KA, "A");
	ctl_ok(a, "SET %s %s", KB, "B0");
	freeReplyObject(ctl(b, "CLUSTER SETSLOT %s IMPORTING %s", slotbuf, ida->str));
	freeReplyObject(ctl(a, "CLUSTER SETSLOT %s MIGRATING %s", slotbuf, idb->str));
	freeReplyObject(ctl(a, "MIGRATE 127.0.0.1 %s %s 0 5000 KEYS %s", pbs, "", KB));

	char url[128];
	snprintf(url, sizeof url, "redis+cluster://127.0.0.1:%d", pa);
	struct rq_opts o = { .url = url, .on_connect = on_connect, .name = "ask-test",
	                     .cluster_key = "{arbiter}" };
	struct rq *r;
	ok(rq_new(loop, &o, &r) == 0, "rq_new %s", url);
	WAIT(connected, 10000);
	ok(connected, "connected to the slot's owner");

	/* 1. A pipeline: A serves a, B serves b (through ASK). */
	struct res x[5];
	const char *c0[] = { "GET", KA }, *c1[] = { "GET", KB }, *c2[] = { "APPEND", KB, "x" },
	           *c3[] = { "GET", KA }, *c4[] = { "GET", KB };
	seq = 0;
	issue(r, &x[0], 2, c0);
	issue(r, &x[1], 2, c1);
	issue(r, &x[2], 3, c2);
	issue(r, &x[3], 2, c3);
	issue(r, &x[4], 2, c4);
	WAIT(x[0].done && x[1].done && x[2].done && x[3].done && x[4].done, 10000);
	for (int i = 0; i < 5; i++) {
		is_int(x[i].done, 1, "pipeline: callback %d ran once", i);
		is_int(x[i].order, i, "pipeline: callback %d in issue order", i);
	}
	is_str(x[0].str, "A", "GET a: served by the owner");
	is_str(x[1].str, "B0", "GET b: served by the importing node after ASK");
	is_int(x[2].integer, 3, "APPEND b through ASK: executed once on the importing node");
	is_str(x[3].str, "A", "GET a after the ASKed commands");
	is_str(x[4].str, "B0x", "GET b sees the APPEND");
	is_int(rq_reconnects(r), 0, "ASK kept the connection (no reconnect)");
	is_int(rq_pending(r), 0, "nothing pending");
	redisReply *v = ctl(b, "ASKING");
	freeReplyObject(v);
	v = ctl(b, "GET %s", KB);
	is_str(v->str, "B0x", "node B holds the appended value");
	freeReplyObject(v);

	/* 2. MULTI ... EXEC: never resent alone. */
	struct res m[3];
	const char *mu[] = { "MULTI" }, *ap[] = { "APPEND", KB, "y" }, *ex[] = { "EXEC" };
	memset(m, 0, sizeof m);
	rq_cmdv(r, 0, cap_cb, &m[0], 1, mu, NULL);
	rq_cmdv(r, 0, cap_cb, &m[1], 3, ap, NULL);
	rq_cmdv(r, 0, cap_cb, &m[2], 1, ex, NULL);
	WAIT(m[2].done, 10000);
	is_str(m[0].str, "OK", "MULTI: OK");
	is_str(m[1].err, "disconnected", "APPEND inside MULTI answered ASK: failed, not resent");
	is_str(m[2].err, "disconnected", "EXEC fails with it");
	v = ctl(b, "ASKING");
	freeReplyObject(v);
	v = ctl(b, "GET %s", KB);
	is_str(v->str, "B0x", "nothing of the block ran on node B");
	freeReplyObject(v);
	WAIT(rq_connected(r), 10000);
	ok(rq_connected(r) && rq_reconnects(r) == 1, "reconnected to the owner after the failed block");

	/* 3. A multi-key command split between the nodes: TRYAGAIN. */
	struct res t;
	const char *mg[] = { "MGET", KA, KB };
	issue(r, &t, 3, mg);
	WAIT(t.done, 10000);
	uint64_t rc_t = rq_reconnects(r);
	ok(!t.err[0] && t.type == REDIS_REPLY_ERROR && !strncmp(t.str, "TRYAGAIN", 8),
	   "MGET a b during the migration: the TRYAGAIN reply goes to that command (%s%s)", t.err,
	   t.str);
	ok(rq_connected(r) && rq_reconnects(r) == rc_t,
	   "the connection stays after TRYAGAIN (no reconnect per command)");

	/* 4. The migration ends: MOVED to B. */
	freeReplyObject(ctl(a, "MIGRATE 127.0.0.1 %s %s 0 5000 KEYS %s", pbs, "", KA));
	freeReplyObject(ctl(b, "CLUSTER SETSLOT %s NODE %s", slotbuf, idb->str));
	freeReplyObject(ctl(a, "CLUSTER SETSLOT %s NODE %s", slotbuf, idb->str));
	uint64_t rc0 = rq_reconnects(r);
	struct res g;
	issue(r, &g, 2, c0);
	WAIT(g.done, 10000);
	is_str(g.err, "disconnected", "GET a after SETSLOT NODE: MOVED, disconnected");
	WAIT(rq_connected(r) && rq_reconnects(r) > rc0, 10000);
	issue(r, &g, 2, c0);
	WAIT(g.done, 10000);
	is_str(g.str, "A", "GET a on the new owner");
	issue(r, &g, 2, c1);
	WAIT(g.done, 10000);
	is_str(g.str, "B0x", "GET b on the new owner, without ASK");

	bool closed = false;
	rq_close(r, on_closed, &closed);
	WAIT(closed, 5000);
	ok(closed, "rq_close done");
	freeReplyObject(ida);
	freeReplyObject(idb);
out:
	if (a)
		redisFree(a);
	if (b)
		redisFree(b);
	kill(na, SIGTERM);
	kill(nb, SIGTERM);
	waitpid(na, NULL, 0);
	waitpid(nb, NULL, 0);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	uv_close((uv_handle_t *)&tick, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	uv_loop_close(loop);
	return tap_done();
}
