/*
 * JSON paths `a.b[2].c` (see jpath.h): a parser into a segment list and a
 * resolver that explains why a value is missing.
 */
#include "jcanon.h"
#include "jpath.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum seg_kind { SEG_KEY, SEG_INDEX, SEG_KEY_OR_INDEX };

struct seg {
	enum seg_kind kind;
	char *key;          /* SEG_KEY, SEG_KEY_OR_INDEX (NUL-terminated, may hold no NUL) */
	size_t keylen;
	size_t index;       /* SEG_INDEX, SEG_KEY_OR_INDEX */
};

struct jpath {
	char *text;
	size_t nseg;
	struct seg segs[];
};

static int fail(char *err, size_t n, size_t pos, const char *what)
{
	if (n)
		snprintf(err, n, "position %zu: %s", pos, what);
	return -1;
}

/* Parses a decimal index s[*i..] up to ']' (exclusive). */
static int parse_index(const char *s, size_t len, size_t *i, size_t *out, char *err, size_t n)
{
	size_t start = *i, v = 0;
	if (*i >= len || s[*i] < '0' || s[*i] > '9')
		return fail(err, n, *i, "expected a non-negative integer index");
	while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
		if (v > 100000000)
			return fail(err, n, start, "index too large");
		v = v * 10 + (size_t)(s[*i] - '0');
		(*i)++;
	}
	if (*i - start > 1 && s[start] == '0')
		return fail(err, n, start, "index has a leading zero");
	*out = v;
	return 0;
}

/* Parses a quoted key starting at s[*i] == '"' into b. */
static int parse_quoted(const char *s, size_t len, size_t *i, struct strbuf *b, char *err, size_t n)
{
	size_t start = *i;
	(*i)++;
	strbuf_addlit(b, "");
	while (*i < len && s[*i] != '"') {
		char c = s[*i];
		if ((unsigned char)c < 0x20)
			return fail(err, n, *i, "control character in quoted key");
		if (c != '\\') {
			strbuf_add(b, &c, 1);
			(*i)++;
			continue;
		}
		if (*i + 1 >= len)
			return fail(err, n, *i, "unterminated escape");
		char e = s[*i + 1];
		*i += 2;
		switch (e) {
		case '"': case '\\': case '/':
			strbuf_add(b, &e, 1);
			break;
		case 'b': strbuf_addlit(b, "\b"); break;
		case 'f': strbuf_addlit(b, "\f"); break;
		case 'n': strbuf_addlit(b, "\n"); break;
		case 'r': strbuf_addlit(b, "\r"); break;
		case 't': strbuf_addlit(b, "\t"); break;
		case 'u': {
			unsigned cp = 0;
			if (*i + 4 > len)
				return fail(err, n, *i, "short \\u escape");
			for (int k = 0; k < 4; k++) {
				int h = hex_digit((unsigned char)s[*i + (size_t)k]);
				if (h < 0)
					return fail(err, n, *i, "bad \\u escape");
				cp = cp * 16 + (unsigned)h;
			}
			*i += 4;
			if (cp >= 0xD800 && cp <= 0xDBFF) {
				unsigned lo = 0;
				if (*i + 6 > len || s[*i] != '\\' || s[*i + 1] != 'u')
					return fail(err, n, *i, "unpaired surrogate");
				for (int k = 0; k < 4; k++) {
					int h = hex_digit((unsigned char)s[*i + 2 + (size_t)k]);
					if (h < 0)
						return fail(err, n, *i, "bad \\u escape");
					lo = lo * 16 + (unsigned)h;
				}
				if (lo < 0xDC00 || lo > 0xDFFF)
					return fail(err, n, *i, "unpaired surrogate");
				*i += 6;
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			} else if (cp >= 0xDC00 && cp <= 0xDFFF) {
				return fail(err, n, *i, "unpaired surrogate");
			}
			if (cp == 0)
				return fail(err, n, *i, "\\u0000 in key");
			strbuf_add_utf8(b, cp);
			break;
		}
		default:
			return fail(err, n, *i - 1, "unknown escape");
		}
	}
	if (*i >= len)
		return fail(err, n, start, "unterminated quoted key");
	(*i)++;
	return 0;
}

