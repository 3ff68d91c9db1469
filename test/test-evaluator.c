/*
 * Tests of worker/evaluator.c: the test-suite and custom-script evaluators of
 * worker/README.md "Sandbox" run through a sandbox_pool, with the ordinary and hostile
 * programs of test/sandbox/. Checks verdicts and their priority, per-case
 * figures, comparison modes, compilation errors, languages, the custom-script
 * protocol, and after every hostile run that no process is left and no host
 * file was written; huge single allocations, oversized programs and a long
 * suite (no fd leaked, no cgroup left). Needs root (skips otherwise).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>
#include <uv.h>

#include "evaluator.h"
#include "log.h"
#include "score.h"
#include "spec.h"
#include "sandbox_strays.h"
#include "tap.h"
#include "util.h"

static uv_loop_t loop;

static struct sandbox_pool *sp;
static unsigned long uid_base;   /* ours alone: other test runs may use the sandbox too */

/* ---- helpers ---------------------------------------------------------------------- */

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		diag("cannot read %s: %s", path, strerror(errno));
		return xstrdup("");
	}
	struct strbuf b = { 0 };
	char buf[4096];
	size_t n;
	strbuf_add(&b, "", 0);
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		strbuf_add(&b, buf, n);
	fclose(f);
	return b.buf;
}

struct outcome {
	bool done;
	int rc;
	char err[512];
	json_t *extra;          /* copy */
	json_t *warnings;       /* copy of ext->warnings, or NULL */
	size_t n;
	char keys[16][33];
	int scores[16];
};

static void on_eval(int rc, const struct score_ext *ext, const char *err, void *data)
{
	struct outcome *o = data;
	o->done = true;
	o->rc = rc;
	if (rc < 0) {
		snprintf(o->err, sizeof o->err, "%s", err ? err : "");
		return;
	}
	o->extra = ext->extra ? json_deep_copy(ext->extra) : NULL;
	o->warnings = ext->warnings ? json_deep_copy(ext->warnings) : NULL;
	o->n = ext->n < 16 ? ext->n : 16;
	for (size_t i = 0; i < o->n; i++) {
		snprintf(o->keys[i], sizeof o->keys[i], "%s", ext->keys[i]);
		o->scores[i] = ext->scores[i];
	}
}

static int ext_score(const struct outcome *o, const char *key)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			return o->scores[i];
	return -1;
}

/* ARBITER_TEST_SLOW (default 1): the specs' time limits are this many times longer, for a
 * slow machine (the emulated cgroup-v2 guest of test/guest/); never a weaker check. */
static unsigned slow = 1;

/* spec_text with its test-suite limits (cpu_ms, wall_ms; defaults 2000 and 5000) and its
 * script timeout scaled by slow. Caller frees; NULL if it is not JSON. */
static char *slow_spec(const char *spec_text)
{
	json_t *j = json_loads(spec_text, 0, NULL);
	if (!j)
		return NULL;
	json_t *ts = json_object_get(j, "test_suite"), *sc = json_object_get(j, "script");
	if (json_is_object(ts)) {
		json_t *lim = json_object_get(ts, "limits");
		if (!json_is_object(lim)) {
			lim = json_object();
			json_object_set_new(ts, "limits", lim);
		}
		json_int_t cpu = json_integer_value(json_object_get(lim, "cpu_ms"));
		json_int_t wall = json_integer_value(json_object_get(lim, "wall_ms"));
		json_object_set_new(lim, "cpu_ms", json_integer((cpu ? cpu : 2000) * slow));
		json_object_set_new(lim, "wall_ms", json_integer((wall ? wall : cpu ? 2 * cpu + 1000 : 5000) * slow));
	}
	if (json_is_object(sc)) {
		json_int_t t = json_integer_value(json_object_get(sc, "timeout_ms"));
		json_object_set_new(sc, "timeout_ms", json_integer((t ? t : 10000) * slow));
	}
	char *out = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return out;
}

/* Runs spec (JSON text) against answer; fills o. Returns 0 or -1 if it could not start. */
static int evaluate(struct outcome *o, const char *spec_text, json_t *answer, json_t *gt,
                    json_t *match)
{
	memset(o, 0, sizeof *o);
	struct spec *s;
	char err[512];
	char *scaled = slow > 1 ? slow_spec(spec_text) : NULL;
	if (scaled)
		spec_text = scaled;
	int prc = spec_parse(spec_text, strlen(spec_text), &s, err, sizeof err);
	free(scaled);
	if (prc < 0) {
		diag("spec: %s", err);
		return -1;
	}
	json_t *metadata = json_pack("{s:i}", "token_count", 7);
	int rc = evaluator_run(sp, s, answer, metadata, gt, match, on_eval, o);
	json_decref(metadata);
	if (rc == 0) {
		ok(!o->done, "callback not synchronous");
		uv_run(&loop, UV_RUN_DEFAULT);
	}
	spec_free(s);
	return rc;
}

static void outcome_free(struct outcome *o)
{
	json_decref(o->extra);
	o->extra = NULL;
	json_decref(o->warnings);
	o->warnings = NULL;
}

static const json_t *test_n(const struct outcome *o, size_t i)
{
	return json_array_get(json_object_get(o->extra, "tests"), i);
}

static const char *verdict_n(const struct outcome *o, size_t i)
{
	const char *v = json_string_value(json_object_get(test_n(o, i), "verdict"));
	return v ? v : "(none)";
}

/* evaluator container without its image: EVALUATOR_IMAGE_MISSING (the worker waits for it),
 * told apart from an image.json that is there but unreadable (-1, an internal error). The
 * image is opened on the thread pool: the callback still comes asynchronously. */
static void test_container_image(const char *dir)
{
	static const char spec[] = "{\"evaluator\": \"container\", \"image\": \"sha256:"
	                           "ab00000000000000000000000000000000000000000000000000000000000000\", "
	                           "\"dimensions\": [{\"key\": \"tests\", \"weight\": 1}]}";
	struct outcome o;
	json_t *ans = json_pack("{s:s}", "text", "x");
	int rc = evaluate(&o, spec, ans, NULL, NULL);
	ok(rc == 0 && o.done && o.rc == EVALUATOR_IMAGE_MISSING &&
	   !strncmp(o.err, "image_not_found: ", 17), "container: a missing image is "
	   "EVALUATOR_IMAGE_MISSING (%d: %s)", o.rc, o.err);
	outcome_free(&o);
	char path[512];
	snprintf(path, sizeof path, "%s/sha256-ab00000000000000000000000000000000000000000000000000"
	         "000000000000", dir);
	int made = mkdir(path, 0700);
	snprintf(path + strlen(path), sizeof path - strlen(path), "/image.json");
	FILE *f = made == 0 ? fopen(path, "w") : NULL;
	if (f) {
		fputs("{not json", f);
		fclose(f);
	}
	rc = f ? evaluate(&o, spec, ans, NULL, NULL) : -1;
	ok(rc == 0 && o.done && o.rc == -1 && strstr(o.err, "image.json"), "container: an "
	   "unreadable image.json is an internal error, not a missing image (%d: %s)", o.rc, o.err);
	outcome_free(&o);
	json_decref(ans);
	unlink(path);
	*strrchr(path, '/') = '\0';
	rmdir(path);
	rmdir(dir);
}

