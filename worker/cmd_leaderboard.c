/*
 * The standings commands (rules: sql/README.md "Standings"):
 *   arbiter leaderboard  top agents by Elo, by window score, or per challenge
 *                        by best score, as a table, JSON or CSV;
 *   arbiter weights      capped normalised weights from the window scores
 *                        (common/weights), or from a file of scores;
 *   arbiter standings    summary, --check (recompute from evaluation_results
 *                        and compare), --backfill, --rebuild [--window N].
 * Command-line tools with blocking libpq; settings as for `arbiter worker`
 * (--database-url, ARBITER_DATABASE_URL, --config). Exit 0 on success, 1 on a
 * database error or a failed check, 2 on bad usage.
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "cmd.h"
#include "config.h"
#include "job.h"
#include "log.h"
#include "standings.h"
#include "util.h"
#include "weights.h"

#define PG_INT2 21
#define PG_INT4 23
#define PG_INT8 20
#define PG_BOOL 16

enum fmt { FMT_TEXT, FMT_JSON, FMT_CSV };

/* ---- shared plumbing ----------------------------------------------------------------- */

/* Splits argv into the command's own flags (handled by own(), which returns how many
 * arguments it consumed, 0 if not its flag, -1 on error) and the settings, then loads
 * the settings. Returns 0, 1 after --help, 2 on a usage error. */
static int load(const char *cmd, int argc, char **argv, int (*own)(int argc, char **argv, int i, void *st),
                void *st, void (*usage)(FILE *f), struct config *cfg)
{
	char **args = xcalloc((size_t)argc + 1, sizeof *args);
	int nargs = 0;
	args[nargs++] = argv[0];
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			free(args);
			return 1;
		}
		int used = own(argc, argv, i, st);
		if (used < 0) {
			free(args);
			return 2;
		}
		if (used > 0) {
			i += used - 1;
			continue;
		}
		args[nargs++] = argv[i];
		/* A settings flag's value travels with it. */
		if (!strncmp(argv[i], "--", 2) && !strchr(argv[i], '=') && i + 1 < argc &&
		    strncmp(argv[i + 1], "--", 2))
			args[nargs++] = argv[++i];
	}
	char err[512];
	int rc = config_load(nargs, args, cfg, err, sizeof err);
	free(args);
	if (rc < 0) {
		fprintf(stderr, "arbiter %s: %s\n", cmd, err);
		usage(stderr);
		return 2;
	}
	return rc;
}

/* The value of flag `name` at argv[i] ("--name V" or "--name=V"): sets *val and returns the
 * arguments used, 0 when argv[i] is another flag, -1 (message printed) when the value is missing. */
static int flag_value(const char *cmd, int argc, char **argv, int i, const char *name, const char **val)
{
	size_t n = strlen(name);
	if (strncmp(argv[i], name, n))
		return 0;
	if (argv[i][n] == '=') {
		*val = argv[i] + n + 1;
		return 1;
	}
	if (argv[i][n])
		return 0;
	if (i + 1 >= argc) {
		fprintf(stderr, "arbiter %s: %s needs a value\n", cmd, name);
		return -1;
	}
	*val = argv[i + 1];
	return 2;
}