int jpath_parse(const char *s, size_t len, struct jpath **out, char *err, size_t errlen)
{
	*out = NULL;
	if (len == 0)
		return fail(err, errlen, 0, "empty path");
	if (len > JPATH_MAX_LEN)
		return fail(err, errlen, 0, "path longer than 1024 bytes");
	if (memchr(s, 0, len))
		return fail(err, errlen, (size_t)((const char *)memchr(s, 0, len) - s), "NUL in path");
	struct seg segs[JPATH_MAX_SEGMENTS];
	size_t nseg = 0, i = 0;
	struct strbuf key = { 0 };
	int rc = -1;
	bool expect_key = true;   /* at the start and after '.' */

	while (i < len) {
		if (nseg >= JPATH_MAX_SEGMENTS) {
			fail(err, errlen, i, "more than 64 segments");
			goto out;
		}
		if (expect_key && i == 0 && s[0] == '[') {
			expect_key = false;   /* a path may start with an index or a quoted key */
			continue;
		}
		if (expect_key) {
			size_t start = i;
			while (i < len && s[i] != '.' && s[i] != '[' && s[i] != ']' && s[i] != '"')
				i++;
			if (i == start) {
				fail(err, errlen, i, "empty key");
				goto out;
			}
			struct seg *g = &segs[nseg++];
			g->keylen = i - start;
			g->key = xstrndup(s + start, g->keylen);
			g->kind = SEG_KEY;
			bool digits = g->keylen <= 9;
			for (size_t k = 0; k < g->keylen && digits; k++)
				digits = g->key[k] >= '0' && g->key[k] <= '9';
			if (digits && !(g->keylen > 1 && g->key[0] == '0')) {
				g->kind = SEG_KEY_OR_INDEX;
				g->index = (size_t)strtoul(g->key, NULL, 10);
			}
			expect_key = false;
			continue;
		}
		if (s[i] == '.') {
			i++;
			if (i == len) {
				fail(err, errlen, i, "path ends with '.'");
				goto out;
			}
			expect_key = true;
			continue;
		}
		if (s[i] == '[') {
			i++;
			struct seg *g = &segs[nseg];
			memset(g, 0, sizeof *g);
			if (i < len && s[i] == '"') {
				key.len = 0;
				if (parse_quoted(s, len, &i, &key, err, errlen) < 0)
					goto out;
				g->kind = SEG_KEY;
				g->keylen = key.len;
				g->key = xmalloc(key.len + 1);
				memcpy(g->key, key.buf, key.len);
				g->key[key.len] = 0;
			} else {
				g->kind = SEG_INDEX;
				if (parse_index(s, len, &i, &g->index, err, errlen) < 0)
					goto out;
			}
			nseg++;
			if (i >= len || s[i] != ']') {
				fail(err, errlen, i, "expected ']'");
				goto out;
			}
			i++;
			continue;
		}
		fail(err, errlen, i, "expected '.' or '['");
		goto out;
	}
	struct jpath *p = xmalloc(sizeof *p + nseg * sizeof(struct seg));
	p->text = xstrndup(s, len);
	p->nseg = nseg;
	memcpy(p->segs, segs, nseg * sizeof(struct seg));
	*out = p;
	nseg = 0;   /* ownership moved */
	rc = 0;
out:
	for (size_t k = 0; k < nseg; k++)
		free(segs[k].key);
	strbuf_free(&key);
	return rc;
}

void jpath_free(struct jpath *p)
{
	if (!p)
		return;
	for (size_t k = 0; k < p->nseg; k++)
		free(p->segs[k].key);
	free(p->text);
	free(p);
}

const char *jpath_text(const struct jpath *p)
{
	return p->text;
}

const json_t *jpath_get(const struct jpath *p, const json_t *root, char *why, size_t whylen)
{
	const json_t *v = root;
	if (!v) {
		if (why && whylen)
			snprintf(why, whylen, "document is missing");
		return NULL;
	}
	for (size_t k = 0; k < p->nseg; k++) {
		const struct seg *g = &p->segs[k];
		if (json_is_object(v) && g->kind != SEG_INDEX) {
			const json_t *c = json_object_getn(v, g->key, g->keylen);
			if (!c) {
				if (why && whylen)
					snprintf(why, whylen, "key '%.*s' not found", (int)utf8_cut(g->key, 64), g->key);
				return NULL;
			}
			v = c;
		} else if (json_is_array(v) && g->kind != SEG_KEY) {
			size_t n = json_array_size(v);
			if (g->index >= n) {
				if (why && whylen)
					snprintf(why, whylen, "index %zu out of range (length %zu)", g->index, n);
				return NULL;
			}
			v = json_array_get(v, g->index);
		} else {
			if (why && whylen) {
				if (g->kind == SEG_INDEX)
					snprintf(why, whylen, "cannot index %s with [%zu]", jcanon_type_name(v), g->index);
				else
					snprintf(why, whylen, "cannot look up key '%.*s' in %s", (int)utf8_cut(g->key, 64),
					         g->key, jcanon_type_name(v));
			}
			return NULL;
		}
	}
	return v;
}
