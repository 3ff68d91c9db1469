/*
 * rkeys: Redis key names (see rkeys.h for the list and the hash-tag rule).
 */
#include "rkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rq.h"
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

const char *rkeys_style(const char *style, bool cluster)
{
	if (!style || !*style || !strcmp(style, "auto"))
		return cluster ? "tagged" : "plain";
	if (!strcmp(style, "legacy") || !strcmp(style, "plain"))
		return "plain";
	if (!strcmp(style, "tagged"))
		return "tagged";
	return style;
}

const char *rkeys_style_for_url(const char *style, const char *redis_url)
{
	struct rq_url u;
	char err[256];
	bool cluster = redis_url && rq_url_parse(redis_url, &u, err, sizeof err) == 0 && u.cluster;
	return rkeys_style(style, cluster);
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
	if (!strcmp(rkeys_style(style, false), "tagged")) {
		k->legacy = false;
	} else if (!strcmp(rkeys_style(style, false), "plain")) {
		k->legacy = true;
	} else {
		snprintf(err, errlen, "ARBITER_REDIS_KEYS: \"%.64s\": expected \"auto\", "
		         "\"plain\" (prefix:jobs; \"legacy\" is the same) or \"tagged\" "
		         "({prefix}:jobs, one hash slot)", style);
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

char *rkeys_other_jobs(const struct rkeys *k, const char *prefix)
{
	if (!prefix)
		prefix = "arbiter";
	if (has_hash_tag(prefix))
		return NULL;
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, k->legacy ? "{%s}:jobs" : "%s:jobs", prefix);
	return sb.buf;
}

char *rkeys_heartbeats(const struct rkeys *k)
{
	return cat(k->base, ":workers");
}

char *rkeys_stats(const struct rkeys *k)
{
	return cat(k->base, ":stats");
}

char *rkeys_rl(const struct rkeys *k, const char *ipkey)
{
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "%s:rl:%s", k->base, ipkey);
	return sb.buf;
}

char *rkeys_judge(const struct rkeys *k)
{
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "%s:judge", k->base);
	return sb.buf;
}

char *rkeys_judge_lane(const struct rkeys *k)
{
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "%s:judge", k->jobs);
	return sb.buf;
}
