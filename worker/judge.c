/*
 * The LLM judge's verdict flow (see judge.h): cache lookup in PostgreSQL, then
 * among the verdicts paid for and not committed yet (Redis), provider calls
 * with retries, repair and a circuit breaker, and keeping a verdict paid for
 * in Redis until the job's commit stores it. One `struct jrun` per verdict; it
 * lives until its callback ran and its retry timer (if any) closed.
 */
#include "judge.h"

#include <errno.h>
#include <libpq-fe.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "jprov.h"
#include "judge_http.h"
#include "judge_limits.h"
#include "log.h"
#include "pgc.h"
#include "rq.h"
#include "util.h"

#define MAX_BREAKERS 32
#define RETRY_AFTER_CAP_MS 60000

struct breaker {
	char url[512];
	int fails;              /* consecutive verdicts that failed on provider trouble */
	bool open;
	bool probing;           /* one request is testing the provider */
	uint64_t until;         /* loop time when the next probe may go */
};

struct jrun;

struct judge {
	uv_loop_t *loop;
	struct pgc_pool *pg;
	struct rq *rq;
	char *kbase;            /* "<base>:judge" */
	struct jlim *lim;       /* shared limits and circuits (Redis); NULL = these per process */
	struct jhttp *http;
	struct judge_opts o;
	struct breaker br[MAX_BREAKERS];
	int nbr;
	struct jrun *runs;      /* doubly linked: every verdict in progress */
	int nruns;
	struct jrun *lq_head, *lq_tail;   /* waiting for a cache lookup statement (FIFO) */
	int lq_n;
	int lookups;            /* lookup statements in flight */
	bool closing;
	struct judge_stats st;
};

struct jrun {
	struct jrun *next, *prev;
	struct jrun *lq_next;   /* in jg's lookup queue */
	struct judge *jg;
	const struct rubric *r;
	const struct jprov *pv; /* the provider r names (set by ask; borrowed from jg->o) */
	judge_cb *cb;
	void *data;
	char *job_id;           /* NULL = unknown */
	bool rejudge;
	json_t *materials;
	char *system, *user;
	char *key_header;       /* "<header>: <key>"; wiped and freed at the end */
	struct breaker *br;     /* per-process circuit (no shared limits) */
	bool probe;             /* this run's requests are the circuit's probe */
	char run_id[33];        /* random: its in-flight slot and probe in Redis */
	bool admitted;          /* holds what jlim_admit gave: jlim_done owed */
	int brk_fails;          /* the shared circuit's failure count at the last admit */
	int full_waits;         /* admits refused by the shared in-flight limit in a row */
	int attempt;            /* retries of transport/5xx/429 failures so far */
	bool repaired;
	char *repair_text, *repair_err;
	char *verdict_text;
	uv_timer_t timer;
	bool timer_on;          /* timer initialised: close it before freeing */
	struct judge_result res;
	uint32_t rnd;
};

/* The cache lookups of many verdicts in one statement (keys as a text[] literal). */
static const char SQL_LOOKUP[] =
	"SELECT key, verdict::text, tokens_in, tokens_out, cost_usd::float8 FROM judge_verdicts "
	"WHERE key = ANY($1::text[])";

#define LOOKUP_BATCH 512      /* keys per lookup statement */
#define LOOKUPS_INFLIGHT 2    /* lookup statements at once; more keys wait and join one batch */

struct lbatch {
	struct judge *jg;
	int n;
	struct jrun *runs[];
};
static uint32_t rnd32(struct jrun *x)
{
	/* xorshift, seeded from getrandom per run: jitter only, not security */
	uint32_t v = x->rnd ? x->rnd : 2463534242u;
	v ^= v << 13;
	v ^= v >> 17;
	v ^= v << 5;
	x->rnd = v;
	return v;
}

