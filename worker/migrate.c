/*
 * migrate: applies the compiled-in SQL migrations (see migrate.h).
 *
 * Blocking libpq on purpose: this runs from `arbiter migrate` and from tests,
 * never on the worker's event loop. Concurrency: every transaction of a run
 * takes the same transaction-level advisory lock (pg_advisory_xact_lock) first,
 * so replicas started together apply each migration once; the others wait,
 * then find it recorded. Nothing is session-scoped (no session lock, no session
 * SET): the lock and the settings end with their transaction, so the command is
 * safe through PgBouncer in transaction pooling mode, where consecutive
 * transactions of one client may run on different server connections.
 */
#include "migrate.h"
#include "redact.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "log.h"
#include "util.h"

/* pg_advisory_xact_lock key shared by every arbiter migrate run ("arbmigr" in ASCII). */
#define MIGRATE_LOCK_KEY "7161138183007570"

int migrate_latest(void)
{
	int v = 0;
	for (size_t i = 0; i < migrate_nlist; i++)
		if (migrate_list[i].version > v)
			v = migrate_list[i].version;
	return v;
}

struct mctx {
	PGconn *pg;
	char *password;     /* from the conninfo, masked out of every message; may be NULL */
	char *err;
	size_t errlen;
};

/* Replaces every occurrence of the password in buf (in place, NUL-terminated) by "***". */
static void mask_password(const struct mctx *m, char *buf, size_t cap)
{
	if (!m->password || !m->password[0])
		return;
	size_t plen = strlen(m->password);
	struct strbuf out = { 0 };
	const char *p = buf;
	const char *hit;
	bool any = false;
	while ((hit = strstr(p, m->password))) {
		strbuf_add(&out, p, (size_t)(hit - p));
		strbuf_addlit(&out, "***");
		p = hit + plen;
		any = true;
	}
	if (any) {
		strbuf_add(&out, p, strlen(p));
		snprintf(buf, cap, "%s", out.buf);
	}
	strbuf_free(&out);
}

__attribute__((format(printf, 2, 3)))
static int fail(struct mctx *m, const char *fmt, ...)
{
	if (m->err && m->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m->err, m->errlen, fmt, ap);
		va_end(ap);
		/* libpq messages end with a newline; callers print their own. */
		size_t n = strlen(m->err);
		while (n && (m->err[n - 1] == '\n' || m->err[n - 1] == ' '))
			m->err[--n] = '\0';
		/* One line: libpq continues messages on tab-indented lines. */
		char *w = m->err;
		for (const char *r = m->err; *r; r++) {
			if (*r == '\n') {
				while (r[1] == '\t' || r[1] == ' ')
					r++;
				*w++ = ' ';
			} else {
				*w++ = *r;
			}
		}
		*w = '\0';
		mask_password(m, m->err, m->errlen);
	}
	return -1;
}

/* A readable one-line description of a failed result: message, SQLSTATE, detail, hint. */
static void describe(const PGresult *res, PGconn *pg, char *buf, size_t n)
{
	const char *prim = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *detail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
	const char *hint = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
	const char *pos = res ? PQresultErrorField(res, PG_DIAG_STATEMENT_POSITION) : NULL;
	if (!prim) {
		snprintf(buf, n, "%s", PQerrorMessage(pg));
		return;
	}
	snprintf(buf, n, "%s (SQLSTATE %s)%s%s%s%s%s%s", prim, state ? state : "?",
	         detail ? "; detail: " : "", detail ? detail : "",
	         hint ? "; hint: " : "", hint ? hint : "",
	         pos ? "; at character " : "", pos ? pos : "");
}

/* Runs sql (one or several statements, simple protocol). Returns 0 or -1 (err filled). */
static int exec_ok(struct mctx *m, const char *sql, const char *what)
{
	PGresult *res = PQexec(m->pg, sql);
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY) {
		PQclear(res);
		return 0;
	}
	char buf[1024];
	describe(res, m->pg, buf, sizeof buf);
	PQclear(res);
	return fail(m, "%s: %s", what, buf);
}

