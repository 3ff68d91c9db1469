/*
 * Unit tests for jarena (common/jarena.h): documents read inside an arena are the same as
 * read without one; an arena lives exactly until its last value is freed, whatever kept a
 * reference, on whichever thread the values are freed; failed parses, large blocks and
 * values mixed with plain heap ones. Under AddressSanitizer the arena is off: the same
 * documents must still read and free normally.
 */
#include "jarena.h"
#include "jload.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util.h"

/* A document of every kind of value: nested objects and arrays, escapes, numbers. */
static char *make_doc(int v, size_t members, size_t strlen_big)
{
	struct strbuf sb = { 0 };
	strbuf_addf(&sb, "{\"id\":%d,\"items\":[", v);
	for (size_t k = 0; k < 100; k++)
		strbuf_addf(&sb, "%s{\"id\":\"F-%03zu\",\"sev\":\"h\\u00e9%d\",\"cvss\":%zu.%d,\"ok\":%s,\"n\":null}",
		            k ? "," : "", k, v, k % 10, v % 10, k % 2 ? "true" : "false");
	strbuf_addf(&sb, "],\"map\":{");
	for (size_t k = 0; k < members; k++)
		strbuf_addf(&sb, "%s\"q%zu\":[%zu,\"%zu\"]", k ? "," : "", k, k * 3, k + (size_t)v);
	strbuf_addf(&sb, "},\"big\":\"");
	for (size_t k = 0; k < strlen_big; k++)
		strbuf_addf(&sb, "%c", 'a' + (int)((k + (size_t)v) % 26));
	strbuf_addf(&sb, "\",\"deep\":");
	for (int k = 0; k < 40; k++)
		strbuf_addf(&sb, "[");
	strbuf_addf(&sb, "1.5e300");
	for (int k = 0; k < 40; k++)
		strbuf_addf(&sb, "]");
	strbuf_addf(&sb, "}");
	return sb.buf;
}

static json_t *load(const char *t)
{
	json_t *v = jload(t, strlen(t));
	return v ? v : json_loadb(t, strlen(t), JSON_DECODE_ANY, NULL);
}

static json_t *load_in_arena(const char *t)
{
	struct jarena *a = jarena_begin();
	json_t *v = load(t);
	jarena_end(a);
	return v;
}

