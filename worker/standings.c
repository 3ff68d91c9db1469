/*
 * standings: connection, backfill loop and pending count for the standings
 * commands and `arbiter migrate` (see standings.h). The SQL side
 * (standings_backfill_batch and friends) lives in sql/002_standings.sql.
 */
#include "standings.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The one-line message of a failed result (libpq's ends with a newline). */
static void set_err(char *err, size_t errlen, const char *what, PGconn *pg, const PGresult *res)
{
	const char *m = res ? PQresultErrorMessage(res) : NULL;
	if (!m || !*m)
		m = PQerrorMessage(pg);
	snprintf(err, errlen, "%s: %s", what, m);
	size_t n = strlen(err);
	while (n && (err[n - 1] == '\n' || err[n - 1] == ' '))
		err[--n] = '\0';
	for (char *p = err; *p; p++)
		if (*p == '\n' || *p == '\t')
			*p = ' ';
}

static void ignore_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

PGconn *standings_connect(const char *conninfo, const char *app, char *err, size_t errlen)
{
	const char *keys[] = { "connect_timeout", "application_name", "dbname", NULL };
	const char *vals[] = { "10", app, conninfo, NULL };
	PGconn *pg = PQconnectdbParams(keys, vals, 1);
	if (!pg || PQstatus(pg) != CONNECTION_OK) {
		if (pg)
			set_err(err, errlen, "cannot connect", pg, NULL);
		else
			snprintf(err, errlen, "cannot connect: out of memory");
		PQfinish(pg);
		return NULL;
	}
	PQsetNoticeProcessor(pg, ignore_notice, NULL);
	return pg;
}

int standings_pending(PGconn *pg, long long *n, char *err, size_t errlen)
{
	PGresult *res = PQexec(pg, "SELECT count(*) FROM standings_agents WHERE NOT ready");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		set_err(err, errlen, "reading standings_agents", pg, res);
		PQclear(res);
		return -1;
	}
	*n = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

static double now_secs(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long long standings_backfill(PGconn *pg, int batch,
                             void (*progress)(const struct standings_progress *p, void *data),
                             void *data, char *err, size_t errlen)
{
	struct standings_progress p = { 0 };
	double t0 = now_secs();
	char lim[16];
	int idle = 0;

	snprintf(lim, sizeof lim, "%d", batch < 1 ? 1 : batch);
	for (;;) {
		const char *params[] = { lim };
		/* Autocommit: each call is its own transaction, so a stop loses at most one batch. */
		PGresult *res = PQexecParams(pg, "SELECT agents_done, tasks_done, agents_left "
		                             "FROM standings_backfill_batch($1::int)",
		                             1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			set_err(err, errlen, "standings backfill", pg, res);
			PQclear(res);
			return -1;
		}
		long long done = atoll(PQgetvalue(res, 0, 0));
		long long tasks = atoll(PQgetvalue(res, 0, 1));
		long long left = atoll(PQgetvalue(res, 0, 2));
		PQclear(res);
		p.agents_done += done;
		p.tasks_done += tasks;
		p.agents_left = left;
		p.secs = now_secs() - t0;
		if (done && progress)
			progress(&p, data);
		if (left == 0)
			break;
		if (!done) {
			/* Every remaining agent is locked by another session (a commit or another
			 * backfill): wait for them, but not forever. */
			if (++idle > 600) {
				snprintf(err, errlen, "standings backfill: %lld agents stayed locked for a "
				         "minute; run it again later", left);
				return -1;
			}
			usleep(100000);
		} else {
			idle = 0;
		}
	}
	return p.agents_done;
}

int standings_as_of(PGconn *pg, struct standings_asof *out, char *err, size_t errlen)
{
	PGresult *res = PQexec(pg, "SELECT as_of, lag_seconds, pending, applied_results, "
	                       "coalesce(last_result_id, -1) FROM standings_status()");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		set_err(err, errlen, "reading the standings progress", pg, res);
		PQclear(res);
		return -1;
	}
	snprintf(out->as_of, sizeof out->as_of, "%s", PQgetvalue(res, 0, 0));
	out->lag_secs = atof(PQgetvalue(res, 0, 1));
	out->pending = atoll(PQgetvalue(res, 0, 2));
	out->applied = atoll(PQgetvalue(res, 0, 3));
	out->last_result_id = atoll(PQgetvalue(res, 0, 4));
	PQclear(res);
	return 0;
}

void standings_print_as_of(FILE *f, const struct standings_asof *a)
{
	fprintf(f, "standings as of %s (lag %.1f s; %lld result%s not applied yet)\n", a->as_of,
	        a->lag_secs, a->pending, a->pending == 1 ? "" : "s");
}

long long standings_catch_up(PGconn *pg, int batch, void (*progress)(long long applied, void *data),
                             void *data, char *err, size_t errlen)
{
	char lim[16];
	long long total = 0;
	int idle = 0;
	snprintf(lim, sizeof lim, "%d", batch < 1 ? 1 : batch);
	for (;;) {
		const char *params[] = { lim };
		/* Autocommit: one batch, its lease and its watermark are one transaction. */
		PGresult *res = PQexecParams(pg, "SELECT applied, busy, caught_up FROM standings_apply($1::int)",
		                             1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			set_err(err, errlen, "standings projection", pg, res);
			PQclear(res);
			return -1;
		}
		long long n = atoll(PQgetvalue(res, 0, 0));
		bool busy = PQgetvalue(res, 0, 1)[0] == 't';
		bool caught_up = PQgetvalue(res, 0, 2)[0] == 't';
		PQclear(res);
		total += n;
		if (n && progress)
			progress(total, data);
		if (!busy && caught_up)
			return total;
		if (busy && ++idle > 1200) {
			snprintf(err, errlen, "standings projection: the lease stayed held for a minute");
			return -1;
		}
		if (busy)
			usleep(50000);
		else
			idle = 0;
	}
}

