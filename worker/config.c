/*
 * config: the worker's settings as ONE declarative table (name, type,
 * default, bounds, environment variable, meaning), and the loader that fills
 * a struct config from defaults, then the configuration file, then the
 * environment, then the command-line flags (each source overrides the ones
 * before it).
 *
 * File format: `ARBITER_KEY=value` lines, `#` starts a comment line, blank
 * lines are ignored, whitespace around the key and the value is trimmed and a
 * value may be wrapped in matching single or double quotes. An unknown key in
 * the file is an error (a typo must not silently fall back to a default);
 * unknown ARBITER_* environment variables are ignored (tests and tools use
 * that namespace too).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "gcra.h"
#include "http.h"
#include "ipkey.h"
#include "judge.h"
#include "redact.h"
#include "rkeys.h"
#include "rq.h"
#include "util.h"

enum cfg_type {
	CFG_STR,        /* any text (may be empty) */
	CFG_STR_NONEMPTY,
	CFG_ENUM,       /* one of a '|'-separated list */
	CFG_INT,        /* decimal int within [min, max] */
	CFG_SIZE,       /* decimal size_t within [min, max] */
	CFG_MS,         /* duration: N (milliseconds) or N with a unit ms|s|m|h, within [min, max] ms */
};

struct cfg_key {
	const char *env;        /* ARBITER_X; the flag is --x (lower case, '_' → '-') */
	enum cfg_type type;
	size_t off;             /* offset of the field in struct config */
	const char *def;        /* default as text; NULL = computed (worker id) */
	long long min, max;     /* bounds for numbers */
	const char *choices;    /* CFG_ENUM: "a|b|c" */
	const char *help;
};

#define OFF(f) offsetof(struct config, f)

