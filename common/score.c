/*
 * Evaluation of a scoring spec (common/README.md "Scoring spec"; see score.h): primitives per
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
#include "norm.h"
#include "rx.h"
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

static int score_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
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

struct prep_dim;
struct pval;

struct ctx {
	const struct spec *s;
	const json_t *answer, *metadata, *gt;
	json_t *match_doc;          /* the @match document, or NULL */
	const struct score_match *m;
	size_t max_str;
	bool verified;
	bool explain;
	uint64_t rx_budget;
	uint64_t work_left, work_used;   /* common/README.md "Work budget" */
	bool over;                  /* a charge did not fit during the current dimension */
	int clean[4];               /* per root document: 0 unknown, 1 no string over max_str, 2 has */
	json_t *warnings;
	const struct score_prep *prep;
	const struct prep_dim *cur;   /* the prepared side of the dimension being scored, or NULL */
	const int *fin;             /* final scores so far (composites read them), by index */
};

/* What one application of a primitive noticed besides its score (nested elements that were
 * missing or ill-typed, regexes over budget) and, with explain, the detail object. */
struct app {
	int nbad;          /* numeric_tolerance elements; nested elements missing or ill-typed */
	int nrx;           /* regexes that ran out of budget */
	json_t *det;       /* explain detail (borrowed), or NULL */
	struct prim_frac fr;   /* the fraction the score rounds, when known (a composite's part) */
};

/* Work units of the costly steps (common/README.md "Work budget"), about a nanosecond each here. */
enum {
	W_NODE = 200,          /* an array element or object member dumped, sorted or paired */
	W_STRING = 32,         /* a string normalised or dumped (allocation, call) */
	W_BYTE = 4,            /* a byte dumped and compared, or normalised in ASCII text */
	W_NORM_UNICODE = 64,   /* a byte of non-ASCII text through nfkc or casefold */
	W_NORM_OTHER = 16,     /* a byte of non-ASCII text through the other steps */
	W_TOKEN = 64,          /* a byte tokenised and sorted (token_overlap) */
	W_SCAN = 1,            /* a byte scanned once (a literal term, counting words) */
	W_RX_STEP = 3,         /* a regular-expression state visit */
	W_CMP_NODE = 16,       /* an array element or object member compared (exact_match) */
	W_APPLY = 64,          /* a nested primitive applied to one element (paths resolved) */
	W_LEV_COL = 24,        /* fuzzy_string: a code point of the longer middle (one column) */
	W_LEV_BLOCK = 3,       /* fuzzy_string: 64 rows of one column, bit-parallel */
	W_LEV_ROW = 64,        /* fuzzy_string: a code point of the shorter middle (its alphabet) */
	W_PROJECT = 48,        /* an element projected through [*] (looked up, kept, freed) */
};

/* Charges units to the evaluation's budget; false when they do not fit what is left (the
 * step is then not run, nothing is charged, and the current dimension will score 0; later
 * steps that fit still run). */
static bool charge(struct ctx *c, uint64_t units)
{
	if (units <= c->work_left) {
		c->work_left -= units;
		c->work_used += units;
		return true;
	}
	c->over = true;
	return false;
}

static const json_t *root_doc(const struct ctx *c, enum spec_var_source src, const json_t *elem)
{
	switch (src) {
	case SPEC_VAR_METADATA: return c->metadata;
	case SPEC_VAR_GROUND_TRUTH: return c->gt;
	case SPEC_VAR_MATCH: return c->match_doc;
	case SPEC_VAR_ELEMENT: return elem;
	default: return c->answer;
	}
}

/* Resolves an optional path (NULL: the document itself). */
static const json_t *get_path(const struct jpath *p, const json_t *doc, char *why, size_t wl)
{
	if (!p) {
		if (!doc)
			snprintf(why, wl, "no such document");
		return doc;
	}
	return jpath_get(p, doc, why, wl);
}

/* Sets an explain detail; the value expression is only evaluated when explaining. */
#define det_set(a, k, v) do { \
		if ((a) && (a)->det) \
			json_object_set_new((a)->det, (k), (v)); \
	} while (0)

/* A short copy of a value for explain output: strings cut to 200 bytes, arrays to 50 items. */
static json_t *brief(const json_t *v)
{
	if (!v)
		return json_null();
	if (json_is_string(v) && json_string_length(v) > 200) {
		size_t n = 200;
		while (n > 0 && ((unsigned char)json_string_value(v)[n] & 0xC0) == 0x80)
			n--;
		json_t *r = json_stringn(json_string_value(v), n);
		return r ? r : json_string("...");
	}
	if (json_is_array(v) && json_array_size(v) > 50) {
		json_t *r = json_array();
		for (size_t i = 0; i < 50; i++)
			json_array_append_new(r, brief(json_array_get(v, i)));
		json_array_append_new(r, json_string("..."));
		return r;
	}
	return json_deep_copy(v);
}

static json_t *frac_json(unsigned long long num, unsigned long long den)
{
	return json_pack("[I, I]", (json_int_t)num, (json_int_t)den);
}

/* field path as shown in warnings: answer paths as written, others with their document. */
static void gt_name(const struct jpath *p, char *buf, size_t n)
{
	snprintf(buf, n, "ground_truth.%s", jpath_text(p));
}

/* The warning field of a dimension's ground-truth side: "ground_truth.<path>" for the default
 * root (as before roots existed), else the path as written. */
static void gt_label(const struct spec_dim *d, char *buf, size_t n)
{
	if (d->gt_proj && d->gt_text[0] != '@')   /* a projection: the path as written (v3) */
		snprintf(buf, n, "ground_truth.%s", d->gt_text);
	else if (d->gt_src == SPEC_VAR_GROUND_TRUTH && d->gt_field && d->gt_text &&
	         d->gt_text[0] != '@')
		gt_name(d->gt_field, buf, n);
	else
		snprintf(buf, n, "%s", d->gt_text ? d->gt_text : "ground_truth");
}

/* The JSON type a field primitive needs on side 0 (submitted) or 1 (expected), as text for
 * the warning; NULL when v has it (its descriptor's need, after the table below). */
static const char *needed_type(const struct spec_dim *d, int side, const json_t *v);

/* True when v (inside root document src) may hold a string longer than the limit: a whole
 * document without one is checked once per evaluation, not once per dimension. */
static bool long_string(struct ctx *c, enum spec_var_source src, const json_t *v)
{
	int i = src == SPEC_VAR_METADATA ? 1 : src == SPEC_VAR_GROUND_TRUTH ? 2
	      : src == SPEC_VAR_MATCH ? 3 : 0;
	if (c->clean[i] == 0)
		c->clean[i] = prim_has_long_string(root_doc(c, src, NULL), c->max_str) ? 2 : 1;
	return c->clean[i] == 2 && prim_has_long_string(v, c->max_str);
}

/* A projection (v3, common/README.md "Projection and joined fields"): the values at each (NULL:
 * the element) inside the elements of arr, in order, skipping elements without one, as a new
 * array in *out. Charged W_PROJECT units per element before it runs. Returns 0, -1 when arr is not
 * an array (*out NULL), -2 when the charge did not fit. */
static int project(struct ctx *c, const struct jpath *each, const json_t *arr, json_t **out)
{
	*out = NULL;
	if (!json_is_array(arr))
		return -1;
	size_t n = json_array_size(arr);
	if (!charge(c, W_PROJECT * (uint64_t)n))
		return -2;
	*out = json_array();
	for (size_t i = 0; i < n; i++) {
		const json_t *v = get_path(each, json_array_get(arr, i), NULL, 0);
		if (v)
			json_array_append_new(*out, json_incref((json_t *)v));
	}
	return 0;
}

/* Several fields joined as one text (v3): the strings at d->join, in order, missing ones
 * skipped, joined with d->sep, as a new string in *out (NULL when none holds a string).
 * Charged 32 units per path and 1 per byte copied before it copies. Returns 0; -1 after an
 * error warning (its field the first path, as the dimension's other warnings; the message
 * names the path) when a path holds something other than a string (*out NULL); -2 when the
 * charge did not fit. */
static int joined(struct ctx *c, const struct spec_dim *d, json_t **out, char *why, size_t wl)
{
	uint64_t units = 0;
	size_t nstr = 0, seplen = strlen(d->sep);
	const json_t *vals[16];   /* spec.c: 2 to 16 paths */
	*out = NULL;
	for (size_t i = 0; i < d->njoin; i++) {
		const json_t *v = vals[i] = get_path(d->join[i], root_doc(c, d->join_src[i], NULL),
		                                     why, wl);
		units += W_STRING;
		if (v && !json_is_string(v)) {
			warn(c->warnings, "error", d->field_text, "dimension '%s': submitted value at "
			     "'%s' is %s, not a string (a joined field)", d->key, d->join_text[i],
			     jcanon_type_name(v));
			return -1;
		}
		if (v)
			units += W_SCAN * ((uint64_t)json_string_length(v) + seplen * (nstr++ > 0));
	}
	if (!charge(c, units))
		return -2;
	if (!nstr)
		return 0;
	struct strbuf sb = { 0 };
	strbuf_addlit(&sb, "");
	nstr = 0;
	for (size_t i = 0; i < d->njoin; i++) {
		const json_t *v = vals[i];
		if (!v)
			continue;
		if (nstr++)
			strbuf_add(&sb, d->sep, seplen);
		strbuf_add(&sb, json_string_value(v), json_string_length(v));
	}
	*out = json_stringn(sb.buf, sb.len);
	strbuf_free(&sb);
	return 0;
}

/* Resolves the two fields of d; 0 and both values, or -1 after warning. Each side that is
 * missing or ill-typed gets its own warning (answer side first), so a submission learns about
 * every bad value, not only the first. A projected or joined value (v3) is built here and
 * owned by own[0] (answer side) / own[1] (ground truth), which the caller frees (both NULL
 * otherwise); -2 when building it did not fit the work budget (c->over). */
static int resolve_fields(struct ctx *c, const struct spec_dim *d, const json_t **got,
                          const json_t **want, json_t **own)
{
	char why[200], gname[1100];
	const char *need;
	int rc = 0;
	own[0] = own[1] = NULL;
	if (d->njoin) {   /* several fields joined as one text */
		int jr = joined(c, d, &own[0], why, sizeof why);
		if (jr == -2)
			return -2;
		*got = own[0];
		if (jr == -1)   /* a part held something else than a string: warned */
			rc = -1;
	} else {
		*got = get_path(d->field, root_doc(c, d->field_src, NULL), why, sizeof why);
		if (d->field_proj && *got) {
			int pr = project(c, d->field_each, *got, &own[0]);
			if (pr == -2)
				return -2;
			if (pr == -1) {
				warn(c->warnings, "error", d->field_text, "dimension '%s': submitted value "
				     "at '%s' is %s, not an array (projection [*])", d->key, d->field_text,
				     jcanon_type_name(*got));
				rc = -1;
			}
			*got = own[0];
		}
	}
	if (rc == 0 && *got && d->unwrap && json_is_object(*got))   /* a polymorphic value (v3) */
		*got = get_path(d->unwrap, *got, why, sizeof why);
	if (rc == 0 && !*got) {
		warn(c->warnings, "error", d->field_text, "dimension '%s': no value at '%s' in the "
		     "%s (%s)", d->key, d->field_text, d->field_src == SPEC_VAR_ANSWER ? "answer" :
		     "submission", why);
		rc = -1;
	} else if (rc == 0 && (need = needed_type(d, 0, *got))) {
		warn(c->warnings, "error", d->field_text, "dimension '%s': submitted value at '%s' "
		     "is %s, not %s", d->key, d->field_text, jcanon_type_name(*got), need);
		rc = -1;
	}
	*want = NULL;
	if (!d->gt_text)   /* a primitive that reads no ground truth (or reads terms instead) */
		goto long_strings;
	*want = get_path(d->gt_field, root_doc(c, d->gt_src, NULL), why, sizeof why);
	if (d->gt_proj && *want) {
		const json_t *arr = *want;
		int pr = project(c, d->gt_each, arr, &own[1]);
		if (pr == -2)
			return -2;
		*want = own[1];
		if (pr == -1) {
			gt_label(d, gname, sizeof gname);
			warn(c->warnings, "error", gname, "dimension '%s': ground-truth value at '%s' is %s, "
			     "not an array (projection [*])", d->key, d->gt_text, jcanon_type_name(arr));
			return -1;
		}
	}
	if (!*want) {
		gt_label(d, gname, sizeof gname);
		warn(c->warnings, "error", gname, "dimension '%s': no value at '%s' in the %s "
		     "(%s)", d->key, d->gt_field ? jpath_text(d->gt_field) : d->gt_text,
		     d->gt_src == SPEC_VAR_GROUND_TRUTH ? "ground truth" : "submission", why);
		rc = -1;
	} else if ((need = needed_type(d, 1, *want))) {
		gt_label(d, gname, sizeof gname);
		warn(c->warnings, "error", gname, "dimension '%s': ground-truth value at '%s' is %s, "
		     "not %s", d->key, d->gt_field ? jpath_text(d->gt_field) : d->gt_text,
		     jcanon_type_name(*want), need);
		rc = -1;
	}
long_strings:
	if (rc == 0 && long_string(c, d->field_src, *got)) {
		warn(c->warnings, "error", d->field_text, "dimension '%s': value at '%s' holds a "
		     "string longer than %zu bytes", d->key, d->field_text, c->max_str);
		rc = -1;
	}
	if (rc == 0 && *want && long_string(c, d->gt_src, *want)) {
		gt_label(d, gname, sizeof gname);
		warn(c->warnings, "error", gname, "dimension '%s': ground-truth value at '%s' holds a "
		     "string longer than %zu bytes", d->key, d->gt_field ? jpath_text(d->gt_field) :
		     d->gt_text, c->max_str);
		rc = -1;
	}
	return rc;
}

static int eval_time_decay(struct ctx *c, const struct spec_dim *d, struct prim_frac *f)
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
	return prim_time_decay(c->m->submitted_at_ms - c->m->started_at_ms, &lim, d->curve, f);
}

static int eval_efficiency(struct ctx *c, const struct spec_dim *d, struct prim_frac *f,
                           const char *constraint,
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
	int r = prim_efficiency(v, budget, &e, f);
	if (r == PRIM_BAD) {
		warn(c->warnings, "error", fname, "dimension '%s': %s: %s", d->key, fname, e.why);
		return 0;
	}
	return r;
}

static double value_len(const json_t *x)
{
	if (json_is_array(x))
		return (double)json_array_size(x);
	if (json_is_object(x))
		return (double)json_object_size(x);
	if (json_is_string(x))
		return (double)prim_count_chars(json_string_value(x), json_string_length(x));
	return NAN;
}

/* The exact value of a variable: its JSON number (an integer, or a real's shortest decimal,
 * so 0.1 is 1/10), else the double v (a default, a boolean 0/1; NaN is missing). */
static struct expr_q exact_of(const json_t *x, double v)
{
	if (x && json_is_integer(x))
		return expr_q_int((long long)json_integer_value(x));
	if (isnan(v))
		return expr_q_missing();
	struct dec_num dn;
	if (dec_num_from_double(x ? json_real_value(x) : v, &dn) < 0)
		return expr_q_from_dec(0, 1000, v);   /* not finite: stays a double */
	return expr_q_from_dec(dn.m, dn.e, v);
}

/* An expression's value clamped to [0, 1] in permille, rounded half up: exactly when the
 * value is an exact fraction. */
static int permille_q(struct expr_q q)
{
	if (q.missing || !q.exact)
		return prim_permille_double((long double)(q.missing ? NAN : q.d));
	if (q.num <= 0)
		return 0;
	if (q.num >= q.den)
		return 1000;
	return prim_permille_ratio((unsigned __int128)q.num, (unsigned __int128)q.den);
}

/* round_half_up(full × num / den) for 0 ≤ num < den, exactly (common/README.md "Points above 1000"): the
 * product is built bit by bit as a quotient and a remainder below den, so nothing overflows. */
