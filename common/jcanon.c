/*
 * Deep JSON equality (1 == 1.0, optional case folding) and canonical JSON text
 * for set items. See jcanon.h.
 */
#include "jcanon.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "dec.h"

char *jcanon_casefold(const char *s, size_t len, size_t *outlen)
{
	bool ascii = true;
	for (size_t i = 0; i < len && ascii; i++)
		ascii = (unsigned char)s[i] < 0x80;
	if (ascii) {
		char *r = xmalloc(len + 1);
		for (size_t i = 0; i < len; i++)
			r[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + 32) : s[i];
		r[len] = 0;
		*outlen = len;
		return r;
	}
	utf8proc_uint8_t *dst = NULL;
	utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst,
	                                  UTF8PROC_CASEFOLD);
	if (n < 0) {
		if (n == UTF8PROC_ERROR_NOMEM)
			abort();
		return NULL;
	}
	*outlen = (size_t)n;
	return (char *)dst;
}

static bool str_equal_fold(const char *a, size_t na, const char *b, size_t nb)
{
	size_t fa, fb;
	char *ca = jcanon_casefold(a, na, &fa);
	char *cb = jcanon_casefold(b, nb, &fb);
	bool eq;
	if (!ca || !cb)   /* invalid UTF-8 (not from jansson): compare bytes */
		eq = na == nb && !memcmp(a, b, na);
	else
		eq = fa == fb && !memcmp(ca, cb, fa);
	free(ca);
	free(cb);
	return eq;
}

bool jcanon_equal(const json_t *a, const json_t *b, bool fold_case)
{
	if (!a || !b)
		return a == b;
	if (json_is_number(a) || json_is_number(b)) {
		struct dec_num x, y;
		if (!json_is_number(a) || !json_is_number(b))
			return false;
		if (json_is_integer(a) && json_is_integer(b))
			return json_integer_value(a) == json_integer_value(b);
		dec_num_from_json(a, &x);
		dec_num_from_json(b, &y);
		return dec_num_cmp(&x, &y) == 0;
	}
	if (json_typeof(a) != json_typeof(b))
		return false;
	switch (json_typeof(a)) {
	case JSON_STRING: {
		size_t na = json_string_length(a), nb = json_string_length(b);
		const char *sa = json_string_value(a), *sb = json_string_value(b);
		if (na == nb && !memcmp(sa, sb, na))
			return true;
		return fold_case && str_equal_fold(sa, na, sb, nb);
	}
	case JSON_ARRAY: {
		size_t n = json_array_size(a);
		if (n != json_array_size(b))
			return false;
		for (size_t i = 0; i < n; i++)
			if (!jcanon_equal(json_array_get(a, i), json_array_get(b, i), fold_case))
				return false;
		return true;
	}
	case JSON_OBJECT: {
		if (json_object_size(a) != json_object_size(b))
			return false;
		for (void *it = json_object_iter((json_t *)a); it;
		     it = json_object_iter_next((json_t *)a, it)) {
			const char *k = json_object_iter_key(it);
			size_t kl = json_object_iter_key_len(it);
			const json_t *bv = json_object_getn(b, k, kl);
			if (!bv || !jcanon_equal(json_object_iter_value(it), bv, fold_case))
				return false;
		}
		return true;
	}
	default:   /* true, false, null: same type is equal */
		return true;
	}
}

static void dump_string(const char *s, size_t n, struct strbuf *out)
{
	static const char hex[] = "0123456789abcdef";
	strbuf_addlit(out, "\"");
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		strbuf_add(out, s + run, i - run);
		run = i + 1;
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			strbuf_add(out, e, 2);
		} else {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			strbuf_add(out, e, 6);
		}
	}
	strbuf_add(out, s + run, n - run);
	strbuf_addlit(out, "\"");
}

struct kv {
	const char *k;
	size_t kl;
	const json_t *v;
};

static int kv_cmp(const void *pa, const void *pb)
{
	const struct kv *a = pa, *b = pb;
	size_t n = a->kl < b->kl ? a->kl : b->kl;
	int c = memcmp(a->k, b->k, n);
	if (c)
		return c;
	return (a->kl > b->kl) - (a->kl < b->kl);
}

void jcanon_dump(const json_t *v, struct strbuf *out)
{
	char buf[48];
	switch (json_typeof(v)) {
	case JSON_INTEGER:
	case JSON_REAL: {
		struct dec_num d;
		dec_num_from_json(v, &d);
		int n = dec_num_format(&d, buf, sizeof buf);
		strbuf_add(out, buf, (size_t)n);
		break;
	}
	case JSON_STRING:
		dump_string(json_string_value(v), json_string_length(v), out);
		break;
	case JSON_TRUE: strbuf_addlit(out, "true"); break;
	case JSON_FALSE: strbuf_addlit(out, "false"); break;
	case JSON_NULL: strbuf_addlit(out, "null"); break;
	case JSON_ARRAY: {
		strbuf_addlit(out, "[");
		for (size_t i = 0; i < json_array_size(v); i++) {
			if (i)
				strbuf_addlit(out, ",");
			jcanon_dump(json_array_get(v, i), out);
		}
		strbuf_addlit(out, "]");
		break;
	}
	case JSON_OBJECT: {
		size_t n = json_object_size(v), i = 0;
		struct kv *kvs = xcalloc(n ? n : 1, sizeof *kvs);
		for (void *it = json_object_iter((json_t *)v); it && i < n;
		     it = json_object_iter_next((json_t *)v, it), i++) {
			kvs[i].k = json_object_iter_key(it);
			kvs[i].kl = json_object_iter_key_len(it);
			kvs[i].v = json_object_iter_value(it);
		}
		qsort(kvs, i, sizeof *kvs, kv_cmp);
		strbuf_addlit(out, "{");
		for (size_t j = 0; j < i; j++) {
			if (j)
				strbuf_addlit(out, ",");
			dump_string(kvs[j].k, kvs[j].kl, out);
			strbuf_addlit(out, ":");
			jcanon_dump(kvs[j].v, out);
		}
		strbuf_addlit(out, "}");
		free(kvs);
		break;
	}
	}
}

const char *jcanon_type_name(const json_t *v)
{
	if (!v)
		return "missing";
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: case JSON_REAL: return "a number";
	case JSON_TRUE: case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}