static int strays(void)
{
	return sandbox_strays(uid_base);
}

/* A one-case (or n-case) test-suite spec. */
static char *suite_spec(const char *lang, const char *cases_json, const char *extra)
{
	struct strbuf b = { 0 };
	strbuf_addf(&b, "{\"evaluator\":\"test-suite\",\"dimensions\":[{\"key\":\"correctness\","
	            "\"weight\":0.8},{\"key\":\"speed\",\"weight\":0.2,\"primitive\":\"time_decay\","
	            "\"time_limit_secs\":60}],\"test_suite\":{\"language\":\"%s\",\"cases\":%s%s%s}}",
	            lang, cases_json, extra ? "," : "", extra ? extra : "");
	return b.buf;
}

static json_t *files_answer(const char *entry, const char *content)
{
	return json_pack("{s:{s:s}}", "files", entry, content);
}

/* Runs one program file as a one-case suite; returns the verdict of the case in o. */
static void one(struct outcome *o, const char *lang, const char *entry, const char *src_path,
                const char *in, const char *expected, const char *limits)
{
	char *src = slurp(src_path);
	json_t *cases = json_pack("[{s:s,s:s,s:s}]", "name", "case", "stdin", in ? in : "",
	                          "expected_stdout", expected);
	char *ct = json_dumps(cases, JSON_COMPACT);
	char lim[256] = "";
	if (limits)
		snprintf(lim, sizeof lim, "\"limits\":%s", limits);
	char *spec = suite_spec(lang, ct, limits ? lim : NULL);
	json_t *answer = files_answer(entry, src);
	if (evaluate(o, spec, answer, NULL, NULL) < 0)
		o->rc = -2;
	json_decref(answer);
	json_decref(cases);
	free(ct);
	free(spec);
	free(src);
}

/* ---- languages, verdicts, compare modes ----------------------------------------------- */

static const struct {
	const char *lang, *entry, *good, *bad;
} progs[] = {
	{ "sh", "main.sh", "read a b\necho $((a + b))\n", "read a b\necho $((a + b + 1))\n" },
	{ "python3", "main.py", "a, b = map(int, input().split())\nprint(a + b)\n",
	  "a, b = map(int, input().split())\nprint(a - b)\n" },
	{ "c", "main.c",
	  "#include <stdio.h>\nint main(void){long a,b;if(scanf(\"%ld %ld\",&a,&b)!=2)return 1;"
	  "printf(\"%ld\\n\",a+b);return 0;}\n",
	  "#include <stdio.h>\nint main(void){puts(\"42\");return 0;}\n" },
	{ "node", "main.js",
	  "const [a,b]=require('fs').readFileSync(0,'utf8').trim().split(/\\s+/).map(Number);"
	  "console.log(a+b);\n",
	  "console.log('nope');\n" },
};

static const char *sum_cases =
	"[{\"name\":\"small\",\"stdin\":\"1 2\\n\",\"expected_stdout\":\"3\\n\",\"weight\":1},"
	"{\"name\":\"neg\",\"stdin\":\"-5 2\\n\",\"expected_stdout\":\"-3\\n\",\"weight\":2},"
	"{\"name\":\"big\",\"stdin\":\"1000000 2000000\\n\",\"expected_stdout\":\"3000000\\n\","
	"\"weight\":1}]";

static void test_languages(void)
{
	for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		char *spec = suite_spec(progs[i].lang, sum_cases, NULL);
		struct outcome o;
		json_t *a = files_answer(progs[i].entry, progs[i].good);
		evaluate(&o, spec, a, NULL, NULL);
		json_decref(a);
		is_int(o.rc, 0, "%s accepted: rc (%s)", progs[i].lang, o.err);
		is_int(ext_score(&o, "correctness"), 1000, "%s accepted: correctness 1000", progs[i].lang);
		is_str(verdict_n(&o, 0), "accepted", "%s case 1 accepted", progs[i].lang);
		is_str(verdict_n(&o, 2), "accepted", "%s case 3 accepted", progs[i].lang);
		const json_t *t = test_n(&o, 1);
		ok(json_is_integer(json_object_get(t, "cpu_ms")) &&
		   json_is_integer(json_object_get(t, "wall_ms")) &&
		   /* >= 0, not > 0: a tiny program's peak can hide under the copy of the
		    * worker it starts from (worker/README.md "Sandbox"); test-sandbox checks real peaks. */
		   json_is_integer(json_object_get(t, "memory_kb")) &&
		   json_integer_value(json_object_get(t, "memory_kb")) >= 0 &&
		   json_integer_value(json_object_get(t, "exit_code")) == 0 &&
		   json_is_null(json_object_get(t, "signal")) &&
		   !strcmp(json_string_value(json_object_get(t, "name")), "neg"),
		   "%s per-case figures", progs[i].lang);
		const json_t *c = json_object_get(o.extra, "compile");
		if (!strcmp(progs[i].lang, "c"))
			is_str(json_string_value(json_object_get(c, "verdict")), "ok", "c compile ok");
		else
			ok(c == NULL, "%s has no compile step", progs[i].lang);
		outcome_free(&o);

		a = files_answer(progs[i].entry, progs[i].bad);
		evaluate(&o, spec, a, NULL, NULL);
		json_decref(a);
		is_int(o.rc, 0, "%s wrong: rc", progs[i].lang);
		is_str(verdict_n(&o, 0), "wrong_answer", "%s wrong_answer", progs[i].lang);
		is_int(ext_score(&o, "correctness"), 0, "%s wrong: correctness 0", progs[i].lang);
		outcome_free(&o);
		free(spec);
	}
	is_int(strays(), 0, "languages: no stray process");
}

/* compare numeric:TOL went through doubles with a relative slack: 1000000001 matched
 * 1000000000, 2^53+1 matched 2^53 and 0x10 matched 16 under numeric:0, while a 142-digit
 * spelling of 0.1 was a wrong answer. Decimal tokens are now compared exactly. */
