/*
 * Unit tests for common/ipkey: rate-limit keys for every spelling of IPv4 and
 * IPv6 addresses, /64 grouping, IPv4-mapped addresses, garbage, and the CIDR
 * allow list (ARBITER_RATE_ALLOW).
 */
#include <string.h>

#include "ipkey.h"
#include "tap.h"

struct key_case {
	const char *in;
	const char *key;
};

static const struct key_case keys[] = {
	/* IPv4 */
	{ "192.0.2.7", "192.0.2.7" },
	{ " 192.0.2.7\t", "192.0.2.7" },
	{ "192.000.002.007", "192.0.2.7" },
	{ "010.0.0.1", "10.0.0.1" },            /* decimal, never octal */
	{ "0.0.0.0", "0.0.0.0" },
	{ "255.255.255.255", "255.255.255.255" },
	{ "192.0.2.7/32", "192.0.2.7" },        /* PostgreSQL inet text */
	{ "192.0.2.7/24", "192.0.2.7" },
	{ "[192.0.2.7]", "192.0.2.7" },
	/* IPv4-mapped IPv6 → the IPv4 key */
	{ "::ffff:192.0.2.7", "192.0.2.7" },
	{ "::FFFF:192.0.2.7", "192.0.2.7" },
	{ "::ffff:c000:207", "192.0.2.7" },
	{ "0:0:0:0:0:ffff:c000:0207", "192.0.2.7" },
	{ "0000:0000:0000:0000:0000:FFFF:192.000.002.007", "192.0.2.7" },
	{ "[::ffff:192.0.2.7]", "192.0.2.7" },
	{ "::ffff:192.0.2.7/128", "192.0.2.7" },
	/* IPv6 → /64, every spelling */
	{ "2001:db8:1:2::7", "2001:db8:1:2::/64" },
	{ "2001:DB8:1:2:0:0:0:7", "2001:db8:1:2::/64" },
	{ "2001:0db8:0001:0002:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64" },
	{ "[2001:db8:1:2::7]", "2001:db8:1:2::/64" },
	{ "2001:db8:1:2::7%eth0", "2001:db8:1:2::/64" },
	{ "[2001:db8:1:2::7%25eth0]", "2001:db8:1:2::/64" },
	{ "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64" },
	{ "2001:db8:1:2::1.2.3.4", "2001:db8:1:2::/64" },
	{ "2001:db8:1:2::7/128", "2001:db8:1:2::/64" },
	{ "2001:db8:1:3::7", "2001:db8:1:3::/64" },
	{ "2001:db8::1", "2001:db8::/64" },
	{ "2001:0:0:1::1", "2001:0:0:1::/64" },
	{ "2001:0:1:0::1", "2001:0:1::/64" },
	{ "0:1:0:0::", "0:1::/64" },
	{ "1:0:0:2::", "1:0:0:2::/64" },
	{ "fe80::1%lo", "fe80::/64" },
	{ "::1", "::/64" },
	{ "::", "::/64" },
	{ "::1.2.3.4", "::/64" },               /* IPv4-compatible (deprecated): plain IPv6 */
	{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff::/64" },
	/* garbage */
	{ "", "invalid" },
	{ "   ", "invalid" },
	{ "unknown", "invalid" },
	{ "1.2.3", "invalid" },
	{ "1.2.3.4.5", "invalid" },
	{ "256.1.1.1", "invalid" },
	{ "1.2.3.4 5", "invalid" },
	{ "0x7f.0.0.1", "invalid" },
	{ "2130706433", "invalid" },
	{ "1.2.3.0004", "invalid" },
	{ "1.2.3.4/33", "invalid" },
	{ "1.2.3.4/", "invalid" },
	{ "2001:db8::1/129", "invalid" },
	{ "2001:db8::g", "invalid" },
	{ "2001:db8:::1", "invalid" },
	{ "1:2:3:4:5:6:7:8:9", "invalid" },
	{ "[2001:db8::1", "invalid" },
	{ "2001:db8::1]", "invalid" },
	{ "[]", "invalid" },
	{ "fe80::1%", "invalid" },
	{ "1.2.3.4%eth0", "invalid" },
	{ "::ffff:1.2.3.256", "invalid" },
	{ "localhost", "invalid" },
};

static void test_keys(void)
{
	char out[IPKEY_MAX];
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		int rc = ipkey_make(keys[i].in, out, sizeof out);
		is_str(out, keys[i].key, "key(\"%s\")", keys[i].in);
		is_int(rc, strcmp(keys[i].key, "invalid") ? 0 : -1, "rc(\"%s\")", keys[i].in);
	}
	is_int(ipkey_make(NULL, out, sizeof out), -1, "NULL is invalid");
	is_str(out, "invalid", "NULL key");
	is_int(ipkey_make_n("1.2.3.4\0garbage", 15, out, sizeof out), -1, "embedded NUL is invalid");
	is_int(ipkey_make_n("1.2.3.4junk", 7, out, sizeof out), 0, "length-bounded input");
	is_str(out, "1.2.3.4", "length-bounded key");
	char big[600];
	memset(big, '1', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	is_int(ipkey_make(big, out, sizeof out), -1, "very long input is invalid");
}

static void test_allow(void)
{
	struct ipkey_allow l;
	char err[256];

	ok(ipkey_allow_parse("10.0.0.0/8, 192.0.2.7 ,2001:db8::/32,::ffff:198.51.100.0/120,", &l,
	                     err, sizeof err) == 0, "allow list parses");
	is_int(l.n, 4, "four entries");
	ok(ipkey_allow_match_text(&l, "10.1.2.3"), "10.1.2.3 in 10.0.0.0/8");
	ok(ipkey_allow_match_text(&l, "::ffff:10.1.2.3"), "mapped 10.1.2.3 in 10.0.0.0/8");
	ok(!ipkey_allow_match_text(&l, "11.0.0.1"), "11.0.0.1 not allowed");
	ok(ipkey_allow_match_text(&l, "192.0.2.7"), "single host");
	ok(!ipkey_allow_match_text(&l, "192.0.2.8"), "neighbour of single host");
	ok(ipkey_allow_match_text(&l, "2001:DB8:ffff::1"), "IPv6 in /32");
	ok(ipkey_allow_match_text(&l, "[2001:db8::1%eth0]"), "IPv6 spelling in /32");
	ok(!ipkey_allow_match_text(&l, "2001:db9::1"), "IPv6 outside /32");
	ok(ipkey_allow_match_text(&l, "198.51.100.77"), "IPv4 in a mapped /120");
	ok(!ipkey_allow_match_text(&l, "198.51.101.1"), "IPv4 outside a mapped /120");
	ok(!ipkey_allow_match_text(&l, "garbage"), "garbage never matches");
	ok(!ipkey_allow_match_text(&l, NULL), "NULL never matches");
	ipkey_allow_free(&l);
	ipkey_allow_free(&l);

	ok(ipkey_allow_parse("", &l, err, sizeof err) == 0 && l.n == 0, "empty list");
	ok(ipkey_allow_parse(NULL, &l, err, sizeof err) == 0 && l.n == 0, "NULL list");
	ok(!ipkey_allow_match_text(&l, "1.2.3.4"), "empty list matches nothing");

	ok(ipkey_allow_parse("0.0.0.0/0", &l, err, sizeof err) == 0, "0.0.0.0/0");
	ok(ipkey_allow_match_text(&l, "203.0.113.9"), "0.0.0.0/0 covers IPv4");
	ok(!ipkey_allow_match_text(&l, "2001:db8::1"), "0.0.0.0/0 does not cover IPv6");
	ipkey_allow_free(&l);
	ok(ipkey_allow_parse("::/0", &l, err, sizeof err) == 0, "::/0");
	ok(ipkey_allow_match_text(&l, "2001:db8::1"), "::/0 covers IPv6");
	ipkey_allow_free(&l);
	ok(ipkey_allow_parse("10.1.2.3/8", &l, err, sizeof err) == 0, "host bits are ignored");
	ok(ipkey_allow_match_text(&l, "10.200.0.1"), "10.1.2.3/8 acts as 10.0.0.0/8");
	ipkey_allow_free(&l);
	ok(ipkey_allow_parse("2001:db8:1:2::/63", &l, err, sizeof err) == 0, "odd IPv6 prefix");
	ok(ipkey_allow_match_text(&l, "2001:db8:1:3::9"), "/63 covers the sibling /64");
	ok(!ipkey_allow_match_text(&l, "2001:db8:1:4::9"), "/63 stops there");
	ipkey_allow_free(&l);

	static const char *const bad[] = {
		"10.0.0.0/33", "2001:db8::/129", "10.0.0.0/", "10.0.0/8", "nope", "10.0.0.0/8,x",
		"10.0.0.0/-1", "10.0.0.0/8/8", "1.2.3.4, [::1",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		ok(ipkey_allow_parse(bad[i], &l, err, sizeof err) == -1 && l.n == 0 && !l.v,
		   "rejects \"%s\"", bad[i]);
		ok(strstr(err, "expected") != NULL, "message says what is accepted: %s", err);
	}
}

int main(void)
{
	test_keys();
	test_allow();
	return tap_done();
}
