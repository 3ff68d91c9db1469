/*
 * `arbiter score` and `arbiter validate-spec` (worker/README.md "Command line"): score one
 * submission with no server, or check a scoring spec.
 *
 *   arbiter score --spec F --submission F [--ground-truth F] [--match F]
 *                 [--max-string-bytes N] [--verdict F] [--judge-providers P]
 *   arbiter validate-spec [--judge-providers P] F
 *
 * Exit codes: 0 success (result JSON / "ok" on stdout); 2 bad spec, bad input
 * or bad usage (reason on stderr); 3 the test-suite / custom-script evaluator
 * or the LLM judge failed (internal_error, reason on stderr). A file name "-"
 * reads stdin. A judge spec asks its provider (no verdict cache), which must be
 * one of the operator's (--judge-providers, else ARBITER_JUDGE_PROVIDERS), or
 * replays a verdict from --verdict F without any network.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "cmd.h"
#include "config.h"
#include "evaluator.h"
#include "image.h"
#include "log.h"
#include "isotime.h"
#include "jprov.h"
#include "judge.h"
#include "rubric.h"
#include "score.h"
#include "spec.h"
#include "util.h"

#define EXIT_BAD 2
#define EXIT_INTERNAL 3

static void score_usage(FILE *out)
{
	fprintf(out,
	        "usage: arbiter score --spec F --submission F [--ground-truth F] [--match F]\n"
	        "                     [--max-string-bytes N] [--explain]\n"
	        "  --spec F              scoring spec (README, Scoring spec)\n"
	        "  --submission F        {\"answer\": ..., \"metadata\": {...}}\n"
	        "  --ground-truth F      the challenge's ground truth (default {})\n"
	        "  --match F             {\"started_at\", \"submitted_at\", \"time_limit_secs\",\n"
	        "                         \"memoryless\", \"attempt_number\"}\n"
	        "  --max-string-bytes N  longest string a primitive reads (default 1048576;\n"
	        "                         env ARBITER_MAX_STRING_BYTES)\n"
	        "  --verdict F           LLM judge: replay this verdict ({\"scores\", \"summary\"},\n"
	        "                         e.g. .judge.verdict of an earlier result) instead of\n"
	        "                         asking the provider\n"
	        "  --judge-providers P   LLM judge: the providers the spec may name (JSON or a\n"
	        "                         file; default env ARBITER_JUDGE_PROVIDERS)\n"
	        "  --explain             add \"explain\": per dimension, the values read (after\n"
	        "                         normalisation), what matched, the fractions, gates and\n"
	        "                         the rounding\n"
	        "Prints the result JSON; exit 0, 2 on bad input, 3 on an evaluator failure.\n");
}

/* Reads a whole file ("-" = stdin). Returns 0 and a malloc'd buffer, or -1 (errno kept). */
static int read_file(const char *path, char **out, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!f)
		return -1;
	struct strbuf sb = { 0 };
	char buf[65536];
	size_t n;
	strbuf_addlit(&sb, "");
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		strbuf_add(&sb, buf, n);
	int bad = ferror(f);
	if (f != stdin)
		fclose(f);
	if (bad) {
		strbuf_free(&sb);
		errno = EIO;
		return -1;
	}
	*out = sb.buf;
	*len = sb.len;
	return 0;
}

/* Loads a JSON file; on failure prints "<what> <path>: <reason>" and returns NULL. */
static json_t *load_json(const char *what, const char *path)
{
	char *text;
	size_t len;
	json_error_t je;
	if (read_file(path, &text, &len) < 0) {
		fprintf(stderr, "arbiter score: %s %s: %s\n", what, path, strerror(errno));
		return NULL;
	}
	/* JSON allows "\u0000" inside strings; every primitive is length-aware, so accept it. */
	json_t *v = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	free(text);
	if (!v)
		fprintf(stderr, "arbiter score: %s %s: line %d, column %d: %s\n", what, path, je.line,
		        je.column, je.text);
	return v;
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	if (!s || !*s || *s == '-')
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || v > (1ULL << 40))
		return -1;
	*out = (size_t)v;
	return 0;
}