static void test_numeric_exact(void)
{
	static const struct {
		const char *got, *want, *tol;
		bool match;
	} c[] = {
		{ "1000000001", "1000000000", "0", false },
		{ "9007199254740993", "9007199254740992", "0", false },
		{ "0x10", "16", "0", false },
		{ "16", "16.000", "0", true },
		{ "1e3", "1000", "0", true },
		{ "-0", "0.0", "0", true },
		{ "0.1000000000000000000000000000000000000000000000000000000000000000000000000000000"
		  "000000000000000000000000000000000000000000000000000000000000", "0.1", "0", true },
		{ "0.30000000000000004", "0.3", "0", false },
		{ "1.001", "1", "0.001", true },      /* a difference equal to TOL is within */
		{ "1.0010000000000000001", "1", "0.001", false },
		{ "-0.0005", "0.0005", "0.001", true },
		{ "-0.0005", "0.00051", "0.001", false },
		{ "123456789012345678901234567890.5", "123456789012345678901234567890", "0.5", true },
		{ "123456789012345678901234567891.5", "123456789012345678901234567890", "0.5", false },
		{ "inf", "inf", "0", true },          /* not numbers: byte for byte */
		{ "nan", "NaN", "0", false },
		{ "1e999999", "1", "0.5", false },
		{ "3 4", "3 4 5", "0", false },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
		ok(evaluator_numeric_match(c[i].got, strlen(c[i].got), c[i].want, strlen(c[i].want),
		                           c[i].tol) == c[i].match, "numeric:%s: %.40s vs %s %s",
		   c[i].tol, c[i].got, c[i].want, c[i].match ? "matches" : "does not match");
}

static void test_weights_and_compare(void)
{
	/* passes "small" (1) and "big" (1) but not "neg" (2): 2/4 = 500 */
	char *spec = suite_spec("sh", sum_cases, NULL);
	struct outcome o;
	json_t *a = files_answer("main.sh", "read a b\nif [ $a -lt 0 ]; then echo 0; else echo $((a+b)); fi\n");
	evaluate(&o, spec, a, NULL, NULL);
	is_int(ext_score(&o, "correctness"), 500, "weighted: 2 of 4 = 500");
	json_decref(a);
	outcome_free(&o);
	free(spec);

	/* weights at the ends of the documented range, exactly: 5e12-like totals no longer
	 * overflow, and the smallest weight is not rounded to 0 */
	static const char *big_cases =
		"[{\"name\":\"a\",\"stdin\":\"1 2\\n\",\"expected_stdout\":\"3\\n\",\"weight\":1000000},"
		"{\"name\":\"b\",\"stdin\":\"1 2\\n\",\"expected_stdout\":\"3\\n\",\"weight\":1000000},"
		"{\"name\":\"c\",\"stdin\":\"-5 2\\n\",\"expected_stdout\":\"-3\\n\",\"weight\":1000000},"
		"{\"name\":\"d\",\"stdin\":\"-5 2\\n\",\"expected_stdout\":\"-3\\n\",\"weight\":0.000001}]";
	spec = suite_spec("sh", big_cases, NULL);
	a = files_answer("main.sh", "read a b\nif [ $a -lt 0 ]; then echo 0; else echo $((a+b)); fi\n");
	evaluate(&o, spec, a, NULL, NULL);
	is_int(o.rc, 0, "extreme weights: scored (%s)", o.err);
	is_int(ext_score(&o, "correctness"), 667, "extreme weights: 2e12 of 3e12 + 1e-6 = 667");
	json_decref(a);
	outcome_free(&o);
	free(spec);

	static const struct {
		const char *compare, *prog, *expected, *verdict;
	} cmp[] = {
		{ NULL, "printf '3  \\n\\n\\n'", "3\n", "accepted" },
		{ "\"trim\"", "printf '3'", "3\n", "accepted" },
		{ "\"trim\"", "printf ' 3\\n'", "3\n", "wrong_answer" },
		{ "\"trim\"", "printf 'a b\\nc \\t\\n'", "a b\nc\n", "accepted" },
		{ "\"trim\"", "printf 'a\\n\\nb\\n'", "a\nb\n", "wrong_answer" },
		{ "\"exact\"", "printf '3\\n'", "3\n", "accepted" },
		{ "\"exact\"", "printf '3 \\n'", "3\n", "wrong_answer" },
		{ "\"exact\"", "printf '3'", "3\n", "wrong_answer" },
		{ "\"numeric:0.001\"", "printf '3.0004  1e3\\nx\\n'", "3 1000.0 x\n", "accepted" },
		{ "\"numeric:0.001\"", "printf '3.002\\n'", "3\n", "wrong_answer" },
		{ "\"numeric:0\"", "printf '1000000001 0x10\\n'", "1000000000 16\n", "wrong_answer" },
		{ "\"numeric:0\"", "printf '0.1%0140d\\n' 0", "0.1\n", "accepted" },
		{ "\"numeric:0.01\"", "printf '1.01\\n'", "1.00\n", "accepted" },
		{ "\"numeric:0.5\"", "printf '1 2\\n'", "1 2 3\n", "wrong_answer" },
		{ "\"numeric:0.5\"", "printf 'abc\\n'", "abd\n", "wrong_answer" },
	};
	for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++) {
		json_t *cases = json_pack("[{s:s,s:s}]", "name", "c", "expected_stdout", cmp[i].expected);
		char *ct = json_dumps(cases, JSON_COMPACT);
		char extra[128] = "";
		if (cmp[i].compare)
			snprintf(extra, sizeof extra, "\"compare\":%s", cmp[i].compare);
		char *sp_ = suite_spec("sh", ct, cmp[i].compare ? extra : NULL);
		a = files_answer("main.sh", cmp[i].prog);
		evaluate(&o, sp_, a, NULL, NULL);
		is_str(verdict_n(&o, 0), cmp[i].verdict, "compare %s: %s", cmp[i].compare ? cmp[i].compare
		       : "(default)", cmp[i].prog);
		outcome_free(&o);
		json_decref(a);
		json_decref(cases);
		free(ct);
		free(sp_);
	}
}

static void test_language_choice_and_files(void)
{
	const char *cases = "[{\"name\":\"c\",\"stdin\":\"\",\"expected_stdout\":\"hi\\n\"}]";
	struct strbuf b = { 0 };
	strbuf_addf(&b, "{\"evaluator\":\"test-suite\",\"dimensions\":[{\"key\":\"correctness\","
	            "\"weight\":1}],\"test_suite\":{\"language\":[\"python3\",\"sh\"],\"cases\":%s}}",
	            cases);
	struct outcome o;
	json_t *a = json_pack("{s:s,s:{s:s}}", "language", "sh", "files", "main.sh", "echo hi");
	evaluate(&o, b.buf, a, NULL, NULL);
	is_str(verdict_n(&o, 0), "accepted", "answer.language picks among the allowed");
	outcome_free(&o);
	json_decref(a);
	a = json_pack("{s:s,s:{s:s}}", "language", "c", "files", "main.c", "int main(){}");
	evaluate(&o, b.buf, a, NULL, NULL);
	is_str(verdict_n(&o, 0), "compilation_error", "a language the suite does not allow");
	outcome_free(&o);
	json_decref(a);
	strbuf_free(&b);

	char *spec = suite_spec("python3", cases, NULL);
	static const char *const bad[] = {
		"{\"files\":{\"../escape.py\":\"x\",\"main.py\":\"print('hi')\"}}",
		"{\"files\":{\"/tmp/abs.py\":\"x\",\"main.py\":\"print('hi')\"}}",
		"{\"files\":{\"a/../../x\":\"x\",\"main.py\":\"print('hi')\"}}",
		"{\"files\":{\"lib\":\"x\",\"lib/m.py\":\"y\",\"main.py\":\"print('hi')\"}}",
		"{\"files\":{\"main.py\":42}}",
		"{\"files\":{\"other.py\":\"print('hi')\"}}",
		"{\"code\":\"print('hi')\"}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		a = json_loads(bad[i], 0, NULL);
		evaluate(&o, spec, a, NULL, NULL);
		is_int(o.rc, 0, "bad files %zu: scored, not an internal error", i);
		is_str(verdict_n(&o, 0), "compilation_error", "bad files %zu: compilation_error", i);
		const char *out = json_string_value(json_object_get(json_object_get(o.extra, "compile"),
		                                                     "output"));
		ok(out && *out, "bad files %zu: explained: %s", i, out ? out : "");
		outcome_free(&o);
		json_decref(a);
	}
	struct stat st;
	ok(stat("/tmp/abs.py", &st) < 0 && stat("/escape.py", &st) < 0, "no host file from names");
	a = json_pack("{s:{s:s,s:s}}", "files", "main.py",
	              "import helper.util as u\nprint(u.x)\n", "helper/util.py", "x = 'hi'\n");
	evaluate(&o, spec, a, NULL, NULL);
	is_str(verdict_n(&o, 0), "accepted", "files in subdirectories");
	outcome_free(&o);
	json_decref(a);
	free(spec);

	spec = suite_spec("cobol", cases, NULL);
	a = files_answer("main.cob", "x");
	evaluate(&o, spec, a, NULL, NULL);
	is_int(o.rc, -1, "a language the worker lacks is an internal error");
	ok(strstr(o.err, "not configured") != NULL, "...saying so: %s", o.err);
	json_decref(a);
	free(spec);
}

