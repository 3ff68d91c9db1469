/* redis_sync: the plain synchronous hiredis connection with which the Redis service tests
 * (test-ackscript, test-judgelane, test-ratelimit) set up and inspect Redis beside the code
 * under test, and its two command helpers. Include once per test program. */
#ifndef ARBITER_TEST_REDIS_SYNC_H
#define ARBITER_TEST_REDIS_SYNC_H

#include <stdarg.h>
#include <stdlib.h>

#include <hiredis/hiredis.h>

#include "tap.h"

/* Connected by the test's main. */
static redisContext *sync_rc;

/* A command's reply, for the caller to free; a lost connection ends the test. */
static inline redisReply *R(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *rep = redisvCommand(sync_rc, fmt, ap);
	va_end(ap);
	if (!rep) {
		diag("sync redis error: %s", sync_rc->errstr);
		exit(1);
	}
	return rep;
}

/* A command's integer reply, -1 for any other reply (an error reply is shown). */
static inline long long RI(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *rep = redisvCommand(sync_rc, fmt, ap);
	va_end(ap);
	long long v = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
	if (rep && rep->type == REDIS_REPLY_ERROR)
		diag("redis error: %s", rep->str);
	freeReplyObject(rep);
	return v;
}

#endif