static bool parse_int(const char *s, long long lo, long long hi, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static PGconn *connect_db(const char *cmd, const struct config *cfg)
{
	char err[1024];
	PGconn *pg = standings_connect(cfg->database_url, "arbiter-standings", err, sizeof err);
	if (!pg) {
		char *shown = log_redact_url(cfg->database_url);
		fprintf(stderr, "arbiter %s: %s (database %s)\n", cmd, err, shown);
		free(shown);
	}
	return pg;
}

static void pg_fail(const char *cmd, const char *what, PGconn *pg, PGresult *res)
{
	const char *m = res ? PQresultErrorMessage(res) : "";
	if (!m || !*m)
		m = PQerrorMessage(pg);
	fprintf(stderr, "arbiter %s: %s: %s", cmd, what, m);
	if (!*m || m[strlen(m) - 1] != '\n')
		fputc('\n', stderr);
}

/* Refuses (exit 1) while agents wait for the backfill: their numbers would be zero. */
static int require_ready(const char *cmd, PGconn *pg)
{
	char err[512];
	long long n;
	if (standings_pending(pg, &n, err, sizeof err) < 0) {
		fprintf(stderr, "arbiter %s: %s (has `arbiter migrate` been run?)\n", cmd, err);
		return 1;
	}
	if (n > 0) {
		fprintf(stderr, "arbiter %s: %lld agents are waiting for the standings backfill; "
		        "run `arbiter standings --backfill` (or `arbiter migrate`) first\n", cmd, n);
		return 1;
	}
	/* The standings are a projection applied after the commit: say how current. */
	struct standings_asof a;
	if (standings_as_of(pg, &a, err, sizeof err) < 0) {
		fprintf(stderr, "arbiter %s: %s (has `arbiter migrate` been run?)\n", cmd, err);
		return 1;
	}
	standings_print_as_of(stderr, &a);
	return 0;
}

/* Text without control characters (names come from API servers). */
static void put_clean(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

static void put_csv(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static json_t *json_cell(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return json_null();
	const char *v = PQgetvalue(res, row, col);
	switch (PQftype(res, col)) {
	case PG_INT2:
	case PG_INT4:
	case PG_INT8:
		return json_integer(strtoll(v, NULL, 10));
	case PG_BOOL:
		return json_boolean(v[0] == 't');
	default:
		return json_string(v);   /* numerics stay exact decimal text */
	}
}

/* Prints a result as an aligned table, CSV (header + rows) or a JSON array of objects. */
static void print_rows(const PGresult *res, enum fmt fmt, json_t *json_rows)
{
	int nr = PQntuples(res), nc = PQnfields(res);
	if (fmt == FMT_JSON) {
		for (int i = 0; i < nr; i++) {
			json_t *o = json_object();
			for (int c = 0; c < nc; c++)
				json_object_set_new(o, PQfname(res, c), json_cell(res, i, c));
			json_array_append_new(json_rows, o);
		}
		return;
	}
	if (fmt == FMT_CSV) {
		for (int c = 0; c < nc; c++) {
			if (c)
				fputc(',', stdout);
			put_csv(stdout, PQfname(res, c));
		}
		fputc('\n', stdout);
		for (int i = 0; i < nr; i++) {
			for (int c = 0; c < nc; c++) {
				if (c)
					fputc(',', stdout);
				put_csv(stdout, PQgetvalue(res, i, c));
			}
			fputc('\n', stdout);
		}
		return;
	}
	size_t *w = xcalloc((size_t)nc, sizeof *w);
	for (int c = 0; c < nc; c++) {
		w[c] = strlen(PQfname(res, c));
		for (int i = 0; i < nr; i++)
			if ((size_t)PQgetlength(res, i, c) > w[c])
				w[c] = (size_t)PQgetlength(res, i, c);
		if (w[c] > 40)
			w[c] = 40;
	}
	for (int c = 0; c < nc; c++)
		printf("%s%-*s", c ? "  " : "", (int)w[c], PQfname(res, c));
	fputc('\n', stdout);
	for (int i = 0; i < nr; i++) {
		for (int c = 0; c < nc; c++) {
			const char *v = PQgetvalue(res, i, c);
			if (c)
				fputs("  ", stdout);
			put_clean(stdout, v);
			for (size_t k = strlen(v); k < w[c]; k++)
				fputc(' ', stdout);
		}
		fputc('\n', stdout);
	}
	free(w);
}

static void print_json(json_t *o)
{
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (s) {
		puts(s);
		free(s);
	}
}

static int set_fmt(const char *cmd, enum fmt *f, enum fmt v)
{
	if (*f != FMT_TEXT && *f != v) {
		fprintf(stderr, "arbiter %s: --json and --csv exclude each other\n", cmd);
		return -1;
	}
	*f = v;
	return 1;
}

/* ---- arbiter leaderboard -------------------------------------------------------------- */

struct lb_opts {
	const char *challenge, *by;
	long long limit;
	enum fmt fmt;
};

static void lb_usage(FILE *f)
{
	fprintf(f,
	        "usage: arbiter leaderboard [--challenge SLUG] [--by elo|window|best] [--limit N]\n"
	        "                           [--json|--csv] [settings]\n"
	        "\n"
	        "The top agents (rules in the README, \"Standings\"):\n"
	        "  --by window  window score: the sum of the scores of each agent's last N tasks\n"
	        "               divided by N (default without --challenge)\n"
	        "  --by elo     Elo rating\n"
	        "  --by best    with --challenge: each agent's best score on it, equal scores\n"
	        "               ranked by who got it first (default with --challenge)\n"
	        "  --challenge SLUG  only that challenge (window and best scores on it; elo of\n"
	        "               the agents that have a task on it)\n"
	        "  --limit N    rows (default 100, at most 1000000)\n"
	        "  --json, --csv  machine-readable output\n"
	        "Equal values share a rank. Settings as for `arbiter worker` (--database-url,\n"
	        "ARBITER_DATABASE_URL, --config). Exit 0, 1 on a database error or an unknown\n"
	        "challenge, 2 on bad usage.\n");
}

static int lb_own(int argc, char **argv, int i, void *p)
{
	struct lb_opts *o = p;
	const char *v = NULL;
	int n;
	if (!strcmp(argv[i], "--json"))
		return set_fmt("leaderboard", &o->fmt, FMT_JSON);
	if (!strcmp(argv[i], "--csv"))
		return set_fmt("leaderboard", &o->fmt, FMT_CSV);
	if ((n = flag_value("leaderboard", argc, argv, i, "--challenge", &v)) != 0) {
		o->challenge = v;
		return n;
	}
	if ((n = flag_value("leaderboard", argc, argv, i, "--by", &v)) != 0) {
		if (n > 0 && strcmp(v, "elo") && strcmp(v, "window") && strcmp(v, "best")) {
			fprintf(stderr, "arbiter leaderboard: --by must be elo, window or best, not '%s'\n", v);
			return -1;
		}
		o->by = v;
		return n;
	}
	if ((n = flag_value("leaderboard", argc, argv, i, "--limit", &v)) != 0) {
		if (n > 0 && !parse_int(v, 1, 1000000, &o->limit)) {
			fprintf(stderr, "arbiter leaderboard: --limit must be an integer from 1 to 1000000, "
			        "not '%s'\n", v);
			return -1;
		}
		return n;
	}
	return 0;
}

int cmd_leaderboard(int argc, char **argv)
{
	struct lb_opts o = { .limit = 100, .fmt = FMT_TEXT };
	struct config cfg;
	int rc = load("leaderboard", argc, argv, lb_own, &o, lb_usage, &cfg);
	if (rc)
		return rc == 1 ? 0 : rc;
	const char *by = o.by ? o.by : o.challenge ? "best" : "window";
	if (!strcmp(by, "best") && !o.challenge) {
		fprintf(stderr, "arbiter leaderboard: --by best needs --challenge SLUG\n");
		config_free(&cfg);
		return 2;
	}
	PGconn *pg = connect_db("leaderboard", &cfg);
	config_free(&cfg);
	if (!pg)
		return 1;
	rc = 1;
	PGresult *res = NULL;
	char chid[64] = "";
	if (require_ready("leaderboard", pg))
		goto out;
	if (o.challenge) {
		char err[512];
		int found = standings_challenge_id(pg, o.challenge, chid, sizeof chid, err, sizeof err);
		if (found < 0) {
			fprintf(stderr, "arbiter leaderboard: %s\n", err);
			goto out;
		}
		if (found == 0) {
			fprintf(stderr, "arbiter leaderboard: no challenge with slug '");
			put_clean(stderr, o.challenge);
			fprintf(stderr, "'\n");
			goto out;
		}
	}
	res = standings_leaderboard(pg, by, o.challenge ? chid : NULL, o.limit);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_fail("leaderboard", "reading the leaderboard", pg, res);
		goto out;
	}
	if (o.fmt == FMT_JSON) {
		json_t *root = json_object(), *rows = json_array();
		json_object_set_new(root, "by", json_string(by));
		json_object_set_new(root, "challenge", o.challenge ? json_string(o.challenge) : json_null());
		print_rows(res, o.fmt, rows);
		json_object_set_new(root, "rows", rows);
		print_json(root);
		json_decref(root);
	} else {
		print_rows(res, o.fmt, NULL);
	}
	rc = 0;
out:
	PQclear(res);
	PQfinish(pg);
	return rc;
}

/* ---- arbiter weights ------------------------------------------------------------------ */


struct w_opts {
	const char *cap, *scores;
	enum fmt fmt;
};

static void w_usage(FILE *f)
{
	fprintf(f,
	        "usage: arbiter weights [--cap 0.15] [--json] [--scores FILE] [settings]\n"
	        "\n"
	        "Normalised weights from the agents' window scores, no agent above the cap: a\n"
	        "weight above it is set to the cap and the excess is shared among the others in\n"
	        "proportion to their scores, until none is above. Exact integer arithmetic; each\n"
	        "weight is printed with 9 decimals, rounded by the largest-remainder method so\n"
	        "the printed weights sum to exactly 1 (README, \"Standings\").\n"
	        "  --cap C       the cap, a decimal in (0, 1] with at most 9 places (default 0.15);\n"
	        "                when fewer than 1/C agents have a positive score it is raised to\n"
	        "                1/(their number)\n"
	        "  --json        JSON: also the exact weight of each agent as a fraction\n"
	        "  --scores FILE no database: lines `ID SCORE` (a non-negative integer; `#`\n"
	        "                comments), FILE - for stdin; ties go to the earlier line\n"
	        "Exit 0, 1 on a database error or while the backfill is pending, 2 on bad usage\n"
	        "or input.\n");
}

static int w_own(int argc, char **argv, int i, void *p)
{
	struct w_opts *o = p;
	const char *v = NULL;
	int n;
	if (!strcmp(argv[i], "--json"))
		return set_fmt("weights", &o->fmt, FMT_JSON);
	if ((n = flag_value("weights", argc, argv, i, "--cap", &v)) != 0) {
		o->cap = v;
		return n;
	}
	if ((n = flag_value("weights", argc, argv, i, "--scores", &v)) != 0) {
		o->scores = v;
		return n;
	}
	return 0;
}

struct wrow {
	char *id, *name;
	int64_t score;
};

/* Reads `ID SCORE` lines. Returns the count, or -1 (message printed). */
static long read_scores(const char *path, struct wrow **out)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	if (!f) {
		fprintf(stderr, "arbiter weights: %s: %s\n", path, strerror(errno));
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	long n = 0, alloc = 0, lineno = 0;
	struct wrow *rows = NULL;
	while (getline(&line, &cap, f) >= 0) {
		lineno++;
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '#' || *s == '\n' || *s == '\r')
			continue;
		char *id = strtok(s, " \t\r\n"), *sc = strtok(NULL, " \t\r\n"), *extra = strtok(NULL, " \t\r\n");
		long long v;
		if (!id || !sc || extra || !parse_int(sc, 0, INT64_MAX, &v)) {
			fprintf(stderr, "arbiter weights: %s line %ld: expected `ID SCORE` with SCORE a "
			        "non-negative integer\n", path, lineno);
			goto fail;
		}
		if (n == alloc) {
			alloc = alloc ? alloc * 2 : 64;
			rows = xrealloc(rows, (size_t)alloc * sizeof *rows);
		}
		rows[n].id = xstrdup(id);
		rows[n].name = NULL;
		rows[n].score = v;
		n++;
	}
	free(line);
	if (f != stdin)
		fclose(f);
	*out = rows;
	return n;
fail:
	free(line);
	if (f != stdin)
		fclose(f);
	for (long i = 0; i < n; i++)
		free(rows[i].id);
	free(rows);
	return -1;
}

/* Reads the window scores of every agent, best first. Returns the count, or -1
 * (message printed: a database error, or the backfill is pending). */
static long w_read_db(const struct config *cfg, struct wrow **out)
{
	PGconn *pg = connect_db("weights", cfg);
	if (!pg)
		return -1;
	if (require_ready("weights", pg)) {
		PQfinish(pg);
		return -1;
	}
	PGresult *res = standings_window_scores(pg);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_fail("weights", "reading the window scores", pg, res);
		PQclear(res);
		PQfinish(pg);
		return -1;
	}
	long n = PQntuples(res);
	struct wrow *rows = xcalloc((size_t)n + 1, sizeof *rows);
	for (long i = 0; i < n; i++) {
		rows[i].id = xstrdup(PQgetvalue(res, (int)i, 0));
		rows[i].name = xstrdup(PQgetvalue(res, (int)i, 1));
		rows[i].score = strtoll(PQgetvalue(res, (int)i, 2), NULL, 10);
	}
	PQclear(res);
	PQfinish(pg);
	*out = rows;
	return n;
}