/* ---- hostile programs ------------------------------------------------------------------ */

static void check_after(const char *what)
{
	is_int(strays(), 0, "%s: no stray process", what);
}

static void test_hostile(void)
{
	struct outcome o;
	const char *fast = "{\"cpu_ms\":500,\"wall_ms\":1500,\"memory_mb\":64,\"processes\":8,"
	                   "\"output_kb\":64}";

	/* The wall limit far away: the CPU limit must be what ends the loop. */
	one(&o, "c", "main.c", "test/sandbox/infinite.c", "", "x\n",
	    "{\"cpu_ms\":500,\"wall_ms\":20000,\"memory_mb\":64,\"processes\":8,\"output_kb\":64}");
	is_str(verdict_n(&o, 0), "time_limit_exceeded", "infinite loop: time_limit_exceeded");
	ok(json_integer_value(json_object_get(test_n(&o, 0), "cpu_ms")) >= 400 * (json_int_t)slow &&
	   json_integer_value(json_object_get(test_n(&o, 0), "wall_ms")) < 20000 * (json_int_t)slow,
	   "infinite loop: ended by the CPU limit: cpu_ms %lld, wall_ms %lld",
	   (long long)json_integer_value(json_object_get(test_n(&o, 0), "cpu_ms")),
	   (long long)json_integer_value(json_object_get(test_n(&o, 0), "wall_ms")));
	outcome_free(&o);
	check_after("infinite loop");

	one(&o, "sh", "main.sh", "test/sandbox/sleep.sh", "", "woke\n", fast);
	is_str(verdict_n(&o, 0), "time_limit_exceeded", "sleep: time_limit_exceeded");
	ok(json_integer_value(json_object_get(test_n(&o, 0), "wall_ms")) >= 1500, "sleep: wall_ms %lld (cpu_ms %lld)",
	   (long long)json_integer_value(json_object_get(test_n(&o, 0), "wall_ms")),
	   (long long)json_integer_value(json_object_get(test_n(&o, 0), "cpu_ms")));
	outcome_free(&o);
	check_after("sleep");

	one(&o, "c", "main.c", "test/sandbox/membomb.c", "", "x\n", fast);
	is_str(verdict_n(&o, 0), "memory_limit_exceeded", "C memory bomb: memory_limit_exceeded");
	outcome_free(&o);
	check_after("C memory bomb");

	one(&o, "python3", "main.py", "test/sandbox/membomb.py", "", "x\n", fast);
	is_str(verdict_n(&o, 0), "memory_limit_exceeded", "python memory bomb: memory_limit_exceeded");
	outcome_free(&o);
	check_after("python memory bomb");

	one(&o, "c", "main.c", "test/sandbox/forkbomb.c", "", "x\n", fast);
	/* stopped by the task limit, it spins on failing forks until a time limit; or the
	 * kernel memory of those forks reaches the memory limit first */
	ok(!strcmp(verdict_n(&o, 0), "time_limit_exceeded") || !strcmp(verdict_n(&o, 0), "runtime_error") ||
	   !strcmp(verdict_n(&o, 0), "memory_limit_exceeded"),
	   "C fork bomb: contained (%s)", verdict_n(&o, 0));
	outcome_free(&o);
	check_after("C fork bomb");

	one(&o, "sh", "main.sh", "test/sandbox/forkbomb.sh", "", "x\n", fast);
	ok(strcmp(verdict_n(&o, 0), "accepted") && strcmp(verdict_n(&o, 0), "internal_error") && o.rc == 0,
	   "shell fork bomb: contained (%s)", verdict_n(&o, 0));
	outcome_free(&o);
	check_after("shell fork bomb");

	one(&o, "c", "main.c", "test/sandbox/flood.c", "", "y\n", fast);
	is_str(verdict_n(&o, 0), "output_limit_exceeded", "output flood: output_limit_exceeded");
	outcome_free(&o);
	check_after("output flood");

	one(&o, "c", "main.c", "test/sandbox/segv.c", "", "before\n", fast);
	is_str(verdict_n(&o, 0), "runtime_error", "segfault: runtime_error");
	is_int(json_integer_value(json_object_get(test_n(&o, 0), "signal")), SIGSEGV, "segfault: signal 11");
	ok(json_is_null(json_object_get(test_n(&o, 0), "exit_code")), "segfault: no exit code");
	outcome_free(&o);

	one(&o, "c", "main.c", "test/sandbox/infinite.c", "", "x\n",
	    "{\"cpu_ms\":300,\"wall_ms\":1000,\"memory_mb\":64}");
	is_str(verdict_n(&o, 0), "time_limit_exceeded", "time limit wins over everything else");
	outcome_free(&o);

	/* compilation error */
	char *spec = suite_spec("c", sum_cases, NULL);
	json_t *a = files_answer("main.c", "int main(void) { return undeclared_thing; }\n");
	evaluate(&o, spec, a, NULL, NULL);
	is_int(o.rc, 0, "compilation error: scored");
	is_str(verdict_n(&o, 0), "compilation_error", "compilation error: case 1");
	is_str(verdict_n(&o, 2), "compilation_error", "compilation error: every case");
	const json_t *c = json_object_get(o.extra, "compile");
	is_str(json_string_value(json_object_get(c, "verdict")), "compilation_error", "compile.verdict");
	ok(strstr(json_string_value(json_object_get(c, "output")), "undeclared_thing") != NULL,
	   "compile.output has the compiler's message");
	is_int(ext_score(&o, "correctness"), 0, "compilation error scores 0");
	outcome_free(&o);
	json_decref(a);
	/* a compiler that reads forever: the compile step's own limits */
	a = files_answer("main.c", "#include \"/dev/zero\"\nint main(void){return 0;}\n");
	evaluate(&o, spec, a, NULL, NULL);
	is_str(verdict_n(&o, 0), "compilation_error", "#include /dev/zero: compilation_error");
	outcome_free(&o);
	json_decref(a);
	/* a compiler quoting binary garbage: the output stays valid UTF-8 without NUL */
	a = files_answer("main.c", "#include \"/etc/ld.so.cache\"\nint main(void){return 0;}\n");
	evaluate(&o, spec, a, NULL, NULL);
	is_str(verdict_n(&o, 0), "compilation_error", "#include of a binary: compilation_error");
	char *dumped = json_dumps(o.extra, JSON_COMPACT);
	ok(dumped && !strstr(dumped, "\\u0000"), "binary compiler output: valid JSON, no NUL");
	free(dumped);
	outcome_free(&o);
	json_decref(a);
	/* a huge compiler output is truncated */
	struct strbuf big = { 0 };
	for (int i = 0; i < 3000; i++)
		strbuf_addf(&big, "int f%d(void) { return x%d; }\n", i, i);
	a = files_answer("main.c", big.buf);
	evaluate(&o, spec, a, NULL, NULL);
	c = json_object_get(o.extra, "compile");
	ok(json_string_length(json_object_get(c, "output")) <= 8300 &&
	   strstr(json_string_value(json_object_get(c, "output")), "truncated"),
	   "compile output truncated (%zu bytes)", json_string_length(json_object_get(c, "output")));
	outcome_free(&o);
	json_decref(a);
	strbuf_free(&big);
	free(spec);
	check_after("compilation errors");
}

