/*
 * Linear-time regular expressions (see rx.h): a recursive-descent parser
 * builds a small syntax tree, which is sized (counted repeats expanded) and
 * then emitted as a Thompson NFA program (CHAR, ANY, CLASS, SPLIT, JMP,
 * assertions, MATCH). Searching keeps the set of live program counters per
 * text position (sparse sets, no duplicates), so each code point costs at
 * most the program size: O(text × program), with a caller-given budget.
 */
#include "rx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <utf8proc.h>

#include "util.h"

enum nk { N_EMPTY, N_CHAR, N_ANY, N_CLASS, N_CAT, N_ALT, N_REP, N_BOL, N_EOL, N_WB, N_NWB };

#define REP_INF (-1)

struct range { int32_t lo, hi; };
struct cls {
	uint64_t ascii[2];         /* membership of code points 0..127 (filled after parsing) */
	bool neg;
	unsigned named;            /* bits: 1 \d, 2 \D, 4 \w, 8 \W, 16 \s, 32 \S */
	size_t nr;
	struct range *r;
	unsigned extra;            /* steps charged beyond one for a test past the ASCII bitmap */
};

struct node {
	enum nk k;
	int32_t c;                 /* N_CHAR code point; N_CLASS class index */
	int a, b;                  /* children; N_REP: a = child */
	int min, max;              /* N_REP */
};

enum op { I_CHAR, I_ANY, I_CLASS, I_SPLIT, I_JMP, I_MATCH, I_BOL, I_EOL, I_WB, I_NWB };
struct inst { enum op op; int32_t c; int x, y; };

struct rx {
	struct inst *prog;
	size_t n;
	struct cls *cls;
	size_t ncls;
	bool icase;
	bool bol;                  /* program starts with ^: only position 0 can start a match */
	int lit;                   /* ASCII byte every match starts with (case-sensitive), or -1 */
	bool filter;               /* first[] is usable: a match can only start at such a byte */
	uint8_t first[256];        /* bytes a match can start with (UTF-8 lead bytes for non-ASCII) */
};

struct parser {
	const char *s;
	size_t pos, len;
	int depth;
	struct node *nodes;
	size_t nn, capn;
	struct cls *cls;
	size_t ncls, capc;
	bool icase;
	char *err;
	size_t errlen;
	bool failed;
};

__attribute__((format(printf, 3, 4)))
static int perr(struct parser *p, size_t at, const char *fmt, ...)
{
	if (p->failed)
		return -1;
	p->failed = true;
	if (p->errlen) {
		int n = snprintf(p->err, p->errlen, "position %zu: ", at + 1);
		if (n >= 0 && (size_t)n < p->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -1;
}

static int add(struct parser *p, enum nk k, int32_t c, int a, int b)
{
	if (p->nn == p->capn) {
		p->capn = p->capn ? p->capn * 2 : 32;
		p->nodes = xrealloc(p->nodes, p->capn * sizeof *p->nodes);
	}
	p->nodes[p->nn] = (struct node){ .k = k, .c = c, .a = a, .b = b };
	return (int)p->nn++;
}

/* Simple case folding, the one case-insensitive literals and classes share: the Unicode
 * case folding of c when it is a single code point (K U+212A, k and K all fold to k;
 * long s to s; Ohm sign U+2126 to omega; Angstrom sign U+212B to a with ring), else c's
 * lowercase (the full folding of ß is "ss": ß stays ß; U+0130 gives i). Idempotent. */
static int32_t fold(int32_t c)
{
	if (c < 128)
		return c >= 'A' && c <= 'Z' ? c + 32 : c;
	if (c > 0x10FFFF)
		return c;
	const utf8proc_property_t *pr = utf8proc_get_property(c);
	if (pr->casefold_seqindex == UINT16_MAX && pr->lowercase_seqindex == UINT16_MAX)
		return c;      /* no folding, no lowercase: most code points, quickly */
	utf8proc_int32_t out[4];
	int bound = 0;
	if (utf8proc_decompose_char(c, out, 4, UTF8PROC_CASEFOLD, &bound) == 1)
		return out[0];
	return (int32_t)utf8proc_tolower(c);
}

/* Every code point whose fold is not itself, with its fold, by code point: built once (the
 * scan of all code points takes a few ms) and read by any thread after. */
struct foldpair { int32_t c, f; };
static struct foldpair *folds;
static size_t nfolds;
static once_flag folds_once = ONCE_FLAG_INIT;

static void folds_build(void)
{
	size_t cap = 4096;
	folds = xcalloc(cap, sizeof *folds);
	for (int32_t c = 0; c <= 0x10FFFF; c++) {
		int32_t f = fold(c);
		if (f == c)
			continue;
		if (nfolds == cap) {
			cap *= 2;
			folds = xrealloc(folds, cap * sizeof *folds);
		}
		folds[nfolds++] = (struct foldpair){ c, f };
	}
}

/* Decodes one code point at pos (invalid bytes: U+FFFD, one byte). */
static int32_t decode(const char *s, size_t len, size_t *pos)
{
	if ((unsigned char)s[*pos] < 0x80)
		return (unsigned char)s[(*pos)++];
	utf8proc_int32_t c;
	utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)s + *pos,
	                                      (utf8proc_ssize_t)(len - *pos), &c);
	if (n <= 0) {
		*pos += 1;
		return 0xFFFD;
	}
	*pos += (size_t)n;
	return c;
}

