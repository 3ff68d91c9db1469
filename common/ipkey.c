/*
 * ipkey: IP address parsing (inet_pton, with the spellings listed in ipkey.h
 * normalised first), rate-limit keys (IPv4 address / IPv6 /64) and the CIDR
 * allow list. Untrusted input: every length is bounded before copying.
 */
#include "ipkey.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define ADDR_TEXT_MAX 63      /* longest address text we try to parse */
#define INPUT_MAX 256         /* longer input is invalid without a look */

static const uint8_t mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Dotted decimal, exactly four octets of 1 to 3 digits, each ≤ 255. Leading
 * zeros are decimal. inet_pton accepts a subset of this (no leading zeros). */
static int parse_v4_lenient(const char *s, size_t len, uint8_t out[4])
{
	size_t i = 0;
	for (int part = 0; part < 4; part++) {
		unsigned v = 0;
		int digits = 0;
		if (part > 0) {
			if (i >= len || s[i] != '.')
				return -1;
			i++;
		}
		while (i < len && s[i] >= '0' && s[i] <= '9') {
			if (++digits > 3)
				return -1;
			v = v * 10 + (unsigned)(s[i] - '0');
			i++;
		}
		if (digits == 0 || v > 255)
			return -1;
		out[part] = (uint8_t)v;
	}
	return i == len ? 0 : -1;
}

static int parse_v4(const char *s, size_t len, uint8_t out[4])
{
	char buf[ADDR_TEXT_MAX + 1];
	if (len > ADDR_TEXT_MAX)
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, out) == 1)
		return 0;
	return parse_v4_lenient(s, len, out);
}

/* IPv6 text (no brackets, zone or prefix). An embedded dotted quad is
 * rewritten as two hex groups first so that its octets may carry leading
 * zeros; inet_pton does the rest. */
static int parse_v6(const char *s, size_t len, uint8_t out[16])
{
	char buf[ADDR_TEXT_MAX + 16];
	const char *colon = NULL;

	if (len > ADDR_TEXT_MAX)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (s[i] == ':')
			colon = s + i;
	if (!colon)
		return -1;
	if (memchr(colon, '.', len - (size_t)(colon - s))) {
		uint8_t q[4];
		size_t head = (size_t)(colon - s) + 1;
		if (parse_v4_lenient(colon + 1, len - head, q) < 0)
			return -1;
		memcpy(buf, s, head);
		snprintf(buf + head, sizeof buf - head, "%x:%x",
		         (unsigned)(q[0] << 8 | q[1]), (unsigned)(q[2] << 8 | q[3]));
	} else {
		memcpy(buf, s, len);
		buf[len] = '\0';
	}
	return inet_pton(AF_INET6, buf, out) == 1 ? 0 : -1;
}

/* Parses one address with optional blanks, [brackets], %zone and /N.
 * *family gets 4 or 6 (the syntax written, not the address class), *plen the
 * prefix length or -1 when there was none. */
static int parse_ex(const char *s, size_t len, struct ipkey_addr *out, int *family, int *plen)
{
	const char *slash;
	bool v6;

	*plen = -1;
	if (!s || len == 0 || len > INPUT_MAX || memchr(s, '\0', len))
		return -1;
	while (len && is_blank(*s)) {
		s++;
		len--;
	}
	while (len && is_blank(s[len - 1]))
		len--;
	if (len == 0)
		return -1;

	slash = memrchr(s, '/', len);
	if (slash) {
		size_t nd = len - (size_t)(slash - s) - 1;
		int v = 0;
		if (nd == 0 || nd > 3)
			return -1;
		for (size_t i = 1; i <= nd; i++) {
			if (slash[i] < '0' || slash[i] > '9')
				return -1;
			v = v * 10 + (slash[i] - '0');
		}
		*plen = v;
		len = (size_t)(slash - s);
	}
	if (len && s[0] == '[') {
		if (len < 2 || s[len - 1] != ']')
			return -1;
		s++;
		len -= 2;
	} else if (len && s[len - 1] == ']') {
		return -1;
	}
	if (len == 0)
		return -1;

	v6 = memchr(s, ':', len) != NULL;
	if (v6) {
		const char *pct = memchr(s, '%', len);
		if (pct) {
			if ((size_t)(pct - s) + 1 == len)
				return -1;             /* "%" with no zone */
			len = (size_t)(pct - s);
		}
		if (parse_v6(s, len, out->b) < 0)
			return -1;
		out->v4 = memcmp(out->b, mapped_prefix, sizeof mapped_prefix) == 0;
		*family = 6;
		if (*plen > 128)
			return -1;
	} else {
		memcpy(out->b, mapped_prefix, sizeof mapped_prefix);
		if (parse_v4(s, len, out->b + 12) < 0)
			return -1;
		out->v4 = true;
		*family = 4;
		if (*plen > 32)
			return -1;
	}
	return 0;
}

