/*
 * ratelimit: the per-source-IP limiter of worker/README.md "Rate limiting" (see ratelimit.h).
 *
 * Two Lua scripts, embedded below, do all the work atomically in Redis:
 *   rl_lua_check    GCRA decision for one job (common/gcra.h, line for line),
 *                   and under `defer` the move of an over-limit job from the
 *                   stream to the delayed set (XACK + XDEL + ZADD).
 *   rl_lua_promote  moves due members of the delayed set back to the stream.
 * Both read the clock with redis.call('TIME'); Redis 7 replicates scripts by
 * their effects, so that is allowed and replicas' clocks never matter.
 *
 * Script cache: the first time this process sees a connection (an rq, or an
 * rq after a reconnect) it sends SCRIPT LOAD for both scripts, pipelined before
 * the EVALSHA that needed them (Redis runs one connection's commands in order).
 * A NOSCRIPT reply (SCRIPT FLUSH, a restarted or failed-over Redis) is retried
 * once as EVAL with the full text, which runs the script (it had not run) and
 * caches it again. The SHA1 digests are those SCRIPT LOAD returned.
 *
 * Lifetime: every command rl sends holds a reference; rl_free only marks the
 * limiter and the memory goes once the last reply (or "closed") came back and
 * the timer handle is closed.
 */
#include "ratelimit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gcra.h"
#include "ipkey.h"
#include "job.h"
#include "log.h"
#include "metrics.h"
#include "rq.h"
#include "rkeys.h"
#include "util.h"

#define RL_STR_(x) #x
#define RL_STR(x) RL_STR_(x)

/* Both scripts follow one rule: Redis keeps what a script wrote before a
 * runtime error, so every check and every computation comes first and the
 * writes come last, none of which can then fail on the data. Limiter state
 * that is not a finite number (a hand edit, a bug elsewhere) counts as
 * absent. Due times are capped at RL_MAX_DEFER_MS (one day) from now when
 * written, and the promotion treats a member due later than that (e.g. at
 * +inf) as due now. A job has at most JOB_MAX_FIELDS fields (the worker
 * refuses larger entries at intake); a delayed member with more, or one that
 * is not a JSON object, goes to the dead-letter stream instead. */

/* The check script. KEYS: 1 limiter hash `{prefix}:rl:<ipkey>` (fields t = TAT,
 * d = due time of the last deferred job, µs), 2 `{prefix}:delayed`,
 * 3 `{prefix}:jobs`. ARGV: 1 T (µs), 2 tau (µs), 3 policy (defer | reject),
 * 4 promoted (1 | 0), 5 consumer group, 6 entry id, 7.. field, value pairs.
 * Returns {code, retry_at_ms}: 0 allowed, 1 deferred (entry moved to the
 * delayed set), 2 over the limit under reject, 3 the entry is no longer
 * pending for the group (someone else handled it: drop it). A field given
 * twice keeps its first value, as in job.c. Numbers are
 * written with %.0f: Lua's tostring keeps only 14 digits.
 * Called with KEYS[1] alone (the fast path, same ARGV), it decides and writes exactly as
 * above when the job is allowed or rejected, and returns {4, 0, 0} having written nothing
 * when the job must be deferred: the caller then runs it again with the three keys. A
 * single-key script is served by a Cluster node whether or not the key exists there,
 * so during a slot migration the allowed jobs (nearly all) need neither the delayed set
 * nor the stream, which do not exist on the importing node until something is deferred
 * (a multi-key script naming them gets TRYAGAIN). */
