/*
 * `arbiter migrate`: applies the compiled-in SQL migrations to the database
 * named by --database-url, else ARBITER_DATABASE_URL, else the
 * ARBITER_DATABASE_URL line of the worker's configuration file (--config F
 * or ARBITER_CONFIG, same format), else postgresql:///arbiter. Safe to run
 * from several replicas at once. Prints what it applied; exit 0 on success,
 * 1 on a database error, 2 on bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "config.h"
#include "log.h"
#include "migrate.h"
#include "redact.h"
#include "standings.h"
#include "util.h"

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: arbiter migrate [--database-url URL] [--config FILE]\n"
	        "\n"
	        "Applies the SQL migrations compiled into this binary (latest: %03d), in order and\n"
	        "once each, recording them in arbiter_migrations. Several replicas may run it at\n"
	        "once (a transaction-level advisory lock serializes them; nothing is session-scoped,\n"
	        "so it is safe through PgBouncer in transaction pooling mode).\n"
	        "\n"
	        "  --database-url URL  libpq URI or conninfo (default: $ARBITER_DATABASE_URL, else\n"
	        "                      ARBITER_DATABASE_URL in the config file, else\n"
	        "                      postgresql:///arbiter)\n"
	        "  --config FILE       the worker's KEY=value configuration file (default\n"
	        "                      $ARBITER_CONFIG); only ARBITER_DATABASE_URL is used\n",
	        migrate_latest());
}

static void print_applied(int version, const char *name, void *data)
{
	(void)data;
	printf("applied %03d_%s\n", version, name);
	fflush(stdout);
}

static void print_backfill(const struct standings_progress *p, void *data)
{
	(void)data;
	long long total = p->agents_done + p->agents_left;
	printf("standings backfill: %lld/%lld agents (%.0f%%), %lld tasks, %.1f s\n", p->agents_done,
	       total, total ? 100.0 * (double)p->agents_done / (double)total : 100.0, p->tasks_done,
	       p->secs);
	fflush(stdout);
}

/* Runs the standings backfill when agents wait for it. Returns the exit code. */
static int backfill_standings(const char *url)
{
	char err[1024];
	long long pending;
	PGconn *pg = standings_connect(url, "arbiter-migrate", err, sizeof err);
	if (!pg || standings_pending(pg, &pending, err, sizeof err) < 0) {
		fprintf(stderr, "arbiter migrate: %s\n", err);
		PQfinish(pg);
		return 1;
	}
	int rc = 0;
	if (pending > 0 && standings_backfill(pg, 500, print_backfill, NULL, err, sizeof err) < 0) {
		fprintf(stderr, "arbiter migrate: %s (run `arbiter migrate` or `arbiter standings "
		        "--backfill` again to resume)\n", err);
		rc = 1;
	}
	PQfinish(pg);
	return rc;
}

int cmd_migrate(int argc, char **argv)
{
	const char *flag_url = NULL;
	const char *config = NULL;     /* NULL: the file named by ARBITER_CONFIG, if any */

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
			flag_url = argv[++i];
		} else if (!strncmp(a, "--database-url=", 15)) {
			flag_url = a + 15;
		} else if (!strcmp(a, "--config")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "arbiter migrate: --config needs a value\n");
				return 2;
			}
			config = argv[++i];
		} else if (!strncmp(a, "--config=", 9)) {
			config = a + 9;
		} else {
			fprintf(stderr, "arbiter migrate: unknown argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}

	/* The environment, else the file, else the default: worker/config's table. */
	static const char *const names[] = { "ARBITER_DATABASE_URL", NULL };
	struct config cfg;
	unsigned given;
	char cerr[512];
	if (config_load_some(names, config, &cfg, &given, cerr, sizeof cerr) < 0) {
		config_report("migrate", cerr);
		return 2;
	}
	const char *url = flag_url && flag_url[0] ? flag_url : cfg.database_url;
	/* A URI libpq would misread is a settings error, reported as the others are. */
	if (redact_check_conn(url, cerr, sizeof cerr) < 0) {
		char msg[600];
		snprintf(msg, sizeof msg, "ARBITER_DATABASE_URL: %s", cerr);
		config_report("migrate", msg);
		config_free(&cfg);
		return 2;
	}

	char err[1024];
	char *shown = log_redact_url(url);
	int n = migrate_apply_report(url, print_applied, NULL, err, sizeof err);
	if (n < 0) {
		fprintf(stderr, "arbiter migrate: %s (database %s)\n", err, shown);
		free(shown);
		config_free(&cfg);
		return 1;
	}
	if (n == 0)
		printf("database %s is up to date (version %03d)\n", shown, migrate_latest());
	else
		printf("applied %d migration%s; database %s is at version %03d\n", n, n == 1 ? "" : "s",
		       shown, migrate_latest());
	/* Standings (sql/002_standings.sql): build them for existing results, in batches. */
	int brc = backfill_standings(url);
	free(shown);
	config_free(&cfg);
	return brc;
}
