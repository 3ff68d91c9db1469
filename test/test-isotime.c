/*
 * Unit tests for common/isotime: accepted ISO 8601 / RFC 3339 forms, offsets,
 * fractions (truncated to ms), leap years, and rejected inputs. Table-driven.
 */
#include "isotime.h"
#include "tap.h"

struct tcase {
	const char *s;
	int rc;
	long long ms;
};

static const struct tcase cases[] = {
	{ "1970-01-01T00:00:00Z", 0, 0 },
	{ "1970-01-01T00:00:00.001Z", 0, 1 },
	{ "2024-05-01T10:01:06Z", 0, 1714557666000LL },
	{ "2024-05-01T12:01:06+02:00", 0, 1714557666000LL },
	{ "2024-05-01T05:31:06-0430", 0, 1714557666000LL },
	{ "2024-05-01T12:01:06+02", 0, 1714557666000LL },
	{ "2024-05-01t10:01:06z", 0, 1714557666000LL },
	{ "2024-05-01 10:01:06Z", 0, 1714557666000LL },
	{ "2024-05-01T10:01:06", 0, 1714557666000LL },
	{ "2024-05-01T10:01Z", 0, 1714557660000LL },
	{ "2024-05-01", 0, 1714521600000LL },
	{ "2024-05-01T10:01:06.5Z", 0, 1714557666500LL },
	{ "2024-05-01T10:01:06.123456789Z", 0, 1714557666123LL },
	{ "2024-05-01T10:01:06,25Z", 0, 1714557666250LL },
	{ "2024-02-29T00:00:00Z", 0, 1709164800000LL },
	{ "2000-02-29T00:00:00Z", 0, 951782400000LL },
	{ "1969-12-31T23:59:59.999Z", 0, -1 },
	{ "2016-12-31T23:59:60Z", 0, 1483228800000LL },
	{ "2023-02-29T00:00:00Z", -1, 0 },
	{ "1900-02-29T00:00:00Z", -1, 0 },
	{ "2024-13-01T00:00:00Z", -1, 0 },
	{ "2024-04-31T00:00:00Z", -1, 0 },
	{ "2024-05-01T24:00:00Z", -1, 0 },
	{ "2024-05-01T10:60:00Z", -1, 0 },
	{ "2024-05-01T10:00:61Z", -1, 0 },
	{ "2024-05-01T10:00:00.Z", -1, 0 },
	{ "2024-05-01T10:00:00ZZ", -1, 0 },
	{ "2024-05-01T10:00:00+25:00", -1, 0 },
	{ "2024-05-01T10:00:00+02:0", -1, 0 },
	{ "2024-05-01T", -1, 0 },
	{ "2024-5-1", -1, 0 },
	{ "20240501T100000Z", -1, 0 },
	{ "yesterday", -1, 0 },
	{ "", -1, 0 },
	{ "1714557666000", -1, 0 },
	{ "2024-05-01T10:00:00 Z", -1, 0 },
};

int main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		long long ms = -42;
		int64_t v = -42;
		int rc = isotime_parse(cases[i].s, strlen(cases[i].s), &v);
		ms = v;
		is_int(rc, cases[i].rc, "'%s' %s", cases[i].s, cases[i].rc ? "rejected" : "accepted");
		if (cases[i].rc == 0)
			is_int(ms, cases[i].ms, "'%s' value", cases[i].s);
	}
	char buf[40];
	isotime_format(1714557666123LL, buf, sizeof buf);
	is_str(buf, "2024-05-01T10:01:06.123Z", "format");
	isotime_format(-1, buf, sizeof buf);
	is_str(buf, "1969-12-31T23:59:59.999Z", "format before the epoch");
	/* (Moved from test-job: the worker's former job_iso_ms copy.) */
	isotime_format(1700000000250LL, buf, sizeof buf);
	is_str(buf, "2023-11-14T22:13:20.250Z", "iso ms");
	isotime_format(0, buf, sizeof buf);
	is_str(buf, "1970-01-01T00:00:00.000Z", "epoch");
	/* Round trip over a range of days. */
	int bad = 0;
	for (int64_t ms = -5000000000000LL; ms < 5000000000000LL; ms += 86399999LL * 37) {
		int64_t back;
		isotime_format(ms, buf, sizeof buf);
		if (isotime_parse(buf, strlen(buf), &back) < 0 || back != ms)
			bad++;
	}
	is_int(bad, 0, "format/parse round trip");
	return tap_done();
}
