/*
 * The operator console's pure parts: request heads, query parameters, the token check,
 * text made safe for JSON, the requeue's rules and the charts' quantiles (see console.h).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "console.h"
#include "util.h"

/* Copies s[0..n) into a field of size cap; false when it does not fit. */
static bool copy_field(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		return false;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return true;
}

/* One header line (without its line end) into req. */
static bool header(const char *l, size_t n, struct console_request *req)
{
	const char *colon = memchr(l, ':', n);
	if (!colon || colon == l)
		return false;
	size_t kn = (size_t)(colon - l);
	const char *v = colon + 1, *end = l + n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	size_t vn = (size_t)(end - v);
	for (size_t i = 0; i < vn; i++)
		if ((unsigned char)v[i] < 0x20 && v[i] != '\t')
			return false;
#define IS(name) (kn == sizeof(name) - 1 && !strncasecmp(l, name, kn))
	if (IS("X-Arbiter-Token"))
		return copy_field(req->token, sizeof req->token, v, vn);
	if (IS("X-Arbiter-Operator"))
		return copy_field(req->operator_name, sizeof req->operator_name, v, vn);
	if (IS("Origin"))
		return copy_field(req->origin, sizeof req->origin, v, vn);
	if (IS("Host"))
		return copy_field(req->host, sizeof req->host, v, vn);
	if (IS("Content-Length")) {
		if (req->content_length >= 0 || vn == 0 || vn > 9)
			return false;    /* twice, empty or absurd */
		long x = 0;
		for (size_t i = 0; i < vn; i++) {
			if (!isdigit((unsigned char)v[i]))
				return false;
			x = x * 10 + (v[i] - '0');
		}
		req->content_length = x;
		return true;
	}
	if (IS("Transfer-Encoding"))
		return false;    /* no chunked bodies */
#undef IS
	return true;
}

