/*
 * Scoring specs (CONTRACT §3): parsing and validation of every rule, into an
 * immutable `struct spec` that is safe to share between evaluations and cache.
 * Validation messages name the dimension and the rule, e.g.
 * "dimension 'speed': weight 0.1234567 has more than 6 decimal places";
 * malformed JSON gives "line L, column C: <jansson message>". Pure: no I/O.
 */
#ifndef ARBITER_SPEC_H
#define ARBITER_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dec.h"
#include "prim.h"

#define SPEC_MAX_DIMS 16

enum spec_evaluator { SPEC_DETERMINISTIC, SPEC_TEST_SUITE, SPEC_CUSTOM_SCRIPT, SPEC_JUDGE };
struct spec;   /* immutable after spec_parse; safe to share and cache */

/* Parses and validates (every rule of CONTRACT §3). On failure returns -1 and writes a message
 * naming the dimension and the rule (or "line L, column C: ..." for malformed JSON) into err.
 * On success returns 0 and *out (free with spec_free). */
int spec_parse(const char *text, size_t len, struct spec **out, char *err, size_t errlen);
/* Same from a parsed document (borrowed; the spec keeps its own reference). */
int spec_from_json(const json_t *spec, struct spec **out, char *err, size_t errlen);
void spec_free(struct spec *s);                       /* NULL ok */
enum spec_evaluator spec_evaluator(const struct spec *s);
/* "deterministic", "test-suite", "custom-script" or "judge". */
const char *spec_evaluator_name(enum spec_evaluator e);
const json_t *spec_json(const struct spec *s);
/* The LLM-judge criteria and settings (common/rubric.h), or NULL when no dimension is judged:
 * evaluator judge, or test-suite with judge dimensions (hybrid). Borrowed. */
const struct rubric *spec_rubric(const struct spec *s);       /* the whole spec (borrowed): test_suite, script */
size_t spec_ndims(const struct spec *s);
const char *spec_dim_key(const struct spec *s, size_t i);
bool spec_dim_external(const struct spec *s, size_t i); /* scored by test-suite/script, not a primitive */

/* Read-only view of a validated dimension (for score.c and tests). */
enum spec_var_source { SPEC_VAR_ANSWER, SPEC_VAR_METADATA, SPEC_VAR_GROUND_TRUTH };
struct spec_var {
	char *name;                  /* expression variable name */
	enum spec_var_source src;    /* "metadata.x" / "ground_truth.x" / anything else: answer */
	struct jpath *path;          /* path inside that document (prefix removed) */
	char *text;                  /* the path as written in the spec */
};
struct spec_dim {
	char key[33];
	dec6 weight;
	enum prim_kind prim;         /* PRIM_NONE when external */
	bool external;               /* scored by the test-suite (its `dimension`) or the script */
	struct jpath *field, *gt_field;          /* primitives that read fields */
	bool case_insensitive;                   /* exact_match */
	struct dec_num tolerance; bool linear;   /* numeric_tolerance (default 0.01, none) */
	bool has_time_limit; struct dec_num time_limit_secs; double curve;  /* time_decay */
	bool jaccard;                            /* set_overlap (default true) */
	struct expr *expr; size_t nvars; struct spec_var *vars;  /* expression */
	bool has_gate; size_t gate_dim; double gate_above;
};
const struct spec_dim *spec_dim(const struct spec *s, size_t i);
/* Dimension indexes in an order where every gate target comes before the dimensions it gates. */
const size_t *spec_topo_order(const struct spec *s);
/* Thresholds (defaults win 700, draw 400). */
double spec_win(const struct spec *s);
double spec_draw(const struct spec *s);
/* Constraints: returns true and *v when constraints.<name> is set ("token_budget",
 * "max_llm_calls", "max_tool_calls"). */
bool spec_constraint(const struct spec *s, const char *name, int64_t *v);

#endif
