/*
 * rubric: the LLM-judge part of a scoring spec (worker/README.md "LLM judge"), pure
 * code with no I/O. It
 *  - expands the seed's rubric form ({"mode", "rubric": [{name, description,
 *    weight 1-100}], "test_weight", "llm_weight"}) into ordinary dimensions,
 *  - parses and validates the `judge` block and each dimension's `judge`
 *    criterion,
 *  - assembles what the judge reads (declared answer fields and files, the
 *    self-description document with its six sections, test results) into a
 *    size-capped JSON document, and the prompt that quotes it as data between
 *    nonce delimiters the submission cannot close,
 *  - builds the request body of each provider (OpenAI-compatible chat
 *    completions, Gemini generateContent, Anthropic messages) and reads its
 *    reply (text and token usage),
 *  - parses the judge's verdict strictly (every criterion, integer scores
 *    0-100, bounded reasoning, no other keys).
 * The HTTP transport and the verdict cache live in worker/judge.c.
 */
#ifndef ARBITER_RUBRIC_H
#define ARBITER_RUBRIC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUBRIC_PROMPT_VERSION "arbiter-judge-1"
#define RUBRIC_MAX_CRITERIA 16
#define RUBRIC_MAX_REASONING 2000      /* bytes per criterion reasoning */
#define RUBRIC_MAX_SUMMARY 4000        /* bytes of the overall summary */
#define RUBRIC_DEFAULT_INPUT_BYTES 65536
#define RUBRIC_MAX_INPUT_BYTES (1 << 20)
#define RUBRIC_NONCE_LEN 32            /* hex characters */
#define RUBRIC_MAX_REPLY_TOKENS 100000000 /* a usage count above is refused */
#define RUBRIC_MAX_ERROR_CODE 48       /* bytes of a provider's error code shown */

enum rubric_provider { RUBRIC_OPENAI, RUBRIC_GEMINI, RUBRIC_ANTHROPIC };

struct rubric_criterion {
	char key[33];           /* the dimension key */
	char *name;             /* as the author wrote it */
	char *description;
};

struct rubric {
	char *provider;                 /* the name of an operator-configured provider (jprov.h) */
	char *model, *instructions;
	double temperature;             /* default 0 */
	int max_output_tokens;          /* default 1024 */
	int timeout_ms;                 /* per request, default 60000 */
	int max_retries;                /* provider errors retried per verdict, default 2 */
	size_t max_input_bytes;         /* cap of the data document, default 64 KiB */
	double max_cost_usd;            /* per verdict (0 = no bound): larger token caps refused */
	size_t nfields; char **fields;  /* answer paths the judge reads */
	size_t nfiles; char **files;    /* answer.files entries the judge reads */
	char *self_description;         /* answer.files entry, NULL = none declared */
	bool tests;                     /* test results are shown (default true) */
	size_t ncrit;
	struct rubric_criterion crit[RUBRIC_MAX_CRITERIA];
};

/* When spec (borrowed) is in the seed's rubric form (has "rubric" or "mode"), builds the
 * equivalent ordinary spec into *out (new reference): mode "llm" (default) gives evaluator
 * "judge", "hybrid" and "container" give "test-suite" with a dimension "tests"
 * (test_suite.dimension), or, when the spec names an "image" (and no test_suite), "container"
 * with the dimension "tests" scored by the image's score.json. Criterion weight w (integer 1..100, all summing to 100) becomes
 * w/100 (hybrid: w/100 × llm_weight/100, tests test_weight/100; test_weight + llm_weight =
 * 100), so the arbiter total is floor(10 × the seed's final_score). Keys come from "key" or
 * the name (lower case, runs of other characters become '_'). Otherwise *out = NULL.
 * Returns 0, or -1 with a message naming the criterion and the rule. */
int rubric_expand(const json_t *spec, json_t **out, char *err, size_t errlen);

/* Parses the judge part of a spec whose dimensions are already validated: the `judge` block
 * and every dimension's `judge` criterion ({"name", "description"}). evaluator is the spec's
 * evaluator name. *out = NULL when the spec has neither. Errors: judge dimensions without a
 * judge block (or the reverse), a criterion with a primitive too, evaluator "judge" without
 * a judge dimension, judge dimensions with a custom script, the test-suite dimension being a
 * judge dimension, any bad setting. Returns 0 or -1 (message in err). Free with rubric_free. */
int rubric_from_spec(const json_t *spec, const char *evaluator, struct rubric **out,
                     char *err, size_t errlen);
void rubric_free(struct rubric *r);                  /* NULL ok */
/* True when dimension object dim carries a judge criterion. */
bool rubric_dim_is_judge(const json_t *dim);
const char *rubric_provider_name(enum rubric_provider p);  /* "openai" "gemini" "anthropic" */

/* The document the judge reads, from answer (borrowed, may be NULL) and tests (the test-suite
 * "tests" array or NULL): {"fields": {path: value}, "files": {path: text},
 * "self_description": {"path", "text", "sections_missing": [...]}, "tests": [...]}, strings
 * truncated so that its compact text stays within max_input_bytes (each truncated string
 * ends with "[truncated]"). New reference. */
json_t *rubric_materials(const struct rubric *r, const json_t *answer, const json_t *tests);