enum console_parse console_parse(const char *buf, size_t len, struct console_request *req)
{
	memset(req, 0, sizeof *req);
	req->content_length = -1;
	const char *end = NULL;
	size_t endlen = 0;
	for (size_t i = 0; i + 1 < len && i < CONSOLE_MAX_HEAD; i++) {
		if (buf[i] == '\n' && buf[i + 1] == '\n') {
			end = buf + i; endlen = 2;
			break;
		}
		if (buf[i] == '\n' && i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
			end = buf + i; endlen = 3;
			break;
		}
	}
	if (!end)
		return len >= CONSOLE_MAX_HEAD ? CONSOLE_TOO_LARGE : CONSOLE_INCOMPLETE;
	req->head_len = (size_t)(end - buf) + endlen;
	/* request line */
	const char *p = buf, *eol = memchr(p, '\n', (size_t)(end - p) + 1);
	size_t ln = (size_t)(eol - p);
	if (ln && p[ln - 1] == '\r')
		ln--;
	const char *sp1 = memchr(p, ' ', ln);
	if (!sp1 || !copy_field(req->method, sizeof req->method, p, (size_t)(sp1 - p)))
		return CONSOLE_BAD;
	const char *t = sp1 + 1;
	const char *sp2 = memchr(t, ' ', ln - (size_t)(t - p));
	if (!sp2 || *t != '/')
		return CONSOLE_BAD;
	size_t vlen = ln - (size_t)(sp2 + 1 - p);
	if (vlen != 8 || strncmp(sp2 + 1, "HTTP/1.", 7) || (sp2[8] != '0' && sp2[8] != '1'))
		return CONSOLE_BAD;
	const char *q = memchr(t, '?', (size_t)(sp2 - t));
	const char *pe = q ? q : sp2;
	if (!copy_field(req->path, sizeof req->path, t, (size_t)(pe - t)))
		return CONSOLE_BAD;
	if (q && !copy_field(req->query, sizeof req->query, q + 1, (size_t)(sp2 - q - 1)))
		return CONSOLE_BAD;
	for (const char *c = t; c < sp2; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return CONSOLE_BAD;
	/* headers */
	p = eol + 1;
	while (p <= end) {
		eol = memchr(p, '\n', (size_t)(end - p) + 1);
		if (!eol)
			break;
		ln = (size_t)(eol - p);
		if (ln && p[ln - 1] == '\r')
			ln--;
		if (ln && !header(p, ln, req))
			return CONSOLE_BAD;
		p = eol + 1;
	}
	if (req->content_length > CONSOLE_MAX_BODY)
		return CONSOLE_TOO_LARGE;
	return CONSOLE_OK;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

bool console_param(const char *q, const char *name, char *out, size_t n)
{
	size_t nl = strlen(name);
	const char *p = q;
	while (p && *p) {
		const char *amp = strchr(p, '&');
		size_t seg = amp ? (size_t)(amp - p) : strlen(p);
		if (seg > nl && !strncmp(p, name, nl) && p[nl] == '=') {
			size_t o = 0;
			for (size_t i = nl + 1; i < seg; i++) {
				int c = (unsigned char)p[i];
				if (c == '+') {
					c = ' ';
				} else if (c == '%') {
					int h = i + 2 < seg ? hexval(p[i + 1]) : -1;
					int l = h >= 0 ? hexval(p[i + 2]) : -1;
					if (l < 0)
						return false;
					c = h * 16 + l;
					i += 2;
				}
				if (c == 0 || o + 1 >= n)
					return false;
				out[o++] = (char)c;
			}
			out[o] = '\0';
			return true;
		}
		if (seg == nl && !strncmp(p, name, nl)) {
			if (n == 0)
				return false;
			out[0] = '\0';
			return true;
		}
		p = amp ? amp + 1 : NULL;
	}
	return false;
}

bool console_token_ok(const char *configured, const char *given)
{
	size_t a = strlen(configured), b = strlen(given);
	if (a == 0)
		return false;
	unsigned char diff = a != b;
	for (size_t i = 0; i < a; i++)
		diff |= (unsigned char)configured[i] ^ (unsigned char)(i < b ? given[i] : 0);
	return diff == 0;
}

/* The length of the well-formed UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	size_t len;
	uint32_t cp, min;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2; cp = c & 0x1f; min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3; cp = c & 0x0f; min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4; cp = c & 0x07; min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

json_t *console_text(const char *s, size_t n)
{
	if (!s)
		return json_null();
	const unsigned char *u = (const unsigned char *)s;
	char *out = xmalloc(n * 4 + 1);
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t k = u[i] ? utf8_seq(u + i, n - i) : 0;
		if (k == 0) {
			o += (size_t)sprintf(out + o, "\\x%02x", u[i]);
			i++;
		} else {
			memcpy(out + o, u + i, k);
			o += k;
			i += k;
		}
	}
	json_t *j = json_stringn(out, o);
	free(out);
	return j ? j : json_string("");
}

bool console_is_uuid(const char *s)
{
	if (strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!isxdigit((unsigned char)s[i])) {
			return false;
		}
	}
	return true;
}

bool console_is_entry_id(const char *s)
{
	size_t i = 0, d = 0;
	while (isdigit((unsigned char)s[i]) && d < 21)
		i++, d++;
	if (d == 0 || d > 20)
		return false;
	if (!s[i])
		return true;
	if (s[i++] != '-')
		return false;
	d = 0;
	while (isdigit((unsigned char)s[i]) && d < 21)
		i++, d++;
	return d >= 1 && d <= 20 && !s[i];
}

enum console_requeue console_requeue_classify(const char *status, bool has_result,
                                              bool include_failed, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	if (!status) {
		*why = "no such submission";
		return CONSOLE_REQUEUE_SKIP;
	}
	if (has_result) {
		*why = "has a result: re-evaluated";
		return CONSOLE_REQUEUE_REEVALUATE;
	}
	if (!strcmp(status, "queued") || !strcmp(status, "evaluating")) {
		*why = "no result yet: evaluated";
		return CONSOLE_REQUEUE_EVALUATE;
	}
	if (!strcmp(status, "failed")) {
		*why = include_failed ? "failed: set back to queued (include failed)"
		                      : "failed and no result: include failed to evaluate it again";
		return include_failed ? CONSOLE_REQUEUE_RESET : CONSOLE_REQUEUE_SKIP;
	}
	*why = "no result and not queued, evaluating or failed: nothing to re-evaluate";
	return CONSOLE_REQUEUE_SKIP;
}

bool console_requeue_confirm(long total, long confirm_over, bool elo_adjust, bool by_ids,
                             long reevaluate, char *why, size_t n)
{
	size_t o = 0;
	if (n)
		why[0] = '\0';
	if (total <= 0)
		return false;
	if (total > confirm_over && o < n)
		o += (size_t)snprintf(why + o, n - o, "%ld jobs (more than %ld)", total, confirm_over);
	if (elo_adjust && !by_ids && reevaluate > 0 && o < n)
		o += (size_t)snprintf(why + o, n - o, "%selo=adjust moves the Elo of every agent of "
		                      "the selection", o ? "; " : "");
	return o > 0;
}

double console_quantile(const uint64_t *counts, const double *bounds, size_t nb, double q)
{
	uint64_t total = 0;
	for (size_t i = 0; i <= nb; i++)
		total += counts[i];
	if (total == 0)
		return -1;
	double rank = q * (double)total, below = 0;
	for (size_t i = 0; i < nb; i++) {
		if (counts[i] && below + (double)counts[i] >= rank) {
			double lo = i ? bounds[i - 1] : 0;
			return lo + (bounds[i] - lo) * ((rank - below) / (double)counts[i]);
		}
		below += (double)counts[i];
	}
	return nb ? bounds[nb - 1] : 0;
}