void judge_key(const struct rubric *r, const json_t *answer, const json_t *tests, char out[65])
{
	json_t *m = rubric_materials(r, answer, tests);
	char *mat = rubric_cache_material(r, m);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (EVP_Digest(mat, strlen(mat), md, &n, EVP_sha256(), NULL) != 1)
		n = 0;
	for (unsigned int i = 0; i < n && i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	out[n ? 64 : 0] = 0;
	free(mat);
	json_decref(m);
}

static struct breaker *breaker_for(struct judge *jg, const char *url)
{
	for (int i = 0; i < jg->nbr; i++)
		if (!strcmp(jg->br[i].url, url))
			return &jg->br[i];
	int i = jg->nbr < MAX_BREAKERS ? jg->nbr++ : (int)(strlen(url) % MAX_BREAKERS);
	memset(&jg->br[i], 0, sizeof jg->br[i]);
	snprintf(jg->br[i].url, sizeof jg->br[i].url, "%s", url);
	return &jg->br[i];
}

static int breakers_open(const struct judge *jg)
{
	int n = 0;
	for (int i = 0; i < jg->nbr; i++)
		n += jg->br[i].open;
	return n;
}

static void run_free(struct jrun *x)
{
	struct judge *jg = x->jg;
	if (x->key_header) {
		memset(x->key_header, 0, strlen(x->key_header));
		free(x->key_header);
	}
	json_decref(x->materials);
	free(x->job_id);
	free(x->system);
	free(x->user);
	free(x->repair_text);
	free(x->repair_err);
	free(x->verdict_text);
	rubric_verdict_clear(&x->res.v);
	free(x);
	jg->nruns--;
	if (jg->closing && jg->nruns == 0) {
		jlim_free(jg->lim);
		free(jg->kbase);
		free(jg);
	}
}

static void timer_closed(uv_handle_t *h)
{
	run_free(h->data);
}

/* The request admitted by the shared limits is over: its slot back, its tokens counted, the
 * outcome recorded for the circuit (only when any of that matters). */
static void release(struct jrun *x, int64_t tokens, enum jlim_outcome o)
{
	struct judge *jg = x->jg;
	if (!jg->lim || !x->admitted)
		return;
	x->admitted = false;
	if (jg->o.shared_inflight > 0 || (jg->o.tpm > 0 && tokens > 0) || o == JLIM_FAILED ||
	    x->probe || x->brk_fails > 0)
		jlim_done(jg->lim, x->pv->base_url, x->run_id, tokens, o, x->probe);
}

static void finish(struct jrun *x, int rc, const char *err)
{
	struct judge *jg = x->jg;
	if (x->prev)
		x->prev->next = x->next;
	else
		jg->runs = x->next;
	if (x->next)
		x->next->prev = x->prev;
	release(x, 0, JLIM_RELEASE);
	if (x->probe && x->br)
		x->br->probing = false;
	x->probe = false;
	switch (rc) {
	case JUDGE_OK:
		if (x->res.cached)
			jg->st.cached++;
		else
			jg->st.fresh++;
		break;
	case JUDGE_INVALID: jg->st.invalid++; break;
	case JUDGE_UNAVAILABLE: jg->st.unavailable++; break;
	default: jg->st.config++; break;
	}
	x->res.raw = rc == JUDGE_INVALID ? x->repair_text : NULL;
	x->cb(rc, &x->res, err, x->data);
	if (x->timer_on) {
		uv_timer_stop(&x->timer);
		uv_close((uv_handle_t *)&x->timer, timer_closed);
	} else {
		run_free(x);
	}
}

static void provider_failed(struct jrun *x, const char *why)
{
	struct judge *jg = x->jg;
	struct breaker *b = x->br;
	if (!b) {
		/* Shared circuit: Redis counts the failure (and logs when it opens). */
		release(x, 0, JLIM_FAILED);
		finish(x, JUDGE_UNAVAILABLE, why);
		return;
	}
	b->fails++;
	if (x->probe || b->fails >= jg->o.breaker_failures) {
		if (!b->open)
			LOGW(NULL, NULL, "judge: circuit open for %s after %d failed verdicts: %s", b->url,
			     b->fails, why);
		b->open = true;
		b->until = uv_now(jg->loop) + (uint64_t)jg->o.breaker_cooldown_ms;
	}
	jg->st.breakers_open = breakers_open(jg);
	finish(x, JUDGE_UNAVAILABLE, why);
}

static void provider_ok(struct jrun *x)
{
	struct breaker *b = x->br;
	if (!b)
		return;   /* shared circuit: release() records the answer */
	if (b->open)
		LOGI(NULL, NULL, "judge: circuit closed for %s (the provider answers again)", b->url);
	b->fails = 0;
	b->open = false;
	x->jg->st.breakers_open = breakers_open(x->jg);
}

static void send_request(struct jrun *x);

/* "<base>:judge:paid:<key>": a verdict paid for, until JUDGE_GRACE_MS after its commit. */
static char *paid_key(const struct judge *jg, const char *key)
{
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "%s:paid:%s", jg->kbase, key);
	return sb.buf;
}

/* The Redis entry of the verdict x paid for: {"job", "verdict", "ti", "to", "cost", "calls"}. */
static char *entry_dumps(const struct jrun *x)
{
	json_t *v = json_loads(x->verdict_text, 0, NULL);
	json_t *e = json_pack("{s:s?, s:o, s:I, s:I, s:f, s:i}", "job", x->job_id,
	                      "verdict", v ? v : json_null(), "ti", (json_int_t)x->res.tokens_in,
	                      "to", (json_int_t)x->res.tokens_out, "cost", x->res.cost_usd,
	                      "calls", x->res.calls);
	char *t = e ? json_dumps(e, JSON_COMPACT) : NULL;
	json_decref(e);
	return t;
}

