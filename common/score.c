/*
 * Evaluation of a scoring spec (CONTRACT §3; see score.h): primitives per
 * dimension, external scores from the test-suite / custom-script evaluator,
 * gates in topological order, the exact weighted total in dec6 fixed point,
 * win/draw/loss, the verified-trajectory check, constraint violations and the
 * result JSON with exact decimals.
 */
#include "score.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "isotime.h"
#include "jcanon.h"
#include "jpath.h"
#include "prim.h"
#include "util.h"

#define VERIFY_SLACK_MS 5000

const char *score_outcome_name(enum score_outcome o)
{
	switch (o) {
	case SCORE_WIN: return "win";
	case SCORE_DRAW: return "draw";
	default: return "loss";
	}
}

static void warn(json_t *arr, const char *severity, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void warn(json_t *arr, const char *severity, const char *field, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_t *w = json_object();
	json_object_set_new(w, "severity", json_string(severity));
	json_object_set_new(w, "field", json_string(field));
	json_object_set_new(w, "message", json_string(msg));
	json_array_append_new(arr, w);
}

bool score_verified(const json_t *metadata, const struct score_match *m)
{
	if (!m || !m->has_times || !json_is_object(metadata))
		return false;
	const json_t *log = json_object_get(metadata, "replay_log");
	size_t n = json_array_size(log);
	if (!json_is_array(log) || n == 0)
		return false;
	int64_t lo = m->started_at_ms - VERIFY_SLACK_MS, hi = m->submitted_at_ms + VERIFY_SLACK_MS;
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(log, i);
		const json_t *ts = json_object_get(e, "ts");
		int64_t t;
		if (!json_is_object(e) || !json_is_string(ts) ||
		    isotime_parse(json_string_value(ts), json_string_length(ts), &t) < 0 || t < lo || t > hi)
			return false;
	}
	return true;
}

struct ctx {
	const struct spec *s;
	const json_t *answer, *metadata, *gt;
	const struct score_match *m;
	size_t max_str;
	bool verified;
	json_t *warnings;
};

/* field path as shown in warnings: answer paths as written, others with their document. */
static void gt_name(const struct jpath *p, char *buf, size_t n)
{
	snprintf(buf, n, "ground_truth.%s", jpath_text(p));
}

/* The JSON type a field primitive needs on either side, as text for the warning; NULL when
 * v has it (exact_match takes any value). Shapes that depend on both sides (numeric_tolerance's
 * scalar vs array) are checked by the primitive itself. */
static const char *needed_type(enum prim_kind k, const json_t *v)
{
	switch (k) {
	case PRIM_EXACT_MATCH_RATIO: case PRIM_COVERAGE_RATIO: case PRIM_SET_OVERLAP:
		return json_is_array(v) ? NULL : "an array";
	case PRIM_FUZZY_STRING:
		return json_is_string(v) ? NULL : "a string";
	case PRIM_NUMERIC_TOLERANCE:
		return json_is_number(v) || json_is_array(v) ? NULL : "a number or an array";
	default:
		return NULL;
	}
}

/* Resolves the two fields of d; 0 and both values, or -1 after warning. Each side that is
 * missing or ill-typed gets its own warning (answer side first), so a submission learns about
 * every bad value, not only the first. */