/* Fills m from the --match document. Returns 0, or -1 after printing why. */
static int parse_match(const json_t *j, struct score_match *m)
{
	memset(m, 0, sizeof *m);
	m->attempt_number = 1;
	if (!json_is_object(j)) {
		fprintf(stderr, "arbiter score: match: must be a JSON object\n");
		return -1;
	}
	const json_t *st = json_object_get(j, "started_at"), *su = json_object_get(j, "submitted_at");
	int64_t a = 0, b = 0;
	if (st && !json_is_null(st) && (!json_is_string(st) ||
	    isotime_parse(json_string_value(st), json_string_length(st), &a) < 0)) {
		fprintf(stderr, "arbiter score: match: started_at is not an ISO 8601 timestamp\n");
		return -1;
	}
	if (su && !json_is_null(su) && (!json_is_string(su) ||
	    isotime_parse(json_string_value(su), json_string_length(su), &b) < 0)) {
		fprintf(stderr, "arbiter score: match: submitted_at is not an ISO 8601 timestamp\n");
		return -1;
	}
	if (json_is_string(st) && json_is_string(su)) {
		m->has_times = true;
		m->started_at_ms = a;
		m->submitted_at_ms = b;
	}
	const json_t *tl = json_object_get(j, "time_limit_secs");
	if (tl && !json_is_null(tl)) {
		double d = json_is_number(tl) ? json_number_value(tl) : -1;
		if (!(d > 0) || d != (double)(int)d) {
			fprintf(stderr, "arbiter score: match: time_limit_secs must be a positive integer\n");
			return -1;
		}
		m->time_limit_secs = (int)d;
	}
	const json_t *ml = json_object_get(j, "memoryless");
	if (ml && !json_is_null(ml)) {
		if (!json_is_boolean(ml)) {
			fprintf(stderr, "arbiter score: match: memoryless must be true or false\n");
			return -1;
		}
		m->memoryless = json_is_true(ml);
	}
	const json_t *an = json_object_get(j, "attempt_number");
	if (an && !json_is_null(an)) {
		if (!json_is_integer(an) || json_integer_value(an) < 1 || json_integer_value(an) > 1000000000) {
			fprintf(stderr, "arbiter score: match: attempt_number must be a positive integer\n");
			return -1;
		}
		m->attempt_number = (int)json_integer_value(an);
	}
	return 0;
}

static int score_external_done(const struct spec *s, const json_t *answer, const json_t *metadata,
                               const json_t *ground_truth, const struct score_match *m,
                               const struct score_ext *ext, const struct score_limits *lim);

/* State of one external evaluation run by `arbiter score` on a private loop. */
struct ext_run {
	const struct spec *s;
	const json_t *answer, *metadata, *ground_truth;
	const struct score_match *m;
	const struct score_limits *lim;
	int rc;
	const struct rubric_verdict *replay;   /* --verdict, or NULL: ask the provider */
	const struct jprovs *providers;        /* the operator's providers (borrowed) */
	struct judge *judge;                   /* live judge client, or NULL */
	/* The test suite's outcome, kept for the judge of a hybrid spec. */
	size_t n;
	char *keys[SPEC_MAX_DIMS];
	int scores[SPEC_MAX_DIMS];
	json_t *extra, *warnings;
};

/* Scores with the test suite's scores kept in x (if any) and the verdict v. */
static void judged(struct ext_run *x, const struct rubric_verdict *v, const struct judge_result *res)
{
	const struct rubric *r = spec_rubric(x->s);
	struct rubric_ext re;
	rubric_ext_merge(r, v, x->n, (const char *const *)x->keys, x->scores, &re);
	json_t *extra = x->extra ? json_deep_copy(x->extra) : json_object();
	json_t *jd = rubric_result_json(r, v);
	if (res) {
		json_object_set_new(jd, "verdict_key", json_string(res->key));
		json_object_set_new(jd, "calls", json_integer(res->calls));
		json_object_set_new(jd, "tokens_in", json_integer(res->tokens_in));
		json_object_set_new(jd, "tokens_out", json_integer(res->tokens_out));
		json_object_set_new(jd, "cost_usd", json_real(res->cost_usd));
	} else {
		json_object_set_new(jd, "replayed", json_true());
	}
	json_object_set_new(extra, "judge", jd);
	struct score_ext ext = { re.n, re.keys, re.scores, extra, x->warnings };
	x->rc = score_external_done(x->s, x->answer, x->metadata, x->ground_truth, x->m, &ext, x->lim);
	json_decref(extra);
}

