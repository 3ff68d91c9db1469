/*
 * The LLM judge's shared limits and circuit breakers (see judge_limits.h):
 * two Lua scripts run by EVALSHA through the worker's command connection.
 */
#include "judge_limits.h"

#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "rq.h"
#include "util.h"

#define MAX_SEEN 32
#define NARGS 12   /* EVALSHA sha 3 k1 k2 k3 run + up to 5 arguments */

/* KEYS: inflight, tpm (this minute), breaker. ARGV: run id, lease ms, max in flight, tpm.
 * Returns {decision, wait ms, fails}. */
static const char LUA_ADMIT[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local b = redis.call('HMGET', KEYS[3], 'fails', 'until', 'probe', 'probe_until')\n"
	"local fails = tonumber(b[1]) or 0\n"
	"local openuntil = tonumber(b[2]) or 0\n"
	"local probe = 0\n"
	"if openuntil > 0 then\n"
	"  if now < openuntil then return {2, openuntil - now, fails} end\n"
	"  local pu = tonumber(b[4]) or 0\n"
	"  if b[3] and b[3] ~= ARGV[1] and pu > now then return {2, pu - now, fails} end\n"
	"  probe = 1\n"
	"end\n"
	"local tpm = tonumber(ARGV[4])\n"
	"if tpm > 0 then\n"
	"  local used = tonumber(redis.call('GET', KEYS[2]) or '0') or 0\n"
	"  if used >= tpm then return {3, 60000 - now % 60000, fails} end\n"
	"end\n"
	"local maxin = tonumber(ARGV[3])\n"
	"if maxin > 0 then\n"
	"  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
	"  if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and\n"
	"     redis.call('ZCARD', KEYS[1]) >= maxin then return {4, 0, fails} end\n"
	"  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])\n"
	"end\n"
	"if probe == 1 then\n"
	"  redis.call('HSET', KEYS[3], 'probe', ARGV[1])\n"
	"  redis.call('HSET', KEYS[3], 'probe_until', now + tonumber(ARGV[2]))\n"
	"end\n"
	"return {probe, 0, fails}\n";

/* KEYS: inflight, tpm, breaker. ARGV: run id, tokens, outcome (0 release, 1 answered,
 * 2 failed), probe (0/1), failures that open, cool-down ms. Returns {1 closed | 2 opened |
 * 0, fails}. */
static const char LUA_DONE[] =
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"redis.call('ZREM', KEYS[1], ARGV[1])\n"
	"local tok = tonumber(ARGV[2])\n"
	"if tok > 0 then\n"
	"  redis.call('INCRBY', KEYS[2], tok)\n"
	"  redis.call('PEXPIRE', KEYS[2], 120000)\n"
	"end\n"
	"local out = tonumber(ARGV[3])\n"
	"if out == 1 then\n"
	"  local was = redis.call('HGET', KEYS[3], 'until')\n"
	"  redis.call('DEL', KEYS[3])\n"
	"  if was then return {1, 0} end\n"
	"  return {0, 0}\n"
	"end\n"
	"if out == 2 then\n"
	"  local f = redis.call('HINCRBY', KEYS[3], 'fails', 1)\n"
	"  local cd = tonumber(ARGV[6])\n"
	"  local u = tonumber(redis.call('HGET', KEYS[3], 'until') or '0') or 0\n"
	"  redis.call('PEXPIRE', KEYS[3], cd * 10 + 3600000)\n"
	"  if ARGV[4] == '1' or (u == 0 and f >= tonumber(ARGV[5])) then\n"
	"    redis.call('HSET', KEYS[3], 'until', now + cd)\n"
	"    redis.call('HDEL', KEYS[3], 'probe', 'probe_until')\n"
	"    return {2, f}\n"
	"  end\n"
	"  return {0, f}\n"
	"end\n"
	"return {0, 0}\n";

enum { S_ADMIT, S_DONE, NSCRIPTS };
static const char *const SCRIPTS[NSCRIPTS] = { LUA_ADMIT, LUA_DONE };

struct seen {
	char url[512];
	bool open;
};

struct jlim {
	struct rq *rq;
	char *kbase;
	struct jlim_opts o;
	char sha[NSCRIPTS][41];
	bool cached[NSCRIPTS];   /* a call succeeded: Redis has the script (EVALSHA from then on) */
	struct seen seen[MAX_SEEN];
	int nseen;
	int pending;             /* commands whose reply has not come */
	bool freed;              /* jlim_free called: free when pending reaches 0 */
};

/* One script call; argv kept for the EVAL after a NOSCRIPT. */
struct jcall {
	struct jlim *l;
	int which;
	bool evaled;             /* sent as EVAL already */
	int argc;
	char *argv[NARGS];
	char url[512];
	jlim_admit_cb *cb;       /* S_ADMIT */
	void *data;
};

static void sha1_hex(const char *s, char out[41])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (EVP_Digest(s, strlen(s), md, &n, EVP_sha1(), NULL) != 1)
		n = 0;
	for (unsigned int i = 0; i < n && i < 20; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	out[n ? 40 : 0] = 0;
}

int jlim_new(const struct jlim_opts *o, struct jlim **out)
{
	*out = NULL;
	if (!o || !o->rq || !o->kbase)
		return -1;
	struct jlim *l = xcalloc(1, sizeof *l);
	l->o = *o;
	l->rq = o->rq;
	l->kbase = xstrdup(o->kbase);
	l->o.kbase = NULL;
	if (l->o.breaker_failures <= 0)
		l->o.breaker_failures = 5;
	if (l->o.breaker_cooldown_ms <= 0)
		l->o.breaker_cooldown_ms = 30000;
	for (int i = 0; i < NSCRIPTS; i++)
		sha1_hex(SCRIPTS[i], l->sha[i]);
	*out = l;
	return 0;
}

static void maybe_free(struct jlim *l)
{
	if (l->freed && l->pending == 0) {
		free(l->kbase);
		free(l);
	}
}

void jlim_free(struct jlim *l)
{
	if (!l)
		return;
	l->freed = true;
	maybe_free(l);
}

static struct seen *seen_for(struct jlim *l, const char *url)
{
	for (int i = 0; i < l->nseen; i++)
		if (!strcmp(l->seen[i].url, url))
			return &l->seen[i];
	int i = l->nseen < MAX_SEEN ? l->nseen++ : (int)(strlen(url) % MAX_SEEN);
	memset(&l->seen[i], 0, sizeof l->seen[i]);
	snprintf(l->seen[i].url, sizeof l->seen[i].url, "%s", url);
	return &l->seen[i];
}

int jlim_open_circuits(const struct jlim *l)
{
	int n = 0;
	for (int i = 0; l && i < l->nseen; i++)
		n += l->seen[i].open;
	return n;
}

/* "<base>:judge:breaker:<first 16 hex of SHA-256(url)>" */
static char *breaker_key(const struct jlim *l, const char *url)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	char hex[17] = "0";
	if (EVP_Digest(url, strlen(url), md, &n, EVP_sha256(), NULL) == 1)
		for (unsigned int i = 0; i < 8 && i < n; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "%s:breaker:%s", l->kbase, hex);
	return sb.buf;
}