/* The one table of settings (deploy/README.md "Configuration" lists them all). */
static const struct cfg_key keys[] = {
	{ "ARBITER_REDIS_URL", CFG_STR_NONEMPTY, OFF(redis_url), "redis://127.0.0.1:6379/0", 0, 0, NULL,
	  "Redis to read jobs from" },
	{ "ARBITER_DATABASE_URL", CFG_STR_NONEMPTY, OFF(database_url), "postgresql:///arbiter", 0, 0, NULL,
	  "libpq conninfo or URI" },
	{ "ARBITER_PREFIX", CFG_STR_NONEMPTY, OFF(prefix), "arbiter", 0, 0, NULL,
	  "key prefix ({prefix}:jobs, {prefix}-workers, ...)" },
	{ "ARBITER_REDIS_KEYS", CFG_ENUM, OFF(redis_keys), "auto", 0, 0, "auto|plain|tagged|legacy",
	  "Redis key names: plain (arbiter:jobs), tagged ({arbiter}:jobs, one Cluster slot), auto (tagged only with a Cluster URL); legacy = plain" },
	{ "ARBITER_WORKER_ID", CFG_STR_NONEMPTY, OFF(worker_id), NULL, 0, 0, NULL,
	  "consumer name and evaluation_results.worker_id (default hostname-pid)" },
	{ "ARBITER_CONCURRENCY", CFG_INT, OFF(concurrency), "64", 1, 100000, NULL,
	  "jobs in flight per process" },
	{ "ARBITER_RATE_LIMIT", CFG_STR_NONEMPTY, OFF(rate_limit), "10/60s", 0, 0, NULL,
	  "evaluations per period per IP key (N/Ps, N/Pm, N/Ph); 0 disables" },
	{ "ARBITER_RATE_BURST", CFG_INT, OFF(rate_burst), "10", 1, 1000000, NULL,
	  "GCRA burst" },
	{ "ARBITER_RATE_POLICY", CFG_ENUM, OFF(rate_policy), "defer", 0, 0, "defer|reject",
	  "over the limit: defer (re-schedule) or reject (rate_limited)" },
	{ "ARBITER_RATE_ALLOW", CFG_STR, OFF(rate_allow), "", 0, 0, NULL,
	  "comma-separated CIDRs never limited" },
	{ "ARBITER_CLAIM_IDLE_MS", CFG_MS, OFF(claim_idle_ms), "60s", 100, 86400000, NULL,
	  "a pending entry idle this long is reclaimed from a dead consumer" },
	{ "ARBITER_MAX_DELIVERIES", CFG_INT, OFF(max_deliveries), "5", 1, 1000, NULL,
	  "deliveries/attempts before a failing job is dead-lettered" },
	{ "ARBITER_RECONCILE_MS", CFG_MS, OFF(reconcile_ms), "30s", 100, 86400000, NULL,
	  "how often queued submissions missing from Redis are re-enqueued" },
	{ "ARBITER_METRICS_ADDR", CFG_STR, OFF(metrics_addr), "127.0.0.1:9464", 0, 0, NULL,
	  "host:port of /metrics /healthz /readyz; port 0 = any; empty disables" },
	{ "ARBITER_SANDBOX_SLOTS", CFG_INT, OFF(sandbox_slots), "0", 0, 4096, NULL,
	  "concurrent sandboxes; 0 = number of cores" },
	{ "ARBITER_LANGUAGES_FILE", CFG_STR_NONEMPTY, OFF(languages_file), "deploy/languages.json", 0, 0, NULL,
	  "language table of the sandboxed evaluators" },
	{ "ARBITER_LOG_LEVEL", CFG_ENUM, OFF(log_level), "info", 0, 0, "debug|info|warn|error",
	  "minimum log level" },
	{ "ARBITER_DRAIN_MS", CFG_MS, OFF(drain_ms), "30s", 0, 3600000, NULL,
	  "SIGTERM: deadline to finish jobs in flight before releasing them" },
	{ "ARBITER_BATCH_MAX", CFG_INT, OFF(batch_max), "64", 1, 1000, NULL,
	  "evaluations per commit transaction" },
	{ "ARBITER_STANDINGS_APPLY_MS", CFG_MS, OFF(standings_apply_ms), "200ms", 0, 60000, NULL,
	  "how often this replica applies committed results to the standings (the replica holding the lease does); 0 = never" },
	{ "ARBITER_STANDINGS_BATCH", CFG_INT, OFF(standings_batch), "2000", 1, 100000, NULL,
	  "results per standings projection transaction" },
	{ "ARBITER_STANDINGS_BUSY_LAG_MS", CFG_MS, OFF(standings_busy_lag_ms), "2s", 0, 60000, NULL,
	  "while at least half of this replica's evaluation slots hold jobs, its standings calls wait until the standings lag reaches this (0 = never wait)" },
	{ "ARBITER_MAX_STRING_BYTES", CFG_SIZE, OFF(max_string_bytes), "1048576", 1, 1073741824, NULL,
	  "longest string a primitive compares" },
	{ "ARBITER_PG_POOL_SIZE", CFG_INT, OFF(pg_pool_size), "4", 2, 64, NULL,
	  "PostgreSQL connections per process" },
	{ "ARBITER_COMMIT_DELAY_MS", CFG_MS, OFF(commit_delay_ms), "0", 0, 1000, NULL,
	  "longest wait to fill a commit batch while another commit runs (0 = none)" },
	{ "ARBITER_COMMIT_OVERLAP_MIN", CFG_INT, OFF(commit_overlap_min), "64", 0, 1000, NULL,
	  "jobs a batch needs to start while another commit of the process runs (0 = any; a full batch always may)" },
	{ "ARBITER_PG_QUERY_TIMEOUT_MS", CFG_MS, OFF(pg_query_timeout_ms), "30s", 100, 3600000, NULL,
	  "a PostgreSQL round trip (or wait for a connection) longer than this is abandoned and retried" },
	{ "ARBITER_RETRY_BASE_MS", CFG_MS, OFF(retry_base_ms), "15s", 10, 86400000, NULL,
	  "a job that failed waits about this long before its 2nd attempt, doubling per attempt (jitter: half to all of it)" },
	{ "ARBITER_RETRY_MAX_MS", CFG_MS, OFF(retry_max_ms), "10m", 10, 86400000, NULL,
	  "the longest wait between two attempts of a failing job" },
	{ "ARBITER_BULK_SHARE", CFG_INT, OFF(bulk_share), "10", 0, 100, NULL,
	  "percent of ARBITER_CONCURRENCY fed from the bulk lane per 500 ms while live jobs wait" },
	{ "ARBITER_DEAD_LETTER_MAX", CFG_INT, OFF(dead_letter_max), "100000", 0, 100000000, NULL,
	  "cap of the dead-letter stream {prefix}:dead (oldest entries trimmed every minute); 0 = no cap" },
	{ "ARBITER_SANDBOX_UID_BASE", CFG_SIZE, OFF(sandbox_uid_base), "0", 0, 4000000000LL, NULL,
	  "first uid/gid of the sandbox slots (slot i runs as base + i); 0 = built-in default, else >= 1000" },
	{ "ARBITER_PG_PREPARE", CFG_ENUM, OFF(pg_prepare), "on", 0, 0, "on|off",
	  "prepare the batches' statements once per connection; off behind PgBouncer < 1.21 in transaction pooling" },
	{ "ARBITER_SANDBOX_CGROUP", CFG_ENUM, OFF(sandbox_cgroup), "auto", 0, 0, "auto|none",
	  "auto: cgroup v2, else v1, else rlimits; none: rlimits only (no cgroups)" },
	{ "ARBITER_SANDBOX_LOCK_DIR", CFG_STR_NONEMPTY, OFF(sandbox_lock_dir), "/run/arbiter-sandbox", 0, 0,
	  NULL, "directory of the sandbox's uid-block locks (shared by the arbiter processes of a host) "
	  "and of its own cgroup2 mount" },
	{ "ARBITER_IMAGE_DIR", CFG_STR, OFF(image_dir), "", 0, 0, NULL,
	  "the container images' store (arbiter image import); empty = <ARBITER_SANDBOX_LOCK_DIR>/images" },
	{ "ARBITER_IMAGE_MAX_MB", CFG_SIZE, OFF(image_max_mb), "4096", 1, 1073741824, NULL,
	  "arbiter image import: the largest image archive taken, in MiB" },
	{ "ARBITER_IMAGE_MAX_UNPACKED_MB", CFG_SIZE, OFF(image_max_unpacked_mb), "8192", 1, 1073741824,
	  NULL, "arbiter image import: the most an image's layers may unpack to, in MiB" },
	{ "ARBITER_IMAGE_WAIT_MS", CFG_MS, OFF(image_wait_ms), "1h", 0, 604800000, NULL,
	  "a container job whose image the store lacks waits this long for it (rechecked with "
	  "backoff, cause image in the delayed set), then fails with image_not_found; 0 = fail at once" },
	{ "ARBITER_CONTAINER_MAX_WALL_MS", CFG_MS, OFF(container_max_wall_ms), "10m", 1000, 86400000,
	  NULL, "the longest wall time a container spec may ask for (container.timeout_ms; default 60s)" },
	{ "ARBITER_CONTAINER_MAX_CPU_MS", CFG_MS, OFF(container_max_cpu_ms), "10m", 100, 86400000,
	  NULL, "the most CPU time (all its processes) a container run may use, whatever its "
	  "container.timeout_ms" },
	{ "ARBITER_CONTAINER_MAX_MEMORY_MB", CFG_INT, OFF(container_max_memory_mb), "4096", 16, 1048576,
	  NULL, "the most memory a container spec may ask for (container.memory_mb; default 512), in MiB" },
	{ "ARBITER_CONTAINER_MAX_PIDS", CFG_INT, OFF(container_max_pids), "1024", 1, 65536, NULL,
	  "the most tasks (processes and threads) a container spec may ask for (container.pids; default 64)" },
	{ "ARBITER_CONTAINER_MAX_OUTPUT_MB", CFG_INT, OFF(container_max_output_mb), "64", 1, 65536, NULL,
	  "the largest /output (and /tmp, and file) a container spec may ask for (container.output_mb; "
	  "default 64), in MiB" },
	{ "ARBITER_SANDBOX_CGROUP_MOUNT", CFG_ENUM, OFF(sandbox_cgroup_mount), "auto", 0, 0, "auto|no",
	  "auto: when the cgroup2 mount found is unusable (a container's), mount cgroup2 in the lock "
	  "directory and delegate below our own cgroup; no: never" },
	{ "ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY", CFG_ENUM, OFF(sandbox_allow_unsafe_memory), "0", 0, 0,
	  "0|1", "1: run untrusted code even without a memory cgroup (memory limits then unenforced); "
	  "0: the sandbox refuses to start" },
	{ "ARBITER_JOB_LOG_LEVEL", CFG_ENUM, OFF(job_log_level), "same", 0, 0, "same|debug|info|warn|error",
	  "minimum level of per-job lines (e.g. warn on a large backlog); same = ARBITER_LOG_LEVEL" },
	{ "ARBITER_LOG_FORMAT", CFG_ENUM, OFF(log_format), "auto", 0, 0, "auto|json|text",
	  "auto: human-readable text when stderr is a terminal, JSON lines otherwise" },
	{ "ARBITER_JUDGE_INFLIGHT", CFG_INT, OFF(judge_inflight), "512", 1, 100000, NULL,
	  "LLM judge: provider requests in flight per process (more wait in FIFO order)" },
	{ "ARBITER_JUDGE_CA_FILE", CFG_STR, OFF(judge_ca_file), "", 0, 0, NULL,
	  "LLM judge: PEM file of the CA certificates providers' TLS certificates are verified "
	  "against (a private CA); empty = the system's bundle" },
	{ "ARBITER_JUDGE_SHARED_INFLIGHT", CFG_INT, OFF(judge_shared_inflight), "0", 0, 1000000, NULL,
	  "LLM judge: provider requests in flight across every replica (Redis); 0 = no limit" },
	{ "ARBITER_JUDGE_TPM", CFG_INT, OFF(judge_tpm), "0", 0, 2000000000, NULL,
	  "LLM judge: tokens per minute across every replica (Redis); 0 = no limit. Reached: "
	  "requests wait for the next minute" },
	{ "ARBITER_JUDGE_BREAKER_FAILURES", CFG_INT, OFF(judge_breaker_failures), "5", 1, 1000, NULL,
	  "LLM judge: consecutive failed verdicts that open a provider's circuit" },
	{ "ARBITER_JUDGE_PROVIDERS", CFG_STR, OFF(judge_providers), "", 0, 0, NULL,
	  "LLM judge: the providers specs may name (base URL, key variable, models, prices): a JSON "
	  "object, or the path of a file holding it; empty = none (judge specs are refused)" },
	{ "ARBITER_JUDGE_BUDGET", CFG_STR, OFF(judge_budget), "", 0, 0, NULL,
	  "LLM judge spend budget shared by all replicas: USD/hour or USD/day (e.g. 20/day); "
	  "empty = none. Exhausted: judge jobs wait" },
	{ "ARBITER_JUDGE_BREAKER_COOLDOWN_MS", CFG_MS, OFF(judge_breaker_cooldown_ms), "30s", 10,
	  3600000, NULL, "LLM judge: an open circuit lets one probe through after this long" },
	{ "ARBITER_PG_LOCK_TIMEOUT_MS", CFG_MS, OFF(pg_lock_timeout_ms), "2s", 10, 3600000, NULL,
	  "longest wait for a row lock held by another transaction (lock_timeout) before the jobs "
	  "concerned back off" },
	{ "ARBITER_SPEC_CACHE_BYTES", CFG_SIZE, OFF(spec_cache_bytes), "67108864", 1048576,
	  17179869184, NULL, "memory for parsed challenge specs and ground truths (least recently "
	  "used evicted)" },
	{ "ARBITER_NOTIFY", CFG_ENUM, OFF(notify), "on", 0, 0, "on|off",
	  "completion notifications (LISTEN arbiter_results) sent by the commit; off when no API "
	  "server listens: notifying commits are serialized by PostgreSQL" },
};
#define NKEYS (sizeof keys / sizeof keys[0])

