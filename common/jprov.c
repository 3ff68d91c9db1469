/*
 * The LLM judge's operator-configured providers (see jprov.h and README
 * "LLM judge"): parsing ARBITER_JUDGE_PROVIDERS and resolving a spec's
 * provider and model against it. Pure: no I/O.
 */
#include "jprov.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define fail errfail

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 64 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		      s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

static bool env_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 128 || !((s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

/* http:// is for loopback unless plain_http; the host is what follows "://" up to ':' '/'. */
static bool loopback_url(const char *u)
{
	const char *h = u + 7;
	static const char *const hosts[] = { "127.0.0.1", "localhost", "[::1]" };
	for (size_t i = 0; i < 3; i++) {
		size_t n = strlen(hosts[i]);
		if (!strncmp(h, hosts[i], n) && (h[n] == 0 || h[n] == ':' || h[n] == '/'))
			return true;
	}
	return false;
}

static int price_of(const json_t *v, double *out)
{
	if (!json_is_number(v))
		return -1;
	double d = json_number_value(v);
	if (!(d >= 0 && d <= 1e6))
		return -1;
	*out = d;
	return 0;
}

static int parse_one(struct jprov *p, const char *name, const json_t *o, char *err, size_t errlen)
{
	static const char *const known[] = { "api", "base_url", "api_key_env", "models", "price",
		"max_cost_usd", "plain_http", NULL };
	const char *k;
	json_t *v;
	if (!name_ok(name))
		return fail(err, errlen, "provider names are 1-64 characters a-z, 0-9, '_', '-', '.' "
		            "(starting with a letter or digit)");
	p->name = xstrdup(name);
	if (!json_is_object(o))
		return fail(err, errlen, "provider %s must be an object", name);
	json_object_foreach((json_t *)o, k, v) {
		size_t i = 0;
		while (known[i] && strcmp(known[i], k))
			i++;
		if (!known[i])
			return fail(err, errlen, "provider %s: %.64s is not a provider setting (api, "
			            "base_url, api_key_env, models, price, max_cost_usd, plain_http)", name, k);
	}
	v = json_object_get(o, "api");
	const char *api = json_is_string(v) ? json_string_value(v) : v ? "" : name;
	if (!strcmp(api, "openai") || !strcmp(api, "openai-compatible"))
		p->api = RUBRIC_OPENAI;
	else if (!strcmp(api, "gemini"))
		p->api = RUBRIC_GEMINI;
	else if (!strcmp(api, "anthropic"))
		p->api = RUBRIC_ANTHROPIC;
	else
		return fail(err, errlen, "provider %s: api must be \"openai\", \"openai-compatible\", "
		            "\"gemini\" or \"anthropic\"", name);
	v = json_object_get(o, "base_url");
	const char *u = json_is_string(v) ? json_string_value(v) : "";
	if ((strncmp(u, "https://", 8) && strncmp(u, "http://", 7)) || strlen(u) > 500 ||
	    strlen(u) < 9 || !printable(u))
		return fail(err, errlen, "provider %s: base_url must be an http:// or https:// URL", name);
	/* No user info ("http://127.0.0.1:80@evil.example/" is evil.example), query or fragment. */
	if (strpbrk(u, "@?#\\"))
		return fail(err, errlen, "provider %s: base_url must not contain '@', '?', '#' or '\\'",
		            name);
	v = json_object_get(o, "plain_http");
	if (v && !json_is_boolean(v))
		return fail(err, errlen, "provider %s: plain_http must be true or false", name);
	if (!strncmp(u, "http://", 7) && !json_is_true(v) && !loopback_url(u))
		return fail(err, errlen, "provider %s: base_url: plain http:// only to a loopback host "
		            "(the API key would travel in clear); use https:// or set plain_http", name);
	p->base_url = xstrdup(u);
	size_t bl = strlen(p->base_url);
	while (bl > 8 && p->base_url[bl - 1] == '/')
		p->base_url[--bl] = 0;
	v = json_object_get(o, "api_key_env");
	if (v) {
		if (!json_is_string(v) || !env_name_ok(json_string_value(v)))
			return fail(err, errlen, "provider %s: api_key_env must name an environment variable "
			            "(upper case, digits, '_')", name);
		p->api_key_env = xstrdup(json_string_value(v));
	}
	v = json_object_get(o, "models");
	if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > JPROV_MAX_MODELS)
		return fail(err, errlen, "provider %s: models must be an array of 1-%d model names", name,
		            JPROV_MAX_MODELS);
	p->models = xcalloc(json_array_size(v), sizeof *p->models);
	for (size_t i = 0; i < json_array_size(v); i++) {
		const json_t *m = json_array_get(v, i);
		if (!json_is_string(m) || json_string_length(m) == 0 || json_string_length(m) > 200 ||
		    !printable(json_string_value(m)) || strpbrk(json_string_value(m), "?#"))
			return fail(err, errlen, "provider %s: models[%zu] must be a model name (1-200 "
			            "printable characters, no spaces, '?' or '#')", name, i);
		p->models[p->nmodels++] = xstrdup(json_string_value(m));
	}
	if ((v = json_object_get(o, "price"))) {
		const json_t *pi = json_object_get(v, "input_per_mtok"),
		             *po = json_object_get(v, "output_per_mtok");
		if (!json_is_object(v) || json_object_size(v) != (size_t)(!!pi + !!po) ||
		    (pi && price_of(pi, &p->price_in) < 0) || (po && price_of(po, &p->price_out) < 0))
			return fail(err, errlen, "provider %s: price must be {\"input_per_mtok\": USD, "
			            "\"output_per_mtok\": USD} with numbers 0-1000000", name);
	}
	if ((v = json_object_get(o, "max_cost_usd")) && price_of(v, &p->max_cost_usd) < 0)
		return fail(err, errlen, "provider %s: max_cost_usd must be a number 0-1000000", name);
	return 0;
}

int jprov_parse(const char *text, size_t len, struct jprovs **out, char *err, size_t errlen)
{
	struct jprovs *ps = xcalloc(1, sizeof *ps);
	*out = NULL;
	size_t i = 0;
	while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
		i++;
	if (i == len) {
		*out = ps;
		return 0;
	}
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(root)) {
		/* Line and column only: the text may hold what an operator did not mean to log. */
		if (root)
			fail(err, errlen, "not a JSON object of providers");
		else
			fail(err, errlen, "not JSON (line %d, column %d)", je.line, je.column);
		goto bad;
	}
	if (json_object_size(root) > JPROV_MAX) {
		fail(err, errlen, "at most %d providers", JPROV_MAX);
		goto bad;
	}
	ps->p = xcalloc(json_object_size(root) + 1, sizeof *ps->p);
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v) {
		if (parse_one(&ps->p[ps->n++], k, v, err, errlen) < 0)
			goto bad;
	}
	json_decref(root);
	*out = ps;
	return 0;