const char rl_lua_check[] =
	"-- arbiter rate limit: GCRA per source-IP key (see common/gcra.h)\n"
	"local MAX_DEFER_US = " RL_STR(RL_MAX_DEFER_MS) " * 1000\n"
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	"local function finite(x)\n"
	"  local v = tonumber(x)\n"
	"  if v == nil or v ~= v or v == math.huge or v == -math.huge then return nil end\n"
	"  return v\n"
	"end\n"
	"local T = finite(ARGV[1])\n"
	"local tau = finite(ARGV[2])\n"
	"if not T or not tau then return redis.error_reply('rate limit: bad T or tau') end\n"
	"local reset = 0\n"
	"local st = {false, false}\n"
	"local kt = redis.call('TYPE', KEYS[1])\n"
	"kt = type(kt) == 'table' and kt.ok or kt\n"
	"if kt == 'hash' then\n"
	"  st = redis.call('HMGET', KEYS[1], 't', 'd')\n"
	"elseif kt ~= 'none' then\n"
	"  reset = 4\n"
	"end\n"
	"local stored = finite(st[1])\n"
	"if st[1] and (not stored or stored > now + tau + T) then reset = reset + 1 end\n"
	"if not stored or stored > now + tau + T then stored = 0 end\n"
	"local dl = finite(st[2])\n"
	"if st[2] and (not dl or dl > now + MAX_DEFER_US) then reset = reset + 2 end\n"
	"if not dl or dl > now + MAX_DEFER_US then dl = 0 end\n"
	"local tat = stored\n"
	"if tat < now then tat = now end\n"
	"local function fmt(x) return string.format('%.0f', x) end\n"
	"local function ms_ceil(us) return math.ceil(us / 1000) end\n"
	"local function ttl(a, b)\n"
	"  local ms = ms_ceil(math.max(a, b) - now)\n"
	"  if ms < 1 then ms = 1 end\n"
	"  local cap = ms_ceil(tau + T) + MAX_DEFER_US / 1000\n"
	"  if ms > cap then ms = cap end\n"
	"  return fmt(ms)\n"
	"end\n"
	"local function clean()\n"
	"  if reset >= 4 then redis.call('DEL', KEYS[1])\n"
	"  elseif reset > 0 then\n"
	"    if reset % 2 == 1 then redis.call('HDEL', KEYS[1], 't') end\n"
	"    if reset >= 2 then redis.call('HDEL', KEYS[1], 'd') end\n"
	"  end\n"
	"end\n"
	"if tat - now <= tau and (ARGV[4] == '1' or dl <= now) then\n"
	"  local ntat = tat + T\n"
	"  local ex = ttl(ntat, dl)\n"
	"  clean()\n"
	"  redis.call('HSET', KEYS[1], 't', fmt(ntat))\n"
	"  redis.call('PEXPIRE', KEYS[1], ex)\n"
	"  return {0, 0, reset}\n"
	"end\n"
	"local retry = tat - tau\n"
	"if retry > now + MAX_DEFER_US then retry = now + MAX_DEFER_US end\n"
	"if ARGV[3] ~= 'defer' then\n"
	"  clean()\n"
	"  return {2, ms_ceil(retry), reset}\n"
	"end\n"
	"if #KEYS < 3 then return {4, 0, 0} end\n"
	"if retry < dl + T then retry = dl + T end\n"
	"if retry > now + MAX_DEFER_US then retry = now + MAX_DEFER_US end\n"
	"local job = {}\n"
	"for i = 7, #ARGV - 1, 2 do\n"
	"  if job[ARGV[i]] == nil then job[ARGV[i]] = ARGV[i + 1] end\n"
	"end\n"
	"job['_token'] = ARGV[6]\n"
	"job['_cause'] = 'rate_limit'\n"
	"local member = cjson.encode(job)\n"
	"local score, due, ex = fmt(ms_ceil(retry)), fmt(retry), ttl(stored, retry)\n"
	"if redis.call('XACK', KEYS[3], ARGV[5], ARGV[6]) == 0 then\n"
	"  clean()\n"
	"  return {3, 0, reset}\n"
	"end\n"
	"clean()\n"
	"redis.call('XDEL', KEYS[3], ARGV[6])\n"
	"redis.call('ZADD', KEYS[2], score, member)\n"
	"redis.call('HSET', KEYS[1], 'd', due)\n"
	"redis.call('PEXPIRE', KEYS[1], ex)\n"
	"return {1, ms_ceil(retry), reset}\n";

/* The promote script. KEYS: 1 `{prefix}:delayed`, 2 `{prefix}:jobs`,
 * 3 `{prefix}:dead`. ARGV: 1 batch size. Moves the members due by Redis TIME
 * (score ≤ now in ms, or beyond now + RL_MAX_DEFER_MS), at most batch of
 * them, back to the stream with their fields and deferred_count + 1; a member
 * that is not a JSON object of strings, or has more than JOB_MAX_FIELDS
 * fields, goes to the dead-letter stream. Each member is removed from the
 * set only after its XADD. Returns {moved, taken, next due ms or -1}. */
