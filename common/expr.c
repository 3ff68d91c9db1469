/*
 * Expression parser and evaluator for the `expression` primitive.
 *
 * Grammar (whitespace = ASCII space, tab, CR, LF between tokens):
 *   expr    := and { || and }                    1 or 0
 *   and     := not { && not }                    1 or 0
 *   not     := ! not | cmp                       1 if the operand is 0, else 0
 *   cmp     := sum [ cmpop sum ]                 cmpop: < <= > >= == !=
 *   sum     := product { ( + | - ) product }     left-associative
 *   product := unary { ( * | / ) unary }         × (U+00D7) is *, ÷ (U+00F7) is /
 *   unary   := ( - | + ) unary | primary         − (U+2212) is -
 *   primary := number | name | func '(' expr { ',' expr } ')' | '(' expr ')'
 *   number  := digits [ '.' digits* ] | '.' digits        (no exponent)
 *   func    := min | max | clamp | if | abs | round | floor | ceil | coalesce
 *              (min/max/coalesce: 1+ args, clamp/if: 3, the others 1) | len '(' name ')'
 * round is half up (floor(x + 0.5)); if(c, a, b) evaluates only the branch taken;
 * a NaN value stands for a missing variable and propagates (see expr_eval_ex).
 * A name followed by '(' is a function call; any other name must be one of the
 * declared variables. Nesting (parentheses, calls, unary signs) is limited to
 * EXPR_MAX_DEPTH levels, the source to EXPR_MAX_LEN bytes. A comparison yields
 * 1 or 0; chaining (`a < b < c`) is rejected rather than given C's surprising
 * meaning. clamp(x, lo, hi) = min(max(x, lo), hi).
 *
 * The tree lives in one node array (children are indices), so a failed parse
 * frees everything at once. Evaluation is recursive over the tree in double;
 * x / 0 yields 0 and raises *div_zero. Literals must be finite (a 400-digit
 * number is a parse error), but arithmetic can still overflow to ±inf or NaN
 * (e.g. 1e300-sized literals multiplied); the caller's clamp must handle that.
 */
#include "expr.h"
#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum op {
	OP_NUM, OP_VAR, OP_NEG,
	OP_ADD, OP_SUB, OP_MUL, OP_DIV,
	OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE,
	OP_MIN, OP_MAX, OP_CLAMP,
	OP_AND, OP_OR, OP_NOT, OP_IF, OP_ABS, OP_ROUND, OP_FLOOR, OP_CEIL, OP_LEN, OP_COALESCE,
};

struct node {
	enum op op;
	uint32_t a, b;      /* binary: children; NEG: a; VAR: a = index; calls: args[a..a+b) */
	double num;         /* OP_NUM */
	struct expr_q q;    /* OP_NUM: the literal's exact value (when it fits) */
};

struct expr {
	struct node *nodes;
	size_t nnodes, capnodes;
	uint32_t *args;     /* argument node indices of calls */
	size_t nargs, capargs;
	uint32_t root;
	unsigned char *use;      /* per variable: 1 used as a number, 2 used inside len() */
	size_t nvars;
	bool coalesce;
};

struct parser {
	const char *src;
	size_t pos, len;
	const char *const *vars;
	size_t nvars;
	int depth;
	struct expr *e;
	char *err;
	size_t errlen;
	bool failed;
};

