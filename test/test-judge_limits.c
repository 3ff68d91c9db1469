/*
 * Service test for worker/judge_limits against a real redis-server (run under
 * test/services.py, ARBITER_TEST_REDIS_URL): the shared in-flight limit
 * (slots, a run admitted again keeps its slot, leases that expire), the
 * tokens-per-minute limit, the shared circuit (opens after N failed verdicts,
 * one probe after the cool-down, a failed probe re-opens it, an answer closes
 * it), two limiters (two replicas) seeing the same state, and the EVAL
 * fallback after SCRIPT FLUSH.
 *
 * The rq under test drives the scripts; a plain synchronous hiredis
 * connection inspects Redis.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "judge_limits.h"
#include "log.h"
#include "rq.h"
#include "tap.h"
#include "util.h"

static uv_loop_t *loop;
static redisContext *sync_rc;

static const char URL[] = "http://127.0.0.1:9/v1";
static const char KBASE[] = "{jl}:judge";

static long long RI(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *rep = redisvCommand(sync_rc, fmt, ap);
	va_end(ap);
	long long v = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
	if (rep && rep->type == REDIS_REPLY_STRING)
		v = atoll(rep->str);
	freeReplyObject(rep);
	return v;
}

static bool guard_fired;
static void guard_cb(uv_timer_t *t)
{
	(void)t;
	guard_fired = true;
	uv_stop(loop);
}

static bool run_until(const bool *flag)
{
	uv_timer_t guard;
	guard_fired = false;
	uv_timer_init(loop, &guard);
	uv_timer_start(&guard, guard_cb, 10000, 0);
	while (!*flag && !guard_fired)
		uv_run(loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&guard, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
	return *flag;
}

static void on_connect(struct rq *r, void *data)
{
	(void)r;
	*(bool *)data = true;
	uv_stop(loop);
}

struct answer {
	bool done;
	int decision;
	int64_t wait;
	int fails;
};

static void on_admit(int decision, int64_t wait_ms, int fails, const char *err, void *data)
{
	struct answer *a = data;
	if (err)
		diag("admit: %s", err);
	a->done = true;
	a->decision = decision;
	a->wait = wait_ms;
	a->fails = fails;
	uv_stop(loop);
}

/* One admit, waited for: the decision (-9 when nothing came). */
static int admit(struct jlim *l, const char *run, int lease, struct answer *a)
{
	struct answer tmp;
	if (!a)
		a = &tmp;
	memset(a, 0, sizeof *a);
	a->decision = -9;
	if (jlim_admit(l, URL, run, lease, on_admit, a) < 0)
		return -8;
	run_until(&a->done);
	return a->decision;
}

static void on_ping(struct rq *r, redisReply *reply, const char *err, void *data)
{
	(void)r;
	(void)reply;
	(void)err;
	*(bool *)data = true;
	uv_stop(loop);
}

/* Waits until everything sent on r before was answered (replies come in order). */
static void settle(struct rq *r)
{
	bool done = false;
	const char *argv[] = { "PING" };
	if (rq_cmdv(r, 0, on_ping, &done, 1, argv, NULL) == 0)
		run_until(&done);
}

static void closed_cb(void *data)
{
	*(bool *)data = true;
	uv_stop(loop);
}

static char *breaker_key(void)
{
	/* the same name judge_limits.c builds: first 16 hex of SHA-256(URL) */
	redisReply *rep = redisCommand(sync_rc, "KEYS %s:breaker:*", KBASE);
	char *k = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 ?
	          xstrdup(rep->element[0]->str) : NULL;
	freeReplyObject(rep);
	return k;
}

