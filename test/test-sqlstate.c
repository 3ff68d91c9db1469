/* Unit tests for worker/sqlstate: SQLSTATE codes by class, as a table. */
#undef NDEBUG
#include <stddef.h>

#include "sqlstate.h"
#include "tap.h"

static const struct { const char *code; enum sqlstate_kind want; const char *what; } cases[] = {
	{ "25006", SQLSTATE_DB_DOWN, "read_only_sql_transaction (a read-only database)" },
	{ "53100", SQLSTATE_DB_DOWN, "disk_full" },
	{ "53200", SQLSTATE_DB_DOWN, "out_of_memory" },
	{ "53300", SQLSTATE_DB_DOWN, "too_many_connections" },
	{ "53400", SQLSTATE_DB_DOWN, "configuration_limit_exceeded" },
	{ "57P01", SQLSTATE_DB_DOWN, "admin_shutdown" },
	{ "57P02", SQLSTATE_DB_DOWN, "crash_shutdown" },
	{ "57P03", SQLSTATE_DB_DOWN, "cannot_connect_now" },
	{ "57P05", SQLSTATE_DB_DOWN, "idle_session_timeout" },
	{ "08006", SQLSTATE_DB_DOWN, "connection_failure" },
	{ "08001", SQLSTATE_DB_DOWN, "sqlclient_unable_to_establish_sqlconnection" },
	{ "58030", SQLSTATE_DB_DOWN, "io_error" },
	{ "XX001", SQLSTATE_JOB, "data_corrupted (one row can cause it: counted, cannot loop)" },
	{ "XX000", SQLSTATE_JOB, "internal_error" },
	{ "55006", SQLSTATE_RETRY, "object_in_use" },
	{ "", SQLSTATE_DB_DOWN, "no SQLSTATE (connection lost)" },
	{ NULL, SQLSTATE_DB_DOWN, "NULL" },
	{ "40001", SQLSTATE_RETRY, "serialization_failure" },
	{ "40P01", SQLSTATE_RETRY, "deadlock_detected" },
	{ "55P03", SQLSTATE_RETRY, "lock_not_available (lock_timeout)" },
	{ "57014", SQLSTATE_RETRY, "query_canceled (statement_timeout)" },
	{ "22P02", SQLSTATE_JOB, "invalid_text_representation" },
	{ "22003", SQLSTATE_JOB, "numeric_value_out_of_range" },
	{ "23505", SQLSTATE_JOB, "unique_violation" },
	{ "23514", SQLSTATE_JOB, "check_violation" },
	{ "42P01", SQLSTATE_JOB, "undefined_table" },
	{ "P0001", SQLSTATE_JOB, "raise_exception" },
	{ "54000", SQLSTATE_JOB, "program_limit_exceeded (a too-large row)" },
	{ "25001", SQLSTATE_JOB, "active_sql_transaction (not the read-only one)" },
	{ "5310", SQLSTATE_DB_DOWN, "malformed (4 characters)" },
	{ "53a00", SQLSTATE_DB_DOWN, "malformed (lower case)" },
};

int main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		enum sqlstate_kind k = sqlstate_kind(cases[i].code);
		ok(k == cases[i].want, "%s %s: %s (got %s)", cases[i].code ? cases[i].code : "NULL",
		   cases[i].what, sqlstate_kind_name(cases[i].want), sqlstate_kind_name(k));
		ok(sqlstate_transient(cases[i].code) == (cases[i].want != SQLSTATE_JOB),
		   "%s: transient iff not the job's", cases[i].code ? cases[i].code : "NULL");
	}
	return tap_done();
}
