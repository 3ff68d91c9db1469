/*
 * job: parsing and checking a stream entry (worker/README.md "Jobs") and the pure
 * helpers the worker uses around a job (see job.h). No I/O here.
 */
#include "job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jload.h"

static bool hexc(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool job_uuid_ok(const char *s, char out[37])
{
	if (!s || strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!hexc(s[i])) {
			return false;
		}
	}
	if (out) {
		for (int i = 0; i < 36; i++)
			out[i] = (char)((s[i] >= 'A' && s[i] <= 'F') ? s[i] - 'A' + 'a' : s[i]);
		out[36] = '\0';
	}
	return true;
}

/* Index of the first field called exactly `name` (a name holding a NUL byte,
 * "submission_id\0x", is another name), or -1. */
static int field_index(const struct job *j, const char *name)
{
	size_t n = strlen(name);
	for (int i = 0; i < j->nf; i++)
		if (j->flens[2 * i] == n && !memcmp(j->fields[2 * i], name, n))
			return i;
	return -1;
}

const char *job_field(const struct job *j, const char *name)
{
	int i = field_index(j, name);
	return i < 0 ? NULL : j->fields[2 * i + 1];
}

/* True when field i's value is exactly the text s (no NUL byte or tail). */
static bool value_is(const struct job *j, int i, const char *s)
{
	size_t n = strlen(s);
	return j->flens[2 * i + 1] == n && !memcmp(j->fields[2 * i + 1], s, n);
}

static bool parse_i64(const char *s, int64_t *out)
{
	int64_t v = 0;
	if (!s || !*s)
		return false;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (*p - '0');
	}
	*out = v;
	return true;
}

struct job *job_new(const char *id, const char *const *fields, const size_t *lens, int nf,
                    int deliveries)
{
	struct job *j = xcalloc(1, sizeof *j);
	const char *v;

	snprintf(j->id, sizeof j->id, "%s", id);
	j->nf = nf > 0 ? nf : 0;
	j->fields = xcalloc((size_t)(2 * j->nf + 1), sizeof *j->fields);
	j->flens = xcalloc((size_t)(2 * j->nf + 1), sizeof *j->flens);
	for (int i = 0; i < 2 * j->nf; i++) {
		size_t l = lens ? lens[i] : strlen(fields[i]);
		j->fields[i] = xmalloc(l + 1);
		memcpy(j->fields[i], fields[i], l);
		j->fields[i][l] = '\0';
		j->flens[i] = l;
	}
	j->state = JOB_NEW;
	j->attempts = deliveries > 0 ? deliveries : 1;
	j->kind = JOB_EVALUATE;
	j->elo = JOB_ELO_KEEP;

	if (j->nf > JOB_MAX_FIELDS) {
		j->poison = POISON_TOO_MANY_FIELDS;
		return j;
	}
	/* A field given twice (XADD allows it): the first one counts, here and in
	 * the rate limiter's copy of the entry. */
	int fi = field_index(j, "submission_id");
	if (fi < 0) {
		j->poison = POISON_MISSING_SUBMISSION_ID;
		return j;
	}
	v = j->fields[2 * fi + 1];
	if (j->flens[2 * fi + 1] != 36 || !job_uuid_ok(v, j->sub)) {
		j->sub[0] = '\0';
		j->poison = POISON_INVALID_SUBMISSION_ID;
		return j;
	}
	fi = field_index(j, "kind");
	if (fi >= 0) {
		if (value_is(j, fi, "evaluate"))
			j->kind = JOB_EVALUATE;
		else if (value_is(j, fi, "reevaluate"))
			j->kind = JOB_REEVALUATE;
		else {
			j->poison = POISON_INVALID_KIND;
			return j;
		}
	}
	fi = field_index(j, "elo");
	if (fi >= 0) {
		if (value_is(j, fi, "keep"))
			j->elo = JOB_ELO_KEEP;
		else if (value_is(j, fi, "adjust"))
			j->elo = JOB_ELO_ADJUST;
		else {
			j->poison = POISON_INVALID_ELO;
			return j;
		}
	}
	/* attempt: set by a worker when the job waits for its retry in the delayed set (README
	 * "Failures, retries, dead letters"); the count goes on from there, and the job passed
	 * the rate limit before its first attempt. */
	fi = field_index(j, "attempt");
	if (fi >= 0) {
		int64_t a;
		if (strlen(j->fields[2 * fi + 1]) != j->flens[2 * fi + 1] ||
		    !parse_i64(j->fields[2 * fi + 1], &a) || a < 1 || a > JOB_MAX_ATTEMPT) {
			j->poison = POISON_INVALID_ATTEMPT;
			return j;
		}
		if (a > j->attempts)
			j->attempts = (int)a;
		if (a > 1)
			j->rl_done = true;
	}
	/* image_wait_since: set by a worker when a container job waits in the delayed set for its
	 * image (worker/README.md "Container evaluator"); the wait's deadline counts from it, and
	 * the job passed the rate limit before it first waited. Not the API server's to set: a
	 * value that is not a plain positive integer is ignored (the wait starts afresh). */
	fi = field_index(j, "image_wait_since");
	if (fi >= 0) {
		int64_t t;
		if (strlen(j->fields[2 * fi + 1]) == j->flens[2 * fi + 1] &&
		    parse_i64(j->fields[2 * fi + 1], &t) && t > 0) {
			j->image_since_ms = t;
			j->rl_done = true;
		}
	}
	fi = field_index(j, "source_ip");
	if (fi >= 0 && j->flens[2 * fi + 1] > 0)
		/* A value with a NUL byte inside is no address: limited as `invalid`. */
		j->source_ip = strlen(j->fields[2 * fi + 1]) == j->flens[2 * fi + 1]
		               ? j->fields[2 * fi + 1] : "(invalid)";
	fi = field_index(j, "enqueued_at");
	j->has_enqueued_at = fi >= 0 && strlen(j->fields[2 * fi + 1]) == j->flens[2 * fi + 1] &&
	                     parse_i64(j->fields[2 * fi + 1], &j->enqueued_at_ms);
	if (!j->has_enqueued_at)
		j->enqueued_at_ms = 0;
	return j;
}

