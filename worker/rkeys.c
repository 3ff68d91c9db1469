/*
 * rkeys: Redis key names (see rkeys.h for the list and the hash-tag rule).
 */
#include "rkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static char *cat(const char *a, const char *b)
{
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "%s%s", a, b);
	return sb.buf;
}

/* True when s holds a hash tag Redis Cluster uses: the first '{' followed,
 * later, by a '}' with at least one byte between them. */
static bool has_hash_tag(const char *s)
{
	const char *l = strchr(s, '{');
	if (!l)
		return false;
	const char *r = strchr(l + 1, '}');
	return r && r > l + 1;
}

int rkeys_init(struct rkeys *k, const char *prefix, const char *style, char *err, size_t errlen)
{
	memset(k, 0, sizeof *k);
	if (!prefix)
		prefix = "arbiter";
	if (!*prefix) {
		snprintf(err, errlen, "ARBITER_PREFIX: empty prefix");
		return -1;
	}
	if (!style || !*style || !strcmp(style, "tagged")) {
		k->legacy = false;
	} else if (!strcmp(style, "legacy")) {
		k->legacy = true;
	} else {
		snprintf(err, errlen, "ARBITER_REDIS_KEYS: \"%.64s\": expected \"tagged\" "
		         "({prefix}:jobs, one hash slot) or \"legacy\" (prefix:jobs)", style);
		return -1;
	}
	if (!k->legacy && strchr(prefix, '{') && !has_hash_tag(prefix)) {
		snprintf(err, errlen, "ARBITER_PREFIX: \"%.64s\" has a '{' but no complete hash "
		         "tag \"{...}\"", prefix);
		return -1;
	}
	if (k->legacy || has_hash_tag(prefix)) {
		k->base = xstrdup(prefix);
	} else {
		struct strbuf sb = { 0 };
		strbuf_addf(&sb, "{%s}", prefix);
		k->base = sb.buf;
	}
	k->jobs = cat(k->base, ":jobs");
	k->dead = cat(k->base, ":dead");
	k->delayed = cat(k->base, ":delayed");
	k->reconcile_lock = cat(k->base, ":reconcile:lock");
	k->group = cat(prefix, "-workers");
	return 0;
}

void rkeys_free(struct rkeys *k)
{
	free(k->base);
	free(k->jobs);
	free(k->dead);
	free(k->delayed);
	free(k->reconcile_lock);
	free(k->group);
	memset(k, 0, sizeof *k);
}

char *rkeys_rl(const struct rkeys *k, const char *ipkey)
{
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "%s:rl:%s", k->base, ipkey);
	return sb.buf;
}