static int64_t scaled_ratio(unsigned __int128 num, unsigned __int128 den, int64_t full)
{
	unsigned __int128 q = 0, r = 0;
	for (int b = 62; b >= 0; b--) {
		q <<= 1;   /* (q + r/den) doubled; r < den < 2^127, so 2r fits */
		r <<= 1;
		if (r >= den) {
			r -= den;
			q++;
		}
		if ((full >> b) & 1) {   /* plus num/den */
			r += num;
			if (r >= den) {
				r -= den;
				q++;
			}
		}
	}
	return (int64_t)q + (r >= den - r);   /* half up: r/den ≥ 1/2 */
}

/* An expression's value clamped to [0, 1] times full (1000, or the dimension's points),
 * rounded half up once: exactly when the value is an exact fraction, else as binary results
 * are (floor(x × full + 0.5 + 1e-9)). full 1000 is permille_q. */
static int scaled_q(struct expr_q q, int64_t full)
{
	if (full == 1000)
		return permille_q(q);
	if (q.missing || !q.exact) {
		long double x = q.missing ? NAN : q.d;
		if (!(x > 0))
			return 0;
		if (x >= 1)
			return (int)full;
		return (int)floorl(x * (long double)full + 0.5L + 1e-9L);
	}
	if (q.num <= 0)
		return 0;
	if (q.num >= q.den)
		return (int)full;
	return (int)scaled_ratio((unsigned __int128)q.num, (unsigned __int128)q.den, full);
}

/* The warning of a dimension one of whose steps did not fit the work budget. */
static void budget_warning(struct ctx *c, const struct spec_dim *d)
{
	warn(c->warnings, "error", d->field_text ? d->field_text : d->key, "dimension '%s': not "
	     "scored (0): the evaluation's work budget of %llu units is spent (README \"Work "
	     "budget\")", d->key, (unsigned long long)SCORE_WORK_BUDGET);
}

static int eval_prim(struct ctx *c, const struct spec_dim *d, json_t *det, struct prim_frac *fr);

/* A composite's var that is a part or another dimension (common/README.md "Composite
 * dimensions"): its exact fraction in *q. A part is charged W_APPLY and scored as a dimension
 * (its warnings name the composite); once a step does not fit (*spent), no later part runs and
 * *warned says whether the budget's warning was given. parts, with explain, gets the part's
 * detail. */
static void composite_var(struct ctx *c, const struct spec_var *v, json_t *parts,
                          json_t *dims, struct expr_q *q, bool *spent, bool *warned)
{
	if (v->dim >= 0) {
		const struct spec_dim *t = spec_dim(c->s, (size_t)v->dim);
		int sc = c->fin[v->dim];
		*q = expr_q_div(expr_q_int(sc), expr_q_int(spec_dim_scale(t)));
		if (dims)
			json_object_set_new(dims, v->name, json_pack("{s:s, s:i}", "dimension", t->key,
			                                             "score", sc));
		return;
	}
	int sc = 0;
	struct prim_frac fr = { .kind = PRIM_FR_NONE };
	json_t *pdet = parts ? json_object() : NULL;
	if (pdet)
		json_object_set_new(pdet, "primitive", json_string(prim_kind_name(v->part->prim)));
	if (*spent || c->over) {
		*spent = true;
	} else if (!charge(c, W_APPLY)) {
		*spent = true;
	} else {
		sc = eval_prim(c, v->part, pdet, &fr);
		if (c->over) {   /* eval_prim gave the budget's warning */
			*spent = *warned = true;
			sc = 0;
			fr.kind = PRIM_FR_NONE;
		}
	}
	/* the part's own fraction, so the composite is rounded once; else its score ÷ 1000 */
	if (fr.kind == PRIM_FR_EXACT)
		*q = expr_q_ratio(fr.num, fr.den);
	else if (fr.kind == PRIM_FR_BINARY)
		*q = expr_q_double((double)fr.ld);
	else
		*q = expr_q_from_dec(sc, -3, sc / 1000.0);
	if (pdet) {
		json_object_set_new(pdet, "score", json_integer(sc));
		if (fr.kind == PRIM_FR_EXACT && fr.den <= (unsigned __int128)INT64_MAX)
			json_object_set_new(pdet, "exact", json_pack("[I, I]", (json_int_t)fr.num,
			                                             (json_int_t)fr.den));
		else if (fr.kind == PRIM_FR_BINARY)
			json_object_set_new(pdet, "value", json_real((double)fr.ld));
		json_object_set_new(parts, v->name, pdet);
	}
}

static uint64_t cmp_units(const json_t *v, bool fold);

/* Whether a kept element's number b follows a in the scan's order (equal values do). */
static bool in_order(const struct spec_scan *sc, const struct dec_num *a, const struct dec_num *b)
{
	int r = dec_num_cmp(a, b);
	return sc->descending ? r >= 0 : r <= 0;
}

/* A filter-and-scan var over arr (common/README.md "Filter and scan"): the elements that pass
 * every test, reduced to one exact number in *q (missing: min or max of nothing). Charged
 * before it runs: per element 16 units, 200 more when it reduces numbers, and per test 16
 * plus the compare units of its values. Returns 0, -1 after an error warning, -2 when the
 * charge did not fit (c->over). sdet, with explain, gets the counts. */
static int scan_var(struct ctx *c, const struct spec_dim *d, const struct spec_var *v,
                    const json_t *arr, struct expr_q *q, json_t *sdet)
{
	const struct spec_scan *sc = v->scan;
	const json_t *target[16] = { 0 };
	char why[200];
	if (!json_is_array(arr)) {
		warn(c->warnings, "error", v->text, "dimension '%s': variable '%s': value at '%s' is %s, "
		     "not an array", d->key, v->name, v->text, jcanon_type_name(arr));
		return -1;
	}
	uint64_t per = W_CMP_NODE;
	for (size_t w = 0; w < sc->nwhere; w++) {
		const struct spec_where *x = &sc->where[w];
		target[w] = x->equals;
		if (x->eq_text) {
			target[w] = get_path(x->eq_path, root_doc(c, x->eq_src, NULL), why, sizeof why);
			if (!target[w]) {
				warn(c->warnings, "error", x->eq_text, "dimension '%s': variable '%s': no value "
				     "at '%s' (%s)", d->key, v->name, x->eq_text, why);
				return -1;
			}
		}
		per += W_CMP_NODE + cmp_units(target[w], false);
		for (size_t k = 0; x->in && k < json_array_size(x->in); k++)
			per += cmp_units(json_array_get(x->in, k), false);
	}
	if (sc->reduce != SPEC_R_COUNT)
		per += W_NODE;   /* a kept element's number as an exact decimal (shortest text) */
	size_t n = json_array_size(arr), kept = 0, count = 0;
	if (!charge(c, per * (uint64_t)n))
		return -2;
	bool sorted = true, have = false;
	struct dec_num prev = { 0, 0 }, best = { 0, 0 };
	const json_t *bestj = NULL;
	struct expr_q sum = expr_q_int(0);
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(arr, i);
		bool keep = true;
		for (size_t w = 0; w < sc->nwhere && keep; w++) {
			const struct spec_where *x = &sc->where[w];
			const json_t *f = get_path(x->field, e, NULL, 0);
			bool hit = false;
			if (!f)
				hit = false;   /* a missing field fails the test ("not" keeps it) */
			else if (x->type == JSON_INTEGER)
				hit = json_is_number(f);
			else if (x->type == JSON_TRUE)
				hit = json_is_boolean(f);
			else if (x->type >= 0)
				hit = (int)json_typeof(f) == x->type;
			else if (x->in)
				for (size_t k = 0; k < json_array_size(x->in) && !hit; k++)
					hit = jcanon_equal(f, json_array_get(x->in, k), false);
			else
				hit = jcanon_equal(f, target[w], false);
			keep = hit != x->negate;
		}
		if (!keep)
			continue;
		kept++;
		if (sc->reduce == SPEC_R_COUNT)
			continue;
		const json_t *val = get_path(sc->of, e, NULL, 0);
		struct dec_num dn;
		if (!val || dec_num_from_json(val, &dn) < 0) {
			warn(c->warnings, "error", v->text, "dimension '%s': variable '%s': element %zu of "
			     "'%s' has no number%s%s", d->key, v->name, i, v->text, sc->of ? " at " : "",
			     sc->of ? jpath_text(sc->of) : "");
			return -1;
		}
		switch (sc->reduce) {
		case SPEC_R_SUM:
			sum = expr_q_add(sum, exact_of(val, json_number_value(val)));
			break;
		case SPEC_R_MIN: case SPEC_R_MAX:
			if (!have || (dec_num_cmp(&dn, &best) < 0) == (sc->reduce == SPEC_R_MIN)) {
				if (!have || dec_num_cmp(&dn, &best) != 0) {
					best = dn;
					bestj = val;
				}
			}
			break;
		case SPEC_R_NEW_BEST:   /* strictly better than every earlier kept value */
			if (!have || (sc->descending ? dec_num_cmp(&dn, &best) < 0
			                             : dec_num_cmp(&dn, &best) > 0)) {
				best = dn;
				count++;
			}
			break;
		case SPEC_R_SORTED: case SPEC_R_IN_ORDER:
			if (have) {
				bool o = in_order(sc, &prev, &dn);
				sorted = sorted && o;
				count += o;
			}
			prev = dn;
			break;
		case SPEC_R_COUNT:
			break;
		}
		have = true;
	}
	switch (sc->reduce) {
	case SPEC_R_COUNT: *q = expr_q_int((long long)kept); break;
	case SPEC_R_SUM: *q = sum; break;
	case SPEC_R_MIN: case SPEC_R_MAX:
		*q = bestj ? exact_of(bestj, json_number_value(bestj)) : expr_q_missing();
		break;
	case SPEC_R_NEW_BEST: case SPEC_R_IN_ORDER: *q = expr_q_int((long long)count); break;
	case SPEC_R_SORTED: *q = expr_q_int(sorted ? 1 : 0); break;
	}
	if (sdet)
		json_object_set_new(sdet, v->name, json_pack("{s:I, s:I, s:o}", "elements", (json_int_t)n,
		                                             "kept", (json_int_t)kept, "value",
		                                             q->missing ? json_null() : json_real(q->d)));
	return 0;
}

static int eval_expression(struct ctx *c, const struct spec_dim *d, struct app *ap)
{
	double vals[64], lvals[64];
	const json_t *vjs[64];
	double *values = d->nvars <= 64 ? vals : xcalloc(d->nvars, sizeof *values);
	double *lens = d->nvars <= 64 ? lvals : xcalloc(d->nvars, sizeof *lens);
	const json_t **vjson = d->nvars <= 64 ? vjs : xcalloc(d->nvars, sizeof *vjson);
	char why[200];
	bool ok = true, tolerant = expr_has_coalesce(d->expr), composite = false;
	bool spent = false, warned = false;
	size_t nmissing = 0;
	c->over = false;
	for (size_t i = 0; i < d->nvars; i++)
		composite |= d->vars[i].part || d->vars[i].dim >= 0 || d->vars[i].scan;
	struct expr_q *pre = composite ? xcalloc(d->nvars, sizeof *pre) : NULL;
	bool *scanned = composite ? xcalloc(d->nvars, sizeof *scanned) : NULL;  /* pre[i] is it */
	json_t *parts = composite && ap->det ? json_object() : NULL;
	json_t *drefs = composite && ap->det ? json_object() : NULL;
	json_t *scans = composite && ap->det ? json_object() : NULL;
	for (size_t i = 0; i < d->nvars; i++) {
		const struct spec_var *v = &d->vars[i];
		if (v->part || v->dim >= 0) {
			composite_var(c, v, parts, drefs, &pre[i], &spent, &warned);
			values[i] = pre[i].d;
			lens[i] = NAN;
			vjson[i] = NULL;
			continue;
		}
		const json_t *x = get_path(v->path, root_doc(c, v->src, NULL), why, sizeof why);
		if (x && v->unwrap && json_is_object(x))   /* a polymorphic value: {"count": n} */
			x = get_path(v->unwrap, x, why, sizeof why);
		if (v->types) {   /* a type test: 1 when the value is of one of the types, else 0 */
			values[i] = x && (v->types & (1u << json_typeof(x))) ? 1.0 : 0.0;
			lens[i] = NAN;
			vjson[i] = NULL;
			continue;
		}
		if (x && json_is_null(x) && d->null_missing) {
			x = NULL;   /* "null_as_missing": null is no value, as JavaScript's ?? reads it */
			snprintf(why, sizeof why, "it is null");
		}
		values[i] = lens[i] = NAN;
		vjson[i] = x && json_is_number(x) ? x : NULL;
		if (v->scan && x && !c->over) {
			int rc = scan_var(c, d, v, x, &pre[i], scans);
			vjson[i] = NULL;
			if (rc == -1)
				ok = false;
			if (rc != 0 || !pre[i].missing) {
				values[i] = rc == 0 ? pre[i].d : NAN;
				scanned[i] = rc == 0;
				continue;
			}
			x = NULL;   /* min or max of no element: no value, as a missing path */
			snprintf(why, sizeof why, "no element was kept");
		} else if (v->scan && x) {
			continue;   /* the budget is spent: nothing more of this dimension runs */
		}
		if (!x && v->has_default) {
			values[i] = v->def;
		} else if (!x) {
			nmissing++;
			if (!tolerant) {
				warn(c->warnings, "error", v->text, "dimension '%s': variable '%s': no value at "
				     "'%s' (%s)", d->key, v->name, v->text, why);
				ok = false;
			}
		} else if (json_is_number(x)) {
			values[i] = json_number_value(x);
		} else if (json_is_boolean(x)) {
			values[i] = json_is_true(x) ? 1.0 : 0.0;
		} else if (!v->len_only) {
			warn(c->warnings, "error", v->text, "dimension '%s': variable '%s': value at '%s' is "
			     "not a number", d->key, v->name, v->text);
			ok = false;
		}
		if (v->len_only && x && !tolerant && !json_is_string(x) && !json_is_array(x) &&
		    !json_is_object(x)) {
			/* len() of it has no value: the expression would be no value, silently 0 */
			warn(c->warnings, "error", v->text, "dimension '%s': variable '%s': value at '%s' is "
			     "%s, which has no len() (a string, array or object)", d->key, v->name, v->text,
			     json_is_null(x) ? "null" : "not a string, array or object");
			ok = false;
		}
		/* len(v) of a string counts its code points: paid before (common/README.md "Work budget") */
		if (x && (!json_is_string(x) || charge(c, W_SCAN * (uint64_t)json_string_length(x))))
			lens[i] = value_len(x);
	}
	int score = 0;
	if (c->over || spent) {
		if (!warned)
			budget_warning(c, d);
		c->over = true;
		ok = false;
	}
	if (ok) {
		int div_zero = 0;
		struct expr_q qv[64], ql[64];
		struct expr_q *qvals = d->nvars <= 64 ? qv : xcalloc(d->nvars, sizeof *qvals);
		struct expr_q *qlens = d->nvars <= 64 ? ql : xcalloc(d->nvars, sizeof *qlens);
		for (size_t i = 0; i < d->nvars; i++) {
			qvals[i] = pre && (d->vars[i].part || d->vars[i].dim >= 0 || scanned[i])
			           ? pre[i] : exact_of(vjson[i], values[i]);
			qlens[i] = isnan(lens[i]) ? expr_q_missing() : expr_q_int((long long)lens[i]);
		}
		struct expr_q q = expr_eval_q(d->expr, qvals, qlens, &div_zero);
		if (qvals != qv) {
			free(qvals);
			free(qlens);
		}
		if (!q.missing && d->scale != 1.0)
			q = expr_q_div(q, exact_of(NULL, d->scale));
		double r = q.missing ? NAN : q.d;
		if (div_zero)
			warn(c->warnings, "warning", d->key, "dimension '%s': division by zero in the "
			     "expression (that division counted as 0)", d->key);
		if (isnan(r) && nmissing) {
			for (size_t i = 0; i < d->nvars; i++) {
				const struct spec_var *v = &d->vars[i];
				if (isnan(values[i]) && isnan(lens[i]))
					warn(c->warnings, "error", v->text, "dimension '%s': variable '%s': no value "
					     "at '%s' and no alternative applied", d->key, v->name, v->text);
			}
		}
		score = scaled_q(q, spec_dim_scale(d));
		if (ap->det)
			det_set(ap, "value", isfinite(r) ? json_real(r) : json_null());
		if (ap->det && q.exact && !q.missing && (pre || d->full_points) &&
		    q.num >= -(__int128)INT64_MAX && q.num <= (__int128)INT64_MAX &&
		    q.den <= (__int128)INT64_MAX)   /* the exact value rounded once */
			det_set(ap, "exact", json_pack("[I, I]", (json_int_t)q.num, (json_int_t)q.den));
	}
	if (parts && json_object_size(parts))
		det_set(ap, "parts", parts);
	else
		json_decref(parts);
	if (drefs && json_object_size(drefs))
		det_set(ap, "dimensions", drefs);
	else
		json_decref(drefs);
	if (scans && json_object_size(scans))
		det_set(ap, "scans", scans);
	else
		json_decref(scans);
	free(pre);
	free(scanned);
	if (ap->det) {
		json_t *vj = json_object();
		for (size_t i = 0; i < d->nvars; i++) {
			const struct spec_var *v = &d->vars[i];
			/* a len()-only var shows what it holds (cut as every explained value) */
			const json_t *x = v->len_only && !v->part && v->dim < 0
			                  ? get_path(v->path, root_doc(c, v->src, NULL), why, sizeof why)
			                  : NULL;
			json_object_set_new(vj, v->name, x ? brief(x) : isnan(values[i]) ? json_null()
			                                                  : json_real(values[i]));
		}
		det_set(ap, "vars", vj);
		/* unwrap and type vars: what the path held before it was read as a number */
		json_t *rd = json_object();
		for (size_t i = 0; i < d->nvars; i++) {
			const struct spec_var *v = &d->vars[i];
			if (!v->unwrap && !v->types)
				continue;
			const json_t *x = get_path(v->path, root_doc(c, v->src, NULL), why, sizeof why);
			json_object_set_new(rd, v->name, json_string(x ? jcanon_type_name(x) : "missing"));
		}
		if (json_object_size(rd))
			det_set(ap, "read", rd);
		else
			json_decref(rd);
	}
	if (values != vals) {
		free(values);
		free(lens);
		free(vjson);
	}
	return score;
}

