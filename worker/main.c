/*
 * arbiter: the command line. Dispatches `arbiter <command> [args]` to the
 * command's entry point (each lives in worker/cmd_<name>.c).
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "jarena.h"
#include "version.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

static int cmd_version(int argc, char **argv);

static const struct command commands[] = {
	/* Each command: { "name", cmd_name, "one-line help" }. */
	{ "score", cmd_score, "score one submission against a spec (no server)" },
	{ "validate-spec", cmd_validate_spec, "check a scoring spec" },
	{ "migrate", cmd_migrate, "apply the SQL migrations to the database" },
	{ "console", cmd_console, "the operator console in a browser (read-only without a token)" },
	{ "status", cmd_status, "queue, consumer and database overview (--json for scripts)" },
	{ "pause", cmd_pause, "stop every replica reading jobs (--challenge SLUG: one challenge)" },
	{ "resume", cmd_resume, "lift a pause (--challenge SLUG, --all)" },
	{ "leaderboard", cmd_leaderboard, "top agents by Elo, window score or best score on a challenge" },
	{ "weights", cmd_weights, "capped normalised weights from the window scores" },
	{ "standings", cmd_standings, "window standings: summary, --check, --backfill, --rebuild" },
	{ "image", cmd_image, "the image store: import FILE, list, rm DIGEST" },
	{ "metrics-names", cmd_metrics_names, NULL },   /* hidden: for the deploy tests */
	{ "config-dump", cmd_config_dump, NULL },       /* hidden: for scripts/arbiter_ops.py */
	{ "worker", cmd_worker, "run the evaluation worker (daemon)" },
	{ "version", cmd_version, "print the version (also --version)" },
	{ NULL, NULL, NULL },
};

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("arbiter %s\n", ARBITER_VERSION);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: arbiter <command> [options]\n\ncommands:\n");
	for (const struct command *c = commands; c->name; c++)
		if (c->help)   /* NULL help: hidden command */
			fprintf(out, "  %-14s %s\n", c->name, c->help);
}

int main(int argc, char **argv)
{
	/* jansson's allocator, before any thread or jansson call: answers are read into arenas
	 * (worker/worker.c load_input); without the address range, plain malloc. */
	jarena_install();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
		return cmd_version(argc - 1, argv + 1);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (const struct command *c = commands; c->name; c++)
		if (!strcmp(c->name, argv[1]))
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "arbiter: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
