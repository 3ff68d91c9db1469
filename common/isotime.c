/*
 * ISO 8601 / RFC 3339 timestamp parsing to Unix milliseconds (see isotime.h).
 * Civil-date arithmetic after Howard Hinnant's days_from_civil.
 */
#include "isotime.h"

#include <stdbool.h>
#include <stdio.h>

static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static bool digits(const char *s, size_t len, size_t at, int n, int *out)
{
	int v = 0;
	if (at + (size_t)n > len)
		return false;
	for (int i = 0; i < n; i++) {
		char c = s[at + (size_t)i];
		if (c < '0' || c > '9')
			return false;
		v = v * 10 + (c - '0');
	}
	*out = v;
	return true;
}

static int month_days(int y, int m)
{
	static const int md[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return 29;
	return md[m - 1];
}

int isotime_parse(const char *s, size_t len, int64_t *ms)
{
	int y, mo, d, h = 0, mi = 0, se = 0, frac_ms = 0;
	size_t i = 0;
	if (!digits(s, len, 0, 4, &y) || len < 10 || s[4] != '-' || !digits(s, len, 5, 2, &mo) ||
	    s[7] != '-' || !digits(s, len, 8, 2, &d))
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo))
		return -1;
	i = 10;
	int64_t offset_min = 0;
	if (i < len) {
		if (s[i] != 'T' && s[i] != 't' && s[i] != ' ')
			return -1;
		i++;
		if (!digits(s, len, i, 2, &h) || i + 2 >= len || s[i + 2] != ':' ||
		    !digits(s, len, i + 3, 2, &mi))
			return -1;
		i += 5;
		if (i < len && s[i] == ':') {
			if (!digits(s, len, i + 1, 2, &se))
				return -1;
			i += 3;
			if (i < len && (s[i] == '.' || s[i] == ',')) {
				i++;
				size_t start = i;
				int scale = 100;
				while (i < len && s[i] >= '0' && s[i] <= '9') {
					frac_ms += (s[i] - '0') * scale;
					scale /= 10;
					i++;
				}
				if (i == start)
					return -1;
			}
		}
		if (h > 23 || mi > 59 || se > 60)
			return -1;
		if (i < len) {
			if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == len) {
				i++;
			} else if (s[i] == '+' || s[i] == '-') {
				int sign = s[i] == '-' ? -1 : 1, oh, om = 0;
				i++;
				if (!digits(s, len, i, 2, &oh))
					return -1;
				i += 2;
				if (i < len && s[i] == ':') {
					if (!digits(s, len, i + 1, 2, &om))
						return -1;
					i += 3;
				} else if (i < len) {
					if (!digits(s, len, i, 2, &om))
						return -1;
					i += 2;
				}
				if (oh > 23 || om > 59)
					return -1;
				offset_min = sign * (oh * 60 + om);
			} else {
				return -1;
			}
		}
		if (i != len)
			return -1;
	}
	int64_t days = days_from_civil(y, mo, d);
	int64_t secs = days * 86400 + h * 3600 + mi * 60 + se - offset_min * 60;
	*ms = secs * 1000 + frac_ms;
	return 0;
}

int isotime_format(int64_t ms, char *buf, size_t n)
{
	int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
	int msr = (int)(ms - secs * 1000);
	int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
	int sod = (int)(secs - days * 86400);
	int64_t y;
	int m, d;
	civil_from_days(days, &y, &m, &d);
	return snprintf(buf, n, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
	                sod / 3600, sod / 60 % 60, sod % 60, msr);
}