const char rl_lua_promote[] =
	"-- arbiter rate limit: move due deferred jobs back to the stream\n"
	"local MAX_FIELDS = " RL_STR(JOB_MAX_FIELDS) "\n"
	"local MAX_DEFER_MS = " RL_STR(RL_MAX_DEFER_MS) "\n"
	"local t = redis.call('TIME')\n"
	"local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local function fmt(x) return string.format('%.0f', x) end\n"
	"local batch = tonumber(ARGV[1]) or 100\n"
	"local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(now_ms), 'LIMIT', 0, batch)\n"
	"if #due < batch then\n"
	"  local far = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. fmt(now_ms + MAX_DEFER_MS + 60000),\n"
	"    '+inf', 'LIMIT', 0, batch - #due)\n"
	"  for _, m in ipairs(far) do due[#due + 1] = m end\n"
	"end\n"
	"local moved = 0\n"
	"for _, m in ipairs(due) do\n"
	"  local good, job = pcall(cjson.decode, m)\n"
	"  local args, why = nil, 'invalid member of the delayed set'\n"
	"  if good and type(job) == 'table' then\n"
	"    args = {KEYS[2], '*'}\n"
	"    local n = 0\n"
	"    for k, v in pairs(job) do\n"
	"      if type(k) == 'string' and type(v) == 'string' and k ~= '_token'\n"
	"          and k ~= '_cause' and k ~= 'deferred_count' then\n"
	"        n = n + 1\n"
	"        if n > MAX_FIELDS then\n"
	"          args, why = nil, 'too many fields in a member of the delayed set'\n"
	"          break\n"
	"        end\n"
	"        args[#args + 1] = k\n"
	"        args[#args + 1] = v\n"
	"      end\n"
	"    end\n"
	"    if args then\n"
	"      local dc = tonumber(job['deferred_count'])\n"
	"      if dc == nil or dc ~= dc or dc < 0 or dc > 1e9 then dc = 0 end\n"
	"      args[#args + 1] = 'deferred_count'\n"
	"      args[#args + 1] = fmt(math.floor(dc) + 1)\n"
	"    end\n"
	"  end\n"
	"  if args then\n"
	"    redis.call('XADD', unpack(args))\n"
	"    moved = moved + 1\n"
	"  else\n"
	"    redis.call('XADD', KEYS[3], '*', 'reason', why, 'member', m, 'failed_at', fmt(now_ms))\n"
	"  end\n"
	"  redis.call('ZREM', KEYS[1], m)\n"
	"end\n"
	"local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"
	"local nd = tonumber(nxt[2])\n"
	"if nd and nd > now_ms + MAX_DEFER_MS then nd = now_ms end\n"
	"return {moved, #due, nd or -1}\n";

/* The causes script. KEYS: 1 `{prefix}:delayed`. Counts the members by their `_cause`
 * field (rate_limit, pause, retry, image; a member written before the field existed counts
 * as a retry when it has an attempt field, else as a rate-limit deferral), 1000 members per
 * ZRANGE. Returns {rate_limit, pause, retry, image}. O(members): run it every few seconds,
 * not per job. */
const char rl_lua_delayed_causes[] =
	"-- arbiter: the delayed set's members by cause\n"
	"local n = {0, 0, 0, 0}\n"
	"local i = 0\n"
	"while true do\n"
	"  local ms = redis.call('ZRANGE', KEYS[1], i, i + 999)\n"
	"  for _, m in ipairs(ms) do\n"
	"    if string.find(m, '\"_cause\":\"pause\"', 1, true) then n[2] = n[2] + 1\n"
	"    elseif string.find(m, '\"_cause\":\"retry\"', 1, true) then n[3] = n[3] + 1\n"
	"    elseif string.find(m, '\"_cause\":\"rate_limit\"', 1, true) then n[1] = n[1] + 1\n"
	"    elseif string.find(m, '\"_cause\":\"image\"', 1, true) then n[4] = n[4] + 1\n"
	"    elseif string.find(m, '\"attempt\":\"', 1, true) then n[3] = n[3] + 1\n"
	"    else n[1] = n[1] + 1 end\n"
	"  end\n"
	"  if #ms < 1000 then break end\n"
	"  i = i + 1000\n"
	"end\n"
	"return n\n";

enum script { SCRIPT_CHECK, SCRIPT_PROMOTE, NSCRIPTS };

static const char *const script_text[NSCRIPTS] = { rl_lua_check, rl_lua_promote };

#define SEEN_SLOTS 8

/* A no-Redis decision waiting for the next loop iteration. */
struct imm {
	struct imm *next;
	rl_cb *cb;
	void *data;
};

struct rl {
	char *prefix, *k_delayed, *k_stream, *k_dead, *group;
	bool disabled;
	enum gcra_policy policy;
	struct gcra_params gp;
	char t_arg[24], tau_arg[24];
	struct ipkey_allow allow;

