/*
 * Scoring spec parsing and validation (common/README.md "Scoring spec"; see spec.h). Every rule
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
#include "norm.h"
#include "rx.h"
#include "util.h"

struct spec {
	json_t *json;
	bool round_each, uses_match;
	enum spec_evaluator ev;
	size_t ndims;
	struct spec_dim dims[SPEC_MAX_DIMS];
	size_t order[SPEC_MAX_DIMS];
	double win, draw;
	bool has_budget, has_llm, has_tool;
	int64_t budget, llm, tool;
	struct rubric *rubric;   /* judge criteria and settings, NULL without (rubric.h) */
};

/* fail(): errfail from util.h, the validators' one way to report. */
#define fail errfail

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

/* ---- unknown keys ---------------------------------------------------------------------- */

/* Edit distance of two short keys (bytes; both at most 64, else a large number). */
static size_t key_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b), row[65];
	if (n > 64 || m > 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= m; j++)
		row[j] = j;
	for (size_t i = 1; i <= n; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= m; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[m];
}

static bool in_list(const char *const *list, const char *k)
{
	for (size_t i = 0; list && list[i]; i++)
		if (!strcmp(list[i], k))
			return true;
	return false;
}

/* Refuses a key of obj that is in none of the lists (NULL-terminated, up to three) and does
 * not start with "x-" (authors' notes). where names the object ("dimension 'x'", "the spec");
 * prim, for a dimension or a nested primitive, is its primitive (PRIM_NONE when it has none),
 * else -1: there, a key that only other primitives read is reported as not applying to it. The hint is the known key nearest by
 * edit distance, when at most a third of the key's length (at least 2) away. */
static int check_keys(const json_t *obj, const char *where, int prim,
                      const char *const *a, const char *const *b, const char *const *c,
                      char *err, size_t errlen)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)obj, k, v) {
		if (!strncmp(k, "x-", 2) || in_list(a, k) || in_list(b, k) || in_list(c, k))
			continue;
		int readers = 0, reader = PRIM_NONE;
		for (int o = PRIM_EXACT_MATCH; prim >= 0 && o < PRIM_KIND_COUNT; o++)
			if (in_list(prim_params((enum prim_kind)o), k)) {
				readers++;
				reader = o;
			}
		if (readers)
			return fail(err, errlen, "%s: %s does not apply to %s%s%s%s%s", where, k,
			            prim ? "primitive " : "a dimension without a primitive",
			            prim_kind_name((enum prim_kind)prim), readers == 1 ? " (only " : "",
			            readers == 1 ? prim_kind_name((enum prim_kind)reader) : "",
			            readers == 1 ? " reads it)" : "");
		const char *best = NULL;
		size_t bd = SIZE_MAX, len = strlen(k);
		const char *const *lists[3] = { a, b, c };
		for (int l = 0; l < 3; l++)
			for (size_t i = 0; lists[l] && lists[l][i]; i++) {
				size_t d = key_distance(k, lists[l][i]);
				if (d < bd) {
					bd = d;
					best = lists[l][i];
				}
			}
		if (best && bd <= (len / 3 > 2 ? len / 3 : 2))
			return fail(err, errlen, "unknown key '%.64s' in %s (did you mean '%s'?)", k, where, best);
		return fail(err, errlen, "unknown key '%.64s' in %s (keys starting with x- are free for "
		            "notes)", k, where);
	}
	return 0;
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

static void rkey_free(struct spec_rkey *k)
{
	if (!k)
		return;
	jpath_free(k->path);
	free(k->prefix);
	free(k->suffix);
	free(k);
}

static void scan_free(struct spec_scan *sc)
{
	if (!sc)
		return;
	for (size_t i = 0; i < sc->nwhere; i++) {
		jpath_free(sc->where[i].field);
		jpath_free(sc->where[i].eq_path);
		free(sc->where[i].eq_text);
	}
	free(sc->where);
	jpath_free(sc->of);
	free(sc);
}

static void dim_free(struct spec_dim *d)
{
	jpath_free(d->field);
	jpath_free(d->gt_field);
	free(d->field_text);
	free(d->gt_text);
	jpath_free(d->field_each);
	jpath_free(d->unwrap);
	jpath_free(d->gt_each);
	for (size_t i = 0; i < d->njoin; i++) {
		jpath_free(d->join[i]);
		free(d->join_text[i]);
	}
	free(d->join);
	free(d->join_src);
	free(d->join_text);
	free(d->sep);
	expr_free(d->expr);
	expr_free(d->gate_expr);
	free(d->points);
	for (size_t i = 0; i < d->nterms; i++) {
		for (size_t k = 0; k < d->terms[i].nalt; k++) {
			free(d->terms[i].lit[k]);
			rx_free(d->terms[i].rx[k]);
			struct spec_tref *r = d->terms[i].ref ? d->terms[i].ref[k] : NULL;
			if (r) {
				jpath_free(r->path);
				free(r->text);
				free(r->prefix);
				free(r->suffix);
				free(r);
			}
		}
		free(d->terms[i].ref);
		free(d->terms[i].lit);
		free(d->terms[i].litlen);
		free(d->terms[i].rx);
	}
	free(d->terms);
	rx_free(d->rx);
	for (size_t i = 0; i < d->nkeys; i++)
		jpath_free(d->match_on[i]);
	free(d->match_on);
	for (size_t i = 0; i < d->nfields; i++)
		dim_free(&d->fields[i]);
	free(d->fields);
	free(d->fweights);
	if (d->item) {
		dim_free(d->item);
		free(d->item);
	}
	rkey_free(d->fkey);
	rkey_free(d->gkey);
	rkey_free(d->okey);
	jpath_free(d->distinct_of);
	for (size_t i = 0; i < d->nvars; i++) {
		free(d->vars[i].name);
		free(d->vars[i].text);
		jpath_free(d->vars[i].path);
		jpath_free(d->vars[i].unwrap);
		scan_free(d->vars[i].scan);
		if (d->vars[i].part) {
			dim_free(d->vars[i].part);
			free(d->vars[i].part);
		}
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

/* Splits a root prefix (@answer, @metadata, @match, @ground_truth) off text; *rest gets what
 * follows ('.' skipped). Returns 1 with *src set, 0 when there is no root prefix. */
static int split_root(const char *t, size_t tl, enum spec_var_source *src, const char **rest,
                      size_t *restlen)
{
	static const struct { const char *name; enum spec_var_source src; } roots[] = {
		{ "@answer", SPEC_VAR_ANSWER }, { "@metadata", SPEC_VAR_METADATA },
		{ "@match", SPEC_VAR_MATCH }, { "@ground_truth", SPEC_VAR_GROUND_TRUTH },
	};
	for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
		size_t n = strlen(roots[i].name);
		if (tl < n || memcmp(t, roots[i].name, n) || (tl > n && t[n] != '.' && t[n] != '['))
			continue;
		*src = roots[i].src;
		*rest = t + n + (tl > n && t[n] == '.');
		*restlen = tl - n - (tl > n && t[n] == '.');
		return 1;
	}
	return 0;
}

/* Parses a path with an optional root; *path NULL means the root document itself. */
static int parse_rooted(const char *t, size_t tl, enum spec_var_source dflt,
                        enum spec_var_source *src, struct jpath **path, char *why, size_t wl)
{
	const char *rest = t;
	size_t rl = tl;
	*src = dflt;
	*path = NULL;
	if (!split_root(t, tl, src, &rest, &rl))
		return jpath_parse(t, tl, path, why, wl);
	if (rl == 0)
		return 0;
	return jpath_parse(rest, rl, path, why, wl);
}

/* Reads a path parameter (field / ground_truth_field). optional: absence is fine (*out NULL,
 * the root / element); dflt: the root when the path names none. */
static int parse_path_param(const json_t *dim, const char *key, const char *dkey,
                            const char *pname, struct jpath **out, enum spec_var_source *src,
                            char **text, enum spec_var_source dflt, bool optional,
                            struct spec *s, bool *proj, struct jpath **each, char *err,
                            size_t errlen)
{
	const json_t *v = json_object_get(dim, key);
	char why[160];
	*src = dflt;
	if (!v && optional)
		return 0;
	if (!v)
		return fail(err, errlen, "dimension '%s': primitive %s needs %s", dkey, pname, key);
	if (!json_is_string(v))
		return fail(err, errlen, "dimension '%s': %s must be a string, not %s", dkey, key,
		            jcanon_type_name(v));
	*text = xstrndup(json_string_value(v), json_string_length(v));
	if (dflt == SPEC_VAR_ELEMENT && !strcmp(*text, "@element"))
		return 0;   /* a nested primitive's element itself (v3: records against plain values) */
	const char *star = strstr(*text, "[*]");
	if (star) {   /* a projection (v3): the array before [*], each element's path after it */
		if (dflt == SPEC_VAR_ELEMENT)
			return fail(err, errlen, "dimension '%s': %s '%.100s': a projection ([*]) is for a "
			            "dimension's or a composite part's paths, not a nested primitive's", dkey,
			            key, *text);
		if (strstr(star + 3, "[*]"))
			return fail(err, errlen, "dimension '%s': %s '%.100s': at most one [*]", dkey, key,
			            *text);
		const char *rest = star + 3 + (star[3] == '.');
		size_t pl = (size_t)(star - *text);
		if ((pl && parse_rooted(*text, pl, dflt, src, out, why, sizeof why) < 0) ||
		    (*rest && jpath_parse(rest, strlen(rest), each, why, sizeof why) < 0) ||
		    (star[3] && star[3] != '.' && star[3] != '['))
			return fail(err, errlen, "dimension '%s': %s '%.100s' is not a valid path: %s",
			            dkey, key, *text, star[3] && star[3] != '.' && star[3] != '['
			            ? "[*] must be followed by '.', '[' or the end" : why);
		*proj = true;
		if (*src == SPEC_VAR_MATCH && s)
			s->uses_match = true;
		return 0;
	}
	if (parse_rooted(json_string_value(v), json_string_length(v), dflt, src, out, why,
	                 sizeof why) < 0)
		return fail(err, errlen, "dimension '%s': %s '%.100s' is not a valid path: %s", dkey,
		            key, json_string_value(v), why);
	if (*src == SPEC_VAR_MATCH && s)
		s->uses_match = true;
	return 0;
}

static int parse_params(struct spec *s, const json_t *dim, struct spec_dim *d, int depth,
                        char *err, size_t errlen);

/* A field given as an array of 2 to 16 paths (v3, common/README.md "Projection and joined
 * fields"): their texts joined into one; a dimension's or a part's only. */
static int parse_join(struct spec *s, const json_t *fj, struct spec_dim *d, bool nested,
                      char *err, size_t errlen)
{
	size_t n = json_array_size(fj);
	char why[160];
	if (nested)
		return fail(err, errlen, "dimension '%s': a field of several paths is for a dimension "
		            "or a composite's part, not a nested primitive", d->key);
	if (n < 2 || n > 16)
		return fail(err, errlen, "dimension '%s': field as an array joins 2 to 16 paths",
		            d->key);
	d->join = xcalloc(n, sizeof *d->join);
	d->join_src = xcalloc(n, sizeof *d->join_src);
	d->join_text = xcalloc(n, sizeof *d->join_text);
	for (size_t i = 0; i < n; i++) {
		const json_t *p = json_array_get(fj, i);
		if (!json_is_string(p))
			return fail(err, errlen, "dimension '%s': field[%zu] must be a path string, not %s",
			            d->key, i, jcanon_type_name(p));
		d->join_text[d->njoin++] = xstrndup(json_string_value(p), json_string_length(p));
		bool star = strstr(d->join_text[i], "[*]") != NULL;
		if (star || parse_rooted(json_string_value(p), json_string_length(p), SPEC_VAR_ANSWER,
		                         &d->join_src[i], &d->join[i], why, sizeof why) < 0)
			return fail(err, errlen, "dimension '%s': field[%zu] '%.100s' is not a valid path: "
			            "%s", d->key, i, d->join_text[i], star ? "a joined path has no [*]"
			                                                   : why);
		if (d->join_src[i] == SPEC_VAR_MATCH && s)
			s->uses_match = true;
	}
	d->field_text = xstrdup(d->join_text[0]);
	d->field_src = d->join_src[0];
	return 0;
}

/* A composite's part (common/README.md "Composite dimensions"): a primitive with a dimension's
 * parameters (paths from the answer and the ground truth as for a dimension), scored as a
 * dimension would be; any primitive but expression. */
static int parse_part(struct spec *s, const json_t *j, const char *name, struct spec_dim *n,
                      const char *key, char *err, size_t errlen)
{
	memcpy(n->key, key, strlen(key) + 1);
	const json_t *p = json_object_get(j, "primitive");
	if (!json_is_string(p))
		return fail(err, errlen, "dimension '%s': vars.%.64s: primitive must be a string",
		            key, name);
	if (prim_kind_from_name(json_string_value(p), &n->prim) < 0)
		return fail(err, errlen, "dimension '%s': vars.%.64s: unknown primitive '%.64s'", key,
		            name, json_string_value(p));
	if (n->prim == PRIM_EXPRESSION)
		return fail(err, errlen, "dimension '%s': vars.%.64s: an expression cannot be a part of "
		            "a composite (make it a dimension, helper if it should count nothing, and "
		            "read it with {\"dimension\": key})", key, name);
	static const char *const own[] = { "primitive", NULL };
	char in[120];
	snprintf(in, sizeof in, "dimension '%s' vars.%.64s", key, name);
	if (check_keys(j, in, (int)n->prim, own, prim_params(n->prim), NULL, err, errlen) < 0)
		return -1;
	if (parse_params(s, j, n, 0, err, errlen) == 0)
		return 0;
	/* "dimension 'k': rule" names the part: "dimension 'k' vars.name: rule" */
	char head[48], msg[512];
	int hl = snprintf(head, sizeof head, "dimension '%s': ", key);
	if (errlen && hl > 0 && !strncmp(err, head, (size_t)hl)) {
		snprintf(msg, sizeof msg, "dimension '%s' vars.%.64s: %s", key, name, err + hl);
		snprintf(err, errlen, "%s", msg);
	}
	return -1;
}

/* A relative path inside an array element (where.field, of); absent: the element. */
static int elem_path(const json_t *o, const char *k, struct jpath **out, const char *dk,
                     const char *name, char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, k);
	char why[160];
	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_string(v) || jpath_parse(json_string_value(v), json_string_length(v), out, why,
	                                      sizeof why) < 0)
		return fail(err, errlen, "dimension '%s': vars.%.64s: %s must be a path inside each "
		            "element%s%s", dk, name, k, json_is_string(v) ? ": " : "",
		            json_is_string(v) ? why : "");
	return 0;
}