static int resolve_fields(struct ctx *c, const struct spec_dim *d, const json_t **got,
                          const json_t **want)
{
	char why[200], gname[1100];
	const char *need;
	int rc = 0;
	*got = jpath_get(d->field, c->answer, why, sizeof why);
	if (!*got) {
		warn(c->warnings, "error", jpath_text(d->field), "dimension '%s': no value at '%s' in the "
		     "answer (%s)", d->key, jpath_text(d->field), why);
		rc = -1;
	} else if ((need = needed_type(d->prim, *got))) {
		warn(c->warnings, "error", jpath_text(d->field), "dimension '%s': submitted value at '%s' "
		     "is %s, not %s", d->key, jpath_text(d->field), jcanon_type_name(*got), need);
		rc = -1;
	}
	*want = jpath_get(d->gt_field, c->gt, why, sizeof why);
	gt_name(d->gt_field, gname, sizeof gname);
	if (!*want) {
		warn(c->warnings, "error", gname, "dimension '%s': no value at '%s' in the ground truth "
		     "(%s)", d->key, jpath_text(d->gt_field), why);
		rc = -1;
	} else if ((need = needed_type(d->prim, *want))) {
		warn(c->warnings, "error", gname, "dimension '%s': ground-truth value at '%s' is %s, "
		     "not %s", d->key, jpath_text(d->gt_field), jcanon_type_name(*want), need);
		rc = -1;
	}
	if (rc == 0 && prim_has_long_string(*got, c->max_str)) {
		warn(c->warnings, "error", jpath_text(d->field), "dimension '%s': value at '%s' holds a "
		     "string longer than %zu bytes", d->key, jpath_text(d->field), c->max_str);
		rc = -1;
	}
	if (rc == 0 && prim_has_long_string(*want, c->max_str)) {
		gt_name(d->gt_field, gname, sizeof gname);
		warn(c->warnings, "error", gname, "dimension '%s': ground-truth value at '%s' holds a "
		     "string longer than %zu bytes", d->key, jpath_text(d->gt_field), c->max_str);
		rc = -1;
	}
	return rc;
}

static int eval_time_decay(struct ctx *c, const struct spec_dim *d)
{
	struct dec_num lim;
	if (!c->m->has_times) {
		warn(c->warnings, "error", "started_at", "dimension '%s': time_decay needs the match's "
		     "started_at and submitted_at", d->key);
		return 0;
	}
	if (d->has_time_limit) {
		lim = d->time_limit_secs;
	} else if (c->m->time_limit_secs > 0) {
		lim.m = c->m->time_limit_secs;
		lim.e = 0;
	} else {
		warn(c->warnings, "error", "time_limit_secs", "dimension '%s': time_decay has no time "
		     "limit (neither the dimension's nor the challenge's time_limit_secs)", d->key);
		return 0;
	}
	return prim_time_decay(c->m->submitted_at_ms - c->m->started_at_ms, &lim, d->curve);
}

static int eval_efficiency(struct ctx *c, const struct spec_dim *d, const char *constraint,
                           const char *count_key)
{
	int64_t budget;
	char fname[64];
	if (!c->verified || !spec_constraint(c->s, constraint, &budget))
		return 0;
	snprintf(fname, sizeof fname, "metadata.%s", count_key);
	const json_t *v = json_is_object(c->metadata) ? json_object_get(c->metadata, count_key) : NULL;
	if (!v) {
		warn(c->warnings, "error", fname, "dimension '%s': %s is missing", d->key, fname);
		return 0;
	}
	struct prim_err e;
	int r = prim_efficiency(v, budget, &e);
	if (r == PRIM_BAD) {
		warn(c->warnings, "error", fname, "dimension '%s': %s: %s", d->key, fname, e.why);
		return 0;
	}
	return r;
}

static int eval_expression(struct ctx *c, const struct spec_dim *d)
{
	double vals[64];
	double *values = d->nvars <= 64 ? vals : xcalloc(d->nvars, sizeof *values);
	char why[200];
	bool ok = true;
	for (size_t i = 0; i < d->nvars; i++) {
		const struct spec_var *v = &d->vars[i];
		const json_t *doc = v->src == SPEC_VAR_METADATA ? c->metadata
		                  : v->src == SPEC_VAR_GROUND_TRUTH ? c->gt : c->answer;
		const json_t *x = jpath_get(v->path, doc, why, sizeof why);
		if (!x) {
			warn(c->warnings, "error", v->text, "dimension '%s': variable '%s': no value at '%s' (%s)",
			     d->key, v->name, v->text, why);
			ok = false;
		} else if (json_is_number(x)) {
			values[i] = json_number_value(x);
		} else if (json_is_boolean(x)) {
			values[i] = json_is_true(x) ? 1.0 : 0.0;
		} else {
			warn(c->warnings, "error", v->text, "dimension '%s': variable '%s': value at '%s' is "
			     "not a number", d->key, v->name, v->text);
			ok = false;
		}
	}
	int score = 0;
	if (ok) {
		int div_zero = 0;
		double r = expr_eval(d->expr, values, &div_zero);
		if (div_zero)
			warn(c->warnings, "warning", d->key, "dimension '%s': division by zero in the "
			     "expression (that division counted as 0)", d->key);
		score = prim_permille_double((long double)r);
	}
	if (values != vals)
		free(values);
	return score;
}