/* ---- regressions: attacks that once got a wrong verdict or strained the worker ----------- */

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	if (d)
		closedir(d);
	return n;
}


static void test_regressions(void)
{
	struct outcome o;
	const char *lim = "{\"cpu_ms\":2000,\"wall_ms\":4000,\"memory_mb\":64}";

	/* one allocation far over the limit (that the kernel grants: it has the memory): the
	 * memory limit, not a runtime error */
	struct sysinfo si;
	if (sysinfo(&si) == 0 && (uint64_t)si.totalram * si.mem_unit >= (6ull << 30)) {
		one(&o, "c", "main.c", "test/sandbox/bigalloc.c", "", "touched\n", lim);
		is_str(verdict_n(&o, 0), "memory_limit_exceeded", "C 3 GiB malloc: memory_limit_exceeded");
		outcome_free(&o);
		one(&o, "python3", "main.py", "test/sandbox/bigalloc.py", "", "x\n", lim);
		is_str(verdict_n(&o, 0), "memory_limit_exceeded",
		       "python 3 GiB string: memory_limit_exceeded");
		outcome_free(&o);
		check_after("big allocations");
	} else {
		ok(1, "# SKIP less than 6 GiB of memory: the kernel refuses a 3 GiB allocation itself");
	}

	/* a binary made unexecutable on purpose (ENOEXEC) ended as internal_error: retried, then
	 * failed, no Elo change, a way to dodge a loss. It is the program's failure. */
	one(&o, "c", "main.c", "test/sandbox/badinterp.c", "", "hi\n", NULL);
	is_int(o.rc, 0, "unexecutable binary: a result, not internal_error (%s)", o.err);
	is_str(verdict_n(&o, 0), "runtime_error", "unexecutable binary: runtime_error");
	outcome_free(&o);

	/* #include of a host file echoed it into compile.output (/proc/cmdline: the host's boot
	 * command line): diagnostics are bounded to the files of the run */
	{
		char host[256] = "";
		FILE *f = fopen("/proc/cmdline", "r");
		if (f) {
			if (!fgets(host, 40, f))
				host[0] = 0;
			fclose(f);
		}
		host[strcspn(host, " \n")] = 0;
		static const char *const inc[] = { "/proc/cmdline", "/etc/ld.so.conf" };
		for (size_t i = 0; i < 2; i++) {
			char src[256];
			snprintf(src, sizeof src, "#include \"%s\"\nint main(void) { return 0; }\n", inc[i]);
			json_t *cs = json_pack("[{s:s,s:s,s:s}]", "name", "c", "stdin", "", "expected_stdout", "");
			char *ct = json_dumps(cs, JSON_COMPACT);
			char *sp = suite_spec("c", ct, NULL);
			json_t *an = files_answer("main.c", src);
			evaluate(&o, sp, an, NULL, NULL);
			const char *co = json_string_value(json_object_get(json_object_get(o.extra, "compile"),
			                                                   "output"));
			is_str(verdict_n(&o, 0), "compilation_error", "#include %s: compilation_error", inc[i]);
			ok(co && (!host[0] || !strstr(co, host)) && !strstr(co, "ld.so.conf.d"),
			   "#include %s: nothing of the host file in compile.output (%s)",
			   inc[i], tap_flat(co));
			outcome_free(&o);
			json_decref(an);
			json_decref(cs);
			free(ct);
			free(sp);
		}
	}

	/* a tiny source with a huge program: refused, not held in the worker */
	one(&o, "c", "main.c", "test/sandbox/bigartifact.c", "", "\n", NULL);
	is_str(verdict_n(&o, 0), "compilation_error", "20 MiB program: compilation_error");
	const char *out = json_string_value(json_object_get(json_object_get(o.extra, "compile"), "output"));
	ok(out && strstr(out, "larger than 16 MiB"), "20 MiB program: says why (%s)", out ? out : "");
	outcome_free(&o);

	/* many cases in a row: no file descriptor left over in the worker */
	int fds = count_fds();
	struct strbuf cases = { 0 };
	strbuf_addf(&cases, "[");
	for (int i = 0; i < 60; i++)
		strbuf_addf(&cases, "%s{\"name\":\"c%d\",\"stdin\":\"%d\\n\",\"expected_stdout\":\"%d\\n\"}",
		            i ? "," : "", i, i, i);
	strbuf_addf(&cases, "]");
	char *spec = suite_spec("sh", cases.buf, NULL);
	json_t *a = files_answer("main.sh", "read x; echo $x\n");
	evaluate(&o, spec, a, NULL, NULL);
	is_int(ext_score(&o, "correctness"), 1000, "60 cases: all accepted");
	is_int(count_fds(), fds, "60 cases: no file descriptor leaked (%d before)", fds);
	outcome_free(&o);
	json_decref(a);
	free(spec);
	strbuf_free(&cases);
	check_after("60 cases");
}

static int listen_loopback(int *port, int family)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one_ = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one_, sizeof one_);
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof ss);
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = htons((unsigned short)*port);
		len = sizeof *a;
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		a->sin6_port = htons((unsigned short)*port);
		len = sizeof *a;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 8) < 0) {
		close(fd);
		return -1;
	}
	getsockname(fd, (struct sockaddr *)&ss, &len);
	*port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
	                                : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static bool accepted_any(int fd)
{
	int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK);
	if (c >= 0) {
		close(c);
		return true;
	}
	return false;
}

static void test_network(void)
{
	int port = 0;
	int l4 = listen_loopback(&port, AF_INET);
	int l6 = listen_loopback(&port, AF_INET6);
	ok(l4 >= 0, "listener on 127.0.0.1:%d", port);
	char in[32];
	snprintf(in, sizeof in, "%d\n", port);
	struct outcome o;
	one(&o, "c", "main.c", "test/sandbox/connect.c", in, "blocked\n", NULL);
	is_str(verdict_n(&o, 0), "accepted", "C connect to loopback: blocked");
	outcome_free(&o);
	one(&o, "python3", "main.py", "test/sandbox/connect.py", in, "blocked\n", NULL);
	is_str(verdict_n(&o, 0), "accepted", "python connect to loopback: blocked");
	outcome_free(&o);
	ok(!accepted_any(l4) && (l6 < 0 || !accepted_any(l6)), "the listener saw no connection");
	close(l4);
	if (l6 >= 0)
		close(l6);
	check_after("network");
}