/* A filter-and-scan var (common/README.md "Filter and scan"): "where" (a test or an array of
 * tests, all must hold), "reduce", "of", "order"; its "path" (the array) is read as any var's. */
static int parse_scan(struct spec *s, const json_t *o, const struct spec_dim *d,
                      const char *name, struct spec_scan **out, char *err, size_t errlen)
{
	static const char *const rn[] = { "count", "sum", "min", "max", "new_best", "sorted",
	                                  "in_order", NULL };
	static const char *const tn[] = { "string", "number", "boolean", "null", "array", "object",
	                                  NULL };
	static const int tv[] = { JSON_STRING, JSON_INTEGER, JSON_TRUE, JSON_NULL, JSON_ARRAY,
	                          JSON_OBJECT };
	struct spec_scan *sc = *out = xcalloc(1, sizeof *sc);
	const json_t *r = json_object_get(o, "reduce"), *w = json_object_get(o, "where");
	size_t k = 0;
	while (rn[k] && !(json_is_string(r) && !strcmp(json_string_value(r), rn[k])))
		k++;
	if (!rn[k])
		return fail(err, errlen, "dimension '%s': vars.%.64s: reduce must be one of count, sum, "
		            "min, max, new_best, sorted, in_order", d->key, name);
	sc->reduce = (enum spec_reduce)k;
	if (elem_path(o, "of", &sc->of, d->key, name, err, errlen) < 0)
		return -1;
	if (sc->reduce == SPEC_R_COUNT && json_object_get(o, "of"))
		return fail(err, errlen, "dimension '%s': vars.%.64s: reduce count takes no of",
		            d->key, name);
	const json_t *ord = json_object_get(o, "order");
	if (ord && (!json_is_string(ord) || (strcmp(json_string_value(ord), "ascending") &&
	                                     strcmp(json_string_value(ord), "descending"))))
		return fail(err, errlen, "dimension '%s': vars.%.64s: order must be \"ascending\" or "
		            "\"descending\"", d->key, name);
	if (ord && sc->reduce != SPEC_R_NEW_BEST && sc->reduce != SPEC_R_SORTED &&
	    sc->reduce != SPEC_R_IN_ORDER)
		return fail(err, errlen, "dimension '%s': vars.%.64s: order applies to new_best, sorted "
		            "and in_order only", d->key, name);
	sc->descending = ord && !strcmp(json_string_value(ord), "descending");
	if (w && !json_is_object(w) && !(json_is_array(w) && json_array_size(w) >= 1 &&
	                                 json_array_size(w) <= 16))
		return fail(err, errlen, "dimension '%s': vars.%.64s: where must be a test or an array of "
		            "1 to 16 tests", d->key, name);
	sc->nwhere = !w ? 0 : json_is_array(w) ? json_array_size(w) : 1;
	sc->where = xcalloc(sc->nwhere ? sc->nwhere : 1, sizeof *sc->where);
	for (size_t i = 0; i < sc->nwhere; i++) {
		const json_t *t = json_is_array(w) ? json_array_get(w, i) : w;
		struct spec_where *x = &sc->where[i];
		static const char *const wk[] = { "field", "equals", "equals_path", "in", "type", "not",
		                                  NULL };
		char in[140];
		x->type = -1;
		snprintf(in, sizeof in, "dimension '%s' vars.%.64s.where", d->key, name);
		if (!json_is_object(t))
			return fail(err, errlen, "%s: a test must be an object", in);
		if (check_keys(t, in, -1, wk, NULL, NULL, err, errlen) < 0 ||
		    elem_path(t, "field", &x->field, d->key, name, err, errlen) < 0)
			return -1;
		const json_t *ep = json_object_get(t, "equals_path"), *ty = json_object_get(t, "type");
		const json_t *nt = json_object_get(t, "not");
		x->equals = json_object_get(t, "equals");
		x->in = json_object_get(t, "in");
		if (!!x->equals + !!ep + !!x->in + !!ty != 1)
			return fail(err, errlen, "%s: a test needs exactly one of equals, equals_path, in, "
			            "type", in);
		if (x->in && (!json_is_array(x->in) || json_array_size(x->in) > 64))
			return fail(err, errlen, "%s: in must be an array of at most 64 values", in);
		if (nt && !json_is_boolean(nt))
			return fail(err, errlen, "%s: not must be true or false", in);
		x->negate = json_is_true(nt);
		if (ty) {
			size_t j = 0;
			while (tn[j] && !(json_is_string(ty) && !strcmp(json_string_value(ty), tn[j])))
				j++;
			if (!tn[j])
				return fail(err, errlen, "%s: type must be one of string, number, boolean, null, "
				            "array, object", in);
			x->type = tv[j];
		}
		if (ep) {
			char why[160];
			if (!json_is_string(ep))
				return fail(err, errlen, "%s: equals_path must be a path string", in);
			x->eq_text = xstrndup(json_string_value(ep), json_string_length(ep));
			if (parse_rooted(json_string_value(ep), json_string_length(ep), SPEC_VAR_ANSWER,
			                 &x->eq_src, &x->eq_path, why, sizeof why) < 0)
				return fail(err, errlen, "%s: equals_path '%.100s' is not a valid path: %s", in,
				            x->eq_text, why);
			if (x->eq_src == SPEC_VAR_MATCH)
				s->uses_match = true;
		}
	}
	return 0;
}