/* Writes the weights as one JSON document, streamed: one line per agent, no
 * tree built in memory (100,000 agents would take a second in jansson). */
static void w_print_json(const struct w_opts *o, const struct wrow *rows, long n,
                         const struct weights_out *w)
{
	struct strbuf sb = { 0 };
	char a[48], b[48];
	strbuf_addlit(&sb, "{\n  \"cap\": ");
	job_json_str(&sb, o->cap);
	strbuf_addf(&sb, ",\n  \"effective_cap\": \"%llu/%llu\",\n  \"agents\": %ld,\n"
	            "  \"positive\": %zu,\n  \"capped\": %zu,\n  \"scale\": %llu,\n  \"weights\": [",
	            (unsigned long long)w->cap_num, (unsigned long long)w->cap_den, n, w->positive,
	            w->capped, (unsigned long long)WEIGHTS_SCALE);
	fwrite(sb.buf, 1, sb.len, stdout);
	for (long i = 0; i < n; i++) {
		sb.len = 0;
		strbuf_addlit(&sb, "\n    {\"agent_id\": ");
		job_json_str(&sb, rows[i].id);
		if (rows[i].name) {
			strbuf_addlit(&sb, ", \"name\": ");
			job_json_str(&sb, rows[i].name);
		}
		weights_u128 g = weights_gcd(w->num[i], w->den);
		char wt[32];
		strbuf_addf(&sb, ", \"score\": %lld, \"weight\": \"%s\", \"units\": %llu, "
		            "\"exact\": \"%s/%s\"}%s", (long long)rows[i].score,
		            weights_units_str(w->units[i], wt), (unsigned long long)w->units[i], weights_u128_str(w->num[i] / g, a),
		            weights_u128_str(w->den / g, b), i + 1 < n ? "," : "");
		fwrite(sb.buf, 1, sb.len, stdout);
	}
	fputs(n ? "\n  ]\n}\n" : "]\n}\n", stdout);
	strbuf_free(&sb);
}