static void test_secrets(void)
{
	setenv("ARBITER_DATABASE_URL", "postgresql://arbiter:h6-db-s3cret@127.0.0.1:5432/arbiter", 1);
	setenv("ARBITER_REDIS_URL", "redis://:h6-redis-s3cret@127.0.0.1:6379/0", 1);
	struct outcome o;
	char *src = slurp("test/sandbox/env.py");
	/* the printed environment, checked through a case that expects exactly it */
	const char *want = "HOME=/tmp\nLANG=C.UTF-8\nPATH=/usr/local/bin:/usr/bin:/bin\n";
	json_t *cases = json_pack("[{s:s,s:s}]", "name", "env", "expected_stdout", want);
	char *ct = json_dumps(cases, JSON_COMPACT);
	char *spec = suite_spec("python3", ct, "\"compare\":\"exact\"");
	json_t *a = files_answer("main.py", src);
	evaluate(&o, spec, a, NULL, NULL);
	is_str(verdict_n(&o, 0), "accepted",
	       "env: exactly HOME, LANG, PATH; no ARBITER_*, no other process's environ or cmdline");
	outcome_free(&o);
	json_decref(a);
	json_decref(cases);
	free(ct);
	free(spec);
	free(src);

	char exe[4096] = "", srcp[4096] = "";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0)
		exe[n] = 0;
	if (!realpath("test/sandbox/README", srcp))
		srcp[0] = 0;
	char in[8300];
	snprintf(in, sizeof in, "%s\n%s\n", exe, srcp);
	one(&o, "sh", "main.sh", "test/sandbox/readsecrets.sh", in, "done\n", NULL);
	is_str(verdict_n(&o, 0), "accepted",
	       "reads of /etc/shadow, /proc/1, the worker's binary and sources all fail");
	outcome_free(&o);
	check_after("secrets");
}

static void test_host_writes(void)
{
	char dir[] = "/tmp/arbiter-evtest-XXXXXX";
	ok(mkdtemp(dir) != NULL, "canary dir");
	char canary[128];
	snprintf(canary, sizeof canary, "%s/canary", dir);
	FILE *f = fopen(canary, "w");
	fputs("original\n", f);
	fclose(f);
	char in[160];
	snprintf(in, sizeof in, "%s\n", canary);
	struct outcome o;
	one(&o, "sh", "main.sh", "test/sandbox/hostwrite.sh", in, "work writable\ntmp writable\n", NULL);
	is_str(verdict_n(&o, 0), "accepted", "host writes: none succeeded (only /work and /tmp)");
	outcome_free(&o);
	char *content = slurp(canary);
	is_str(content, "original\n", "host canary unchanged");
	free(content);
	int entries = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			entries++;
	if (d)
		closedir(d);
	is_int(entries, 1, "nothing new next to the canary");
	struct stat st;
	ok(stat("/etc/arbiter-pwned", &st) < 0 && stat("/usr/bin/arbiter-pwned", &st) < 0 &&
	   stat("/arbiter-pwned", &st) < 0 && stat("/work/ok-here", &st) < 0 &&
	   stat("/tmp/ok-here", &st) < 0 && stat("/tmp/link", &st) < 0, "no host file written");
	unlink(canary);
	rmdir(dir);
	check_after("host writes");
}

static void test_daemon_and_killall(void)
{
	struct outcome o;
	one(&o, "c", "main.c", "test/sandbox/daemon.c", "", "parent done\n", NULL);
	is_str(verdict_n(&o, 0), "accepted", "double fork: the parent's run is judged");
	if (strcmp(verdict_n(&o, 0), "accepted"))
		diag("compile: %s", tap_flat(json_string_value(json_object_get(json_object_get(o.extra,
		     "compile"), "output"))));
	outcome_free(&o);
	check_after("daemon");
	sleep(4);   /* the daemon would print by now */
	check_after("daemon, 4 s later");

	one(&o, "c", "main.c", "test/sandbox/killall.c", "", "killed 0\n", NULL);
	ok(!strcmp(verdict_n(&o, 0), "runtime_error") || !strcmp(verdict_n(&o, 0), "accepted"),
	   "kill everything: it only killed itself (%s)", verdict_n(&o, 0));
	outcome_free(&o);
	ok(kill(getpid(), 0) == 0, "the evaluator survived");
	check_after("killall");
	char *spec = suite_spec("sh", sum_cases, NULL);
	json_t *a = files_answer("main.sh", progs[0].good);
	evaluate(&o, spec, a, NULL, NULL);
	is_int(ext_score(&o, "correctness"), 1000, "the next evaluation works");
	outcome_free(&o);
	json_decref(a);
	free(spec);
}

/* ---- custom-script ------------------------------------------------------------------- */

static void script(struct outcome *o, const char *lang, const char *path, int timeout_ms,
                   json_t *answer, json_t *gt)
{
	char *src = slurp(path);
	json_t *spec = json_pack("{s:s,s:[{s:s,s:f},{s:s,s:f}],s:{s:s,s:s,s:i}}",
	                         "evaluator", "custom-script", "dimensions", "key", "correctness",
	                         "weight", 0.5, "key", "style", "weight", 0.5, "script", "language",
	                         lang, "source", src, "timeout_ms", timeout_ms);
	char *text = json_dumps(spec, JSON_COMPACT);
	json_t *match = json_pack("{s:s,s:s}", "started_at", "2026-01-01T00:00:00Z", "submitted_at",
	                          "2026-01-01T00:05:00Z");
	if (evaluate(o, text, answer, gt, match) < 0)
		o->rc = -2;
	json_decref(match);
	free(text);
	json_decref(spec);
	free(src);
}