/* A var's v3 forms (common/README.md "Polymorphic values and type tests"): "unwrap" (a path
 * read inside an object value) and "type" (a type name or an array of 1 to 6 of them: the var
 * is 1 or 0). Neither goes with a scan; "type" takes no default. in names the var. */
static int parse_var_forms(const json_t *o, struct spec_var *v, bool scan, bool has_default,
                           const char *in, char *err, size_t errlen)
{
	static const char *const tn[] = { "string", "number", "boolean", "null", "array", "object",
	                                  NULL };
	static const unsigned tv[] = { 1u << JSON_STRING, 1u << JSON_INTEGER | 1u << JSON_REAL,
	                               1u << JSON_TRUE | 1u << JSON_FALSE, 1u << JSON_NULL,
	                               1u << JSON_ARRAY, 1u << JSON_OBJECT };
	const json_t *u = json_object_get(o, "unwrap"), *t = json_object_get(o, "type");
	char why[160];
	if ((u || t) && scan)
		return fail(err, errlen, "%s: unwrap and type do not go with a scan (where, reduce, of)",
		            in);
	if (t && has_default)
		return fail(err, errlen, "%s: a type test reads 1 or 0 and takes no default", in);
	if (u) {
		if (!json_is_string(u) || !json_string_length(u))
			return fail(err, errlen, "%s: unwrap must be a path inside the object (e.g. "
			            "\"count\")", in);
		if (jpath_parse(json_string_value(u), json_string_length(u), &v->unwrap, why,
		                sizeof why) < 0)
			return fail(err, errlen, "%s: unwrap '%.100s' is not a valid path: %s", in,
			            json_string_value(u), why);
	}
	size_t n = json_is_array(t) ? json_array_size(t) : 1;
	if (t && (json_is_array(t) ? n < 1 || n > 6 : !json_is_string(t)))
		return fail(err, errlen, "%s: type must be a type name or an array of 1 to 6 of them",
		            in);
	for (size_t i = 0; t && i < n; i++) {
		const json_t *x = json_is_array(t) ? json_array_get(t, i) : t;
		size_t j = 0;
		while (tn[j] && !(json_is_string(x) && !strcmp(json_string_value(x), tn[j])))
			j++;
		if (!tn[j])
			return fail(err, errlen, "%s: type must be one of string, number, boolean, null, "
			            "array, object", in);
		v->types |= tv[j];
	}
	return 0;
}

static int parse_expression(struct spec *s, const json_t *dim, struct spec_dim *d, char *err,
                            size_t errlen)
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
	size_t nv = vars ? json_object_size(vars) : 0, nparts = 0;
	d->vars = xcalloc(nv ? nv : 1, sizeof *d->vars);
	const char *name;
	json_t *path;
	if (vars) {
		json_object_foreach((json_t *)vars, name, path) {
			/* counted first: dim_free frees what a failed parse leaves in it */
			struct spec_var *v = &d->vars[d->nvars++];
			const json_t *def = NULL;
			v->dim = -1;
			if (json_is_object(path) && json_object_get(path, "primitive")) {
				if (++nparts > SPEC_MAX_PARTS)
					return fail(err, errlen, "dimension '%s': a composite reads at most %d "
					            "primitives", d->key, SPEC_MAX_PARTS);
				v->name = xstrdup(name);
				v->text = xstrdup(name);
				v->part = xcalloc(1, sizeof *v->part);
				if (parse_part(s, path, name, v->part, d->key, err, errlen) < 0)
					return -1;
				continue;
			}
			if (json_is_object(path) && json_object_get(path, "dimension")) {
				static const char *const dk[] = { "dimension", NULL };
				char in[120];
				snprintf(in, sizeof in, "dimension '%s' vars.%.64s", d->key, name);
				if (check_keys(path, in, -1, dk, NULL, NULL, err, errlen) < 0)
					return -1;
				const json_t *k = json_object_get(path, "dimension");
				if (!json_is_string(k))
					return fail(err, errlen, "dimension '%s': vars.%.64s.dimension must be a "
					            "dimension key", d->key, name);
				v->name = xstrdup(name);
				v->text = xstrndup(json_string_value(k), json_string_length(k));
				v->dim = -2;   /* resolved once every key is known (resolve_refs) */
				continue;
			}
			if (json_is_object(path)) {
				static const char *const vk[] = { "path", "default", "unwrap", "type", NULL };
				static const char *const sk[] = { "where", "reduce", "of", "order", NULL };
				char in[120];
				bool scan = json_object_get(path, "reduce") || json_object_get(path, "where") ||
				            json_object_get(path, "of");
				snprintf(in, sizeof in, "dimension '%s' vars.%.64s", d->key, name);
				if (check_keys(path, in, -1, vk, scan ? sk : NULL, NULL, err, errlen) < 0)
					return -1;
				if (scan && parse_scan(s, path, d, name, &v->scan, err, errlen) < 0)
					return -1;
				def = json_object_get(path, "default");
				if (def && !json_is_number(def))
					return fail(err, errlen, "dimension '%s': vars.%.64s.default must be a number, "
					            "not %s", d->key, name, jcanon_type_name(def));
				if (parse_var_forms(path, v, scan, def != NULL, in, err, errlen) < 0)
					return -1;
				path = json_object_get(path, "path");
			}
			if (!json_is_string(path))
				return fail(err, errlen, "dimension '%s': vars.%.64s must be a path string (or "
				            "{\"path\": ..., \"default\": N}), not %s", d->key, name,
				            jcanon_type_name(path));
			const char *t = json_string_value(path);
			size_t tl = json_string_length(path);
			v->name = xstrdup(name);
			v->text = xstrndup(t, tl);
			v->has_default = def != NULL;
			v->def = def ? json_number_value(def) : 0;
			v->src = SPEC_VAR_ANSWER;
			const char *rest;
			size_t rl;
			if (split_root(t, tl, &v->src, &rest, &rl)) {
				t = rest;
				tl = rl;
				if (v->src == SPEC_VAR_MATCH)
					s->uses_match = true;
			} else if (tl > 9 && !strncmp(t, "metadata.", 9)) {
				v->src = SPEC_VAR_METADATA;
				t += 9;
				tl -= 9;
			} else if (tl > 13 && !strncmp(t, "ground_truth.", 13)) {
				v->src = SPEC_VAR_GROUND_TRUTH;
				t += 13;
				tl -= 13;
			}
			if (tl > 0 && jpath_parse(t, tl, &v->path, why, sizeof why) < 0)
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
	for (size_t i = 0; i < d->nvars; i++) {
		d->vars[i].len_only = expr_var_use(d->expr, i) == 2;
		if ((d->vars[i].part || d->vars[i].dim != -1 || d->vars[i].scan) &&
		    (expr_var_use(d->expr, i) & 2))
			return fail(err, errlen, "dimension '%s': len(%s): len() reads a path's value, not "
			            "a part's, a dimension's or a scan's number", d->key, d->vars[i].name);
		if (d->vars[i].types && (expr_var_use(d->expr, i) & 2))
			return fail(err, errlen, "dimension '%s': len(%s): len() reads a path's value, not "
			            "a type test's 1 or 0", d->key, d->vars[i].name);
	}
	const json_t *nm = json_object_get(dim, "null_as_missing");
	if (nm && !json_is_boolean(nm))
		return fail(err, errlen, "dimension '%s': null_as_missing must be true or false", d->key);
	d->null_missing = json_is_true(nm);
	d->scale = 1;
	const json_t *sc = json_object_get(dim, "scale");
	if (sc) {
		if (!json_is_number(sc) || !(json_number_value(sc) > 0))
			return fail(err, errlen, "dimension '%s': scale must be a number > 0 (the expression's "
			            "full-score value)", d->key);
		d->scale = json_number_value(sc);
	}
	return 0;
}

/* Reads `method` from the names allowed (NULL-terminated pairs name → method). */
static int parse_method(const json_t *dim, struct spec_dim *d, enum prim_method dflt,
                        const char *const *names, const enum prim_method *vals, char *err,
                        size_t errlen)
{
	const json_t *v = json_object_get(dim, "method");
	d->method = dflt;
	if (!v)
		return 0;
	for (size_t i = 0; names[i]; i++)
		if (json_is_string(v) && !strcmp(json_string_value(v), names[i])) {
			d->method = vals[i];
			return 0;
		}
	char list[200] = "";
	size_t off = 0;
	for (size_t i = 0; names[i]; i++)
		off += (size_t)snprintf(list + off, sizeof list - off, "%s\"%s\"", i ? ", " : "", names[i]);
	return fail(err, errlen, "dimension '%s': method must be one of %s", d->key, list);
}

/* A fraction 0..1 with at most 6 places (ramp points, field weights). */
static int parse_fraction(const json_t *v, dec6 *out, bool positive)
{
	int places;
	if (!json_is_number(v) || dec_from_json(v, out, &places) < 0 || places > 6)
		return -1;
	return *out < 0 || *out > DEC6_ONE || (positive && *out == 0) ? -1 : 0;
}

/* ramp / steps / target for text_length and count (one of them is required). */
static int parse_ramp(const json_t *dim, struct spec_dim *d, char *err, size_t errlen)
{
	const json_t *ramp = json_object_get(dim, "ramp"), *steps = json_object_get(dim, "steps");
	const json_t *target = json_object_get(dim, "target");
	int64_t x;
	if (!!ramp + !!steps + !!target != 1)
		return fail(err, errlen, "dimension '%s': primitive %s needs exactly one of ramp, steps, "
		            "target", d->key, prim_kind_name(d->prim));
	if (target) {
		if (!as_count(target, &x) || x == 0)
			return fail(err, errlen, "dimension '%s': target must be a positive integer", d->key);
		d->points = xcalloc(2, sizeof *d->points);
		d->points[1] = (struct prim_point){ x, DEC6_ONE };
		d->npoints = 2;
		return 0;
	}
	const json_t *pts = ramp ? ramp : steps;
	const char *nm = ramp ? "ramp" : "steps";
	d->steps = steps != NULL;
	if (!json_is_array(pts) || json_array_size(pts) == 0 || json_array_size(pts) > 64)
		return fail(err, errlen, "dimension '%s': %s must be an array of 1 to 64 [x, fraction] "
		            "points", d->key, nm);
	d->npoints = json_array_size(pts);
	d->points = xcalloc(d->npoints, sizeof *d->points);
	for (size_t i = 0; i < d->npoints; i++) {
		const json_t *pt = json_array_get(pts, i);
		if (!json_is_array(pt) || json_array_size(pt) != 2 ||
		    !as_count(json_array_get(pt, 0), &d->points[i].x) ||
		    parse_fraction(json_array_get(pt, 1), &d->points[i].f, false) < 0)
			return fail(err, errlen, "dimension '%s': %s[%zu] must be [x, fraction] with x a "
			            "non-negative integer and fraction in [0, 1] (at most 6 places)", d->key,
			            nm, i);
		if (i > 0 && d->points[i].x <= d->points[i - 1].x)
			return fail(err, errlen, "dimension '%s': %s[%zu]: x must increase strictly", d->key,
			            nm, i);
	}
	return 0;
}

/* A prefix or suffix of a built key or term: a string without NUL, at most 256 bytes (NULL
 * when absent). */
static int parse_affix(const json_t *obj, const char *k, char **out, const char *where, char *err,
                       size_t errlen)
{
	const json_t *v = json_object_get(obj, k);
	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
	    json_string_length(v) > 256)
		return fail(err, errlen, "%s: %s must be a string of at most 256 bytes (no NUL)", where,
		            k);
	*out = xstrdup(json_string_value(v));
	return 0;
}