bad:
	json_decref(root);
	jprov_free(ps);
	return -1;
}

void jprov_free(struct jprovs *ps)
{
	if (!ps)
		return;
	for (size_t i = 0; i < ps->n; i++) {
		struct jprov *p = &ps->p[i];
		free(p->name);
		free(p->base_url);
		free(p->api_key_env);
		for (size_t m = 0; m < p->nmodels; m++)
			free(p->models[m]);
		free(p->models);
	}
	free(ps->p);
	free(ps);
}

const struct jprov *jprov_resolve(const struct jprovs *ps, const struct rubric *r, char *err,
                                  size_t errlen)
{
	const char *name = r && r->provider ? r->provider : "";
	const struct jprov *p = NULL;
	for (size_t i = 0; ps && i < ps->n && !p; i++)
		if (!strcmp(ps->p[i].name, name))
			p = &ps->p[i];
	if (!p) {
		struct strbuf sb = { 0 };
		for (size_t i = 0; ps && i < ps->n; i++)
			strbuf_addf(&sb, "%s%s", i ? ", " : "", ps->p[i].name);
		fail(err, errlen, "judge.provider '%s' is not configured on this worker "
		     "(ARBITER_JUDGE_PROVIDERS: %s)", name, sb.buf ? sb.buf : "none configured");
		strbuf_free(&sb);
		return NULL;
	}
	for (size_t m = 0; m < p->nmodels; m++)
		if (!strcmp(p->models[m], r->model))
			return p;
	fail(err, errlen, "judge.model '%s' is not one of provider %s's models "
	     "(ARBITER_JUDGE_PROVIDERS)", r->model, p->name);
	return NULL;
}