void job_clear_result(struct job *j)
{
	if (j->has_res)
		score_result_clear(&j->res);
	j->has_res = false;
	free(j->res_json);
	j->res_json = NULL;
	json_decref(j->extra);
	j->extra = NULL;
	free(j->judge_row);
	j->judge_row = NULL;
	j->judge_key[0] = 0;
}

void job_clear_row(struct job *j)
{
	free(j->row.source_ip);
	json_decref(j->row.answer);
	json_decref(j->row.metadata);
	memset(&j->row, 0, sizeof j->row);
}

void job_free(struct job *j)
{
	if (!j)
		return;
	for (int i = 0; i < 2 * j->nf; i++)
		free(j->fields[i]);
	free(j->fields);
	free(j->flens);
	job_clear_row(j);
	job_clear_result(j);
	free(j->last_error);
	free(j);
}

void job_set_error(struct job *j, const char *msg)
{
	char *copy = utf8_valid_dup(msg, JOB_ERROR_MAX);   /* before the free: msg may be it */
	free(j->last_error);
	j->last_error = copy;
}

static bool dead_field(const char *name)
{
	/* (attempt, image_wait_since: a replayed dead letter starts counting and waiting again.) */
	return !strcmp(name, "reason") || !strcmp(name, "original_id") ||
	       !strcmp(name, "worker_id") || !strcmp(name, "failed_at") || !strcmp(name, "attempt") ||
	       !strcmp(name, "image_wait_since");
}

int job_xadd_argv(const struct job *j, const char *stream, bool dead, const char *reason,
                  const char *worker_id, int64_t now_ms, struct job_argv_bufs *bufs,
                  const char ***argv, size_t **lens)
{
	int max = 3 + 2 * j->nf + 8, n = 0;
	const char **a = xcalloc((size_t)max, sizeof *a);
	size_t *l = xcalloc((size_t)max, sizeof *l);

#define PUSH(s, len) do { a[n] = (s); l[n] = (len); n++; } while (0)
	PUSH("XADD", 4);
	PUSH(stream, strlen(stream));
	PUSH("*", 1);
	for (int i = 0; i < j->nf && i < JOB_MAX_FIELDS; i++) {
		if (dead && dead_field(j->fields[2 * i]))
			continue;
		PUSH(j->fields[2 * i], j->flens[2 * i]);
		PUSH(j->fields[2 * i + 1], j->flens[2 * i + 1]);
	}
	if (dead) {
		snprintf(bufs->failed_at, sizeof bufs->failed_at, "%lld", (long long)now_ms);
		PUSH("reason", 6);
		PUSH(reason ? reason : "unknown", strlen(reason ? reason : "unknown"));
		PUSH("original_id", 11);
		PUSH(j->id, strlen(j->id));
		PUSH("worker_id", 9);
		PUSH(worker_id, strlen(worker_id));
		PUSH("failed_at", 9);
		PUSH(bufs->failed_at, strlen(bufs->failed_at));
	}
	if (n == 3) {
		/* An entry always has a field; keep XADD valid regardless. */
		PUSH("original_id", 11);
		PUSH(j->id, strlen(j->id));
	}
#undef PUSH
	*argv = a;
	*lens = l;
	return n;
}