/* Takes the verdict of a Redis entry into x->res (pending). own_only: only an entry this job
 * paid for. Returns 0, or -1 when the entry is unusable (or not this job's). */
static int entry_take(struct jrun *x, const char *t, size_t len, bool own_only)
{
	json_t *e = json_loadb(t, len, 0, NULL);
	json_t *v = json_object_get(e, "verdict");
	const char *job = json_string_value(json_object_get(e, "job"));
	char *vt = NULL;
	struct rubric_verdict rv;
	char err[256];
	if (!json_is_object(v) || (own_only && (!job || !x->job_id || strcmp(job, x->job_id))) ||
	    !(vt = json_dumps(v, JSON_COMPACT)) ||
	    rubric_verdict_parse(x->r, vt, strlen(vt), &rv, err, sizeof err) < 0) {
		free(vt);
		json_decref(e);
		return -1;
	}
	rubric_verdict_clear(&x->res.v);
	x->res.v = rv;
	free(x->verdict_text);
	x->verdict_text = vt;
	x->res.verdict_text = vt;
	x->res.tokens_in = json_integer_value(json_object_get(e, "ti"));
	x->res.tokens_out = json_integer_value(json_object_get(e, "to"));
	x->res.cost_usd = json_number_value(json_object_get(e, "cost"));
	x->res.paid_calls = (int)json_integer_value(json_object_get(e, "calls"));
	x->res.pending = true;
	json_decref(e);
	return 0;
}

static void on_other(struct rq *rq, redisReply *reply, const char *err, void *data)
{
	(void)rq;
	(void)err;
	struct jrun *x = data;
	/* Unusable or gone (committed and expired meanwhile): keep our own. */
	if (reply && reply->type == REDIS_REPLY_STRING)
		entry_take(x, reply->str, reply->len, false);
	finish(x, JUDGE_OK, NULL);
}

static void on_kept(struct rq *rq, redisReply *reply, const char *err, void *data)
{
	(void)rq;
	struct jrun *x = data;
	if (reply && reply->type == REDIS_REPLY_NIL && !x->jg->closing) {
		/* Another job kept a verdict for this key first: everyone uses that one. */
		char *k = paid_key(x->jg, x->res.key);
		const char *argv[] = { "GET", k };
		int rc = rq_cmdv(x->jg->rq, 0, on_other, x, 2, argv, NULL);
		free(k);
		if (rc == 0)
			return;
	} else if (!reply || reply->type == REDIS_REPLY_ERROR) {
		/* Paid for and valid: used now; only a lost lease would pay for it again. */
		LOGW(NULL, NULL, "judge: keeping verdict %.12s in redis failed: %s", x->res.key,
		     reply ? reply->str : err);
	}
	finish(x, JUDGE_OK, NULL);
}

/* A verdict was paid for: kept in Redis until the commit stores it (a re-judged one replaces
 * what is kept; a first one is kept only if no other job kept one first). */
static void keep(struct jrun *x)
{
	struct judge *jg = x->jg;
	x->res.pending = true;
	x->res.replace = x->rejudge;
	x->res.verdict_text = x->verdict_text;
	x->res.paid_calls = x->res.calls;
	if (!jg->rq || jg->closing) {
		finish(x, JUDGE_OK, NULL);
		return;
	}
	char *k = paid_key(jg, x->res.key), *e = entry_dumps(x), ttl[24];
	snprintf(ttl, sizeof ttl, "%d", JUDGE_PENDING_MS);
	const char *argv[] = { "SET", k, e ? e : "", "PX", ttl, "NX" };
	int rc = e ? rq_cmdv(jg->rq, 0, on_kept, x, x->rejudge ? 5 : 6, argv, NULL) : -1;
	free(k);
	free(e);
	if (rc < 0)
		finish(x, JUDGE_OK, NULL);
}

/* The answer is no valid verdict: one repair attempt, then JUDGE_INVALID. */
static void invalid(struct jrun *x, const char *why, const char *raw)
{
	free(x->repair_text);
	free(x->repair_err);
	x->repair_text = xstrdup(raw ? raw : "");
	x->repair_err = xstrdup(why);
	if (!x->repaired) {
		x->repaired = true;
		x->jg->st.repairs++;
		send_request(x);
		return;
	}
	char msg[400];
	snprintf(msg, sizeof msg, "the judge's answer is not a valid verdict (after one repair "
	         "attempt): %s", why);
	finish(x, JUDGE_INVALID, msg);
}

static void on_retry_timer(uv_timer_t *t)
{
	struct jrun *x = t->data;
	if (x->jg->closing) {
		finish(x, JUDGE_UNAVAILABLE, "shutting down");
		return;
	}
	send_request(x);
}