static void ignore_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* Extracts the password of a conninfo/URI (NULL if none). -1 if conninfo does not parse. */
static int conninfo_password(const char *conninfo, char **password, char *msg, size_t n)
{
	char *errmsg = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &errmsg);
	*password = NULL;
	if (!opts) {
		snprintf(msg, n, "%s", errmsg ? errmsg : "out of memory");
		PQfreemem(errmsg);
		return -1;
	}
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (!strcmp(o->keyword, "password") && o->val)
			*password = xstrdup(o->val);
	PQconninfoFree(opts);
	return 0;
}

/* Best effort for a conninfo that does not even parse: guess the password text (URI
 * user:password@ or password=value) so that libpq's parse error cannot echo it. */
static char *guess_password(const char *conninfo)
{
	const char *scheme = strstr(conninfo, "://");
	if (scheme) {
		const char *auth = scheme + 3;
		const char *end = auth + strcspn(auth, "/?#");
		const char *at = memrchr(auth, '@', (size_t)(end - auth));
		const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
		if (colon && at > colon + 1)
			return xstrndup(colon + 1, (size_t)(at - colon - 1));
	}
	const char *hit = strstr(conninfo, "password=");
	if (hit) {
		hit += 9;
		size_t len = strcspn(hit, " &'");
		if (len)
			return xstrndup(hit, len);
	}
	return NULL;
}

struct applied { int version; char checksum[65]; };

bool migrate_checksum_ok(const struct migration *mig, const char *applied)
{
	size_t n = strlen(applied);
	if (!n)
		return false;
	if (!strcmp(applied, mig->checksum))
		return true;
	for (const char *p = mig->older; p && *p; p += strspn(p, " ")) {
		size_t len = strcspn(p, " ");
		if (len == n && !memcmp(p, applied, n))
			return true;
		p += len;
	}
	return false;
}

static int load_applied(struct mctx *m, struct applied **out, int *n)
{
	PGresult *res = PQexec(m->pg, "SELECT version, checksum FROM arbiter_migrations ORDER BY version");
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		char buf[1024];
		describe(res, m->pg, buf, sizeof buf);
		PQclear(res);
		return fail(m, "reading arbiter_migrations: %s", buf);
	}
	*n = PQntuples(res);
	*out = xcalloc((size_t)*n + 1, sizeof **out);
	for (int i = 0; i < *n; i++) {
		(*out)[i].version = atoi(PQgetvalue(res, i, 0));
		snprintf((*out)[i].checksum, sizeof (*out)[i].checksum, "%s", PQgetvalue(res, i, 1));
	}
	PQclear(res);
	return 0;
}

/* The first statements of every transaction of a run: the lock, quiet notices. */
#define TXN_START "BEGIN; SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY "); " \
	"SET LOCAL client_min_messages = warning"

/* Applies mig in its own transaction under the lock, unless another run recorded it
 * meanwhile (*skipped = 1 then, after checking its checksum). */
static int apply_one(struct mctx *m, const struct migration *mig, int *skipped)
{
	char what[160];
	char version[16];
	snprintf(what, sizeof what, "migration %03d_%s", mig->version, mig->name);
	snprintf(version, sizeof version, "%d", mig->version);
	*skipped = 0;
	if (exec_ok(m, TXN_START, what) < 0)
		goto rollback;
	const char *vp[1] = { version };
	PGresult *res = PQexecParams(m->pg, "SELECT checksum FROM arbiter_migrations WHERE version = $1",
	                             1, NULL, vp, NULL, NULL, 0);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		char buf[1024];
		describe(res, m->pg, buf, sizeof buf);
		PQclear(res);
		fail(m, "%s: reading arbiter_migrations: %s", what, buf);
		goto rollback;
	}
	if (PQntuples(res) == 1) {
		/* Another replica applied it while we waited for the lock. */
		int same = migrate_checksum_ok(mig, PQgetvalue(res, 0, 0));
		PQclear(res);
		if (!same) {
			fail(m, "%s was applied with another checksum: an applied migration must never "
			     "be edited (add a new one)", what);
			goto rollback;
		}
		*skipped = 1;
		return exec_ok(m, "COMMIT", what);
	}
	PQclear(res);
	if (exec_ok(m, mig->sql, what) < 0)
		goto rollback;
	const char *params[3] = { version, mig->name, mig->checksum };
	res = PQexecParams(m->pg,
		"INSERT INTO arbiter_migrations (version, name, checksum) VALUES ($1, $2, $3)",
		3, NULL, params, NULL, NULL, 0);
	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
		char buf[1024];
		describe(res, m->pg, buf, sizeof buf);
		PQclear(res);
		fail(m, "%s: recording it: %s", what, buf);
		goto rollback;
	}
	PQclear(res);
	if (exec_ok(m, "COMMIT", what) < 0)
		goto rollback;
	return 0;