static int apply(struct ctx *c, const struct spec_dim *d, const json_t *got, const json_t *want,
                 const struct pval *pw, struct app *ap, struct prim_err *e);

/* Text of a term_coverage / token value: a string, or an array of strings joined by "\n".
 * Returns the string itself (borrowed, *owned false) or a malloc'd join (*owned true), or NULL
 * (not text). */
static const char *text_of(const json_t *v, size_t *len, bool *owned)
{
	*owned = false;
	if (json_is_string(v)) {
		*len = json_string_length(v);
		return json_string_value(v);
	}
	*owned = true;
	if (!json_is_array(v))
		return NULL;
	struct strbuf sb = { 0 };
	strbuf_addlit(&sb, "");
	for (size_t i = 0; i < json_array_size(v); i++) {
		const json_t *x = json_array_get(v, i);
		if (!json_is_string(x)) {
			strbuf_free(&sb);
			return NULL;
		}
		if (i)
			strbuf_addlit(&sb, "\n");
		strbuf_add(&sb, json_string_value(x), json_string_length(x));
	}
	*len = sb.len;
	return sb.buf;
}

/* Fills e for a value v of side 0 (submitted) or 1 (ground truth) that is not what (a type,
 * "an array"); returns PRIM_BAD. */
static int need_type(const json_t *v, int side, const char *what, struct prim_err *e)
{
	e->side = side;
	snprintf(e->why, sizeof e->why, "%s value is %s, not %s", side ? "ground-truth" : "submitted",
	         jcanon_type_name(v), what);
	return PRIM_BAD;
}



/* Units to normalise a string with steps (0: to dump and compare it). */
static uint64_t string_units(const json_t *v, unsigned steps)
{
	size_t n = json_string_length(v);
	uint64_t per = W_BYTE;
	if (steps && !norm_is_ascii(json_string_value(v), n))
		per = steps & (NORM_NFKC | NORM_CASEFOLD) ? W_NORM_UNICODE : W_NORM_OTHER;
	return W_STRING + per * (uint64_t)n;
}

/* Units to normalise (steps) or canonically dump and sort (0) all of v. */
static uint64_t value_units(const json_t *v, unsigned steps)
{
	if (!v)
		return 0;
	if (json_is_string(v))
		return string_units(v, steps);
	uint64_t u = W_NODE;
	if (json_is_array(v)) {
		for (size_t i = 0; i < json_array_size(v); i++)
			u += value_units(json_array_get(v, i), steps);
	} else if (json_is_object(v)) {
		const char *k;
		json_t *x;
		json_object_foreach((json_t *)v, k, x)
			u += W_BYTE * strlen(k) + value_units(x, steps);
	}
	return u;
}

/* Units to compare v with another value for deep equality (exact_match): every element and
 * member, and every byte of its strings and keys (case-folded with fold). */
static uint64_t cmp_units(const json_t *v, bool fold)
{
	if (!v)
		return 0;
	if (json_is_string(v))
		return fold ? string_units(v, NORM_CASEFOLD) : W_SCAN * (uint64_t)json_string_length(v);
	uint64_t u = W_CMP_NODE;
	if (json_is_array(v)) {
		for (size_t i = 0; i < json_array_size(v); i++)
			u += cmp_units(json_array_get(v, i), fold);
	} else if (json_is_object(v)) {
		const char *k;
		json_t *x;
		json_object_foreach((json_t *)v, k, x)
			u += W_SCAN * strlen(k) + cmp_units(x, fold);
	}
	return u;
}

/* Units of a Levenshtein distance between differing middles of m ≤ n code points (README
 * "Work budget"): ⌈m/64⌉ bit-parallel steps per column of the portable code (the AVX2 code
 * is faster, but the units never depend on the machine), a per-column lookup, and the
 * pattern's alphabet. */
static uint64_t lev_units(size_t m, size_t n)
{
	if (m == 0)
		return 0;
	return W_LEV_COL * (uint64_t)n + W_LEV_BLOCK * (uint64_t)((m + 63) / 64) * (uint64_t)n +
	       W_LEV_ROW * (uint64_t)m;
}

/* prim_fuzzy_string_paid's payment: the distance's units, before it runs. */
static bool pay_distance(void *arg, size_t m, size_t n)
{
	return charge(arg, lev_units(m, n));
}

/* Runs a regex search paid from both budgets: 1 when it matches, 0 when it does not, -1 when
 * stopped by a budget (then counted as not matching; a term that must be absent counts as
 * present, so exhausting the budget never earns credit). */
static int run_rx3(struct ctx *c, const struct rx *r, const char *t, size_t n, struct app *ap)
{
	/* The regex budget of the evaluation, and no more steps than the work budget pays for. */
	uint64_t cap = c->work_left / W_RX_STEP, b = c->rx_budget < cap ? c->rx_budget : cap;
	uint64_t before = b;
	int m = rx_search(r, t, n, &b);
	c->rx_budget -= before - b;
	charge(c, (before - b) * W_RX_STEP);
	if (m < 0 && c->rx_budget > 0)
		charge(c, UINT64_MAX);   /* stopped by the work budget: it is spent */
	else if (m < 0)
		ap->nrx++;
	return m < 0 ? -1 : m > 0;
}

static int run_rx(struct ctx *c, const struct rx *r, const char *t, size_t n, struct app *ap)
{
	return run_rx3(c, r, t, n, ap) > 0;
}

static bool key_text(const json_t *v, unsigned norm, struct strbuf *sb);

/* A term built from a value (common/README.md "Spec language v3"): prefix + the text of the
 * value at r's path (a string, or a number's canonical text) + suffix, normalised as the text
 * was; *found when it occurs in text. Its normalising and scan are paid here. Returns 0, or
 * PRIM_BAD (e: the expected side) when the value is missing or not a string or number. */
static int ref_term(struct ctx *c, const struct spec_dim *d, const struct spec_tref *r,
                    const char *text, size_t tl, bool *found, json_t *built, struct prim_err *e)
{
	char why[120];
	const json_t *v = get_path(r->path, root_doc(c, r->src, NULL), why, sizeof why);
	*found = false;
	if (!json_is_string(v) && !json_is_number(v)) {
		e->side = 1;
		snprintf(e->why, sizeof e->why, "the term from '%.100s' %s", r->text,
		         v ? "is not a string or a number" : "has no value");
		return PRIM_BAD;
	}
	struct strbuf sb = { 0 };
	strbuf_addlit(&sb, "");
	if (r->prefix)
		strbuf_add(&sb, r->prefix, strlen(r->prefix));
	key_text(v, 0, &sb);
	if (r->suffix)
		strbuf_add(&sb, r->suffix, strlen(r->suffix));
	json_t *tj = json_stringn(sb.buf, sb.len);
	strbuf_free(&sb);
	if (!tj || !charge(c, string_units(tj, d->norm))) {   /* its scan is paid with the others */
		json_decref(tj);
		return 0;
	}
	size_t n;
	char *t = norm_text(d->norm, json_string_value(tj), json_string_length(tj), &n);
	*found = n > 0 && memmem(text, tl, t, n) != NULL;
	if (built && json_array_size(built) < 50)
		json_array_append_new(built, json_stringn(t, n));
	free(t);
	json_decref(tj);
	return 0;
}

static int apply_terms(struct ctx *c, const struct spec_dim *d, const json_t *got,
                       const json_t *want, struct app *ap, struct prim_err *e)
{
	size_t tl;
	bool owned;
	/* joining an array's strings: a call per string (their bytes are charged below) */
	if (json_is_array(got) && !charge(c, W_STRING * (uint64_t)json_array_size(got)))
		return 0;
	const char *text = text_of(got, &tl, &owned);
	char *own = owned ? (char *)text : NULL;
	if (!text)
		return need_type(got, 0, "a string or an array of strings", e);
	size_t total = d->nterms, found = 0;
	size_t nscan = 0;   /* literal scans of the text */
	for (size_t i = 0; i < d->nterms; i++)
		for (size_t k = 0; k < d->terms[i].nalt; k++)
			nscan += !d->terms[i].rx[k];
	if (!d->nterms && json_is_array(want))
		nscan = json_array_size(want);
	/* terms_from "words": the ground-truth string's distinct words, tokenised as token_overlap
	 * does (paid like it), then each a literal term */
	char **wt = NULL;
	size_t nw = 0;
	struct strbuf wsb = { 0 };
	if (!d->nterms && d->words_terms) {
		if (!json_is_string(want)) {
			free(own);
			return need_type(want, 1, "a string (its words are the terms)", e);
		}
		if (!charge(c, W_TOKEN * (uint64_t)json_string_length(want))) {
			free(own);
			return 0;
		}
		prim_tokens(json_string_value(want), json_string_length(want), &wsb, &wt, &nw);
		nscan = nw;
	}
	if (!charge(c, W_STRING + (uint64_t)tl * W_SCAN * (nscan + 1))) {
		free(own);
		free(wt);
		strbuf_free(&wsb);
		return 0;
	}
	json_t *hit = ap->det ? json_array() : NULL, *miss = ap->det ? json_array() : NULL;
	if (d->nterms) {
		json_t *built = ap->det ? json_array() : NULL;   /* terms built from values */
		for (size_t i = 0; i < d->nterms && !c->over; i++) {
			const struct spec_term *t = &d->terms[i];
			bool f = false;
			for (size_t k = 0; k < t->nalt && !f; k++) {
				if (t->rx[k]) {
					int m = run_rx3(c, t->rx[k], text, tl, ap);
					f = m > 0 || (m < 0 && t->neg);   /* stopped: present, for a negation */
				} else if (t->ref[k]) {
					int rr = ref_term(c, d, t->ref[k], text, tl, &f, built, e);
					if (rr != 0) {
						free(own);
						json_decref(hit);
						json_decref(miss);
						json_decref(built);
						return rr;
					}
				} else {
					f = memmem(text, tl, t->lit[k], t->litlen[k]) != NULL;
				}
			}
			if (t->neg)   /* {"not": ...}: found when none of its alternatives occurs */
				f = !f;
			found += f;
			if (hit)
				json_array_append_new(f ? hit : miss, json_integer((json_int_t)i));
		}
		if (built && json_array_size(built))
			det_set(ap, "terms_built", built);
		else
			json_decref(built);
	} else if (d->words_terms) {
		total = nw;
		for (size_t i = 0; i < nw; i++) {
			bool f = memmem(text, tl, wt[i], strlen(wt[i])) != NULL;
			found += f;
			if (hit && json_array_size(f ? hit : miss) < 50)
				json_array_append_new(f ? hit : miss, json_string(wt[i]));
		}
		free(wt);
		strbuf_free(&wsb);
	} else {
		if (!json_is_array(want)) {
			free(own);
			json_decref(hit);
			json_decref(miss);
			return need_type(want, 1, "an array of strings", e);
		}
		total = json_array_size(want);
		for (size_t i = 0; i < total; i++) {
			const json_t *w = json_array_get(want, i);
			if (!json_is_string(w)) {
				free(own);
				json_decref(hit);
				json_decref(miss);
				return need_type(w, 1, "a string (a term)", e);
			}
			bool f = json_string_length(w) > 0 &&
			         memmem(text, tl, json_string_value(w), json_string_length(w)) != NULL;
			found += f;
			if (hit)
				json_array_append_new(f ? hit : miss, json_copy((json_t *)w));
		}
	}
	free(own);
	det_set(ap, "terms_found", hit);
	det_set(ap, "terms_missing", miss);
	if (total == 0)
		return 1000;
	size_t need = d->need ? (size_t)d->need : total;
	if (found > need)
		found = need;
	det_set(ap, "fraction", frac_json(found, need));
	return prim_permille_frac(found, need, &ap->fr);
}

/* An object's match_on key tuple: false when a key is missing or the item is not an object.
 * A single key whose value is a string needing no escapes is the string itself (*plain, its
 * bytes; *len); any other tuple is its canonical text appended to sb (*plain NULL, *len the
 * bytes appended): the canonical JSON texts of its values joined by ",", which read back
 * unambiguously as the members of an array. Either form determines the tuple, and a string
 * given plain never has its text form, so two tuples are equal exactly when their forms are
 * (the plain flag kept beside the length, OKEY_PLAIN). */
#define OKEY_PLAIN ((size_t)1 << (sizeof(size_t) * 8 - 1))

static bool item_key(const struct spec_dim *d, const json_t *item, struct strbuf *sb,
                     const char **plain, size_t *len)
{
	if (!json_is_object(item))
		return false;
	size_t at = sb->len;
	*plain = NULL;
	for (size_t k = 0; k < d->nkeys; k++) {
		const json_t *v = jpath_get(d->match_on[k], item, NULL, 0);
		if (!v)
			return false;
		if (d->nkeys == 1 && !d->norm && json_is_string(v)) {
			const char *t = json_string_value(v);
			size_t n = json_string_length(v), i = 0;
			for (; i < n; i++) {
				unsigned char ch = (unsigned char)t[i];
				if (ch < 0x20 || ch == '"' || ch == '\\')
					break;
			}
			if (i == n) {
				*plain = t;
				*len = n | OKEY_PLAIN;
				return true;
			}
		}
		if (k)
			strbuf_addlit(sb, ",");
		if (!d->norm) {
			jcanon_dump(v, sb);
			continue;
		}
		json_t *nv = norm_value(d->norm, v);
		jcanon_dump(nv, sb);
		json_decref(nv);
	}
	*len = sb->len - at;
	return true;
}