static void on_http(const struct jhttp_resp *resp, void *data)
{
	struct jrun *x = data;
	struct judge *jg = x->jg;
	const struct rubric *r = x->r;
	char why[400];
	if (jg->closing) {
		finish(x, JUDGE_UNAVAILABLE, "shutting down");
		return;
	}
	long st = resp->status;
	if (resp->err || st == 408 || st == 429 || st >= 500) {
		if (resp->err)
			snprintf(why, sizeof why, "provider %s: %s", x->pv->name, resp->err);
		else
			snprintf(why, sizeof why, "provider %s answered HTTP %ld", x->pv->name, st);
		int64_t ra = st == 429 ? resp->retry_after_ms : -1;
		if (x->attempt < r->max_retries && ra <= RETRY_AFTER_CAP_MS) {
			release(x, 0, JLIM_RELEASE);
			x->attempt++;
			jg->st.retries++;
			uint64_t d;
			if (ra >= 0) {
				d = (uint64_t)ra;
			} else {
				uint64_t base = (uint64_t)jg->o.backoff_base_ms << (x->attempt - 1);
				d = base / 2 + rnd32(x) % (base / 2 + 1);   /* jitter in [base/2, base] */
			}
			if (!x->timer_on) {
				uv_timer_init(jg->loop, &x->timer);
				x->timer.data = x;
				x->timer_on = true;
			}
			uv_timer_start(&x->timer, on_retry_timer, d, 0);
			return;
		}
		provider_failed(x, why);
		return;
	}
	if (st < 200 || st > 299) {
		/* The status and at most a short code: the body may echo a key or the request. */
		char code[RUBRIC_MAX_ERROR_CODE + 1];
		rubric_error_code(resp->body, resp->len, code, sizeof code);
		snprintf(why, sizeof why, "provider %s answered HTTP %ld%s%s%s", x->pv->name, st,
		         *code ? " (" : "", code, *code ? ")" : "");
		provider_ok(x);   /* it answers: the request is wrong, not the provider down */
		release(x, 0, JLIM_ANSWERED);
		finish(x, JUDGE_CONFIG, why);
		return;
	}
	provider_ok(x);
	struct rubric_reply rep;
	char err[300];
	if (rubric_reply_parse(x->pv->api, resp->body, resp->len, &rep, err, sizeof err) < 0) {
		release(x, 0, JLIM_ANSWERED);
		invalid(x, err, resp->body);
		return;
	}
	release(x, rep.tokens_in + rep.tokens_out, JLIM_ANSWERED);
	x->res.tokens_in += rep.tokens_in;
	x->res.tokens_out += rep.tokens_out;
	/* Both counts are 0..RUBRIC_MAX_REPLY_TOKENS (rubric_reply_parse), prices 0..1e6. */
	double c = ((double)rep.tokens_in * x->pv->price_in +
	            (double)rep.tokens_out * x->pv->price_out) / 1e6;
	x->res.cost_usd += c;
	jg->st.tokens_in += (uint64_t)rep.tokens_in;
	jg->st.tokens_out += (uint64_t)rep.tokens_out;
	jg->st.cost_usd += c;
	struct rubric_verdict v;
	if (rubric_verdict_parse(r, rep.text, strlen(rep.text), &v, err, sizeof err) < 0) {
		invalid(x, err, rep.text);
		rubric_reply_clear(&rep);
		return;
	}
	rubric_reply_clear(&rep);
	rubric_verdict_clear(&x->res.v);
	x->res.v = v;
	free(x->verdict_text);
	x->verdict_text = rubric_verdict_dumps(r, &v);
	keep(x);
}

static void post(struct jrun *x);

static void wait_then_send(struct jrun *x, uint64_t ms)
{
	if (!x->timer_on) {
		uv_timer_init(x->jg->loop, &x->timer);
		x->timer.data = x;
		x->timer_on = true;
	}
	uv_timer_start(&x->timer, on_retry_timer, ms, 0);
}

