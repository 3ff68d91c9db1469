/*
 * sqlstate: what a PostgreSQL error code means for a job, by SQLSTATE class
 * (https://www.postgresql.org/docs/current/errcodes-appendix.html). Pure.
 *
 *   SQLSTATE_JOB         the statement or its data is at fault (class 22 data
 *                        exception, 23 integrity, 42 syntax/access, P0 raised
 *                        by a function, XX internal error / corruption, which
 *                        one row can cause, anything unknown): the job's own
 *                        failure, it uses up an attempt (so it cannot loop).
 *   SQLSTATE_RETRY       a race worth retrying (40001 serialization, 40P01
 *                        deadlock, 55P03 lock not available, 55006 object in
 *                        use, 57014 a statement cancelled or timed out): not
 *                        the job's fault on its own, though a caller may count
 *                        repeats.
 *   SQLSTATE_DB_DOWN     the database cannot take writes or work right now:
 *                        08 connection, 25006 read-only transaction, 53
 *                        insufficient resources (53100 disk full, 53200 out
 *                        of memory, 53300 too many connections), 57P01..57P05
 *                        shutdown / cannot connect / idle-session timeout,
 *                        58 system error (I/O), 25P02/25P03 aborted or
 *                        idle-timeout transaction. Never the submission's
 *                        fault: no attempt is spent, and intake may pause
 *                        until the database takes writes again.
 */
#ifndef ARBITER_SQLSTATE_H
#define ARBITER_SQLSTATE_H

#include <stdbool.h>

enum sqlstate_kind { SQLSTATE_JOB, SQLSTATE_RETRY, SQLSTATE_DB_DOWN };

/* Classifies a 5-character SQLSTATE; NULL, "" or a malformed code (no
 * server answer, e.g. a lost connection) is SQLSTATE_DB_DOWN. */
enum sqlstate_kind sqlstate_kind(const char *code);

/* True for SQLSTATE_RETRY and SQLSTATE_DB_DOWN: a retry does not spend the
 * job's attempts. */
bool sqlstate_transient(const char *code);

/* The kind's name: "job", "retry", "db_down". */
const char *sqlstate_kind_name(enum sqlstate_kind k);

#endif