/* Writes the weights as text: a summary line, then `ID WEIGHT SCORE [NAME]`. */
static void w_print_text(const struct w_opts *o, const struct wrow *rows, long n,
                         const struct weights_out *w)
{
	printf("# cap %s (effective %llu/%llu), %ld agents, %zu capped; weights sum to 1\n", o->cap,
	       (unsigned long long)w->cap_num, (unsigned long long)w->cap_den, n, w->capped);
	for (long i = 0; i < n; i++) {
		char wt[32];
		printf("%s  %s  %lld", rows[i].id, weights_units_str(w->units[i], wt),
		       (long long)rows[i].score);
		if (rows[i].name) {
			fputs("  ", stdout);
			put_clean(stdout, rows[i].name);
		}
		fputc('\n', stdout);
	}
}

/* Computes and prints the weights of rows[0..n-1]. Returns 0, or 2 when the
 * scores are out of range. */
static int w_compute_print(const struct w_opts *o, uint64_t cap_num, uint64_t cap_den,
                           const struct wrow *rows, long n)
{
	int64_t *scores = xcalloc((size_t)n + 1, sizeof *scores);
	uint64_t *units = xcalloc((size_t)n + 1, sizeof *units);
	weights_u128 *num = xcalloc((size_t)n + 1, sizeof *num);
	for (long i = 0; i < n; i++)
		scores[i] = rows[i].score;
	struct weights_out w = { .units = units, .num = num };
	int rc = 0;
	if (weights_capped(scores, (size_t)n, cap_num, cap_den, WEIGHTS_SCALE, &w) < 0) {
		fprintf(stderr, "arbiter weights: the scores are out of range (negative, or their sum "
		        "above 2^63)\n");
		rc = 2;
	} else if (o->fmt == FMT_JSON) {
		w_print_json(o, rows, n, &w);
	} else {
		w_print_text(o, rows, n, &w);
	}
	free(scores);
	free(units);
	free(num);
	return rc;
}

