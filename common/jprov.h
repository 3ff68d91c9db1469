/*
 * jprov: the LLM judge's providers, which are operator configuration
 * (ARBITER_JUDGE_PROVIDERS, worker/README.md "LLM judge"). Each provider has a name,
 * the API it speaks, a base URL, the name of the worker's environment
 * variable that holds its key, the models a spec may ask for, its prices and
 * an optional cost cap per verdict. A spec's judge block names a provider and
 * one of its models and nothing else about the connection, so a challenge
 * author can send no key anywhere and reach no host of their choosing.
 * Pure: parses text, no I/O (worker/judge.c reads the file).
 */
#ifndef ARBITER_JPROV_H
#define ARBITER_JPROV_H

#include <stddef.h>

#include "rubric.h"

#define JPROV_MAX 64          /* providers */
#define JPROV_MAX_MODELS 256  /* models per provider */

struct jprov {
	char *name;                   /* [a-z0-9][a-z0-9_.-]*, at most 64 bytes */
	enum rubric_provider api;     /* the request and response shapes it speaks */
	char *base_url;               /* http(s)://..., no trailing '/' */
	char *api_key_env;            /* the variable holding the key; NULL = no key sent */
	size_t nmodels;
	char **models;                /* the models a spec may name */
	double price_in, price_out;   /* USD per million tokens (cost accounting, the budget) */
	double max_cost_usd;          /* per verdict, 0 = no cap */
};

struct jprovs {
	size_t n;
	struct jprov *p;
};

/* Parses the ARBITER_JUDGE_PROVIDERS JSON text (len bytes): an object {name: {"api",
 * "base_url", "api_key_env", "models", "price", "max_cost_usd", "plain_http"}}. "api" is
 * openai (or openai-compatible), gemini or anthropic, and may be left out when the name is
 * one of those; "base_url" is https://, or http:// to a loopback host unless "plain_http"
 * is true; "models" is a non-empty array of model names. Empty text gives no providers.
 * Returns 0 (*out new, free with jprov_free) or -1 with the first problem in err (which
 * never holds the text of a value that could be a secret). */
int jprov_parse(const char *text, size_t len, struct jprovs **out, char *err, size_t errlen);
void jprov_free(struct jprovs *ps);   /* NULL ok */

/* The provider r (a parsed judge block) names, when ps (may be NULL: none configured) has
 * it and its model list has r->model; else NULL with the reason in err, naming the setting
 * ARBITER_JUDGE_PROVIDERS. The result is borrowed from ps. */
const struct jprov *jprov_resolve(const struct jprovs *ps, const struct rubric *r, char *err,
                                  size_t errlen);

#endif
