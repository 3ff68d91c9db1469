/*
 * Service test for worker/ackscript against a real redis-server (run under
 * test/services.py, ARBITER_TEST_REDIS_URL): per entry, a failed copy leaves
 * the entry pending and in the stream while the others are acknowledged and
 * deleted; releases and dead-letter copies land where they belong; malformed
 * arguments are refused before any write.
 */
#undef NDEBUG
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "ackscript.h"
#include "rq.h"
#include "redis_sync.h"
#include "tap.h"

static redisReply *run(const char *dead, const struct ackscript_entry *e, int n)
{
	const char **argv;
	size_t *lens;
	char nbuf[16 * 12];
	int argc = ackscript_argv("ta:jobs", dead, "ta-g", e, n, nbuf, &argv, &lens);
	redisReply *rep = redisCommandArgv(sync_rc, argc, argv, lens);
	free(argv);
	free(lens);
	return rep;
}

static long long pending(void)
{
	redisReply *rep = R("XPENDING ta:jobs ta-g");
	long long n = rep->type == REDIS_REPLY_ARRAY ? rep->element[0]->integer : -1;
	freeReplyObject(rep);
	return n;
}

/* The keys the script is given: the dead-letter stream only when an entry goes there (a
 * Cluster node importing the slot refuses, TRYAGAIN, a script naming a key it lacks). */
static void declared_keys(void)
{
	const char **argv;
	size_t *lens;
	char nbuf[2 * 12];
	const char *f[] = { "submission_id", "s" };
	struct ackscript_entry acks[] = { { "1-1", ACKSCRIPT_ACK, 0, NULL, NULL },
	                                  { "1-2", ACKSCRIPT_RELEASE, 2, f, NULL } };
	int argc = ackscript_argv("k:jobs", "k:dead", "g", acks, 2, nbuf, &argv, &lens);
	ok(argc > 4 && !strcmp(argv[2], "1") && !strcmp(argv[3], "k:jobs") && !strcmp(argv[4], "g"),
	   "acknowledge and release only: KEYS = the stream alone (numkeys %s, then %s)",
	   argc > 4 ? argv[2] : "?", argc > 4 ? argv[4] : "?");
	free(argv);
	free(lens);
	struct ackscript_entry mixed[] = { { "1-1", ACKSCRIPT_ACK, 0, NULL, NULL },
	                                   { "1-2", ACKSCRIPT_DEAD, 2, f, NULL } };
	argc = ackscript_argv("k:jobs", "k:dead", "g", mixed, 2, nbuf, &argv, &lens);
	ok(argc > 5 && !strcmp(argv[2], "2") && !strcmp(argv[3], "k:jobs") &&
	   !strcmp(argv[4], "k:dead") && !strcmp(argv[5], "g"),
	   "a dead-letter entry: KEYS = the stream and the dead-letter stream");
	free(argv);
	free(lens);
}

int main(void)
{
	const char *url = getenv("ARBITER_TEST_REDIS_URL");
	struct rq_url u;
	char err[200];
	if (!url) {
		printf("1..0 # SKIP ARBITER_TEST_REDIS_URL not set (run under test/services.py)\n");
		return 0;
	}
	if (rq_url_parse(url, &u, err, sizeof err) < 0 || !(sync_rc = redisConnect(u.host, u.port)) ||
	    sync_rc->err) {
		diag("cannot connect to %s", url);
		return 1;
	}
	declared_keys();
	freeReplyObject(R("DEL ta:jobs ta:dead ta:deadstr"));
	freeReplyObject(R("XGROUP CREATE ta:jobs ta-g 0 MKSTREAM"));
	char ids[3][32];
	for (int i = 0; i < 3; i++) {
		redisReply *rep = R("XADD ta:jobs * submission_id s%d", i);
		snprintf(ids[i], sizeof ids[i], "%s", rep->str);
		freeReplyObject(rep);
	}
	freeReplyObject(R("XREADGROUP GROUP ta-g c1 COUNT 10 STREAMS ta:jobs >"));
	is_int(pending(), 3, "three entries pending");

	/* The dead-letter stream's key holds a string: XADD to it fails (WRONGTYPE). */
	freeReplyObject(R("SET ta:deadstr x"));
	static const char *const dead_f[] = { "submission_id", "s1", "reason", "failed: boom" };
	static const char *const rel_f[] = { "submission_id", "s2" };
	struct ackscript_entry e[3] = {
		{ ids[0], ACKSCRIPT_ACK, 0, NULL, NULL },
		{ ids[1], ACKSCRIPT_DEAD, 4, dead_f, NULL },
		{ ids[2], ACKSCRIPT_RELEASE, 2, rel_f, NULL },
	};
	redisReply *rep = run("ta:deadstr", e, 3);
	const char *errs[3];
	ok(ackscript_parse(rep, 3, errs) == 0, "reply parsed");
	ok(errs[0] == NULL, "plain ack: done");
	ok(errs[1] && strstr(errs[1], "copy:") && strstr(errs[1], "WRONGTYPE"),
	   "failed dead-letter copy reported for that entry (%s)", errs[1] ? errs[1] : "NULL");
	ok(errs[2] == NULL, "release: done");
	freeReplyObject(rep);
	is_int(pending(), 1, "only the entry whose copy failed is still pending");
	rep = R("XRANGE ta:jobs %s %s", ids[1], ids[1]);
	is_int((long long)rep->elements, 1, "and still in the stream");
	freeReplyObject(rep);
	rep = R("XRANGE ta:jobs %s %s", ids[0], ids[0]);
	is_int((long long)rep->elements, 0, "the acknowledged entry was deleted");
	freeReplyObject(rep);
	is_int(RI("XLEN ta:jobs"), 2, "stream: the failed entry + the released copy");

	/* Retried with a usable dead-letter stream. */
	rep = run("ta:dead", &e[1], 1);
	ok(ackscript_parse(rep, 1, errs) == 0 && errs[0] == NULL, "retry: dead-lettered");
	freeReplyObject(rep);
	is_int(pending(), 0, "nothing pending");
	is_int(RI("XLEN ta:dead"), 1, "one dead-letter copy");
	rep = R("XRANGE ta:dead - +");
	ok(rep->elements == 1 && rep->element[0]->element[1]->elements == 4 &&
	   !strcmp(rep->element[0]->element[1]->element[3]->str, "failed: boom"),
	   "with its fields");
	freeReplyObject(rep);

	/* Malformed: refused before any write. */
	freeReplyObject(R("XADD ta:jobs * submission_id s9"));
	long long before = RI("XLEN ta:dead");
	rep = R("EVAL %s 2 ta:jobs ta:dead ta-g 1-1 d 2 a b 2-2 d 99", ackscript_lua);
	ok(rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "malformed"),
	   "malformed arguments refused (%s)", rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
	ok(ackscript_parse(rep, 2, errs) < 0 && errs[0] && errs[1], "parse reports it for every entry");
	freeReplyObject(rep);
	is_int(RI("XLEN ta:dead"), before, "no copy written");

	freeReplyObject(R("DEL ta:jobs ta:dead ta:deadstr"));
	redisFree(sync_rc);
	return tap_done();
}