/* Units to key the objects of arr (item_key): each match_on value normalised (with
 * normalize) or dumped. */
static uint64_t okey_units(const struct spec_dim *d, const json_t *arr)
{
	uint64_t u = 0;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const json_t *item = json_array_get(arr, i);
		for (size_t k = 0; json_is_object(item) && k < d->nkeys; k++) {
			const json_t *v = jpath_get(d->match_on[k], item, NULL, 0);
			if (!v)
				break;
			u += value_units(v, d->norm);
		}
	}
	return u;
}

/* A submitted object's key (item_key: bytes k, len with the OKEY_PLAIN flag) with its 64-bit
 * hash of the bytes (FNV-style, 8 bytes per step): keys sort by (hash, len, bytes, index), so
 * equal keys are adjacent in submission order and most comparisons are one integer compare
 * (colliding hashes only cost the length and byte compares; the order is never needed beyond
 * grouping). */
struct okey { uint64_t h; const char *k; size_t len; size_t idx; };

uint64_t score_key_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {   /* 8 bytes per multiply, then the tail */
		uint64_t w;
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h ^ (h >> 32);
}

/* (hash, len, bytes) order of x against the probe (h, k, len); len holds the OKEY_PLAIN flag. */
static int okey_cmp_to(const struct okey *x, uint64_t h, const char *k, size_t len)
{
	if (x->h != h)
		return x->h < h ? -1 : 1;
	if (x->len != len)
		return x->len < len ? -1 : 1;
	return memcmp(x->k, k, len & ~OKEY_PLAIN);
}

static bool okey_same(const struct okey *x, const char *k, size_t len)
{
	return x->len == len && !memcmp(x->k, k, len & ~OKEY_PLAIN);
}

/* The first position in keys[0..n) (sorted) whose hash is not below h; branch-free steps. */
static size_t hash_lower_bound(const struct okey *keys, size_t n, uint64_t h)
{
	const struct okey *base = keys;
	while (n > 1) {
		size_t half = n / 2;
		base += (size_t)(base[half - 1].h < h) * half;   /* arithmetic: no branch to mispredict */
		n -= half;
	}
	return (size_t)(base - keys) + (n == 1 && base->h < h);
}

static bool okey_before(const struct okey *x, const struct okey *y)
{
	if (x->h != y->h)
		return x->h < y->h;
	int r = okey_cmp_to(x, y->h, y->k, y->len);
	return r ? r < 0 : x->idx < y->idx;
}

/* Sorts a[0..n) by okey_before: a stable bottom-up merge sort (O(n log n) whatever the keys),
 * with insertion sort on runs of 8; tmp holds n items. */
static void okey_sort(struct okey *a, struct okey *tmp, size_t n)
{
	for (size_t lo = 0; lo < n; lo += 8) {
		size_t hi = lo + 8 < n ? lo + 8 : n;
		for (size_t i = lo + 1; i < hi; i++) {
			struct okey x = a[i];
			size_t j = i;
			for (; j > lo && okey_before(&x, &a[j - 1]); j--)
				a[j] = a[j - 1];
			a[j] = x;
		}
	}
	struct okey *src = a, *dst = tmp;
	for (size_t w = 8; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				dst[k++] = okey_before(&src[j], &src[i]) ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		struct okey *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof *a);
}

/* The prepared expected side (score_prepare) of a nested primitive on one expected element. */
struct pval {
	const json_t *v;               /* the value at the primitive's path, NULL when missing */
	/* exact_match with normalize (not case_insensitive) on a string v: */
	char *ntext; size_t nlen;      /* its normalised text, or NULL */
	uint64_t units;                /* string_units(v, steps) */
	int numk; struct dec_num num;  /* what NORM_NUMERIC makes of ntext (0 without the step) */
	/* numeric_tolerance without normalize on a number v: */
	bool has_dec; struct dec_num dec;   /* its exact decimal */
};

/* A top-level match_objects or keyed_map dimension reading the ground truth, prepared. */
struct prep_dim {
	const struct spec_dim *d;
	const json_t *want;            /* the expected value it was built from */
	size_t n;                      /* expected elements (match_objects) or keys (keyed_map) */
	size_t nk; struct okey *keys;  /* match_objects: the keyed elements, sorted like okey_sort */
	struct strbuf kb;              /* match_objects: their text keys */
	/* match_objects: a hash index of the distinct keys (open addressing: 1 + the sorted
	 * position of each key's first element, 0 empty; at most half full, no run of filled
	 * slots longer than OKEY_RUN_MAX), or NULL (then keys are binary-searched). */
	uint32_t *slot; size_t mask;
	const char **names;            /* keyed_map: the key of each entry */
	struct pval *vals;             /* n × nfields (match_objects) or n (keyed_map) */
	/* set_overlap, coverage_ratio, token_overlap: */
	json_t *nwant;                 /* want normalised (a reference to want without normalize) */
	uint64_t want_units;           /* normalising want: value_units(want, steps) */
	uint64_t nwant_units;          /* nwant's share of prim_units */
	uint64_t key_units;            /* match_objects: okey_units of want */
	bool has_set; struct prim_set set;            /* sets: nwant's items */
	bool has_tok; struct strbuf tsb; char **tok; size_t ntok;   /* token_overlap: nwant's */
};

struct score_prep {
	const struct spec *s;
	const json_t *gt;
	json_t *empty;                 /* {} when the ground truth was NULL */
	struct prep_dim *dims[SPEC_MAX_DIMS];
	uint64_t work;                 /* work units the preparation spent (at most the budget) */
};

/* Takes units from the preparation's work bound *left; false (nothing taken) when they do
 * not fit: that step is then left to the evaluations, which charge it as usual. */
static bool prep_take(uint64_t *left, uint64_t units)
{
	if (units > *left)
		return false;
	*left -= units;
	return true;
}

/* Prepares v, the expected value nested primitive n reads; normalising costs units from
 * *left (not prepared when they do not fit). */
static void pval_init(const struct spec_dim *n, const json_t *v, struct pval *pv, uint64_t *left)
{
	memset(pv, 0, sizeof *pv);
	pv->v = v;
	if (n->prim == PRIM_EXACT_MATCH && n->norm && !n->case_insensitive && json_is_string(v) &&
	    prep_take(left, string_units(v, n->norm))) {
		size_t len;
		char *t = norm_text_buf(n->norm, json_string_value(v), json_string_length(v), NULL, 0,
		                        &len);
		pv->ntext = t;
		pv->nlen = len;
		pv->units = string_units(v, n->norm);
		pv->numk = n->norm & NORM_NUMERIC ? norm_numeric(t, len, &pv->num) : 0;
	} else if (n->prim == PRIM_NUMERIC_TOLERANCE && !n->norm && json_is_number(v)) {
		pv->has_dec = dec_num_from_json(v, &pv->dec) == 0;
	}
}

/* The value a nested primitive n reads on expected element w: its ground_truth_field, or
 * without one the same path as on the submitted element. */
static const json_t *nested_want(const struct spec_dim *n, const json_t *w)
{
	const struct jpath *gp = n->gt_text ? n->gt_field : n->field;
	return w ? get_path(gp, w, NULL, 0) : NULL;
}

/* A nested primitive on one element pair; missing sub-values count 0 (ap->nbad). pw, when not
 * NULL, is w's prepared side (w is then not read). Returns 0..1000. */
static int nested(struct ctx *c, const struct spec_dim *n, const json_t *g, const json_t *w,
                  const struct pval *pw, struct app *ap)
{
	/* the dimension already scores 0 when a step did not fit: nothing more of it runs */
	if (c->over || !charge(c, W_APPLY))
		return 0;
	const json_t *sg = g ? get_path(n->field, g, NULL, 0) : NULL;
	const json_t *sw = pw ? pw->v : nested_want(n, w);
	unsigned fl = prim_flags(n->prim);   /* an expected value is needed: */
	if (!sg || (!sw && ((fl & PRIM_F_GT) || ((fl & PRIM_F_GT_OPT) && !n->nterms)))) {
		ap->nbad++;
		return 0;
	}
	struct prim_err e = { 0, "" };
	struct app sub = { 0, 0, NULL, { .kind = PRIM_FR_NONE } };
	int r = apply(c, n, sg, sw, pw, &sub, &e);
	ap->nrx += sub.nrx;
	ap->nbad += sub.nbad;
	if (r == PRIM_BAD) {
		ap->nbad++;
		return 0;
	}
	return r;
}

/* The longest run of filled slots a prepared hash index may have: a lookup reads at most this
 * many slots plus one, whatever key it is given. */
#define OKEY_RUN_MAX 32

/* The first of keys[0..n) (sorted) equal to the key (k, len) and its hash h, or n; through the
 * hash index slot/mask when there is one. */