static void set_err(char *err, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;
	if (!err || !n)
		return;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
}

/* "ARBITER_REDIS_URL" → "redis-url" into buf. */
static void flag_name(const struct cfg_key *k, char *buf, size_t n)
{
	const char *s = k->env + strlen("ARBITER_");
	size_t i = 0;
	for (; *s && i + 1 < n; s++, i++)
		buf[i] = *s == '_' ? '-' : (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
	buf[i] = '\0';
}

static const struct cfg_key *find_env(const char *name, size_t len)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strlen(keys[i].env) == len && !memcmp(keys[i].env, name, len))
			return &keys[i];
	return NULL;
}

static const struct cfg_key *find_flag(const char *name, size_t len)
{
	char buf[64];
	for (size_t i = 0; i < NKEYS; i++) {
		flag_name(&keys[i], buf, sizeof buf);
		if (strlen(buf) == len && !memcmp(buf, name, len))
			return &keys[i];
	}
	return NULL;
}

static bool enum_ok(const char *choices, const char *v)
{
	size_t vl = strlen(v);
	const char *p = choices;
	while (*p) {
		const char *bar = strchr(p, '|');
		size_t l = bar ? (size_t)(bar - p) : strlen(p);
		if (l == vl && !memcmp(p, v, l))
			return true;
		if (!bar)
			break;
		p = bar + 1;
	}
	return false;
}

