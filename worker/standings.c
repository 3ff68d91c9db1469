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
