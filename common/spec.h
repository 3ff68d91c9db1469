/*
 * Scoring specs (common/README.md "Scoring spec"): parsing and validation of every rule, into an
 * immutable `struct spec` that is safe to share between evaluations and cache.
 * Validation messages name the dimension and the rule, e.g.
 * "dimension 'speed': weight 0.1234567 has more than 6 decimal places";
 * malformed JSON gives "line L, column C: <jansson message>". A key arbiter does not read is
 * refused with the nearest known one as a hint ("unknown key 'normalise' in dimension 'x' (did
 * you mean 'normalize'?)"); keys starting with "x-" are authors' notes. The seed's form
 * ("type" for evaluator, a dimension's "name" for its key) is accepted. Pure: no I/O.
 */
#ifndef ARBITER_SPEC_H
#define ARBITER_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dec.h"
#include "prim.h"

struct rx;
struct expr;

/* The range of a test case's weight, in micro-units (0.000001 .. 1000000, at most 6 decimal
 * places): every weight is exact and the suite's total cannot overflow. */
#define SPEC_CASE_WEIGHT_MIN 1
#define SPEC_CASE_WEIGHT_MAX (1000000LL * 1000000LL)

/* Dimensions per spec (common/README.md "Rules"); gate and reference sets are bit masks of
 * this many bits. */
#define SPEC_MAX_DIMS 32
/* The largest raw scale a dimension may declare ("full_score", common/README.md "Points above 1000"). */
#define SPEC_MAX_POINTS 1000000
/* Nested primitives one composite expression may read ("Composite dimensions"). */
#define SPEC_MAX_PARTS 64

enum spec_evaluator { SPEC_DETERMINISTIC, SPEC_TEST_SUITE, SPEC_CUSTOM_SCRIPT, SPEC_JUDGE,
                      SPEC_CONTAINER };
struct spec;   /* immutable after spec_parse; safe to share and cache */

/* Parses and validates (every rule of common/README.md "Scoring spec"). On failure returns -1 and writes a message
 * naming the dimension and the rule (or "line L, column C: ..." for malformed JSON) into err.
 * On success returns 0 and *out (free with spec_free). */
int spec_parse(const char *text, size_t len, struct spec **out, char *err, size_t errlen);
/* Same from a parsed document (borrowed; the spec keeps its own reference). */
int spec_from_json(const json_t *spec, struct spec **out, char *err, size_t errlen);
void spec_free(struct spec *s);                       /* NULL ok */
enum spec_evaluator spec_evaluator(const struct spec *s);
/* "deterministic", "test-suite", "custom-script", "judge" or "container". */
const char *spec_evaluator_name(enum spec_evaluator e);
const json_t *spec_json(const struct spec *s);
/* The LLM-judge criteria and settings (common/rubric.h), or NULL when no dimension is judged:
 * evaluator judge, or test-suite with judge dimensions (hybrid). Borrowed. */
const struct rubric *spec_rubric(const struct spec *s);       /* the whole spec (borrowed): test_suite, script */
size_t spec_ndims(const struct spec *s);
const char *spec_dim_key(const struct spec *s, size_t i);
bool spec_dim_external(const struct spec *s, size_t i); /* scored by test-suite/script, not a primitive */

/* Read-only view of a validated dimension (for score.c and tests). */
/* Where a path points (common/README.md "Path roots"): `@answer.x` (the default for `field`), `@metadata.x`,
 * `@match.x` (elapsed_ms, elapsed_secs, time_limit_secs, attempt_number, memoryless, verified)
 * and `@ground_truth.x` (the default for `ground_truth_field`). Expression vars also keep the
 * older `metadata.x` / `ground_truth.x` prefixes. */
enum spec_var_source { SPEC_VAR_ANSWER, SPEC_VAR_METADATA, SPEC_VAR_GROUND_TRUTH, SPEC_VAR_MATCH,
                       SPEC_VAR_ELEMENT /* nested primitives: the element being scored */ };