int ipkey_parse(const char *s, size_t len, struct ipkey_addr *out)
{
	int family, plen;
	return parse_ex(s, len, out, &family, &plen);
}

void ipkey_format(const struct ipkey_addr *a, char *out, size_t n)
{
	unsigned w[8] = { 0 };
	int best = -1, bestlen = 0;
	char tmp[IPKEY_MAX];
	size_t k = 0;
	bool after_gap = true;

	if (a->v4) {
		snprintf(out, n, "%u.%u.%u.%u", a->b[12], a->b[13], a->b[14], a->b[15]);
		return;
	}
	/* The /64 prefix: four groups, then four zero groups. RFC 5952: lower
	 * case, no leading zeros, the longest run (>= 2) of zero groups, leftmost
	 * on a tie, becomes "::" (groups 4..7 are zero, so there is one). */
	for (int i = 0; i < 4; i++)
		w[i] = (unsigned)(a->b[2 * i] << 8 | a->b[2 * i + 1]);
	for (int i = 0; i < 8; i++) {
		int j = i;
		while (j < 8 && w[j] == 0)
			j++;
		if (j - i > bestlen) {
			best = i;
			bestlen = j - i;
		}
		if (j > i)
			i = j - 1;
	}
	for (int i = 0; i < 8; i++) {
		if (i == best && bestlen >= 2) {
			k += (size_t)snprintf(tmp + k, sizeof tmp - k, "::");
			i += bestlen - 1;
			after_gap = true;
			continue;
		}
		k += (size_t)snprintf(tmp + k, sizeof tmp - k, "%s%x", after_gap ? "" : ":", w[i]);
		after_gap = false;
	}
	snprintf(out, n, "%s/64", tmp);
}

int ipkey_make_n(const char *ip, size_t len, char *out, size_t n)
{
	struct ipkey_addr a;
	if (!ip || ipkey_parse(ip, len, &a) < 0) {
		snprintf(out, n, "%s", IPKEY_INVALID);
		return -1;
	}
	ipkey_format(&a, out, n);
	return 0;
}

int ipkey_make(const char *ip, char *out, size_t n)
{
	return ipkey_make_n(ip, ip ? strnlen(ip, INPUT_MAX + 1) : 0, out, n);
}

static void mask_bits(uint8_t b[16], int bits)
{
	for (int i = 0; i < 16; i++) {
		int keep = bits - 8 * i;
		if (keep >= 8)
			continue;
		b[i] = keep <= 0 ? 0 : (uint8_t)(b[i] & (0xff << (8 - keep)));
	}
}

#define ALLOW_ACCEPTED \
	"expected a comma-separated list of IPv4 or IPv6 addresses or CIDRs, e.g. " \
	"\"10.0.0.0/8, 192.0.2.7, 2001:db8::/32\" (prefix 0-32 for IPv4, 0-128 for IPv6)"

int ipkey_allow_parse(const char *list, struct ipkey_allow *out, char *err, size_t errlen)
{
	const char *p = list;

	out->n = 0;
	out->v = NULL;
	if (!list)
		return 0;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *q = p;
		size_t qlen = len;
		struct ipkey_addr a;
		int family, plen;

		while (qlen && is_blank(*q)) {
			q++;
			qlen--;
		}
		while (qlen && is_blank(q[qlen - 1]))
			qlen--;
		if (qlen) {
			if (parse_ex(q, qlen, &a, &family, &plen) < 0) {
				if (err && errlen)
					snprintf(err, errlen, "invalid entry \"%.*s\": %s",
					         (int)(qlen > 80 ? 80 : qlen), q, ALLOW_ACCEPTED);
				ipkey_allow_free(out);
				return -1;
			}
			out->v = xrealloc(out->v, (out->n + 1) * sizeof *out->v);
			memcpy(out->v[out->n].b, a.b, 16);
			if (plen < 0)
				plen = family == 4 ? 32 : 128;
			out->v[out->n].bits = family == 4 ? 96 + plen : plen;
			mask_bits(out->v[out->n].b, out->v[out->n].bits);
			out->n++;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

bool ipkey_allow_match(const struct ipkey_allow *l, const struct ipkey_addr *a)
{
	for (size_t i = 0; i < l->n; i++) {
		uint8_t b[16];
		memcpy(b, a->b, 16);
		mask_bits(b, l->v[i].bits);
		if (!memcmp(b, l->v[i].b, 16))
			return true;
	}
	return false;
}

bool ipkey_allow_match_text(const struct ipkey_allow *l, const char *ip)
{
	struct ipkey_addr a;
	if (!ip || !l->n || ipkey_parse(ip, strnlen(ip, INPUT_MAX + 1), &a) < 0)
		return false;
	return ipkey_allow_match(l, &a);
}

void ipkey_allow_free(struct ipkey_allow *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}