	char sha[NSCRIPTS][41];                 /* "" until SCRIPT LOAD answered */
	struct {                                /* connections that have the scripts */
		const struct rq *r;
		uint64_t gen;
	} seen[SEEN_SLOTS];
	unsigned seen_next;

	uv_loop_t *loop;
	uv_timer_t timer;                       /* delivers no-Redis decisions */
	bool timer_init, timer_closed;
	struct imm *imm_head, *imm_tail;

	bool promoting;                         /* a promotion is in flight */
	int refs;                               /* commands in flight */
	bool freeing;
};

/* One rl_check through Redis; argv kept for the NOSCRIPT retry. */
struct check_ctx {
	struct rl *l;
	rl_cb *cb;
	void *data;
	int argc;
	char **argv;
	bool retried;
	bool full;                              /* the three-key call (after the fast path) */
	char *sub;                              /* submission_id for logs, may be NULL */
	char *entry;
};

struct load_ctx {
	struct rl *l;
	enum script which;
};

static void rl_maybe_release(struct rl *l);

const char *rl_decision_name(enum rl_decision d)
{
	switch (d) {
	case RL_ALLOW: return "allowed";
	case RL_DEFERRED: return "deferred";
	case RL_REJECT: return "rejected";
	default: return "error";
	}
}

int rl_new_opts(const struct rl_opts *o, struct rl **out, char *err, size_t errlen)
{
	const char *prefix = o->prefix && *o->prefix ? o->prefix : "arbiter";
	const char *limit = o->rate_limit ? o->rate_limit : "10/60s";
	const char *policy = o->rate_policy ? o->rate_policy : "defer";
	int burst = o->rate_burst ? o->rate_burst : 10;
	struct gcra_rate rate;
	char why[384];
	struct rl *l;
	const char *p;
	size_t plen;

	*out = NULL;
	if (gcra_rate_parse(limit, &rate, why, sizeof why) < 0) {
		snprintf(err, errlen, "ARBITER_RATE_LIMIT: %s", why);
		return -1;
	}
	l = xcalloc(1, sizeof *l);
	l->disabled = rate.count == 0;
	if (!l->disabled && gcra_params_make(&rate, burst, &l->gp, why, sizeof why) < 0) {
		snprintf(err, errlen, "%s: %s",
		         burst < 1 || burst > GCRA_MAX_BURST ? "ARBITER_RATE_BURST" :
		         "ARBITER_RATE_LIMIT/ARBITER_RATE_BURST", why);
		goto fail;
	}
	if (l->disabled && (burst < 1 || burst > GCRA_MAX_BURST)) {
		snprintf(err, errlen, "ARBITER_RATE_BURST: invalid burst %d: expected an integer "
		         "from 1 to %d", burst, GCRA_MAX_BURST);
		goto fail;
	}
	p = policy;
	while (*p == ' ' || *p == '\t')
		p++;
	plen = strlen(p);
	while (plen && (p[plen - 1] == ' ' || p[plen - 1] == '\t'))
		plen--;
	if (plen == 5 && !strncasecmp(p, "defer", 5)) {
		l->policy = GCRA_POLICY_DEFER;
	} else if (plen == 6 && !strncasecmp(p, "reject", 6)) {
		l->policy = GCRA_POLICY_REJECT;
	} else {
		snprintf(err, errlen, "ARBITER_RATE_POLICY: invalid policy \"%.64s\": expected "
		         "\"defer\" (re-schedule over-limit jobs) or \"reject\" (reject them with "
		         "rate_limited)", policy);
		goto fail;
	}
	if (ipkey_allow_parse(o->rate_allow, &l->allow, why, sizeof why) < 0) {
		snprintf(err, errlen, "ARBITER_RATE_ALLOW: %s", why);
		goto fail;
	}
	snprintf(l->t_arg, sizeof l->t_arg, "%" PRId64, l->gp.emission_us);
	snprintf(l->tau_arg, sizeof l->tau_arg, "%" PRId64, l->gp.tolerance_us);
	/* Key names come from rkeys; l->prefix is their base. */
	struct rkeys k;
	if (rkeys_init(&k, prefix, o->redis_keys, why, sizeof why) < 0) {
		snprintf(err, errlen, "%s", why);
		goto fail;
	}
	l->prefix = xstrdup(k.base);
	l->k_delayed = xstrdup(k.delayed);
	l->k_stream = xstrdup(k.jobs);
	l->k_dead = xstrdup(k.dead);
	l->group = xstrdup(k.group);
	rkeys_free(&k);
	*out = l;
	return 0;
fail:
	free(l);
	return -1;
}