static void on_admit(int decision, int64_t wait_ms, int fails, const char *err, void *data)
{
	struct jrun *x = data;
	struct judge *jg = x->jg;
	char why[400];
	if (jg->closing) {
		finish(x, JUDGE_UNAVAILABLE, "shutting down");
		return;
	}
	x->brk_fails = fails;
	switch (decision) {
	case JLIM_PROBE:
		x->probe = true;
		/* fallthrough */
	case JLIM_GO:
		x->admitted = true;
		x->full_waits = 0;
		post(x);
		return;
	case JLIM_OPEN:
		snprintf(why, sizeof why, "provider %s: circuit open after %d failed verdicts; next "
		         "probe in %lld ms", x->pv->name, fails, (long long)wait_ms);
		finish(x, JUDGE_UNAVAILABLE, why);
		return;
	case JLIM_TPM:
		/* Until the next minute, looking again every second (an operator may reset it). */
		wait_then_send(x, (uint64_t)(wait_ms > 0 && wait_ms < 1000 ? wait_ms : 1000) +
		               rnd32(x) % 250);
		return;
	case JLIM_FULL: {
		/* Slots free as answers come: poll again soon, backing off to 640 ms. */
		uint64_t d = 10u << (x->full_waits < 6 ? x->full_waits : 6);
		x->full_waits++;
		wait_then_send(x, d / 2 + rnd32(x) % (d / 2 + 1));
		return;
	}
	default:
		/* Redis did not answer: the per-process limits still hold; go on. */
		LOGD(NULL, NULL, "%s: sending without the shared limits", err ? err : "judge limits");
		post(x);
		return;
	}
}

/* Sends the next request of x, through the shared limits when there are some. */
static void send_request(struct jrun *x)
{
	struct judge *jg = x->jg;
	if (jg->lim && jlim_admit(jg->lim, x->pv->base_url, x->run_id, x->r->timeout_ms + 10000,
	                          on_admit, x) == 0)
		return;
	post(x);
}

static void post(struct jrun *x)
{
	const struct rubric *r = x->r;
	char *path = NULL, *body = NULL;
	rubric_request(r, x->pv->api, x->system, x->user, x->repaired ? x->repair_text : NULL,
	               x->repaired ? x->repair_err : NULL, &path, &body);
	struct strbuf url = { 0 };
	strbuf_addf(&url, "%s%s", x->pv->base_url, path);
	const char *hdrs[2];
	size_t nh = 0;
	if (x->key_header)
		hdrs[nh++] = x->key_header;
	if (x->pv->api == RUBRIC_ANTHROPIC)
		hdrs[nh++] = "anthropic-version: 2023-06-01";
	x->res.calls++;
	x->jg->st.requests++;
	int rc = jhttp_post(x->jg->http, url.buf, hdrs, nh, body, r->timeout_ms, on_http, x);
	strbuf_free(&url);
	free(path);
	free(body);
	if (rc < 0)
		finish(x, JUDGE_UNAVAILABLE, "the HTTP client refused the request (shutting down?)");
}

static void ask(struct jrun *x)
{
	struct judge *jg = x->jg;
	const struct rubric *r = x->r;
	char why[400];
	const struct jprov *pv = jprov_resolve(jg->o.providers, r, why, sizeof why);
	if (!pv) {
		finish(x, JUDGE_CONFIG, why);
		return;
	}
	x->pv = pv;
	x->br = jg->lim ? NULL : breaker_for(jg, pv->base_url);
	if (x->br && x->br->open) {
		uint64_t now = uv_now(jg->loop);
		if (now < x->br->until || x->br->probing) {
			snprintf(why, sizeof why, "provider %s: circuit open after %d failed verdicts; next "
			         "probe in %llu ms", pv->name, x->br->fails,
			         (unsigned long long)(x->br->until > now ? x->br->until - now : 0));
			finish(x, JUDGE_UNAVAILABLE, why);
			return;
		}
		x->br->probing = true;
		x->probe = true;
	}
	if (pv->api_key_env) {
		const char *k = getenv(pv->api_key_env);
		if (!k || !*k) {
			snprintf(why, sizeof why, "the environment variable %s (provider %s's api_key_env in "
			         "ARBITER_JUDGE_PROVIDERS) is not set in the worker", pv->api_key_env,
			         pv->name);
			finish(x, JUDGE_CONFIG, why);
			return;
		}
		struct strbuf h = { 0 };
		strbuf_addf(&h, "%s%s", rubric_key_header(pv->api), k);
		x->key_header = h.buf;
	}
	for (int i = 0; i < 8; i++) {
		unsigned char b[RUBRIC_NONCE_LEN / 2];
		char nonce[RUBRIC_NONCE_LEN + 1];
		if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
			finish(x, JUDGE_UNAVAILABLE, "getrandom failed");
			return;
		}
		for (size_t k = 0; k < sizeof b; k++)
			snprintf(nonce + 2 * k, 3, "%02x", b[k]);
		memcpy(&x->rnd, b, sizeof x->rnd);
		if (rubric_prompt(r, x->materials, nonce, &x->system, &x->user) == 0)
			break;
	}
	if (!x->system) {
		finish(x, JUDGE_CONFIG, "could not draw a delimiter absent from the submission");
		return;
	}
	/* The tighter of the spec's cap and the operator's. */
	double cap = r->max_cost_usd;
	if (pv->max_cost_usd > 0 && (cap <= 0 || pv->max_cost_usd < cap))
		cap = pv->max_cost_usd;
	if (cap > 0) {
		/* At most two billed answers (the repair); a token is at least ~3 bytes of prompt. */
		double in = (double)(strlen(x->system) + strlen(x->user)) / 3.0 + 1;
		double est = 2 * (in * pv->price_in + (double)r->max_output_tokens * pv->price_out) / 1e6;
		if (est > cap) {
			snprintf(why, sizeof why, "a verdict could cost up to %.4f USD, over the cap %.4f "
			         "(judge.max_cost_usd, or provider %s's max_cost_usd)", est, cap, pv->name);
			finish(x, JUDGE_CONFIG, why);
			return;
		}
	}
	send_request(x);
}