int cmd_weights(int argc, char **argv)
{
	struct w_opts o = { .cap = "0.15", .fmt = FMT_TEXT };
	struct config cfg;
	struct wrow *rows = NULL;
	long n;
	uint64_t cap_num, cap_den;

	int rc = load("weights", argc, argv, w_own, &o, w_usage, &cfg);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (weights_parse_cap(o.cap, &cap_num, &cap_den) < 0) {
		fprintf(stderr, "arbiter weights: --cap must be a decimal in (0, 1] with at most 9 "
		        "decimal places, not '%s'\n", o.cap);
		config_free(&cfg);
		return 2;
	}
	n = o.scores ? read_scores(o.scores, &rows) : w_read_db(&cfg, &rows);
	config_free(&cfg);
	if (n < 0)
		return o.scores ? 2 : 1;
	rc = w_compute_print(&o, cap_num, cap_den, rows, n);
	for (long i = 0; i < n; i++) {
		free(rows[i].id);
		free(rows[i].name);
	}
	free(rows);
	return rc;
}

/* ---- arbiter standings ---------------------------------------------------------------- */

struct s_opts {
	bool check, backfill, rebuild, json;
	long long batch, window;
};

static void s_usage(FILE *f)
{
	fprintf(f,
	        "usage: arbiter standings [--check | --backfill | --rebuild [--window N]]\n"
	        "                         [--batch N] [--json] [settings]\n"
	        "\n"
	        "The rolling-window standings (README, \"Standings\"). Without an action: the\n"
	        "window size and how many agents and tasks are counted.\n"
	        "  --check       recompute every task and aggregate from evaluation_results and\n"
	        "                compare with the stored standings; exit 1 on any difference (each\n"
	        "                is printed), while agents wait for the backfill, or while the\n"
	        "                projection has committed results left to apply (not compared)\n"
	        "  --backfill    build the standings of agents waiting for it, --batch agents per\n"
	        "                transaction (default 500), with a progress line; resumable; then\n"
	        "                apply the results the projection has not applied yet\n"
	        "  --rebuild     drop and rebuild every aggregate (e.g. --window N: a new window\n"
	        "                size, 1 to 100000); the commit path keeps running meanwhile\n"
	        "  --json        the summary or the check as JSON\n");
}

