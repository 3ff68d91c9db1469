/*
 * migrate: applies the numbered SQL migrations of sql/ (compiled into the
 * binary) to a database, in order, each once and in its own transaction,
 * recorded in arbiter_migrations. Several processes may run it at once: a
 * transaction-level PostgreSQL advisory lock serializes them (no session
 * state, so it is safe through PgBouncer's transaction pooling). Uses blocking libpq: never call it
 * on the event loop.
 */
#ifndef ARBITER_MIGRATE_H
#define ARBITER_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>

/* The highest migration version compiled into this binary. */
int migrate_latest(void);

/* Connects to conninfo and applies every migration not yet recorded. Returns the number of
 * migrations applied (>= 0), or -1 with a message in err (never containing a password).
 * Blocking. */
int migrate_apply(const char *conninfo, char *err, size_t errlen);

/* Like migrate_apply; additionally calls applied(version, name, data) after each migration
 * this call committed (synchronously, in order). applied may be NULL. */
int migrate_apply_report(const char *conninfo,
                         void (*applied)(int version, const char *name, void *data), void *data,
                         char *err, size_t errlen);

/* The compiled-in migrations, in version order (generated from sql/ at build time by
 * scripts/embed-sql). version is NNN of sql/NNN_name.sql; checksum is the SHA-256 (hex) of
 * its statements (the text without comments, see sql/README.md); older is a space-separated
 * list of the other checksums an applied row may hold (what older binaries recorded); sql is
 * its text. */
struct migration {
	int version;
	const char *name;
	const char *checksum;
	const char *older;
	const char *sql;
};

/* True when a row of arbiter_migrations with checksum `applied` records mig: its statements'
 * checksum or one of mig->older. */
bool migrate_checksum_ok(const struct migration *mig, const char *applied);
extern const struct migration migrate_list[];
extern const size_t migrate_nlist;

#endif