static void on_pending(struct rq *rq, redisReply *reply, const char *err, void *data)
{
	(void)rq;
	(void)err;
	struct jrun *x = data;
	if (x->jg->closing) {
		finish(x, JUDGE_UNAVAILABLE, "shutting down");
		return;
	}
	/* A verdict paid for and not committed yet (by a job that lost its lease, crashed, or
	 * judged the same content): reused. A re-judging job takes only one it paid for itself. */
	if (reply && reply->type == REDIS_REPLY_STRING &&
	    entry_take(x, reply->str, reply->len, x->rejudge) == 0) {
		x->res.calls = 0;   /* none now */
		x->res.replace = x->rejudge;
		finish(x, JUDGE_OK, NULL);
		return;
	}
	/* Not there, or Redis unreachable: ask (a lost lease may then pay twice). */
	ask(x);
}

/* Looks for a verdict paid for and not committed. Returns 0 (on_pending will run) or -1. */
static int pending_get(struct jrun *x)
{
	if (!x->jg->rq)
		return -1;
	char *k = paid_key(x->jg, x->res.key);
	const char *argv[] = { "GET", k };
	int rc = rq_cmdv(x->jg->rq, 0, on_pending, x, 2, argv, NULL);
	free(k);
	return rc;
}

/* The cache answered for x: row is its judge_verdicts row (NULL = none). */
static void looked_up(struct jrun *x, PGresult *res, int row)
{
	if (row >= 0) {
		const char *t = PQgetvalue(res, row, 1);
		char err[256];
		if (rubric_verdict_parse(x->r, t, strlen(t), &x->res.v, err, sizeof err) == 0) {
			x->res.cached = true;
			x->res.tokens_in = strtoll(PQgetvalue(res, row, 2), NULL, 10);
			x->res.tokens_out = strtoll(PQgetvalue(res, row, 3), NULL, 10);
			x->res.cost_usd = strtod(PQgetvalue(res, row, 4), NULL);
			x->res.calls = 0;   /* none now */
			finish(x, JUDGE_OK, NULL);
			return;
		}
		LOGW(NULL, NULL, "judge: stored verdict %.12s is unusable (%s): asking again", x->res.key,
		     err);
		x->rejudge = true;   /* replace it */
	}
	if (pending_get(x) < 0)
		ask(x);
}

static void lookup_flush(struct judge *jg);

static void on_lookup(const struct pgc_result *pr, void *data)
{
	struct lbatch *b = data;
	struct judge *jg = b->jg;
	char why[400];
	PGresult *res = pr->nres > 0 ? pr->res[0] : NULL;
	int rows = res && !pr->err ? PQntuples(res) : 0;
	jg->lookups--;
	jg->nruns++;   /* keeps jg alive while the callbacks below run */
	if (pr->err)
		snprintf(why, sizeof why, "verdict cache: %s", pr->err);
	for (int i = 0; i < b->n; i++) {
		struct jrun *x = b->runs[i];
		if (jg->closing) {
			finish(x, JUDGE_UNAVAILABLE, "shutting down");
		} else if (pr->err) {
			finish(x, JUDGE_UNAVAILABLE, why);
		} else {
			int row = -1;
			for (int k = 0; k < rows && row < 0; k++)
				if (!strcmp(PQgetvalue(res, k, 0), x->res.key))
					row = k;
			looked_up(x, res, row);
		}
	}
	free(b);
	if (!jg->closing)
		lookup_flush(jg);
	if (--jg->nruns == 0 && jg->closing) {
		jlim_free(jg->lim);
		free(jg->kbase);
		free(jg);
	}
}

static void start_later(struct jrun *x);

/* Sends the queued lookups, LOOKUP_BATCH keys per statement, while fewer than LOOKUPS_INFLIGHT
 * statements are out: keys that arrive meanwhile wait and go together in the next one. */
