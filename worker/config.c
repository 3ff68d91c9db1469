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

#include "util.h"

enum cfg_type {
	CFG_STR,        /* any text (may be empty) */
	CFG_STR_NONEMPTY,
	CFG_ENUM,       /* one of a '|'-separated list */
	CFG_INT,        /* decimal int within [min, max] */
	CFG_SIZE,       /* decimal size_t within [min, max] */
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

/* The one table of settings (CONTRACT §8 plus the worker's own knobs). */
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
	{ "ARBITER_CLAIM_IDLE_MS", CFG_INT, OFF(claim_idle_ms), "60000", 100, 86400000, NULL,
	  "a pending entry idle this long is reclaimed from a dead consumer" },
	{ "ARBITER_MAX_DELIVERIES", CFG_INT, OFF(max_deliveries), "5", 1, 1000, NULL,
	  "deliveries/attempts before a failing job is dead-lettered" },
	{ "ARBITER_RECONCILE_MS", CFG_INT, OFF(reconcile_ms), "30000", 100, 86400000, NULL,
	  "how often queued submissions missing from Redis are re-enqueued" },
	{ "ARBITER_METRICS_ADDR", CFG_STR, OFF(metrics_addr), "127.0.0.1:9464", 0, 0, NULL,
	  "host:port of /metrics /healthz /readyz; port 0 = any; empty disables" },
	{ "ARBITER_SANDBOX_SLOTS", CFG_INT, OFF(sandbox_slots), "0", 0, 4096, NULL,
	  "concurrent sandboxes; 0 = number of cores" },
	{ "ARBITER_LANGUAGES_FILE", CFG_STR_NONEMPTY, OFF(languages_file), "deploy/languages.json", 0, 0, NULL,
	  "language table of the sandboxed evaluators" },
	{ "ARBITER_LOG_LEVEL", CFG_ENUM, OFF(log_level), "info", 0, 0, "debug|info|warn|error",
	  "minimum log level" },
	{ "ARBITER_DRAIN_MS", CFG_INT, OFF(drain_ms), "30000", 0, 3600000, NULL,
	  "SIGTERM: deadline to finish jobs in flight before releasing them" },
	{ "ARBITER_BATCH_MAX", CFG_INT, OFF(batch_max), "64", 1, 1000, NULL,
	  "evaluations per commit transaction" },
	{ "ARBITER_MAX_STRING_BYTES", CFG_SIZE, OFF(max_string_bytes), "1048576", 1, 1073741824, NULL,
	  "longest string a primitive compares" },
	{ "ARBITER_PG_POOL_SIZE", CFG_INT, OFF(pg_pool_size), "4", 2, 64, NULL,
	  "PostgreSQL connections per process" },
	{ "ARBITER_COMMIT_DELAY_MS", CFG_INT, OFF(commit_delay_ms), "0", 0, 1000, NULL,
	  "longest wait to fill a commit batch while another commit runs (0 = none)" },
	{ "ARBITER_PG_QUERY_TIMEOUT_MS", CFG_INT, OFF(pg_query_timeout_ms), "30000", 100, 3600000, NULL,
	  "a PostgreSQL round trip (or wait for a connection) longer than this is abandoned and retried" },
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

static int load_file(struct config *c, const char *path, char *err, size_t errlen)
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
		char *eq = strchr(s, '=');
		if (!eq) {
			set_err(err, errlen, "%s:%d: expected KEY=value", path, lineno);
			rc = -1;
			break;
		}
		*eq = '\0';
		char *key = trim(s), *val = trim(eq + 1);
		size_t vl = strlen(val);
		if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) {
			val[vl - 1] = '\0';
			val++;
		}
		const struct cfg_key *k = find_env(key, strlen(key));
		if (!k) {
			set_err(err, errlen, "%s:%d: unknown setting '%s'", path, lineno, key);
			rc = -1;
			break;
		}
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
	           "(KEY=value lines with the environment names, # comments).\n\n");
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
	if (file && *file && load_file(&c, file, err, errlen) < 0)
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