static void on_judge(int rc, const struct judge_result *res, const char *err, void *data)
{
	struct ext_run *x = data;
	if (rc != JUDGE_OK) {
		fprintf(stderr, "arbiter score: the LLM judge failed (internal_error): %s\n",
		        err ? err : "unknown error");
		if (res && res->raw) {
			/* Printable ASCII only: the answer may carry terminal escapes. */
			fputs("arbiter score: the provider's last answer: ", stderr);
			for (size_t i = 0; res->raw[i] && i < 2000; i++) {
				unsigned char c = (unsigned char)res->raw[i];
				fputc(c >= 0x20 && c < 0x7f ? c : '?', stderr);
			}
			fputc('\n', stderr);
		}
		x->rc = EXIT_INTERNAL;
	} else {
		judged(x, &res->v, res);
	}
	judge_close(x->judge);
	x->judge = NULL;
}

/* Runs the judge on loop (or replays --verdict) with the tests' outcome kept in x. */
static void start_judge(struct ext_run *x, uv_loop_t *loop)
{
	if (x->replay) {
		judged(x, x->replay, NULL);
		return;
	}
	struct judge_opts o = { .providers = x->providers };
	if (judge_new(loop, &o, &x->judge) < 0) {
		fprintf(stderr, "arbiter score: the LLM judge cannot start (libcurl)\n");
		x->rc = EXIT_INTERNAL;
		return;
	}
	if (judge_run(x->judge, spec_rubric(x->s), x->answer,
	              x->extra ? json_object_get(x->extra, "tests") : NULL, NULL, true,
	              on_judge, x) < 0) {
		judge_close(x->judge);
		x->judge = NULL;
		x->rc = EXIT_INTERNAL;
	}
}

static uv_loop_t *ext_loop;   /* the private loop of run_external_evaluator */
static enum log_level ext_log_level = LOG_WARN;   /* ARBITER_LOG_LEVEL when it is set */

static void on_external(int rc, const struct score_ext *ext, const char *err, void *data)
{
	struct ext_run *x = data;
	if (rc < 0) {
		fprintf(stderr, "arbiter score: %s evaluation failed (internal_error): %s\n",
		        spec_evaluator_name(spec_evaluator(x->s)), err ? err : "unknown error");
		x->rc = EXIT_INTERNAL;
		return;
	}
	if (spec_rubric(x->s)) {   /* hybrid: the judge reads the test results too */
		for (size_t i = 0; i < ext->n && i < SPEC_MAX_DIMS; i++, x->n++) {
			x->keys[i] = xstrdup(ext->keys[i]);
			x->scores[i] = ext->scores[i];
		}
		x->extra = ext->extra ? json_deep_copy(ext->extra) : NULL;
		x->warnings = ext->warnings ? json_deep_copy(ext->warnings) : NULL;
		start_judge(x, ext_loop);
		return;
	}
	x->rc = score_external_done(x->s, x->answer, x->metadata, x->ground_truth, x->m, ext, x->lim);
}

/*
 * The test-suite / custom-script evaluators (worker/README.md "Sandbox") for `arbiter score`: a sandbox
 * pool on a private loop (ARBITER_SANDBOX_SLOTS, ARBITER_LANGUAGES_FILE from the
 * environment), one evaluator_run, then scoring with its score_ext. internal_error: the
 * reason on stderr, exit 3. Log lines below warnings are not printed unless
 * ARBITER_LOG_LEVEL asks for them (score_settings).
 */