int rl_new(const struct config *cfg, struct rl **out, char *err, size_t errlen)
{
	struct rl_opts o = {
		.prefix = cfg->prefix,
		.rate_limit = cfg->rate_limit,
		.rate_policy = cfg->rate_policy,
		.rate_allow = cfg->rate_allow,
		.rate_burst = cfg->rate_burst,
		.redis_keys = rkeys_style_for_url(cfg->redis_keys, cfg->redis_url),
	};
	/* rate_burst is an int the config table already parsed; 0 is not the
	 * "default" here but a bad value. */
	if (cfg->rate_burst < 1 || cfg->rate_burst > GCRA_MAX_BURST) {
		*out = NULL;
		snprintf(err, errlen, "ARBITER_RATE_BURST: invalid burst %d: expected an integer "
		         "from 1 to %d", cfg->rate_burst, GCRA_MAX_BURST);
		return -1;
	}
	return rl_new_opts(&o, out, err, errlen);
}

static void really_free(struct rl *l)
{
	struct imm *m = l->imm_head;
	while (m) {
		struct imm *next = m->next;
		free(m);
		m = next;
	}
	ipkey_allow_free(&l->allow);
	free(l->prefix);
	free(l->k_delayed);
	free(l->k_stream);
	free(l->k_dead);
	free(l->group);
	free(l);
}

static void timer_closed_cb(uv_handle_t *h)
{
	struct rl *l = h->data;
	l->timer_closed = true;
	rl_maybe_release(l);
}

static void rl_maybe_release(struct rl *l)
{
	if (!l->freeing || l->refs > 0)
		return;
	if (l->timer_init && !l->timer_closed) {
		if (!uv_is_closing((uv_handle_t *)&l->timer))
			uv_close((uv_handle_t *)&l->timer, timer_closed_cb);
		return;
	}
	really_free(l);
}

void rl_free(struct rl *l)
{
	if (!l || l->freeing)
		return;
	l->freeing = true;
	rl_maybe_release(l);
}

void rl_set_loop(struct rl *l, uv_loop_t *loop)
{
	if (!l->timer_init)
		l->loop = loop;
}

bool rl_disabled(const struct rl *l)
{
	return l->disabled;
}

char *rl_key_for(const struct rl *l, const char *ip)
{
	char key[IPKEY_MAX];
	struct strbuf sb = { 0 };
	ipkey_make(ip, key, sizeof key);
	strbuf_addf(&sb, "%s:rl:%s", l->prefix, key);
	return sb.buf;
}

/* ---- no-Redis decisions ---------------------------------------------------- */

static void imm_timer_cb(uv_timer_t *t)
{
	struct rl *l = t->data;
	struct imm *m = l->imm_head;
	l->imm_head = l->imm_tail = NULL;       /* added from callbacks: next iteration */
	while (m) {
		struct imm *next = m->next;
		if (!l->freeing)
			m->cb(RL_ALLOW, 0, NULL, m->data);
		free(m);
		m = next;
	}
	if (l->imm_head && !l->freeing)
		uv_timer_start(&l->timer, imm_timer_cb, 0, 0);
}

static int allow_async(struct rl *l, rl_cb *cb, void *data)
{
	struct imm *m;
	if (!l->timer_init) {
		if (!l->loop)
			l->loop = uv_default_loop();
		if (uv_timer_init(l->loop, &l->timer) < 0)
			return -1;
		l->timer.data = l;
		l->timer_init = true;
	}
	m = xcalloc(1, sizeof *m);
	m->cb = cb;
	m->data = data;
	if (l->imm_tail)
		l->imm_tail->next = m;
	else
		l->imm_head = m;
	l->imm_tail = m;
	if (!uv_is_active((uv_handle_t *)&l->timer))
		uv_timer_start(&l->timer, imm_timer_cb, 0, 0);
	metrics_ratelimit("allowed");
	return 0;
}

/* ---- script cache ---------------------------------------------------------- */

static void load_cb(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct load_ctx *lc = data;
	struct rl *l = lc->l;
	(void)r;
	if (reply && reply->type == REDIS_REPLY_STRING && reply->len == 40) {
		memcpy(l->sha[lc->which], reply->str, 40);
		l->sha[lc->which][40] = '\0';
	} else {
		LOGW(NULL, NULL, "rate limit: SCRIPT LOAD failed: %s",
		     err ? err : reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "bad reply");
	}
	free(lc);
	l->refs--;
	rl_maybe_release(l);
}