/* One term of term_coverage: a string, {"regex": P}, {"ground_truth": P, "prefix", "suffix"}
 * (a term built from a value: common/README.md "Spec language v3"), or an array of those
 * (alternatives). */
static int parse_term(const json_t *t, struct spec_dim *d, size_t i, char *err, size_t errlen)
{
	struct spec_term *term = &d->terms[i];
	if (json_is_object(t) && json_object_get(t, "not")) {   /* a term that must be absent */
		static const char *const nk[] = { "not", NULL };
		char where[120];
		snprintf(where, sizeof where, "dimension '%s' terms[%zu]", d->key, i);
		if (check_keys(t, where, -1, nk, NULL, NULL, err, errlen) < 0)
			return -1;
		t = json_object_get(t, "not");
		if (json_is_object(t) && json_object_get(t, "not"))
			return fail(err, errlen, "dimension '%s': terms[%zu]: not inside not", d->key, i);
		term->neg = true;
	}
	size_t n = json_is_array(t) ? json_array_size(t) : 1;
	if (n == 0 || n > 64)
		return fail(err, errlen, "dimension '%s': terms[%zu] must hold 1 to 64 alternatives",
		            d->key, i);
	term->lit = xcalloc(n, sizeof *term->lit);
	term->litlen = xcalloc(n, sizeof *term->litlen);
	term->rx = xcalloc(n, sizeof *term->rx);
	term->ref = xcalloc(n, sizeof *term->ref);
	term->nalt = n;
	for (size_t k = 0; k < n; k++) {
		const json_t *a = json_is_array(t) ? json_array_get(t, k) : t;
		const json_t *re = json_is_object(a) ? json_object_get(a, "regex") : NULL;
		const json_t *gr = json_is_object(a) ? json_object_get(a, "ground_truth") : NULL;
		char why[200];
		static const char *const rk[] = { "regex", "ground_truth", "prefix", "suffix", "not",
		                                  NULL };
		snprintf(why, sizeof why, "dimension '%s' terms[%zu]", d->key, i);
		if (json_is_object(a) && check_keys(a, why, -1, rk, NULL, NULL, err, errlen) < 0)
			return -1;
		if (json_is_object(a) && json_object_get(a, "not"))
			return fail(err, errlen, "dimension '%s': terms[%zu]: {\"not\": ...} is a whole term, "
			            "not an alternative", d->key, i);
		if (json_is_object(a) && !!re + !!gr != 1)
			return fail(err, errlen, "dimension '%s': terms[%zu] takes regex or ground_truth "
			            "(with prefix and suffix), not both", d->key, i);
		if (re && (json_object_get(a, "prefix") || json_object_get(a, "suffix")))
			return fail(err, errlen, "dimension '%s': terms[%zu]: prefix and suffix go with "
			            "ground_truth, not regex", d->key, i);
		if (json_is_string(a)) {
			if (json_string_length(a) == 0)
				return fail(err, errlen, "dimension '%s': terms[%zu]: empty term", d->key, i);
			term->lit[k] = norm_text(d->norm, json_string_value(a), json_string_length(a),
			                         &term->litlen[k]);
		} else if (json_is_string(re)) {
			/* the text is case-folded first: a regex must then ignore case too */
			if (rx_compile(json_string_value(re), json_string_length(re),
			               d->case_insensitive || (d->norm & NORM_CASEFOLD), &term->rx[k], why,
			               sizeof why) < 0)
				return fail(err, errlen, "dimension '%s': terms[%zu]: regex '%.80s' is invalid: %s",
				            d->key, i, json_string_value(re), why);
		} else if (json_is_string(gr)) {
			struct spec_tref *r = term->ref[k] = xcalloc(1, sizeof *r);
			r->text = xstrndup(json_string_value(gr), json_string_length(gr));
			if (parse_rooted(json_string_value(gr), json_string_length(gr), SPEC_VAR_GROUND_TRUTH,
			                 &r->src, &r->path, why, sizeof why) < 0)
				return fail(err, errlen, "dimension '%s': terms[%zu].ground_truth '%.100s' is not a "
				            "valid path: %s", d->key, i, json_string_value(gr), why);
			if (r->src == SPEC_VAR_MATCH)
				return fail(err, errlen, "dimension '%s': terms[%zu].ground_truth cannot read "
				            "@match", d->key, i);
			snprintf(why, sizeof why, "dimension '%s' terms[%zu]", d->key, i);
			if (parse_affix(a, "prefix", &r->prefix, why, err, errlen) < 0 ||
			    parse_affix(a, "suffix", &r->suffix, why, err, errlen) < 0)
				return -1;
		} else {
			return fail(err, errlen, "dimension '%s': terms[%zu] must be a string, "
			            "{\"regex\": \"...\"}, {\"ground_truth\": \"path\"}, an array of "
			            "those, or {\"not\": one of them}", d->key, i);
		}
	}
	return 0;
}

/* A record key (keyed_map field_key / ground_truth_key): a path, or {"path", "prefix",
 * "suffix"}; *out NULL when absent. */
static int parse_rkey(const json_t *dim, const char *name, struct spec_dim *d,
                      struct spec_rkey **out, char *err, size_t errlen)
{
	const json_t *v = json_object_get(dim, name), *p = v;
	char why[200], where[120];
	*out = NULL;
	if (!v)
		return 0;
	snprintf(where, sizeof where, "dimension '%s' %s", d->key, name);
	if (json_is_object(v)) {
		static const char *const kk[] = { "path", "prefix", "suffix", NULL };
		if (check_keys(v, where, -1, kk, NULL, NULL, err, errlen) < 0)
			return -1;
		p = json_object_get(v, "path");
	}
	if (!json_is_string(p))
		return fail(err, errlen, "dimension '%s': %s must be a path (the key inside each record) "
		            "or {\"path\", \"prefix\", \"suffix\"}", d->key, name);
	struct spec_rkey *k = *out = xcalloc(1, sizeof *k);
	if (jpath_parse(json_string_value(p), json_string_length(p), &k->path, why, sizeof why) < 0)
		return fail(err, errlen, "dimension '%s': %s '%.100s' is not a valid path: %s", d->key,
		            name, json_string_value(p), why);
	if (json_is_object(v) && (parse_affix(v, "prefix", &k->prefix, where, err, errlen) < 0 ||
	                          parse_affix(v, "suffix", &k->suffix, where, err, errlen) < 0))
		return -1;
	return 0;
}

#define NEST_MAX_DEPTH 4

static int parse_params(struct spec *s, const json_t *dim, struct spec_dim *d, int depth,
                        char *err, size_t errlen);