/* Top n by window score / by Elo: the n rows are picked (a top-N sort of one table) before
 * the join and the ranking, as sql/README.md recommends; rank() over them equals the
 * view's, since a rank depends only on the rows before it. */
static const char SQL_LB_WINDOW[] =
	"SELECT rank() OVER (ORDER BY t.w_sum DESC) AS rank, t.agent_id, a.name, "
	"round(t.w_sum::numeric / st.window_size, 6) AS window_score, t.w_sum AS window_sum, "
	"t.w_count AS window_count, CASE WHEN t.w_count > 0 THEN round(t.w_sum::numeric / t.w_count, 6) "
	"END AS window_mean, t.w_wins AS wins, t.w_draws AS draws, t.w_losses AS losses, "
	"t.w_best AS window_best, t.tasks, a.elo "
	"FROM (SELECT * FROM standings_agents ORDER BY w_sum DESC, agent_id LIMIT $1) t "
	"JOIN agents a ON a.id = t.agent_id CROSS JOIN standings_settings st "
	"ORDER BY t.w_sum DESC, t.agent_id";
static const char SQL_LB_ELO[] =
	"SELECT rank() OVER (ORDER BY t.elo DESC) AS rank, t.id AS agent_id, t.name, t.elo, "
	"t.match_count, t.win_count AS wins, t.draw_count AS draws, t.loss_count AS losses "
	"FROM (SELECT * FROM agents ORDER BY elo DESC, id LIMIT $1) t ORDER BY t.elo DESC, t.id";
static const char SQL_LB_BEST[] =
	"SELECT rank, agent_id, name, best_score, best_submitted_at, best_submission, tasks, "
	"window_score, elo FROM leaderboard_challenge WHERE challenge_id = $2 LIMIT $1";
static const char SQL_LB_CH_WINDOW[] =
	"SELECT rank() OVER (ORDER BY c.w_sum DESC) AS rank, c.agent_id, a.name, "
	"round(c.w_sum::numeric / st.window_size, 6) AS window_score, c.w_sum AS window_sum, "
	"c.w_count AS window_count, CASE WHEN c.w_count > 0 THEN round(c.w_sum::numeric / c.w_count, 6) "
	"END AS window_mean, c.w_wins AS wins, c.w_draws AS draws, c.w_losses AS losses, "
	"c.w_best AS window_best, c.tasks, a.elo "
	"FROM standings_agent_challenges c JOIN agents a ON a.id = c.agent_id "
	"CROSS JOIN standings_settings st WHERE c.challenge_id = $2 "
	"ORDER BY c.w_sum DESC, c.agent_id LIMIT $1";
static const char SQL_LB_CH_ELO[] =
	"SELECT rank() OVER (ORDER BY a.elo DESC) AS rank, a.id AS agent_id, a.name, a.elo, "
	"a.match_count, c.tasks, c.best_score FROM standings_agent_challenges c "
	"JOIN agents a ON a.id = c.agent_id WHERE c.challenge_id = $2 AND c.tasks > 0 "
	"ORDER BY a.elo DESC, a.id LIMIT $1";

PGresult *standings_leaderboard(PGconn *pg, const char *by, const char *challenge_id,
                                long long limit)
{
	char lim[24];
	snprintf(lim, sizeof lim, "%lld", limit);
	const char *sql = !strcmp(by, "elo") ? (challenge_id ? SQL_LB_CH_ELO : SQL_LB_ELO)
	                : !strcmp(by, "best") ? SQL_LB_BEST
	                : challenge_id ? SQL_LB_CH_WINDOW : SQL_LB_WINDOW;
	const char *params[] = { lim, challenge_id };
	/* --by best without a challenge: $2 is NULL, no rows (the callers refuse it first) */
	int np = challenge_id || sql == SQL_LB_BEST ? 2 : 1;
	return PQexecParams(pg, sql, np, NULL, params, NULL, NULL, 0);
}

int standings_challenge_id(PGconn *pg, const char *slug, char *id, size_t n, char *err,
                           size_t errlen)
{
	const char *p[] = { slug };
	PGresult *res = PQexecParams(pg, "SELECT id FROM challenges WHERE slug = $1", 1, NULL, p,
	                             NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		set_err(err, errlen, "looking up the challenge", pg, res);
		PQclear(res);
		return -1;
	}
	int found = PQntuples(res) > 0;
	if (found)
		snprintf(id, n, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return found;
}

PGresult *standings_window_scores(PGconn *pg)
{
	return PQexec(pg, "SELECT sa.agent_id, a.name, sa.w_sum FROM standings_agents sa "
	              "JOIN agents a ON a.id = sa.agent_id ORDER BY sa.w_sum DESC, sa.agent_id");
}
