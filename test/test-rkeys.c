/*
 * Unit test for rkeys (worker/rkeys.c): by default the plain names API servers
 * use (arbiter:jobs); in the tagged style (and "auto" with a Cluster URL)
 * every key name carries the same hash tag, so all of them map to one Redis
 * Cluster slot; bad prefixes and styles are refused with a reason.
 */
#undef NDEBUG
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rkeys.h"
#include "tap.h"

/* The part of a key Redis Cluster hashes (its hash tag rule). */
static void hashed_part(const char *key, char *out, size_t cap)
{
	const char *l = strchr(key, '{');
	const char *r = l ? strchr(l + 1, '}') : NULL;
	if (l && r && r > l + 1)
		snprintf(out, cap, "%.*s", (int)(r - l - 1), l + 1);
	else
		snprintf(out, cap, "%s", key);
}

int main(void)
{
	struct rkeys k;
	char err[256] = "";

	ok(rkeys_init(&k, NULL, NULL, err, sizeof err) == 0, "defaults");
	is_str(k.jobs, "arbiter:jobs", "default: the plain stream name API servers XADD to");
	is_str(k.dead, "arbiter:dead", "default dead");
	is_str(k.delayed, "arbiter:delayed", "default delayed");
	is_str(k.group, "arbiter-workers", "default group");
	char *other = rkeys_other_jobs(&k, NULL);
	is_str(other, "{arbiter}:jobs", "plain: the other style's stream is the tagged one");
	free(other);
	rkeys_free(&k);
	is_str(rkeys_style(NULL, false), "plain", "auto without Cluster: plain");
	is_str(rkeys_style("auto", true), "tagged", "auto with Cluster: tagged");
	is_str(rkeys_style("legacy", true), "plain", "legacy is plain");
	is_str(rkeys_style_for_url("auto", "redis+cluster://127.0.0.1:7000"), "tagged",
	       "a Cluster URL makes auto tagged");
	is_str(rkeys_style_for_url(NULL, "redis://127.0.0.1:6379/0"), "plain",
	       "a plain URL keeps plain names");

	ok(rkeys_init(&k, NULL, "tagged", err, sizeof err) == 0, "tagged");
	is_str(k.base, "{arbiter}", "base");
	is_str(k.jobs, "{arbiter}:jobs", "jobs");
	is_str(k.dead, "{arbiter}:dead", "dead");
	is_str(k.delayed, "{arbiter}:delayed", "delayed");
	is_str(k.reconcile_lock, "{arbiter}:reconcile:lock", "lock");
	is_str(k.group, "arbiter-workers", "group name is not a key: unchanged");
	char *rl = rkeys_rl(&k, "2001:db8:1:2::/64");
	is_str(rl, "{arbiter}:rl:2001:db8:1:2::/64", "rate-limit key");
	const char *all[] = { k.jobs, k.dead, k.delayed, k.reconcile_lock, rl };
	int same = 1;
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
		char h[128];
		hashed_part(all[i], h, sizeof h);
		same &= !strcmp(h, "arbiter");
	}
	ok(same, "every key hashes on \"arbiter\" only: one slot");
	char *jk = rkeys_judge(&k);
	is_str(jk, "{arbiter}:judge", "judge key prefix shares the tag");
	free(jk);
	jk = rkeys_judge_lane(&k);
	is_str(jk, "{arbiter}:jobs:judge", "the judge lane shares the jobs stream's tag");
	free(jk);
	free(rl);
	rkeys_free(&k);
	ok(!k.base && !k.jobs && !k.dead && !k.delayed && !k.reconcile_lock && !k.group,
	   "rkeys_free leaves no dangling pointer");
	rkeys_free(&k);
	ok(!k.base && !k.jobs, "rkeys_free twice is safe (a double free fails under ASan)");

	ok(rkeys_init(&k, "team1", "tagged", err, sizeof err) == 0, "prefix team1");
	is_str(k.jobs, "{team1}:jobs", "prefix in the tag");
	other = rkeys_other_jobs(&k, "team1");
	is_str(other, "team1:jobs", "tagged: the other style's stream is the plain one");
	free(other);
	is_str(k.group, "team1-workers", "group");
	rkeys_free(&k);

	ok(rkeys_init(&k, "eu{q7}", "tagged", err, sizeof err) == 0, "prefix with its own tag");
	is_str(k.jobs, "eu{q7}:jobs", "a prefix holding a tag is kept as it is");
	ok(rkeys_other_jobs(&k, "eu{q7}") == NULL, "a prefix holding a tag: one stream in both styles");
	rkeys_free(&k);

	ok(rkeys_init(&k, "arbiter", "legacy", err, sizeof err) == 0, "legacy");
	is_str(k.jobs, "arbiter:jobs", "legacy jobs");
	is_str(k.dead, "arbiter:dead", "legacy dead");
	rl = rkeys_rl(&k, "10.0.0.1");
	is_str(rl, "arbiter:rl:10.0.0.1", "legacy rate-limit key");
	free(rl);
	jk = rkeys_judge(&k);
	is_str(jk, "arbiter:judge", "legacy judge key prefix (the spend keys' old names)");
	free(jk);
	jk = rkeys_judge_lane(&k);
	is_str(jk, "arbiter:jobs:judge", "legacy judge lane");
	free(jk);
	rkeys_free(&k);

	ok(rkeys_init(&k, "arbiter", "cluster", err, sizeof err) == -1 &&
	   strstr(err, "ARBITER_REDIS_KEYS") && strstr(err, "tagged"), "unknown style: %s", err);
	ok(rkeys_init(&k, "", NULL, err, sizeof err) == -1 && strstr(err, "ARBITER_PREFIX"),
	   "empty prefix: %s", err);
	ok(rkeys_init(&k, "a{b", "tagged", err, sizeof err) == -1 && strstr(err, "hash tag"),
	   "unbalanced brace: %s", err);
	ok(rkeys_init(&k, "a{}b", "tagged", err, sizeof err) == -1, "empty tag refused: %s", err);
	return tap_done();
}