static void call_free(struct jcall *c)
{
	for (int i = 0; i < c->argc; i++)
		free(c->argv[i]);
	free(c);
}

static void on_reply(struct rq *rq, redisReply *reply, const char *err, void *data);

static int call_send(struct jcall *c)
{
	struct jlim *l = c->l;
	free(c->argv[0]);
	free(c->argv[1]);
	if (!l->cached[c->which])
		c->evaled = true;   /* until one call succeeded, EVAL: keeps the calls in order */
	c->argv[0] = xstrdup(c->evaled ? "EVAL" : "EVALSHA");
	c->argv[1] = xstrdup(c->evaled ? SCRIPTS[c->which] : l->sha[c->which]);
	int rc = rq_cmdv(l->rq, 0, on_reply, c, c->argc, (const char **)c->argv, NULL);
	if (rc == 0)
		l->pending++;
	return rc;
}

static int64_t elem_int(const redisReply *r, size_t i)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return 0;
	const redisReply *e = r->element[i];
	return e->type == REDIS_REPLY_INTEGER ? (int64_t)e->integer : 0;
}

static void on_reply(struct rq *rq, redisReply *reply, const char *err, void *data)
{
	(void)rq;
	struct jcall *c = data;
	struct jlim *l = c->l;
	l->pending--;
	if (!l->freed && reply && reply->type == REDIS_REPLY_ERROR && !c->evaled &&
	    !strncmp(reply->str, "NOSCRIPT", 8)) {
		/* Flushed or a new server: EVAL caches it again. This call now runs after the
		 * commands sent meanwhile (a slot freed late, a count added late: harmless). */
		l->cached[c->which] = false;
		c->evaled = true;
		if (call_send(c) == 0)
			return;
	}
	if (reply && reply->type == REDIS_REPLY_ARRAY)
		l->cached[c->which] = true;
	char why[300];
	bool bad = !reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2;
	if (bad)
		snprintf(why, sizeof why, "judge limits: redis: %s", reply && reply->type ==
		         REDIS_REPLY_ERROR ? reply->str : err ? err : "unexpected reply");
	if (c->which == S_ADMIT) {
		int64_t d = elem_int(reply, 0), wait = elem_int(reply, 1);
		int fails = (int)elem_int(reply, 2);
		if (!bad && d == JLIM_OPEN && !l->freed)
			seen_for(l, c->url)->open = true;
		c->cb(bad ? JLIM_ERROR : (int)d, wait, fails, bad ? why : NULL, c->data);
	} else if (bad) {
		if (!l->freed && !(err && !strcmp(err, "closed")))
			LOGW(NULL, NULL, "%s", why);
	} else if (!l->freed) {
		int64_t st = elem_int(reply, 0), fails = elem_int(reply, 1);
		struct seen *s = seen_for(l, c->url);
		if (st == 2) {
			LOGW(NULL, NULL, "judge: circuit open for %s after %lld failed verdicts (shared by "
			     "every replica)", c->url, (long long)fails);
			s->open = true;
		} else if (st == 1) {
			LOGI(NULL, NULL, "judge: circuit closed for %s (the provider answers again)",
			     c->url);
			s->open = false;
		}
	}
	call_free(c);
	maybe_free(l);
}