/* Sends SCRIPT LOAD for both scripts if this connection has not had them. */
static void ensure_loaded(struct rl *l, struct rq *r)
{
	uint64_t gen = rq_reconnects(r);
	for (unsigned i = 0; i < SEEN_SLOTS; i++)
		if (l->seen[i].r == r && l->seen[i].gen == gen)
			return;
	if (!rq_connected(r))
		return;                          /* the command will fail "not connected" */
	for (int s = 0; s < NSCRIPTS; s++) {
		struct load_ctx *lc = xcalloc(1, sizeof *lc);
		const char *argv[3] = { "SCRIPT", "LOAD", script_text[s] };
		lc->l = l;
		lc->which = (enum script)s;
		if (rq_cmdv(r, 0, load_cb, lc, 3, argv, NULL) < 0) {
			free(lc);
			return;
		}
		l->refs++;
	}
	l->seen[l->seen_next].r = r;
	l->seen[l->seen_next].gen = gen;
	l->seen_next = (l->seen_next + 1) % SEEN_SLOTS;
}

static void forget_connection(struct rl *l, const struct rq *r)
{
	for (unsigned i = 0; i < SEEN_SLOTS; i++)
		if (l->seen[i].r == r)
			l->seen[i].r = NULL;
}

static bool is_noscript(const redisReply *reply)
{
	return reply && reply->type == REDIS_REPLY_ERROR && reply->str &&
	       !strncmp(reply->str, "NOSCRIPT", 8);
}

/* Sends argv (argv[0] "EVALSHA", argv[1] a placeholder) as EVALSHA when the
 * digest is known, else as EVAL with the text. */
static int send_script(struct rl *l, struct rq *r, enum script which, bool force_eval,
                       rq_cb *cb, void *data, int argc, const char **argv)
{
	ensure_loaded(l, r);
	if (!force_eval && l->sha[which][0]) {
		argv[0] = "EVALSHA";
		argv[1] = l->sha[which];
	} else {
		argv[0] = "EVAL";
		argv[1] = script_text[which];
	}
	if (rq_cmdv(r, 0, cb, data, argc, argv, NULL) < 0)
		return -1;
	l->refs++;
	return 0;
}

/* ---- rl_check -------------------------------------------------------------- */

static void check_ctx_free(struct check_ctx *c)
{
	for (int i = 2; i < c->argc; i++)
		free(c->argv[i]);
	free(c->argv);
	free(c->sub);
	free(c->entry);
	free(c);
}

/* The script found implausible state under the job's limiter key (argv[3]) and
 * reset it: bits of what: 1 the TAT, 2 the last due time, 4 the key was not a hash. */
static void state_reset(const struct check_ctx *c, long long what)
{
	LOGW(c->sub, c->entry, "rate limit: implausible limiter state in %s reset: %s%s%s "
	     "(a hand edit or a bug elsewhere)", c->argv[3],
	     what & 4 ? "the key was not a hash" :
	     what & 1 ? "t (the TAT) was not a finite time at most burst x T after now" : "",
	     (what & 3) == 3 && !(what & 4) ? ", " : "",
	     (what & 2) && !(what & 4) ? "d (the last due time) was not a finite time at most "
	                                 "one day after now" : "");
	metrics_ratelimit_reset();
}

static void check_cb(struct rq *r, redisReply *reply, const char *err, void *data);

/* Sends c's check: with c->full, the three keys (c->argv as built); else the fast path,
 * KEYS[1] alone with the same ARGV (see rl_lua_check). Returns 0 or -1 (not sent). */
static int check_send(struct rl *l, struct rq *r, struct check_ctx *c, bool force_eval)
{
	if (c->full)
		return send_script(l, r, SCRIPT_CHECK, force_eval, check_cb, c, c->argc,
		                   (const char **)c->argv);
	const char **v = xcalloc((size_t)c->argc, sizeof *v);
	int n = 0;
	v[n++] = c->argv[0];
	v[n++] = c->argv[1];
	v[n++] = "1";
	v[n++] = c->argv[3];                 /* the limiter key; [4], [5]: delayed set, stream */
	for (int i = 6; i < c->argc; i++)
		v[n++] = c->argv[i];
	int rc = send_script(l, r, SCRIPT_CHECK, force_eval, check_cb, c, n, v);
	free(v);
	return rc;
}