static bool is_word(int32_t c)
{
	if (c < 0)
		return false;
	if (c < 128)
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
	utf8proc_category_t k = utf8proc_category(c);
	return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
	       (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO) || k == UTF8PROC_CATEGORY_MN;
}

static bool is_digit_cp(int32_t c)
{
	if (c < 128)
		return c >= '0' && c <= '9';
	return utf8proc_category(c) == UTF8PROC_CATEGORY_ND;
}

static bool is_space_cp(int32_t c)
{
	if (c == ' ' || (c >= 9 && c <= 13))
		return true;
	if (c < 128)
		return false;
	utf8proc_category_t k = utf8proc_category(c);
	return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

static bool named_match(unsigned named, int32_t c)
{
	if ((named & 1) && is_digit_cp(c)) return true;
	if ((named & 2) && !is_digit_cp(c)) return true;
	if ((named & 4) && is_word(c)) return true;
	if ((named & 8) && !is_word(c)) return true;
	if ((named & 16) && is_space_cp(c)) return true;
	if ((named & 32) && !is_space_cp(c)) return true;
	return false;
}

/* Whether c is in the ranges of k, which are sorted and disjoint (cls_finish): a binary
 * search, so a class test costs O(log ranges) whatever the pattern (a class of a thousand
 * ranges is about ten comparisons, and one search step). */
static bool ranges_have(const struct cls *k, int32_t c)
{
	size_t lo = 0, hi = k->nr;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c < k->r[mid].lo)
			hi = mid;
		else if (c > k->r[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

/* Whether the class k holds c; fc is c's fold when the pattern ignores case (the ranges then
 * hold the folds of their members too: cls_fold), else c. */
static bool cls_has(const struct cls *k, int32_t c, int32_t fc)
{
	return (named_match(k->named, c) || ranges_have(k, fc)) != k->neg;
}

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts the ranges of k and merges those that overlap or touch, so they are disjoint and
 * ranges_have can search them. */
static void cls_finish(struct cls *k)
{
	if (k->nr < 2)
		return;
	qsort(k->r, k->nr, sizeof *k->r, range_cmp);
	size_t w = 0;
	for (size_t i = 1; i < k->nr; i++) {
		if (k->r[i].lo <= k->r[w].hi + 1) {
			if (k->r[i].hi > k->r[w].hi)
				k->r[w].hi = k->r[i].hi;
		} else {
			k->r[++w] = k->r[i];
		}
	}
	k->nr = w + 1;
}

static struct cls *new_cls(struct parser *p, int *idx)
{
	if (p->ncls == p->capc) {
		p->capc = p->capc ? p->capc * 2 : 8;
		p->cls = xrealloc(p->cls, p->capc * sizeof *p->cls);
	}
	*idx = (int)p->ncls;
	p->cls[p->ncls] = (struct cls){ 0 };
	return &p->cls[p->ncls++];
}

static void cls_add(struct cls *k, int32_t lo, int32_t hi)
{
	k->r = xrealloc(k->r, (k->nr + 1) * sizeof *k->r);
	k->r[k->nr++] = (struct range){ lo, hi };
}

/* For a case-insensitive pattern: adds to k's sorted, merged ranges the fold of every member,
 * so that "fold(c) is in the ranges" means "some member folds as c does", the test literals
 * make (fold is idempotent: a member that is its own fold stands for itself). */
static void cls_fold(struct cls *k)
{
	call_once(&folds_once, folds_build);
	size_t nr = k->nr, *first = xcalloc(nr ? nr : 1, sizeof *first), add = 0;
	for (size_t i = 0; i < nr; i++) {
		size_t lo = 0, hi = nfolds;
		while (lo < hi) {      /* first pair at or after the range's start */
			size_t mid = lo + (hi - lo) / 2;
			if (folds[mid].c < k->r[i].lo)
				lo = mid + 1;
			else
				hi = mid;
		}
		first[i] = lo;
		for (size_t j = lo; j < nfolds && folds[j].c <= k->r[i].hi; j++)
			add++;
	}
	if (add) {
		k->r = xrealloc(k->r, (nr + add) * sizeof *k->r);
		for (size_t i = 0; i < nr; i++)
			for (size_t j = first[i]; j < nfolds && folds[j].c <= k->r[i].hi; j++)
				k->r[k->nr++] = (struct range){ folds[j].f, folds[j].f };
		cls_finish(k);
	}
	free(first);
}

/* Escape after '\' at pos (already consumed). Returns a code point ≥ 0, or -(named bit) for
 * a class escape, or -100 - kind for an assertion (only outside classes), or INT32_MIN on error. */
static int32_t parse_escape(struct parser *p, bool in_class)
{
	size_t at = p->pos - 1;
	if (p->pos >= p->len) {
		perr(p, at, "pattern ends after '\\'");
		return INT32_MIN;
	}
	int32_t c = decode(p->s, p->len, &p->pos);
	switch (c) {
	case 'd': return -1;
	case 'D': return -2;
	case 'w': return -4;
	case 'W': return -8;
	case 's': return -16;
	case 'S': return -32;
	case 'n': return '\n';
	case 'r': return '\r';
	case 't': return '\t';
	case 'f': return '\f';
	case 'v': return '\v';
	case 'b':
	case 'B':
		if (in_class)
			break;
		return c == 'b' ? -101 : -102;
	default:
		if (c < 128 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			return c;    /* escaped punctuation is literal */
		break;
	}
	perr(p, at, "unsupported escape '\\%c' (supported: \\d \\D \\w \\W \\s \\S \\b \\B \\n \\r "
	     "\\t and escaped punctuation)", c < 128 && c > 32 ? (char)c : '?');
	return INT32_MIN;
}

static int parse_class(struct parser *p)
{
	size_t at = p->pos - 1;   /* the '[' */
	int idx;
	struct cls *k = new_cls(p, &idx);
	if (p->pos < p->len && p->s[p->pos] == '^') {
		k->neg = true;
		p->pos++;
	}
	bool first = true;
	for (;;) {
		if (p->pos >= p->len)
			return perr(p, at, "unterminated character class");
		if (p->s[p->pos] == ']' && !first) {
			p->pos++;
			break;
		}
		first = false;
		int32_t lo;
		if (p->s[p->pos] == '\\') {
			p->pos++;
			lo = parse_escape(p, true);
			if (lo == INT32_MIN)
				return -1;
			k = &p->cls[idx];
			if (lo < 0) {
				k->named |= (unsigned)-lo;
				continue;
			}
		} else {
			lo = decode(p->s, p->len, &p->pos);
		}
		int32_t hi = lo;
		if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
			size_t rat = p->pos;
			p->pos++;
			if (p->s[p->pos] == '\\') {
				p->pos++;
				hi = parse_escape(p, true);
				if (hi == INT32_MIN)
					return -1;
				if (hi < 0)
					return perr(p, rat, "a range cannot end in a class escape");
			} else {
				hi = decode(p->s, p->len, &p->pos);
			}
			if (hi < lo)
				return perr(p, rat, "range out of order");
		}
		k = &p->cls[idx];
		cls_add(k, lo, hi);
	}
	return add(p, N_CLASS, idx, 0, 0);
}

static int parse_alt(struct parser *p);

static int parse_atom(struct parser *p)
{
	size_t at = p->pos;
	char ch = p->s[p->pos];
	if (ch == '(') {
		p->pos++;
		if (++p->depth > RX_MAX_DEPTH)
			return perr(p, at, "groups nested deeper than %d", RX_MAX_DEPTH);
		if (p->pos + 1 < p->len && p->s[p->pos] == '?') {
			if (p->s[p->pos + 1] != ':')
				return perr(p, at, "unsupported group '(?%c' (only '(?:' is supported)",
				            p->s[p->pos + 1]);
			p->pos += 2;
		}
		int r = parse_alt(p);
		if (r < 0)
			return -1;
		if (p->pos >= p->len || p->s[p->pos] != ')')
			return perr(p, at, "unclosed '('");
		p->pos++;
		p->depth--;
		return r;
	}
	if (ch == '[') {
		p->pos++;
		return parse_class(p);
	}
	if (ch == '.') {
		p->pos++;
		return add(p, N_ANY, 0, 0, 0);
	}
	if (ch == '^') {
		p->pos++;
		return add(p, N_BOL, 0, 0, 0);
	}
	if (ch == '$') {
		p->pos++;
		return add(p, N_EOL, 0, 0, 0);
	}
	if (ch == '*' || ch == '+' || ch == '?' || ch == '{')
		return perr(p, at, "'%c' has nothing to repeat", ch);
	if (ch == ')')
		return perr(p, at, "unmatched ')'");
	if (ch == '\\') {
		p->pos++;
		int32_t c = parse_escape(p, false);
		if (c == INT32_MIN)
			return -1;
		if (c == -101)
			return add(p, N_WB, 0, 0, 0);
		if (c == -102)
			return add(p, N_NWB, 0, 0, 0);
		if (c < 0) {
			int idx;
			struct cls *k = new_cls(p, &idx);
			k->named = (unsigned)-c;
			return add(p, N_CLASS, idx, 0, 0);
		}
		return add(p, N_CHAR, p->icase ? fold(c) : c, 0, 0);
	}
	int32_t c = decode(p->s, p->len, &p->pos);
	return add(p, N_CHAR, p->icase ? fold(c) : c, 0, 0);
}

/* Reads a decimal ≤ RX_MAX_REPEAT at pos; -1 if none, -2 if too large. */
static int read_count(struct parser *p)
{
	if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
		return -1;
	long v = 0;
	while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
		v = v * 10 + (p->s[p->pos++] - '0');
		if (v > RX_MAX_REPEAT)
			return -2;
	}
	return (int)v;
}

static int parse_repeat(struct parser *p)
{
	int a = parse_atom(p);
	if (a < 0)
		return -1;
	while (p->pos < p->len) {
		size_t at = p->pos;
		char ch = p->s[p->pos];
		int min, max;
		if (ch == '*') {
			min = 0;
			max = REP_INF;
			p->pos++;
		} else if (ch == '+') {
			min = 1;
			max = REP_INF;
			p->pos++;
		} else if (ch == '?') {
			min = 0;
			max = 1;
			p->pos++;
		} else if (ch == '{') {
			p->pos++;
			min = read_count(p);
			if (min == -2)
				return perr(p, at, "repeat count above %d", RX_MAX_REPEAT);
			if (min < 0)
				return perr(p, at, "'{' must start a repeat {n}, {n,} or {n,m} (escape it as \\{)");
			max = min;
			if (p->pos < p->len && p->s[p->pos] == ',') {
				p->pos++;
				max = read_count(p);
				if (max == -2)
					return perr(p, at, "repeat count above %d", RX_MAX_REPEAT);
				if (max == -1)
					max = REP_INF;
			}
			if (p->pos >= p->len || p->s[p->pos] != '}')
				return perr(p, at, "unterminated repeat '{'");
			p->pos++;
			if (max != REP_INF && max < min)
				return perr(p, at, "repeat {%d,%d} has max below min", min, max);
		} else {
			break;
		}
		if (p->pos < p->len && p->s[p->pos] == '?')
			p->pos++;   /* lazy: same set of matches */
		if (p->pos < p->len && p->s[p->pos] == '+')
			return perr(p, p->pos, "possessive quantifiers are not supported");
		int r = add(p, N_REP, 0, a, 0);
		p->nodes[r].min = min;
		p->nodes[r].max = max;
		a = r;
		if (p->pos < p->len && (p->s[p->pos] == '*' || p->s[p->pos] == '+' ||
		                        p->s[p->pos] == '{' || p->s[p->pos] == '?'))
			return perr(p, p->pos, "multiple repeat (put the repeated part in a group)");
	}
	return a;
}

static int parse_cat(struct parser *p)
{
	int l = -1;
	while (p->pos < p->len && p->s[p->pos] != '|' && p->s[p->pos] != ')') {
		int r = parse_repeat(p);
		if (r < 0)
			return -1;
		l = l < 0 ? r : add(p, N_CAT, 0, l, r);
	}
	return l < 0 ? add(p, N_EMPTY, 0, 0, 0) : l;
}

static int parse_alt(struct parser *p)
{
	int l = parse_cat(p);
	while (l >= 0 && p->pos < p->len && p->s[p->pos] == '|') {
		p->pos++;
		int r = parse_cat(p);
		if (r < 0)
			return -1;
		l = add(p, N_ALT, 0, l, r);
	}
	return l;
}

/* Instructions node i emits, saturating at RX_MAX_PROG + 1. */
static size_t size_of(const struct parser *p, int i)
{
	const struct node *n = &p->nodes[i];
	size_t a, b;
	switch (n->k) {
	case N_EMPTY: return 0;
	case N_CAT:
		a = size_of(p, n->a);
		b = size_of(p, n->b);
		return a + b > RX_MAX_PROG ? RX_MAX_PROG + 1 : a + b;
	case N_ALT:
		a = size_of(p, n->a);
		b = size_of(p, n->b);
		return a + b + 2 > RX_MAX_PROG ? RX_MAX_PROG + 1 : a + b + 2;
	case N_REP: {
		a = size_of(p, n->a);
		unsigned long long t = (unsigned long long)a * (unsigned long long)n->min;
		if (n->max == REP_INF)
			t += a + 2;
		else
			t += (unsigned long long)(a + 1) * (unsigned long long)(n->max - n->min);
		return t > RX_MAX_PROG ? RX_MAX_PROG + 1 : (size_t)t;
	}
	default: return 1;
	}
}

static void emit(struct rx *r, const struct parser *p, int i)
{
	const struct node *n = &p->nodes[i];
	size_t at;
	switch (n->k) {
	case N_EMPTY:
		return;
	case N_CHAR: r->prog[r->n++] = (struct inst){ I_CHAR, n->c, 0, 0 }; return;
	case N_ANY: r->prog[r->n++] = (struct inst){ I_ANY, 0, 0, 0 }; return;
	case N_CLASS: r->prog[r->n++] = (struct inst){ I_CLASS, n->c, 0, 0 }; return;
	case N_BOL: r->prog[r->n++] = (struct inst){ I_BOL, 0, 0, 0 }; return;
	case N_EOL: r->prog[r->n++] = (struct inst){ I_EOL, 0, 0, 0 }; return;
	case N_WB: r->prog[r->n++] = (struct inst){ I_WB, 0, 0, 0 }; return;
	case N_NWB: r->prog[r->n++] = (struct inst){ I_NWB, 0, 0, 0 }; return;
	case N_CAT:
		emit(r, p, n->a);
		emit(r, p, n->b);
		return;
	case N_ALT: {
		size_t split = r->n++;
		emit(r, p, n->a);
		size_t jmp = r->n++;
		emit(r, p, n->b);
		r->prog[split] = (struct inst){ I_SPLIT, 0, (int)split + 1, (int)jmp + 1 };
		r->prog[jmp] = (struct inst){ I_JMP, 0, (int)r->n, 0 };
		return;
	}
	case N_REP: {
		for (int k = 0; k < n->min; k++)
			emit(r, p, n->a);
		if (n->max == REP_INF) {
			at = r->n++;
			emit(r, p, n->a);
			r->prog[r->n] = (struct inst){ I_JMP, 0, (int)at, 0 };
			r->n++;
			r->prog[at] = (struct inst){ I_SPLIT, 0, (int)at + 1, (int)r->n };
			return;
		}
		int opt = n->max - n->min;
		size_t *splits = xcalloc(opt ? (size_t)opt : 1, sizeof *splits);
		for (int k = 0; k < opt; k++) {
			splits[k] = r->n++;
			emit(r, p, n->a);
		}
		for (int k = 0; k < opt; k++)
			r->prog[splits[k]] = (struct inst){ I_SPLIT, 0, (int)splits[k] + 1, (int)r->n };
		free(splits);
		return;
	}
	}
}

static void parser_free(struct parser *p)
{
	free(p->nodes);
	for (size_t i = 0; i < p->ncls; i++)
		free(p->cls[i].r);
	free(p->cls);
}

/* Computes the bytes a match can start with: the consuming instructions reachable from pc 0
 * through jumps, splits and assertions (assertions assumed to pass). No filter when the empty
 * string can match or `.` can start a match. */
static void first_bytes(struct rx *r)
{
	int *stack = xcalloc(r->n * 2 + 2, sizeof *stack);
	bool *seen = xcalloc(r->n, sizeof *seen);
	size_t sp = 0;
	bool any = false;
	memset(r->first, 0, sizeof r->first);
	stack[sp++] = 0;
	while (sp && !any) {
		int pc = stack[--sp];
		if (seen[pc])
			continue;
		seen[pc] = true;
		const struct inst *in = &r->prog[pc];
		switch (in->op) {
		case I_JMP: stack[sp++] = in->x; break;
		case I_SPLIT: stack[sp++] = in->x; stack[sp++] = in->y; break;
		case I_BOL: case I_EOL: case I_WB: case I_NWB: stack[sp++] = pc + 1; break;
		case I_MATCH: case I_ANY: any = true; break;
		case I_CHAR:
			if (in->c >= 128) {
				memset(r->first + 0x80, 1, 0x80);
			} else {
				r->first[in->c] = 1;
				if (r->icase)
					r->first[(unsigned char)utf8proc_toupper(in->c)] = 1;
			}
			if (r->icase)
				memset(r->first + 0x80, 1, 0x80);   /* e.g. K (U+212A) folds to k */
			break;
		case I_CLASS:
			for (int b = 0; b < 128; b++)
				if (cls_has(&r->cls[in->c], b, r->icase ? fold(b) : b))
					r->first[b] = 1;
			memset(r->first + 0x80, 1, 0x80);
			break;
		}
	}
	r->filter = !any;
	free(stack);
	free(seen);
}

int rx_compile(const char *pattern, size_t len, bool icase, struct rx **out, char *err,
               size_t errlen)
{
	struct parser p = { .s = pattern, .len = len, .icase = icase, .err = err, .errlen = errlen };
	*out = NULL;
	if (errlen)
		err[0] = 0;
	if (len > RX_MAX_PATTERN) {
		perr(&p, RX_MAX_PATTERN, "pattern longer than %d bytes", RX_MAX_PATTERN);
		return -1;
	}
	if (memchr(pattern, 0, len)) {
		perr(&p, (size_t)((const char *)memchr(pattern, 0, len) - pattern), "NUL byte in pattern");
		return -1;
	}
	int root = parse_alt(&p);
	if (root >= 0 && p.pos < p.len)
		root = perr(&p, p.pos, "unmatched ')'");
	if (root < 0) {
		parser_free(&p);
		return -1;
	}
	size_t sz = size_of(&p, root) + 1;
	if (sz > RX_MAX_PROG) {
		perr(&p, 0, "pattern too large: more than %d NFA instructions after expanding repeats",
		     RX_MAX_PROG);
		parser_free(&p);
		return -1;
	}
	struct rx *r = xcalloc(1, sizeof *r);
	r->prog = xcalloc(sz, sizeof *r->prog);
	emit(r, &p, root);
	r->prog[r->n++] = (struct inst){ I_MATCH, 0, 0, 0 };
	r->cls = p.cls;
	r->ncls = p.ncls;
	r->icase = icase;
	for (size_t k = 0; k < r->ncls; k++) {
		struct cls *c = &r->cls[k];
		cls_finish(c);
		if (icase)
			cls_fold(c);
		/* The binary search over many ranges costs more than a step: one more step per
		 * four halvings (a class of 16 ranges or more costs 2 steps, of 256 or more 3). */
		for (size_t w = c->nr; w > 1; w >>= 1)
			c->extra++;
		c->extra /= 4;
	}
	for (size_t k = 0; k < r->ncls; k++)
		for (int c = 0; c < 128; c++)
			if (cls_has(&r->cls[k], c, icase ? fold(c) : c))
				r->cls[k].ascii[c >> 6] |= (uint64_t)1 << (c & 63);
	r->bol = r->prog[0].op == I_BOL;
	size_t p0 = 0;
	while (r->prog[p0].op == I_WB || r->prog[p0].op == I_NWB)
		p0++;   /* a boundary assertion before the first literal does not stop the skip */
	r->lit = r->prog[p0].op == I_CHAR && !icase && r->prog[p0].c < 128 ? r->prog[p0].c : -1;
	first_bytes(r);
	free(p.nodes);
	*out = r;
	return 0;
}

void rx_free(struct rx *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->ncls; i++)
		free(r->cls[i].r);
	free(r->cls);
	free(r->prog);
	free(r);
}

size_t rx_prog_size(const struct rx *r)
{
	return r->n;
}

/* ---- simulation ---------------------------------------------------------- */

struct sset { int *dense; unsigned *gen; size_t n; unsigned g; };

struct sim {
	const struct rx *r;
	int *stack;
	int32_t prev, cur;      /* code points around the current position (-1: none) */
	int8_t wprev, wcur;     /* is_word of prev, cur; -1 until an assertion asks */
	bool at_start, at_end;
	uint64_t work;
	bool matched;
};

/* Adds pc and its epsilon closure at the current position to set l. */
static void addthread(struct sim *m, struct sset *l, int pc0)
{
	size_t sp = 0;
	m->stack[sp++] = pc0;
	while (sp) {
		int pc = m->stack[--sp];
		if (l->gen[pc] == l->g)
			continue;
		l->gen[pc] = l->g;
		m->work++;
		const struct inst *in = &m->r->prog[pc];
		switch (in->op) {
		case I_JMP:
			m->stack[sp++] = in->x;
			break;
		case I_SPLIT:
			m->stack[sp++] = in->y;
			m->stack[sp++] = in->x;
			break;
		case I_BOL:
			if (m->at_start)
				m->stack[sp++] = pc + 1;
			break;
		case I_EOL:
			if (m->at_end)
				m->stack[sp++] = pc + 1;
			break;
		case I_WB:
		case I_NWB: {
			if (m->wprev < 0)
				m->wprev = is_word(m->prev);
			if (m->wcur < 0)
				m->wcur = is_word(m->cur);
			bool b = m->wprev != m->wcur;
			if (b == (in->op == I_WB))
				m->stack[sp++] = pc + 1;
			break;
		}
		case I_MATCH:
			m->matched = true;
			break;
		default:
			l->dense[l->n++] = pc;
			break;
		}
	}
}

static bool step_ok(const struct rx *r, const struct inst *in, int32_t c, int32_t fc)
{
	switch (in->op) {
	case I_CHAR: return (r->icase ? fc : c) == in->c;
	case I_ANY: return c != '\n';
	case I_CLASS:
		if (c >= 0 && c < 128)
			return (r->cls[in->c].ascii[c >> 6] >> (c & 63)) & 1;
		return cls_has(&r->cls[in->c], c, r->icase ? fc : c);
	default: return false;
	}
}

int rx_search(const struct rx *r, const char *text, size_t len, uint64_t *budget)
{
	struct sset a = { 0 }, b = { 0 };
	struct sim m = { .r = r, .prev = -1, .wprev = -1, .wcur = -1 };
	a.dense = xcalloc(r->n, sizeof *a.dense);
	b.dense = xcalloc(r->n, sizeof *b.dense);
	a.gen = xcalloc(r->n, sizeof *a.gen);
	b.gen = xcalloc(r->n, sizeof *b.gen);
	m.stack = xcalloc(r->n * 2 + 2, sizeof *m.stack);
	struct sset *cl = &a, *nl = &b;
	size_t pos = 0, ahead_at = SIZE_MAX, ahead_end = 0;
	int32_t ahead = -1;       /* the code point at ahead_at, ending at ahead_end */
	int8_t ahead_w = -1;
	int rc = 0;
	unsigned g = 1;
	cl->g = g;
	for (;;) {
		/* No live thread: jump to the next place a match can start (the required first
		 * literal, or a byte of the first-byte set). */
		if (cl->n == 0 && (r->lit >= 0 || r->filter) && pos < len && !r->bol) {
			size_t np = pos;
			if (r->lit >= 0) {
				const char *hit = memchr(text + pos, r->lit, len - pos);
				np = hit ? (size_t)(hit - text) : len;
			} else {
				while (np < len && !r->first[(unsigned char)text[np]])
					np++;
			}
			if (np >= len)
				break;
			if (np > pos) {
				/* prev is the code point ending at np: step back over at most three
				 * continuation bytes (not before pos, a boundary), then decode forward
				 * to np as the scan from the start would (a stray continuation byte
				 * is U+FFFD on its own). */
				size_t back = np - 1, q;
				while (back > pos && np - back < 4 &&
				       ((unsigned char)text[back] & 0xC0) == 0x80)
					back--;
				q = back;
				do
					m.prev = decode(text, np, &q);
				while (q < np);
				m.wprev = -1;
				pos = np;
			}
		}
		size_t next = pos;
		if (pos == ahead_at) {   /* decoded by the last step, with no skip since */
			m.cur = ahead;
			m.wcur = ahead_w;
			next = ahead_end;
		} else {
			m.cur = pos < len ? decode(text, len, &next) : -1;
			m.wcur = -1;
		}
		m.at_start = pos == 0;
		m.at_end = pos >= len;
		/* Threads carried from the previous step already sit in cl (without closure of
		 * assertions at this position): rebuild cl by re-adding their successors. */
		/* A position costs about what two state visits do (decoding, folding, word tests)
		 * whether or not threads run there: charged as such, so that a step costs about
		 * the same on any text (common/README.md "Regular expressions"). */
		m.work += RX_POS_STEPS;
		if (pos == 0 || !r->bol)
			addthread(&m, cl, 0);
		if (m.matched) {
			rc = 1;
			break;
		}
		if (m.work > *budget) {
			rc = -1;
			break;
		}
		if (pos >= len || (cl->n == 0 && r->bol))
			break;
		if (cl->n == 0) {       /* no thread to step (a start's assertion failed): move on */
			m.prev = m.cur;
			m.wprev = m.wcur;
			pos = next;
			cl->g = ++g;
			continue;
		}
		int32_t fc = r->icase ? fold(m.cur) : m.cur;
		nl->n = 0;
		nl->g = ++g;
		/* Successors are added at the next position: assertions there need prev/cur. */
		m.prev = m.cur;
		m.wprev = m.wcur;
		size_t nx = next;
		int32_t after = next < len ? decode(text, len, &nx) : -1;
		m.at_start = false;
		m.at_end = next >= len;
		int32_t keep = m.cur;
		int8_t wkeep = m.wcur;
		m.cur = after;
		m.wcur = -1;
		for (size_t i = 0; i < cl->n; i++) {
			const struct inst *in = &r->prog[cl->dense[i]];
			m.work++;
			if (in->op == I_CLASS && (keep < 0 || keep >= 128))
				m.work += r->cls[in->c].extra;
			if (step_ok(r, in, keep, fc))
				addthread(&m, nl, cl->dense[i] + 1);
		}
		if (m.matched) {
			rc = 1;
			break;
		}
		struct sset *t = cl;
		cl = nl;
		nl = t;
		ahead_at = next;
		ahead = after;
		ahead_w = m.wcur;
		ahead_end = nx;
		pos = next;
		m.prev = keep;
		m.wprev = wkeep;
		/* cl is now the next position's set (generation g); new starts join it there. */
		cl->g = g;
	}
	*budget = m.work > *budget ? 0 : *budget - m.work;
	free(a.dense);
	free(b.dense);
	free(a.gen);
	free(b.gen);
	free(m.stack);
	return rc;
}