/* A nested primitive (match_objects fields, keyed_map item): the same parameters as a
 * dimension, with field / ground_truth_field relative to the element (optional). */
static int parse_nested(struct spec *s, const json_t *j, const char *where, struct spec_dim *n,
                        const char *key, int depth, char *err, size_t errlen)
{
	memcpy(n->key, key, strlen(key) + 1);
	if (!json_is_object(j))
		return fail(err, errlen, "dimension '%s': %s must be an object with a primitive", key,
		            where);
	const json_t *p = json_object_get(j, "primitive");
	if (!json_is_string(p))
		return fail(err, errlen, "dimension '%s': %s needs a primitive", key, where);
	if (prim_kind_from_name(json_string_value(p), &n->prim) < 0)
		return fail(err, errlen, "dimension '%s': %s: unknown primitive '%.64s'", key, where,
		            json_string_value(p));
	static const char *const own[] = { "primitive", NULL }, *const fw[] = { "weight", NULL };
	char in[80];
	snprintf(in, sizeof in, "dimension '%s' %s", key, where);
	if (check_keys(j, in, (int)n->prim, own, prim_params(n->prim), strncmp(where, "fields", 6) ? NULL : fw,
	               err, errlen) < 0)
		return -1;
	if (!(prim_flags(n->prim) & PRIM_F_NESTABLE))
		return fail(err, errlen, "dimension '%s': %s: primitive %s cannot be nested (it does not "
		            "compare two values)", key, where, prim_kind_name(n->prim));
	if (depth >= NEST_MAX_DEPTH)
		return fail(err, errlen, "dimension '%s': %s: primitives nested deeper than %d", key,
		            where, NEST_MAX_DEPTH);
	return parse_params(s, j, n, depth + 1, err, errlen);
}

static int parse_match_objects(struct spec *s, const json_t *dim, struct spec_dim *d, int depth,
                               char *err, size_t errlen)
{
	const json_t *on = json_object_get(dim, "match_on");
	char why[160], where[80];
	if (!on)
		return fail(err, errlen, "dimension '%s': primitive match_objects needs match_on (a "
		            "key path or an array of them)", d->key);
	static const char *const kb[] = { "field_keyed", "ground_truth_keyed" };
	bool *kv[] = { &d->f_keyed, &d->g_keyed };
	for (int i = 0; i < 2; i++) {
		const json_t *v = json_object_get(dim, kb[i]);
		if (v && !json_is_boolean(v))
			return fail(err, errlen, "dimension '%s': %s must be true or false", d->key, kb[i]);
		*kv[i] = json_is_true(v);
	}
	if (json_is_object(on)) {   /* {"path", "prefix", "suffix"}: a key built from a record */
		static const char *const kk[] = { "path", "prefix", "suffix", NULL };
		snprintf(where, sizeof where, "dimension '%s' match_on", d->key);
		if (check_keys(on, where, -1, kk, NULL, NULL, err, errlen) < 0)
			return -1;
		d->okey = xcalloc(1, sizeof *d->okey);
		if (parse_affix(on, "prefix", &d->okey->prefix, where, err, errlen) < 0 ||
		    parse_affix(on, "suffix", &d->okey->suffix, where, err, errlen) < 0)
			return -1;
		on = json_object_get(on, "path");
		if (!json_is_string(on))
			return fail(err, errlen, "dimension '%s': match_on.path must be a path", d->key);
	}
	if ((d->f_keyed || d->g_keyed) && !json_is_string(on))
		return fail(err, errlen, "dimension '%s': field_keyed / ground_truth_keyed need one "
		            "match_on path (an object side's keys are single values)", d->key);
	if (!json_is_string(on) &&
	    (!json_is_array(on) || json_array_size(on) == 0 || json_array_size(on) > 8))
		return fail(err, errlen, "dimension '%s': match_on must be a path or an array of 1 to 8 "
		            "paths", d->key);
	d->nkeys = json_is_array(on) ? json_array_size(on) : 1;
	d->match_on = xcalloc(d->nkeys, sizeof *d->match_on);
	for (size_t i = 0; i < d->nkeys; i++) {
		const json_t *k = json_is_array(on) ? json_array_get(on, i) : on;
		if (!json_is_string(k) || jpath_parse(json_string_value(k), json_string_length(k),
		                                      &d->match_on[i], why, sizeof why) < 0)
			return fail(err, errlen, "dimension '%s': match_on[%zu] is not a valid path%s%s",
			            d->key, i, json_is_string(k) ? ": " : "", json_is_string(k) ? why : "");
	}
	static const char *const names[] = { "recall", "precision", "f1", "mean", "points",
	                                     "distinct", NULL };
	static const enum prim_method vals[] = { PRIM_M_RECALL, PRIM_M_PRECISION, PRIM_M_F1,
	                                         PRIM_M_MEAN, PRIM_M_POINTS, PRIM_M_DISTINCT };
	if (parse_method(dim, d, PRIM_M_RECALL, names, vals, err, errlen) < 0)
		return -1;
	const json_t *dof = json_object_get(dim, "distinct_of");
	if (!dof != (d->method != PRIM_M_DISTINCT))
		return fail(err, errlen, "dimension '%s': distinct_of goes with method \"distinct\" (the "
		            "path, in each expected object, of the value counted)", d->key);
	if (dof) {
		if (!json_is_string(dof) || jpath_parse(json_string_value(dof), json_string_length(dof),
		                                        &d->distinct_of, why, sizeof why) < 0)
			return fail(err, errlen, "dimension '%s': distinct_of must be a path%s%s", d->key,
			            json_is_string(dof) ? ": " : "", json_is_string(dof) ? why : "");
		if (parse_ramp(dim, d, err, errlen) < 0)
			return -1;
	} else if (json_object_get(dim, "ramp") || json_object_get(dim, "steps") ||
	           json_object_get(dim, "target")) {
		return fail(err, errlen, "dimension '%s': ramp, steps and target go with method "
		            "\"distinct\" in match_objects", d->key);
	}
	static const char *const pn[] = { "points", "max_points" };
	dec6 *pv[] = { &d->pair_points, &d->max_points };
	for (int i = 0; i < 2; i++) {   /* method points (v3): both required, else refused */
		const json_t *v = json_object_get(dim, pn[i]);
		int places;
		if (!v != (d->method != PRIM_M_POINTS))
			return fail(err, errlen, "dimension '%s': %s goes with method \"points\" (points "
			            "per matched pair and max_points, the full score)", d->key, pn[i]);
		if (v && (!json_is_number(v) || dec_from_json(v, pv[i], &places) < 0 || places > 6 ||
		          *pv[i] <= 0 || *pv[i] > (dec6)1000000 * DEC6_ONE))
			return fail(err, errlen, "dimension '%s': %s must be a number in (0, 1000000] with "
			            "at most 6 decimal places", d->key, pn[i]);
	}
	const json_t *f = json_object_get(dim, "fields");
	if (!f)
		return 0;
	if (!json_is_array(f) || json_array_size(f) > 32)
		return fail(err, errlen, "dimension '%s': fields must be an array of at most 32 nested "
		            "primitives", d->key);
	d->fields = xcalloc(json_array_size(f) ? json_array_size(f) : 1, sizeof *d->fields);
	d->fweights = xcalloc(json_array_size(f) ? json_array_size(f) : 1, sizeof *d->fweights);
	for (size_t i = 0; i < json_array_size(f); i++) {
		const json_t *fj = json_array_get(f, i);
		char where[40];
		snprintf(where, sizeof where, "fields[%zu]", i);
		d->nfields = i + 1;
		if (parse_nested(s, fj, where, &d->fields[i], d->key, depth, err, errlen) < 0)
			return -1;
		const json_t *w = json_object_get(fj, "weight");
		d->fweights[i] = DEC6_ONE;
		if (w && parse_fraction(w, &d->fweights[i], true) < 0)
			return fail(err, errlen, "dimension '%s': fields[%zu].weight must be in (0, 1] with at "
			            "most 6 places", d->key, i);
	}
	return 0;
}