static void check_cb(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct check_ctx *c = data;
	struct rl *l = c->l;
	enum rl_decision d = RL_ERROR;
	int64_t retry = 0;
	const char *why = err;

	l->refs--;
	if (is_noscript(reply) && !c->retried && !l->freeing) {
		c->retried = true;
		forget_connection(l, r);
		LOGI(NULL, NULL, "rate limit: script not cached in Redis (NOSCRIPT), sending EVAL");
		if (check_send(l, r, c, true) == 0)
			return;
		why = "could not send EVAL";
	} else if (reply && reply->type == REDIS_REPLY_ARRAY &&
	           (reply->elements == 2 || reply->elements == 3) &&
	           reply->element[0]->type == REDIS_REPLY_INTEGER &&
	           reply->element[1]->type == REDIS_REPLY_INTEGER) {
		long long code = reply->element[0]->integer;
		retry = reply->element[1]->integer;
		why = NULL;
		if (reply->elements == 3 && reply->element[2]->type == REDIS_REPLY_INTEGER &&
		    reply->element[2]->integer > 0)
			state_reset(c, reply->element[2]->integer);
		if (code == 4 && !c->full && !l->freeing) {
			/* The fast path says "defer": the move needs the three keys. */
			c->full = true;
			if (check_send(l, r, c, false) == 0)
				return;
			code = -1;
		}
		switch (code) {
		case 0: d = RL_ALLOW; break;
		case 1: d = RL_DEFERRED; break;
		case 2: d = RL_REJECT; break;
		case 3: d = RL_DEFERRED; break;
		default: d = RL_ERROR; why = "unexpected script result"; break;
		}
		if (code == 3)
			LOGI(c->sub, c->entry, "rate limit: entry no longer pending for the group "
			     "(handled elsewhere); dropping it");
		else if (code == 1)
			LOGD(c->sub, c->entry, "rate limit: deferred until %lld (%s)",
			     (long long)retry, c->argv[3]);
		else if (code == 2)
			LOGD(c->sub, c->entry, "rate limit: over the limit (%s)", c->argv[3]);
		if (code <= 2)
			metrics_ratelimit(rl_decision_name(d));
	} else if (reply && reply->type == REDIS_REPLY_ERROR) {
		why = reply->str;
	} else if (reply) {
		why = "unexpected reply to the rate-limit script";
	}
	if (d == RL_ERROR) {
		LOGW(c->sub, c->entry, "rate limit: %s", why ? why : "error");
		metrics_ratelimit("error");
		retry = 0;
	}
	c->cb(d, retry, d == RL_ERROR ? (why ? why : "error") : NULL, c->data);
	check_ctx_free(c);
	rl_maybe_release(l);
}

int rl_check(struct rl *l, struct rq *r, const char *ip, bool reevaluate, const char *entry_id,
             const char *const *fields, int nf, rl_cb *cb, void *data)
{
	return rl_check_stream(l, r, NULL, ip, reevaluate, entry_id, fields, nf, cb, data);
}

