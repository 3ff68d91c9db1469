/*
 * `arbiter config-dump [--config FILE] NAME...` (hidden): the settings named, as the
 * worker would resolve them (the configuration file, then the environment; README
 * "Configuration"), printed as one JSON object on stdout:
 *
 *   {"values": {"ARBITER_PREFIX": "arbiter", ...}, "given": ["ARBITER_PREFIX"]}
 *
 * `given` lists the names set by the file or the environment (not defaulted). The
 * operator scripts (scripts/arbiter_ops.py) read their settings through it, so a
 * file means the same to them as to the worker: its quoting and comment rules, and
 * an unknown ARBITER_ key refused. Values are printed as they are, passwords
 * included: this is the operator's own tool, and only the names asked for are shown.
 * Durations are printed in milliseconds.
 *
 * Exit status: 0; 2 on bad usage or a bad setting ("configuration:" format).
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cmd.h"
#include "config.h"

#define MAX_NAMES 32

int cmd_config_dump(int argc, char **argv)
{
	const char *names[MAX_NAMES + 1];
	const char *file = NULL;
	int n = 0;
	char err[512];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config")) {
			if (++i >= argc) {
				config_report("config-dump", "--config needs a file name");
				return 2;
			}
			file = argv[i];
		} else if (!strncmp(argv[i], "--config=", 9)) {
			file = argv[i] + 9;
		} else if (!strncmp(argv[i], "-", 1) || n >= MAX_NAMES) {
			fprintf(stderr, "usage: arbiter config-dump [--config FILE] ARBITER_NAME... "
			                "(at most %d)\n", MAX_NAMES);
			return 2;
		} else {
			names[n++] = argv[i];
		}
	}
	names[n] = NULL;

	struct config c;
	unsigned given;
	if (config_load_some(names, file, &c, &given, err, sizeof err) < 0) {
		config_report("config-dump", err);
		return 2;
	}
	json_t *values = json_object(), *g = json_array(), *out = json_object();
	int rc = 0;
	for (int i = 0; i < n; i++) {
		char buf[64];
		json_t *v = json_string(config_value_text(&c, names[i], buf, sizeof buf));
		if (!v) {
			snprintf(err, sizeof err, "%s: the value is not UTF-8", names[i]);
			config_report("config-dump", err);
			rc = 2;
			break;
		}
		json_object_set_new(values, names[i], v);
		if (given & (1u << i))
			json_array_append_new(g, json_string(names[i]));
	}
	json_object_set_new(out, "values", values);
	json_object_set_new(out, "given", g);
	if (!rc) {
		json_dumpf(out, stdout, JSON_COMPACT);
		putchar('\n');
	}
	json_decref(out);
	config_free(&c);
	return rc;
}