/* Primitive parameters; d->prim is set. depth 0: a dimension; > 0: a nested primitive. */
static int parse_params(struct spec *s, const json_t *dim, struct spec_dim *d, int depth,
                        char *err, size_t errlen)
{
	const char *pname = prim_kind_name(d->prim);
	const json_t *v;
	char nb[40], why[200];
	bool nested = depth > 0;
	enum spec_var_source fdef = nested ? SPEC_VAR_ELEMENT : SPEC_VAR_ANSWER;
	enum spec_var_source gdef = nested ? SPEC_VAR_ELEMENT : SPEC_VAR_GROUND_TRUTH;
	unsigned fl = prim_flags(d->prim);
	bool reads = fl & PRIM_F_FIELD, need_f = reads, need_g = fl & PRIM_F_GT;
	if (reads) {
		const json_t *fj = json_object_get(dim, "field"), *sep = json_object_get(dim, "separator");
		if (json_is_array(fj) && parse_join(s, fj, d, nested, err, errlen) < 0)
			return -1;
		if (sep && (!d->njoin || !json_is_string(sep) || json_string_length(sep) > 256))
			return fail(err, errlen, "dimension '%s': separator must be a string of at most 256 "
			            "bytes, and goes with a field given as an array of paths", d->key);
		if (d->njoin)
			d->sep = sep ? xstrndup(json_string_value(sep), json_string_length(sep))
			             : xstrdup(" ");
		const json_t *uw = json_object_get(dim, "unwrap");
		if (uw && (nested || !json_is_string(uw) || !json_string_length(uw) ||
		           jpath_parse(json_string_value(uw), json_string_length(uw), &d->unwrap, why,
		                       sizeof why) < 0))
			return fail(err, errlen, "dimension '%s': unwrap must be a path inside an object "
			            "answer (e.g. \"count\"), on a dimension or a composite's part", d->key);
		if ((!d->njoin &&
		     parse_path_param(dim, "field", d->key, pname, &d->field, &d->field_src,
		                      &d->field_text, fdef, nested || !need_f, s, &d->field_proj,
		                      &d->field_each, err, errlen) < 0) ||
		    parse_path_param(dim, "ground_truth_field", d->key, pname, &d->gt_field, &d->gt_src,
		                     &d->gt_text, gdef, nested || !need_g, s, &d->gt_proj, &d->gt_each,
		                     err, errlen) < 0)
			return -1;
		v = json_object_get(dim, "normalize");
		if (v && norm_parse(v, &d->norm, why, sizeof why) < 0)
			return fail(err, errlen, "dimension '%s': %s", d->key, why);
		if (!v && d->prim == PRIM_TOKEN_OVERLAP)
			d->norm = NORM_NFKC | NORM_CASEFOLD;
	} else if (json_object_get(dim, "normalize")) {
		return fail(err, errlen, "dimension '%s': normalize does not apply to primitive %s "
		            "(it reads no values to compare)", d->key, pname);
	}
	v = json_object_get(dim, "case_insensitive");
	if (v && !json_is_boolean(v))
		return fail(err, errlen, "dimension '%s': case_insensitive must be true or false", d->key);
	d->case_insensitive = json_is_true(v);
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
		v = json_object_get(dim, "relative");
		if (v) {   /* v3: |a − e| ≤ max(tolerance, relative × |e|); tolerance then defaults to 0 */
			if (!json_is_number(v) || dec_num_from_json(v, &d->relative) < 0 || d->relative.m < 0)
				return fail(err, errlen, "dimension '%s': relative must be a number >= 0 (the "
				            "allowed difference as a share of the expected value)", d->key);
			d->has_relative = true;
			if (!json_object_get(dim, "tolerance"))
				d->tolerance = (struct dec_num){ 0, 0 };
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
	case PRIM_SET_OVERLAP: {
		static const char *const names[] = { "jaccard", "intersection", "recall", "precision",
		                                     "f1", NULL };
		static const enum prim_method vals[] = { PRIM_M_JACCARD, PRIM_M_RECALL, PRIM_M_RECALL,
		                                         PRIM_M_PRECISION, PRIM_M_F1 };
		if (parse_method(dim, d, PRIM_M_JACCARD, names, vals, err, errlen) < 0)
			return -1;
		d->jaccard = d->method == PRIM_M_JACCARD;
		break;
	}
	case PRIM_TOKEN_OVERLAP: {
		static const char *const names[] = { "recall", "precision", "f1", "jaccard", NULL };
		static const enum prim_method vals[] = { PRIM_M_RECALL, PRIM_M_PRECISION, PRIM_M_F1,
		                                         PRIM_M_JACCARD };
		return parse_method(dim, d, PRIM_M_RECALL, names, vals, err, errlen);
	}
	case PRIM_TEXT_LENGTH:
		v = json_object_get(dim, "unit");
		if (v && (!json_is_string(v) || (strcmp(json_string_value(v), "chars") &&
		                                 strcmp(json_string_value(v), "words") &&
		                                 strcmp(json_string_value(v), "lines"))))
			return fail(err, errlen, "dimension '%s': unit must be \"chars\", \"words\" or "
			            "\"lines\"", d->key);
		d->words = v && !strcmp(json_string_value(v), "words");
		d->lines = v && !strcmp(json_string_value(v), "lines");
		return parse_ramp(dim, d, err, errlen);
	case PRIM_COUNT: {
		static const char *const of[] = { "length", "distinct", "unique_ratio", "present" };
		v = json_object_get(dim, "of");
		d->count_of = SPEC_C_LENGTH;
		if (v) {
			size_t k = 0;
			while (k < 4 && !(json_is_string(v) && !strcmp(json_string_value(v), of[k])))
				k++;
			if (k == 4)
				return fail(err, errlen, "dimension '%s': of must be \"length\", \"distinct\", "
				            "\"unique_ratio\" or \"present\"", d->key);
			d->count_of = (enum spec_count)k;
		}
		if (d->count_of == SPEC_C_PRESENT) {
			d->present_keys = json_object_get(dim, "keys");
			bool okk = json_is_array(d->present_keys) && json_array_size(d->present_keys) > 0;
			for (size_t i = 0; okk && i < json_array_size(d->present_keys); i++)
				okk = json_is_string(json_array_get(d->present_keys, i));
			if (!okk)
				return fail(err, errlen, "dimension '%s': of \"present\" needs keys, a non-empty "
				            "array of key names", d->key);
		}
		if (d->count_of == SPEC_C_UNIQUE_RATIO) {
			if (json_object_get(dim, "ramp") || json_object_get(dim, "steps") ||
			    json_object_get(dim, "target"))
				return fail(err, errlen, "dimension '%s': of \"unique_ratio\" is already a fraction "
				            "(no ramp, steps or target)", d->key);
			return 0;
		}
		return parse_ramp(dim, d, err, errlen);
	}
	case PRIM_REGEX_MATCH:
		v = json_object_get(dim, "pattern");
		if (!json_is_string(v))
			return fail(err, errlen, "dimension '%s': primitive regex_match needs pattern (a "
			            "string)", d->key);
		if (rx_compile(json_string_value(v), json_string_length(v),
		               d->case_insensitive || (d->norm & NORM_CASEFOLD), &d->rx, why, sizeof why) < 0)
			return fail(err, errlen, "dimension '%s': pattern '%.80s' is invalid: %s", d->key,
			            json_string_value(v), why);
		break;
	case PRIM_TERM_COVERAGE: {
		const json_t *t = json_object_get(dim, "terms");
		v = json_object_get(dim, "terms_from");
		if (v && (!json_is_string(v) || (strcmp(json_string_value(v), "items") &&
		                                 strcmp(json_string_value(v), "words"))))
			return fail(err, errlen, "dimension '%s': terms_from must be \"items\" (the ground "
			            "truth's strings) or \"words\" (the words of a ground-truth string)", d->key);
		d->words_terms = v && !strcmp(json_string_value(v), "words");
		if (v && t)
			return fail(err, errlen, "dimension '%s': terms_from applies to ground_truth_field, "
			            "not to terms", d->key);
		if (!t && !d->gt_field && !d->gt_text)
			return fail(err, errlen, "dimension '%s': primitive term_coverage needs terms or "
			            "ground_truth_field", d->key);
		if (t && (d->gt_text))
			return fail(err, errlen, "dimension '%s': term_coverage takes terms or "
			            "ground_truth_field, not both", d->key);
		if (t && (!json_is_array(t) || json_array_size(t) == 0 || json_array_size(t) > 1000))
			return fail(err, errlen, "dimension '%s': terms must be an array of 1 to 1000 terms",
			            d->key);
		d->nterms = t ? json_array_size(t) : 0;
		d->terms = xcalloc(d->nterms ? d->nterms : 1, sizeof *d->terms);
		for (size_t i = 0; i < d->nterms; i++)
			if (parse_term(json_array_get(t, i), d, i, err, errlen) < 0)
				return -1;
		v = json_object_get(dim, "need");
		if (v && (!as_count(v, &d->need) || d->need == 0))
			return fail(err, errlen, "dimension '%s': need must be a positive integer", d->key);
		break;
	}
	case PRIM_MATCH_OBJECTS:
		return parse_match_objects(s, dim, d, depth, err, errlen);
	case PRIM_KEYED_MAP:
		v = json_object_get(dim, "keys");
		if (v) {
			bool okk = json_is_array(v) && json_array_size(v) > 0;
			for (size_t i = 0; okk && i < json_array_size(v); i++)
				okk = json_is_string(json_array_get(v, i));
			if (!okk)
				return fail(err, errlen, "dimension '%s': keys must be a non-empty array of key "
				            "names", d->key);
			d->keys = (json_t *)v;
		}
		if (parse_rkey(dim, "field_key", d, &d->fkey, err, errlen) < 0 ||
		    parse_rkey(dim, "ground_truth_key", d, &d->gkey, err, errlen) < 0)
			return -1;
		d->item = xcalloc(1, sizeof *d->item);
		return parse_nested(s, json_object_get(dim, "item"), "item", d->item, d->key, depth, err,
		                    errlen);
	case PRIM_EXPRESSION:
		return parse_expression(s, dim, d, err, errlen);
	case PRIM_TEXT_CONTAINS: {
		static const char *const dn[] = { "either", "answer_in_truth", "truth_in_answer" };
		v = json_object_get(dim, "direction");
		d->contains = SPEC_IN_EITHER;
		if (v) {
			int k = 0;
			while (k < 3 && !(json_is_string(v) && !strcmp(json_string_value(v), dn[k])))
				k++;
			if (k == 3)
				return fail(err, errlen, "dimension '%s': direction must be \"either\", "
				            "\"answer_in_truth\" or \"truth_in_answer\"", d->key);
			d->contains = (enum spec_contains)k;
		}
		static const char *const cn[] = { "equal_credit", "contains_credit" };
		dec6 *cv[] = { &d->equal_credit, &d->contains_credit };
		for (int k = 0; k < 2; k++) {
			*cv[k] = DEC6_ONE;
			v = json_object_get(dim, cn[k]);
			if (v && parse_fraction(v, cv[k], false) < 0)
				return fail(err, errlen, "dimension '%s': %s must be a fraction in [0, 1] with at "
				            "most 6 places", d->key, cn[k]);
		}
		break;
	}
	case PRIM_NONE: case PRIM_EXACT_MATCH_RATIO: case PRIM_FUZZY_STRING:
	case PRIM_COVERAGE_RATIO: case PRIM_TOKEN_EFFICIENCY: case PRIM_CALL_EFFICIENCY:
		break;   /* no parameters besides the common ones */
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
		return fail(err, errlen, "dimensions[%zu]: key is required (or name, the seed's form)", i);
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

	const json_t *w = json_object_get(dim, "weight"), *h = json_object_get(dim, "helper");
	int places;
	if (h && !json_is_boolean(h))
		return fail(err, errlen, "dimension '%s': helper must be true or false", d->key);
	d->helper = json_is_true(h);
	if (d->helper && (!w || (json_is_number(w) && json_number_value(w) == 0))) {
		d->weight = 0;   /* counts nothing in the total (common/README.md "Helper dimensions") */
	} else if (d->helper) {
		return fail(err, errlen, "dimension '%s': a helper dimension counts nothing in the total: "
		            "its weight must be 0 or absent", d->key);
	} else if (!w) {
		return fail(err, errlen, "dimension '%s': weight is required", d->key);
	}
	if (!d->helper) {   /* a weight in (0, 1] */
		if (!json_is_number(w))
			return fail(err, errlen, "dimension '%s': weight must be a number, not %s", d->key,
			            jcanon_type_name(w));
		num_text(w, nb, sizeof nb);
		int rc = dec_from_json(w, &d->weight, &places);
		if (places > 6)
			return fail(err, errlen, "dimension '%s': weight %s has more than 6 decimal places",
			            d->key, nb);
		if (rc < 0 || d->weight <= 0 || d->weight > DEC6_ONE)
			return fail(err, errlen, "dimension '%s': weight %s is not in (0, 1]%s", d->key, nb,
			            rc == 0 && d->weight == 0 ? " (a dimension that counts nothing is "
			            "\"helper\": true)" : "");
	}

	const json_t *p = json_object_get(dim, "primitive");
	static const char *const own[] = { "key", "name", "weight", "primitive", "gate", "judge",
	                                   "helper", "full_score", NULL };
	char in[80];
	snprintf(in, sizeof in, "dimension '%s'", d->key);
	if (p) {
		if (!json_is_string(p))
			return fail(err, errlen, "dimension '%s': primitive must be a string, not %s", d->key,
			            jcanon_type_name(p));
		if (prim_kind_from_name(json_string_value(p), &d->prim) < 0)
			return fail(err, errlen, "dimension '%s': unknown primitive '%.64s'", d->key,
			            json_string_value(p));
	}
	if (!p && !rubric_dim_is_judge(dim) && (s->ev == SPEC_DETERMINISTIC || s->ev == SPEC_JUDGE))
		return fail(err, errlen, "dimension '%s': primitive is required (evaluator %s)",
		            d->key, spec_evaluator_name(s->ev));
	if (check_keys(dim, in, (int)d->prim, own, prim_params(d->prim), NULL, err, errlen) < 0)
		return -1;
	const json_t *pt = json_object_get(dim, "full_score");
	if (pt && d->prim != PRIM_EXPRESSION)
		return fail(err, errlen, "dimension '%s': full_score applies to primitive expression "
		            "only (its value is exact, so it is rounded once)", d->key);
	if (pt && (!as_count(pt, &d->full_points) || d->full_points < 1 ||
	           d->full_points > SPEC_MAX_POINTS))
		return fail(err, errlen, "dimension '%s': full_score must be an integer from 1 to %d "
		            "(the dimension's raw maximum)", d->key, SPEC_MAX_POINTS);
	if (p) {
		if (parse_params(s, dim, d, 0, err, errlen) < 0)
			return -1;
	} else {
		d->external = rubric_dim_is_judge(dim);   /* scored by the LLM judge (rubric.h) */
	}

	const json_t *g = json_object_get(dim, "gate");
	if (g) {
		if (!json_is_object(g))
			return fail(err, errlen, "dimension '%s': gate must be an object, not %s", d->key,
			            jcanon_type_name(g));
		static const char *const gk[] = { "dimension", "above", "expr", NULL };
		snprintf(in, sizeof in, "dimension '%s' gate", d->key);
		if (check_keys(g, in, -1, gk, NULL, NULL, err, errlen) < 0)
			return -1;
		if (json_object_get(g, "expr")) {
			if (json_object_get(g, "dimension") || json_object_get(g, "above"))
				return fail(err, errlen, "dimension '%s': gate takes either expr or dimension and "
				            "above, not both", d->key);
			if (!json_is_string(json_object_get(g, "expr")))
				return fail(err, errlen, "dimension '%s': gate.expr must be a string", d->key);
			d->has_gate = true;
			gate_targets[i] = (json_t *)g;
			return 0;
		}
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

/* A gate expression over the other dimensions' final scores (0..1000). */
static int parse_gate_expr(struct spec *s, size_t i, const json_t *g, char *err, size_t errlen)
{
	struct spec_dim *d = &s->dims[i];
	const char *names[SPEC_MAX_DIMS];
	char why[200];
	for (size_t k = 0; k < s->ndims; k++)
		names[k] = k == i ? NULL : s->dims[k].key;   /* a dimension cannot gate on itself */
	const json_t *src = json_object_get(g, "expr");
	if (expr_parse(json_string_value(src), names, s->ndims, &d->gate_expr, why, sizeof why) < 0)
		return fail(err, errlen, "dimension '%s': gate expression '%.100s' does not parse: %s "
		            "(its variables are the other dimensions' keys)", d->key,
		            json_string_value(src), why);
	for (size_t k = 0; k < s->ndims; k++)
		if (expr_var_use(d->gate_expr, k))
			d->gate_deps |= 1u << k;
	if (d->gate_deps == 0)
		return fail(err, errlen, "dimension '%s': gate expression names no dimension", d->key);
	return 0;
}

/* A composite's {"dimension": key} vars: the key must name another dimension; each becomes a
 * dependency (ref_deps) for the topological order. */
static int find_dim(const struct spec *s, const char *key);

static int resolve_refs(struct spec *s, char *err, size_t errlen)
{
	for (size_t i = 0; i < s->ndims; i++) {
		struct spec_dim *d = &s->dims[i];
		for (size_t k = 0; k < d->nvars; k++) {
			struct spec_var *v = &d->vars[k];
			if (v->dim != -2)
				continue;
			int t = find_dim(s, v->text);
			if (t < 0)
				return fail(err, errlen, "dimension '%s': vars.%.64s reads dimension '%.64s', "
				            "which does not exist", d->key, v->name, v->text);
			if ((size_t)t == i)
				return fail(err, errlen, "dimension '%s': vars.%.64s reads the dimension itself",
				            d->key, v->name);
			v->dim = t;
			d->ref_deps |= 1u << t;
		}
	}
	return 0;
}

/* Depth-first topological sort over gate dependencies and composite references; reports the
 * first cycle found. */
static int topo_visit(struct spec *s, size_t c, int *state, size_t *chain, size_t len, size_t *n,
                      char *err, size_t errlen)
{
	if (state[c] == 2)
		return 0;
	if (state[c] == 1) {
		char msg[600] = "";
		size_t start = 0, off = 0;
		while (chain[start] != c)
			start++;
		for (size_t k = start; k < len; k++)
			off += (size_t)snprintf(msg + off, sizeof msg - off, "%s -> ", s->dims[chain[k]].key);
		snprintf(msg + off, sizeof msg - off, "%s", s->dims[c].key);
		bool refs = false;
		for (size_t k = 0; k < s->ndims; k++)
			refs |= s->dims[k].ref_deps != 0;
		return fail(err, errlen, "dimension '%s': %s form a cycle: %s", s->dims[c].key,
		            refs ? "gates and composite references" : "gates", msg);
	}
	state[c] = 1;
	chain[len] = c;
	const struct spec_dim *d = &s->dims[c];
	uint32_t deps = (d->gate_expr ? d->gate_deps : d->has_gate ? 1u << d->gate_dim : 0) |
	                d->ref_deps;
	for (size_t k = 0; k < s->ndims; k++)
		if ((deps & (1u << k)) && topo_visit(s, k, state, chain, len + 1, n, err, errlen) < 0)
			return -1;
	state[c] = 2;
	s->order[(*n)++] = c;
	return 0;
}

static int topo(struct spec *s, char *err, size_t errlen)
{
	int state[SPEC_MAX_DIMS] = { 0 };   /* 0 new, 1 on stack, 2 done */
	size_t chain[SPEC_MAX_DIMS + 1], n = 0;
	for (size_t r = 0; r < s->ndims; r++)
		if (topo_visit(s, r, state, chain, 0, &n, err, errlen) < 0)
			return -1;
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
	static const char *const tk[] = { "win", "draw", NULL };
	if (check_keys(t, "thresholds", -1, tk, NULL, NULL, err, errlen) < 0)
		return -1;
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
	static const char *const names[4] = { "token_budget", "max_llm_calls", "max_tool_calls",
	                                      NULL };
	bool *has[3] = { &s->has_budget, &s->has_llm, &s->has_tool };
	int64_t *val[3] = { &s->budget, &s->llm, &s->tool };
	if (!c)
		return 0;
	if (!json_is_object(c))
		return fail(err, errlen, "constraints must be an object, not %s", jcanon_type_name(c));
	if (check_keys(c, "constraints", -1, names, NULL, NULL, err, errlen) < 0)
		return -1;
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
	static const char *const tsk[] = { "language", "cases", "compare", "limits", "dimension",
	                                   NULL };
	static const char *const ck[] = { "name", "stdin", "expected_stdout", "weight", NULL };
	if (check_keys(ts, "test_suite", -1, tsk, NULL, NULL, err, errlen) < 0)
		return -1;
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
		char in[48];
		snprintf(in, sizeof in, "test_suite.cases[%zu]", i);
		if (check_keys(c, in, -1, ck, NULL, NULL, err, errlen) < 0)
			return -1;
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
		dec6 cw;
		if (v && !(json_is_number(v) && dec_from_json(v, &cw, NULL) == 0 &&
		           cw >= SPEC_CASE_WEIGHT_MIN && cw <= SPEC_CASE_WEIGHT_MAX))
			return fail(err, errlen, "test_suite.cases[%zu]: weight must be a number from "
			            "0.000001 to 1000000 with at most 6 decimal places", i);
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
		                                  "output_kb", NULL };
		if (check_keys(lim, "test_suite.limits", -1, ln, NULL, NULL, err, errlen) < 0)
			return -1;
		for (size_t i = 0; ln[i]; i++) {
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
	if (s->dims[di].full_points)
		return fail(err, errlen, "dimension '%s': full_score does not apply to the dimension the "
		            "tests score (0..1000)", s->dims[di].key);
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
	static const char *const sk[] = { "language", "source", "timeout_ms", NULL };
	if (check_keys(sc, "script", -1, sk, NULL, NULL, err, errlen) < 0)
		return -1;
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

/* evaluator container: "image" (a digest: whether the store has it is the worker's
 * question) and the optional "container" object of worker/README.md "Container evaluator". */
static int parse_container(struct spec *s, const json_t *root, char *err, size_t errlen)
{
	const json_t *im = json_object_get(root, "image");
	const char *d = json_string_value(im);
	bool ok = d && strlen(d) == 71 && !strncmp(d, "sha256:", 7);
	for (size_t i = 7; ok && i < 71; i++)
		ok = (d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f');
	if (!ok)
		return fail(err, errlen, "evaluator container needs image: \"sha256:<64 lowercase hex "
		            "digits>\" (the digest `arbiter image import` printed)");
	const json_t *c = json_object_get(root, "container");
	if (c) {
		if (!json_is_object(c))
			return fail(err, errlen, "container must be an object, not %s", jcanon_type_name(c));
		static const char *const ck[] = { "cmd", "env", "timeout_ms", "memory_mb", "pids",
		                                  "output_mb", NULL };
		if (check_keys(c, "container", -1, ck, NULL, NULL, err, errlen) < 0)
			return -1;
		const json_t *cmd = json_object_get(c, "cmd");
		if (cmd) {
			if (!json_is_array(cmd) || json_array_size(cmd) < 1 || json_array_size(cmd) > 64)
				return fail(err, errlen, "container.cmd must be an array of 1 to 64 strings");
			for (size_t i = 0; i < json_array_size(cmd); i++) {
				const json_t *a = json_array_get(cmd, i);
				if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a) ||
				    json_string_length(a) > 4096)
					return fail(err, errlen, "container.cmd[%zu] must be a string (at most 4096 "
					            "bytes, no NUL)", i);
			}
		}
		const json_t *env = json_object_get(c, "env");
		if (env) {
			if (!json_is_object(env) || json_object_size(env) > 64)
				return fail(err, errlen, "container.env must be an object of at most 64 strings");
			const char *k;
			const json_t *v;
			json_object_foreach((json_t *)env, k, v) {
				bool kok = (*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_';
				for (const char *p = k; kok && *p; p++)
					kok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
					      (*p >= '0' && *p <= '9');
				if (!kok || strlen(k) > 128)
					return fail(err, errlen, "container.env: '%.64s' is not a variable name", k);
				if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
				    json_string_length(v) > 4096)
					return fail(err, errlen, "container.env.%s must be a string (at most 4096 "
					            "bytes, no NUL)", k);
			}
		}
		static const char *const nk[] = { "timeout_ms", "memory_mb", "pids", "output_mb", NULL };
		for (size_t i = 0; nk[i]; i++) {
			const json_t *v = json_object_get(c, nk[i]);
			if (v && !pos_int(v))
				return fail(err, errlen, "container.%s must be a positive integer", nk[i]);
		}
	}
	for (size_t i = 0; i < s->ndims; i++)
		if (s->dims[i].prim == PRIM_NONE)
			s->dims[i].external = true;
	return 0;
}

/* The scoring-primitives seed's published form (common/README.md "The seed's spec form"): `type` names
 * the evaluator and a dimension's `name` is its key. When root uses either, *out gets a copy in
 * the documented form (`evaluator`, `key`; the caller frees it), else NULL. A dimension with
 * both keeps its `key` (`name` is then a label, as in the rubric form); `type` beside
 * `evaluator` must name the same evaluator. Returns 0, or -1 with a message. */
static int seed_alias_expand(const json_t *root, json_t **out, char *err, size_t errlen)
{
	*out = NULL;
	const json_t *type = json_object_get(root, "type"), *ev = json_object_get(root, "evaluator");
	const json_t *dims = json_object_get(root, "dimensions");
	bool named = false;
	for (size_t i = 0; i < json_array_size(dims); i++) {
		const json_t *d = json_array_get(dims, i);
		named |= json_is_object(d) && json_object_get(d, "name") && !json_object_get(d, "key");
	}
	if (type && !json_is_string(type))
		return fail(err, errlen, "type must be a string (the evaluator), not %s",
		            jcanon_type_name(type));
	if (type && ev && !json_equal((json_t *)type, (json_t *)ev))
		return fail(err, errlen, "type '%.64s' and evaluator disagree (type is the seed's name "
		            "for evaluator: give one of them)", json_string_value(type));
	if (!(type && !ev) && !named)
		return 0;
	json_t *res = json_copy((json_t *)root);
	if (type && !ev)
		json_object_set(res, "evaluator", (json_t *)type);
	if (named) {
		json_t *nd = json_array();
		for (size_t i = 0; i < json_array_size(dims); i++) {
			json_t *d = json_array_get(dims, i);
			if (json_is_object(d) && json_object_get(d, "name") && !json_object_get(d, "key")) {
				d = json_copy(d);
				json_object_set(d, "key", json_object_get(d, "name"));
				json_array_append_new(nd, d);
			} else {
				json_array_append(nd, d);
			}
		}
		json_object_set_new(res, "dimensions", nd);
	}
	*out = res;
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
	/* The seed's rubric form (rubric.h), then its published aliases ("type", "name"): each
	 * is rewritten into the documented form and parsed as that. */
	json_t *expanded = NULL;
	if (rubric_expand(root, &expanded, err, errlen) < 0)
		goto bad;
	if (!expanded && seed_alias_expand(root, &expanded, err, errlen) < 0)
		goto bad;
	if (expanded) {
		spec_free(s);
		int rc = spec_from_json(expanded, out, err, errlen);
		json_decref(expanded);
		return rc;
	}

	/* The rubric form's keys (rubric.h) are known here so they can be hinted at; when they
	 * are present the spec was expanded above, so only these two can remain. */
	static const char *const rk[] = { "evaluator", "type", "dimensions", "thresholds",
	                                  "constraints", "total", "test_suite", "script", "judge",
	                                  "mode", "rubric", "test_weight", "llm_weight", "image",
	                                  "container", NULL };
	if (check_keys(root, "the spec", -1, rk, NULL, NULL, err, errlen) < 0)
		goto bad;
	if (json_object_get(root, "test_weight") || json_object_get(root, "llm_weight")) {
		fail(err, errlen, "test_weight and llm_weight belong to mode hybrid only");
		goto bad;
	}
	const json_t *ev = json_object_get(root, "evaluator");
	if (!ev) {
		fail(err, errlen, "evaluator is required (deterministic, test-suite, custom-script, judge or "
		     "container)");
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
	} else if (!strcmp(evs, "container")) {
		s->ev = SPEC_CONTAINER;
	} else {
		if (json_is_string(ev))
			fail(err, errlen, "evaluator '%.64s' is not one of deterministic, test-suite, "
			     "custom-script, judge, container", evs);
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
		fail(err, errlen, "dimensions must have 1 to %d entries (has %zu)", SPEC_MAX_DIMS, nd);
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
		if (json_is_object(gate_targets[i])) {
			if (parse_gate_expr(s, i, gate_targets[i], err, errlen) < 0)
				goto bad;
			continue;
		}
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
	if (resolve_refs(s, err, errlen) < 0 || topo(s, err, errlen) < 0)
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
	const json_t *tr = json_object_get(root, "total");
	if (tr) {
		if (!json_is_string(tr) || (strcmp(json_string_value(tr), "floor") &&
		                            strcmp(json_string_value(tr), "round_each"))) {
			fail(err, errlen, "total must be \"floor\" (floor of the exact sum, the default) or "
			     "\"round_each\" (each weighted value rounded half up, then summed)");
			goto bad;
		}
		s->round_each = !strcmp(json_string_value(tr), "round_each");
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
	if (s->ev == SPEC_CONTAINER && parse_container(s, root, err, errlen) < 0)
		goto bad;
	if (s->ev != SPEC_CONTAINER && (json_object_get(root, "image") || json_object_get(root, "container"))) {
		fail(err, errlen, "image and container belong to evaluator container only");
		goto bad;
	}
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
	case SPEC_CONTAINER: return "container";
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

bool spec_round_each(const struct spec *s)
{
	return s->round_each;
}

bool spec_uses_match(const struct spec *s)
{
	return s->uses_match;
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