void job_json_str(struct strbuf *sb, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)p);
	strbuf_addlit(sb, "\"");
	for (size_t i = 0; i < n;) {
		unsigned char c = p[i];
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			strbuf_add(sb, e, 2);
			i++;
		} else if (c < 0x20) {
			char e[8];
			if (c == '\n')
				strbuf_addlit(sb, "\\n");
			else if (c == '\t')
				strbuf_addlit(sb, "\\t");
			else if (c == '\r')
				strbuf_addlit(sb, "\\r");
			else {
				snprintf(e, sizeof e, "\\u%04x", c);
				strbuf_add(sb, e, 6);
			}
			i++;
		} else if (c < 0x80) {
			strbuf_add(sb, (const char *)p + i, 1);
			i++;
		} else {
			size_t l = utf8_seq_len((const char *)p + i, n - i);
			if (l) {
				strbuf_add(sb, (const char *)p + i, l);
				i += l;
			} else {
				strbuf_addlit(sb, "\xef\xbf\xbd");
				i++;
			}
		}
	}
	strbuf_addlit(sb, "\"");
}

uint32_t job_backoff_ms(int n, uint32_t base_ms, uint32_t cap_ms, uint32_t rnd)
{
	uint64_t d = base_ms;
	for (int i = 1; i < n && d < cap_ms; i++)
		d *= 2;
	if (d > cap_ms)
		d = cap_ms;
	uint64_t half = d / 2;
	return (uint32_t)(half + (half ? rnd % (d - half + 1) : 0));
}