static void test_scripts(void)
{
	struct outcome o;
	json_t *ans = json_pack("{s:[i,i,i,i]}", "answers", 1, 2, 3, 5);
	json_t *gt = json_pack("{s:[i,i,i,i]}", "answers", 1, 2, 3, 4);
	script(&o, "python3", "test/sandbox/script_ok.py", 5000, ans, gt);
	is_int(o.rc, 0, "script scores (%s)", o.err);
	is_int(ext_score(&o, "correctness"), 750, "script: correctness 750 (its one score line)");
	is_int(ext_score(&o, "style"), 640, "script: style 640");
	outcome_free(&o);

	script(&o, "python3", "test/sandbox/script_missing.py", 5000, ans, gt);
	is_int(o.rc, 0, "script with a missing key: scored");
	is_int(ext_score(&o, "correctness"), 750, "missing key: the other one counts");
	is_int(ext_score(&o, "style"), -1, "missing key: left to score_eval (0 + warning)");
	outcome_free(&o);

	static const struct {
		const char *path, *what;
		int timeout;
	} bad[] = {
		{ "test/sandbox/script_crash.py", "crash", 5000 },
		{ "test/sandbox/script_timeout.py", "timed out", 1000 },
		{ "test/sandbox/script_nojson.py", "no JSON", 5000 },
		{ "test/sandbox/script_string.py", "0..1000", 5000 },
	};
	/* Out of range: clamped with a warning that quotes the number as written (spec v2). */
	script(&o, "python3", "test/sandbox/script_range.py", 5000, ans, gt);
	is_int(o.rc, 0, "out-of-range script: scored (%s)", o.err);
	is_int(ext_score(&o, "correctness"), 1000, "out of range: 1001 clamped to 1000");
	is_int(ext_score(&o, "style"), 0, "out of range: -0.4 clamped to 0");
	{
		char *w = o.warnings ? json_dumps(o.warnings, JSON_COMPACT) : NULL;
		ok(w && strstr(w, "score 1001 is outside 0..1000 (clamped to 1000)") &&
		   strstr(w, "score -0.4 is outside") && !strstr(w, "0.40000"),
		   "out of range: warnings quote 1001 and -0.4 (%s)", w ? w : "none");
		free(w);
	}
	outcome_free(&o);
	check_after("test/sandbox/script_range.py");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		script(&o, "python3", bad[i].path, bad[i].timeout, ans, gt);
		is_int(o.rc, -1, "%s: internal_error", bad[i].path);
		ok(strstr(o.err, "script") != NULL, "%s: says why: %s", bad[i].path, o.err);
		outcome_free(&o);
		check_after(bad[i].path);
	}

	int port = 0;
	int l = listen_loopback(&port, AF_INET);
	json_t *gtp = json_pack("{s:i}", "port", port);
	script(&o, "python3", "test/sandbox/script_network.py", 5000, ans, gtp);
	is_int(o.rc, 0, "network script: ran");
	is_int(ext_score(&o, "correctness"), 0, "network script: could not reach 127.0.0.1");
	ok(!accepted_any(l), "network script: the listener saw nothing");
	outcome_free(&o);
	close(l);
	json_decref(gtp);

	/* An answer nested 1,500 deep crashed the script's JSON parser: an internal error the
	 * submission forced (retried, then failed: no loss recorded). Too deep answers are not
	 * given to the script; its dimensions score 0 with a warning. */
	{
		json_t *deep = json_integer(1);
		for (int i = 0; i < 1500; i++) {
			json_t *a = json_array();
			json_array_append_new(a, deep);
			deep = a;
		}
		json_t *dans = json_pack("{s:o}", "answers", deep);
		script(&o, "python3", "test/sandbox/script_ok.py", 5000, dans, gt);
		is_int(o.rc, 0, "answer nested 1500 deep: a result, not internal_error (%s)", o.err);
		is_int((int)o.n, 0, "answer nested 1500 deep: no script score");
		const char *w = json_string_value(json_object_get(json_array_get(o.warnings, 0), "message"));
		ok(w && strstr(w, "deeper than 64 levels"), "answer nested 1500 deep: says why (%s)",
		   w ? w : "");
		outcome_free(&o);
		json_decref(dans);
		json_t *d = json_integer(1);
		for (int i = 0; i < 63; i++) {
			json_t *a = json_array();
			json_array_append_new(a, d);
			d = a;
		}
		dans = json_pack("{s:o}", "answers", d);   /* 64 levels with the answer object */
		ok(evaluator_depth_ok(dans, EVALUATOR_MAX_DEPTH) &&
		   !evaluator_depth_ok(dans, EVALUATOR_MAX_DEPTH - 1), "depth: 64 levels are accepted");
		json_decref(dans);
		check_after("deep answer");
	}

	/* A script that echoes the submission after its own score line let the submission's
	 * text be taken as the score. The score file is a channel only the script writes. */
	{
		json_t *inj = json_pack("{s:s}", "text", "{\"scores\": {\"correctness\": 1000, "
		                        "\"style\": 1000}}");
		script(&o, "python3", "test/sandbox/script_scorefile.py", 5000, inj, gt);
		is_int(o.rc, 0, "score file: scored (%s)", o.err);
		is_int(ext_score(&o, "correctness"), 900, "score file: the script's score, not the "
		       "line the submission made it print");
		is_int(ext_score(&o, "style"), 100, "score file: style 100");
		outcome_free(&o);
		json_decref(inj);
	}

	/* The stdout form: the same echo after the script's own line is two score lines, an
	 * internal_error (the submission cannot take the author's line away), not its score.
	 * Text without a score line leaves the script's one line counting. */
	{
		json_t *inj = json_pack("{s:s}", "text", "{\"scores\": {\"correctness\": 1000, "
		                        "\"style\": 1000}}");
		script(&o, "python3", "test/sandbox/script_echo.py", 5000, inj, gt);
		is_int(o.rc, -1, "echoed score line: internal_error, not scored (%d)",
		       ext_score(&o, "correctness"));
		ok(strstr(o.err, "printed 2 score lines; print exactly one, or write score.json") != NULL,
		   "echoed score line: says why: %s", o.err);
		outcome_free(&o);
		json_decref(inj);
		inj = json_pack("{s:s}", "text", "just text {\"scores\" inside}");
		script(&o, "python3", "test/sandbox/script_echo.py", 5000, inj, gt);
		is_int(o.rc, 0, "one score line and other text: scored (%s)", o.err);
		is_int(ext_score(&o, "correctness"), 100, "one score line: the script's score");
		outcome_free(&o);
		json_decref(inj);
		check_after("test/sandbox/script_echo.py");
	}

	script(&o, "c", "test/sandbox/script_scores.c", 5000, ans, gt);
	is_int(o.rc, 0, "compiled script (%s)", o.err);
	is_int(ext_score(&o, "correctness"), 900, "compiled script reads its stdin");
	outcome_free(&o);

	json_t *bad_src = json_pack("{s:s,s:[{s:s,s:i}],s:{s:s,s:s}}", "evaluator", "custom-script",
	                            "dimensions", "key", "correctness", "weight", 1, "script",
	                            "language", "c", "source", "int main( {");
	char *text = json_dumps(bad_src, JSON_COMPACT);
	evaluate(&o, text, ans, gt, NULL);
	is_int(o.rc, -1, "a script that does not compile: internal_error");
	outcome_free(&o);
	free(text);
	json_decref(bad_src);
	json_decref(ans);
	json_decref(gt);
	check_after("scripts");
}