int main(void)
{
	struct rq_url u;
	char err[200];

	alarm(120);
	log_setup(LOG_WARN, "test-judge_limits");
	const char *redis_url = getenv("ARBITER_TEST_REDIS_URL");
	if (!redis_url) {
		printf("1..0 # SKIP ARBITER_TEST_REDIS_URL not set (run under test/services.py)\n");
		return 0;
	}
	if (rq_url_parse(redis_url, &u, err, sizeof err) < 0) {
		diag("bad URL: %s", err);
		return 1;
	}
	sync_rc = redisConnect(u.host, u.port);
	if (!sync_rc || sync_rc->err) {
		diag("cannot connect to %s", redis_url);
		return 1;
	}
	loop = uv_default_loop();
	bool up = false;
	struct rq_opts ro = { .url = redis_url, .on_connect = on_connect, .data = &up,
	                      .name = "jl", .connect_timeout_ms = 1000, .cmd_timeout_ms = 3000 };
	struct rq *r = NULL;
	ok(rq_new(loop, &ro, &r) == 0 && run_until(&up), "connected");

	struct jlim *l = NULL, *l2 = NULL;
	struct jlim_opts o = { NULL, KBASE, 2, 0, 2, 400 };
	ok(jlim_new(&o, &l) == -1 && l == NULL, "no rq: refused");
	o.rq = r;
	ok(jlim_new(&o, &l) == 0 && jlim_new(&o, &l2) == 0, "two limiters (two replicas)");

	/* -- in-flight: 2 slots across both limiters ---------------------------------- */
	is_int(admit(l, "a", 5000, NULL), JLIM_GO, "a: slot 1");
	is_int(admit(l2, "b", 5000, NULL), JLIM_GO, "b (other replica): slot 2");
	is_int(admit(l, "c", 5000, NULL), JLIM_FULL, "c: full");
	is_int(admit(l2, "a", 5000, NULL), JLIM_GO, "a again (its retry): keeps its slot");
	is_int((int)RI("ZCARD %s:inflight", KBASE), 2, "two members in the sorted set");
	jlim_done(l, URL, "a", 0, JLIM_RELEASE, false);
	is_int(admit(l2, "c", 5000, NULL), JLIM_GO, "a released: c gets the slot");
	jlim_done(l, URL, "b", 0, JLIM_RELEASE, false);
	jlim_done(l, URL, "c", 0, JLIM_RELEASE, false);
	settle(r);
	is_int((int)RI("ZCARD %s:inflight", KBASE), 0, "all released");
	is_int(admit(l, "d", 100, NULL), JLIM_GO, "d: a 100 ms lease");
	is_int(admit(l, "e", 100, NULL), JLIM_GO, "e: a 100 ms lease");
	is_int(admit(l, "f", 5000, NULL), JLIM_FULL, "f: full");
	usleep(250 * 1000);
	is_int(admit(l, "f", 5000, NULL), JLIM_GO, "the leases of a dead replica ran out: f goes");
	jlim_done(l, URL, "f", 0, JLIM_RELEASE, false);
	jlim_free(l2);
	jlim_free(l);

	/* -- tokens per minute ------------------------------------------------------------ */
	o.max_inflight = 0;
	o.tpm = 1000;
	/* The count is per clock minute: stay inside one. The blocking sleep must not outlive a
	 * command's 3 s timeout: the release of f is answered first, and the loop's clock is
	 * brought up to date after it, else the next command's timer starts 4 s in the past and
	 * fires at once (the test failed whenever it reached here at second 57 or later). */
	settle(r);
	if (time(NULL) % 60 >= 57) {
		sleep(4);
		uv_update_time(loop);
	}
	ok(jlim_new(&o, &l) == 0, "limiter with tpm 1000");
	is_int(admit(l, "t1", 5000, NULL), JLIM_GO, "nothing used yet: go");
	jlim_done(l, URL, "t1", 600, JLIM_ANSWERED, false);
	is_int(admit(l, "t2", 5000, NULL), JLIM_GO, "600 used: go");
	jlim_done(l, URL, "t2", 600, JLIM_ANSWERED, false);
	struct answer a;
	is_int(admit(l, "t3", 5000, &a), JLIM_TPM, "1200 used: wait");
	ok(a.wait > 0 && a.wait <= 60000, "wait until the next minute (%lld ms)", (long long)a.wait);
	redisReply *keys = redisCommand(sync_rc, "KEYS %s:tpm:*", KBASE);
	ok(keys && keys->elements >= 1, "the minute's count is a key");
	long long used = 0, ttl = 0;
	for (size_t i = 0; keys && i < keys->elements; i++) {
		used += RI("GET %s", keys->element[i]->str);
		ttl = RI("PTTL %s", keys->element[i]->str);
		RI("DEL %s", keys->element[i]->str);
	}
	freeReplyObject(keys);
	is_int((int)used, 1200, "tokens counted");
	ok(ttl > 0 && ttl <= 120000, "and expiring (%lld ms)", ttl);
	is_int(admit(l, "t3", 5000, NULL), JLIM_GO, "count reset: go");
	jlim_free(l);

	/* -- circuit ---------------------------------------------------------------------- */
	o.tpm = 0;
	ok(jlim_new(&o, &l) == 0 && jlim_new(&o, &l2) == 0, "two limiters, circuit after 2");
	is_int(admit(l, "x1", 5000, NULL), JLIM_GO, "closed: go");
	jlim_done(l, URL, "x1", 0, JLIM_FAILED, false);
	is_int(admit(l2, "x2", 5000, &a), JLIM_GO, "one failure: still closed");
	is_int(a.fails, 1, "the other replica sees 1 failure");
	jlim_done(l2, URL, "x2", 0, JLIM_FAILED, false);
	is_int(admit(l, "x3", 5000, &a), JLIM_OPEN, "two failed verdicts (two replicas): open");
	ok(a.wait > 0 && a.wait <= 400, "until the cool-down ends (%lld ms)", (long long)a.wait);
	is_int(jlim_open_circuits(l), 1, "this process counts it open");
	usleep(450 * 1000);
	is_int(admit(l2, "p1", 5000, NULL), JLIM_PROBE, "after the cool-down: one probe");
	is_int(admit(l, "x4", 5000, NULL), JLIM_OPEN, "while it runs the others wait");
	is_int(admit(l2, "p1", 5000, NULL), JLIM_PROBE, "the probe's own retry goes");
	jlim_done(l2, URL, "p1", 0, JLIM_FAILED, true);
	is_int(admit(l, "x5", 5000, &a), JLIM_OPEN, "a failed probe re-opens it at once");
	ok(a.wait > 200, "for a whole cool-down (%lld ms)", (long long)a.wait);
	usleep(450 * 1000);
	is_int(admit(l, "p2", 5000, NULL), JLIM_PROBE, "next probe");
	char *bk = breaker_key();
	ok(bk != NULL, "the circuit is one hash: %s", bk ? bk : "(none)");
	jlim_done(l, URL, "p2", 0, JLIM_ANSWERED, true);
	settle(r);
	is_int((int)RI("EXISTS %s", bk ? bk : "none"), 0, "an answer closes it (key deleted)");
	is_int(jlim_open_circuits(l), 0, "this process saw it close");
	is_int(admit(l2, "x6", 5000, NULL), JLIM_GO, "closed for the other replica too");
	free(bk);

	/* -- SCRIPT FLUSH: EVAL fallback ------------------------------------------------------ */
	RI("SCRIPT FLUSH");
	is_int(admit(l, "s1", 5000, NULL), JLIM_GO, "after SCRIPT FLUSH: EVAL, then cached again");
	is_int(admit(l, "s2", 5000, NULL), JLIM_GO, "and EVALSHA works again");
	jlim_free(l2);
	jlim_free(l);

	bool closed = false;
	rq_close(r, closed_cb, &closed);
	ok(run_until(&closed), "closed");
	redisFree(sync_rc);
	return tap_done();
}