static int run_external_evaluator(const struct spec *s, const json_t *answer,
                                  const json_t *metadata, const json_t *ground_truth,
                                  const json_t *match_json, const struct score_match *m,
                                  const struct score_limits *lim,
                                  const struct rubric_verdict *replay,
                                  const struct jprovs *providers)
{
	log_setup(ext_log_level, NULL);
	uv_loop_t loop;
	if (uv_loop_init(&loop) < 0) {
		fprintf(stderr, "arbiter score: cannot create an event loop\n");
		return EXIT_INTERNAL;
	}
	struct sandbox_pool *sp = NULL;
	char err[512];
	struct ext_run x = { s, answer, metadata, ground_truth, m, lim, EXIT_INTERNAL, replay,
	                     providers, NULL, 0, { 0 }, { 0 }, NULL, NULL };
	ext_loop = &loop;
	if (spec_evaluator(s) == SPEC_JUDGE) {
		start_judge(&x, &loop);
		uv_run(&loop, UV_RUN_DEFAULT);
	} else if (sandbox_pool_new(&loop, NULL, &sp, err, sizeof err) < 0) {
		fprintf(stderr, "arbiter score: the sandbox is not available (internal_error): %s\n", err);
	} else if (evaluator_run(sp, s, answer, metadata, ground_truth, match_json, on_external,
	                         &x) < 0) {
		fprintf(stderr, "arbiter score: the %s evaluator cannot run this spec\n",
		        spec_evaluator_name(spec_evaluator(s)));
	} else {
		uv_run(&loop, UV_RUN_DEFAULT);
	}
	sandbox_pool_free(sp);
	uv_run(&loop, UV_RUN_DEFAULT);   /* the pool's handles are closed by now */
	for (size_t i = 0; i < x.n; i++)
		free(x.keys[i]);
	json_decref(x.extra);
	json_decref(x.warnings);
	if (uv_loop_close(&loop) < 0)
		fprintf(stderr, "arbiter score: event loop still busy at exit\n");
	return x.rc;
}

/* Scores with ext (NULL for deterministic specs) and prints the result JSON. Returns the
 * process exit code. Also the completion path of run_external_evaluator. */
static int score_external_done(const struct spec *s, const json_t *answer, const json_t *metadata,
                               const json_t *ground_truth, const struct score_match *m,
                               const struct score_ext *ext, const struct score_limits *lim)
{
	struct score_result r;
	char err[512];
	/* The worker's path: the ground truth's side prepared (here for this one evaluation). */
	struct score_prep *prep = score_prepare(s, ground_truth);
	int rc = score_eval_prepared(prep, answer, metadata, m, ext, lim, &r, err, sizeof err);
	score_prep_free(prep);
	if (rc < 0) {
		fprintf(stderr, "arbiter score: %s\n", err);
		return EXIT_INTERNAL;
	}
	char *text = score_result_dumps(&r);
	if (lim->explain) {
		/* The result text, then "explain" before its closing brace. */
		json_t *ex = score_result_explain(&r);
		char *et = json_dumps(ex, JSON_COMPACT | JSON_REAL_PRECISION(15));
		size_t tl = strlen(text);
		printf("%.*s,\"explain\":%s}\n", (int)(tl - 1), text, et ? et : "{}");
		free(et);
		json_decref(ex);
	} else {
		printf("%s\n", text);
	}
	free(text);
	score_result_clear(&r);
	return fflush(stdout) == 0 ? 0 : EXIT_INTERNAL;
}

/* Matches "--name V" and "--name=V"; advances *i past the value. */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **val)
{
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n))
		return 0;
	if (argv[*i][n] == '=') {
		*val = argv[*i] + n + 1;
		return 1;
	}
	if (argv[*i][n])
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "arbiter score: %s needs a value\n", name);
		return -1;
	}
	*val = argv[++*i];
	return 1;
}

