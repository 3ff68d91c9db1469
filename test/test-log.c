/* Unit tests for worker/log.c: redaction of secrets and level parsing. */
#include <stdlib.h>

#include "log.h"
#include "tap.h"

static void redact(const char *in, const char *want)
{
	char *got = log_redact_url(in);
	is_str(got, want, "redact %s", want);
	free(got);
}

int main(void)
{
	redact("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0");
	redact("redis://:secret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0");
	redact("postgresql://bob:hunter2@db/arbiter", "user=bob password=*** dbname=arbiter host=db");
	redact("postgresql://bob@db/arbiter?password=x&sslmode=off",
	       "user=bob password=*** dbname=arbiter host=db sslmode=off");
	redact("host=db user=bob password='a b\\'c' dbname=x",
	       "user=bob password=*** dbname=x host=db");
	redact("host=db password=abc", "password=*** host=db");
	redact("postgresql:///arbiter", "dbname=arbiter");
	/* The whole table of spellings: test-redact.c. */

	enum log_level l;
	ok(log_level_parse("debug", &l) == 0 && l == LOG_DEBUG, "parse debug");
	ok(log_level_parse("WARNING", &l) == 0 && l == LOG_WARN, "parse WARNING");
	ok(log_level_parse("loud", &l) == -1, "reject unknown level");
	log_setup(LOG_WARN, "w-1");
	ok(!log_enabled(LOG_INFO) && log_enabled(LOG_ERROR), "level threshold");
	return tap_done();
}