struct spec_var {
	char *name;                  /* expression variable name */
	enum spec_var_source src;    /* root document */
	struct jpath *path;          /* path inside that document (root removed); NULL: the root */
	char *text;                  /* the path as written in the spec */
	bool has_default; double def;   /* {"path": ..., "default": N}: used when missing */
	bool len_only;               /* used only inside len(): need not be a number */
	/* Composite dimensions (common/README.md "Composite dimensions"): a var is either a path
	 * (above), a nested primitive scored like a dimension (part, owned; it reads the exact
	 * fraction its score rounds, or score ÷ 1000 when that fraction is binary), or another
	 * dimension's final score ÷ its scale (dim ≥ 0). */
	struct spec_dim *part;       /* {"primitive": ...}, or NULL */
	int dim;                     /* {"dimension": key}: that dimension's index, else -1 */
	struct spec_scan *scan;      /* {"path", "where", "reduce", ...} over an array, or NULL */
	/* v3 (common/README.md "Polymorphic values and type tests"): unwrap, when the value is an
	 * object, reads this path inside it ({"count": n} as n); types, when not 0, makes the var
	 * 1 when the value's JSON type is one of these bits (1u << json_type), else 0. */
	struct jpath *unwrap;
	unsigned types;
};
/* Filter and scan (common/README.md "Filter and scan"): which elements of an array a var
 * keeps, and the number it reduces them to. */
enum spec_reduce { SPEC_R_COUNT, SPEC_R_SUM, SPEC_R_MIN, SPEC_R_MAX, SPEC_R_NEW_BEST,
                   SPEC_R_SORTED, SPEC_R_IN_ORDER };
struct spec_where {
	struct jpath *field;         /* inside the element; NULL: the element itself */
	const json_t *equals;        /* literal (borrowed from the spec's JSON), or NULL */
	const json_t *in;            /* array of literals (borrowed), or NULL */
	struct jpath *eq_path; enum spec_var_source eq_src; char *eq_text;  /* equals_path */
	int type;                    /* json_type to match (JSON_INTEGER: any number), or -1 */
	bool negate;                 /* "not": true */
};
struct spec_scan {
	size_t nwhere; struct spec_where *where;   /* all must hold */
	enum spec_reduce reduce;
	struct jpath *of;            /* the number inside each kept element; NULL: the element */
	bool descending;             /* order "descending": new_best counts new minimums */
};
/* count: what is counted. */
enum spec_count { SPEC_C_LENGTH, SPEC_C_DISTINCT, SPEC_C_UNIQUE_RATIO, SPEC_C_PRESENT };
/* A term built from a value the spec points at (term_coverage `{"ground_truth": P, "prefix",
 * "suffix"}`): prefix + the value's text + suffix, normalised at evaluation. */
struct spec_tref { enum spec_var_source src; struct jpath *path; char *text, *prefix, *suffix; };
/* One term: any of its alternatives; each is a literal (lit), a regex (rx) or a reference (ref). */
struct spec_term { size_t nalt; char **lit; size_t *litlen; struct rx **rx; struct spec_tref **ref;
                   bool neg;   /* {"not": ...}: the term counts when none of its alternatives occurs */ };
/* A key built from a record (keyed_map field_key / ground_truth_key, match_objects match_on
 * as an object): prefix + the text of the value at path + suffix. path NULL: prefix and suffix
 * only (match_objects keeps its match_on paths). */
struct spec_rkey { struct jpath *path; char *prefix, *suffix; };
/* text_contains: which text must lie inside which. */
enum spec_contains { SPEC_IN_EITHER, SPEC_IN_TRUTH /* answer inside truth */,
                     SPEC_IN_ANSWER /* truth inside answer */ };