/* The six sections of a self-description document that `text` does not have as a markdown
 * heading (compared case-insensitively, ignoring punctuation); text NULL = all six.
 * New array of section names. */
json_t *rubric_sections_missing(const char *text);

/* What determines a verdict, as canonical text to hash (caller frees): prompt version,
 * provider (its configured name), model, temperature, output cap, instructions, criteria
 * and materials. */
char *rubric_cache_material(const struct rubric *r, const json_t *materials);

/* The prompt: *system (rules, rubric, output format) and *user (the materials quoted between
 * BEGIN_DATA_<nonce> / END_DATA_<nonce> lines; the materials are one line of ASCII JSON, so
 * no line of theirs can be a delimiter). nonce: RUBRIC_NONCE_LEN hex characters. Returns 0,
 * or -1 if the nonce occurs in the materials (draw another). Caller frees both. */
int rubric_prompt(const struct rubric *r, const json_t *materials, const char *nonce,
                  char **system, char **user);

/* The request to a provider speaking api: *path (appended to its base URL) and *body (JSON
 * text), caller frees. repair_text/repair_err (may be NULL) add the previous invalid answer
 * (as the model's own turn) and why it was invalid, for the one repair attempt. */
void rubric_request(const struct rubric *r, enum rubric_provider api, const char *system,
                    const char *user, const char *repair_text, const char *repair_err,
                    char **path, char **body);
/* The header carrying the API key: "Authorization: Bearer ", "x-goog-api-key: " or
 * "x-api-key: " (the key is appended by the caller). */
const char *rubric_key_header(enum rubric_provider p);

/* A provider's reply: the generated text and the token usage (0 when not reported; each
 * 0..RUBRIC_MAX_REPLY_TOKENS). */
struct rubric_reply { char *text; int64_t tokens_in, tokens_out; };
/* Parses a provider's response body. Returns 0 (out->text owned, free with
 * rubric_reply_clear) or -1 with the reason (not JSON, no text, an error object, the answer
 * was cut at the output cap, a usage count that is not an integer 0..RUBRIC_MAX_REPLY_TOKENS).
 * The reason quotes nothing of the body. */
int rubric_reply_parse(enum rubric_provider p, const char *body, size_t len,
                       struct rubric_reply *out, char *err, size_t errlen);
void rubric_reply_clear(struct rubric_reply *r);
/* A short reason from a provider's error response body (len bytes) that is safe to show in
 * last_error: its error object's "code", else "type", else "status" (OpenAI, Anthropic,
 * Gemini), when that is 1..RUBRIC_MAX_ERROR_CODE characters of A-Z a-z 0-9 '_' '-' '.';
 * else "" (nothing else of the body is ever taken: a message may echo a key or the
 * request). Writes out (outlen >= 1). */
void rubric_error_code(const char *body, size_t len, char *out, size_t outlen);

/* A validated verdict: per criterion (rubric order) a score 0..100 and a reasoning. */
struct rubric_verdict {
	size_t n;
	int score[RUBRIC_MAX_CRITERIA];
	char *reasoning[RUBRIC_MAX_CRITERIA];
	char *summary;
};
/* Parses the judge's text strictly: one JSON object (optionally inside one ```json fence)
 * {"scores": {key: {"score": integer 0..100, "reasoning": string}}, "summary": string},
 * every criterion present, no other key anywhere, reasoning ≤ RUBRIC_MAX_REASONING and
 * summary ≤ RUBRIC_MAX_SUMMARY bytes. Returns 0 (free with rubric_verdict_clear) or -1 with
 * the first violation in err. */
int rubric_verdict_parse(const struct rubric *r, const char *text, size_t len,
                         struct rubric_verdict *v, char *err, size_t errlen);
void rubric_verdict_clear(struct rubric_verdict *v);
/* The verdict as the JSON text rubric_verdict_parse accepts (for the cache). Caller frees. */
char *rubric_verdict_dumps(const struct rubric *r, const struct rubric_verdict *v);
/* A criterion's judge score (0..100) on arbiter's 0..1000 scale (× 10, exact). */
int rubric_scale(int score100);

/* External scores for score_eval: those of base (the test suite's, may be NULL) followed by
 * the verdict's criteria on the 0..1000 scale. keys are borrowed from base and r. */
struct rubric_ext { size_t n; const char *keys[2 * RUBRIC_MAX_CRITERIA]; int scores[2 * RUBRIC_MAX_CRITERIA]; };
void rubric_ext_merge(const struct rubric *r, const struct rubric_verdict *v, size_t nbase,
                      const char *const *base_keys, const int *base_scores, struct rubric_ext *out);
/* The "judge" object of the result JSON / evaluation log: summary, the whole verdict (what
 * `arbiter score --verdict` replays), provider, model, prompt version. New reference. */
json_t *rubric_result_json(const struct rubric *r, const struct rubric_verdict *v);
/* Adds {"criterion", "judge_score", "reasoning"} to the detail of each judged dimension of
 * the score_result dims (array of n struct score_dim, common/score.h). */
struct score_dim;
void rubric_annotate(const struct rubric *r, const struct rubric_verdict *v,
                     struct score_dim *dims, size_t n);

#endif
