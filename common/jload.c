/*
 * Fast JSON text -> jansson values (see jload.h): recursive descent over the text in place.
 * Strings without escapes are scanned a byte at a time with no copy until jansson's own
 * constructor copies them; escapes and UTF-8 are checked by the rules jansson applies (RFC 8259
 * escapes, RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF). Whatever
 * jansson would refuse, or read differently, makes jload give up (NULL): the caller then
 * reads the text with json_loadb, which is the authority.
 */
#include "jload.h"

#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct rd {
	const unsigned char *p, *end;
	int depth;
	struct strbuf sb;   /* scratch: the decoded text of a string with escapes */
};

static json_t *value(struct rd *r);

static void ws(struct rd *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
		r->p++;
}

/* Consumes c if it is next. */
static bool eat(struct rd *r, unsigned char c)
{
	if (r->p < r->end && *r->p == c) {
		r->p++;
		return true;
	}
	return false;
}

/* After an array element or object member: ',' and the whitespace after it (1: another
 * follows), the closing bracket `close` (0), or anything else (-1: not JSON). */
static int next_member(struct rd *r, unsigned char close)
{
	ws(r);
	if (eat(r, ',')) {
		ws(r);
		return 1;
	}
	return eat(r, close) ? 0 : -1;
}

/* The length of the valid UTF-8 sequence at s (s[0] >= 0x80, before end), or 0. */
static size_t utf8_seq(const unsigned char *s, const unsigned char *end)
{
	unsigned c = s[0];
	size_t n;
	uint32_t v;
	if (c >= 0xC2 && c <= 0xDF) {
		n = 2;
		v = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		n = 3;
		v = c & 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4;
		v = c & 0x07;
	} else {
		return 0;
	}
	if ((size_t)(end - s) < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3F);
	}
	if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (n == 3 && v < 0x800) ||
	    (n == 4 && v < 0x10000))
		return 0;
	return n;
}

/* The \u escape at s (after its backslash): the 16-bit code unit its four hex digits
 * give, or -1. */