static int s_own(int argc, char **argv, int i, void *p)
{
	struct s_opts *o = p;
	const char *v = NULL;
	int n;
	if (!strcmp(argv[i], "--check"))
		return o->check = true, 1;
	if (!strcmp(argv[i], "--backfill"))
		return o->backfill = true, 1;
	if (!strcmp(argv[i], "--rebuild"))
		return o->rebuild = true, 1;
	if (!strcmp(argv[i], "--json"))
		return o->json = true, 1;
	if ((n = flag_value("standings", argc, argv, i, "--batch", &v)) != 0) {
		if (n > 0 && !parse_int(v, 1, 1000000, &o->batch)) {
			fprintf(stderr, "arbiter standings: --batch must be an integer from 1 to 1000000\n");
			return -1;
		}
		return n;
	}
	if ((n = flag_value("standings", argc, argv, i, "--window", &v)) != 0) {
		if (n > 0 && !parse_int(v, 1, 100000, &o->window)) {
			fprintf(stderr, "arbiter standings: --window must be an integer from 1 to 100000\n");
			return -1;
		}
		return n;
	}
	return 0;
}

static void print_progress(const struct standings_progress *p, void *data)
{
	(void)data;
	long long total = p->agents_done + p->agents_left;
	printf("standings backfill: %lld/%lld agents (%.0f%%), %lld tasks, %.1f s\n", p->agents_done,
	       total, total ? 100.0 * (double)p->agents_done / (double)total : 100.0, p->tasks_done,
	       p->secs);
	fflush(stdout);
}