static void lookup_flush(struct judge *jg)
{
	while (jg->lq_n > 0 && jg->lookups < LOOKUPS_INFLIGHT) {
		int n = jg->lq_n < LOOKUP_BATCH ? jg->lq_n : LOOKUP_BATCH;
		struct lbatch *b = xcalloc(1, sizeof *b + (size_t)n * sizeof b->runs[0]);
		struct strbuf keys = { 0 };
		b->jg = jg;
		b->n = n;
		strbuf_addlit(&keys, "{");
		for (int i = 0; i < n; i++) {
			struct jrun *x = jg->lq_head;
			jg->lq_head = x->lq_next;
			x->lq_next = NULL;
			b->runs[i] = x;
			if (i)
				strbuf_addlit(&keys, ",");
			strbuf_addf(&keys, "\"%s\"", x->res.key);   /* hex (or empty): no escapes */
		}
		if (!jg->lq_head)
			jg->lq_tail = NULL;
		jg->lq_n -= n;
		strbuf_addlit(&keys, "}");
		const char *params[] = { keys.buf };
		struct pgc_stmt st = { SQL_LOOKUP, 1, params };
		int rc = pgc_run(jg->pg, &st, 1, on_lookup, b);
		strbuf_free(&keys);
		if (rc == 0) {
			jg->lookups++;
			continue;
		}
		/* The pool refused (closing): no cache; never call back inside judge_run. */
		for (int i = 0; i < n; i++)
			if (pending_get(b->runs[i]) < 0)
				start_later(b->runs[i]);
		free(b);
	}
}

static void on_start_timer(uv_timer_t *t)
{
	struct jrun *x = t->data;
	if (x->jg->closing) {
		finish(x, JUDGE_UNAVAILABLE, "shutting down");
		return;
	}
	ask(x);
}

int judge_new(uv_loop_t *loop, const struct judge_opts *o, struct judge **out)
{
	struct judge *jg = xcalloc(1, sizeof *jg);
	jg->loop = loop;
	if (o)
		jg->o = *o;
	jg->pg = jg->o.pg;
	jg->rq = jg->o.kbase ? jg->o.rq : NULL;
	jg->kbase = jg->rq ? xstrdup(jg->o.kbase) : NULL;
	jg->o.kbase = NULL;
	if (jg->rq) {
		struct jlim_opts lo = { jg->rq, jg->kbase, jg->o.shared_inflight, jg->o.tpm,
		                        jg->o.breaker_failures, jg->o.breaker_cooldown_ms };
		if (lo.breaker_failures <= 0)
			lo.breaker_failures = 5;
		if (lo.breaker_cooldown_ms <= 0)
			lo.breaker_cooldown_ms = 30000;
		jlim_new(&lo, &jg->lim);
	}
	if (jg->o.max_inflight <= 0)
		jg->o.max_inflight = 512;
	if (jg->o.breaker_failures <= 0)
		jg->o.breaker_failures = 5;
	if (jg->o.breaker_cooldown_ms <= 0)
		jg->o.breaker_cooldown_ms = 30000;
	if (jg->o.backoff_base_ms <= 0)
		jg->o.backoff_base_ms = 500;
	if (jhttp_new(loop, jg->o.max_inflight, &jg->http) < 0) {
		jlim_free(jg->lim);
		free(jg->kbase);
		free(jg);
		*out = NULL;
		return -1;
	}
	jhttp_set_ca_file(jg->http, jg->o.ca_file);
	jg->o.ca_file = NULL;
	*out = jg;
	return 0;
}

int judge_run(struct judge *jg, const struct rubric *r, const json_t *answer,
              const json_t *tests, const char *job_id, bool rejudge, judge_cb *cb, void *data)
{
	if (!jg || jg->closing || !r || !cb)
		return -1;
	struct jrun *x = xcalloc(1, sizeof *x);
	x->jg = jg;
	x->r = r;
	x->cb = cb;
	x->data = data;
	x->rejudge = rejudge;
	x->job_id = job_id ? xstrdup(job_id) : NULL;
	unsigned char rb[16];
	if (getrandom(rb, sizeof rb, 0) != (ssize_t)sizeof rb)
		memcpy(rb, &x, sizeof x < sizeof rb ? sizeof x : sizeof rb);
	for (size_t i = 0; i < sizeof rb; i++)
		snprintf(x->run_id + 2 * i, 3, "%02x", rb[i]);
	x->materials = rubric_materials(r, answer, tests);
	judge_key(r, answer, tests, x->res.key);
	x->next = jg->runs;
	if (jg->runs)
		jg->runs->prev = x;
	jg->runs = x;
	jg->nruns++;
	if (jg->pg && !rejudge) {
		if (jg->lq_tail)
			jg->lq_tail->lq_next = x;
		else
			jg->lq_head = x;
		jg->lq_tail = x;
		jg->lq_n++;
		lookup_flush(jg);
		return 0;
	}
	if (pending_get(x) == 0)
		return 0;
	start_later(x);
	return 0;
}