static int eval_prim(struct ctx *c, const struct spec_dim *d)
{
	const json_t *got, *want;
	struct prim_err e;
	int r, nbad = 0;
	e.side = 0;
	e.why[0] = 0;
	switch (d->prim) {
	case PRIM_TIME_DECAY:
		return eval_time_decay(c, d);
	case PRIM_TOKEN_EFFICIENCY:
		return eval_efficiency(c, d, "token_budget", "token_count");
	case PRIM_CALL_EFFICIENCY:
		return eval_efficiency(c, d, "max_llm_calls", "llm_call_count");
	case PRIM_EXPRESSION:
		return eval_expression(c, d);
	default:
		break;
	}
	if (resolve_fields(c, d, &got, &want) < 0)
		return 0;
	switch (d->prim) {
	case PRIM_EXACT_MATCH:
		r = prim_exact_match(got, want, d->case_insensitive);
		break;
	case PRIM_EXACT_MATCH_RATIO:
		r = prim_exact_match_ratio(got, want, &e);
		break;
	case PRIM_NUMERIC_TOLERANCE:
		r = prim_numeric_tolerance(got, want, &d->tolerance, d->linear, &nbad, &e);
		if (r != PRIM_BAD && nbad > 0)
			warn(c->warnings, "warning", jpath_text(d->field), "dimension '%s': %d of %zu "
			     "elements are missing or not numbers (each counts 0)", d->key, nbad,
			     json_array_size(want));
		break;
	case PRIM_FUZZY_STRING:
		r = prim_fuzzy_string(got, want, &e);
		break;
	case PRIM_COVERAGE_RATIO:
		r = prim_coverage_ratio(got, want, &e);
		break;
	case PRIM_SET_OVERLAP:
		r = prim_set_overlap(got, want, d->jaccard, &e);
		break;
	default:
		r = 0;
		break;
	}
	if (r == PRIM_BAD) {
		char gname[1100];
		const char *f = jpath_text(d->field);
		if (e.side == 1) {
			gt_name(d->gt_field, gname, sizeof gname);
			f = gname;
		}
		warn(c->warnings, "error", f, "dimension '%s': %s", d->key, e.why);
		return 0;
	}
	return r;
}

static void add_violation(json_t *arr, const char *name, int64_t limit, const json_t *actual)
{
	if (!json_is_number(actual))
		return;
	bool over;
	if (json_is_integer(actual))
		over = (int64_t)json_integer_value(actual) > limit;
	else
		over = (long double)json_real_value(actual) > (long double)limit;
	if (!over)
		return;
	json_t *v = json_object();
	json_object_set_new(v, "constraint", json_string(name));
	json_object_set_new(v, "limit", json_integer(limit));
	json_object_set_new(v, "actual", json_copy((json_t *)actual));
	json_array_append_new(arr, v);
}

int score_eval(const struct spec *s, const json_t *answer, const json_t *metadata,
               const json_t *ground_truth, const struct score_match *m,
               const struct score_ext *ext, const struct score_limits *lim,
               struct score_result *out, char *err, size_t errlen)
{
	static const struct score_match no_match;
	json_t *empty = NULL;
	memset(out, 0, sizeof *out);
	if (!answer || !metadata || !ground_truth)
		empty = json_object();
	struct ctx c = {
		.s = s,
		.answer = answer ? answer : empty,
		.metadata = metadata ? metadata : empty,
		.gt = ground_truth ? ground_truth : empty,
		.m = m ? m : &no_match,
		.max_str = lim && lim->max_string_bytes ? lim->max_string_bytes
		                                        : SCORE_DEFAULT_MAX_STRING_BYTES,
	};
	size_t nd = spec_ndims(s);
	if (spec_evaluator(s) != SPEC_DETERMINISTIC && !ext) {
		for (size_t i = 0; i < nd; i++)
			if (spec_dim_external(s, i)) {
				if (errlen)
					snprintf(err, errlen, "the %s evaluator did not run (no external scores)",
					         spec_evaluator_name(spec_evaluator(s)));
				json_decref(empty);
				return -1;
			}
	}
	out->warnings = json_array();
	out->violations = json_array();
	c.warnings = out->warnings;
	c.verified = score_verified(c.metadata, c.m);
	out->verified = c.verified;

