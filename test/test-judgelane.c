/*
 * Tests of worker/judgelane: who goes to the judge and who to the lane
 * (judgelane_admit), the lane entry's fields (judgelane_fields), and, against a real
 * redis-server (run under test/services.py, ARBITER_TEST_REDIS_URL), the divert script:
 * an entry moves only while it is pending for this consumer, with its fields, acknowledged
 * and deleted in the same step; then the lane read through its own consumer group as the
 * worker reads it, and the acknowledgement script (ackscript.h) run on the lane: an entry
 * read from the lane is acknowledged and deleted there, a released one goes back to the
 * lane, and the live stream is not touched.
 */
#undef NDEBUG
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "ackscript.h"
#include "judgelane.h"
#include "rq.h"
#include "redis_sync.h"
#include "tap.h"

static long long pending(void)
{
	redisReply *rep = R("XPENDING tj:jobs tj-g");
	long long n = rep->type == REDIS_REPLY_ARRAY ? rep->element[0]->integer : -1;
	freeReplyObject(rep);
	return n;
}

/* Runs the divert script for id as consumer with the job's fields; returns its first
 * element (1 moved, 0 not), -1 on an unexpected reply. */
static long long divert(const char *consumer, const char *id, char *const *f, int nf, int attempts)
{
	const char *argv[40];
	size_t lens[40];
	const char *head[] = { "EVAL", judgelane_divert_lua, "2", "tj:jobs", "tj:jobs:judge", "tj-g",
	                       consumer, id };
	for (int i = 0; i < 8; i++) {
		argv[i] = head[i];
		lens[i] = strlen(head[i]);
	}
	size_t flens[16];
	for (int i = 0; i < 2 * nf; i++)
		flens[i] = strlen(f[i]);
	char abuf[16];
	int np = judgelane_fields(f, flens, nf, attempts, abuf, argv + 8, lens + 8);
	redisReply *rep = redisCommandArgv(sync_rc, 8 + 2 * np, argv, lens);
	long long v = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 ?
	              rep->element[0]->integer : -1;
	if (v < 0)
		diag("divert reply: %s", rep && rep->str ? rep->str : "?");
	freeReplyObject(rep);
	return v;
}

static void pure(void)
{
	ok(judgelane_admit(1, false), "a free slot, nothing waits in the lane: to the judge");
	ok(!judgelane_admit(0, false), "no free slot: to the lane");
	ok(!judgelane_admit(-2, false), "over the limit: to the lane");
	ok(!judgelane_admit(3, true), "a fresh job does not overtake jobs waiting in the lane");

	char *f[] = { "submission_id", "s1", "attempt", "2", "judge_lane", "1", "kind", "evaluate" };
	size_t fl[8];
	for (int i = 0; i < 8; i++)
		fl[i] = strlen(f[i]);
	const char *out[12];
	size_t ol[12];
	char abuf[16];
	int n = judgelane_fields(f, fl, 4, 3, abuf, out, ol);
	is_int(n, 4, "fields: the two kept, judge_lane and attempt");
	ok(n == 4 && !strcmp(out[0], "submission_id") && !strcmp(out[1], "s1") &&
	   !strcmp(out[2], "kind") && !strcmp(out[3], "evaluate") &&
	   !strcmp(out[4], "judge_lane") && !strcmp(out[5], "1") &&
	   !strcmp(out[6], "attempt") && !strcmp(out[7], "3") && ol[7] == 1,
	   "the job's fields in order, judge_lane=1, attempt=3 replacing the old one");
	n = judgelane_fields(f, fl, 1, 1, abuf, out, ol);
	ok(n == 2 && !strcmp(out[2], "judge_lane"), "first attempt: no attempt field added");
}