static size_t okey_find(const struct okey *keys, size_t n, const uint32_t *slot, size_t mask,
                        uint64_t h, const char *k, size_t len)
{
	if (slot) {
		for (size_t i = (size_t)h & mask; slot[i]; i = (i + 1) & mask) {
			const struct okey *x = &keys[slot[i] - 1];
			if (x->h == h && okey_same(x, k, len))
				return slot[i] - 1;
		}
		return n;
	}
	size_t lo = hash_lower_bound(keys, n, h);
	if (lo < n && keys[lo].h == h && !okey_same(&keys[lo], k, len)) {
		/* another key with the same hash sorts first: search the run by text */
		size_t hi = n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (okey_cmp_to(&keys[mid], h, k, len) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	return lo < n && keys[lo].h == h && okey_same(&keys[lo], k, len) ? lo : n;
}

/* Keys the objects of arr (item_key; text keys in sb) into keys[], hashed and sorted by
 * (hash, len, bytes, index); returns how many had a key. */
static size_t key_items(const struct spec_dim *d, const json_t *arr, struct strbuf *sb,
                        struct okey *keys)
{
	size_t n = json_array_size(arr), nk = 0;
	size_t *off = xcalloc(n ? n : 1, sizeof *off);   /* text keys: offset in sb */
	strbuf_addlit(sb, "");
	for (size_t i = 0; i < n; i++) {
		const char *p;
		size_t at = sb->len, len;
		if (!item_key(d, json_array_get(arr, i), sb, &p, &len))
			continue;
		off[nk] = at;
		keys[nk++] = (struct okey){ 0, p, len, i };
	}
	for (size_t k = 0; k < nk; k++) {   /* sb no longer moves */
		if (!keys[k].k)
			keys[k].k = sb->buf + off[k];
		keys[k].h = score_key_hash(keys[k].k, keys[k].len & ~OKEY_PLAIN);
	}
	free(off);
	struct okey *ktmp = xmalloc((nk ? nk : 1) * sizeof *ktmp);
	okey_sort(keys, ktmp, nk);
	free(ktmp);
	return nk;
}

/* Pairs submitted elements with expected ones: the m-th expected element with a given key
 * and the m-th submitted one with that key (both in array order) form a pair; elements
 * without a key, or beyond the other side's count for their key, stay unpaired. Fills
 * pair[j] (expected j) with the submitted index or SIZE_MAX; returns the pairs. keys and
 * taken hold one side's sorted keys and per-group counts; the other side is keyed one
 * element at a time. */
static size_t pair_up(const struct spec_dim *d, const json_t *probe_arr, const struct okey *keys,
                      size_t nk, const uint32_t *slot, size_t mask, size_t *taken,
                      bool probe_is_expected, size_t *pair)
{
	struct strbuf kb = { 0 };
	size_t matched = 0, np = json_array_size(probe_arr);
	for (size_t j = 0; j < np; j++) {
		const char *kt;
		size_t kl;
		kb.len = 0;
		strbuf_addlit(&kb, "");
		if (!item_key(d, json_array_get(probe_arr, j), &kb, &kt, &kl))
			continue;
		if (!kt)
			kt = kb.buf;
		size_t first = okey_find(keys, nk, slot, mask, score_key_hash(kt, kl & ~OKEY_PLAIN), kt, kl);
		if (first >= nk)
			continue;
		/* taken[first]: how many of the equal keys starting at first are paired already
		 * (they are paired in order): no rescan of used keys, whatever the duplicates */
		size_t lo = first + taken[first];
		if (lo >= nk || (taken[first] && (keys[lo].h != keys[first].h ||
		                                  !okey_same(&keys[lo], kt, kl))))
			continue;   /* every element with this key on the other side is paired already */
		taken[first]++;
		matched++;
		if (probe_is_expected)
			pair[j] = keys[lo].idx;
		else
			pair[keys[lo].idx] = j;
	}
	strbuf_free(&kb);
	return matched;
}

static int mo_score(struct ctx *c, const struct spec_dim *d, const json_t *got, const json_t *want,
                    const json_t *const *ge, const json_t *const *we, size_t ns, size_t ne,
                    const size_t *pair, size_t matched, const struct prep_dim *pd, struct app *ap);

/* match_objects method distinct (v3): how many distinct values (canonical JSON; a missing value
 * counts as none) the matched pairs' expected elements hold at distinct_of, against the ramp.
 * The values are dumped and sorted: paid as a count of distinct items. */
static int mo_distinct(struct ctx *c, const struct spec_dim *d, const json_t *const *v, size_t n,
                       struct app *ap)
{
	uint64_t u = 0;
	for (size_t i = 0; i < n; i++)
		u += v[i] ? 2 * value_units(v[i], 0) : 0;
	if (c->over || !charge(c, u))
		return 0;
	char **txt = xcalloc(n ? n : 1, sizeof *txt);
	size_t m = 0, distinct = 0;
	for (size_t i = 0; i < n; i++) {
		if (!v[i])
			continue;
		struct strbuf t = { 0 };
		strbuf_addlit(&t, "");
		jcanon_dump(v[i], &t);
		txt[m++] = t.buf;
	}
	qsort(txt, m, sizeof *txt, score_strcmp);
	for (size_t i = 0; i < m; i++)
		distinct += i == 0 || strcmp(txt[i - 1], txt[i]);
	for (size_t i = 0; i < m; i++)
		free(txt[i]);
	free(txt);
	det_set(ap, "distinct", json_integer((json_int_t)distinct));
	return prim_ramp((int64_t)distinct, d->points, d->npoints, d->steps, &ap->fr);
}

static int apply_mo_keyed(struct ctx *c, const struct spec_dim *d, const json_t *got,
                          const json_t *want, struct app *ap);

/* match_objects: each expected element, in order, takes the first unused submitted element
 * with the same match_on key; the pairs are scored by mo_score. The sides are of the types
 * nd_objects asks (checked by apply): arrays, or objects for a keyed side. */
static int apply_match_objects(struct ctx *c, const struct spec_dim *d, const json_t *got,
                               const json_t *want, struct app *ap)
{
	if (d->f_keyed || d->g_keyed)
		return apply_mo_keyed(c, d, got, want, ap);
	const struct prep_dim *pd = c->cur && c->cur->d == d && c->cur->want == want ? c->cur : NULL;
	/* both sides' keys, normalised or dumped (prepared or not, the same units) */
	if (!charge(c, okey_units(d, got) + (pd ? pd->key_units : okey_units(d, want))))
		return 0;
	size_t ns = json_array_size(got), ne = json_array_size(want), matched;
	size_t *pair = xmalloc((ne ? ne : 1) * sizeof *pair);
	for (size_t j = 0; j < ne; j++)
		pair[j] = SIZE_MAX;
	if (pd) {   /* expected keys prepared: key each submitted element and look it up */
		size_t *taken = xcalloc(pd->nk ? pd->nk : 1, sizeof *taken);
		matched = pair_up(d, got, pd->keys, pd->nk, pd->slot, pd->mask, taken, false, pair);
		free(taken);
	} else {
		struct strbuf sb = { 0 };
		struct okey *keys = xcalloc(ns ? ns : 1, sizeof *keys);
		size_t nk = key_items(d, got, &sb, keys);
		size_t *taken = xcalloc(nk ? nk : 1, sizeof *taken);
		matched = pair_up(d, want, keys, nk, NULL, 0, taken, true, pair);
		free(taken);
		free(keys);
		strbuf_free(&sb);
	}
	int r = mo_score(c, d, got, want, NULL, NULL, ns, ne, pair, matched, pd, ap);
	free(pair);
	return r;
}

/* match_objects' score from its pairs (pair[j]: the submitted index paired with expected j, or
 * SIZE_MAX): the pairs' field scores in expected order, aggregated by the method. The elements
 * are ge[i] / we[j] when given (keyed sides), else the arrays' items. */
static int mo_score(struct ctx *c, const struct spec_dim *d, const json_t *got, const json_t *want,
                    const json_t *const *ge, const json_t *const *we, size_t ns, size_t ne,
                    const size_t *pair, size_t matched, const struct prep_dim *pd, struct app *ap)
{
	dec6 wsum = 0;
	for (size_t f = 0; f < d->nfields; f++)
		wsum += d->fweights[f];
	unsigned __int128 num = 0;   /* Σ over pairs of Σ w_f × s_f (or 1000 × 10^6 per pair) */
	json_t *pairs = ap->det ? json_array() : NULL;
	const json_t **dvals = d->distinct_of ? xcalloc(ne ? ne : 1, sizeof *dvals) : NULL;
	size_t ndv = 0;
	for (size_t j = 0; j < ne && !c->over; j++) {   /* pairs in expected order */
		if (pair[j] == SIZE_MAX)
			continue;
		const json_t *w = we ? we[j] : json_array_get(want, j);
		const json_t *g = ge ? ge[pair[j]] : json_array_get(got, pair[j]);
		int64_t pn = 0;
		if (d->nfields == 0) {
			pn = (int64_t)1000 * DEC6_ONE;
		} else {
			for (size_t f = 0; f < d->nfields; f++)
				pn += (int64_t)nested(c, &d->fields[f], g, w,
				                      pd ? &pd->vals[j * d->nfields + f] : NULL, ap) *
				      d->fweights[f];
			/* scale to "per unit weight": Σ w s / W, kept as a fraction over W below */
		}
		num += (unsigned __int128)pn;
		if (d->distinct_of && pn > 0)   /* method distinct: the expected values counted */
			dvals[ndv++] = jpath_get(d->distinct_of, w, NULL, 0);
		if (pairs && json_array_size(pairs) < 50)
			json_array_append_new(pairs, json_pack("{s:I, s:I, s:f}", "submitted",
			                      (json_int_t)pair[j], "expected", (json_int_t)j,
			                      "score", d->nfields ? (double)pn / (double)wsum
			                                          : 1000.0));
	}
	/* pair fraction = pn / (1000 × W), W = wsum (or 10^6 without fields). */
	unsigned __int128 unit = (unsigned __int128)1000 * (unsigned __int128)(d->nfields ? wsum
	                                                                                  : DEC6_ONE);
	unsigned __int128 den;
	int r;
	if (d->distinct_of) {   /* method distinct: the ramp at the count of distinct values */
		r = mo_distinct(c, d, dvals, ndv, ap);
		free(dvals);
		den = 1;
	} else if (ns == 0 && ne == 0) {
		r = 1000;
		den = 1;
	} else {
		switch (d->method) {
		case PRIM_M_PRECISION: den = unit * ns; break;
		case PRIM_M_F1: den = unit * (ns + ne); num *= 2; break;
		case PRIM_M_MEAN: den = unit * matched; break;
		case PRIM_M_POINTS:   /* Σ points × pair fraction, capped at max_points */
			num *= (unsigned __int128)d->pair_points;
			den = unit * (unsigned __int128)d->max_points;
			if (num > den)
				num = den;
			det_set(ap, "points", json_real((double)(num * 1000000 / unit) / 1e6 / 1e6));
			break;
		default: den = unit * ne; break;
		}
		r = den == 0 ? (d->method == PRIM_M_RECALL ? 1000 : 0)
		             : prim_permille_frac(num, den, &ap->fr);
	}
	det_set(ap, "objects", json_pack("{s:I, s:I, s:I}", "submitted", (json_int_t)ns,
	                                 "expected", (json_int_t)ne, "matched", (json_int_t)matched));
	det_set(ap, "pairs", pairs);
	return r;
}

static int apply_keyed_records(struct ctx *c, const struct spec_dim *d, const json_t *got,
                               const json_t *want, struct app *ap);

/* keyed_map: the nested item primitive on each key's pair of values, averaged over the keys
 * scored (`keys`, else the expected object's). The sides are of the types nd_keyed asks
 * (checked by apply): objects, or arrays of records with field_key / ground_truth_key. */
static int apply_keyed_map(struct ctx *c, const struct spec_dim *d, const json_t *got,
                           const json_t *want, struct app *ap)
{
	if (d->fkey || d->gkey)
		return apply_keyed_records(c, d, got, want, ap);
	const struct prep_dim *pd = c->cur && c->cur->d == d && c->cur->want == want ? c->cur : NULL;
	size_t nk = d->keys ? json_array_size(d->keys) : json_object_size(want);
	unsigned long long sum = 0;
	json_t *per = ap->det ? json_object() : NULL;
	size_t i = 0;
	void *it = d->keys || pd ? NULL : json_object_iter((json_t *)want);
	for (i = 0; i < nk && !c->over; i++) {
		const char *k;
		const json_t *wv = NULL;
		if (pd) {
			k = pd->names[i];
		} else if (d->keys) {
			k = json_string_value(json_array_get(d->keys, i));
			wv = json_object_get(want, k);
		} else {   /* the expected value is at hand: no lookup */
			k = json_object_iter_key(it);
			wv = json_object_iter_value(it);
			it = json_object_iter_next((json_t *)want, it);
		}
		int r = nested(c, d->item, json_object_get(got, k), wv, pd ? &pd->vals[i] : NULL, ap);
		sum += (unsigned long long)r;
		if (per && json_object_size(per) < 50)
			json_object_set_new(per, k, json_integer(r));
	}
	det_set(ap, "per_key", per);
	if (nk == 0)
		return 1000;
	det_set(ap, "fraction", frac_json(sum, 1000ULL * nk));
	return prim_permille_frac(sum, (unsigned __int128)1000 * nk, &ap->fr);
}

static int apply_count(const struct spec_dim *d, const json_t *got, struct app *ap,
                       struct prim_err *e)
{
	int64_t n = 0;
	switch (d->count_of) {
	case SPEC_C_LENGTH:
		if (json_is_array(got))
			n = (int64_t)json_array_size(got);
		else if (json_is_object(got))
			n = (int64_t)json_object_size(got);
		else if (json_is_string(got))
			n = (int64_t)prim_count_chars(json_string_value(got), json_string_length(got));
		else
			return need_type(got, 0, "an array, an object or a string", e);
		break;
	case SPEC_C_PRESENT:
		if (!json_is_object(got))
			return need_type(got, 0, "an object", e);
		for (size_t i = 0; i < json_array_size(d->present_keys); i++) {
			const json_t *v = json_object_get(got, json_string_value(json_array_get(d->present_keys, i)));
			n += v && !json_is_null(v);
		}
		break;
	default: {
		if (!json_is_array(got))
			return need_type(got, 0, "an array", e);
		size_t distinct = 0;   /* distinct canonical items */
		{
			size_t m = json_array_size(got);
			char **txt = xcalloc(m ? m : 1, sizeof *txt);
			for (size_t i = 0; i < m; i++) {
				struct strbuf t = { 0 };
				strbuf_addlit(&t, "");
				jcanon_dump(json_array_get(got, i), &t);
				txt[i] = t.buf;
			}
			qsort(txt, m, sizeof *txt, score_strcmp);
			for (size_t i = 0; i < m; i++)
				distinct += i == 0 || strcmp(txt[i - 1], txt[i]);
			for (size_t i = 0; i < m; i++)
				free(txt[i]);
			free(txt);
		}
		if (d->count_of == SPEC_C_UNIQUE_RATIO) {
			size_t m = json_array_size(got);
			det_set(ap, "fraction", frac_json(distinct, m));
			return m == 0 ? 0 : prim_permille_frac(distinct, m, &ap->fr);
		}
		n = (int64_t)distinct;
		break;
	}
	}
	det_set(ap, "count", json_integer(n));
	return prim_ramp(n, d->points, d->npoints, d->steps, &ap->fr);
}

/* ---- keyed sides (common/README.md "Spec language v3": keyed answers against records) ---- */

/* Appends the text of a key value to sb: a string as it is, an integer in decimal digits, a
 * real as its shortest decimal text (2.0 is "2", 1.5 is "1.5", as JavaScript prints them in the
 * usual range); false for any other value (no key). With norm, the value is normalised first
 * (a numeric string may become a number). */
static bool key_text(const json_t *v, unsigned norm, struct strbuf *sb)
{
	json_t *nv = norm && v ? norm_value(norm, v) : NULL;
	const json_t *x = nv ? nv : v;
	bool ok = true;
	char b[48];
	if (json_is_string(x))
		strbuf_add(sb, json_string_value(x), json_string_length(x));
	else if (json_is_integer(x))
		strbuf_addf(sb, "%lld", (long long)json_integer_value(x));
	else if (json_is_real(x) && dec_shortest(json_real_value(x), b, sizeof b) > 0)
		strbuf_add(sb, b, strlen(b));
	else
		ok = false;
	json_decref(nv);
	return ok;
}

/* Units to build one key from v (a string or a number) and its affixes. */
static uint64_t key_units(const json_t *v, unsigned norm, const struct spec_rkey *k)
{
	uint64_t u = W_STRING + (json_is_string(v) ? (norm ? string_units(v, norm) - W_STRING
	                                                    : W_BYTE * json_string_length(v)) : 0);
	if (k)
		u += W_BYTE * ((k->prefix ? strlen(k->prefix) : 0) + (k->suffix ? strlen(k->suffix) : 0));
	return u;
}

/* A record's key: prefix + the text of the value at path (or at match_on when k->path is NULL)
 * + suffix, in sb (reset first); false when the record has no usable key. */
static bool record_key(const struct spec_rkey *k, const struct jpath *path, const json_t *rec,
                       unsigned norm, struct strbuf *sb)
{
	sb->len = 0;
	strbuf_addlit(sb, "");
	const json_t *v = rec ? jpath_get(path, rec, NULL, 0) : NULL;
	if (!v)
		return false;
	if (k && k->prefix)
		strbuf_add(sb, k->prefix, strlen(k->prefix));
	if (!key_text(v, norm, sb))
		return false;
	if (k && k->suffix)
		strbuf_add(sb, k->suffix, strlen(k->suffix));
	return true;
}

/* keyed_map with a records side (field_key / ground_truth_key): each side is an object, or an
 * array of records keyed by their built key (the first record with a key counts). The keys
 * scored are `keys`, else the expected object's keys, else each expected record's key in
 * order (a record without one counts 0). The sides' types are checked by apply (nd_keyed). */
static int apply_keyed_records(struct ctx *c, const struct spec_dim *d, const json_t *got,
                               const json_t *want, struct app *ap)
{
	/* the records' keys, built before anything is scored */
	uint64_t u = 0;
	const struct spec_rkey *ks[2] = { d->fkey, d->gkey };
	const json_t *sides[2] = { got, want };
	for (int s = 0; s < 2; s++)
		for (size_t i = 0; ks[s] && i < json_array_size(sides[s]); i++) {
			const json_t *v = jpath_get(ks[s]->path, json_array_get(sides[s], i), NULL, 0);
			u += W_NODE + (v ? key_units(v, 0, ks[s]) : 0);
		}
	if (!charge(c, u))
		return 0;
	struct strbuf kb = { 0 };
	json_t *maps[2] = { NULL, NULL };   /* built key → the first record with it */
	for (int s = 0; s < 2; s++) {
		if (!ks[s])
			continue;
		maps[s] = json_object();
		for (size_t i = 0; i < json_array_size(sides[s]); i++) {
			json_t *rec = json_array_get(sides[s], i);
			if (record_key(ks[s], ks[s]->path, rec, 0, &kb) &&
			    !json_object_getn(maps[s], kb.buf, kb.len))
				json_object_setn_new(maps[s], kb.buf, kb.len, json_incref(rec));
		}
	}
	size_t nk = d->keys ? json_array_size(d->keys) : d->gkey ? json_array_size(want)
	                                                         : json_object_size(want);
	unsigned long long sum = 0;
	json_t *per = ap->det ? json_object() : NULL;
	void *it = !d->keys && !d->gkey ? json_object_iter((json_t *)want) : NULL;
	for (size_t i = 0; i < nk && !c->over; i++) {
		const json_t *wv = NULL;
		bool have = true;
		kb.len = 0;
		strbuf_addlit(&kb, "");
		if (d->keys) {
			const json_t *kj = json_array_get(d->keys, i);
			strbuf_add(&kb, json_string_value(kj), json_string_length(kj));
			wv = d->gkey ? json_object_getn(maps[1], kb.buf, kb.len)
			             : json_object_getn(want, kb.buf, kb.len);
		} else if (d->gkey) {
			wv = json_array_get(want, i);
			have = record_key(d->gkey, d->gkey->path, wv, 0, &kb);
		} else {
			const char *k = json_object_iter_key(it);
			strbuf_add(&kb, k, json_object_iter_key_len(it));
			wv = json_object_iter_value(it);
			it = json_object_iter_next((json_t *)want, it);
		}
		int r = 0;
		if (have) {
			const json_t *gv = json_object_getn(d->fkey ? maps[0] : got, kb.buf, kb.len);
			r = nested(c, d->item, gv, wv, NULL, ap);
		} else {
			ap->nbad++;   /* an expected record without a key: counts 0 */
		}
		sum += (unsigned long long)r;
		if (per && json_object_size(per) < 50 && have)
			json_object_setn_new(per, kb.buf, kb.len, json_integer(r));
	}
	json_decref(maps[0]);
	json_decref(maps[1]);
	strbuf_free(&kb);
	det_set(ap, "per_key", per);
	if (nk == 0)
		return 1000;
	det_set(ap, "fraction", frac_json(sum, 1000ULL * nk));
	return prim_permille_frac(sum, (unsigned __int128)1000 * nk, &ap->fr);
}

/* match_objects with an object side (field_keyed / ground_truth_keyed): a member {k: v} is the
 * element v with the key k; a record's key is match_on's value (with match_on's prefix and
 * suffix). Keys are normalised with `normalize`. Pairing as for arrays: each expected element,
 * in order, takes the first unused submitted element with the same key. The sides' types are
 * checked by apply (nd_objects). */
static int apply_mo_keyed(struct ctx *c, const struct spec_dim *d, const json_t *got,
                          const json_t *want, struct app *ap)
{
	const json_t *sides[2] = { got, want };
	bool keyed[2] = { d->f_keyed, d->g_keyed };
	size_t n[2];
	uint64_t u = 0;
	for (int s = 0; s < 2; s++) {
		n[s] = keyed[s] ? json_object_size(sides[s]) : json_array_size(sides[s]);
		if (keyed[s]) {
			const char *k;
			json_t *v;
			json_object_foreach((json_t *)sides[s], k, v)
				u += W_NODE + W_STRING + W_BYTE * (uint64_t)strlen(k) * (d->norm ? 16 : 1);
		} else {
			for (size_t i = 0; i < n[s]; i++) {
				const json_t *v = jpath_get(d->match_on[0], json_array_get(sides[s], i), NULL, 0);
				u += W_NODE + (v ? key_units(v, d->norm, d->okey) : 0);
			}
		}
	}
	if (!charge(c, u))
		return 0;
	const json_t **el[2];
	char **keys[2];
	size_t *klen[2];
	struct strbuf kb = { 0 };
	for (int s = 0; s < 2; s++) {
		el[s] = xcalloc(n[s] ? n[s] : 1, sizeof *el[s]);
		keys[s] = xcalloc(n[s] ? n[s] : 1, sizeof *keys[s]);
		klen[s] = xcalloc(n[s] ? n[s] : 1, sizeof *klen[s]);
		void *it = keyed[s] ? json_object_iter((json_t *)sides[s]) : NULL;
		for (size_t i = 0; i < n[s]; i++) {
			bool have;
			if (keyed[s]) {
				json_t *ks = json_stringn(json_object_iter_key(it), json_object_iter_key_len(it));
				kb.len = 0;
				strbuf_addlit(&kb, "");
				have = ks && key_text(ks, d->norm, &kb);
				json_decref(ks);
				el[s][i] = json_object_iter_value(it);
				it = json_object_iter_next((json_t *)sides[s], it);
			} else {
				el[s][i] = json_array_get(sides[s], i);
				have = json_is_object(el[s][i]) &&
				       record_key(d->okey, d->match_on[0], el[s][i], d->norm, &kb);
			}
			if (have) {
				keys[s][i] = xmalloc(kb.len + 1);
				memcpy(keys[s][i], kb.buf, kb.len + 1);
				klen[s][i] = kb.len;
			}
		}
	}
	strbuf_free(&kb);
	/* the submitted elements by key, in order: head of each key's chain, next[] after it */
	json_t *head = json_object();
	size_t *next = xcalloc(n[0] ? n[0] : 1, sizeof *next);
	for (size_t i = n[0]; i-- > 0;) {
		if (!keys[0][i])
			continue;
		json_t *h = json_object_getn(head, keys[0][i], klen[0][i]);
		next[i] = h ? (size_t)json_integer_value(h) : SIZE_MAX;
		json_object_setn_new(head, keys[0][i], klen[0][i], json_integer((json_int_t)i));
	}
	size_t *pair = xmalloc((n[1] ? n[1] : 1) * sizeof *pair), matched = 0;
	for (size_t j = 0; j < n[1]; j++) {
		pair[j] = SIZE_MAX;
		json_t *h = keys[1][j] ? json_object_getn(head, keys[1][j], klen[1][j]) : NULL;
		if (!h || json_integer_value(h) < 0)
			continue;
		size_t i = (size_t)json_integer_value(h);
		pair[j] = i;
		matched++;
		json_integer_set(h, next[i] == SIZE_MAX ? -1 : (json_int_t)next[i]);
	}
	json_decref(head);
	free(next);
	int r = mo_score(c, d, got, want, el[0], el[1], n[0], n[1], pair, matched, NULL, ap);
	free(pair);
	for (int s = 0; s < 2; s++) {
		for (size_t i = 0; i < n[s]; i++)
			free(keys[s][i]);
		free(keys[s]);
		free(klen[s]);
		free(el[s]);
	}
	return r;
}

/* ---- the primitives' descriptors ------------------------------------------------------- */

/* The arguments of every field primitive's apply function: values already resolved and
 * normalised (got, want), want's prepared scalar side (pw) or prepared whole value (pv),
 * both may be NULL; PRIM_BAD with e filled when a value is ill-typed. When the descriptor
 * says NC_APPLY, got and want are already of the types its need asks (check_need). */
#define APPLY_ARGS struct ctx *c __attribute__((unused)), \
	const struct spec_dim *d __attribute__((unused)), const json_t *got, \
	const json_t *want __attribute__((unused)), const struct pval *pw __attribute__((unused)), \
	const struct prep_dim *pv __attribute__((unused)), struct app *ap __attribute__((unused)), \
	struct prim_err *e __attribute__((unused))

static int ap_exact_match(APPLY_ARGS)
{
	return prim_exact_match(got, want, d->case_insensitive);
}

static int ap_exact_match_ratio(APPLY_ARGS)
{
	return prim_exact_match_ratio(got, want, e, &ap->fr);
}

static int ap_numeric_tolerance(APPLY_ARGS)
{
	if (d->has_relative) {   /* an allowance per expected value */
		if (json_is_number(want))   /* shown as a number (it is compared exactly) */
			det_set(ap, "allowance", json_real((double)fmaxl(dec_num_ld(&d->tolerance),
			        dec_num_ld(&d->relative) * fabsl((long double)json_number_value(want)))));
		int nbad = 0;
		int r = prim_numeric_relative(got, want, &d->tolerance, &d->relative, d->linear, &nbad, e,
		                              &ap->fr);
		ap->nbad += nbad;
		return r;
	}
	if (pw && pw->has_dec && !d->norm && json_is_number(got))   /* want's decimal known */
		return prim_numeric_tolerance_num(got, want, &pw->dec, &d->tolerance, d->linear,
		                                  &ap->fr);
	int nbad = 0;
	int r = prim_numeric_tolerance(got, want, &d->tolerance, d->linear, &nbad, e, &ap->fr);
	ap->nbad += nbad;
	return r;
}

static int ap_fuzzy_string(APPLY_ARGS)
{
	return prim_fuzzy_string_paid(got, want, pay_distance, c, e);
}

static int ap_coverage_ratio(APPLY_ARGS)
{
	return pv && pv->has_set ? prim_coverage_ratio_set(got, want, &pv->set, e, &ap->fr)
	                         : prim_coverage_ratio(got, want, e, &ap->fr);
}

static int ap_set_overlap(APPLY_ARGS)
{
	return pv && pv->has_set ? prim_set_method_set(got, want, &pv->set, d->method, e, &ap->fr)
	                         : prim_set_method(got, want, d->method, e, &ap->fr);
}

static int ap_text_length(APPLY_ARGS)
{
	size_t n = d->words ? prim_count_words(json_string_value(got), json_string_length(got))
	           : d->lines ? prim_count_lines(json_string_value(got), json_string_length(got))
	           : prim_count_chars(json_string_value(got), json_string_length(got));
	det_set(ap, "length", json_integer((json_int_t)n));
	return prim_ramp((int64_t)n, d->points, d->npoints, d->steps, &ap->fr);
}

static int ap_count(APPLY_ARGS)
{
	return apply_count(d, got, ap, e);
}

static int ap_regex_match(APPLY_ARGS)
{
	return run_rx(c, d->rx, json_string_value(got), json_string_length(got), ap) ? 1000 : 0;
}

static int ap_term_coverage(APPLY_ARGS)
{
	return apply_terms(c, d, got, want, ap, e);
}

static int ap_token_overlap(APPLY_ARGS)
{
	struct strbuf sa, sb;
	char **ia, **ib;
	size_t na, nb;
	prim_tokens(json_string_value(got), json_string_length(got), &sa, &ia, &na);
	if (pv && pv->has_tok) {   /* the expected tokens, prepared */
		memset(&sb, 0, sizeof sb);
		ib = pv->tok;
		nb = pv->ntok;
	} else {
		prim_tokens(json_string_value(want), json_string_length(want), &sb, &ib, &nb);
	}
	size_t cm = prim_sorted_common(ia, na, ib, nb);
	det_set(ap, "tokens", json_pack("{s:I, s:I, s:I}", "submitted", (json_int_t)na,
	                                "expected", (json_int_t)nb, "common", (json_int_t)cm));
	int r = prim_set_ratio(cm, na, nb, d->method, &ap->fr);
	free(ia);
	if (!(pv && pv->has_tok))
		free(ib);
	strbuf_free(&sa);
	strbuf_free(&sb);
	return r;
}

static int ap_match_objects(APPLY_ARGS)
{
	return apply_match_objects(c, d, got, want, ap);
}

static int ap_keyed_map(APPLY_ARGS)
{
	return apply_keyed_map(c, d, got, want, ap);
}

/* text_contains: equal texts score equal_credit; otherwise, when one (non-empty) text lies
 * inside the other in an allowed direction, contains_credit; else 0. */
static int ap_text_contains(APPLY_ARGS)
{
	const char *a = json_string_value(got), *b = json_string_value(want);
	size_t la = json_string_length(got), lb = json_string_length(want);
	const char *rel = "none";
	dec6 credit = 0;
	if (la == lb && !memcmp(a, b, la)) {
		rel = "equal";
		credit = d->equal_credit;
	} else if (la && lb && d->contains != SPEC_IN_ANSWER && la < lb && memmem(b, lb, a, la)) {
		rel = "answer_in_truth";
		credit = d->contains_credit;
	} else if (la && lb && d->contains != SPEC_IN_TRUTH && lb < la && memmem(a, la, b, lb)) {
		rel = "truth_in_answer";
		credit = d->contains_credit;
	}
	det_set(ap, "relation", json_string(rel));
	return prim_permille_frac((unsigned __int128)credit, DEC6_ONE, &ap->fr);
}

/* Primitives that read no fields: the match, the metadata, an expression's variables. */
static int ev_none(struct ctx *c, const struct spec_dim *d, struct app *ap)
{
	(void)c, (void)d, (void)ap;
	return 0;
}

static int ev_time_decay(struct ctx *c, const struct spec_dim *d, struct app *ap)
{
	return eval_time_decay(c, d, &ap->fr);
}

static int ev_token_efficiency(struct ctx *c, const struct spec_dim *d, struct app *ap)
{
	return eval_efficiency(c, d, &ap->fr, "token_budget", "token_count");
}

static int ev_call_efficiency(struct ctx *c, const struct spec_dim *d, struct app *ap)
{
	return eval_efficiency(c, d, &ap->fr, "max_llm_calls", "llm_call_count");
}

/* JSON types needed per side: needed_type on the resolved values, and check_need on the
 * normalised ones for NC_APPLY primitives. Shapes that depend on both sides
 * (numeric_tolerance's scalar vs array) are checked by the primitive itself. */
static const char *nd_array(const struct spec_dim *d, int side, const json_t *v)
{
	(void)d, (void)side;
	return json_is_array(v) ? NULL : "an array";
}

static const char *nd_string(const struct spec_dim *d, int side, const json_t *v)
{
	(void)d, (void)side;
	return json_is_string(v) ? NULL : "a string";
}

static const char *nd_number(const struct spec_dim *d, int side, const json_t *v)
{
	(void)d, (void)side;
	return json_is_number(v) || json_is_array(v) ? NULL : "a number or an array";
}

static const char *nd_terms(const struct spec_dim *d, int side, const json_t *v)
{
	if (side == 1 && d->words_terms)
		return json_is_string(v) ? NULL : "a string (its words are the terms)";
	return json_is_string(v) || json_is_array(v) ? NULL : "a string or an array of strings";
}

static const char *nd_objects(const struct spec_dim *d, int side, const json_t *v)
{
	if (side ? d->g_keyed : d->f_keyed)
		return json_is_object(v) ? NULL : "an object";
	return json_is_array(v) ? NULL : "an array";
}

static const char *nd_keyed(const struct spec_dim *d, int side, const json_t *v)
{
	if (side ? d->gkey : d->fkey)
		return json_is_array(v) ? NULL : "an array of records";
	return json_is_object(v) ? NULL : "an object";
}

/* Work units of each primitive's own steps on its (normalised) values, besides normalising
 * them, its regexes (charged per step as they run) and its nested primitives (charged each). */
static uint64_t un_sets(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	(void)d;   /* every element dumped canonically and sorted */
	return (json_is_array(got) ? value_units(got, 0) : 0) +
	       (json_is_array(want) ? value_units(want, 0) : 0);
}

static uint64_t un_count(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	(void)want;
	/* every item dumped into a buffer of its own, sorted, freed: twice a set's units */
	if (d->count_of == SPEC_C_DISTINCT || d->count_of == SPEC_C_UNIQUE_RATIO)
		return json_is_array(got) ? 2 * value_units(got, 0) : 0;
	if (d->count_of == SPEC_C_PRESENT)   /* a lookup per listed key */
		return W_CMP_NODE * (uint64_t)json_array_size(d->present_keys);
	return json_is_string(got) ? W_SCAN * (uint64_t)json_string_length(got) : 0;
}

static uint64_t un_scan(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	(void)d, (void)want;
	return json_is_string(got) ? W_SCAN * (uint64_t)json_string_length(got) : 0;
}

static uint64_t un_tokens(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	(void)d;
	return (json_is_string(got) ? W_TOKEN * (uint64_t)json_string_length(got) : 0) +
	       (json_is_string(want) ? W_TOKEN * (uint64_t)json_string_length(want) : 0);
}

static size_t size_of(const json_t *v)
{
	return json_is_array(v) ? json_array_size(v) : json_is_object(v) ? json_object_size(v) : 0;
}

static uint64_t un_objects(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	(void)d;   /* keys dumped, hashed, sorted; pairs looked up */
	return W_NODE * ((uint64_t)size_of(got) + (uint64_t)size_of(want));
}

static uint64_t un_keyed(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	(void)got;   /* a records side's keys are charged as they are built */
	return W_NODE * (d->keys ? (uint64_t)json_array_size(d->keys) : (uint64_t)size_of(want));
}

static uint64_t un_numeric(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	(void)d, (void)got;
	return json_is_array(want) ? W_NODE / 4 * (uint64_t)json_array_size(want) : 0;
}

static uint64_t un_exact(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	/* two strings with normalize: their normalising covers the compare (apply) */
	if (d->norm && !d->case_insensitive && json_is_string(got) && json_is_string(want))
		return 0;
	return cmp_units(got, d->case_insensitive) + cmp_units(want, d->case_insensitive);
}

static uint64_t un_fuzzy(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	(void)d;   /* normalising both into code points (NFKC, case folding) and stripping their
	            * common ends: twice a normalisation's units; the distance is paid once its
	            * size is known (pay_distance) */
	return json_is_string(got) && json_is_string(want)
	       ? 2 * (string_units(got, NORM_NFKC | NORM_CASEFOLD) +
	              string_units(want, NORM_NFKC | NORM_CASEFOLD)) : 0;
}

static uint64_t un_contains(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	(void)d;   /* a compare and up to one substring search over both texts */
	return W_STRING + (json_is_string(got) ? W_SCAN * (uint64_t)json_string_length(got) : 0) +
	       (json_is_string(want) ? W_SCAN * (uint64_t)json_string_length(want) : 0);
}

/* How a top-level dimension's expected side is prepared once per ground truth (score_prepare). */
enum prep_kind {
	PREP_NONE,      /* nothing to prepare */
	PREP_SCALAR,    /* one value: its normalised text or exact decimal (struct pval) */
	PREP_WHOLE,     /* the whole value normalised; its set or tokens */
	PREP_OBJECTS,   /* match_objects: keys hashed, sorted, indexed; the fields' values */
	PREP_KEYS,      /* keyed_map: each key's nested value */
};

/* Who checks a field primitive's values against its descriptor's need before it runs. */
enum need_check {
	NC_OWN,     /* the primitive itself (in prim.c, or types that depend on elements or on
	             * both sides) */
	NC_APPLY,   /* apply, on the normalised values: the submitted side, then the expected side
	             * of a primitive that compares two (PRIM_F_GT); need is then all it asks */
};

typedef int apply_fn(APPLY_ARGS);
/* One primitive: everything the scorer and the validator know of it besides the parsing of
 * its own parameters (spec.c parse_params). */
struct prim_desc {
	const char *name;              /* as written in a spec */
	const char *const *params;     /* keys it reads besides a dimension's own */
	unsigned flags;                /* PRIM_F_* (prim.h) */
	enum prep_kind prep;
	/* the JSON type needed on a side (NULL: any value; the primitive checks the rest) */
	const char *(*need)(const struct spec_dim *d, int side, const json_t *v);
	enum need_check check;         /* who checks need before apply runs */
	/* its own work units on the normalised values (NULL: constant work) */
	uint64_t (*units)(const struct spec_dim *d, const json_t *got, const json_t *want);
	apply_fn *apply;               /* field primitives (PRIM_F_FIELD) */
	int (*eval)(struct ctx *c, const struct spec_dim *d, struct app *ap);   /* the others */
};

#define P_PLAIN "field", "ground_truth_field", "normalize", "separator", "unwrap"
/* one-sided primitives (no ground-truth field) */
#define P_ONE "field", "separator", "unwrap", "normalize"
static const char *const pa_none[] = { NULL };
static const char *const pa_exact[] = { P_PLAIN, "case_insensitive", NULL };
static const char *const pa_plain[] = { P_PLAIN, NULL };
static const char *const pa_numeric[] = { P_PLAIN, "tolerance", "decay", "relative", NULL };
static const char *const pa_time[] = { "time_limit_secs", "curve", NULL };
static const char *const pa_method[] = { P_PLAIN, "method", NULL };
static const char *const pa_expr[] = { "expr", "vars", "scale", "null_as_missing", NULL };
static const char *const pa_length[] = { P_ONE, "unit", "ramp", "steps", "target", NULL };
static const char *const pa_terms[] = { P_PLAIN, "terms", "need", "case_insensitive",
                                        "terms_from", NULL };
static const char *const pa_regex[] = { P_ONE, "pattern", "case_insensitive", NULL };
static const char *const pa_count[] = { P_ONE, "of", "keys", "ramp", "steps", "target", NULL };
static const char *const pa_objects[] = { P_PLAIN, "match_on", "method", "fields", "field_keyed",
                                          "ground_truth_keyed", "points", "max_points",
                                          "distinct_of", "ramp", "steps", "target", NULL };
static const char *const pa_keyed[] = { P_PLAIN, "keys", "item", "field_key", "ground_truth_key",
                                        NULL };
static const char *const pa_contains[] = { P_PLAIN, "direction", "equal_credit",
                                           "contains_credit", NULL };

#define F_CMP (PRIM_F_FIELD | PRIM_F_GT | PRIM_F_NESTABLE)   /* compares two values */
#define F_ONE (PRIM_F_FIELD | PRIM_F_NESTABLE)               /* reads the answer only */
static const struct prim_desc prim_table[PRIM_KIND_COUNT] = {
	[PRIM_NONE] = { "", pa_none, 0, PREP_NONE, NULL, NC_OWN, NULL, NULL, ev_none },
	[PRIM_EXACT_MATCH] = { "exact_match", pa_exact, F_CMP, PREP_SCALAR, NULL, NC_OWN, un_exact,
	                       ap_exact_match, NULL },
	[PRIM_EXACT_MATCH_RATIO] = { "exact_match_ratio", pa_plain, F_CMP, PREP_NONE, nd_array,
	                             NC_OWN, un_sets, ap_exact_match_ratio, NULL },
	[PRIM_NUMERIC_TOLERANCE] = { "numeric_tolerance", pa_numeric, F_CMP, PREP_SCALAR, nd_number,
	                             NC_OWN, un_numeric, ap_numeric_tolerance, NULL },
	[PRIM_FUZZY_STRING] = { "fuzzy_string", pa_plain, F_CMP, PREP_NONE, nd_string, NC_OWN,
	                        un_fuzzy, ap_fuzzy_string, NULL },
	[PRIM_TIME_DECAY] = { "time_decay", pa_time, 0, PREP_NONE, NULL, NC_OWN, NULL, NULL,
	                      ev_time_decay },
	[PRIM_COVERAGE_RATIO] = { "coverage_ratio", pa_plain, F_CMP, PREP_WHOLE, nd_array, NC_OWN,
	                          un_sets, ap_coverage_ratio, NULL },
	[PRIM_SET_OVERLAP] = { "set_overlap", pa_method, F_CMP, PREP_WHOLE, nd_array, NC_OWN, un_sets,
	                       ap_set_overlap, NULL },
	[PRIM_TOKEN_EFFICIENCY] = { "token_efficiency", pa_none, 0, PREP_NONE, NULL, NC_OWN, NULL,
	                            NULL, ev_token_efficiency },
	[PRIM_CALL_EFFICIENCY] = { "call_efficiency", pa_none, 0, PREP_NONE, NULL, NC_OWN, NULL, NULL,
	                           ev_call_efficiency },
	[PRIM_EXPRESSION] = { "expression", pa_expr, 0, PREP_NONE, NULL, NC_OWN, NULL, NULL,
	                      eval_expression },
	[PRIM_TEXT_LENGTH] = { "text_length", pa_length, F_ONE, PREP_NONE, nd_string, NC_APPLY,
	                       un_scan, ap_text_length, NULL },
	[PRIM_TERM_COVERAGE] = { "term_coverage", pa_terms, F_ONE | PRIM_F_GT_OPT, PREP_NONE,
	                         nd_terms, NC_OWN, NULL, ap_term_coverage, NULL },
	[PRIM_REGEX_MATCH] = { "regex_match", pa_regex, F_ONE, PREP_NONE, nd_string, NC_APPLY, NULL,
	                       ap_regex_match, NULL },
	[PRIM_TOKEN_OVERLAP] = { "token_overlap", pa_method, F_CMP, PREP_WHOLE, nd_string, NC_APPLY,
	                         un_tokens, ap_token_overlap, NULL },
	[PRIM_COUNT] = { "count", pa_count, F_ONE, PREP_NONE, NULL, NC_OWN, un_count, ap_count,
	                 NULL },
	[PRIM_MATCH_OBJECTS] = { "match_objects", pa_objects, F_CMP | PRIM_F_NORM_OWN, PREP_OBJECTS,
	                         nd_objects, NC_APPLY, un_objects, ap_match_objects, NULL },
	[PRIM_KEYED_MAP] = { "keyed_map", pa_keyed, F_CMP | PRIM_F_NORM_OWN, PREP_KEYS, nd_keyed,
	                     NC_APPLY, un_keyed, ap_keyed_map, NULL },
	[PRIM_TEXT_CONTAINS] = { "text_contains", pa_contains, F_CMP, PREP_NONE, nd_string,
	                         NC_APPLY, un_contains, ap_text_contains, NULL },
};

static const struct prim_desc *desc_of(enum prim_kind k)
{
	return (size_t)k < PRIM_KIND_COUNT ? &prim_table[k] : &prim_table[PRIM_NONE];
}

int prim_kind_from_name(const char *name, enum prim_kind *out)
{
	for (size_t i = 1; i < PRIM_KIND_COUNT; i++)
		if (!strcmp(name, prim_table[i].name)) {
			*out = (enum prim_kind)i;
			return 0;
		}
	return -1;
}

const char *prim_kind_name(enum prim_kind k)
{
	return desc_of(k)->name;
}

const char *const *prim_params(enum prim_kind k)
{
	return desc_of(k)->params;
}

unsigned prim_flags(enum prim_kind k)
{
	return desc_of(k)->flags;
}

static const char *needed_type(const struct spec_dim *d, int side, const json_t *v)
{
	const struct prim_desc *p = desc_of(d->prim);
	return p->need ? p->need(d, side, v) : NULL;
}

static uint64_t prim_units(const struct spec_dim *d, const json_t *got, const json_t *want)
{
	const struct prim_desc *p = desc_of(d->prim);
	return p->units ? p->units(d, got, want) : 0;
}

/* For a primitive whose descriptor says NC_APPLY: PRIM_BAD with e when the submitted value,
 * then (PRIM_F_GT) the expected one, is not of the type its need asks; else 0. */
static int check_need(const struct spec_dim *d, const json_t *got, const json_t *want,
                      struct prim_err *e)
{
	const struct prim_desc *p = desc_of(d->prim);
	const char *t;
	if (p->check != NC_APPLY)
		return 0;
	if ((t = p->need(d, 0, got)))
		return need_type(got, 0, t, e);
	if ((p->flags & PRIM_F_GT) && (t = p->need(d, 1, want)))
		return need_type(want, 1, t, e);
	return 0;
}

/* Applies a field-reading primitive to resolved values (normalised here); PRIM_BAD with e.
 * pw, when not NULL, is want0's prepared side (pw->v == want0). */
static int apply(struct ctx *c, const struct spec_dim *d, const json_t *got0, const json_t *want0,
                 const struct pval *pw, struct app *ap, struct prim_err *e)
{
	bool norm = d->norm && !(prim_flags(d->prim) & PRIM_F_NORM_OWN);
	if (norm && d->prim == PRIM_EXACT_MATCH && !ap->det && !d->case_insensitive &&
	    json_is_string(got0) && json_is_string(want0)) {
		/* two strings: compare the normalised texts without building JSON values; with
		 * `numeric`, texts that become numbers compare as numbers (what norm_value and
		 * jcanon_equal would decide) */
		bool pre = pw && pw->ntext;   /* the expected text normalised already */
		if (!charge(c, string_units(got0, d->norm) + (pre ? pw->units
		                                                   : string_units(want0, d->norm))))
			return 0;
		/* the same text normalises the same way: equal (as charged, whatever the steps) */
		if (json_string_length(got0) == json_string_length(want0) &&
		    !memcmp(json_string_value(got0), json_string_value(want0), json_string_length(got0)))
			return 1000;
		size_t la, lb;
		char ba[256], bb[256];
		char *ta = norm_text_buf(d->norm, json_string_value(got0), json_string_length(got0), ba,
		                         sizeof ba, &la);
		struct dec_num xa, xb;
		char *tb;
		int kb;
		if (pre) {
			tb = pw->ntext;
			lb = pw->nlen;
			kb = pw->numk;
			xb = pw->num;
		} else {
			tb = norm_text_buf(d->norm, json_string_value(want0), json_string_length(want0), bb,
			                   sizeof bb, &lb);
			kb = d->norm & NORM_NUMERIC ? norm_numeric(tb, lb, &xb) : 0;
		}
		int ka = d->norm & NORM_NUMERIC ? norm_numeric(ta, la, &xa) : 0;
		bool eq = ka != kb ? false : ka ? dec_num_cmp(&xa, &xb) == 0
		                            : la == lb && !memcmp(ta, tb, la);
		if (ta != ba)
			free(ta);
		if (tb != bb && !pre)
			free(tb);
		return eq ? 1000 : 0;
	}
	/* the expected value prepared whole (sets, tokens): normalised, its units counted */
	const struct prep_dim *pv = c->cur && c->cur->d == d && c->cur->want == want0 &&
	                            c->cur->nwant ? c->cur : NULL;
	if (norm && !charge(c, value_units(got0, d->norm) + (pv ? pv->want_units
	                                                       : value_units(want0, d->norm))))
		return 0;
	json_t *got = norm ? norm_value(d->norm, got0) : (json_t *)got0;
	json_t *want = pv ? pv->nwant : norm && want0 ? norm_value(d->norm, want0) : (json_t *)want0;
	int r;
	if (!charge(c, pv ? prim_units(d, got, NULL) + pv->nwant_units : prim_units(d, got, want))) {
		r = 0;
		goto out;
	}
	if (norm && ap->det) {
		det_set(ap, "submitted_normalized", brief(got));
		if (want)
			det_set(ap, "expected_normalized", brief(want));
	}
	if ((r = check_need(d, got, want, e)) == 0)
		r = desc_of(d->prim)->apply(c, d, got, want, pw, pv, ap, e);
out:
	if (norm) {   /* norm_value gave new references (possibly to the same values) */
		json_decref(got);
		if (want0 && !pv)
			json_decref(want);
	}
	return r;
}

/* What a composite's part hands on (fr, may be NULL): the fraction ap recorded when it rounds to
 * the score r, else none (the part then reads r ÷ 1000). */
static void part_frac(const struct app *ap, int r, struct prim_frac *fr)
{
	if (!fr)
		return;
	*fr = ap->fr;
	if ((fr->kind == PRIM_FR_EXACT && prim_permille_ratio(fr->num, fr->den) != r) ||
	    (fr->kind == PRIM_FR_BINARY && prim_permille_double(fr->ld) != r))
		fr->kind = PRIM_FR_NONE;
}

/* eval_prim on the resolved values got and want. */
static int eval_fields(struct ctx *c, const struct spec_dim *d, json_t *det,
                       struct prim_frac *fr, const json_t *got, const json_t *want)
{
	struct prim_err e;
	struct app ap = { 0, 0, det, { .kind = PRIM_FR_NONE } };
	int r;
	e.side = 0;
	e.why[0] = 0;
	if (det) {
		json_object_set_new(det, "submitted", brief(got));
		if (want)
			json_object_set_new(det, "expected", brief(want));
	}
	c->cur = NULL;   /* (c->over: reset by eval_prim, the caller) */
	for (size_t i = 0; i < SPEC_MAX_DIMS && c->prep; i++)
		if (c->prep->dims[i] && c->prep->dims[i]->d == d)
			c->cur = c->prep->dims[i];
	/* exact_match / numeric_tolerance: the expected value's prepared side */
	const struct pval *pw = c->cur && c->cur->want == want && c->cur->n == 1 &&
	                        desc_of(d->prim)->prep == PREP_SCALAR
	                        ? &c->cur->vals[0] : NULL;
	r = apply(c, d, got, want, pw, &ap, &e);
	c->cur = NULL;
	if (c->over) {
		budget_warning(c, d);
		return 0;
	}
	if (r != PRIM_BAD && ap.nbad > 0) {
		if (d->prim == PRIM_NUMERIC_TOLERANCE)
			warn(c->warnings, "warning", d->field_text, "dimension '%s': %d of %zu "
			     "elements are missing or not numbers (each counts 0)", d->key, ap.nbad,
			     json_array_size(want));
		else
			warn(c->warnings, "warning", d->field_text, "dimension '%s': %d nested values were "
			     "missing or ill-typed (each counts 0)", d->key, ap.nbad);
	}
	if (ap.nrx > 0)
		warn(c->warnings, "error", d->field_text, "dimension '%s': %d regular-expression "
		     "searches ran out of their work budget (counted as not matching)", d->key, ap.nrx);
	if (r == PRIM_BAD) {
		char gname[1100];
		const char *f = d->field_text;
		if (e.side == 1) {
			gt_label(d, gname, sizeof gname);
			f = gname;
		}
		warn(c->warnings, "error", f, "dimension '%s': %s", d->key, e.why);
		return 0;
	}
	part_frac(&ap, r, fr);
	return r;
}

/* Scores primitive dimension (or part) d: 0..1000, its warnings given. det (explain) may be
 * NULL; fr, when not NULL, gets the fraction the score rounds (part_frac), kind PRIM_FR_NONE
 * when it scored 0 for a missing or ill-typed value or the budget. */
static int eval_prim(struct ctx *c, const struct spec_dim *d, json_t *det, struct prim_frac *fr)
{
	const json_t *got, *want;
	json_t *own[2];
	int r;
	if (fr)
		fr->kind = PRIM_FR_NONE;
	if (desc_of(d->prim)->eval) {   /* reads no fields */
		struct app ap = { 0, 0, det, { .kind = PRIM_FR_NONE } };
		r = desc_of(d->prim)->eval(c, d, &ap);
		part_frac(&ap, r, fr);
		return r;
	}
	c->over = false;
	int rc = resolve_fields(c, d, &got, &want, own);
	if (rc == -2)   /* building a projected or joined value did not fit */
		budget_warning(c, d);
	r = rc < 0 ? 0 : eval_fields(c, d, det, fr, got, want);
	json_decref(own[0]);
	json_decref(own[1]);
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

/* Builds pd's hash index of its sorted keys; leaves none when some run of filled slots would
 * be longer than OKEY_RUN_MAX (keys chosen to collide), so a lookup's work stays bounded. */
static void index_keys(struct prep_dim *pd)
{
	size_t cap = 8;
	while (cap < 2 * pd->nk)
		cap *= 2;
	if (pd->nk == 0 || pd->nk >= UINT32_MAX / 2)
		return;
	uint32_t *slot = xcalloc(cap, sizeof *slot);
	size_t mask = cap - 1;
	for (size_t g = 0; g < pd->nk; g++) {
		const struct okey *x = &pd->keys[g];
		if (g && x->h == x[-1].h && okey_same(&x[-1], x->k, x->len))
			continue;   /* not the first element with this key */
		size_t i = (size_t)x->h & mask;
		while (slot[i])
			i = (i + 1) & mask;
		slot[i] = (uint32_t)g + 1;
	}
	size_t run = 0, longest = 0;
	for (size_t i = 0; i < 2 * cap; i++) {   /* twice round: runs that wrap */
		run = slot[i & mask] ? run + 1 : 0;
		if (run > longest)
			longest = run;
	}
	if (longest > OKEY_RUN_MAX) {
		free(slot);
		return;
	}
	pd->slot = slot;
	pd->mask = mask;
}

static void prep_dim_free(struct prep_dim *pd)
{
	if (!pd)
		return;
	size_t nv = pd->d->prim == PRIM_MATCH_OBJECTS ? pd->n * pd->d->nfields : pd->n;
	for (size_t i = 0; i < nv; i++)
		free(pd->vals[i].ntext);
	free(pd->vals);
	free(pd->keys);
	free(pd->slot);
	free(pd->names);
	json_decref(pd->nwant);
	if (pd->has_set)
		prim_set_free(&pd->set);
	if (pd->has_tok) {
		free(pd->tok);
		strbuf_free(&pd->tsb);
	}
	strbuf_free(&pd->kb);
	free(pd);
}

/* The prepared side of top-level dimension d, or NULL when it has none: match_objects and
 * keyed_map whose expected value is in the ground truth and has the type they need. */
static struct prep_dim *prep_dim_build(const struct spec_dim *d, const json_t *gt, uint64_t *left)
{
	enum prep_kind pk = desc_of(d->prim)->prep;
	bool whole = pk == PREP_WHOLE;    /* the whole expected value, normalised */
	bool scalar = pk == PREP_SCALAR;
	/* keyed sides and records (v3) are paired by their own code, not prepared; a projected
	 * expected side (v3) is built by each evaluation */
	if (pk == PREP_NONE || d->f_keyed || d->g_keyed || d->fkey || d->gkey || d->gt_proj ||
	    !d->gt_text || d->gt_src != SPEC_VAR_GROUND_TRUTH)
		return NULL;
	const json_t *want = get_path(d->gt_field, gt, NULL, 0);
	if (!want || needed_type(d, 1, want))
		return NULL;
	struct pval pv;
	if (scalar) {   /* one value: prepared when there is something to prepare */
		pval_init(d, want, &pv, left);
		if (!pv.ntext && !pv.has_dec)
			return NULL;
	}
	struct prep_dim *pd = xcalloc(1, sizeof *pd);
	pd->d = d;
	pd->want = want;
	if (scalar) {
		pd->n = 1;
		pd->vals = xmalloc(sizeof *pd->vals);
		pd->vals[0] = pv;
		return pd;
	}
	if (whole) {
		pd->want_units = d->norm ? value_units(want, d->norm) : 0;
		if (!prep_take(left, pd->want_units)) {
			free(pd);
			return NULL;
		}
		pd->nwant = d->norm ? norm_value(d->norm, want) : json_incref((json_t *)want);
		pd->nwant_units = prim_units(d, NULL, pd->nwant);
		if (!prep_take(left, pd->nwant_units)) {   /* no tokens or set: none of it */
			prep_dim_free(pd);
			return NULL;
		}
		if (d->prim == PRIM_TOKEN_OVERLAP && json_is_string(pd->nwant)) {
			pd->has_tok = true;
			prim_tokens(json_string_value(pd->nwant), json_string_length(pd->nwant), &pd->tsb,
			            &pd->tok, &pd->ntok);
		} else if (d->prim != PRIM_TOKEN_OVERLAP && json_is_array(pd->nwant)) {
			pd->has_set = true;
			prim_set_build(pd->nwant, &pd->set);
		}
		return pd;
	}
	if (d->prim == PRIM_MATCH_OBJECTS) {
		size_t ne = json_array_size(want);
		pd->key_units = okey_units(d, want);
		if (!prep_take(left, pd->key_units)) {   /* left to the evaluations */
			free(pd);
			return NULL;
		}
		pd->n = ne;
		pd->keys = xcalloc(ne ? ne : 1, sizeof *pd->keys);
		pd->nk = key_items(d, want, &pd->kb, pd->keys);
		index_keys(pd);
		pd->vals = xcalloc(ne * d->nfields + 1, sizeof *pd->vals);
		for (size_t j = 0; j < ne; j++)
			for (size_t f = 0; f < d->nfields; f++) {
				const struct spec_dim *n = &d->fields[f];
				pval_init(n, nested_want(n, json_array_get(want, j)), &pd->vals[j * d->nfields + f],
				          left);
			}
		return pd;
	}
	size_t nk = d->keys ? json_array_size(d->keys) : json_object_size(want);
	pd->n = nk;
	pd->names = xcalloc(nk ? nk : 1, sizeof *pd->names);
	pd->vals = xcalloc(nk ? nk : 1, sizeof *pd->vals);
	void *it = d->keys ? NULL : json_object_iter((json_t *)want);
	for (size_t i = 0; i < nk; i++) {
		const json_t *wv;
		if (d->keys) {
			pd->names[i] = json_string_value(json_array_get(d->keys, i));
			wv = json_object_get(want, pd->names[i]);
		} else {
			pd->names[i] = json_object_iter_key(it);
			wv = json_object_iter_value(it);
			it = json_object_iter_next((json_t *)want, it);
		}
		pval_init(d->item, nested_want(d->item, wv), &pd->vals[i], left);
	}
	return pd;
}

struct score_prep *score_prepare(const struct spec *s, const json_t *ground_truth)
{
	struct score_prep *p = xcalloc(1, sizeof *p);
	p->s = s;
	if (!ground_truth)
		ground_truth = p->empty = json_object();
	p->gt = ground_truth;
	/* The costly steps (normalising, tokenising, sorting) take units from one bound as large
	 * as an evaluation's; what does not fit is left to the evaluations. */
	uint64_t left = SCORE_WORK_BUDGET;
	for (size_t i = 0; i < spec_ndims(s) && i < SPEC_MAX_DIMS; i++)
		if (!spec_dim(s, i)->external)
			p->dims[i] = prep_dim_build(spec_dim(s, i), ground_truth, &left);
	p->work = SCORE_WORK_BUDGET - left;
	return p;
}

void score_prep_free(struct score_prep *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < SPEC_MAX_DIMS; i++)
		prep_dim_free(p->dims[i]);
	json_decref(p->empty);
	free(p);
}

uint64_t score_prep_work(const struct score_prep *p)
{
	return p ? p->work : 0;
}

size_t score_prep_bytes(const struct score_prep *p)
{
	if (!p)
		return 0;
	size_t n = sizeof *p;
	for (size_t i = 0; i < SPEC_MAX_DIMS; i++) {
		const struct prep_dim *pd = p->dims[i];
		if (!pd)
			continue;
		size_t nv = pd->d->prim == PRIM_MATCH_OBJECTS ? pd->n * pd->d->nfields : pd->n;
		n += sizeof *pd + pd->n * (sizeof *pd->keys + sizeof *pd->names) + pd->kb.cap +
		     nv * sizeof *pd->vals + (pd->slot ? (pd->mask + 1) * sizeof *pd->slot : 0);
		for (size_t k = 0; k < nv; k++)
			n += pd->vals[k].ntext ? pd->vals[k].nlen + 17 : 0;
		if (pd->has_set)
			n += pd->set.buf.cap + pd->set.n * sizeof *pd->set.items;
		if (pd->has_tok)
			n += pd->tsb.cap + pd->ntok * sizeof *pd->tok;
		if (pd->nwant && pd->d->norm)   /* a normalised copy: about as big as the value */
			n += (size_t)(pd->want_units / 4);
	}
	return n;
}

int score_eval(const struct spec *s, const json_t *answer, const json_t *metadata,
               const json_t *ground_truth, const struct score_match *m,
               const struct score_ext *ext, const struct score_limits *lim,
               struct score_result *out, char *err, size_t errlen)
{
	struct score_prep *p = score_prepare(s, ground_truth);
	int rc = score_eval_prepared(p, answer, metadata, m, ext, lim, out, err, errlen);
	score_prep_free(p);
	return rc;
}

/* The raw score (before gates) of dimension i: the external evaluator's, or its primitive's
 * (with explain, its detail in out->dims[i].detail). */
static int score_one(struct ctx *c, size_t i, const struct score_ext *ext,
                     struct score_result *out)
{
	const struct spec *s = c->s;
	const struct spec_dim *d = spec_dim(s, i);
	int r;
	if (d->external) {
		size_t k = 0, n = ext ? ext->n : 0;
		while (k < n && strcmp(ext->keys[k], d->key))
			k++;
		if (k == n) {
			r = 0;
			warn(c->warnings, "error", d->key, "dimension '%s': the %s evaluator gave no score "
			     "for it", d->key, spec_evaluator_name(spec_evaluator(s)));
		} else {
			int v = ext->scores[k];
			r = v < 0 ? 0 : v > 1000 ? 1000 : v;
		}
		return r;
	}
	json_t *det = c->explain ? json_object() : NULL;
	if (det)
		json_object_set_new(det, "primitive", json_string(prim_kind_name(d->prim)));
	r = eval_prim(c, d, det, NULL);
	if (det && d->norm) {
		char nb[128];
		norm_describe(d->norm, nb, sizeof nb);
		json_object_set_new(det, "normalize", json_string(nb));
	}
	if (det && d->full_points)
		json_object_set_new(det, "full_score", json_integer(d->full_points));
	out->dims[i].detail = det;
	return r;
}

int score_eval_prepared(const struct score_prep *p, const json_t *answer, const json_t *metadata,
                        const struct score_match *m, const struct score_ext *ext,
                        const struct score_limits *lim, struct score_result *out, char *err,
                        size_t errlen)
{
	static const struct score_match no_match;
	const struct spec *s = p->s;
	json_t *empty = NULL;
	memset(out, 0, sizeof *out);
	if (!answer || !metadata)
		empty = json_object();
	struct ctx c = {
		.s = s,
		.prep = p,
		.answer = answer ? answer : empty,
		.metadata = metadata ? metadata : empty,
		.gt = p->gt,
		.m = m ? m : &no_match,
		.max_str = lim && lim->max_string_bytes ? lim->max_string_bytes
		                                        : SCORE_DEFAULT_MAX_STRING_BYTES,
		.explain = lim && lim->explain,
		.rx_budget = SCORE_RX_BUDGET,
		.work_left = SCORE_WORK_BUDGET,
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
	if (lim && lim->text_bytes && lim->text_bytes <= c.max_str)
		for (int k = 0; k < 4; k++)
			c.clean[k] = 1;   /* no string can be longer than the whole text */
	if (spec_uses_match(s)) {
		/* The @match document: what the worker knows of the match, nothing from the clock. */
		c.match_doc = json_object();
		if (c.m->has_times) {
			int64_t ms = c.m->submitted_at_ms - c.m->started_at_ms;
			char b[48];
			snprintf(b, sizeof b, "%lld.%03lld", (long long)(ms / 1000),
			         (long long)((ms < 0 ? -ms : ms) % 1000));
			json_object_set_new(c.match_doc, "elapsed_ms", json_integer(ms));
			json_object_set_new(c.match_doc, "elapsed_secs", json_real(strtod(b, NULL)));
		}
		if (c.m->time_limit_secs > 0)
			json_object_set_new(c.match_doc, "time_limit_secs", json_integer(c.m->time_limit_secs));
		json_object_set_new(c.match_doc, "attempt_number", json_integer(c.m->attempt_number));
		json_object_set_new(c.match_doc, "memoryless", json_boolean(c.m->memoryless));
		json_object_set_new(c.match_doc, "verified", json_boolean(c.verified));
	}

	int raw[SPEC_MAX_DIMS] = { 0 }, fin[SPEC_MAX_DIMS] = { 0 };
	bool later[SPEC_MAX_DIMS] = { false };
	c.fin = fin;
	/* In spec order, except composites that read other dimensions: those are scored in the
	 * gate pass below, once what they read is final. */
	for (size_t i = 0; i < nd; i++) {
		if (spec_dim(s, i)->ref_deps && !spec_dim(s, i)->external)
			later[i] = true;
		else
			raw[i] = score_one(&c, i, ext, out);
	}
	/* Gates, in an order where every target (and every dimension a composite reads) is final
	 * before its dependents. */
	const size_t *order = spec_topo_order(s);
	for (size_t i = 0; i < nd; i++)
		fin[i] = raw[i];
	for (size_t k = 0; k < nd; k++) {
		size_t i = order[k];
		const struct spec_dim *d = spec_dim(s, i);
		if (later[i])
			raw[i] = score_one(&c, i, ext, out);
		fin[i] = raw[i];
		bool pass = true;
		if (d->gate_expr) {
			struct expr_q v[SPEC_MAX_DIMS];
			for (size_t k = 0; k < nd; k++)
				v[k] = expr_q_int(fin[k]);   /* targets come first in this order */
			struct expr_q g = expr_eval_q(d->gate_expr, v, NULL, NULL);
			pass = !g.missing && (g.exact ? g.num != 0 : g.d != 0.0);
		} else if (d->has_gate) {
			pass = (double)fin[d->gate_dim] > d->gate_above;
		}
		if (!pass) {
			fin[i] = 0;
			json_t *det = out->dims[i].detail ? out->dims[i].detail : json_object();
			json_object_set_new(det, "gated", json_true());
			if (d->gate_expr)
				json_object_set_new(det, "gate_expr", json_string(json_string_value(
				    json_object_get(json_object_get(json_array_get(json_object_get(spec_json(s),
				    "dimensions"), i), "gate"), "expr"))));
			else
				json_object_set_new(det, "gate_dimension", json_string(spec_dim_key(s, d->gate_dim)));
			json_object_set_new(det, "ungated_score", json_integer(raw[i]));
			out->dims[i].detail = det;
		} else if (c.explain && d->has_gate && out->dims[i].detail) {
			json_object_set_new(out->dims[i].detail, "gate_passed", json_true());
		}
	}
	int64_t total = 0;
	out->ndims = nd;
	out->work = c.work_used;
	for (size_t i = 0; i < nd; i++) {
		const struct spec_dim *d = spec_dim(s, i);
		struct score_dim *o = &out->dims[i];
		memcpy(o->key, d->key, sizeof o->key);
		o->score = fin[i];
		o->weight = d->weight;
		o->weighted = (dec6)fin[i] * d->weight;
		/* round_each: each weighted value rounded half up to an integer, then summed */
		total += spec_round_each(s) ? (o->weighted + DEC6_ONE / 2) / DEC6_ONE * DEC6_ONE
		                            : o->weighted;
		if (c.explain) {
			if (!o->detail)
				o->detail = json_object();
			json_object_set_new(o->detail, "raw_score", json_integer(raw[i]));
			if (d->helper)
				json_object_set_new(o->detail, "helper", json_true());
			json_object_set_new(o->detail, "score", json_integer(fin[i]));
		}
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
	json_decref(c.match_doc);
	return 0;
}

int score_script_value(const json_t *v, int *out, char *msg, size_t msglen)
{
	char num[40];
	if (!json_is_number(v) || !isfinite(json_number_value(v))) {
		char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		const char *got = t ? t : "?";
		snprintf(msg, msglen, "must be a number 0..1000, got %.*s", (int)utf8_cut(got, 64), got);
		free(t);
		return -1;
	}
	double d = json_number_value(v);
	if (json_is_integer(v))
		snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
	else
		dec_shortest(d, num, sizeof num);
	if (d < 0 || d > 1000) {   /* as written, before rounding */
		*out = d < 0 ? 0 : 1000;
		snprintf(msg, msglen, "score %s is outside 0..1000 (clamped to %d)", num, *out);
		return 1;
	}
	*out = (int)floor(d + 0.5);   /* half up */
	return 0;
}

json_t *score_result_explain(const struct score_result *r)
{
	json_t *o = json_object();
	for (size_t i = 0; i < r->ndims; i++)
		if (r->dims[i].detail)
			json_object_set(o, r->dims[i].key, r->dims[i].detail);
	return o;
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