	int raw[SPEC_MAX_DIMS], fin[SPEC_MAX_DIMS];
	for (size_t i = 0; i < nd; i++) {
		const struct spec_dim *d = spec_dim(s, i);
		if (d->external) {
			size_t k = 0;
			while (k < ext->n && strcmp(ext->keys[k], d->key))
				k++;
			if (k == ext->n) {
				raw[i] = 0;
				warn(c.warnings, "error", d->key, "dimension '%s': the %s evaluator gave no score "
				     "for it", d->key, spec_evaluator_name(spec_evaluator(s)));
			} else {
				int v = ext->scores[k];
				raw[i] = v < 0 ? 0 : v > 1000 ? 1000 : v;
			}
		} else {
			raw[i] = eval_prim(&c, d);
		}
	}
	/* Gates, in an order where every target is final before its dependents. */
	const size_t *order = spec_topo_order(s);
	for (size_t k = 0; k < nd; k++) {
		size_t i = order[k];
		const struct spec_dim *d = spec_dim(s, i);
		fin[i] = raw[i];
		if (d->has_gate && !((double)fin[d->gate_dim] > d->gate_above)) {
			fin[i] = 0;
			json_t *det = json_object();
			json_object_set_new(det, "gated", json_true());
			json_object_set_new(det, "gate_dimension", json_string(spec_dim_key(s, d->gate_dim)));
			json_object_set_new(det, "ungated_score", json_integer(raw[i]));
			out->dims[i].detail = det;
		}
	}
	int64_t total = 0;
	out->ndims = nd;
	for (size_t i = 0; i < nd; i++) {
		const struct spec_dim *d = spec_dim(s, i);
		struct score_dim *o = &out->dims[i];
		memcpy(o->key, d->key, sizeof o->key);
		o->score = fin[i];
		o->weight = d->weight;
		o->weighted = (dec6)fin[i] * d->weight;
		total += o->weighted;
	}
	int64_t t = total / DEC6_ONE;   /* total ≥ 0: division is floor */
	out->score = t > 1000 ? 1000 : (int)t;
	if ((double)out->score >= spec_win(s))
		out->result = SCORE_WIN;
	else if ((double)out->score >= spec_draw(s))
		out->result = SCORE_DRAW;
	else
		out->result = SCORE_LOSS;

	static const char *const cons[3][2] = {
		{ "token_budget", "token_count" },
		{ "max_llm_calls", "llm_call_count" },
		{ "max_tool_calls", "tool_call_count" },
	};
	for (int k = 0; k < 3; k++) {
		int64_t limit;
		if (spec_constraint(s, cons[k][0], &limit) && json_is_object(c.metadata))
			add_violation(out->violations, cons[k][0], limit,
			              json_object_get(c.metadata, cons[k][1]));
	}
	if (ext) {
		if (json_is_array(ext->warnings))
			json_array_extend(out->warnings, ext->warnings);
		if (json_is_object(ext->extra))
			out->extra = json_deep_copy(ext->extra);
	}
	json_decref(empty);
	return 0;
}

void score_result_clear(struct score_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->ndims && i < SPEC_MAX_DIMS; i++)
		json_decref(r->dims[i].detail);
	json_decref(r->warnings);
	json_decref(r->violations);
	json_decref(r->extra);
	memset(r, 0, sizeof *r);
}

static json_t *dec_json(dec6 v)
{
	if (v % DEC6_ONE == 0)
		return json_integer(v / DEC6_ONE);
	char b[40];
	dec_format(v, b, sizeof b);
	return json_real(strtod(b, NULL));
}