/* A configured language table replaces the built-in one; a bad one is refused. */
static void test_language_file(void)
{
	char path[] = "/tmp/arbiter-langs-XXXXXX";
	int fd = mkstemp(path);
	const char *table = "{\"shx\": {\"entry\": \"prog.sh\", \"run\": [\"sh\", \"prog.sh\"]}}";
	ok(fd >= 0 && write(fd, table, strlen(table)) == (ssize_t)strlen(table), "language file written");
	close(fd);
	struct config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.sandbox_slots = 1;
	cfg.languages_file = path;
	struct sandbox_pool *p2 = NULL;
	char err[512] = "";
	int prc = sandbox_pool_new(&loop, &cfg, &p2, err, sizeof err);
	ok(prc == 0, "pool with a language file %s", err);
	if (p2) {
		struct sandbox_pool *keep = sp;
		sp = p2;
		char *spec = suite_spec("shx", "[{\"name\":\"c\",\"expected_stdout\":\"ok\"}]", NULL);
		struct outcome o;
		json_t *a = files_answer("prog.sh", "echo ok");
		evaluate(&o, spec, a, NULL, NULL);
		is_str(verdict_n(&o, 0), "accepted", "a language from the file runs");
		outcome_free(&o);
		json_decref(a);
		free(spec);
		spec = suite_spec("python3", "[{\"name\":\"c\",\"expected_stdout\":\"ok\"}]", NULL);
		a = files_answer("main.py", "print('ok')");
		evaluate(&o, spec, a, NULL, NULL);
		is_int(o.rc, -1, "the file replaces the built-in table (no python3 now)");
		json_decref(a);
		free(spec);
		sp = keep;
		sandbox_pool_free(p2);
		uv_run(&loop, UV_RUN_DEFAULT);
	}
	static const char *const bad[] = {
		"{\"x\": {\"run\": [\"/bin/true\"]}}",
		"{\"x\": {\"entry\": \"../m\", \"run\": [\"/bin/true\"]}}",
		"{\"x\": {\"entry\": \"m\", \"run\": []}}",
		"{\"x\": {\"entry\": \"m.c\", \"run\": [\"./m\"], \"compile\": [\"cc\"]}}",
		"[1, 2]",
		"{\"x\": ",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		fd = open(path, O_WRONLY | O_TRUNC);
		ok(fd >= 0 && write(fd, bad[i], strlen(bad[i])) == (ssize_t)strlen(bad[i]), "bad table %zu", i);
		close(fd);
		p2 = NULL;
		ok(sandbox_pool_new(&loop, &cfg, &p2, err, sizeof err) < 0 && p2 == NULL,
		   "bad table %zu refused: %s", i, err);
	}
	unlink(path);
	cfg.languages_file = "/nonexistent/languages.json";
	ok(sandbox_pool_new(&loop, &cfg, &p2, err, sizeof err) < 0, "a missing explicit file is an error");
	cfg.languages_file = "deploy/languages.json";
	ok(sandbox_pool_new(&loop, &cfg, &p2, err, sizeof err) == 0, "the shipped file loads");
	sandbox_pool_free(p2);
	uv_run(&loop, UV_RUN_DEFAULT);
}

/* `arbiter score` has no worker configuration: the sandbox settings come from the same
 * settings table, read from the environment (values checked as for the worker). */
static void test_settings_from_env(void)
{
	char dir[] = "/tmp/arbiter-evlocks-XXXXXX";
	if (!mkdtemp(dir)) {
		ok(0, "settings: mkdtemp");
		return;
	}
	char err[512] = "";
	struct sandbox_pool *p = NULL;
	unsetenv("ARBITER_LANGUAGES_FILE");   /* a slow run's table is gone by now: the built-in */
	setenv("ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY", "yes", 1);
	ok(sandbox_pool_new(&loop, NULL, &p, err, sizeof err) < 0 &&
	   strstr(err, "ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY"),
	   "settings: a bad ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY is refused, named (%s)", err);
	unsetenv("ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY");
	setenv("ARBITER_SANDBOX_LOCK_DIR", dir, 1);
	p = NULL;
	int rc = sandbox_pool_new(&loop, NULL, &p, err, sizeof err);
	ok(rc == 0, "settings: a pool with ARBITER_SANDBOX_LOCK_DIR from the environment (%s)",
	   rc == 0 ? "" : err);
	char lock[256];
	snprintf(lock, sizeof lock, "%s/uid-%lu", dir, uid_base / 64 * 64);
	ok(access(lock, F_OK) == 0, "settings: its uid lock is in that directory (%s)", lock);
	sandbox_pool_free(p);
	uv_run(&loop, UV_RUN_DEFAULT);
	unsetenv("ARBITER_SANDBOX_LOCK_DIR");
	snprintf(lock, sizeof lock, "%s/cgroup2", dir);
	(void)rmdir(lock);
	ok(rmdir(dir) == 0, "settings: the lock directory is left empty");
}

int main(void)
{
	if (geteuid() != 0) {
		printf("1..0 # SKIP the sandbox needs root\n");
		return 0;
	}
	log_setup(LOG_WARN, "test-evaluator");
	const char *sl = getenv("ARBITER_TEST_SLOW");
	if (sl && atoi(sl) > 1)
		slow = (unsigned)atoi(sl);
	uv_loop_init(&loop);
	char err[512];
	/* the default language table is the built-in copy of deploy/languages.json */
	unsetenv("ARBITER_LANGUAGES_FILE");
	char slow_langs[] = "/tmp/arbiter-langs-XXXXXX";
	if (slow > 1) {
		/* the shipped table with its compile limits widened too */
		json_t *t = json_load_file("deploy/languages.json", 0, NULL);
		const char *name;
		json_t *l;
		json_object_foreach(t, name, l) {
			json_t *cl = json_object_get(l, "compile_limits");
			if (!json_is_object(cl))
				continue;
			json_int_t c = json_integer_value(json_object_get(cl, "cpu_ms"));
			json_int_t w = json_integer_value(json_object_get(cl, "wall_ms"));
			json_object_set_new(cl, "cpu_ms", json_integer((c ? c : 10000) * slow));
			json_object_set_new(cl, "wall_ms", json_integer((w ? w : 20000) * slow));
		}
		int fd = mkstemp(slow_langs);
		if (t && fd >= 0 && json_dumpfd(t, fd, 0) == 0)
			setenv("ARBITER_LANGUAGES_FILE", slow_langs, 1);
		if (fd >= 0)
			close(fd);
		json_decref(t);
	}
	setenv("ARBITER_SANDBOX_SLOTS", "2", 1);
	char image_dir[] = "/tmp/arbiter-test-images-XXXXXX";
	if (mkdtemp(image_dir))
		setenv("ARBITER_IMAGE_DIR", image_dir, 1);
	uid_base = 2100000000ul + (unsigned long)(getpid() % 65536) * 64;
	char ub[32];
	snprintf(ub, sizeof ub, "%lu", uid_base);
	setenv("ARBITER_SANDBOX_UID_BASE", ub, 1);
	if (sandbox_pool_new(&loop, NULL, &sp, err, sizeof err) < 0) {
		ok(0, "sandbox_pool_new: %s", err);
		return tap_done();
	}
	test_languages();
	test_numeric_exact();
	test_weights_and_compare();
	test_language_choice_and_files();
	test_hostile();
	test_network();
	test_secrets();
	test_host_writes();
	test_daemon_and_killall();
	test_scripts();
	test_language_file();
	test_regressions();
	test_container_image(image_dir);
	if (slow > 1)
		unlink(slow_langs);
	is_int(sandbox_pool_busy(sp), 0, "pool idle at the end");
	sandbox_pool_free(sp);
	uv_run(&loop, UV_RUN_DEFAULT);
	test_settings_from_env();
	is_int(sandbox_cgroup_leftovers(), 0, "no cgroup directory left behind");
	ok(uv_loop_close(&loop) == 0, "loop closes cleanly");
	return tap_done();
}