/* No cache (or it refused): ask on the next loop turn, never inside judge_run. */
static void start_later(struct jrun *x)
{
	uv_timer_init(x->jg->loop, &x->timer);
	x->timer.data = x;
	x->timer_on = true;
	uv_timer_start(&x->timer, on_start_timer, 0, 0);
}

int judge_budget_parse(const char *s, double *usd, int *period_s)
{
	*usd = 0;
	*period_s = 0;
	if (!s || !*s)
		return 0;
	char *end;
	double v = strtod(s, &end);
	if (end == s || !(v > 0) || v > 1e9 || *end != '/')
		return -1;
	if (!strcmp(end + 1, "hour"))
		*period_s = 3600;
	else if (!strcmp(end + 1, "day"))
		*period_s = 86400;
	else
		return -1;
	*usd = v;
	return 0;
}

int judge_inflight(const struct judge *jg)
{
	return jg ? jg->nruns : 0;
}

void judge_stats(const struct judge *jg, struct judge_stats *out)
{
	if (jg) {
		*out = jg->st;
		if (jg->lim)
			out->breakers_open = jlim_open_circuits(jg->lim);
	} else
		memset(out, 0, sizeof *out);
}

void judge_close(struct judge *jg)
{
	if (!jg || jg->closing)
		return;
	jg->closing = true;
	jg->nruns++;   /* keeps jg alive while callbacks run below */
	/* Runs waiting on a timer end now; those in an HTTP transfer end from jhttp_close; those
	 * waiting on PostgreSQL end when the pool answers or closes. */
	while (jg->lq_head) {
		struct jrun *q = jg->lq_head;
		jg->lq_head = q->lq_next;
		jg->lq_n--;
		finish(q, JUDGE_UNAVAILABLE, "shutting down");
	}
	jg->lq_tail = NULL;
	struct jrun *x = jg->runs;
	while (x) {
		struct jrun *n = x->next;
		if (x->timer_on && uv_is_active((uv_handle_t *)&x->timer))
			finish(x, JUDGE_UNAVAILABLE, "shutting down");
		x = n;
	}
	jhttp_close(jg->http);
	jg->http = NULL;
	if (--jg->nruns == 0) {
		jlim_free(jg->lim);
		free(jg->kbase);
		free(jg);
	}
}

char *judge_row(const struct rubric *r, const struct judge_result *res)
{
	if (!res->pending || !res->verdict_text)
		return NULL;
	json_t *v = json_loads(res->verdict_text, 0, NULL);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:f, s:i, s:b}", "key", res->key,
	                      "provider", r->provider, "model", r->model,
	                      "pv", RUBRIC_PROMPT_VERSION, "verdict", v ? v : json_null(),
	                      "ti", (json_int_t)res->tokens_in, "tout", (json_int_t)res->tokens_out,
	                      "cost", res->cost_usd, "calls", res->paid_calls > 0 ? res->paid_calls : 1,
	                      "replace", res->replace);
	char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return t;
}

void judge_committed(struct judge *jg, const char *key)
{
	if (!jg || jg->closing || !jg->rq || !key || !*key)
		return;
	char *k = paid_key(jg, key), ttl[24];
	snprintf(ttl, sizeof ttl, "%d", JUDGE_GRACE_MS);
	const char *argv[] = { "PEXPIRE", k, ttl };
	rq_cmdv(jg->rq, 0, rq_reply_logged, (void *)"judge: PEXPIRE of a committed verdict", 3, argv,
	        NULL);
	free(k);
}

int judge_providers_load(const char *setting, struct jprovs **out, char *err, size_t errlen)
{
	const char *v = setting ? setting : "";
	while (*v == ' ' || *v == '\t' || *v == '\n')
		v++;
	if (!*v || *v == '{') {
		if (jprov_parse(v, strlen(v), out, err, errlen) < 0)
			return -1;
		return 0;
	}
	FILE *f = fopen(v, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", v, strerror(errno));
		return -1;
	}
	struct strbuf sb = { 0 };
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0 && sb.len < (1u << 20))
		strbuf_add(&sb, buf, n);
	bool bad = ferror(f) || sb.len >= (1u << 20);
	fclose(f);
	if (bad) {
		snprintf(err, errlen, "%s: %s", v, sb.len >= (1u << 20) ? "larger than 1 MiB"
		                                                        : "read error");
		strbuf_free(&sb);
		return -1;
	}
	char why[400];
	int rc = jprov_parse(sb.buf ? sb.buf : "", sb.len, out, why, sizeof why);
	if (rc < 0)
		snprintf(err, errlen, "%s: %s", v, why);
	strbuf_free(&sb);
	return rc;
}
