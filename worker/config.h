/*
 * config: the worker's configuration (deploy/README.md "Configuration"), read from command-line
 * flags, ARBITER_* environment variables and an optional KEY=value file, in
 * that order of precedence (flags > environment > file > default).
 *
 * Every setting is one row of a declarative table in config.c (name, type,
 * default, bounds, environment variable); flags are derived from the
 * environment name (ARBITER_REDIS_URL → --redis-url). The file is given by
 * --config F or ARBITER_CONFIG and holds `ARBITER_X=value` lines (optionally
 * prefixed by `export `, so a shell can source it), `#` comments and blank
 * lines. Durations take a unit (500ms, 30s, 5m, 1h; a bare number is ms). The struct is filled once at start and passed as
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
	int standings_apply_ms;                       /* standings projection period, 0 = off */
	int standings_batch;                          /* results per projection transaction */
	int standings_busy_lag_ms;                    /* lag the projection lets grow while the replica is busy */
	size_t max_string_bytes;                      /* default 1 MiB */
	/* Database pool and commit tuning. */
	int pg_pool_size;                             /* PostgreSQL connections, default 4 */
	int commit_delay_ms;                          /* wait to fill a commit batch, default 0 */
	int commit_overlap_min;                       /* batch size for a second commit, default 64 */
	int pg_query_timeout_ms;                      /* pgc query timeout, default 30000 */
	int retry_base_ms, retry_max_ms;              /* backoff of failing jobs (attempts) */
	int dead_letter_max;                          /* {prefix}:dead cap, 0 = none */
	int bulk_share;                               /* bulk lane share, percent */
	size_t sandbox_uid_base;                      /* 0 = sandbox default */
	char *pg_prepare;                             /* on|off: prepared batch statements */
	char *sandbox_cgroup;                         /* auto|none */
	char *log_format;                             /* auto|json|text */
	char *job_log_level;                          /* same|debug|info|warn|error */
	int judge_inflight;                           /* LLM judge requests in flight, default 512 */
	char *judge_ca_file;                          /* PEM CA bundle for providers, "" = system */
	int judge_shared_inflight;                    /* across replicas (Redis), 0 = no limit */
	int judge_tpm;                                /* tokens/minute across replicas, 0 = none */
	int judge_breaker_failures;                   /* failed verdicts opening a circuit, default 5 */
	int judge_breaker_cooldown_ms;                /* before a probe, default 30000 */
	char *judge_providers;                        /* JSON object or a file path, "" = none */
	char *judge_budget;                           /* "USD/hour" | "USD/day" | "" (none) */
	int pg_lock_timeout_ms;                       /* lock_timeout of worker sessions, default 2000 */
	size_t spec_cache_bytes;                      /* spec cache bound, default 64 MiB */
	char *redis_keys;                             /* auto|plain|tagged key names (rkeys.h) */
	char *notify;                                 /* on|off: completion notifications */
	char *sandbox_lock_dir;                       /* uid locks + own cgroup2 mount */
	char *image_dir;                              /* container images; "" = <lock dir>/images */
	size_t image_max_mb, image_max_unpacked_mb;   /* arbiter image import's bounds (MiB) */
	int image_wait_ms;                            /* a missing image is waited for, 0 = fail */
	int container_max_wall_ms, container_max_cpu_ms;   /* what a container spec may ask for */
	int container_max_memory_mb, container_max_pids, container_max_output_mb;
	char *sandbox_cgroup_mount;                   /* auto|no */
	char *sandbox_allow_unsafe_memory;            /* 0|1 */
};

/* Fills *out from argv (argv[0] is the command name and is skipped), the
 * environment and the configuration file. Unknown flags, malformed numbers,
 * values out of bounds and unreadable files are errors. Returns 0 (free *out
 * with config_free), 1 when --help was given (usage printed on stdout,
 * nothing to free), or -1 with a message in err (nothing to free). */
int config_load(int argc, char **argv, struct config *out, char *err, size_t errlen);

/* For commands that take a few of the worker's settings (migrate, score): fills *out
 * with every setting's default, then, for the settings named in names only (a
 * NULL-terminated list of at most 32 environment names, e.g. "ARBITER_DATABASE_URL"),
 * the configuration file's value and then the environment's, each checked as
 * config_load checks it. file NULL = the file named by ARBITER_CONFIG (if any); "" =
 * no file. The file's other lines are checked for syntax and known names but not
 * applied. Bit i of *given is set when names[i] came from the file or the
 * environment (not the default). Returns 0 (free *out with config_free) or -1 with a
 * message in err (nothing to free). */
int config_load_some(const char *const *names, const char *file, struct config *out,
                     unsigned *given, char *err, size_t errlen);

/* The value of the setting named env (e.g. "ARBITER_PREFIX") in c, as text: a string
 * setting's own text (pointing into c), a number or a duration (in ms) printed into buf.
 * Returns NULL when env is not a setting. */
const char *config_value_text(const struct config *c, const char *env, char *buf, size_t n);

/* Checks what the table's types cannot: the rate limit and burst, the allow list,
 * the metrics address, the Redis URL, the database conninfo (and a '@' after the host
 * of a postgresql:// URI), the judge budget, the key prefix and style, the sandbox uid
 * base: every setting error the worker could meet later, so each is reported here in
 * the "configuration:" format with exit 2 (config_report). Call it after config_load
 * and before any connection or sandbox set-up. Returns 0, or -1 with a message naming
 * the setting in err. */
int config_validate(const struct config *c, char *err, size_t errlen);

/* Parses a duration: decimal N (milliseconds) or N followed by ms, s, m or h.
 * Returns 0 and *out in milliseconds, or -1 with the reason in why. */
int config_parse_duration_ms(const char *v, long long *out, char *why, size_t whylen);

/* The value part of a configuration-file line, in place: a value in matching
 * single or double quotes is taken literally (a `#` after the closing quote
 * starts a comment); otherwise a `#` after whitespace starts a comment and the
 * value is trimmed. Returns 0 and *out (pointing into val), or -1 for an
 * unterminated quote or text after the closing quote. */
int config_file_value(char *val, char **out);

/* Prints "arbiter <cmd>: configuration: <message>" on stderr: the one format
 * of every bad-configuration message (the caller then exits 2). */
void config_report(const char *cmd, const char *msg);

/* Frees the strings of c (not c itself). Safe on a zeroed struct. */
void config_free(struct config *c);

/* Prints the table of settings (flag, environment variable, default,
 * meaning) to f; used by --help and the documentation. */
void config_usage(FILE *f);

#endif