json_t *score_result_json(const struct score_result *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "score", json_integer(r->score));
	json_object_set_new(o, "result", json_string(score_outcome_name(r->result)));
	json_t *bd = json_object();
	for (size_t i = 0; i < r->ndims; i++) {
		json_t *d = json_object();
		json_object_set_new(d, "score", json_integer(r->dims[i].score));
		json_object_set_new(d, "weight", dec_json(r->dims[i].weight));
		json_object_set_new(d, "weighted", dec_json(r->dims[i].weighted));
		json_object_set_new(bd, r->dims[i].key, d);
	}
	json_object_set_new(o, "score_breakdown", bd);
	json_object_set_new(o, "submission_warnings",
	                    r->warnings ? json_deep_copy(r->warnings) : json_array());
	json_object_set_new(o, "constraint_violations",
	                    r->violations ? json_deep_copy(r->violations) : json_array());
	json_object_set_new(o, "verified", json_boolean(r->verified));
	if (r->extra) {
		const char *k;
		json_t *v;
		json_object_foreach(r->extra, k, v) {
			if (!json_object_get(o, k))
				json_object_set_new(o, k, json_deep_copy(v));
		}
	}
	return o;
}

static void add_dump(struct strbuf *sb, const json_t *v)
{
	if (json_is_array(v) && json_array_size(v) == 0) {
		strbuf_addlit(sb, "[]");
		return;
	}
	char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
	if (!t)
		abort();
	strbuf_add(sb, t, strlen(t));
	free(t);
}

static void add_str(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

static void add_int(struct strbuf *sb, long long v)
{
	char b[24], *e = b + sizeof b, *p = e;
	unsigned long long a = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	do {
		*--p = (char)('0' + a % 10);
		a /= 10;
	} while (a);
	if (v < 0)
		*--p = '-';
	strbuf_add(sb, p, (size_t)(e - p));
}

char *score_result_dumps(const struct score_result *r)
{
	struct strbuf sb = { 0 };
	char a[40];
	static const char *const reserved[] = { "score", "result", "score_breakdown",
	                                        "submission_warnings", "constraint_violations",
	                                        "verified" };
	add_str(&sb, "{\"score\":");
	add_int(&sb, r->score);
	add_str(&sb, ",\"result\":\"");
	add_str(&sb, score_outcome_name(r->result));
	add_str(&sb, "\",\"score_breakdown\":{");
	for (size_t i = 0; i < r->ndims; i++) {
		/* keys match ^[a-z][a-z0-9_]*$: no escaping needed */
		add_str(&sb, i ? ",\"" : "\"");
		add_str(&sb, r->dims[i].key);
		add_str(&sb, "\":{\"score\":");
		add_int(&sb, r->dims[i].score);
		add_str(&sb, ",\"weight\":");
		strbuf_add(&sb, a, (size_t)dec_format(r->dims[i].weight, a, sizeof a));
		add_str(&sb, ",\"weighted\":");
		strbuf_add(&sb, a, (size_t)dec_format(r->dims[i].weighted, a, sizeof a));
		add_str(&sb, "}");
	}
	add_str(&sb, "},\"submission_warnings\":");
	if (r->warnings)
		add_dump(&sb, r->warnings);
	else
		add_str(&sb, "[]");
	add_str(&sb, ",\"constraint_violations\":");
	if (r->violations)
		add_dump(&sb, r->violations);
	else
		add_str(&sb, "[]");
	add_str(&sb, r->verified ? ",\"verified\":true" : ",\"verified\":false");
	if (r->extra) {
		const char *k;
		json_t *v;
		json_object_foreach(r->extra, k, v) {
			bool skip = false;
			for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
				skip |= !strcmp(k, reserved[i]);
			if (skip)
				continue;
			json_t *ks = json_string(k);
			strbuf_addlit(&sb, ",");
			add_dump(&sb, ks);
			strbuf_addlit(&sb, ":");
			add_dump(&sb, v);
			json_decref(ks);
		}
	}
	strbuf_addlit(&sb, "}");
	return sb.buf;
}
