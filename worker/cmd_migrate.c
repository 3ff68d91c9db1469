/*
 * `arbiter migrate`: applies the compiled-in SQL migrations to the database
 * named by --database-url or ARBITER_DATABASE_URL (default
 * postgresql:///arbiter). Safe to run from several replicas at once. Prints
 * what it applied; exit 0 on success, 1 on a database error, 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "log.h"
#include "migrate.h"

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: arbiter migrate [--database-url URL]\n"
	        "\n"
	        "Applies the SQL migrations compiled into this binary (latest: %03d), in order and\n"
	        "once each, recording them in arbiter_migrations. Several replicas may run it at\n"
	        "once (an advisory lock serializes them).\n"
	        "\n"
	        "  --database-url URL  libpq URI or conninfo (default: $ARBITER_DATABASE_URL,\n"
	        "                      else postgresql:///arbiter)\n",
	        migrate_latest());
}

static void print_applied(int version, const char *name, void *data)
{
	(void)data;
	printf("applied %03d_%s\n", version, name);
	fflush(stdout);
}

int cmd_migrate(int argc, char **argv)
{
	const char *url = getenv("ARBITER_DATABASE_URL");
	if (!url || !url[0])
		url = "postgresql:///arbiter";

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--database-url")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "arbiter migrate: --database-url needs a value\n");
				return 2;
			}
			url = argv[++i];
		} else if (!strncmp(a, "--database-url=", 15)) {
			url = a + 15;
		} else {
			fprintf(stderr, "arbiter migrate: unknown argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}

	char err[1024];
	char *shown = log_redact_url(url);
	int n = migrate_apply_report(url, print_applied, NULL, err, sizeof err);
	if (n < 0) {
		fprintf(stderr, "arbiter migrate: %s (database %s)\n", err, shown);
		free(shown);
		return 1;
	}
	if (n == 0)
		printf("database %s is up to date (version %03d)\n", shown, migrate_latest());
	else
		printf("applied %d migration%s; database %s is at version %03d\n", n, n == 1 ? "" : "s",
		       shown, migrate_latest());
	free(shown);
	return 0;
}