/* The worker's settings `arbiter score` honours, from the environment only (no
 * configuration file), checked by worker/config's table: ARBITER_MAX_STRING_BYTES into
 * *max_bytes and ARBITER_LOG_LEVEL into ext_log_level, each only when set. Returns 0, or
 * -1 with the reason on stderr. */
static int score_settings(size_t *max_bytes)
{
	static const char *const names[] = { "ARBITER_MAX_STRING_BYTES", "ARBITER_LOG_LEVEL", NULL };
	struct config c;
	unsigned given;
	char err[512];
	if (config_load_some(names, "", &c, &given, err, sizeof err) < 0) {
		config_report("score", err);
		return -1;
	}
	if (given & 1u)
		*max_bytes = c.max_string_bytes;
	if (given & 2u)
		(void)log_level_parse(c.log_level, &ext_log_level);   /* valid: the table checked it */
	config_free(&c);
	return 0;
}

/* (Long: the command reads as its steps in order: options, the four inputs, scoring,
 * output; each step is a few lines and has one exit code.) */
int cmd_score(int argc, char **argv)
{
	const char *spec_f = NULL, *sub_f = NULL, *gt_f = NULL, *match_f = NULL, *max_s = NULL;
	const char *verdict_f = NULL, *providers_s = getenv("ARBITER_JUDGE_PROVIDERS");
	bool explain = false;
	struct {
		const char *name;
		const char **dst;
	} opts[] = {
		{ "--spec", &spec_f }, { "--submission", &sub_f }, { "--ground-truth", &gt_f },
		{ "--match", &match_f }, { "--max-string-bytes", &max_s }, { "--verdict", &verdict_f },
		{ "--judge-providers", &providers_s },
	};
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			score_usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--explain")) {
			explain = true;
			continue;
		}
		int hit = 0;
		for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !hit; k++) {
			hit = opt_value(argc, argv, &i, opts[k].name, opts[k].dst);
			if (hit < 0)
				return EXIT_BAD;
		}
		if (!hit) {
			fprintf(stderr, "arbiter score: unknown argument '%s'\n", argv[i]);
			score_usage(stderr);
			return EXIT_BAD;
		}
	}
	if (!spec_f || !sub_f) {
		fprintf(stderr, "arbiter score: --spec and --submission are required\n");
		score_usage(stderr);
		return EXIT_BAD;
	}
	struct score_limits lim = { SCORE_DEFAULT_MAX_STRING_BYTES, explain, 0 };
	if (score_settings(&lim.max_string_bytes) < 0)
		return EXIT_BAD;
	if (max_s && parse_size(max_s, &lim.max_string_bytes) < 0) {
		fprintf(stderr, "arbiter score: max string bytes '%s' is not a positive integer\n", max_s);
		return EXIT_BAD;
	}

	int rc = EXIT_BAD;
	struct spec *spec = NULL;
	json_t *spec_j = NULL, *sub = NULL, *gt = NULL, *match = NULL;
	struct score_match m = { .attempt_number = 1 };
	char err[512];
	struct rubric_verdict replay = { 0 };
	bool have_replay = false;
	struct jprovs *providers = NULL;

	if (!(spec_j = load_json("spec", spec_f)))
		goto out;
	if (spec_from_json(spec_j, &spec, err, sizeof err) < 0) {
		fprintf(stderr, "arbiter score: invalid spec: %s\n", err);
		goto out;
	}
	/* Asking a provider needs the operator's; a replayed verdict needs none. */
	if (spec_rubric(spec) && !verdict_f) {
		if (judge_providers_load(providers_s, &providers, err, sizeof err) < 0) {
			fprintf(stderr, "arbiter score: ARBITER_JUDGE_PROVIDERS: %s\n", err);
			goto out;
		}
		if (!jprov_resolve(providers, spec_rubric(spec), err, sizeof err)) {
			fprintf(stderr, "arbiter score: invalid spec: %s\n", err);
			goto out;
		}
	}
	if (!(sub = load_json("submission", sub_f)))
		goto out;
	if (!json_is_object(sub)) {
		fprintf(stderr, "arbiter score: submission %s: must be a JSON object "
		        "{\"answer\": ..., \"metadata\": {...}}\n", sub_f);
		goto out;
	}
	const json_t *answer = json_object_get(sub, "answer");
	const json_t *metadata = json_object_get(sub, "metadata");
	if (metadata && json_is_null(metadata))
		metadata = NULL;
	if (metadata && !json_is_object(metadata)) {
		fprintf(stderr, "arbiter score: submission %s: metadata must be a JSON object\n", sub_f);
		goto out;
	}
	if (gt_f && !(gt = load_json("ground truth", gt_f)))
		goto out;
	if (match_f) {
		if (!(match = load_json("match", match_f)))
			goto out;
		if (parse_match(match, &m) < 0)
			goto out;
	}
	if (verdict_f && !spec_rubric(spec)) {
		fprintf(stderr, "arbiter score: --verdict: the spec has no judge criteria\n");
		goto out;
	}
	if (verdict_f) {
		char *vt;
		size_t vl;
		if (read_file(verdict_f, &vt, &vl) < 0) {
			fprintf(stderr, "arbiter score: verdict %s: %s\n", verdict_f, strerror(errno));
			goto out;
		}
		int vr = rubric_verdict_parse(spec_rubric(spec), vt, vl, &replay, err, sizeof err);
		free(vt);
		if (vr < 0) {
			fprintf(stderr, "arbiter score: verdict %s: %s\n", verdict_f, err);
			goto out;
		}
		have_replay = true;
	}
	if (spec_evaluator(spec) != SPEC_DETERMINISTIC)
		rc = run_external_evaluator(spec, answer, metadata, gt, match, &m, &lim,
		                            have_replay ? &replay : NULL, providers);
	else
		rc = score_external_done(spec, answer, metadata, gt, &m, NULL, &lim);
