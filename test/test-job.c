/*
 * Tests for worker/job: entry parsing and poison detection (worker/README.md "Jobs"),
 * UUID checks, dead-letter / release argument vectors, JSON string escaping,
 * backoff bounds and time formatting.
 */
#undef NDEBUG
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job.h"
#include "tap.h"

#define SUB "3f2504e0-4f89-11d3-9a0c-0305e82c3301"

static struct job *mk(int nf, const char *const *f)
{
	return job_new("1700000000000-0", f, NULL, nf, 1);
}

/* The transition table: the pipeline's paths are allowed, others are refused
 * (abort without NDEBUG, counted in release builds; checked in a child). */
static void transitions(void)
{
	static const enum job_state path[] = {
		JOB_LOAD_WAIT, JOB_LOADING, JOB_RATELIMIT, JOB_MARKING, JOB_EVALUATING,
		JOB_EVALUATING, JOB_COMMIT_WAIT, JOB_COMMIT_CONN, JOB_COMMITTING, JOB_ACK_WAIT,
		JOB_ACKING, JOB_BACKOFF, JOB_ACK_WAIT,
	};
	const char *f[] = { "submission_id", SUB };
	struct job *j = mk(1, f);
	unsigned long before = job_bad_transitions();
	is_str(job_state_name(j->state), "new", "a new job is JOB_NEW");
	for (size_t i = 0; i < sizeof path / sizeof path[0]; i++)
		job_set_state(j, path[i]);
	ok(j->state == JOB_ACK_WAIT, "the whole pipeline path is allowed");
	is_int(job_bad_transitions(), (long)before, "and counts nothing");
	is_str(job_state_name(JOB_COMMIT_CONN), "commit_conn", "state names");
	is_str(job_state_name((enum job_state)99), "invalid", "unknown state named invalid");

	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		job_set_state(j, JOB_COMMITTING);      /* ACK_WAIT -> COMMITTING: not allowed */
		_exit(job_bad_transitions() == before + 1 && j->state == JOB_COMMITTING ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	ok((WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT) || (WIFEXITED(st) && WEXITSTATUS(st) == 0),
	   "a transition outside the table aborts (debug) or is counted (release)");
	job_free(j);
}

/* Names at the edges, and the status column parsed once. */
static void names(void)
{
	is_str(job_outcome_name(OUTCOME_DEAD_LETTERED), "dead_lettered", "outcome name");
	ok(job_outcome_name(OUTCOME_NONE) == NULL, "no outcome: no name");
	is_str(job_reason_name(REASON_MATCH_NOT_ACTIVE), "match_not_active", "reason name");
	is_str(job_reason_name(REASON_REEVALUATE_WITHOUT_RESULT), "reevaluate_without_result",
	       "dead-letter reason name");
	ok(job_reason_name(REASON_NONE) == NULL, "no reason: no name");
	is_str(job_poison_name(POISON_DELETED_ENTRY), "deleted_entry", "poison name");
	/* Integers beyond 64 bits are read as doubles, either sign (the answer keeps its value). */
	static const char *const big[] = { "{\"x\": 18446744073709551616}",
	                                   "{\"x\": -99999999999999999999999}" };
	for (size_t i = 0; i < 2; i++) {
		json_error_t jerr;
		json_t *v = job_json_load(big[i], strlen(big[i]), &jerr);
		json_t *x = v ? json_object_get(v, "x") : NULL;
		ok(x && json_is_real(x) && (i == 0 ? json_real_value(x) > 1.8e19
		                                   : json_real_value(x) < -9.9e22),
		   "integer beyond 64 bits read as a double: %s", big[i]);
		json_decref(v);
	}
	ok(job_poison_name(POISON_NONE) == NULL, "valid entry: no poison name");
	ok(job_status_parse("completed") == ST_COMPLETED, "status parsed");
	ok(job_status_parse("active") == ST_ACTIVE, "match status parsed");
	ok(job_status_parse("Completed") == ST_UNKNOWN, "status is case-sensitive");
	ok(job_status_parse(NULL) == ST_UNKNOWN, "NULL status unknown");
	is_str(job_status_name(ST_EVALUATING), "evaluating", "status name");
	ok(job_status_final(ST_FAILED) && job_status_final(ST_REJECTED) &&
	   job_status_final(ST_COMPLETED), "final statuses");
	ok(!job_status_final(ST_QUEUED) && !job_status_final(ST_EVALUATING) &&
	   !job_status_final(ST_UNKNOWN), "unfinished statuses");
}

int main(void)
{
	transitions();
	names();
	char out[37];

	ok(job_uuid_ok(SUB, out), "canonical uuid");
	is_str(out, SUB, "lower-case copy");
	ok(job_uuid_ok("3F2504E0-4F89-11D3-9A0C-0305E82C3301", out), "upper-case uuid");
	is_str(out, SUB, "normalised to lower case");
	ok(!job_uuid_ok("3f2504e04f8911d39a0c0305e82c3301", NULL), "no hyphens refused");
	ok(!job_uuid_ok("{3f2504e0-4f89-11d3-9a0c-0305e82c3301}", NULL), "braces refused");
	ok(!job_uuid_ok("3f2504e0-4f89-11d3-9a0c-0305e82c330g", NULL), "non-hex refused");
	ok(!job_uuid_ok("", NULL), "empty refused");
	ok(!job_uuid_ok(NULL, NULL), "NULL refused");

	{
		const char *f[] = { "submission_id", SUB, "source_ip", "10.0.0.1",
		                    "enqueued_at", "1700000000123", "extra", "ignored" };
		struct job *j = mk(4, f);
		ok(!j->poison, "valid entry");
		is_str(j->sub, SUB, "submission id");
		ok(j->kind == JOB_EVALUATE, "kind defaults to evaluate");
		ok(j->elo == JOB_ELO_KEEP, "elo defaults to keep");
		is_str(j->source_ip, "10.0.0.1", "source ip");
		is_int(j->enqueued_at_ms, 1700000000123LL, "enqueued_at");
		is_int(j->attempts, 1, "attempt 1");
		is_str(job_field(j, "extra"), "ignored", "other fields kept");

		const char **argv;
		size_t *lens;
		struct job_argv_bufs b;
		int n = job_xadd_argv(j, "arbiter:dead", true, "invalid_spec", "w1", 42, &b, &argv, &lens);
		is_int(n, 3 + 8 + 8, "dead-letter argc");
		is_str(argv[0], "XADD", "XADD");
		is_str(argv[1], "arbiter:dead", "stream");
		is_str(argv[11], "reason", "reason field");
		is_str(argv[12], "invalid_spec", "reason value");
		is_str(argv[14], "1700000000000-0", "original id");
		is_str(argv[16], "w1", "worker id");
		is_str(argv[18], "42", "failed_at");
		free(argv);
		free(lens);
		n = job_xadd_argv(j, "arbiter:jobs", false, NULL, "w1", 42, &b, &argv, &lens);
		is_int(n, 3 + 8, "release argc: fields verbatim");
		is_str(argv[3], "submission_id", "first field");
		free(argv);
		free(lens);
		job_free(j);
	}
	{
		const char *f[] = { "submission_id", SUB, "kind", "reevaluate", "elo", "adjust",
		                    "enqueued_at", "soon" };
		struct job *j = mk(4, f);
		ok(!j->poison, "reevaluate entry valid");
		ok(j->kind == JOB_REEVALUATE && j->elo == JOB_ELO_ADJUST, "reevaluate adjust");
		is_int(j->enqueued_at_ms, 0, "bad enqueued_at ignored");
		ok(j->source_ip == NULL, "no source ip");
		job_free(j);
	}
	{
		const char *f[] = { "kind", "evaluate" };
		struct job *j = mk(1, f);
		is_str(job_poison_name(j->poison), "missing_submission_id", "missing id is poison");
		job_free(j);
	}
	{
		/* Absurd field counts are refused at intake (#16); the dead-letter
		 * copy keeps only the first JOB_MAX_FIELDS fields. */
		static const char *f[2 * (JOB_MAX_FIELDS + 1)];
		static char names[JOB_MAX_FIELDS + 1][16];
		f[0] = "submission_id";
		f[1] = SUB;
		for (int i = 1; i <= JOB_MAX_FIELDS; i++) {
			snprintf(names[i], sizeof names[i], "f%d", i);
			f[2 * i] = names[i];
			f[2 * i + 1] = "v";
		}
		struct job *j = mk(JOB_MAX_FIELDS, f);
		ok(!j->poison, "JOB_MAX_FIELDS fields: valid");
		job_free(j);
		j = mk(JOB_MAX_FIELDS + 1, f);
		is_str(job_poison_name(j->poison), "too_many_fields", "JOB_MAX_FIELDS + 1 fields: poison");
		struct job_argv_bufs b;
		const char **argv;
		size_t *lens;
		int n = job_xadd_argv(j, "arbiter:dead", true, "too_many_fields", "w1", 42, &b, &argv,
		                      &lens);
		is_int(n, 3 + 2 * JOB_MAX_FIELDS + 8, "dead-letter copy: first JOB_MAX_FIELDS fields + 4");
		free(argv);
		free(lens);
		job_free(j);
	}
	{
		const char *f[] = { "submission_id", "42" };
		struct job *j = mk(1, f);
		is_str(job_poison_name(j->poison), "invalid_submission_id", "bad id is poison");
		job_free(j);
	}
	{
		const char *f[] = { "submission_id", SUB, "kind", "delete" };
		struct job *j = mk(2, f);
		is_str(job_poison_name(j->poison), "invalid_kind", "unknown kind is poison");
		job_free(j);
	}
	{
		const char *f[] = { "submission_id", SUB, "kind", "reevaluate", "elo", "double" };
		struct job *j = mk(3, f);
		is_str(job_poison_name(j->poison), "invalid_elo", "unknown elo is poison");
		job_free(j);
	}
	{
		/* attempt: the count of a retry parked in the delayed set goes on. */
		const char *f[] = { "submission_id", SUB, "attempt", "3" };
		struct job *j = mk(2, f);
		ok(!j->poison, "attempt 3 is valid");
		is_int(j->attempts, 3, "attempt raises attempts above the deliveries");
		ok(j->rl_done, "a retry (attempt > 1) passed the rate limit already");
		job_free(j);
		const char *g[] = { "submission_id", SUB, "attempt", "1" };
		j = mk(2, g);
		is_int(j->attempts, 1, "attempt 1: one delivery, attempt 1");
		ok(!j->rl_done, "attempt 1 is still rate limited");
		job_free(j);
		const char *bad[][4] = { { "submission_id", SUB, "attempt", "0" },
		                         { "submission_id", SUB, "attempt", "-2" },
		                         { "submission_id", SUB, "attempt", "2x" },
		                         { "submission_id", SUB, "attempt", "" },
		                         { "submission_id", SUB, "attempt", "99999999999999999999" } };
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			j = mk(2, bad[i]);
			is_str(job_poison_name(j->poison), "invalid_attempt", "attempt \"%s\" is poison", bad[i][3]);
			job_free(j);
		}
		const char *h[] = { "submission_id", SUB, "attempt", "4" };
		j = mk(2, h);
		struct job_argv_bufs bufs;
		const char **argv;
		size_t *lens;
		int argc = job_xadd_argv(j, "dead", true, "failed: x", "w1", 1, &bufs, &argv, &lens);
		bool has = false;
		for (int i = 3; i < argc; i += 2)
			has |= !strcmp(argv[i], "attempt");
		ok(!has, "a dead-letter copy drops attempt (a replay counts afresh)");
		free(argv);
		free(lens);
		argc = job_xadd_argv(j, "jobs", false, NULL, "w1", 1, &bufs, &argv, &lens);
		has = false;
		for (int i = 3; i < argc; i += 2)
			has |= !strcmp(argv[i], "attempt");
		ok(has, "a released copy keeps attempt");
		free(argv);
		free(lens);
		job_free(j);
	}
	{
		/* image_wait_since: a container job waiting for its image; the deadline counts
		 * from it, the rate limit was passed; set by a worker, so a bad value is ignored. */
		const char *f[] = { "submission_id", SUB, "image_wait_since", "1700000000000" };
		struct job *j = mk(2, f);
		ok(!j->poison && j->image_since_ms == 1700000000000LL, "image_wait_since is read");
		ok(j->rl_done, "a job waiting for its image passed the rate limit already");
		job_free(j);
		const char *bad[][4] = { { "submission_id", SUB, "image_wait_since", "0" },
		                         { "submission_id", SUB, "image_wait_since", "-5" },
		                         { "submission_id", SUB, "image_wait_since", "12x" },
		                         { "submission_id", SUB, "image_wait_since", "" } };
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			j = mk(2, bad[i]);
			ok(!j->poison && j->image_since_ms == 0 && !j->rl_done,
			   "image_wait_since \"%s\" is ignored (no poison, rate limited)", bad[i][3]);
			job_free(j);
		}
		j = mk(2, f);
		struct job_argv_bufs bufs;
		const char **argv;
		size_t *lens;
		int argc = job_xadd_argv(j, "dead", true, "failed: x", "w1", 1, &bufs, &argv, &lens);
		bool has = false;
		for (int i = 3; i < argc; i += 2)
			has |= !strcmp(argv[i], "image_wait_since");
		ok(!has, "a dead-letter copy drops image_wait_since (a replay waits afresh)");
		free(argv);
		free(lens);
		argc = job_xadd_argv(j, "jobs", false, NULL, "w1", 1, &bufs, &argv, &lens);
		has = false;
		for (int i = 3; i < argc; i += 2)
			has |= !strcmp(argv[i], "image_wait_since");
		ok(has, "a released copy keeps image_wait_since (the wait goes on)");
		free(argv);
		free(lens);
		job_free(j);
	}
	{
		/* A NUL inside the id value: binary-safe length check. */
		const char *f[] = { "submission_id", SUB "\0x" };
		size_t lens[] = { 13, 38 };
		struct job *j = job_new("1-0", f, lens, 1, 3);
		is_str(job_poison_name(j->poison), "invalid_submission_id", "embedded NUL refused");
		is_int(j->attempts, 3, "deliveries seed attempts");
		job_free(j);
	}
	{
		/* Names and values are binary: "submission_id\0x" is another field,
		 * "evaluate\0x" another kind (adversarial review). */
		const char *f[] = { "submission_id\0x", SUB };
		size_t lens[] = { 15, 36 };
		struct job *j = job_new("1-0", f, lens, 1, 1);
		is_str(job_poison_name(j->poison), "missing_submission_id", "a name with a NUL is not submission_id");
		ok(job_field(j, "submission_id") == NULL, "job_field compares whole names");
		job_free(j);
		const char *g[] = { "submission_id", SUB, "kind", "evaluate\0x" };
		size_t glens[] = { 13, 36, 4, 10 };
		j = job_new("1-0", g, glens, 2, 1);
		is_str(job_poison_name(j->poison), "invalid_kind", "a kind with a NUL tail is poison");
		job_free(j);
		const char *h[] = { "submission_id", SUB, "elo", "keep\0", "kind", "reevaluate" };
		size_t hlens[] = { 13, 36, 3, 5, 4, 10 };
		j = job_new("1-0", h, hlens, 3, 1);
		is_str(job_poison_name(j->poison), "invalid_elo", "an elo with a NUL tail is poison");
		job_free(j);
		const char *k[] = { "submission_id", SUB, "source_ip", "10.0.0.1\0junk", "enqueued_at",
		                    "17\0" };
		size_t klens[] = { 13, 36, 9, 13, 11, 3 };
		j = job_new("1-0", k, klens, 3, 1);
		ok(!j->poison, "binary source_ip / enqueued_at are not poison");
		ok(j->source_ip && strcmp(j->source_ip, "10.0.0.1") != 0, "a source_ip with a NUL is no address");
		is_int(j->enqueued_at_ms, 0, "an enqueued_at with a NUL is ignored");
		job_free(j);
	}
	{
		/* A field given twice: the first counts (the rate limiter keeps the first too). */
		const char *f[] = { "submission_id", SUB, "submission_id", "not-a-uuid", "kind", "evaluate",
		                    "kind", "bogus" };
		struct job *j = mk(4, f);
		ok(!j->poison, "duplicated fields: the first ones count");
		is_str(j->sub, SUB, "first submission_id");
		ok(j->kind == JOB_EVALUATE, "first kind");
		job_free(j);
	}
	{
		struct job *j = mk(0, NULL);
		is_str(job_poison_name(j->poison), "missing_submission_id", "no fields");
		const char **argv;
		size_t *lens;
		struct job_argv_bufs b;
		int n = job_xadd_argv(j, "s", false, NULL, "w", 1, &b, &argv, &lens);
		is_int(n, 5, "XADD never empty");
		free(argv);
		free(lens);
		job_free(j);
	}

	{
		struct strbuf sb = { 0 };
		job_json_str(&sb, "a\"b\\c\n\x01\xc3\xa9\xff");
		is_str(sb.buf, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\xef\xbf\xbd\"", "json escaping");
		strbuf_free(&sb);
	}

	for (int n = 1; n <= 12; n++) {
		uint32_t lo = job_backoff_ms(n, 100, 5000, 0);
		uint32_t hi = job_backoff_ms(n, 100, 5000, 0xffffffffu);
		uint32_t d = 100u << (n - 1);
		if (d > 5000 || n > 7)
			d = 5000;
		ok(lo >= d / 2 && hi <= d && lo <= hi, "backoff %d in [%u, %u]: %u..%u", n, d / 2, d, lo, hi);
	}

	ok(job_now_ms() > 1600000000000LL, "wall clock");
	return tap_done();
}
