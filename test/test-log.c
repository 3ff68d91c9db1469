/* Unit tests for worker/log.c: redaction of secrets and level parsing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

	/* Capture stderr in a file to check the formats and the per-job level. */
	char path[] = "/tmp/arbiter-test-log-XXXXXX";
	int fd = mkstemp(path);
	ok(fd >= 0, "temp file");
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	log_setup(LOG_INFO, "w-1");
	log_set_job_level(LOG_WARN);
	log_msg(LOG_INFO, NULL, NULL, "worker line");
	log_msg(LOG_INFO, "sub-1", "job-1", "quiet job line");
	log_msg(LOG_WARN, "sub-2", "job-2", "loud job line");
	log_set_text(1);
	log_msg(LOG_WARN, "sub-3", NULL, "text\nline");
	log_set_text(0);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	char buf[4096] = "";
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
	unlink(path);
	close(fd);
	ok(strstr(buf, "\"msg\":\"worker line\"") != NULL, "worker line at info is written (JSON)");
	ok(!strstr(buf, "quiet job line"), "a job's info line is dropped at job level warn");
	ok(strstr(buf, "\"submission_id\":\"sub-2\"") != NULL, "a job's warn line is written");
	ok(strstr(buf, " warn  text line  submission=sub-3\n") != NULL,
	   "text format: level, message (newline blanked), submission");
	ok(log_enabled(LOG_INFO), "log_enabled admits the lower of the two levels");
	return tap_done();
}