/* One snapshot (REPEATABLE READ) for the progress and the comparison: the standings are
 * compared with the results only when that snapshot shows every committed result applied
 * (the projection caught up); otherwise the lag is reported and the exit code is 1. */
static void print_applied(long long applied, void *data)
{
	(void)data;
	printf("standings projection: %lld results applied\n", applied);
	fflush(stdout);
}

static int s_check(PGconn *pg, bool json)
{
	long long pending;
	char err[512];
	struct standings_asof a;
	PGresult *res = PQexec(pg, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		pg_fail("standings", "check", pg, res);
		PQclear(res);
		return 1;
	}
	PQclear(res);
	if (standings_pending(pg, &pending, err, sizeof err) < 0 ||
	    standings_as_of(pg, &a, err, sizeof err) < 0) {
		fprintf(stderr, "arbiter standings: %s\n", err);
		PQclear(PQexec(pg, "ROLLBACK"));
		return 1;
	}
	if (a.pending > 0) {
		PQclear(PQexec(pg, "ROLLBACK"));
		if (json) {
			json_t *root = json_object();
			json_object_set_new(root, "behind", json_integer(a.pending));
			json_object_set_new(root, "as_of", json_string(a.as_of));
			json_object_set_new(root, "lag_seconds", json_real(a.lag_secs));
			print_json(root);
			json_decref(root);
		} else {
			standings_print_as_of(stdout, &a);
			printf("standings check: the projection is %lld result%s behind; not compared\n",
			       a.pending, a.pending == 1 ? "" : "s");
		}
		return 1;
	}
	res = PQexec(pg, "SELECT what, agent_id, challenge_id, submission_id, stored, expected "
	             "FROM standings_check() ORDER BY 1, 2, 3, 4");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_fail("standings", "check", pg, res);
		PQclear(res);
		PQclear(PQexec(pg, "ROLLBACK"));
		return 1;
	}
	PQclear(PQexec(pg, "ROLLBACK"));
	int nd = PQntuples(res);
	if (json) {
		json_t *root = json_object(), *rows = json_array();
		json_object_set_new(root, "differences", json_integer(nd));
		json_object_set_new(root, "pending_agents", json_integer(pending));
		json_object_set_new(root, "behind", json_integer(0));
		json_object_set_new(root, "as_of", json_string(a.as_of));
		print_rows(res, FMT_JSON, rows);
		json_object_set_new(root, "rows", rows);
		print_json(root);
		json_decref(root);
	} else {
		for (int i = 0; i < nd && i < 50; i++) {
			printf("difference in %s: agent %s", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
			if (!PQgetisnull(res, i, 2))
				printf(" challenge %s", PQgetvalue(res, i, 2));
			if (!PQgetisnull(res, i, 3))
				printf(" submission %s", PQgetvalue(res, i, 3));
			printf(": stored %s, recomputed %s\n", PQgetvalue(res, i, 4), PQgetvalue(res, i, 5));
		}
		if (nd > 50)
			printf("... and %d more\n", nd - 50);
		standings_print_as_of(stdout, &a);
		if (pending)
			printf("standings check: %lld agents wait for the backfill and were not checked\n",
			       pending);
		printf("standings check: %d difference%s\n", nd, nd == 1 ? "" : "s");
	}
	PQclear(res);
	return nd || pending ? 1 : 0;
}