static bool same_text(const json_t *a, const json_t *b)
{
	char *x = json_dumps(a, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
	char *y = json_dumps(b, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
	bool r = x && y && !strcmp(x, y);
	free(x);   /* json_dumps' text is a plain heap block: free() */
	free(y);
	return r;
}

static void test_same_values(bool on)
{
	static const size_t members[] = { 0, 3, 50, 2000 };     /* 2000: buckets above 16 KiB */
	static const size_t bigs[] = { 0, 100, 20000, 300000 };  /* above 16 KiB: plain malloc */
	int bad = 0;
	for (size_t i = 0; i < 4; i++) {
		for (size_t j = 0; j < 4; j++) {
			char *t = make_doc((int)(i * 4 + j), members[i], bigs[j]);
			json_t *x = load(t), *y = load_in_arena(t);
			if (!x || !y || !json_equal(x, y) || !same_text(x, y))
				bad++;
			if (on && jarena_alive() != 1)
				bad++;
			json_decref(y);
			json_decref(x);
			free(t);
		}
	}
	is_int(bad, 0, "documents read in an arena equal the same read without one (16 shapes)");
	is_int((int)jarena_alive(), 0, "no arena is left once their documents are freed");
}

static void test_lifetime(bool on)
{
	char *t = make_doc(7, 50, 40);
	struct jarena *a = jarena_begin();
	ok(on ? a != NULL : a == NULL, on ? "jarena_begin opens an arena" : "the arena is off (sanitizer)");
	ok(jarena_begin() == NULL, "a second jarena_begin on the same thread gives none");
	json_t *doc = load(t);
	jarena_end(a);
	is_int((int)jarena_alive(), on ? 1 : 0, "the arena lives while its document does");
	/* A member kept past its document keeps the arena (and its chunks). */
	json_t *items = json_incref(json_object_get(doc, "items"));
	json_t *big = json_incref(json_object_get(doc, "big"));
	/* A value from the plain heap put into the document is freed with it. */
	json_object_set_new(doc, "later", json_string("added after the arena ended"));
	json_decref(doc);
	is_int((int)jarena_alive(), on ? 1 : 0, "an arena with a value still referenced lives on");
	/* Other documents in other arenas meanwhile (they would take the chunks if the first
	 * arena had returned them). */
	for (int k = 0; k < 50; k++) {
		char *u = make_doc(100 + k, 50, 40);
		json_decref(load_in_arena(u));
		free(u);
	}
	json_t *first = json_array_get(items, 99);
	ok(json_array_size(items) == 100 && !strcmp(json_string_value(json_object_get(first, "id")), "F-099") &&
	   !strcmp(json_string_value(json_object_get(first, "sev")), "h\xc3\xa9" "7") &&
	   json_real_value(json_object_get(first, "cvss")) == 9.7,
	   "the kept values are intact after other arenas came and went");
	ok(json_string_length(big) == 40 && json_string_value(big)[0] == 'h', "the kept string is intact");
	json_decref(items);
	is_int((int)jarena_alive(), on ? 1 : 0, "still alive while one value is kept");
	json_decref(big);
	is_int((int)jarena_alive(), 0, "released with its last value");
	free(t);
}

static void test_failed_parse(void)
{
	/* Both readers refuse these (jload after building part of the document, then jansson):
	 * every block made before the error is freed in the window. Then a 300-deep array, which
	 * jload leaves to jansson and jansson reads. */
	static const char *const bad[] = {
		"{\"a\":[1,2,{\"b\":\"x\"}],\"c\":",
		"[{\"k\":\"v\"},{\"k\":\"v\"},]",
		"{\"a\":\"\\u0000\",\"b\":[1,2,3]}",
		"{\"a\":{\"b\":{\"c\":[true,false,null,\"\\ud800\"]}}}",
	};
	int alive = 0;
	size_t nv = 0;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *v = load_in_arena(bad[i]);
		nv += v != NULL;
		json_decref(v);
		alive += (int)jarena_alive();
	}
	is_int(alive, 0, "an arena whose parse failed is released");
	is_int((int)nv, 0, "none of the bad texts reads");
	struct strbuf deep = { 0 };
	for (int k = 0; k < 300; k++)
		strbuf_addf(&deep, "[{\"k\":");
	strbuf_addf(&deep, "\"x\"");
	for (int k = 0; k < 300; k++)
		strbuf_addf(&deep, "}]");
	json_t *want = json_loads(deep.buf, 0, NULL), *v = load_in_arena(deep.buf);
	ok(want && v && json_equal(want, v), "a 300-deep document (jload leaves it to jansson) reads the same");
	json_decref(v);
	json_decref(want);
	is_int((int)jarena_alive(), 0, "and its arena is released with it");
	strbuf_free(&deep);
}

/* Threads: documents read in arenas on one thread and freed on another, and two threads
 * reading and freeing at once. */
enum { NDOCS = 400 };

struct feed {
	char *texts[8];
	json_t *docs[NDOCS];
	int bad;
};

static void *reader(void *p)
{
	struct feed *f = p;
	for (int i = 0; i < NDOCS; i++)
		f->docs[i] = load_in_arena(f->texts[i % 8]);
	return NULL;
}

static void *freer(void *p)
{
	struct feed *f = p;
	for (int i = 0; i < NDOCS; i++) {
		json_t *want = load(f->texts[i % 8]);
		if (!json_equal(want, f->docs[i]))
			f->bad++;
		json_decref(want);
		json_decref(f->docs[i]);
	}
	return NULL;
}

static void *churn(void *p)
{
	struct feed *f = p;
	for (int i = 0; i < NDOCS; i++) {
		json_t *d = load_in_arena(f->texts[i % 8]);
		json_t *want = load(f->texts[i % 8]);
		if (!d || !json_equal(want, d))
			f->bad++;
		json_decref(want);
		json_decref(d);
	}
	return NULL;
}

static void test_threads(void)
{
	struct feed f = { 0 }, g = { 0 };
	for (int i = 0; i < 8; i++) {
		f.texts[i] = make_doc(i, 20, 30);
		g.texts[i] = make_doc(i + 8, 20, 30);
	}
	pthread_t t1, t2;
	pthread_create(&t1, NULL, reader, &f);
	pthread_join(t1, NULL);
	pthread_create(&t1, NULL, freer, &f);   /* frees on another thread ... */
	pthread_create(&t2, NULL, churn, &g);   /* ... while this one reads and frees */
	churn(&f);                              /* and this (main) thread too */
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	is_int(f.bad + g.bad, 0, "documents read and freed across threads are intact");
	is_int((int)jarena_alive(), 0, "every arena released after the threads' frees");
	for (int i = 0; i < 8; i++) {
		free(f.texts[i]);
		free(g.texts[i]);
	}
}

/* Many documents one after the other: the chunks are reused (the range does not run out). */
static void test_reuse(void)
{
	char *t = make_doc(3, 50, 100);
	int bad = 0;
	json_t *want = load(t);
	for (int i = 0; i < 20000; i++) {
		json_t *d = load_in_arena(t);
		if (i % 1000 == 0 && !json_equal(d, want))
			bad++;
		json_decref(d);
	}
	json_decref(want);
	is_int(bad, 0, "20,000 documents in turn: all read the same");
	is_int((int)jarena_alive(), 0, "and no arena is left");
	free(t);
}

/* More chunks at once than the free list keeps as they are: the rest give their pages back
 * and are used again later (read as zero pages). */
static void test_many_chunks(void)
{
	enum { NKEEP = 120 };
	char *t = make_doc(5, 800, 0);   /* ~3 chunks of values */
	json_t *want = load(t), *docs[NKEEP];
	for (int i = 0; i < NKEEP; i++)
		docs[i] = load_in_arena(t);
	for (int i = 0; i < NKEEP; i++)
		json_decref(docs[i]);
	int bad = 0;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < NKEEP; i++)
			docs[i] = load_in_arena(t);
		for (int i = 0; i < NKEEP; i++) {
			bad += !json_equal(docs[i], want);
			json_decref(docs[i]);
		}
	}
	is_int(bad, 0, "120 documents of several chunks each, three times over: all read the same");
	is_int((int)jarena_alive(), 0, "and no arena is left");
	json_decref(want);
	free(t);
}

/* Small documents are read without an arena (memory held per document in flight). */
static void test_min_doc(bool on)
{
	ok(jarena_begin_for(JARENA_MIN_DOC - 1) == NULL, "a document under JARENA_MIN_DOC bytes: no arena");
	is_int((int)jarena_alive(), 0, "none opened");
	struct jarena *a = jarena_begin_for(JARENA_MIN_DOC);
	ok(on ? a != NULL : a == NULL, "a document of JARENA_MIN_DOC bytes: an arena (when on)");
	jarena_end(a);
	is_int((int)jarena_alive(), 0, "an arena that allocated nothing ends with its window");
}

int main(void)
{
	int rc = jarena_install();   /* before any other jansson call */
	is_int(rc, 0, "jarena_install");
	struct jarena *probe = jarena_begin();
	bool on = probe != NULL;
	jarena_end(probe);
	diag("arena %s", on ? "on" : "off (AddressSanitizer build)");
	test_same_values(on);
	test_lifetime(on);
	test_failed_parse();
	test_threads();
	test_reuse();
	test_many_chunks();
	test_min_doc(on);
	return tap_done();
}
