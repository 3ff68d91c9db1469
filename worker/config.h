/*
 * config: the worker's configuration (CONTRACT §8), read from command-line
 * flags, ARBITER_* environment variables and an optional KEY=value file, in
 * that order of precedence (flags > environment > file > default).
 *
 * Every setting is one row of a declarative table in config.c (name, type,
 * default, bounds, environment variable); flags are derived from the
 * environment name (ARBITER_REDIS_URL → --redis-url). The file is given by
 * --config F or ARBITER_CONFIG and holds `ARBITER_X=value` lines, `#`
 * comments and blank lines. The struct is filled once at start and passed as
 * `const struct config *`; there is no global configuration.
 */
#ifndef ARBITER_CONFIG_H
#define ARBITER_CONFIG_H

#include <stddef.h>
#include <stdio.h>

struct config {
	char *redis_url, *database_url, *prefix, *worker_id;
	int concurrency, rate_burst, claim_idle_ms, max_deliveries, reconcile_ms;
	char *rate_limit, *rate_policy, *rate_allow;   /* raw; parsed by ratelimit.c */
	char *metrics_addr;                           /* "" disables */
	int sandbox_slots;                            /* 0 = number of cores */
	char *languages_file;                         /* default deploy/languages.json */
	char *log_level;                              /* debug|info|warn|error */
	int drain_ms;                                 /* SIGTERM deadline, default 30000 */
	int batch_max;                                /* evaluations per commit transaction */
	size_t max_string_bytes;                      /* default 1 MiB */
	/* Database pool and commit tuning. */
	int pg_pool_size;                             /* PostgreSQL connections, default 4 */
	int commit_delay_ms;                          /* wait to fill a commit batch, default 0 */
	int pg_query_timeout_ms;                      /* pgc query timeout, default 30000 */
	char *redis_keys;                             /* auto|plain|tagged key names (rkeys.h) */
};

/* Fills *out from argv (argv[0] is the command name and is skipped), the
 * environment and the configuration file. Unknown flags, malformed numbers,
 * values out of bounds and unreadable files are errors. Returns 0 (free *out
 * with config_free), 1 when --help was given (usage printed on stdout,
 * nothing to free), or -1 with a message in err (nothing to free). */
int config_load(int argc, char **argv, struct config *out, char *err, size_t errlen);

/* Frees the strings of c (not c itself). Safe on a zeroed struct. */
void config_free(struct config *c);

/* Prints the table of settings (flag, environment variable, default,
 * meaning) to f; used by --help and the documentation. */
void config_usage(FILE *f);

#endif
