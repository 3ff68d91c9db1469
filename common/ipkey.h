/*
 * ipkey: source-IP keys for the rate limiter (worker/README.md "Rate limiting") and the CIDR allow
 * list (ARBITER_RATE_ALLOW). Pure: no I/O, no DNS. The input is untrusted text
 * (a job field or the submissions row), so every function takes any bytes.
 *
 * Keys: an IPv4 address → its dotted quad ("192.0.2.7"); an IPv6 address →
 * its /64 prefix in RFC 5952 form ("2001:db8:1:2::/64"); an IPv4-mapped IPv6
 * address (::ffff:192.0.2.7) → the IPv4 key; anything else → "invalid".
 * Every spelling of one address gives the same key: surrounding blanks,
 * [brackets], a %zone suffix, a /N prefix-length suffix (as PostgreSQL's inet
 * prints it), upper or lower case, zero compression, leading zeros in IPv6
 * groups, an embedded dotted quad, and leading zeros in IPv4 octets (read as
 * decimal, never octal: 010.0.0.1 is 10.0.0.1). IPv6 is parsed by inet_pton.
 */
#ifndef ARBITER_IPKEY_H
#define ARBITER_IPKEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest key plus NUL ("ffff:ffff:ffff:ffff::/64" is 24 bytes). */
#define IPKEY_MAX 48
#define IPKEY_INVALID "invalid"

/* A parsed address. IPv4 is held as IPv4-mapped IPv6 (::ffff:a.b.c.d) with
 * v4 set, so one 128-bit comparison serves both families. */
struct ipkey_addr {
	uint8_t b[16];
	bool v4;
};

/* Parses the len bytes at s (need not be NUL-terminated; embedded NULs make it
 * invalid). Returns 0 and *out, or -1 when it is not an IP address. */
int ipkey_parse(const char *s, size_t len, struct ipkey_addr *out);

/* Writes the key of a parsed address into out (n ≥ IPKEY_MAX). */
void ipkey_format(const struct ipkey_addr *a, char *out, size_t n);

/* The key of ip (NUL-terminated; NULL is invalid) into out (n ≥ IPKEY_MAX).
 * Returns 0, or -1 when "invalid" was written. */
int ipkey_make(const char *ip, char *out, size_t n);

/* Same for len bytes that need not be NUL-terminated. */
int ipkey_make_n(const char *ip, size_t len, char *out, size_t n);

/* One allow-list entry over the 128-bit space (IPv4 entries are IPv4-mapped:
 * 10.0.0.0/8 is ::ffff:10.0.0.0/104). Host bits are cleared. */
struct ipkey_cidr {
	uint8_t b[16];
	int bits;                 /* 0..128 */
};

struct ipkey_allow {
	size_t n;
	struct ipkey_cidr *v;     /* owned */
};

/* Parses a comma-separated list of CIDRs or single addresses ("10.0.0.0/8,
 * 2001:db8::/32, 192.0.2.7, ::ffff:198.51.100.0/120"); blanks around items
 * and empty items are ignored, NULL or "" is the empty list. A prefix length
 * is 0..32 after an IPv4 address and 0..128 after an IPv6 one; host bits
 * beyond it are ignored. Returns 0 (free with ipkey_allow_free), or -1 with a
 * message in err naming the bad item and what is accepted (*out is empty). */
int ipkey_allow_parse(const char *list, struct ipkey_allow *out, char *err, size_t errlen);

/* True when a lies in one of the entries. */
bool ipkey_allow_match(const struct ipkey_allow *l, const struct ipkey_addr *a);

/* Convenience: parses ip (NUL-terminated, may be NULL) and matches it; an
 * unparsable ip never matches. */
bool ipkey_allow_match_text(const struct ipkey_allow *l, const char *ip);

/* Frees the entries and empties l. Safe on a zeroed or already freed list. */
void ipkey_allow_free(struct ipkey_allow *l);

#endif