int64_t job_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Parses JSON text from PostgreSQL. jsonb keeps numbers exactly, so valid
 * JSON may hold integers beyond 64 bits (18446744073709551616, or 1e30 which
 * PostgreSQL prints with all its digits) that jansson refuses: those documents
 * are read again with every integer as a double, so that they can be scored
 * (a value beyond a double's range still fails). The fast reader (jload) goes
 * first: it gives what jansson would, or leaves the text to jansson. */
json_t *job_json_load(const char *text, size_t len, json_error_t *jerr)
{
	json_t *v = jload(text, len);
	if (v)
		return v;
	v = json_loadb(text, len, JSON_DECODE_ANY, jerr);
	/* jansson says "too big integer" or "too big negative integer". */
	if (!v && strstr(jerr->text, "too big") && strstr(jerr->text, "integer")) {
		json_error_t e2;
		v = json_loadb(text, len, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &e2);
		if (!v)
			*jerr = e2;
	}
	return v;
}

/* ---- states ---------------------------------------------------------------------------- */

#define S(x) (1u << (x))

/* allowed[from]: the states a job may move to from `from`. */
static const unsigned allowed[JOB_NSTATES] = {
	[JOB_NEW] = S(JOB_LOAD_WAIT) | S(JOB_ACK_WAIT) | S(JOB_COMMIT_WAIT),
	[JOB_LOAD_WAIT] = S(JOB_LOADING) | S(JOB_ACK_WAIT),
	[JOB_LOADING] = S(JOB_LOAD_WAIT) | S(JOB_RATELIMIT) | S(JOB_MARKING) |
	                S(JOB_EVALUATING) | S(JOB_COMMIT_WAIT) | S(JOB_BACKOFF) |
	                S(JOB_ACK_WAIT) | S(JOB_ABANDONED),
	[JOB_RATELIMIT] = S(JOB_MARKING) | S(JOB_EVALUATING) | S(JOB_COMMIT_WAIT) |
	                  S(JOB_BACKOFF) | S(JOB_ACK_WAIT) | S(JOB_ABANDONED),
	[JOB_MARKING] = S(JOB_EVALUATING) | S(JOB_COMMIT_WAIT) | S(JOB_BACKOFF) |
	                S(JOB_ACK_WAIT) | S(JOB_ABANDONED),
	/* (EVALUATING → EVALUATING: a sandbox result scored on the thread pool.) */
	[JOB_EVALUATING] = S(JOB_EVALUATING) | S(JOB_COMMIT_WAIT) | S(JOB_BACKOFF) |
	                   S(JOB_ACK_WAIT) | S(JOB_ABANDONED),
	[JOB_COMMIT_WAIT] = S(JOB_COMMIT_CONN) | S(JOB_ACK_WAIT),
	/* (A batch that gets no connection fails like a sent one, minus the unknown outcome.) */
	[JOB_COMMIT_CONN] = S(JOB_COMMITTING) | S(JOB_ABANDONED) | S(JOB_COMMIT_WAIT) |
	                    S(JOB_BACKOFF) | S(JOB_ACK_WAIT),
	[JOB_COMMITTING] = S(JOB_ACK_WAIT) | S(JOB_COMMIT_WAIT) | S(JOB_BACKOFF),
	/* (BACKOFF → BACKOFF: a restarted step that fails again at once.) */
	[JOB_BACKOFF] = S(JOB_LOAD_WAIT) | S(JOB_RATELIMIT) | S(JOB_MARKING) |
	                S(JOB_EVALUATING) | S(JOB_COMMIT_WAIT) | S(JOB_BACKOFF) | S(JOB_ACK_WAIT),
	[JOB_ACK_WAIT] = S(JOB_ACKING),
	[JOB_ACKING] = S(JOB_BACKOFF),
	[JOB_ABANDONED] = 0,
};

static unsigned long bad_transitions;

void job_set_state(struct job *j, enum job_state to)
{
	bool ok = (unsigned)j->state < JOB_NSTATES && (unsigned)to < JOB_NSTATES &&
	          (allowed[j->state] & S(to));
	if (!ok) {
		bad_transitions++;
#ifndef NDEBUG
		fprintf(stderr, "job %s: transition %s -> %s is not in the table\n", j->id,
		        job_state_name(j->state), job_state_name(to));
		abort();
#endif
	}
	j->state = to;
}

unsigned long job_bad_transitions(void)
{
	return bad_transitions;
}

const char *job_state_name(enum job_state s)
{
	static const char *const names[JOB_NSTATES] = {
		[JOB_NEW] = "new", [JOB_LOAD_WAIT] = "load_wait", [JOB_LOADING] = "loading",
		[JOB_MARKING] = "marking", [JOB_RATELIMIT] = "ratelimit",
		[JOB_EVALUATING] = "evaluating", [JOB_COMMIT_WAIT] = "commit_wait",
		[JOB_COMMIT_CONN] = "commit_conn", [JOB_COMMITTING] = "committing",
		[JOB_BACKOFF] = "backoff", [JOB_ACK_WAIT] = "ack_wait", [JOB_ACKING] = "acking",
		[JOB_ABANDONED] = "abandoned",
	};
	return (unsigned)s < JOB_NSTATES ? names[s] : "invalid";
}

/* ---- names at the edges ---------------------------------------------------------------- */

const char *job_outcome_name(enum job_outcome o)
{
	static const char *const names[] = {
		[OUTCOME_NONE] = NULL, [OUTCOME_COMPLETED] = "completed",
		[OUTCOME_REJECTED] = "rejected", [OUTCOME_FAILED] = "failed",
		[OUTCOME_DEAD_LETTERED] = "dead_lettered", [OUTCOME_DEFERRED] = "deferred",
		[OUTCOME_DUPLICATE] = "duplicate",
	};
	return (unsigned)o < sizeof names / sizeof names[0] ? names[o] : NULL;
}

const char *job_poison_name(enum job_poison p)
{
	static const char *const names[] = {
		[POISON_NONE] = NULL, [POISON_TOO_MANY_FIELDS] = "too_many_fields",
		[POISON_MISSING_SUBMISSION_ID] = "missing_submission_id",
		[POISON_INVALID_SUBMISSION_ID] = "invalid_submission_id",
		[POISON_INVALID_KIND] = "invalid_kind", [POISON_INVALID_ELO] = "invalid_elo",
		[POISON_INVALID_ATTEMPT] = "invalid_attempt", [POISON_DELETED_ENTRY] = "deleted_entry",
	};
	return (unsigned)p < sizeof names / sizeof names[0] ? names[p] : NULL;
}

const char *job_reason_name(enum job_reason r)
{
	static const char *const names[] = {
		[REASON_NONE] = NULL, [REASON_SUBMISSION_NOT_FOUND] = "submission_not_found",
		[REASON_NOT_MATCH_OWNER] = "not_match_owner", [REASON_MATCH_EXPIRED] = "match_expired",
		[REASON_MATCH_NOT_ACTIVE] = "match_not_active", [REASON_INVALID_SPEC] = "invalid_spec",
		[REASON_RATE_LIMITED] = "rate_limited",
		[REASON_REEVALUATE_WITHOUT_RESULT] = "reevaluate_without_result",
	};
	return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : NULL;
}

static const char *const status_names[] = {
	[ST_UNKNOWN] = "unknown", [ST_QUEUED] = "queued", [ST_EVALUATING] = "evaluating",
	[ST_ACTIVE] = "active", [ST_COMPLETED] = "completed", [ST_REJECTED] = "rejected",
	[ST_FAILED] = "failed", [ST_EXPIRED] = "expired",
};

enum row_status job_status_parse(const char *s)
{
	for (size_t i = 1; s && i < sizeof status_names / sizeof status_names[0]; i++)
		if (!strcmp(s, status_names[i]))
			return (enum row_status)i;
	return ST_UNKNOWN;
}

const char *job_status_name(enum row_status s)
{
	return (unsigned)s < sizeof status_names / sizeof status_names[0] ? status_names[s]
	                                                                   : "unknown";
}

bool job_status_final(enum row_status s)
{
	return s == ST_COMPLETED || s == ST_REJECTED || s == ST_FAILED;
}
