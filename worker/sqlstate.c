/* SQLSTATE classification; see sqlstate.h. */
#include "sqlstate.h"

#include <string.h>

static bool is_code(const char *c)
{
	if (!c || strlen(c) != 5)
		return false;
	for (int i = 0; i < 5; i++) {
		char ch = c[i];
		if (!((ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z')))
			return false;
	}
	return true;
}

enum sqlstate_kind sqlstate_kind(const char *c)
{
	static const char *const retry[] = { "40001", "40P01", "55P03", "55006", "57014" };
	static const char *const down[] = {
		"25006", "25P02", "25P03", "57P01", "57P02", "57P03", "57P04", "57P05",
	};
	if (!is_code(c))
		return SQLSTATE_DB_DOWN;
	for (size_t i = 0; i < sizeof retry / sizeof retry[0]; i++)
		if (!strcmp(c, retry[i]))
			return SQLSTATE_RETRY;
	if (!strncmp(c, "08", 2) || !strncmp(c, "53", 2) || !strncmp(c, "58", 2))
		return SQLSTATE_DB_DOWN;
	for (size_t i = 0; i < sizeof down / sizeof down[0]; i++)
		if (!strcmp(c, down[i]))
			return SQLSTATE_DB_DOWN;
	return SQLSTATE_JOB;
}

bool sqlstate_transient(const char *c)
{
	return sqlstate_kind(c) != SQLSTATE_JOB;
}

const char *sqlstate_kind_name(enum sqlstate_kind k)
{
	switch (k) {
	case SQLSTATE_RETRY:
		return "retry";
	case SQLSTATE_DB_DOWN:
		return "db_down";
	default:
		return "job";
	}
}