__attribute__((format(printf, 3, 4)))
static void fail_at(struct parser *p, size_t at, const char *fmt, ...)
{
	va_list ap;
	int n;
	if (p->failed)
		return;
	p->failed = true;
	if (!p->err || p->errlen == 0)
		return;
	n = snprintf(p->err, p->errlen, "position %zu: ", at + 1);
	if (n < 0 || (size_t)n >= p->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* ---- exact rationals --------------------------------------------------------------- */

typedef __int128 i128;
#define I128_MAX ((i128)(((unsigned __int128)1 << 127) - 1))

static i128 gcd128(i128 a, i128 b)
{
	if (a < 0)
		a = -a;
	if (b < 0)
		b = -b;
	while (b) {
		i128 t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static struct expr_q q_inexact(double d)
{
	return (struct expr_q){ .exact = false, .d = d, .num = 0, .den = 1 };
}

static double q_double(const struct expr_q *x)
{
	return x->missing ? NAN : x->exact ? (double)x->num / (double)x->den : x->d;
}

#define I128_MIN (-I128_MAX - 1)

/* num/den reduced (den != 0). -2^127 has no negation: such a value is not kept exact. */
static struct expr_q q_make(i128 num, i128 den)
{
	if (num == I128_MIN || den == I128_MIN)
		return q_inexact((double)num / (double)den);
	if (den < 0) {
		num = -num;
		den = -den;
	}
	i128 g = gcd128(num, den);
	if (g > 1) {
		num /= g;
		den /= g;
	}
	if (num == 0)
		den = 1;
	struct expr_q q = { .num = num, .den = den, .exact = true };
	q.d = (double)num / (double)den;   /* both rounded to double, then IEEE division */
	return q;
}

struct expr_q expr_q_int(long long v)
{
	return q_make(v, 1);
}

struct expr_q expr_q_ratio(unsigned __int128 num, unsigned __int128 den)
{
	if (num > (unsigned __int128)I128_MAX || den > (unsigned __int128)I128_MAX)
		return q_inexact((double)num / (double)den);
	return q_make((i128)num, (i128)den);
}

struct expr_q expr_q_double(double d)
{
	return q_inexact(d);
}

struct expr_q expr_q_missing(void)
{
	return (struct expr_q){ .missing = true, .d = NAN, .num = 0, .den = 1 };
}

/* m × 10^e exactly, when it fits. */
static struct expr_q q_pow10(i128 m, int e, double approx)
{
	i128 p = 1;
	for (int k = 0; k < (e < 0 ? -e : e); k++)
		if (__builtin_mul_overflow(p, (i128)10, &p))
			return q_inexact(approx);
	if (e >= 0) {
		i128 r;
		if (__builtin_mul_overflow(m, p, &r))
			return q_inexact(approx);
		return q_make(r, 1);
	}
	return q_make(m, p);
}

/* The exact value of a literal's text (digits, '.', exponent), or its double when it does
 * not fit in 127 bits. */
static struct expr_q q_from_text(const char *t, double approx)
{
	i128 m = 0;
	int e = 0;
	size_t i = 0;
	bool frac = false;
	for (; t[i] && t[i] != 'e' && t[i] != 'E'; i++) {
		if (t[i] == '.') {
			frac = true;
			continue;
		}
		if (__builtin_mul_overflow(m, (i128)10, &m) || __builtin_add_overflow(m, (i128)(t[i] - '0'), &m))
			return q_inexact(approx);
		e -= frac;
	}
	if (t[i]) {
		long x = strtol(t + i + 1, NULL, 10);
		if (x > 80 || x < -80)
			return q_inexact(approx);
		e += (int)x;
	}
	if (e > 80 || e < -80)
		return q_inexact(approx);
	return q_pow10(m, e, approx);
}

struct expr_q expr_q_from_dec(long long m, int e, double approx)
{
	if (e > 80 || e < -80)
		return q_inexact(approx);
	return q_pow10(m, e, approx);
}

static struct expr_q q_add(struct expr_q x, struct expr_q y, int sign)
{
	if (x.exact && y.exact) {
		i128 a, b, n, d;
		if (!__builtin_mul_overflow(x.num, y.den, &a) && !__builtin_mul_overflow(y.num, x.den, &b) &&
		    !(sign > 0 ? __builtin_add_overflow(a, b, &n) : __builtin_sub_overflow(a, b, &n)) &&
		    !__builtin_mul_overflow(x.den, y.den, &d))
			return q_make(n, d);
	}
	return q_inexact(sign > 0 ? q_double(&x) + q_double(&y) : q_double(&x) - q_double(&y));
}

static struct expr_q q_mul(struct expr_q x, struct expr_q y)
{
	if (x.exact && y.exact) {
		/* cross-reduce first: keeps the products small */
		i128 g1 = gcd128(x.num, y.den), g2 = gcd128(y.num, x.den);
		if (g1 == 0)
			g1 = 1;
		if (g2 == 0)
			g2 = 1;
		i128 n, d;
		if (!__builtin_mul_overflow(x.num / g1, y.num / g2, &n) &&
		    !__builtin_mul_overflow(x.den / g2, y.den / g1, &d))
			return q_make(n, d);
	}
	return q_inexact(q_double(&x) * q_double(&y));
}

/* x / y, y not zero. */
static struct expr_q q_div(struct expr_q x, struct expr_q y)
{
	if (x.exact && y.exact) {
		i128 g1 = gcd128(x.num, y.num), g2 = gcd128(x.den, y.den);   /* y.num != 0 */
		if (g1 == 0)
			g1 = 1;
		i128 n, d;
		if (!__builtin_mul_overflow(x.num / g1, y.den / g2, &n) &&
		    !__builtin_mul_overflow(x.den / g2, y.num / g1, &d))
			return q_make(n, d);
	}
	return q_inexact(q_double(&x) / q_double(&y));
}

/* Sign of x - y: exact when both are and the cross products fit, else on the doubles. */
static int q_cmp(struct expr_q x, struct expr_q y)
{
	if (x.exact && y.exact) {
		i128 a, b;
		if (!__builtin_mul_overflow(x.num, y.den, &a) && !__builtin_mul_overflow(y.num, x.den, &b))
			return (a > b) - (a < b);
	}
	double dx = q_double(&x), dy = q_double(&y);
	return (dx > dy) - (dx < dy);
}

static bool q_zero(const struct expr_q *x)
{
	return x->exact ? x->num == 0 : x->d == 0.0;
}

/* floor (dir -1) or ceiling (dir 1). */
static struct expr_q q_round_dir(struct expr_q x, int dir)
{
	if (!x.exact)
		return q_inexact(dir < 0 ? floor(x.d) : ceil(x.d));
	i128 q = x.num / x.den, r = x.num % x.den;   /* truncates toward zero */
	if (r != 0 && (dir < 0) == (x.num < 0))
		q += dir;
	return q_make(q, 1);
}

static uint32_t add_node(struct parser *p, enum op op, uint32_t a, uint32_t b, double num)
{
	struct expr *e = p->e;
	if (e->nnodes == e->capnodes) {
		e->capnodes = e->capnodes ? e->capnodes * 2 : 16;
		e->nodes = xrealloc(e->nodes, e->capnodes * sizeof *e->nodes);
	}
	e->nodes[e->nnodes] = (struct node){ .op = op, .a = a, .b = b, .num = num };
	return (uint32_t)e->nnodes++;
}

static void skip_ws(struct parser *p)
{
	while (p->pos < p->len) {
		char c = p->src[p->pos];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		p->pos++;
	}
}

/* True (and consumes it) if the source at pos starts with the literal s. */
static bool eat(struct parser *p, const char *s)
{
	size_t n = strlen(s);
	if (p->len - p->pos >= n && !memcmp(p->src + p->pos, s, n)) {
		p->pos += n;
		return true;
	}
	return false;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/* Describes what is at the current position for an error message. */
static void describe(const struct parser *p, char *buf, size_t n)
{
	unsigned char c;
	if (p->pos >= p->len) {
		snprintf(buf, n, "end of expression");
		return;
	}
	c = (unsigned char)p->src[p->pos];
	if (c > 0x20 && c < 0x7F)
		snprintf(buf, n, "'%c'", c);
	else
		snprintf(buf, n, "byte 0x%02X", c);
}

static void fail_expected(struct parser *p, const char *what)
{
	char got[32];
	describe(p, got, sizeof got);
	fail_at(p, p->pos, "expected %s, found %s", what, got);
}

static uint32_t parse_expr(struct parser *p);
static uint32_t parse_len(struct parser *p);

static bool enter(struct parser *p, size_t at)
{
	if (++p->depth > EXPR_MAX_DEPTH) {
		fail_at(p, at, "nesting deeper than %d levels", EXPR_MAX_DEPTH);
		return false;
	}
	return true;
}

static uint32_t parse_number(struct parser *p)
{
	size_t start = p->pos, end = p->pos;
	char buf[EXPR_MAX_NUMBER + 1];
	bool digits = false;
	double v;

	while (end < p->len && is_digit(p->src[end])) {
		end++;
		digits = true;
	}
	if (end < p->len && p->src[end] == '.') {
		end++;
		while (end < p->len && is_digit(p->src[end])) {
			end++;
			digits = true;
		}
	}
	if (!digits) {
		fail_at(p, start, "expected digits in number");
		return 0;
	}
	/* Optional exponent, as in JSON numbers: 1e-3, 2.5E+2. */
	if (end < p->len && (p->src[end] == 'e' || p->src[end] == 'E')) {
		size_t x = end + 1;
		if (x < p->len && (p->src[x] == '+' || p->src[x] == '-'))
			x++;
		if (x < p->len && is_digit(p->src[x])) {
			while (x < p->len && is_digit(p->src[x]))
				x++;
			end = x;
		}
	}
	if (end < p->len && (is_name_char(p->src[end]) || p->src[end] == '.')) {
		fail_at(p, end, "malformed number");
		return 0;
	}
	if (end - start > EXPR_MAX_NUMBER) {
		fail_at(p, start, "number longer than %d characters", EXPR_MAX_NUMBER);
		return 0;
	}
	/* strtod reads '.' as the decimal point: arbiter never changes LC_NUMERIC from "C". */
	memcpy(buf, p->src + start, end - start);
	buf[end - start] = '\0';
	v = strtod(buf, NULL);
	if (!isfinite(v)) {
		fail_at(p, start, "number out of range");
		return 0;
	}
	p->pos = end;
	uint32_t k = add_node(p, OP_NUM, 0, 0, v);
	if (!p->failed)
		p->e->nodes[k].q = q_from_text(buf, v);
	return k;
}

static uint32_t parse_call(struct parser *p, enum op op, size_t at)
{
	uint32_t *local = NULL, first;
	size_t n = 0, cap = 0;
	struct expr *e = p->e;

	/* The '(' was consumed by the caller. Arguments are gathered in a temporary array
	 * because nested calls add their own arguments to e->args first. */
	if (!enter(p, at))
		return 0;
	for (;;) {
		uint32_t arg = parse_expr(p);
		if (p->failed)
			goto fail;
		if (n == cap) {
			cap = cap ? cap * 2 : 4;
			local = xrealloc(local, cap * sizeof *local);
		}
		local[n++] = arg;
		skip_ws(p);
		if (eat(p, ","))
			continue;
		if (eat(p, ")"))
			break;
		fail_expected(p, "',' or ')'");
		goto fail;
	}
	p->depth--;
	if (op == OP_CLAMP && n != 3) {
		fail_at(p, at, "clamp takes 3 arguments (x, lo, hi), got %zu", n);
		goto fail;
	}
	if (op == OP_IF && n != 3) {
		fail_at(p, at, "if takes 3 arguments (condition, then, else), got %zu", n);
		goto fail;
	}
	if ((op == OP_ABS || op == OP_ROUND || op == OP_FLOOR || op == OP_CEIL) && n != 1) {
		fail_at(p, at, "this function takes 1 argument, got %zu", n);
		goto fail;
	}
	if (op == OP_COALESCE)
		e->coalesce = true;
	if (e->nargs + n > e->capargs) {
		while (e->nargs + n > e->capargs)
			e->capargs = e->capargs ? e->capargs * 2 : 16;
		e->args = xrealloc(e->args, e->capargs * sizeof *e->args);
	}
	first = (uint32_t)e->nargs;
	memcpy(e->args + e->nargs, local, n * sizeof *local);
	e->nargs += n;
	free(local);
	return add_node(p, op, first, (uint32_t)n, 0);
fail:
	free(local);
	return 0;
}

static uint32_t parse_primary(struct parser *p)
{
	size_t at;
	skip_ws(p);
	at = p->pos;
	if (p->pos >= p->len) {
		fail_expected(p, "a number, a variable, '(' or '-'");
		return 0;
	}
	if (is_digit(p->src[p->pos]) || p->src[p->pos] == '.')
		return parse_number(p);
	if (eat(p, "(")) {
		uint32_t r;
		if (!enter(p, at))
			return 0;
		r = parse_expr(p);
		if (p->failed)
			return 0;
		skip_ws(p);
		if (!eat(p, ")")) {
			fail_expected(p, "')'");
			return 0;
		}
		p->depth--;
		return r;
	}
	if (is_name_start(p->src[p->pos])) {
		size_t end = p->pos, n;
		const char *name = p->src + p->pos;
		while (end < p->len && is_name_char(p->src[end]))
			end++;
		n = end - p->pos;
		p->pos = end;
		skip_ws(p);
		if (eat(p, "(")) {
			static const struct { const char *name; enum op op; } fn[] = {
				{ "min", OP_MIN }, { "max", OP_MAX }, { "clamp", OP_CLAMP }, { "if", OP_IF },
				{ "abs", OP_ABS }, { "round", OP_ROUND }, { "floor", OP_FLOOR },
				{ "ceil", OP_CEIL }, { "coalesce", OP_COALESCE },
			};
			if (n == 3 && !memcmp(name, "len", 3))
				return parse_len(p);
			for (size_t k = 0; k < sizeof fn / sizeof fn[0]; k++)
				if (strlen(fn[k].name) == n && !memcmp(name, fn[k].name, n))
					return parse_call(p, fn[k].op, at);
			fail_at(p, at, "unknown function '%.*s' (known: min, max, clamp, if, abs, round, "
			        "floor, ceil, len, coalesce)", (int)(n > 64 ? 64 : n), name);
			return 0;
		}
		for (size_t i = 0; i < p->nvars; i++)
			if (p->vars[i] && strlen(p->vars[i]) == n && !memcmp(p->vars[i], name, n)) {
				p->e->use[i] |= 1;
				return add_node(p, OP_VAR, (uint32_t)i, 0, 0);
			}
		fail_at(p, at, "unknown variable '%.*s'%s", (int)(n > 64 ? 64 : n), name,
		        n > 64 ? "..." : "");
		return 0;
	}
	fail_expected(p, "a number, a variable, '(' or '-'");
	return 0;
}

/* len(name): the length of a variable's value (array items, object keys, string code
 * points); the '(' was consumed. */
static uint32_t parse_len(struct parser *p)
{
	skip_ws(p);
	size_t st = p->pos;
	while (p->pos < p->len && is_name_char(p->src[p->pos]))
		p->pos++;
	size_t n = p->pos - st;
	if (n == 0 || !is_name_start(p->src[st])) {
		fail_expected(p, "a variable name inside len()");
		return 0;
	}
	uint32_t idx = UINT32_MAX;
	for (size_t i = 0; i < p->nvars; i++)
		if (p->vars[i] && strlen(p->vars[i]) == n && !memcmp(p->vars[i], p->src + st, n))
			idx = (uint32_t)i;
	if (idx == UINT32_MAX) {
		fail_at(p, st, "unknown variable '%.*s'", (int)(n > 64 ? 64 : n), p->src + st);
		return 0;
	}
	skip_ws(p);
	if (!eat(p, ")")) {
		fail_expected(p, "')' after len's variable");
		return 0;
	}
	p->e->use[idx] |= 2;
	return add_node(p, OP_LEN, idx, 0, 0);
}


static uint32_t parse_unary(struct parser *p)
{
	size_t at;
	skip_ws(p);
	at = p->pos;
	if (eat(p, "-") || eat(p, "\xE2\x88\x92")) {
		uint32_t r;
		if (!enter(p, at))
			return 0;
		r = parse_unary(p);
		if (p->failed)
			return 0;
		p->depth--;
		return add_node(p, OP_NEG, r, 0, 0);
	}
	if (eat(p, "+")) {
		uint32_t r;
		if (!enter(p, at))
			return 0;
		r = parse_unary(p);
		p->depth--;
		return r;
	}
	return parse_primary(p);
}

static uint32_t parse_product(struct parser *p)
{
	uint32_t l = parse_unary(p);
	while (!p->failed) {
		enum op op;
		skip_ws(p);
		if (eat(p, "*") || eat(p, "\xC3\x97"))
			op = OP_MUL;
		else if (eat(p, "/") || eat(p, "\xC3\xB7"))
			op = OP_DIV;
		else
			break;
		uint32_t r = parse_unary(p);
		if (p->failed)
			break;
		l = add_node(p, op, l, r, 0);
	}
	return l;
}

static uint32_t parse_sum(struct parser *p)
{
	uint32_t l = parse_product(p);
	while (!p->failed) {
		enum op op;
		skip_ws(p);
		if (eat(p, "+"))
			op = OP_ADD;
		else if (eat(p, "-") || eat(p, "\xE2\x88\x92"))
			op = OP_SUB;
		else
			break;
		uint32_t r = parse_product(p);
		if (p->failed)
			break;
		l = add_node(p, op, l, r, 0);
	}
	return l;
}

/* Reads a comparison operator at pos; 0 if none. */
static bool eat_cmp(struct parser *p, enum op *op)
{
	if (eat(p, "<="))      *op = OP_LE;
	else if (eat(p, ">=")) *op = OP_GE;
	else if (eat(p, "==")) *op = OP_EQ;
	else if (eat(p, "!=")) *op = OP_NE;
	else if (eat(p, "<"))  *op = OP_LT;
	else if (eat(p, ">"))  *op = OP_GT;
	else return false;
	return true;
}

static uint32_t parse_cmp(struct parser *p)
{
	uint32_t l = parse_sum(p), r;
	enum op op;
	size_t at;
	if (p->failed)
		return 0;
	skip_ws(p);
	if (!eat_cmp(p, &op))
		return l;
	r = parse_sum(p);
	if (p->failed)
		return 0;
	l = add_node(p, op, l, r, 0);
	skip_ws(p);
	at = p->pos;
	if (eat_cmp(p, &op)) {
		fail_at(p, at, "comparisons cannot be chained; use parentheses");
		return 0;
	}
	return l;
}

/* not := '!' not | cmp  ('!' not followed by '=') */
static uint32_t parse_not(struct parser *p)
{
	skip_ws(p);
	size_t at = p->pos;
	if (p->pos + 1 <= p->len && p->src[p->pos] == '!' &&
	    !(p->pos + 1 < p->len && p->src[p->pos + 1] == '=')) {
		p->pos++;
		if (!enter(p, at))
			return 0;
		uint32_t r = parse_not(p);
		if (p->failed)
			return 0;
		p->depth--;
		return add_node(p, OP_NOT, r, 0, 0);
	}
	return parse_cmp(p);
}

static uint32_t parse_and(struct parser *p)
{
	uint32_t l = parse_not(p);
	while (!p->failed) {
		skip_ws(p);
		if (!eat(p, "&&"))
			break;
		uint32_t r = parse_not(p);
		if (p->failed)
			break;
		l = add_node(p, OP_AND, l, r, 0);
	}
	return l;
}

static uint32_t parse_expr(struct parser *p)
{
	uint32_t l = parse_and(p);
	while (!p->failed) {
		skip_ws(p);
		if (!eat(p, "||"))
			break;
		uint32_t r = parse_and(p);
		if (p->failed)
			break;
		l = add_node(p, OP_OR, l, r, 0);
	}
	return l;
}

int expr_parse(const char *src, const char *const *vars, size_t nvars, struct expr **out,
               char *err, size_t errlen)
{
	struct parser p = { .src = src, .vars = vars, .nvars = nvars, .err = err, .errlen = errlen };
	uint32_t root;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (!src) {
		fail_at(&p, 0, "no expression");
		return -1;
	}
	p.len = strnlen(src, EXPR_MAX_LEN + 1);
	if (p.len > EXPR_MAX_LEN) {
		fail_at(&p, EXPR_MAX_LEN, "expression longer than %d bytes", EXPR_MAX_LEN);
		return -1;
	}
	p.e = xcalloc(1, sizeof *p.e);
	p.e->use = xcalloc(nvars ? nvars : 1, 1);
	p.e->nvars = nvars;
	root = parse_expr(&p);
	if (!p.failed) {
		skip_ws(&p);
		if (p.pos < p.len) {
			const char *what = p.src[p.pos] == '=' ? "an operator ('=' is not one; use '==')"
			                                      : "an operator or the end";
			fail_expected(&p, what);
		}
	}
	if (p.failed) {
		expr_free(p.e);
		return -1;
	}
	p.e->root = root;
	*out = p.e;
	return 0;
}

struct evctx { const double *values, *lens; int *dz; };

/* NaN stands for "missing" (a variable without value or default); every operator but
 * coalesce and the untaken branch of if propagates it. */
static double eval_node(const struct expr *e, uint32_t i, const struct evctx *c)
{
	const struct node *n = &e->nodes[i];
	double x, y;

	switch (n->op) {
	case OP_NUM:
		return n->num;
	case OP_VAR:
		return c->values[n->a];
	case OP_LEN:
		return c->lens ? c->lens[n->a] : NAN;
	case OP_NEG:
		return -eval_node(e, n->a, c);
	case OP_NOT:
		x = eval_node(e, n->a, c);
		return isnan(x) ? x : x == 0.0;
	case OP_ABS:
		return fabs(eval_node(e, e->args[n->a], c));
	case OP_FLOOR:
		return floor(eval_node(e, e->args[n->a], c));
	case OP_CEIL:
		return ceil(eval_node(e, e->args[n->a], c));
	case OP_ROUND:   /* half up */
		return floor(eval_node(e, e->args[n->a], c) + 0.5);
	case OP_IF:
		x = eval_node(e, e->args[n->a], c);
		if (isnan(x))
			return x;
		return eval_node(e, e->args[n->a + (x != 0.0 ? 1 : 2)], c);
	case OP_COALESCE:
		for (uint32_t k = 0; k < n->b; k++) {
			x = eval_node(e, e->args[n->a + k], c);
			if (!isnan(x))
				return x;
		}
		return NAN;
	case OP_MIN:
	case OP_MAX:
		x = eval_node(e, e->args[n->a], c);
		for (uint32_t k = 1; k < n->b; k++) {
			y = eval_node(e, e->args[n->a + k], c);
			if (isnan(y))
				x = y;
			if (!isnan(x) && (n->op == OP_MIN ? y < x : y > x))
				x = y;
		}
		return x;
	case OP_CLAMP: {
		double v = eval_node(e, e->args[n->a], c);
		double lo = eval_node(e, e->args[n->a + 1], c);
		double hi = eval_node(e, e->args[n->a + 2], c);
		if (isnan(lo) || isnan(hi))
			return NAN;
		if (v < lo)
			v = lo;
		if (v > hi)
			v = hi;
		return v;
	}
	default:
		break;
	}
	x = eval_node(e, n->a, c);
	y = eval_node(e, n->b, c);
	if (n->op >= OP_LT && (isnan(x) || isnan(y)))
		return NAN;
	switch (n->op) {
	case OP_ADD: return x + y;
	case OP_SUB: return x - y;
	case OP_MUL: return x * y;
	case OP_DIV:
		if (y == 0.0) {
			if (c->dz)
				*c->dz = 1;
			return 0.0;
		}
		return x / y;
	case OP_LT: return x < y;
	case OP_LE: return x <= y;
	case OP_GT: return x > y;
	case OP_GE: return x >= y;
	case OP_EQ: return x == y;
	case OP_NE: return x != y;
	case OP_AND: return x != 0.0 && y != 0.0;
	case OP_OR: return x != 0.0 || y != 0.0;
	default: return 0.0;
	}
}

struct qctx { const struct expr_q *values, *lens; int *dz; };

/* eval_node on exact values: the same rules, missing for NaN. */
static struct expr_q qeval(const struct expr *e, uint32_t i, const struct qctx *c)
{
	const struct node *n = &e->nodes[i];
	struct expr_q x, y;

	switch (n->op) {
	case OP_NUM:
		return n->q;
	case OP_VAR:
		return c->values[n->a];
	case OP_LEN:
		return c->lens ? c->lens[n->a] : expr_q_missing();
	case OP_NEG:
		x = qeval(e, n->a, c);
		if (x.missing)
			return x;
		return x.exact ? q_make(-x.num, x.den) : q_inexact(-x.d);
	case OP_NOT:
		x = qeval(e, n->a, c);
		return x.missing ? x : expr_q_int(q_zero(&x));
	case OP_ABS:
		x = qeval(e, e->args[n->a], c);
		if (x.missing)
			return x;
		return x.exact ? q_make(x.num < 0 ? -x.num : x.num, x.den) : q_inexact(fabs(x.d));
	case OP_FLOOR:
	case OP_CEIL:
		x = qeval(e, e->args[n->a], c);
		return x.missing ? x : q_round_dir(x, n->op == OP_FLOOR ? -1 : 1);
	case OP_ROUND:   /* half up: floor(x + 1/2) */
		x = qeval(e, e->args[n->a], c);
		return x.missing ? x : q_round_dir(q_add(x, q_make(1, 2), 1), -1);
	case OP_IF:
		x = qeval(e, e->args[n->a], c);
		if (x.missing)
			return x;
		return qeval(e, e->args[n->a + (!q_zero(&x) ? 1 : 2)], c);
	case OP_COALESCE:
		for (uint32_t k = 0; k < n->b; k++) {
			x = qeval(e, e->args[n->a + k], c);
			if (!x.missing)
				return x;
		}
		return expr_q_missing();
	case OP_MIN:
	case OP_MAX:
		x = qeval(e, e->args[n->a], c);
		for (uint32_t k = 1; k < n->b; k++) {
			y = qeval(e, e->args[n->a + k], c);
			if (y.missing)
				x = y;
			if (!x.missing && (n->op == OP_MIN ? q_cmp(y, x) < 0 : q_cmp(y, x) > 0))
				x = y;
		}
		return x;
	case OP_CLAMP: {
		struct expr_q v = qeval(e, e->args[n->a], c);
		struct expr_q lo = qeval(e, e->args[n->a + 1], c);
		struct expr_q hi = qeval(e, e->args[n->a + 2], c);
		if (lo.missing || hi.missing)
			return expr_q_missing();
		if (v.missing)
			return v;
		if (q_cmp(v, lo) < 0)
			v = lo;
		if (q_cmp(v, hi) > 0)
			v = hi;
		return v;
	}
	default:
		break;
	}
	x = qeval(e, n->a, c);
	y = qeval(e, n->b, c);
	if (x.missing)
		return x;
	if (y.missing)
		return y;
	switch (n->op) {
	case OP_ADD: return q_add(x, y, 1);
	case OP_SUB: return q_add(x, y, -1);
	case OP_MUL: return q_mul(x, y);
	case OP_DIV:
		if (q_zero(&y)) {
			if (c->dz)
				*c->dz = 1;
			return expr_q_int(0);
		}
		return q_div(x, y);
	case OP_LT: return expr_q_int(q_cmp(x, y) < 0);
	case OP_LE: return expr_q_int(q_cmp(x, y) <= 0);
	case OP_GT: return expr_q_int(q_cmp(x, y) > 0);
	case OP_GE: return expr_q_int(q_cmp(x, y) >= 0);
	case OP_EQ: return expr_q_int(q_cmp(x, y) == 0);
	case OP_NE: return expr_q_int(q_cmp(x, y) != 0);
	case OP_AND: return expr_q_int(!q_zero(&x) && !q_zero(&y));
	case OP_OR: return expr_q_int(!q_zero(&x) || !q_zero(&y));
	default: return expr_q_int(0);
	}
}

struct expr_q expr_q_div(struct expr_q a, struct expr_q b)
{
	return q_div(a, b);
}

struct expr_q expr_q_add(struct expr_q a, struct expr_q b)
{
	return q_add(a, b, 1);
}

int expr_q_cmp(struct expr_q a, struct expr_q b)
{
	return q_cmp(a, b);
}

struct expr_q expr_eval_q(const struct expr *e, const struct expr_q *values,
                          const struct expr_q *lens, int *div_zero)
{
	struct qctx c = { values, lens, div_zero };
	return qeval(e, e->root, &c);
}

double expr_eval(const struct expr *e, const double *values, int *div_zero)
{
	struct evctx c = { values, NULL, div_zero };
	return eval_node(e, e->root, &c);
}

double expr_eval_ex(const struct expr *e, const double *values, const double *lens, int *div_zero)
{
	struct evctx c = { values, lens, div_zero };
	return eval_node(e, e->root, &c);
}

unsigned expr_var_use(const struct expr *e, size_t i)
{
	return i < e->nvars ? e->use[i] : 0;
}

bool expr_has_coalesce(const struct expr *e)
{
	return e->coalesce;
}

void expr_free(struct expr *e)
{
	if (!e)
		return;
	free(e->nodes);
	free(e->args);
	free(e->use);
	free(e);
}
