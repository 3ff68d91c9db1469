/* Connection-string redaction from the parsed form; see redact.h. */
#include "redact.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rq.h"
#include "util.h"

int redact_is_redis(const char *s)
{
	return s && (!strncasecmp(s, "redis://", 8) || !strncasecmp(s, "rediss://", 9) ||
		     !strncasecmp(s, "redis+", 6) || !strncasecmp(s, "rediss+", 7) ||
		     !strncasecmp(s, "unix://", 7));
}

/* Appends s percent-encoded except for RFC 3986 unreserved characters and
 * those in keep. */
static void add_pct(struct strbuf *b, const char *s, const char *keep)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~' || strchr(keep, c))
			strbuf_add(b, s, 1);
		else
			strbuf_addf(b, "%%%02X", c);
	}
}

static char *redact_redis(const char *s)
{
	struct rq_url u;
	char err[128];
	if (rq_url_parse(s, &u, err, sizeof err) < 0)
		return xstrdup(REDACT_INVALID_REDIS);
	struct strbuf b = { 0 };
	strbuf_addf(&b, "%s%s://", u.path[0] ? "unix" : u.tls ? "rediss" : "redis",
		    u.sentinel ? "+sentinel" : u.cluster ? "+cluster" : "");
	if (u.user[0] || u.password[0]) {
		add_pct(&b, u.user, "");
		if (u.password[0])
			strbuf_add(&b, ":***", 4);
		strbuf_add(&b, "@", 1);
	}
	if (u.path[0]) {
		add_pct(&b, u.path, "/");
		strbuf_addf(&b, "?db=%d", u.db);
	} else if (u.nhosts > 1 || u.sentinel || u.cluster) {
		for (int i = 0; i < u.nhosts; i++)
			strbuf_addf(&b, strchr(u.hosts[i].host, ':') ? "%s[%s]:%d" : "%s%s:%d",
				    i ? "," : "", u.hosts[i].host, u.hosts[i].port);
		strbuf_addf(&b, "/%d", u.db);
		if (u.master_name[0])
			strbuf_addf(&b, " (master %s)", u.master_name);
	} else if (strchr(u.host, ':')) {
		strbuf_addf(&b, "[%s]:%d/%d", u.host, u.port, u.db);
	} else {
		strbuf_addf(&b, "%s:%d/%d", u.host, u.port, u.db);
	}
	return b.buf;
}

static int is_secret_key(const char *k)
{
	return !strcmp(k, "password") || !strcmp(k, "sslpassword");
}

/* Appends a conninfo value, single-quoted when empty or holding a blank,
 * a quote or a backslash (libpq's quoting rules). */
static void add_value(struct strbuf *b, const char *v)
{
	if (*v && !strpbrk(v, " \t\n\r\f\v'\\")) {
		strbuf_add(b, v, strlen(v));
		return;
	}
	strbuf_add(b, "'", 1);
	for (; *v; v++) {
		if (*v == '\'' || *v == '\\')
			strbuf_add(b, "\\", 1);
		strbuf_add(b, v, 1);
	}
	strbuf_add(b, "'", 1);
}

int redact_check_conn(const char *s, char *err, size_t errlen)
{
	if (!s || redact_is_redis(s))
		return 0;
	const char *rest = NULL;
	if (!strncasecmp(s, "postgresql://", 13))
		rest = s + 13;
	else if (!strncasecmp(s, "postgres://", 11))
		rest = s + 11;
	if (!rest)
		return 0;
	size_t n = strcspn(rest, "?");
	const char *slash = memchr(rest, '/', n);
	if (slash && memchr(slash, '@', n - (size_t)(slash - rest))) {
		if (err && errlen)
			snprintf(err, errlen, "'@' after the host in a postgresql:// URI: "
				 "percent-encode '/' in the password as %%2F and '@' as %%40");
		return -1;
	}
	return 0;
}

static char *redact_pg(const char *s)
{
	if (redact_check_conn(s, NULL, 0) < 0)
		return xstrdup(REDACT_INVALID_PG);
	char *errmsg = NULL;
	PQconninfoOption *opts = PQconninfoParse(s, &errmsg);
	if (!opts) {
		PQfreemem(errmsg);
		return xstrdup(REDACT_INVALID_PG);
	}
	struct strbuf b = { 0 };
	for (PQconninfoOption *o = opts; o->keyword; o++) {
		if (!o->val || !o->val[0])
			continue;
		if (b.len)
			strbuf_add(&b, " ", 1);
		strbuf_addf(&b, "%s=", o->keyword);
		if (is_secret_key(o->keyword))
			strbuf_add(&b, "***", 3);
		else
			add_value(&b, o->val);
	}
	PQconninfoFree(opts);
	return b.buf ? b.buf : xstrdup("");
}

char *redact_conn(const char *s)
{
	if (!s || !*s)
		return xstrdup("");
	return redact_is_redis(s) ? redact_redis(s) : redact_pg(s);
}