int main(void)
{
	pure();
	const char *url = getenv("ARBITER_TEST_REDIS_URL");
	struct rq_url u;
	char err[200];
	if (!url) {
		diag("ARBITER_TEST_REDIS_URL not set: the scripts are not run (run under test/services.py)");
		return tap_done();
	}
	if (rq_url_parse(url, &u, err, sizeof err) < 0 || !(sync_rc = redisConnect(u.host, u.port)) ||
	    sync_rc->err) {
		diag("cannot connect to %s", url);
		return 1;
	}
	freeReplyObject(R("DEL tj:jobs tj:jobs:judge"));
	freeReplyObject(R("XGROUP CREATE tj:jobs tj-g 0 MKSTREAM"));
	char ids[4][32];
	for (int i = 0; i < 4; i++) {
		redisReply *rep = R("XADD tj:jobs * submission_id s%d kind evaluate", i);
		snprintf(ids[i], sizeof ids[i], "%s", rep->str);
		freeReplyObject(rep);
	}
	freeReplyObject(R("XREADGROUP GROUP tj-g c1 COUNT 3 STREAMS tj:jobs >"));
	is_int(pending(), 3, "three entries pending for c1");

	char *f0[] = { "submission_id", "s0", "kind", "evaluate" };
	is_int(divert("c2", ids[0], f0, 2, 1), 0, "another consumer's entry is not moved");
	is_int(divert("c1", ids[3], f0, 2, 1), 0, "an entry never delivered is not moved");
	is_int(RI("XLEN tj:jobs:judge"), 0, "the lane is still empty");
	is_int(pending(), 3, "still three pending");

	is_int(divert("c1", ids[0], f0, 2, 1), 1, "c1's entry moves to the lane");
	char *f1[] = { "submission_id", "s1", "kind", "evaluate" };
	is_int(divert("c1", ids[1], f1, 2, 2), 1, "a second one, on its second attempt");
	is_int(divert("c1", ids[1], f1, 2, 2), 0, "moving it again does nothing (no duplicate)");
	is_int(pending(), 1, "both acknowledged");
	is_int(RI("XLEN tj:jobs"), 2, "and deleted from the live stream");
	is_int(RI("XLEN tj:jobs:judge"), 2, "two entries in the lane");
	redisReply *rep = R("XRANGE tj:jobs:judge - +");
	ok(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
	   rep->element[1]->element[1]->elements == 8 &&
	   !strcmp(rep->element[1]->element[1]->element[1]->str, "s1") &&
	   !strcmp(rep->element[1]->element[1]->element[4]->str, "judge_lane") &&
	   !strcmp(rep->element[1]->element[1]->element[7]->str, "2"),
	   "the lane entry keeps the fields, with judge_lane and attempt=2");
	freeReplyObject(rep);

	/* The lane's own consumer group, created as the worker does (from 0: entries already
	 * waiting are delivered). */
	rep = R("XGROUP CREATE tj:jobs:judge tj-g 0 MKSTREAM");
	ok(rep->type == REDIS_REPLY_STATUS, "the lane's group is created");
	freeReplyObject(rep);
	rep = R("XREADGROUP GROUP tj-g c2 COUNT 1 STREAMS tj:jobs:judge >");
	ok(rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
	   rep->element[0]->element[1]->elements == 1 &&
	   !strcmp(rep->element[0]->element[1]->element[0]->element[1]->element[1]->str, "s0"),
	   "a worker with one free judge slot reads the oldest lane entry");
	char lid[32];
	snprintf(lid, sizeof lid, "%s", rep->element[0]->element[1]->element[0]->element[0]->str);
	freeReplyObject(rep);
	is_int(RI("XLEN tj:jobs:judge"), 2, "read entries stay in the lane while pending");

	/* Done: the ack script on the lane (KEYS[1] = the lane). */
	struct ackscript_entry e = { lid, ACKSCRIPT_ACK, 0, NULL, NULL };
	char nbuf[12];
	const char **av;
	size_t *al;
	int ac = ackscript_argv("tj:jobs:judge", "tj:dead", "tj-g", &e, 1, nbuf, &av, &al);
	rep = redisCommandArgv(sync_rc, ac, av, al);
	const char *errs[1];
	ok(ackscript_parse(rep, 1, errs) == 0 && !errs[0], "the ack script acknowledges it on the lane");
	freeReplyObject(rep);
	free(av);
	free(al);
	is_int(RI("XLEN tj:jobs:judge"), 1, "and deletes it from the lane");
	is_int(pending(), 1, "the live stream's group is not touched");

	/* Released at shutdown: the copy goes back to the lane, the read entry goes. */
	rep = R("XREADGROUP GROUP tj-g c2 COUNT 5 STREAMS tj:jobs:judge >");
	snprintf(lid, sizeof lid, "%s", rep->element[0]->element[1]->element[0]->element[0]->str);
	freeReplyObject(rep);
	const char *rf[] = { "submission_id", "s1", "kind", "evaluate", "judge_lane", "1" };
	size_t rl[] = { 13, 2, 4, 8, 10, 1 };
	struct ackscript_entry r = { lid, ACKSCRIPT_RELEASE, 6, rf, rl };
	ac = ackscript_argv("tj:jobs:judge", "tj:dead", "tj-g", &r, 1, nbuf, &av, &al);
	rep = redisCommandArgv(sync_rc, ac, av, al);
	ok(ackscript_parse(rep, 1, errs) == 0 && !errs[0], "a lane entry is released");
	freeReplyObject(rep);
	free(av);
	free(al);
	is_int(RI("XLEN tj:jobs:judge"), 1, "its copy is back in the lane (one entry)");
	rep = R("XPENDING tj:jobs:judge tj-g");
	ok(rep->type == REDIS_REPLY_ARRAY && rep->element[0]->integer == 0,
	   "nothing pending in the lane's group");
	freeReplyObject(rep);
	rep = R("XREADGROUP GROUP tj-g c3 COUNT 5 STREAMS tj:jobs:judge >");
	ok(rep->type == REDIS_REPLY_ARRAY && rep->element[0]->element[1]->elements == 1 &&
	   !strcmp(rep->element[0]->element[1]->element[0]->element[1]->element[1]->str, "s1"),
	   "another worker reads the released job from the lane");
	freeReplyObject(rep);
	is_int(RI("XLEN tj:jobs"), 2, "the live stream keeps its two entries");
	freeReplyObject(R("DEL tj:jobs tj:jobs:judge tj:dead"));
	redisFree(sync_rc);
	return tap_done();
}
