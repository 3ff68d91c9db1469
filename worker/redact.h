/*
 * Redaction of connection strings for anything a person or a log reads:
 * the one place that decides how a Redis URL or a PostgreSQL conninfo/URI
 * is shown without its secrets. The string is parsed with the same parser
 * that connects (rq_url_parse for Redis, libpq's PQconninfoParse for
 * PostgreSQL) and printed back from the parsed form, so any spelling the
 * worker accepts is redacted; a string that does not parse is never shown.
 * scripts/arbiter_conn.py applies the same rules for the Python tools.
 */
#ifndef ARBITER_REDACT_H
#define ARBITER_REDACT_H

#include <stddef.h>

/* The text shown for a string that fails to parse (nothing of it is echoed). */
#define REDACT_INVALID_REDIS "(unparsable Redis URL, not shown)"
#define REDACT_INVALID_PG "(unparsable database connection string, not shown)"

/* Nonzero when s names a Redis server (redis://, rediss://, unix://). */
int redact_is_redis(const char *s);

/* Checks what libpq would silently misread: a postgresql:// URI whose
 * password holds an unencoded '/' (libpq then takes part of the password
 * for the host, the port or the database name). Returns 0, or -1 with a
 * reason that quotes nothing of s in err. Redis URLs always pass. */
int redact_check_conn(const char *s, char *err, size_t errlen);

/* A display copy of a Redis URL or a PostgreSQL conninfo/URI.
 * Redis: "redis://[user][:***]@host:port/db" or "unix://[...@]/path?db=N".
 * PostgreSQL: the parsed keywords that are set, "key=value" separated by
 * spaces in libpq's order, values quoted when needed, password and
 * sslpassword shown as "***". A string that fails redact_check_conn or
 * does not parse shows as REDACT_INVALID_*. NULL or "" gives "". Caller frees. */
char *redact_conn(const char *s);

#endif