out:
	rubric_verdict_clear(&replay);
	jprov_free(providers);
	spec_free(spec);
	json_decref(spec_j);
	json_decref(sub);
	json_decref(gt);
	json_decref(match);
	return rc;
}

/* A custom-script whose source never names score.json reports on stdout, where a
 * submission the script echoes can add a score line (an internal_error since there are
 * then two, README "custom-script"): a warning on stderr, the spec is still ok. */
static void script_form_warning(const struct spec *s)
{
	if (spec_evaluator(s) != SPEC_CUSTOM_SCRIPT)
		return;
	const json_t *src = json_object_get(json_object_get(spec_json(s), "script"), "source");
	if (json_is_string(src) && !strstr(json_string_value(src), "score.json"))
		fprintf(stderr, "arbiter validate-spec: warning: script.source does not write score.json: "
		        "the scores line on stdout is the older form, and a script that echoes any part "
		        "of the submission after it makes the submission fail (two score lines); write "
		        "{\"scores\": {...}} to score.json instead\n");
}

/* A container spec asking for more than this host's maxima (ARBITER_CONTAINER_MAX_*, from
 * the configuration file and the environment) gets the warnings a run would add to its
 * submission_warnings, on stderr; the spec is still ok. -1 after a configuration error. */
static int container_limit_warnings(const struct spec *s)
{
	static const char *const names[] = { "ARBITER_CONTAINER_MAX_WALL_MS",
	                                     "ARBITER_CONTAINER_MAX_CPU_MS",
	                                     "ARBITER_CONTAINER_MAX_MEMORY_MB",
	                                     "ARBITER_CONTAINER_MAX_PIDS",
	                                     "ARBITER_CONTAINER_MAX_OUTPUT_MB", NULL };
	struct config c;
	unsigned given;
	char err[512];
	if (config_load_some(names, NULL, &c, &given, err, sizeof err) < 0) {
		config_report("validate-spec", err);
		return -1;
	}
	struct container_limits max, l;
	evaluator_container_maxima(&c, &max);
	config_free(&c);
	json_t *w = json_array();
	evaluator_container_limits(&max, json_object_get(spec_json(s), "container"), &l, w);
	for (size_t i = 0; i < json_array_size(w); i++)
		fprintf(stderr, "arbiter validate-spec: warning: %s\n",
		        json_string_value(json_object_get(json_array_get(w, i), "message")));
	json_decref(w);
	return 0;
}