static int s_summary(PGconn *pg, bool json)
{
	struct standings_asof a;
	char err[512];
	if (standings_as_of(pg, &a, err, sizeof err) < 0) {
		fprintf(stderr, "arbiter standings: %s\n", err);
		return 1;
	}
	PGresult *res = PQexec(pg,
		"SELECT (SELECT window_size FROM standings_settings) AS window_size, "
		"count(*) FILTER (WHERE ready) AS agents_ready, count(*) FILTER (WHERE NOT ready) "
		"AS agents_pending, coalesce(sum(tasks), 0)::bigint AS tasks FROM standings_agents");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_fail("standings", "reading the summary", pg, res);
		PQclear(res);
		return 1;
	}
	if (json) {
		json_t *rows = json_array();
		print_rows(res, FMT_JSON, rows);
		json_t *o = json_array_get(rows, 0);
		json_object_set_new(o, "as_of", json_string(a.as_of));
		json_object_set_new(o, "lag_seconds", json_real(a.lag_secs));
		json_object_set_new(o, "results_not_applied", json_integer(a.pending));
		json_object_set_new(o, "results_applied", json_integer(a.applied));
		json_object_set_new(o, "last_result_id", a.last_result_id < 0 ? json_null()
		                    : json_integer(a.last_result_id));
		print_json(o);
		json_decref(rows);
	} else {
		printf("window size %s; agents counted %s, waiting for the backfill %s; tasks %s\n",
		       PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
		       PQgetvalue(res, 0, 3));
		standings_print_as_of(stdout, &a);
	}
	PQclear(res);
	return 0;
}

int cmd_standings(int argc, char **argv)
{
	struct s_opts o = { .batch = 500 };
	struct config cfg;
	int rc = load("standings", argc, argv, s_own, &o, s_usage, &cfg);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (o.check + o.backfill + o.rebuild > 1 || (o.window && !o.rebuild)) {
		fprintf(stderr, "arbiter standings: one of --check, --backfill, --rebuild; --window "
		        "goes with --rebuild\n");
		config_free(&cfg);
		return 2;
	}
	PGconn *pg = connect_db("standings", &cfg);
	config_free(&cfg);
	if (!pg)
		return 1;
	char err[1024];
	if (o.check) {
		rc = s_check(pg, o.json);
	} else if (o.backfill || o.rebuild) {
		rc = 0;
		if (o.rebuild) {
			char win[24];
			snprintf(win, sizeof win, "%lld", o.window);
			const char *p[] = { o.window ? win : NULL };
			PGresult *res = PQexecParams(pg, "SELECT standings_reset($1::int)", 1, NULL, p, NULL,
			                             NULL, 0);
			if (PQresultStatus(res) != PGRES_TUPLES_OK) {
				pg_fail("standings", "reset", pg, res);
				rc = 1;
			} else {
				printf("standings reset: %s agents to rebuild\n", PQgetvalue(res, 0, 0));
			}
			PQclear(res);
		}
		if (rc == 0) {
			long long n = standings_backfill(pg, (int)o.batch, print_progress, NULL, err, sizeof err);
			if (n < 0) {
				fprintf(stderr, "arbiter standings: %s\n", err);
				rc = 1;
			} else {
				printf("standings backfill: done (%lld agents)\n", n);
			}
		}
		if (rc == 0) {
			/* The projection's catch-up: results committed since its last batch. */
			long long n = standings_catch_up(pg, 5000, print_applied, NULL, err, sizeof err);
			if (n < 0) {
				fprintf(stderr, "arbiter standings: %s\n", err);
				rc = 1;
			} else {
				printf("standings projection: caught up (%lld results applied)\n", n);
			}
		}
	} else {
		rc = s_summary(pg, o.json);
	}
	PQfinish(pg);
	return rc;
}
