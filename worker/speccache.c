/*
 * speccache: the parsed-spec cache (see speccache.h). A chained hash table of
 * SPECCACHE_BUCKETS buckets by challenge id (FNV-1a); entries are compared by
 * a hash of both texts, so a changed challenge is parsed again. A doubly
 * linked list orders the entries by last use; the byte bound evicts from its
 * tail.
 */
#include "speccache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "jprov.h"
#include "util.h"

static uint64_t fnv64(const char *s, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static unsigned spec_bucket(const char *id)
{
	return (unsigned)(fnv64(id, strlen(id), 0xcbf29ce484222325ULL) % SPECCACHE_BUCKETS);
}

static void spec_entry_free(struct spec_entry *e)
{
	score_prep_free(e->prep);   /* borrows spec and gt: freed first */
	spec_free(e->spec);
	json_decref(e->gt);
	free(e->err);
	free(e);
}

void speccache_unref(struct spec_entry *e)
{
	if (e && --e->refs == 0)
		spec_entry_free(e);
}

static void lru_unlink(struct speccache *c, struct spec_entry *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else if (c->lru_head == e)
		c->lru_head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else if (c->lru_tail == e)
		c->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(struct speccache *c, struct spec_entry *e)
{
	e->lru_prev = NULL;
	e->lru_next = c->lru_head;
	if (c->lru_head)
		c->lru_head->lru_prev = e;
	c->lru_head = e;
	if (!c->lru_tail)
		c->lru_tail = e;
}

/* Takes e out of the table (hash chain, LRU list, byte count) and drops the
 * table's reference. */
static void table_remove(struct speccache *c, struct spec_entry *e)
{
	struct spec_entry **pp = &c->buckets[spec_bucket(e->challenge_id)];
	for (; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	lru_unlink(c, e);
	e->in_table = false;
	e->next = NULL;
	c->n--;
	c->bytes -= e->bytes;
	speccache_unref(e);
}

void speccache_clear(struct speccache *c)
{
	while (c->lru_tail)
		table_remove(c, c->lru_tail);
	c->n = 0;
	c->bytes = 0;
}

/* Estimated heap bytes of a parsed JSON value (jansson's nodes, the pointer
 * arrays and hash tables behind them, malloc overhead). */
static size_t json_bytes(const json_t *v, int depth)
{
	size_t n = 48;
	if (!v || depth > 4096)
		return n;
	switch (json_typeof(v)) {
	case JSON_STRING:
		return n + json_string_length(v) + 16;
	case JSON_ARRAY: {
		size_t i;
		json_t *x;
		n += 16 + 8 * json_array_size(v);
		json_array_foreach(v, i, x)
			n += json_bytes(x, depth + 1);
		return n;
	}
	case JSON_OBJECT: {
		const char *k;
		json_t *x;
		n += 64;
		json_object_foreach((json_t *)v, k, x)
			n += 72 + strlen(k) + json_bytes(x, depth + 1);
		return n;
	}
	default:
		return n;
	}
}

struct spec_entry *speccache_get(struct speccache *c, const char *id, const char *spec_text,
                                 size_t slen, const char *gt_text, size_t glen)
{
	uint64_t h = fnv64(gt_text, glen, fnv64("\x01", 1, fnv64(spec_text, slen,
	                   0xcbf29ce484222325ULL)));
	unsigned b = spec_bucket(id);
	struct spec_entry **pp = &c->buckets[b];
	for (; *pp; pp = &(*pp)->next) {
		struct spec_entry *e = *pp;
		if (strcmp(e->challenge_id, id))
			continue;
		if (e->hash == h) {
			e->refs++;
			lru_unlink(c, e);
			lru_push_front(c, e);
			return e;
		}
		/* The challenge changed: drop the old entry from the table. */
		table_remove(c, e);
		break;
	}

	struct spec_entry *e = xcalloc(1, sizeof *e);
	char err[512];
	json_error_t jerr;
	snprintf(e->challenge_id, sizeof e->challenge_id, "%s", id);
	e->hash = h;
	e->gt_bytes = glen;
	if (spec_parse(spec_text, slen, &e->spec, err, sizeof err) < 0) {
		e->spec = NULL;
		e->err = xstrdup(err);
	} else if (c->providers && spec_rubric(e->spec) &&
	           !jprov_resolve(c->providers, spec_rubric(e->spec), err, sizeof err)) {
		spec_free(e->spec);
		e->spec = NULL;
		e->err = xstrdup(err);
	} else {
		e->ev = spec_evaluator(e->spec);
		e->gt = job_json_load(gt_text, glen, &jerr);
		if (!e->gt) {
			snprintf(err, sizeof err, "ground_truth: line %d, column %d: %s", jerr.line,
			         jerr.column, jerr.text);
			spec_free(e->spec);
			e->spec = NULL;
			e->err = xstrdup(err);
		} else {
			e->prep = score_prepare(e->spec, e->gt);
		}
	}
	e->bytes = sizeof *e + slen * 4 + json_bytes(e->gt, 0) + (e->err ? strlen(e->err) : 0) +
	           score_prep_bytes(e->prep);
	size_t max = c->max_bytes ? c->max_bytes : SPECCACHE_DEFAULT_BYTES;
	e->refs = 1;   /* the caller's */
	if (e->bytes > max)
		return e;  /* alone larger than the whole cache: used, never kept */
	while (c->lru_tail && (c->bytes + e->bytes > max || c->n >= SPECCACHE_MAX))
		table_remove(c, c->lru_tail);
	e->refs++;     /* and the table's */
	e->in_table = true;
	e->next = c->buckets[b];
	c->buckets[b] = e;
	c->n++;
	c->bytes += e->bytes;
	lru_push_front(c, e);
	return e;
}