int cmd_validate_spec(int argc, char **argv)
{
	static const char usage[] = "usage: arbiter validate-spec [--judge-providers P] [--spec] F\n";
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("%s"
		       "Checks a scoring spec (README, Scoring spec): prints \"ok\" and exits 0, or prints the\n"
		       "reason on stderr and exits 2. F \"-\" reads stdin. A judge spec's provider and model\n"
		       "are checked against the operator's providers (--judge-providers, JSON or a file,\n"
		       "else ARBITER_JUDGE_PROVIDERS) when there are some.\n", usage);
		return 0;
	}
	/* `validate-spec F`, or `validate-spec --spec F` like `arbiter score`. */
	const char *path = NULL, *providers_s = getenv("ARBITER_JUDGE_PROVIDERS");
	for (int i = 1; i < argc; i++) {
		int hit = opt_value(argc, argv, &i, "--judge-providers", &providers_s);
		if (hit < 0)
			return EXIT_BAD;
		if (!hit && !path && (hit = opt_value(argc, argv, &i, "--spec", &path)) < 0)
			return EXIT_BAD;
		if (!hit && !path && (strncmp(argv[i], "--", 2) || !strcmp(argv[i], "-")))
			path = argv[i];
		else if (!hit) {
			fprintf(stderr, "%s", usage);
			return EXIT_BAD;
		}
	}
	if (!path) {
		fprintf(stderr, "%s", usage);
		return EXIT_BAD;
	}
	char *text, err[512];
	size_t len;
	if (read_file(path, &text, &len) < 0) {
		fprintf(stderr, "arbiter validate-spec: %s: %s\n", path, strerror(errno));
		return EXIT_BAD;
	}
	struct spec *s;
	int rc = spec_parse(text, len, &s, err, sizeof err);
	free(text);
	if (rc < 0) {
		fprintf(stderr, "arbiter validate-spec: %s\n", err);
		return EXIT_BAD;
	}
	script_form_warning(s);
	if (spec_evaluator(s) == SPEC_CONTAINER) {
		/* The image must be in this machine's store (ARBITER_IMAGE_DIR). */
		struct image_opts io;
		struct image *im = NULL;
		char idir[4096];
		if (image_opts_load("validate-spec", &io, idir, sizeof idir) < 0) {
			spec_free(s);
			return EXIT_BAD;
		}
		int irc = image_open(&io, json_string_value(json_object_get(spec_json(s), "image")), &im,
		                     err, sizeof err);
		image_free(im);
		if (irc < 0) {
			fprintf(stderr, "arbiter validate-spec: %s\n", err);
			spec_free(s);
			return EXIT_BAD;
		}
		if (container_limit_warnings(s) < 0) {
			spec_free(s);
			return EXIT_BAD;
		}
	}
	const struct rubric *r = spec_rubric(s);
	if (r && providers_s && *providers_s) {
		struct jprovs *ps = NULL;
		if (judge_providers_load(providers_s, &ps, err, sizeof err) < 0) {
			fprintf(stderr, "arbiter validate-spec: ARBITER_JUDGE_PROVIDERS: %s\n", err);
			spec_free(s);
			return EXIT_BAD;
		}
		bool known = jprov_resolve(ps, r, err, sizeof err) != NULL;
		jprov_free(ps);
		if (!known) {
			fprintf(stderr, "arbiter validate-spec: %s\n", err);
			spec_free(s);
			return EXIT_BAD;
		}
	} else if (r) {
		fprintf(stderr, "arbiter validate-spec: note: judge.provider '%s' and judge.model '%s' "
		        "not checked (no ARBITER_JUDGE_PROVIDERS or --judge-providers)\n", r->provider,
		        r->model);
	}
	spec_free(s);
	printf("ok\n");
	return 0;
}