static long u_escape(const unsigned char *s, const unsigned char *end)
{
	if (end - s < 5 || s[0] != 'u')
		return -1;
	long v = 0;
	for (int i = 1; i <= 4; i++) {
		int h = hex_digit(s[i]);
		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

/* The rest of a string from q (at a backslash), decoded into r->sb after the text s..q.
 * 0 with *out (in r->sb) and *outlen, or -1. */
static int str_escaped(struct rd *r, const unsigned char *s, const unsigned char *q,
                       const char **out, size_t *outlen)
{
	const unsigned char *e = r->end;
	r->sb.len = 0;
	strbuf_add(&r->sb, (const char *)s, (size_t)(q - s));
	for (;;) {
		const unsigned char *run = q;
		while (q < e && *q >= 0x20 && *q != '"' && *q != '\\' && *q < 0x80)
			q++;
		strbuf_add(&r->sb, (const char *)run, (size_t)(q - run));
		if (q >= e || *q < 0x20)
			return -1;
		if (*q == '"')
			break;
		if (*q >= 0x80) {
			size_t n = utf8_seq(q, e);
			if (!n)
				return -1;
			strbuf_add(&r->sb, (const char *)q, n);
			q += n;
			continue;
		}
		/* a backslash */
		if (++q >= e)
			return -1;
		char c;
		switch (*q) {
		case '"': c = '"'; break;
		case '\\': c = '\\'; break;
		case '/': c = '/'; break;
		case 'b': c = '\b'; break;
		case 'f': c = '\f'; break;
		case 'n': c = '\n'; break;
		case 'r': c = '\r'; break;
		case 't': c = '\t'; break;
		case 'u': {
			long v = u_escape(q, e);
			if (v <= 0 || (v >= 0xDC00 && v <= 0xDFFF))   /* \u0000 (jansson refuses it), a lone low surrogate */
				return -1;
			q += 5;
			if (v >= 0xD800 && v <= 0xDBFF) {   /* needs its low surrogate next */
				if (e - q < 6 || q[0] != '\\')
					return -1;
				long lo = u_escape(q + 1, e);
				if (lo < 0xDC00 || lo > 0xDFFF)
					return -1;
				v = ((v - 0xD800) << 10) + (lo - 0xDC00) + 0x10000;
				q += 6;
			}
			strbuf_add_utf8(&r->sb, (uint32_t)v);
			continue;
		}
		default:
			return -1;
		}
		strbuf_add(&r->sb, &c, 1);
		q++;
	}
	*out = r->sb.buf;
	*outlen = r->sb.len;
	r->p = q + 1;
	return 0;
}

/* A string after its opening quote: 0 with the bytes in *out (in the text, or in r->sb when
 * it has escapes) and *outlen, the reader past the closing quote; or -1. */
static int str(struct rd *r, const char **out, size_t *outlen)
{
	const unsigned char *s = r->p, *e = r->end, *q = s;
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	for (;;) {
		/* 8 bytes at a time while none is a control character, '"', '\\' or non-ASCII: each
		 * test flags a word that holds such a byte (never one that does not); the byte loop
		 * then finds it. */
		while ((size_t)(e - q) >= 8) {
			uint64_t w;
			memcpy(&w, q, 8);
			uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
			if ((w | ((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) |
			     ((bslash - ones) & ~bslash)) & highs)
				break;
			q += 8;
		}
		while (q < e && *q >= 0x20 && *q != '"' && *q != '\\' && *q < 0x80)
			q++;
		if (q >= e || *q < 0x20)
			return -1;
		if (*q == '"')
			break;
		if (*q == '\\')
			return str_escaped(r, s, q, out, outlen);
		size_t n = utf8_seq(q, e);
		if (!n)
			return -1;
		q += n;
	}
	*out = (const char *)s;
	*outlen = (size_t)(q - s);
	r->p = q + 1;
	return 0;
}

static bool digit(const unsigned char *q, const unsigned char *e)
{
	return q < e && *q >= '0' && *q <= '9';
}

/* strtod of text s..s+n as jansson reads reals; false on overflow (jansson refuses it) or
 * when the locale's decimal point is not '.'. */
static bool real_strtod(const unsigned char *s, size_t n, double *out)
{
	const char *dp = localeconv()->decimal_point;
	if (dp[0] != '.' || dp[1])
		return false;
	char small[64];
	char *b = n < sizeof small ? small : xmalloc(n + 1);
	memcpy(b, s, n);
	b[n] = 0;
	char *end;
	errno = 0;
	double v = strtod(b, &end);
	bool ok = end == b + n && !((v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE);
	if (b != small)
		free(b);
	*out = v;
	return ok;
}

static json_t *num(struct rd *r)
{
	static const double p10[] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	                              1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
	const unsigned char *s = r->p, *q = s, *e = r->end;
	bool neg = q < e && *q == '-', real = false;
	q += neg;
	if (!digit(q, e))
		return NULL;
	uint64_t m = 0;   /* the digits, while they fit (nd <= 19) */
	size_t nd = 0, nfrac = 0;   /* counts of digits: a text may hold more than INT_MAX */
	if (*q == '0') {
		q++;
		if (digit(q, e))
			return NULL;   /* a leading zero */
	} else {
		for (; digit(q, e); q++, nd++)
			if (nd < 19)
				m = m * 10 + (uint64_t)(*q - '0');
	}
	size_t nint = nd;
	if (q < e && *q == '.') {
		q++;
		if (!digit(q, e))
			return NULL;
		for (; digit(q, e); q++, nd++, nfrac++)
			if (nd < 19)
				m = m * 10 + (uint64_t)(*q - '0');
		real = true;
	}
	long ex = 0;
	bool big_ex = false;
	if (q < e && (*q == 'e' || *q == 'E')) {
		q++;
		bool eneg = q < e && *q == '-';
		if (q < e && (*q == '+' || *q == '-'))
			q++;
		if (!digit(q, e))
			return NULL;
		for (; digit(q, e); q++) {
			if (ex < 100000)
				ex = ex * 10 + (*q - '0');
			else
				big_ex = true;
		}
		ex = eneg ? -ex : ex;
		real = true;
	}
	r->p = q;
	if (!real) {
		/* 20 digits or more are beyond 64 bits (no leading zeros): left to jansson */
		if (nint > 19 || m > (uint64_t)INT64_MAX + neg)
			return NULL;
		return json_integer(neg ? (m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(json_int_t)m)
		                        : (json_int_t)m);
	}
	double v;
#if FLT_EVAL_METHOD == 0
	/* Exact digits below 2^53 scaled by an exact power of ten: one correctly rounded IEEE
	 * operation, the same double strtod gives. */
	long e10 = ex - (long)(nfrac < 20 ? nfrac : 20);
	if (!big_ex && nd <= 19 && m < ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) {
		v = e10 < 0 ? (double)m / p10[-e10] : (double)m * p10[e10];
		return json_real(neg ? -v : v);
	}
#else
	(void)p10;
	(void)big_ex;
#endif
	if (!real_strtod(s, (size_t)(q - s), &v))
		return NULL;
	return json_real(v);
}

static json_t *arr(struct rd *r)
{
	json_t *a = json_array();
	r->p++;
	ws(r);
	if (eat(r, ']'))
		return a;
	for (;;) {
		json_t *v = value(r);
		if (!v || json_array_append_new(a, v) < 0)
			break;
		int m = next_member(r, ']');
		if (m > 0)
			continue;
		if (m == 0)
			return a;
		break;
	}
	json_decref(a);
	return NULL;
}

static json_t *obj(struct rd *r)
{
	json_t *o = json_object();
	r->p++;
	ws(r);
	if (eat(r, '}'))
		return o;
	for (;;) {
		const char *k;
		size_t kl;
		char *own = NULL;
		if (r->p >= r->end || *r->p != '"')
			break;
		r->p++;
		if (str(r, &k, &kl) < 0)
			break;
		if (k == r->sb.buf) {   /* decoded in the scratch buffer, which the value may reuse */
			own = xmalloc(kl + 1);
			memcpy(own, k, kl);
			k = own;
		}
		ws(r);
		json_t *v = NULL;
		if (eat(r, ':')) {
			ws(r);
			v = value(r);
		}
		int rc = v ? json_object_setn_new_nocheck(o, k, kl, v) : -1;
		free(own);
		if (rc < 0)
			break;
		int m = next_member(r, '}');
		if (m > 0)
			continue;
		if (m == 0)
			return o;
		break;
	}
	json_decref(o);
	return NULL;
}

static json_t *value(struct rd *r)
{
	if (r->p >= r->end)
		return NULL;
	switch (*r->p) {
	case '{':
	case '[': {
		if (++r->depth > JLOAD_MAX_DEPTH)
			return NULL;
		json_t *v = *r->p == '{' ? obj(r) : arr(r);
		r->depth--;
		return v;
	}
	case '"': {
		const char *s;
		size_t n;
		r->p++;
		if (str(r, &s, &n) < 0)
			return NULL;
		return json_stringn_nocheck(s, n);
	}
	case 't':
		if (r->end - r->p >= 4 && !memcmp(r->p, "true", 4)) {
			r->p += 4;
			return json_true();
		}
		return NULL;
	case 'f':
		if (r->end - r->p >= 5 && !memcmp(r->p, "false", 5)) {
			r->p += 5;
			return json_false();
		}
		return NULL;
	case 'n':
		if (r->end - r->p >= 4 && !memcmp(r->p, "null", 4)) {
			r->p += 4;
			return json_null();
		}
		return NULL;
	default:
		return num(r);
	}
}

json_t *jload(const char *text, size_t len)
{
	if (!text)
		return NULL;
	struct rd r = { (const unsigned char *)text, (const unsigned char *)text + len, 0, { 0 } };
	ws(&r);
	json_t *v = value(&r);
	ws(&r);
	if (v && r.p != r.end) {   /* more than one value */
		json_decref(v);
		v = NULL;
	}
	strbuf_free(&r.sb);
	return v;
}