static int parse_number(const char *v, long long *out)
{
	char *end;
	if (!*v)
		return -1;
	for (const char *p = v; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (p == v && (*p == '-' || *p == '+'))))
			return -1;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || *end)
		return -1;
	*out = x;
	return 0;
}

int config_parse_duration_ms(const char *v, long long *out, char *why, size_t whylen)
{
	long long n = 0;
	const char *p = v;
	static const struct { const char *unit; long long mul; } units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "", 1 },
	};

	if (*p < '0' || *p > '9') {
		set_err(why, whylen, "is not a duration (N, or N with a unit ms, s, m or h: 500ms, 30s, 5m)");
		return -1;
	}
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (LLONG_MAX - 9) / 10 / 3600000) {
			set_err(why, whylen, "is too large");
			return -1;
		}
		n = n * 10 + (*p - '0');
	}
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (!strcmp(p, units[i].unit)) {
			*out = n * units[i].mul;
			return 0;
		}
	}
	set_err(why, whylen, "is not a duration (N, or N with a unit ms, s, m or h: 500ms, 30s, 5m)");
	return -1;
}

/* Stores value v (from source `src`, for messages) into c. */
static int apply(struct config *c, const struct cfg_key *k, const char *v, const char *src,
                 char *err, size_t errlen)
{
	char *base = (char *)c;
	long long x;

	switch (k->type) {
	case CFG_STR_NONEMPTY:
		if (!*v) {
			set_err(err, errlen, "%s (%s): must not be empty", k->env, src);
			return -1;
		}
		/* fallthrough */
	case CFG_STR: {
		char **slot = (char **)(base + k->off);
		free(*slot);
		*slot = xstrdup(v);
		return 0;
	}
	case CFG_ENUM: {
		if (!enum_ok(k->choices, v)) {
			set_err(err, errlen, "%s (%s): '%s' is not one of %s", k->env, src, v, k->choices);
			return -1;
		}
		char **slot = (char **)(base + k->off);
		free(*slot);
		*slot = xstrdup(v);
		return 0;
	}
	case CFG_INT:
	case CFG_SIZE:
		if (parse_number(v, &x) < 0) {
			set_err(err, errlen, "%s (%s): '%s' is not a decimal integer", k->env, src, v);
			return -1;
		}
		if (x < k->min || x > k->max) {
			set_err(err, errlen, "%s (%s): %lld is out of range [%lld, %lld]", k->env, src,
			        x, k->min, k->max);
			return -1;
		}
		if (k->type == CFG_INT)
			*(int *)(base + k->off) = (int)x;
		else
			*(size_t *)(base + k->off) = (size_t)x;
		return 0;
	case CFG_MS: {
		char why[128];
		if (config_parse_duration_ms(v, &x, why, sizeof why) < 0) {
			set_err(err, errlen, "%s (%s): '%s' %s", k->env, src, v, why);
			return -1;
		}
		if (x < k->min || x > k->max) {
			set_err(err, errlen, "%s (%s): %s is out of range [%lldms, %lldms]", k->env, src,
			        v, k->min, k->max);
			return -1;
		}
		*(int *)(base + k->off) = (int)x;
		return 0;
	}
	}
	return -1;
}