struct spec_dim {
	char key[33];
	dec6 weight;
	enum prim_kind prim;         /* PRIM_NONE when external */
	bool external;               /* scored by the test-suite (its `dimension`) or the script */
	struct jpath *field, *gt_field;          /* primitives that read fields (NULL: the root) */
	enum spec_var_source field_src, gt_src;  /* their roots */
	char *field_text, *gt_text;              /* as written (NULL when absent) */
	/* v3 (common/README.md "Projection and joined fields"), a dimension's or a part's only:
	 * a path with [*] reads the array at field / gt_field and projects each element through
	 * field_each / gt_each (NULL: the element); a field given as an array of paths is njoin
	 * texts joined with sep (field then NULL, field_text the first path). */
	bool field_proj, gt_proj;
	struct jpath *field_each, *gt_each;
	size_t njoin; struct jpath **join; enum spec_var_source *join_src; char **join_text;
	char *sep;
	struct jpath *unwrap;   /* v3: the answer value, when an object, is read at this path */
	bool case_insensitive;                   /* exact_match; regexes of regex_match/terms */
	struct dec_num tolerance; bool linear;   /* numeric_tolerance (default 0.01, none) */
	bool has_relative; struct dec_num relative;   /* numeric_tolerance: allowance r × |truth| */
	bool has_time_limit; struct dec_num time_limit_secs; double curve;  /* time_decay */
	bool jaccard;                            /* set_overlap (default true) */
	enum prim_method method;                   /* set_overlap, token_overlap, match_objects */
	unsigned norm;                           /* normalize steps (norm.h) */
	struct expr *expr; size_t nvars; struct spec_var *vars;  /* expression */
	double scale;                            /* expression: result ÷ scale (default 1) */
	bool null_missing;                       /* expression: a var holding null is missing */
	bool words;                              /* text_length: unit words (else code points) */
	bool lines;                              /* text_length: unit lines (non-blank ones) */
	enum spec_count count_of; json_t *present_keys;   /* count (present_keys borrowed) */
	size_t npoints; struct prim_point *points; bool steps;  /* text_length, count */
	size_t nterms; struct spec_term *terms; int64_t need;   /* term_coverage (need 0: all) */
	struct rx *rx;                           /* regex_match */
	size_t nkeys; struct jpath **match_on;   /* match_objects */
	size_t nfields; struct spec_dim *fields; dec6 *fweights;   /* match_objects pair fields */
	struct spec_dim *item; json_t *keys;     /* keyed_map nested primitive, listed keys */
	struct spec_rkey *fkey, *gkey;           /* keyed_map: a records side's key (NULL: object) */
	bool f_keyed, g_keyed;                   /* match_objects: that side is {key: element} */
	struct spec_rkey *okey;                  /* match_objects: match_on's prefix and suffix */
	dec6 pair_points, max_points;            /* match_objects method points (v3) */
	struct jpath *distinct_of;               /* match_objects method distinct (v3), or NULL */
	enum spec_contains contains;             /* text_contains direction (default either) */
	dec6 equal_credit, contains_credit;      /* text_contains credits (default 1 and 1) */
	bool words_terms;                        /* term_coverage terms_from "words" */
	bool has_gate; size_t gate_dim; double gate_above;
	struct expr *gate_expr; uint32_t gate_deps;   /* gate {"expr": ...} over dimension keys */
	uint32_t ref_deps;           /* dimensions an expression's {"dimension": k} vars read */
	bool helper;                 /* "helper": true: weight 0, counts nothing in the total */
	int64_t full_points;         /* expression "points": score 0..full_points; 0: 0..1000 */
};
_Static_assert(SPEC_MAX_DIMS <= 32, "gate_deps and ref_deps are 32-bit masks");
/* A dimension's full score: its points, or 1000. */
static inline int64_t spec_dim_scale(const struct spec_dim *d)
{
	return d->full_points ? d->full_points : 1000;
}
const struct spec_dim *spec_dim(const struct spec *s, size_t i);
/* Dimension indexes in an order where every gate target, and every dimension a composite
 * reads, comes before the dimensions that depend on it. */
const size_t *spec_topo_order(const struct spec *s);
/* The total rule: false (default) floor(min(1000, Σ weighted)); true ("total": "round_each")
 * each weighted value rounded half up, then summed, capped at 1000. */
bool spec_round_each(const struct spec *s);
/* True when some path or variable reads the @match document. */
bool spec_uses_match(const struct spec *s);
/* Thresholds (defaults win 700, draw 400). */
double spec_win(const struct spec *s);
double spec_draw(const struct spec *s);
/* Constraints: returns true and *v when constraints.<name> is set ("token_budget",
 * "max_llm_calls", "max_tool_calls"). */
bool spec_constraint(const struct spec *s, const char *name, int64_t *v);

#endif