rollback:
	if (PQtransactionStatus(m->pg) != PQTRANS_IDLE)
		PQclear(PQexec(m->pg, "ROLLBACK"));
	return -1;
}

int migrate_apply_report(const char *conninfo,
                         void (*applied_cb)(int version, const char *name, void *data), void *data,
                         char *err, size_t errlen)
{
	struct mctx m = { .err = err, .errlen = errlen };
	struct applied *done = NULL;
	int ndone = 0, count = 0, rc = -1;
	char msg[512];

	if (err && errlen)
		err[0] = '\0';
	if (!conninfo)
		return fail(&m, "no database URL");
	if (redact_check_conn(conninfo, msg, sizeof msg) < 0)
		return fail(&m, "invalid database URL: %s", msg);
	if (conninfo_password(conninfo, &m.password, msg, sizeof msg) < 0) {
		m.password = guess_password(conninfo);
		fail(&m, "invalid database URL: %s", msg);
		free(m.password);
		return -1;
	}

	/* Our defaults first: keywords inside the conninfo override them. */
	const char *keys[] = { "connect_timeout", "application_name", "dbname", NULL };
	const char *vals[] = { "10", "arbiter-migrate", conninfo, NULL };
	m.pg = PQconnectdbParams(keys, vals, 1);
	if (!m.pg || PQstatus(m.pg) != CONNECTION_OK) {
		fail(&m, "cannot connect: %s", m.pg ? PQerrorMessage(m.pg) : "out of memory");
		goto out;
	}
	PQsetNoticeProcessor(m.pg, ignore_notice, NULL);

	/* Transaction 1: the bookkeeping table and what is applied already. */
	if (exec_ok(&m, TXN_START, "taking the migration lock") < 0)
		goto rollback;
	if (exec_ok(&m,
	            "CREATE TABLE IF NOT EXISTS arbiter_migrations ("
	            " version int PRIMARY KEY,"
	            " name text NOT NULL,"
	            " checksum text NOT NULL,"
	            " applied_at timestamptz NOT NULL DEFAULT now())",
	            "creating arbiter_migrations") < 0)
		goto rollback;
	if (load_applied(&m, &done, &ndone) < 0)
		goto rollback;
	if (exec_ok(&m, "COMMIT", "reading arbiter_migrations") < 0)
		goto rollback;

	for (size_t i = 0; i < migrate_nlist; i++) {
		const struct migration *mig = &migrate_list[i];
		const struct applied *a = NULL;
		for (int j = 0; j < ndone; j++)
			if (done[j].version == mig->version)
				a = &done[j];
		if (a) {
			if (!migrate_checksum_ok(mig, a->checksum)) {
				fail(&m, "migration %03d_%s was applied with checksum %.12s but this binary has %.12s: "
				     "an applied migration must never be edited (add a new one)",
				     mig->version, mig->name, a->checksum, mig->checksum);
				goto out;
			}
			continue;
		}
		int skipped;
		if (apply_one(&m, mig, &skipped) < 0)
			goto out;
		if (skipped)
			continue;
		count++;
		if (applied_cb)
			applied_cb(mig->version, mig->name, data);
	}
	rc = count;
	goto out;
rollback:
	if (PQtransactionStatus(m.pg) != PQTRANS_IDLE)
		PQclear(PQexec(m.pg, "ROLLBACK"));
out:
	PQfinish(m.pg);
	free(done);
	free(m.password);
	return rc;
}

int migrate_apply(const char *conninfo, char *err, size_t errlen)
{
	return migrate_apply_report(conninfo, NULL, NULL, err, errlen);
}
