/*
 * Scoring spec parsing and validation (CONTRACT §3; see spec.h). Every rule
 * failure produces one message naming the dimension and the rule; the first
 * failure in document order wins. The parsed spec is immutable.
 */
#include "spec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "jcanon.h"
#include "jpath.h"
#include "rubric.h"
#include "util.h"

struct spec {
	json_t *json;
	enum spec_evaluator ev;
	size_t ndims;
	struct spec_dim dims[SPEC_MAX_DIMS];
	size_t order[SPEC_MAX_DIMS];
	double win, draw;
	bool has_budget, has_llm, has_tool;
	int64_t budget, llm, tool;
	struct rubric *rubric;   /* judge criteria and settings, NULL without (rubric.h) */
};

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...)
{
	if (n) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* The number as its shortest decimal text, for messages. */
static void num_text(const json_t *v, char *buf, size_t n)
{
	if (json_is_integer(v))
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		dec_shortest(json_real_value(v), buf, n);
	else
		snprintf(buf, n, "?");
}

static bool key_valid(const char *k, size_t len)
{
	if (len < 1 || len > 32 || k[0] < 'a' || k[0] > 'z')
		return false;
	for (size_t i = 1; i < len; i++) {
		char c = k[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

/* Non-negative integral number that fits int64 (integers, or reals like 5.0). */
static bool as_count(const json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = (int64_t)json_integer_value(v);
		return *out >= 0;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (d < 0 || d != floor(d) || d >= 9.2e18)
			return false;
		*out = (int64_t)d;
		return true;
	}
	return false;
}

static void dim_free(struct spec_dim *d)
{
	jpath_free(d->field);
	jpath_free(d->gt_field);
	expr_free(d->expr);
	for (size_t i = 0; i < d->nvars; i++) {
		free(d->vars[i].name);
		free(d->vars[i].text);
		jpath_free(d->vars[i].path);
	}
	free(d->vars);
}

void spec_free(struct spec *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->ndims; i++)
		dim_free(&s->dims[i]);
	rubric_free(s->rubric);
	json_decref(s->json);
	free(s);
}

/* Reads a path parameter (field / ground_truth_field). */
static int parse_path_param(const json_t *dim, const char *key, const char *dkey,
                            const char *pname, struct jpath **out, char *err, size_t errlen)
{
	const json_t *v = json_object_get(dim, key);
	char why[160];
	if (!v)
		return fail(err, errlen, "dimension '%s': primitive %s needs %s", dkey, pname, key);
	if (!json_is_string(v))
		return fail(err, errlen, "dimension '%s': %s must be a string, not %s", dkey, key,
		            jcanon_type_name(v));
	if (jpath_parse(json_string_value(v), json_string_length(v), out, why, sizeof why) < 0)
		return fail(err, errlen, "dimension '%s': %s '%.100s' is not a valid path: %s", dkey,
		            key, json_string_value(v), why);
	return 0;
}

static int parse_expression(const json_t *dim, struct spec_dim *d, char *err, size_t errlen)
{
	const json_t *src = json_object_get(dim, "expr");
	const json_t *vars = json_object_get(dim, "vars");
	char why[200];
	if (!src)
		return fail(err, errlen, "dimension '%s': primitive expression needs expr", d->key);
	if (!json_is_string(src))
		return fail(err, errlen, "dimension '%s': expr must be a string, not %s", d->key,
		            jcanon_type_name(src));
	if (vars && !json_is_object(vars))
		return fail(err, errlen, "dimension '%s': vars must be an object, not %s", d->key,
		            jcanon_type_name(vars));
	size_t nv = vars ? json_object_size(vars) : 0;
	d->vars = xcalloc(nv ? nv : 1, sizeof *d->vars);
	const char *name;
	json_t *path;
	if (vars) {
		json_object_foreach((json_t *)vars, name, path) {
			struct spec_var *v = &d->vars[d->nvars];
			if (!json_is_string(path))
				return fail(err, errlen, "dimension '%s': vars.%.64s must be a path string, not %s",
				            d->key, name, jcanon_type_name(path));
			const char *t = json_string_value(path);
			size_t tl = json_string_length(path);
			v->name = xstrdup(name);
			v->text = xstrndup(t, tl);
			d->nvars++;
			v->src = SPEC_VAR_ANSWER;
			if (tl > 9 && !strncmp(t, "metadata.", 9)) {
				v->src = SPEC_VAR_METADATA;
				t += 9;
				tl -= 9;
			} else if (tl > 13 && !strncmp(t, "ground_truth.", 13)) {
				v->src = SPEC_VAR_GROUND_TRUTH;
				t += 13;
				tl -= 13;
			}
			if (jpath_parse(t, tl, &v->path, why, sizeof why) < 0)
				return fail(err, errlen, "dimension '%s': vars.%.64s '%.100s' is not a valid path: %s",
				            d->key, name, v->text, why);
		}
	}
	/* Variables keep the order in which `vars` declares them (jansson preserves object key
	 * order), so their warnings come in the order a challenge author wrote them. */
	const char **names = xcalloc(d->nvars ? d->nvars : 1, sizeof *names);
	for (size_t i = 0; i < d->nvars; i++)
		names[i] = d->vars[i].name;
	int rc = expr_parse(json_string_value(src), names, d->nvars, &d->expr, why, sizeof why);
	free(names);
	if (rc < 0)
		return fail(err, errlen, "dimension '%s': expression '%.100s' does not parse: %s", d->key,
		            json_string_value(src), why);
	return 0;
}

/* Primitive parameters; d->prim is set. */
static int parse_params(const json_t *dim, struct spec_dim *d, char *err, size_t errlen)
{
	const char *pname = prim_kind_name(d->prim);
	const json_t *v;
	char nb[40];
	if (prim_reads_fields(d->prim)) {
		if (parse_path_param(dim, "field", d->key, pname, &d->field, err, errlen) < 0 ||
		    parse_path_param(dim, "ground_truth_field", d->key, pname, &d->gt_field, err,
		                     errlen) < 0)
			return -1;
	}
	switch (d->prim) {
	case PRIM_EXACT_MATCH:
		v = json_object_get(dim, "case_insensitive");
		if (v && !json_is_boolean(v))
			return fail(err, errlen, "dimension '%s': case_insensitive must be true or false",
			            d->key);
		d->case_insensitive = json_is_true(v);
		break;
	case PRIM_NUMERIC_TOLERANCE:
		d->tolerance.m = 1;
		d->tolerance.e = -2;   /* 0.01 */
		v = json_object_get(dim, "tolerance");
		if (v) {
			if (!json_is_number(v))
				return fail(err, errlen, "dimension '%s': tolerance must be a number, not %s",
				            d->key, jcanon_type_name(v));
			dec_num_from_json(v, &d->tolerance);
			if (d->tolerance.m < 0) {
				num_text(v, nb, sizeof nb);
				return fail(err, errlen, "dimension '%s': tolerance %s must be >= 0", d->key, nb);
			}
		}
		v = json_object_get(dim, "decay");
		if (v) {
			if (!json_is_string(v) || (strcmp(json_string_value(v), "none") &&
			                           strcmp(json_string_value(v), "linear")))
				return fail(err, errlen, "dimension '%s': decay must be \"none\" or \"linear\"",
				            d->key);
			d->linear = !strcmp(json_string_value(v), "linear");
		}
		break;
	case PRIM_TIME_DECAY:
		d->curve = 1.0;
		v = json_object_get(dim, "time_limit_secs");
		if (v) {
			if (!json_is_number(v))
				return fail(err, errlen, "dimension '%s': time_limit_secs must be a number, not %s",
				            d->key, jcanon_type_name(v));
			dec_num_from_json(v, &d->time_limit_secs);
			if (d->time_limit_secs.m <= 0) {
				num_text(v, nb, sizeof nb);
				return fail(err, errlen, "dimension '%s': time_limit_secs %s must be > 0", d->key, nb);
			}
			d->has_time_limit = true;
		}
		v = json_object_get(dim, "curve");
		if (v) {
			if (!json_is_number(v))
				return fail(err, errlen, "dimension '%s': curve must be a number, not %s", d->key,
				            jcanon_type_name(v));
			d->curve = json_number_value(v);
			if (!(d->curve > 0)) {
				num_text(v, nb, sizeof nb);
				return fail(err, errlen, "dimension '%s': curve %s must be > 0", d->key, nb);
			}
		}
		break;
	case PRIM_SET_OVERLAP:
		d->jaccard = true;
		v = json_object_get(dim, "method");
		if (v) {
			if (!json_is_string(v) || (strcmp(json_string_value(v), "jaccard") &&
			                           strcmp(json_string_value(v), "intersection")))
				return fail(err, errlen,
				            "dimension '%s': method must be \"jaccard\" or \"intersection\"", d->key);
			d->jaccard = !strcmp(json_string_value(v), "jaccard");
		}
		break;
	case PRIM_EXPRESSION:
		return parse_expression(dim, d, err, errlen);
	default:
		break;
	}
	return 0;
}

static int parse_dim(struct spec *s, size_t i, const json_t *dim, json_t *gate_targets[],
                     char *err, size_t errlen)
{
	struct spec_dim *d = &s->dims[i];
	char nb[40];
	if (!json_is_object(dim))
		return fail(err, errlen, "dimensions[%zu] must be an object, not %s", i, jcanon_type_name(dim));
	const json_t *k = json_object_get(dim, "key");
	if (!k)
		return fail(err, errlen, "dimensions[%zu]: key is required", i);
	if (!json_is_string(k))
		return fail(err, errlen, "dimensions[%zu]: key must be a string, not %s", i, jcanon_type_name(k));
	if (!key_valid(json_string_value(k), json_string_length(k)))
		return fail(err, errlen, "dimensions[%zu]: key '%.64s' does not match ^[a-z][a-z0-9_]{0,31}$",
		            i, json_string_value(k));
	memcpy(d->key, json_string_value(k), json_string_length(k) + 1);
	for (size_t j = 0; j < i; j++)
		if (!strcmp(s->dims[j].key, d->key))
			return fail(err, errlen, "dimension '%s': key is not unique (also dimensions[%zu])",
			            d->key, j);

	const json_t *w = json_object_get(dim, "weight");
	int places;
	if (!w)
		return fail(err, errlen, "dimension '%s': weight is required", d->key);
	if (!json_is_number(w))
		return fail(err, errlen, "dimension '%s': weight must be a number, not %s", d->key,
		            jcanon_type_name(w));
	num_text(w, nb, sizeof nb);
	int rc = dec_from_json(w, &d->weight, &places);
	if (places > 6)
		return fail(err, errlen, "dimension '%s': weight %s has more than 6 decimal places",
		            d->key, nb);
	if (rc < 0 || d->weight <= 0 || d->weight > DEC6_ONE)
		return fail(err, errlen, "dimension '%s': weight %s is not in (0, 1]", d->key, nb);

	const json_t *p = json_object_get(dim, "primitive");
	if (p) {
		if (!json_is_string(p))
			return fail(err, errlen, "dimension '%s': primitive must be a string, not %s", d->key,
			            jcanon_type_name(p));
		if (prim_kind_from_name(json_string_value(p), &d->prim) < 0)
			return fail(err, errlen, "dimension '%s': unknown primitive '%.64s'", d->key,
			            json_string_value(p));
		if (parse_params(dim, d, err, errlen) < 0)
			return -1;
	} else if (rubric_dim_is_judge(dim)) {
		d->external = true;   /* scored by the LLM judge (rubric.h) */
	} else if (s->ev == SPEC_DETERMINISTIC || s->ev == SPEC_JUDGE) {
		return fail(err, errlen, "dimension '%s': primitive is required (evaluator %s)",
		            d->key, spec_evaluator_name(s->ev));
	}

	const json_t *g = json_object_get(dim, "gate");
	if (g) {
		if (!json_is_object(g))
			return fail(err, errlen, "dimension '%s': gate must be an object, not %s", d->key,
			            jcanon_type_name(g));
		const json_t *gd = json_object_get(g, "dimension"), *ga = json_object_get(g, "above");
		if (!gd || !json_is_string(gd))
			return fail(err, errlen, "dimension '%s': gate.dimension must be a dimension key",
			            d->key);
		if (!ga || !json_is_number(ga))
			return fail(err, errlen, "dimension '%s': gate.above must be a number", d->key);
		d->has_gate = true;
		d->gate_above = json_number_value(ga);
		gate_targets[i] = (json_t *)gd;
	}
	return 0;
}

/* Depth-first topological sort; reports the first cycle found. */
static int topo(struct spec *s, char *err, size_t errlen)
{
	int state[SPEC_MAX_DIMS] = { 0 };   /* 0 new, 1 on stack, 2 done */
	size_t n = 0;
	for (size_t r = 0; r < s->ndims; r++) {
		if (state[r])
			continue;
		/* Gates form chains (one gate per dimension): follow the chain from r. */
		size_t chain[SPEC_MAX_DIMS + 1], len = 0, c = r;
		for (;;) {
			if (state[c] == 2)
				break;
			if (state[c] == 1) {
				char msg[600] = "";
				size_t start = 0;
				while (chain[start] != c)
					start++;
				size_t off = 0;
				for (size_t k = start; k < len; k++)
					off += (size_t)snprintf(msg + off, sizeof msg - off, "%s -> ",
					                        s->dims[chain[k]].key);
				snprintf(msg + off, sizeof msg - off, "%s", s->dims[c].key);
				return fail(err, errlen, "dimension '%s': gates form a cycle: %s",
				            s->dims[c].key, msg);
			}
			state[c] = 1;
			chain[len++] = c;
			if (!s->dims[c].has_gate)
				break;
			c = s->dims[c].gate_dim;
		}
		while (len > 0) {
			size_t x = chain[--len];
			state[x] = 2;
			s->order[n++] = x;
		}
	}
	return 0;
}

static int parse_thresholds(struct spec *s, const json_t *t, char *err, size_t errlen)
{
	s->win = 700;
	s->draw = 400;
	if (!t)
		return 0;
	if (!json_is_object(t))
		return fail(err, errlen, "thresholds must be an object, not %s", jcanon_type_name(t));
	const json_t *w = json_object_get(t, "win"), *d = json_object_get(t, "draw");
	if (w && !json_is_number(w))
		return fail(err, errlen, "thresholds.win must be a number, not %s", jcanon_type_name(w));
	if (d && !json_is_number(d))
		return fail(err, errlen, "thresholds.draw must be a number, not %s", jcanon_type_name(d));
	if (w)
		s->win = json_number_value(w);
	if (d)
		s->draw = json_number_value(d);
	if (!(0 <= s->draw && s->draw <= s->win && s->win <= 1000)) {
		char a[40], b[40];
		dec_shortest(s->draw, a, sizeof a);
		dec_shortest(s->win, b, sizeof b);
		return fail(err, errlen, "thresholds must satisfy 0 <= draw <= win <= 1000 (draw %s, win %s)",
		            a, b);
	}
	return 0;
}

static int parse_constraints(struct spec *s, const json_t *c, char *err, size_t errlen)
{
	static const char *const names[3] = { "token_budget", "max_llm_calls", "max_tool_calls" };
	bool *has[3] = { &s->has_budget, &s->has_llm, &s->has_tool };
	int64_t *val[3] = { &s->budget, &s->llm, &s->tool };
	if (!c)
		return 0;
	if (!json_is_object(c))
		return fail(err, errlen, "constraints must be an object, not %s", jcanon_type_name(c));
	for (int i = 0; i < 3; i++) {
		const json_t *v = json_object_get(c, names[i]);
		if (!v || json_is_null(v))
			continue;
		if (!as_count(v, val[i]))
			return fail(err, errlen, "constraints.%s must be a non-negative integer", names[i]);
		*has[i] = true;
	}
	return 0;
}

static int find_dim(const struct spec *s, const char *key)
{
	for (size_t i = 0; i < s->ndims; i++)
		if (!strcmp(s->dims[i].key, key))
			return (int)i;
	return -1;
}

static bool pos_int(const json_t *v)
{
	int64_t x;
	return as_count(v, &x) && x > 0;
}

static int parse_test_suite(struct spec *s, const json_t *ts, char *err, size_t errlen)
{
	if (!ts)
		return fail(err, errlen, "evaluator test-suite needs a test_suite object");
	if (!json_is_object(ts))
		return fail(err, errlen, "test_suite must be an object, not %s", jcanon_type_name(ts));
	const json_t *lang = json_object_get(ts, "language");
	bool lang_ok = json_is_string(lang) && json_string_length(lang) > 0;
	if (json_is_array(lang) && json_array_size(lang) > 0) {
		lang_ok = true;
		for (size_t i = 0; i < json_array_size(lang); i++)
			if (!json_is_string(json_array_get(lang, i)))
				lang_ok = false;
	}
	if (!lang_ok)
		return fail(err, errlen, "test_suite.language must be a language name (or a non-empty "
		            "array of names)");
	const json_t *cases = json_object_get(ts, "cases");
	if (!json_is_array(cases) || json_array_size(cases) == 0)
		return fail(err, errlen, "test_suite.cases must be a non-empty array");
	for (size_t i = 0; i < json_array_size(cases); i++) {
		const json_t *c = json_array_get(cases, i);
		if (!json_is_object(c))
			return fail(err, errlen, "test_suite.cases[%zu] must be an object", i);
		const json_t *v = json_object_get(c, "name");
		if (!json_is_string(v))
			return fail(err, errlen, "test_suite.cases[%zu]: name must be a string", i);
		v = json_object_get(c, "stdin");
		if (v && !json_is_string(v))
			return fail(err, errlen, "test_suite.cases[%zu]: stdin must be a string", i);
		v = json_object_get(c, "expected_stdout");
		if (!json_is_string(v))
			return fail(err, errlen, "test_suite.cases[%zu]: expected_stdout must be a string", i);
		v = json_object_get(c, "weight");
		if (v && !(json_is_number(v) && json_number_value(v) > 0))
			return fail(err, errlen, "test_suite.cases[%zu]: weight must be a number > 0", i);
	}
	const json_t *cmp = json_object_get(ts, "compare");
	if (cmp) {
		const char *c = json_is_string(cmp) ? json_string_value(cmp) : "";
		bool ok = !strcmp(c, "exact") || !strcmp(c, "trim");
		if (!strncmp(c, "numeric:", 8)) {
			char *end;
			double tol = strtod(c + 8, &end);
			ok = c[8] && *end == 0 && isfinite(tol) && tol >= 0;
		}
		if (!ok)
			return fail(err, errlen, "test_suite.compare must be \"exact\", \"trim\" or "
			            "\"numeric:TOL\" with TOL >= 0");
	}
	const json_t *lim = json_object_get(ts, "limits");
	if (lim) {
		if (!json_is_object(lim))
			return fail(err, errlen, "test_suite.limits must be an object");
		static const char *const ln[] = { "cpu_ms", "wall_ms", "memory_mb", "processes",
		                                  "output_kb" };
		for (size_t i = 0; i < sizeof ln / sizeof ln[0]; i++) {
			const json_t *v = json_object_get(lim, ln[i]);
			if (v && !pos_int(v))
				return fail(err, errlen, "test_suite.limits.%s must be a positive integer", ln[i]);
		}
	}
	const json_t *dim = json_object_get(ts, "dimension");
	const char *dk = "correctness";
	if (dim) {
		if (!json_is_string(dim))
			return fail(err, errlen, "test_suite.dimension must be a dimension key");
		dk = json_string_value(dim);
	}
	int di = find_dim(s, dk);
	if (di < 0)
		return fail(err, errlen, "test_suite.dimension '%.64s' is not a dimension of this spec", dk);
	s->dims[di].external = true;
	s->dims[di].prim = PRIM_NONE;
	for (size_t i = 0; i < s->ndims; i++)
		if (!s->dims[i].external && s->dims[i].prim == PRIM_NONE)
			return fail(err, errlen, "dimension '%s': primitive is required (only test_suite."
			            "dimension '%s' is scored by the tests)", s->dims[i].key, dk);
	return 0;
}

static int parse_script(struct spec *s, const json_t *sc, char *err, size_t errlen)
{
	if (!sc)
		return fail(err, errlen, "evaluator custom-script needs a script object");
	if (!json_is_object(sc))
		return fail(err, errlen, "script must be an object, not %s", jcanon_type_name(sc));
	const json_t *v = json_object_get(sc, "language");
	if (!json_is_string(v) || json_string_length(v) == 0)
		return fail(err, errlen, "script.language must be a language name");
	v = json_object_get(sc, "source");
	if (!json_is_string(v))
		return fail(err, errlen, "script.source must be a string");
	v = json_object_get(sc, "timeout_ms");
	if (v && !pos_int(v))
		return fail(err, errlen, "script.timeout_ms must be a positive integer");
	for (size_t i = 0; i < s->ndims; i++)
		if (s->dims[i].prim == PRIM_NONE)
			s->dims[i].external = true;
	return 0;
}

int spec_from_json(const json_t *root, struct spec **out, char *err, size_t errlen)
{
	*out = NULL;
	if (!json_is_object(root))
		return fail(err, errlen, "spec must be a JSON object, not %s", root ? jcanon_type_name(root) : "empty");
	struct spec *s = xcalloc(1, sizeof *s);
	s->json = json_incref((json_t *)root);
	json_t *gate_targets[SPEC_MAX_DIMS] = { 0 };
	json_t *expanded = NULL;   /* the seed's rubric form, as ordinary dimensions (rubric.h) */
	if (rubric_expand(root, &expanded, err, errlen) < 0)
		goto bad;
	if (expanded) {
		spec_free(s);
		int rc = spec_from_json(expanded, out, err, errlen);
		json_decref(expanded);
		return rc;
	}

	const json_t *ev = json_object_get(root, "evaluator");
	if (!ev) {
		fail(err, errlen, "evaluator is required (deterministic, test-suite, custom-script or judge)");
		goto bad;
	}
	const char *evs = json_is_string(ev) ? json_string_value(ev) : "";
	if (!strcmp(evs, "deterministic")) {
		s->ev = SPEC_DETERMINISTIC;
	} else if (!strcmp(evs, "test-suite")) {
		s->ev = SPEC_TEST_SUITE;
	} else if (!strcmp(evs, "custom-script")) {
		s->ev = SPEC_CUSTOM_SCRIPT;
	} else if (!strcmp(evs, "judge")) {
		s->ev = SPEC_JUDGE;
	} else {
		if (json_is_string(ev))
			fail(err, errlen, "evaluator '%.64s' is not one of deterministic, test-suite, "
			     "custom-script, judge", evs);
		else
			fail(err, errlen, "evaluator must be a string, not %s", jcanon_type_name(ev));
		goto bad;
	}

	const json_t *dims = json_object_get(root, "dimensions");
	if (!dims) {
		fail(err, errlen, "dimensions is required");
		goto bad;
	}
	if (!json_is_array(dims)) {
		fail(err, errlen, "dimensions must be an array, not %s", jcanon_type_name(dims));
		goto bad;
	}
	size_t nd = json_array_size(dims);
	if (nd < 1 || nd > SPEC_MAX_DIMS) {
		fail(err, errlen, "dimensions must have 1 to 16 entries (has %zu)", nd);
		goto bad;
	}
	for (size_t i = 0; i < nd; i++) {
		s->ndims = i + 1;   /* so spec_free releases what was parsed */
		if (parse_dim(s, i, json_array_get(dims, i), gate_targets, err, errlen) < 0)
			goto bad;
	}
	for (size_t i = 0; i < nd; i++) {
		if (!gate_targets[i])
			continue;
		const char *t = json_string_value(gate_targets[i]);
		int gi = find_dim(s, t);
		if (gi < 0) {
			fail(err, errlen, "dimension '%s': gate dimension '%.64s' does not exist",
			     s->dims[i].key, t);
			goto bad;
		}
		if ((size_t)gi == i) {
			fail(err, errlen, "dimension '%s': gate refers to the dimension itself", s->dims[i].key);
			goto bad;
		}
		s->dims[i].gate_dim = (size_t)gi;
	}
	if (topo(s, err, errlen) < 0)
		goto bad;

	dec6 sum = 0;
	for (size_t i = 0; i < nd; i++)
		sum += s->dims[i].weight;
	if (sum != DEC6_ONE) {
		char b[40];
		dec_format(sum, b, sizeof b);
		fail(err, errlen, "weights must sum to exactly 1 (they sum to %s)", b);
		goto bad;
	}
	if (parse_thresholds(s, json_object_get(root, "thresholds"), err, errlen) < 0 ||
	    parse_constraints(s, json_object_get(root, "constraints"), err, errlen) < 0)
		goto bad;
	if (s->ev == SPEC_TEST_SUITE &&
	    parse_test_suite(s, json_object_get(root, "test_suite"), err, errlen) < 0)
		goto bad;
	if (s->ev == SPEC_CUSTOM_SCRIPT &&
	    parse_script(s, json_object_get(root, "script"), err, errlen) < 0)
		goto bad;
	if (rubric_from_spec(root, spec_evaluator_name(s->ev), &s->rubric, err, errlen) < 0)
		goto bad;
	*out = s;
	return 0;
bad:
	spec_free(s);
	return -1;
}

int spec_parse(const char *text, size_t len, struct spec **out, char *err, size_t errlen)
{
	json_error_t je;
	*out = NULL;
	json_t *root = json_loadb(text, len, 0, &je);
	if (!root)
		return fail(err, errlen, "line %d, column %d: %s", je.line, je.column, je.text);
	int rc = spec_from_json(root, out, err, errlen);
	json_decref(root);
	return rc;
}

enum spec_evaluator spec_evaluator(const struct spec *s)
{
	return s->ev;
}

const char *spec_evaluator_name(enum spec_evaluator e)
{
	switch (e) {
	case SPEC_TEST_SUITE: return "test-suite";
	case SPEC_CUSTOM_SCRIPT: return "custom-script";
	case SPEC_JUDGE: return "judge";
	default: return "deterministic";
	}
}

const struct rubric *spec_rubric(const struct spec *s)
{
	return s->rubric;
}

const json_t *spec_json(const struct spec *s)
{
	return s->json;
}

size_t spec_ndims(const struct spec *s)
{
	return s->ndims;
}

const char *spec_dim_key(const struct spec *s, size_t i)
{
	return i < s->ndims ? s->dims[i].key : NULL;
}

bool spec_dim_external(const struct spec *s, size_t i)
{
	return i < s->ndims && s->dims[i].external;
}

const struct spec_dim *spec_dim(const struct spec *s, size_t i)
{
	return i < s->ndims ? &s->dims[i] : NULL;
}

const size_t *spec_topo_order(const struct spec *s)
{
	return s->order;
}

double spec_win(const struct spec *s)
{
	return s->win;
}

double spec_draw(const struct spec *s)
{
	return s->draw;
}

bool spec_constraint(const struct spec *s, const char *name, int64_t *v)
{
	if (!strcmp(name, "token_budget") && s->has_budget) {
		*v = s->budget;
		return true;
	}
	if (!strcmp(name, "max_llm_calls") && s->has_llm) {
		*v = s->llm;
		return true;
	}
	if (!strcmp(name, "max_tool_calls") && s->has_tool) {
		*v = s->tool;
		return true;
	}
	return false;
}
