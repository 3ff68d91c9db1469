/*
 * Tests for worker/config: defaults, precedence (flags > environment > file),
 * the file format, bounds and error messages.
 */
#undef NDEBUG
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "tap.h"

static void clear_env(void)
{
	extern char **environ;
	/* Remove every ARBITER_* variable so the host environment cannot leak in. */
	for (;;) {
		int found = 0;
		for (char **e = environ; e && *e; e++) {
			if (!strncmp(*e, "ARBITER_", 8)) {
				char name[128];
				const char *eq = strchr(*e, '=');
				size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
				if (n >= sizeof name)
					n = sizeof name - 1;
				memcpy(name, *e, n);
				name[n] = '\0';
				unsetenv(name);
				found = 1;
				break;
			}
		}
		if (!found)
			break;
	}
}

static char *write_file(const char *text)
{
	static char path[64];
	strcpy(path, "/tmp/arbiter-test-config-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		return NULL;
	}
	close(fd);
	return path;
}

static int load(int argc, char **argv, struct config *c, char *err)
{
	memset(c, 0, sizeof *c);
	return config_load(argc, argv, c, err, 256);
}

int main(void)
{
	struct config c;
	char err[256];
	char *argv0[] = { "worker", NULL };

	clear_env();

	/* Defaults. */
	is_int(load(1, argv0, &c, err), 0, "defaults load");
	is_str(c.redis_url, "redis://127.0.0.1:6379/0", "default redis url");
	is_str(c.database_url, "postgresql:///arbiter", "default database url");
	is_str(c.prefix, "arbiter", "default prefix");
	ok(c.worker_id && strchr(c.worker_id, '-'), "default worker id is hostname-pid (%s)",
	   c.worker_id ? c.worker_id : "(null)");
	is_int(c.concurrency, 64, "default concurrency");
	is_str(c.rate_limit, "10/60s", "default rate limit");
	is_int(c.rate_burst, 10, "default burst");
	is_str(c.rate_policy, "defer", "default policy");
	is_str(c.rate_allow, "", "default allow list empty");
	is_int(c.claim_idle_ms, 60000, "default claim idle");
	is_int(c.max_deliveries, 5, "default max deliveries");
	is_int(c.reconcile_ms, 30000, "default reconcile");
	is_str(c.metrics_addr, "127.0.0.1:9464", "default metrics addr");
	is_int(c.sandbox_slots, 0, "default sandbox slots");
	is_str(c.languages_file, "deploy/languages.json", "default languages file");
	is_str(c.log_level, "info", "default log level");
	is_int(c.drain_ms, 30000, "default drain");
	is_int(c.batch_max, 64, "default batch max");
	is_int((long long)c.max_string_bytes, 1048576, "default max string bytes");
	is_int(c.pg_pool_size, 4, "default pool size");
	config_free(&c);

	/* File < environment < flags. */
	char *path = write_file(
		"# a comment\n"
		"\n"
		"ARBITER_CONCURRENCY=8\n"
		"  ARBITER_PREFIX = fileprefix  \n"
		"ARBITER_REDIS_URL=\"redis://127.0.0.1:7000/1\"\n"
		"ARBITER_METRICS_ADDR=\n"
		"ARBITER_RATE_POLICY='reject'\n");
	ok(path != NULL, "temp file written");
	setenv("ARBITER_CONFIG", path, 1);
	setenv("ARBITER_PREFIX", "envprefix", 1);
	setenv("ARBITER_MAX_DELIVERIES", "3", 1);
	{
		char *argv[] = { "worker", "--max-deliveries", "7", "--worker-id=w1", NULL };
		is_int(load(4, argv, &c, err), 0, "file+env+flags load");
		is_int(c.concurrency, 8, "file sets concurrency");
		is_str(c.prefix, "envprefix", "env overrides file");
		is_str(c.redis_url, "redis://127.0.0.1:7000/1", "double quotes stripped");
		is_str(c.metrics_addr, "", "empty value allowed for metrics addr");
		is_str(c.rate_policy, "reject", "single quotes stripped");
		is_int(c.max_deliveries, 7, "flag overrides env");
		is_str(c.worker_id, "w1", "--flag=value form");
		config_free(&c);
	}
	unsetenv("ARBITER_PREFIX");
	unsetenv("ARBITER_MAX_DELIVERIES");
	unsetenv("ARBITER_CONFIG");

	/* --config flag. */
	{
		char *argv[] = { "worker", "--config", path, NULL };
		is_int(load(3, argv, &c, err), 0, "--config FILE");
		is_str(c.prefix, "fileprefix", "file value used without env");
		config_free(&c);
	}
	unlink(path);

	/* Errors. */
	{
		char *argv[] = { "worker", "--concurrency", "0", NULL };
		is_int(load(3, argv, &c, err), -1, "concurrency 0 refused");
		ok(strstr(err, "ARBITER_CONCURRENCY") && strstr(err, "out of range"), "message: %s", err);
	}
	{
		char *argv[] = { "worker", "--concurrency", "12x", NULL };
		is_int(load(3, argv, &c, err), -1, "non-numeric refused");
		ok(strstr(err, "not a decimal integer") != NULL, "message: %s", err);
	}
	{
		char *argv[] = { "worker", "--no-such-thing", "1", NULL };
		is_int(load(3, argv, &c, err), -1, "unknown flag refused");
		ok(strstr(err, "--no-such-thing") != NULL, "message: %s", err);
	}
	{
		char *argv[] = { "worker", "--prefix", NULL };
		is_int(load(2, argv, &c, err), -1, "missing value refused");
	}
	{
		char *argv[] = { "worker", "--prefix", "", NULL };
		is_int(load(3, argv, &c, err), -1, "empty prefix refused");
	}
	{
		char *argv[] = { "worker", "--log-level", "loud", NULL };
		is_int(load(3, argv, &c, err), -1, "bad enum refused");
		ok(strstr(err, "debug|info|warn|error") != NULL, "message lists choices: %s", err);
	}
	{
		char *argv[] = { "worker", "stray", NULL };
		is_int(load(2, argv, &c, err), -1, "positional argument refused");
	}
	setenv("ARBITER_CLAIM_IDLE_MS", "-5", 1);
	is_int(load(1, argv0, &c, err), -1, "negative env value refused");
	ok(strstr(err, "environment") != NULL, "message names the source: %s", err);
	unsetenv("ARBITER_CLAIM_IDLE_MS");

	/* Every *_MS setting of the table takes a duration with a unit (one parser for all):
	 * the names come from the table itself (config_usage), each is set to "1s" (within every
	 * such setting's bounds) and must load. */
	{
		char *text = NULL;
		size_t textlen = 0;
		FILE *f = open_memstream(&text, &textlen);
		config_usage(f);
		fclose(f);
		int nms = 0, nbad = 0;
		char bad[512] = "";
		for (char *p = text; (p = strstr(p, "ARBITER_")) != NULL;) {
			size_t n = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
			char name[128];
			snprintf(name, sizeof name, "%.*s", (int)n, p);
			p += n;
			if (n < 3 || strcmp(name + n - 3, "_MS"))
				continue;
			nms++;
			setenv(name, "1s", 1);
			if (load(1, argv0, &c, err) != 0) {
				nbad++;
				snprintf(bad + strlen(bad), sizeof bad - strlen(bad), " %s (%s)", name, err);
			} else {
				config_free(&c);
			}
			unsetenv(name);
		}
		free(text);
		ok(nms >= 9 && nbad == 0, "all %d *_MS settings take a unit (\"1s\");%s", nms,
		   nbad ? bad : " none refused");
	}

	setenv("ARBITER_UNRELATED_THING", "x", 1);
	is_int(load(1, argv0, &c, err), 0, "unknown ARBITER_* env ignored");
	config_free(&c);
	unsetenv("ARBITER_UNRELATED_THING");

	path = write_file("ARBITER_CONCURENCY=3\n");
	{
		char *argv[] = { "worker", "--config", path, NULL };
		is_int(load(3, argv, &c, err), -1, "unknown key in file refused");
		ok(strstr(err, ":1:") && strstr(err, "ARBITER_CONCURENCY"), "message: %s", err);
	}
	unlink(path);
	path = write_file("ARBITER_CONCURRENCY 3\n");
	{
		char *argv[] = { "worker", "--config", path, NULL };
		is_int(load(3, argv, &c, err), -1, "line without = refused");
	}
	unlink(path);
	{
		char *argv[] = { "worker", "--config", "/nonexistent/arbiter.conf", NULL };
		is_int(load(3, argv, &c, err), -1, "missing file refused");
	}
	{
		char *argv[] = { "worker", "--max-string-bytes", "2048", "--rate-limit", "0", NULL };
		is_int(load(5, argv, &c, err), 0, "size and rate 0");
		is_int((long long)c.max_string_bytes, 2048, "size set");
		is_str(c.rate_limit, "0", "rate limit 0 accepted (disables)");
		config_free(&c);
	}

	/* Durations take units; a bare number stays milliseconds. */
	{
		char *argv[] = { "worker", "--drain-ms", "5m", "--claim-idle-ms", "500ms",
		                 "--reconcile-ms", "2s", "--pg-query-timeout-ms", "1h",
		                 "--commit-delay-ms", "7", NULL };
		is_int(load(11, argv, &c, err), 0, "durations with units load (%s)", err);
		is_int(c.drain_ms, 300000, "5m = 300000 ms");
		is_int(c.claim_idle_ms, 500, "500ms");
		is_int(c.reconcile_ms, 2000, "2s");
		is_int(c.pg_query_timeout_ms, 3600000, "1h");
		is_int(c.commit_delay_ms, 7, "bare number is ms");
		config_free(&c);
	}
	{
		char *argv[] = { "worker", "--drain-ms", "5 m", NULL };
		is_int(load(3, argv, &c, err), -1, "space before unit refused");
		ok(strstr(err, "ARBITER_DRAIN_MS") && strstr(err, "duration"), "message: %s", err);
		char *argv2[] = { "worker", "--drain-ms", "2d", NULL };
		is_int(load(3, argv2, &c, err), -1, "unknown unit refused");
		char *argv3[] = { "worker", "--claim-idle-ms", "99ms", NULL };
		is_int(load(3, argv3, &c, err), -1, "duration below the minimum refused");
		ok(strstr(err, "out of range") != NULL, "message: %s", err);
		char *argv4[] = { "worker", "--drain-ms", "99999999999999999999h", NULL };
		is_int(load(3, argv4, &c, err), -1, "huge duration refused");
	}

	/* The file: `export KEY=`, trailing comments, quoted '#'. */
	path = write_file(
		"export ARBITER_CONCURRENCY=9   # jobs in flight\n"
		"export\tARBITER_PREFIX='p#1'  # quoted hash kept\n"
		"ARBITER_DATABASE_URL=postgresql://u:pa#ss@h/db\n"
		"ARBITER_SANDBOX_CGROUP=none\n"
		"ARBITER_SANDBOX_UID_BASE=200000\n"
		"ARBITER_DRAIN_MS=10s\n");
	{
		char *argv[] = { "worker", "--config", path, NULL };
		is_int(load(3, argv, &c, err), 0, "export/comment file loads (%s)", err);
		is_int(c.concurrency, 9, "export KEY=value, trailing comment dropped");
		is_str(c.prefix, "p#1", "quoted value keeps its #");
		is_str(c.database_url, "postgresql://u:pa#ss@h/db", "# without a space before it is data");
		is_str(c.sandbox_cgroup, "none", "ARBITER_SANDBOX_CGROUP is a setting of the table");
		is_int((long long)c.sandbox_uid_base, 200000, "ARBITER_SANDBOX_UID_BASE is a setting");
		is_int(c.drain_ms, 10000, "duration in the file");
		config_free(&c);
	}
	unlink(path);
	path = write_file("ARBITER_PREFIX=\"open\n");
	{
		char *argv[] = { "worker", "--config", path, NULL };
		is_int(load(3, argv, &c, err), -1, "unterminated quote refused");
		ok(strstr(err, ":1:") && strstr(err, "quote"), "message: %s", err);
	}
	unlink(path);

	/* config_validate: what the table's types cannot check, before any connection. */
	{
		struct { const char *flag, *value, *want; } bad[] = {
			{ "--rate-limit", "10/60", "ARBITER_RATE_LIMIT" },
			{ "--metrics-addr", "foo", "ARBITER_METRICS_ADDR" },
			{ "--redis-url", "http://h", "ARBITER_REDIS_URL" },
			{ "--database-url", "host='unterminated", "ARBITER_DATABASE_URL" },
			{ "--sandbox-uid-base", "5", "ARBITER_SANDBOX_UID_BASE" },
			{ "--database-url", "postgresql://u:p@h/db@x", "ARBITER_DATABASE_URL" },
			{ "--judge-budget", "5/week", "ARBITER_JUDGE_BUDGET" },
			{ "--rate-allow", "10.0.0.0/99", "ARBITER_RATE_ALLOW" },
		};
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			char *argv[] = { "worker", (char *)bad[i].flag, (char *)bad[i].value, NULL };
			is_int(load(3, argv, &c, err), 0, "%s %s loads", bad[i].flag, bad[i].value);
			is_int(config_validate(&c, err, sizeof err), -1, "%s %s refused by validate",
			       bad[i].flag, bad[i].value);
			ok(strstr(err, bad[i].want) != NULL, "message names %s: %s", bad[i].want, err);
			config_free(&c);
		}
		is_int(load(1, argv0, &c, err), 0, "defaults");
		is_int(config_validate(&c, err, sizeof err), 0, "defaults validate (%s)", err);
		config_free(&c);
	}

	/* config_load_some: a few settings for migrate/score, through the same table. */
	{
		static const char *const names[] = { "ARBITER_DATABASE_URL", "ARBITER_LOG_LEVEL",
		                                     "ARBITER_MAX_STRING_BYTES", NULL };
		unsigned given = 99;
		clear_env();
		is_int(config_load_some(names, "", &c, &given, err, sizeof err), 0, "some: defaults");
		is_int((int)given, 0, "some: nothing given");
		is_str(c.database_url, "postgresql:///arbiter", "some: the table's default URL");
		is_str(c.log_level, "info", "some: the table's default level");
		config_free(&c);

		/* The file sets the URL and (not asked for) a bad concurrency: ignored. */
		path = write_file("# x\nexport ARBITER_DATABASE_URL='postgresql://f/db'\n"
		                  "ARBITER_CONCURRENCY=banana\nARBITER_LOG_LEVEL=debug\n");
		setenv("ARBITER_LOG_LEVEL", "error", 1);
		setenv("ARBITER_MAX_STRING_BYTES", "77", 1);
		setenv("ARBITER_CONCURRENCY", "-1", 1);
		is_int(config_load_some(names, path, &c, &given, err, sizeof err), 0,
		       "some: file + environment (%s)", err);
		is_str(c.database_url, "postgresql://f/db", "some: the file's URL");
		is_str(c.log_level, "error", "some: the environment wins over the file");
		ok(c.max_string_bytes == 77, "some: size from the environment");
		is_int((int)given, 7, "some: all three given");
		config_free(&c);

		/* ARBITER_CONFIG names the file when file is NULL. */
		unsetenv("ARBITER_LOG_LEVEL");
		unsetenv("ARBITER_MAX_STRING_BYTES");
		setenv("ARBITER_CONFIG", path, 1);
		is_int(config_load_some(names, NULL, &c, &given, err, sizeof err), 0, "some: ARBITER_CONFIG");
		is_str(c.log_level, "debug", "some: the file's level");
		is_int((int)given, 3, "some: URL and level given");
		config_free(&c);
		unsetenv("ARBITER_CONFIG");
		unsetenv("ARBITER_CONCURRENCY");
		unlink(path);

		/* Checked as the worker checks them. */
		setenv("ARBITER_MAX_STRING_BYTES", "0", 1);
		is_int(config_load_some(names, "", &c, &given, err, sizeof err), -1, "some: 0 bytes refused");
		ok(strstr(err, "ARBITER_MAX_STRING_BYTES") && strstr(err, "range"), "message: %s", err);
		unsetenv("ARBITER_MAX_STRING_BYTES");
		setenv("ARBITER_LOG_LEVEL", "loud", 1);
		is_int(config_load_some(names, "", &c, &given, err, sizeof err), -1, "some: bad level refused");
		ok(strstr(err, "ARBITER_LOG_LEVEL") != NULL, "message: %s", err);
		unsetenv("ARBITER_LOG_LEVEL");
		path = write_file("ARBITER_DATABASE_URLL=x\n");
		is_int(config_load_some(names, path, &c, &given, err, sizeof err), -1,
		       "some: a typo in the file is refused");
		ok(strstr(err, "unknown setting") != NULL, "message: %s", err);
		unlink(path);
		static const char *const bogus[] = { "ARBITER_NO_SUCH", NULL };
		is_int(config_load_some(bogus, "", &c, &given, err, sizeof err), -1, "some: unknown name");
	}
	return tap_done();
}