int rl_check_stream(struct rl *l, struct rq *r, const char *stream, const char *ip,
                    bool reevaluate, const char *entry_id, const char *const *fields, int nf,
                    rl_cb *cb, void *data)
{
	struct ipkey_addr a;
	bool parsed, promoted = false;
	char key[IPKEY_MAX];
	struct check_ctx *c;
	int argc;
	const char *sub = NULL;

	if (!l || !cb || l->freeing || nf < 0 || (nf > 0 && !fields))
		return -1;
	parsed = ip && ipkey_parse(ip, strnlen(ip, 300), &a) == 0;
	if (l->disabled || reevaluate || (parsed && ipkey_allow_match(&l->allow, &a)))
		return allow_async(l, cb, data);
	if (!r || (l->policy == GCRA_POLICY_DEFER && (!entry_id || !*entry_id)))
		return -1;
	if (parsed)
		ipkey_format(&a, key, sizeof key);
	else
		snprintf(key, sizeof key, "%s", IPKEY_INVALID);
	for (int i = 0; i < nf; i++) {
		if (!fields[2 * i] || !fields[2 * i + 1])
			return -1;
		if (!strcmp(fields[2 * i], "deferred_count") && atoi(fields[2 * i + 1]) > 0)
			promoted = true;
		if (!strcmp(fields[2 * i], "submission_id"))
			sub = fields[2 * i + 1];
	}

	c = xcalloc(1, sizeof *c);
	c->l = l;
	c->cb = cb;
	c->data = data;
	c->sub = sub ? xstrdup(sub) : NULL;
	c->entry = entry_id ? xstrdup(entry_id) : NULL;
	argc = 2 + 1 + 3 + 6 + 2 * nf;
	c->argv = xcalloc((size_t)argc, sizeof *c->argv);
	argc = 2;                                  /* [0], [1]: command and script */
	c->argv[argc++] = xstrdup("3");
	{
		struct strbuf sb = { 0 };
		strbuf_addf(&sb, "%s:rl:%s", l->prefix, key);
		c->argv[argc++] = sb.buf;
	}
	c->argv[argc++] = xstrdup(l->k_delayed);
	c->argv[argc++] = xstrdup(stream ? stream : l->k_stream);
	c->argv[argc++] = xstrdup(l->t_arg);
	c->argv[argc++] = xstrdup(l->tau_arg);
	c->argv[argc++] = xstrdup(l->policy == GCRA_POLICY_DEFER ? "defer" : "reject");
	c->argv[argc++] = xstrdup(promoted ? "1" : "0");
	c->argv[argc++] = xstrdup(l->group);
	c->argv[argc++] = xstrdup(entry_id ? entry_id : "");
	for (int i = 0; i < 2 * nf; i++)
		c->argv[argc++] = xstrdup(fields[i]);
	c->argc = argc;
	if (check_send(l, r, c, false) < 0) {
		check_ctx_free(c);
		return -1;
	}
	return 0;
}

/* ---- rl_promote_due -------------------------------------------------------- */

struct promote_ctx {
	struct rl *l;
	bool retried;
};

static int promote_send(struct rl *l, struct rq *r, bool force_eval, struct promote_ctx *pc);

static void promote_cb(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct promote_ctx *pc = data;
	struct rl *l = pc->l;

	l->refs--;
	if (is_noscript(reply) && !pc->retried && !l->freeing) {
		pc->retried = true;
		forget_connection(l, r);
		if (promote_send(l, r, true, pc) == 0)
			return;
	} else if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
	           reply->element[0]->type == REDIS_REPLY_INTEGER &&
	           reply->element[1]->type == REDIS_REPLY_INTEGER) {
		long long moved = reply->element[0]->integer, taken = reply->element[1]->integer;
		if (taken > 0)
			LOGD(NULL, NULL, "rate limit: %lld deferred job(s) back on the stream", moved);
		if (taken > moved)
			LOGW(NULL, NULL, "rate limit: %lld invalid member(s) of %s dead-lettered",
			     taken - moved, l->k_delayed);
		if (taken >= RL_PROMOTE_BATCH && !l->freeing) {
			pc->retried = false;
			if (promote_send(l, r, false, pc) == 0)
				return;
		}
	} else if (!err && reply && reply->type == REDIS_REPLY_ERROR &&
	           (rq_is_acl_refusal(reply->str) || rq_is_tryagain(reply->str))) {
		/* An ACL refusal: rq logs it once and /readyz reports it; not every tick.
		 * TRYAGAIN (a slot migration): the next tick tries again. */
		LOGD(NULL, NULL, "rate limit: promoting deferred jobs failed: %s", reply->str);
	} else {
		LOGW(NULL, NULL, "rate limit: promoting deferred jobs failed: %s",
		     err ? err : reply && reply->type == REDIS_REPLY_ERROR ? reply->str
		                                                            : "unexpected reply");
	}
	l->promoting = false;
	free(pc);
	rl_maybe_release(l);
}

static int promote_send(struct rl *l, struct rq *r, bool force_eval, struct promote_ctx *pc)
{
	char batch[16];
	const char *argv[7];
	snprintf(batch, sizeof batch, "%d", RL_PROMOTE_BATCH);
	argv[2] = "3";
	argv[3] = l->k_delayed;
	argv[4] = l->k_stream;
	argv[5] = l->k_dead;
	argv[6] = batch;
	return send_script(l, r, SCRIPT_PROMOTE, force_eval, promote_cb, pc, 7, argv);
}

int rl_promote_due(struct rl *l, struct rq *r)
{
	struct promote_ctx *pc;
	if (!l || !r || l->freeing)
		return -1;
	if (l->promoting)
		return 0;
	pc = xcalloc(1, sizeof *pc);
	pc->l = l;
	if (promote_send(l, r, false, pc) < 0) {
		free(pc);
		return -1;
	}
	l->promoting = true;
	return 0;
}