static char *trim(char *s)
{
	char *e;
	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

int config_file_value(char *val, char **out)
{
	if (val[0] == '"' || val[0] == '\'') {
		char *close = strchr(val + 1, val[0]);
		if (!close)
			return -1;
		char *rest = close + 1;
		while (*rest == ' ' || *rest == '\t')
			rest++;
		if (*rest && *rest != '#')
			return -1;
		*close = '\0';
		*out = val + 1;
		return 0;
	}
	/* Unquoted: a `#` after whitespace starts a comment. */
	for (char *p = val; *p; p++) {
		if (*p == '#' && p > val && (p[-1] == ' ' || p[-1] == '\t')) {
			*p = '\0';
			break;
		}
	}
	*out = trim(val);
	return 0;
}

/* Index of name in the NULL-terminated list names, or -1. */
static int name_index(const char *const *names, const char *name)
{
	for (int i = 0; names[i]; i++)
		if (!strcmp(names[i], name))
			return i;
	return -1;
}

/* Applies the settings of the file at path to c. With only non-NULL (a NULL-terminated
 * list of environment names, at most 32), the other settings are checked for syntax and
 * known names but not applied, and bit i of *seen is set when only[i] was applied. */
static int load_file(struct config *c, const char *path, const char *const *only,
                     unsigned *seen, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0, rc = 0;
	char src[64];

	if (!f) {
		set_err(err, errlen, "config file %s: %s", path, strerror(errno));
		return -1;
	}
	while ((n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if ((size_t)n != strlen(line)) {
			set_err(err, errlen, "%s:%d: NUL byte in line", path, lineno);
			rc = -1;
			break;
		}
		char *s = trim(line);
		if (!*s || *s == '#')
			continue;
		/* Shell style: `export ARBITER_X=value` (so the file can also be sourced). */
		if (!strncmp(s, "export", 6) && (s[6] == ' ' || s[6] == '\t'))
			s = trim(s + 7);
		char *eq = strchr(s, '=');
		if (!eq) {
			set_err(err, errlen, "%s:%d: expected KEY=value", path, lineno);
			rc = -1;
			break;
		}
		*eq = '\0';
		char *key = trim(s), *val = trim(eq + 1);
		if (config_file_value(val, &val) < 0) {
			set_err(err, errlen, "%s:%d: unterminated quote in the value of %s", path, lineno, key);
			rc = -1;
			break;
		}
		const struct cfg_key *k = find_env(key, strlen(key));
		if (!k) {
			set_err(err, errlen, "%s:%d: unknown setting '%s'", path, lineno, key);
			rc = -1;
			break;
		}
		int oi = only ? name_index(only, k->env) : -1;
		if (only && oi < 0)
			continue;
		if (only)
			*seen |= 1u << oi;
		snprintf(src, sizeof src, "file line %d", lineno);
		if (apply(c, k, val, src, err, errlen) < 0) {
			rc = -1;
			break;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

void config_usage(FILE *f)
{
	char flag[64];
	fprintf(f, "usage: arbiter worker [--config FILE] [--SETTING VALUE]...\n\n"
	           "Settings (flag, environment variable, default); flags override the\n"
	           "environment, which overrides the file given by --config or ARBITER_CONFIG\n"
	           "(KEY=value lines with the environment names, optionally after `export `;\n"
	           "# comments). Durations (*_MS) take a unit: 500ms, 30s, 5m, 1h (bare number: ms).\n"
	           "A bad setting is reported before any connection is made; exit status 2.\n\n");
	for (size_t i = 0; i < NKEYS; i++) {
		flag_name(&keys[i], flag, sizeof flag);
		fprintf(f, "  --%-18s %-26s default %s\n      %s\n", flag, keys[i].env,
		        keys[i].def ? (*keys[i].def ? keys[i].def : "(empty)") : "hostname-pid",
		        keys[i].help);
	}
}

void config_free(struct config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < NKEYS; i++) {
		if (keys[i].type == CFG_STR || keys[i].type == CFG_STR_NONEMPTY ||
		    keys[i].type == CFG_ENUM) {
			char **slot = (char **)((char *)c + keys[i].off);
			free(*slot);
			*slot = NULL;
		}
	}
}

static char *default_worker_id(void)
{
	char host[256];
	char buf[300];
	if (gethostname(host, sizeof host) < 0 || !host[0])
		snprintf(host, sizeof host, "worker");
	host[sizeof host - 1] = '\0';
	snprintf(buf, sizeof buf, "%s-%ld", host, (long)getpid());
	return xstrdup(buf);
}

/* Long on purpose: the four sources are applied here in their order of precedence (defaults,
 * the file, the environment, the flags), so the order can be read in one place. */
int config_load(int argc, char **argv, struct config *out, char *err, size_t errlen)
{
	const char *file = getenv("ARBITER_CONFIG");
	struct config c;
	char src[80];

	memset(&c, 0, sizeof c);
	for (size_t i = 0; i < NKEYS; i++)
		if (keys[i].def && apply(&c, &keys[i], keys[i].def, "default", err, errlen) < 0)
			goto fail;   /* a bad default is a bug; report it anyway */
	c.worker_id = default_worker_id();

	/* First pass over the flags: --help and --config (the file comes first). */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			config_usage(stdout);
			config_free(&c);
			return 1;
		}
		if (!strcmp(a, "--config")) {
			if (i + 1 >= argc) {
				set_err(err, errlen, "--config needs a file name");
				goto fail;
			}
			file = argv[++i];
		} else if (!strncmp(a, "--config=", 9)) {
			file = a + 9;
		} else if (!strncmp(a, "--", 2) && !strchr(a, '=')) {
			i++;    /* skip the value of another flag */
		}
	}
	if (file && *file && load_file(&c, file, NULL, NULL, err, errlen) < 0)
		goto fail;

	for (size_t i = 0; i < NKEYS; i++) {
		const char *v = getenv(keys[i].env);
		if (v && apply(&c, &keys[i], v, "environment", err, errlen) < 0)
			goto fail;
	}

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val;
		const struct cfg_key *k;
		size_t nl;

		if (strncmp(a, "--", 2) || !a[2]) {
			set_err(err, errlen, "unexpected argument '%s' (see --help)", a);
			goto fail;
		}
		const char *eq = strchr(a, '=');
		nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		if (nl == 6 && !memcmp(a + 2, "config", 6)) {
			if (!eq)
				i++;
			continue;
		}
		k = find_flag(a + 2, nl);
		if (!k) {
			set_err(err, errlen, "unknown option '%.*s' (see --help)", (int)(nl + 2), a);
			goto fail;
		}
		if (eq) {
			val = eq + 1;
		} else {
			if (i + 1 >= argc) {
				set_err(err, errlen, "option '%s' needs a value", a);
				goto fail;
			}
			val = argv[++i];
		}
		snprintf(src, sizeof src, "flag --%.*s", (int)nl, a + 2);
		if (apply(&c, k, val, src, err, errlen) < 0)
			goto fail;
	}
	*out = c;
	return 0;
fail:
	config_free(&c);
	return -1;
}

int config_load_some(const char *const *names, const char *file, struct config *out,
                     unsigned *given, char *err, size_t errlen)
{
	struct config c;
	int n = 0;

	memset(&c, 0, sizeof c);
	*given = 0;
	for (; names[n]; n++) {
		if (n >= 32 || !find_env(names[n], strlen(names[n]))) {
			set_err(err, errlen, "%s: not a setting (or more than 32 asked for)", names[n]);
			return -1;
		}
	}
	for (size_t i = 0; i < NKEYS; i++)
		if (keys[i].def && apply(&c, &keys[i], keys[i].def, "default", err, errlen) < 0)
			goto fail;
	c.worker_id = default_worker_id();
	if (!file)
		file = getenv("ARBITER_CONFIG");
	if (file && *file && load_file(&c, file, names, given, err, errlen) < 0)
		goto fail;
	for (int i = 0; i < n; i++) {
		const struct cfg_key *k = find_env(names[i], strlen(names[i]));
		const char *v = getenv(k->env);
		if (v && apply(&c, k, v, "environment", err, errlen) < 0)
			goto fail;
		if (v)
			*given |= 1u << i;
	}
	*out = c;
	return 0;
fail:
	config_free(&c);
	return -1;
}

const char *config_value_text(const struct config *c, const char *env, char *buf, size_t n)
{
	const struct cfg_key *k = find_env(env, strlen(env));
	const char *base = (const char *)c;

	if (!k)
		return NULL;
	switch (k->type) {
	case CFG_STR:
	case CFG_STR_NONEMPTY:
	case CFG_ENUM: {
		const char *v = *(char *const *)(base + k->off);
		return v ? v : "";
	}
	case CFG_INT:
	case CFG_MS:
		snprintf(buf, n, "%d", *(const int *)(base + k->off));
		return buf;
	case CFG_SIZE:
		snprintf(buf, n, "%zu", *(const size_t *)(base + k->off));
		return buf;
	}
	return NULL;
}

void config_report(const char *cmd, const char *msg)
{
	fprintf(stderr, "arbiter %s: configuration: %s\n", cmd, msg);
}

int config_validate(const struct config *c, char *err, size_t errlen)
{
	struct gcra_rate rate;
	struct gcra_params gp;
	char why[384];

	if (gcra_rate_parse(c->rate_limit, &rate, why, sizeof why) < 0) {
		set_err(err, errlen, "ARBITER_RATE_LIMIT: %s", why);
		return -1;
	}
	if (rate.count && gcra_params_make(&rate, c->rate_burst, &gp, why, sizeof why) < 0) {
		set_err(err, errlen, "ARBITER_RATE_LIMIT/ARBITER_RATE_BURST: %s", why);
		return -1;
	}
	if (http_addr_check(c->metrics_addr, err, errlen) < 0)
		return -1;
	struct rq_url u;
	if (rq_url_parse(c->redis_url, &u, why, sizeof why) < 0) {
		set_err(err, errlen, "ARBITER_REDIS_URL: %s", why);
		return -1;
	}
	memset(&u, 0, sizeof u);   /* may hold the password */
	char *perr = NULL;
	PQconninfoOption *opts = PQconninfoParse(c->database_url, &perr);
	if (!opts) {
		if (perr)
			perr[strcspn(perr, "\n")] = '\0';
		set_err(err, errlen, "ARBITER_DATABASE_URL: not a libpq conninfo or URI (%s)",
		        perr ? perr : "out of memory");
		PQfreemem(perr);
		return -1;
	}
	PQconninfoFree(opts);
	if (redact_check_conn(c->database_url, why, sizeof why) < 0) {
		set_err(err, errlen, "ARBITER_DATABASE_URL: %s", why);
		return -1;
	}
	struct ipkey_allow allow;
	if (ipkey_allow_parse(c->rate_allow, &allow, why, sizeof why) < 0) {
		set_err(err, errlen, "ARBITER_RATE_ALLOW: %s", why);
		return -1;
	}
	ipkey_allow_free(&allow);
	double usd;
	int period_s;
	if (judge_budget_parse(c->judge_budget, &usd, &period_s) < 0) {
		set_err(err, errlen, "ARBITER_JUDGE_BUDGET: '%s' is not USD/hour or USD/day (e.g. 20/day)",
		        c->judge_budget);
		return -1;
	}
	/* The key names (rkeys.h), as the worker derives them from the prefix and the style. */
	bool cluster = rq_url_parse(c->redis_url, &u, why, sizeof why) == 0 && u.cluster;
	memset(&u, 0, sizeof u);
	struct rkeys rk;
	if (rkeys_init(&rk, c->prefix, rkeys_style(c->redis_keys, cluster), err, errlen) < 0)
		return -1;
	bool plain_in_cluster = rk.legacy && cluster && !strchr(rk.base, '{');
	rkeys_free(&rk);
	if (plain_in_cluster) {
		set_err(err, errlen, "ARBITER_REDIS_KEYS=plain cannot work with Redis Cluster (the keys "
		        "would not share a slot): use tagged or auto");
		return -1;
	}
	if (c->retry_max_ms < c->retry_base_ms) {
		set_err(err, errlen, "ARBITER_RETRY_MAX_MS: %d ms is below ARBITER_RETRY_BASE_MS (%d ms)",
		        c->retry_max_ms, c->retry_base_ms);
		return -1;
	}
	if (c->sandbox_uid_base && c->sandbox_uid_base < 1000) {
		set_err(err, errlen, "ARBITER_SANDBOX_UID_BASE: %zu is below 1000 (0 = default)",
		        c->sandbox_uid_base);
		return -1;
	}
	return 0;
}