static struct jcall *call_new(struct jlim *l, int which, const char *url, const char *run_id)
{
	struct jcall *c = xcalloc(1, sizeof *c);
	c->l = l;
	c->which = which;
	snprintf(c->url, sizeof c->url, "%s", url);
	/* argv: EVALSHA sha 3 inflight tpm breaker run_id ... */
	struct strbuf tpm = { 0 };
	time_t now = time(NULL);
	strbuf_addf(&tpm, "%s:tpm:%lld", l->kbase, (long long)(now - now % 60));
	struct strbuf inf = { 0 };
	strbuf_addf(&inf, "%s:inflight", l->kbase);
	c->argv[0] = NULL;
	c->argv[1] = NULL;
	c->argv[2] = xstrdup("3");
	c->argv[3] = inf.buf;
	c->argv[4] = tpm.buf;
	c->argv[5] = breaker_key(l, url);
	c->argv[6] = xstrdup(run_id);
	c->argc = 7;
	return c;
}

static void add_arg(struct jcall *c, long long v)
{
	char b[32];
	if (c->argc >= NARGS)
		abort();   /* a bug: NARGS too small */
	snprintf(b, sizeof b, "%lld", v);
	c->argv[c->argc++] = xstrdup(b);
}

int jlim_admit(struct jlim *l, const char *url, const char *run_id, int lease_ms,
               jlim_admit_cb *cb, void *data)
{
	if (!l || l->freed)
		return -1;
	struct jcall *c = call_new(l, S_ADMIT, url, run_id);
	c->cb = cb;
	c->data = data;
	add_arg(c, lease_ms);
	add_arg(c, l->o.max_inflight);
	add_arg(c, (long long)l->o.tpm);
	if (call_send(c) < 0) {
		call_free(c);
		return -1;
	}
	return 0;
}

void jlim_done(struct jlim *l, const char *url, const char *run_id, int64_t tokens,
               enum jlim_outcome outcome, bool probe)
{
	if (!l || l->freed)
		return;
	struct jcall *c = call_new(l, S_DONE, url, run_id);
	add_arg(c, tokens > 0 ? (long long)tokens : 0);
	add_arg(c, outcome);
	add_arg(c, probe ? 1 : 0);
	add_arg(c, l->o.breaker_failures);
	add_arg(c, l->o.breaker_cooldown_ms);
	if (call_send(c) < 0)
		call_free(c);
}
