/*
 * speccache: the parsed-spec cache (see speccache.h). A chained hash table of
 * SPECCACHE_BUCKETS buckets by challenge id (FNV-1a); entries are compared by
 * a hash of both texts, so a changed challenge is parsed again.
 */
#include "speccache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
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

void speccache_clear(struct speccache *c)
{
	for (int b = 0; b < SPECCACHE_BUCKETS; b++) {
		struct spec_entry *e = c->buckets[b];
		while (e) {
			struct spec_entry *next = e->next;
			e->in_table = false;
			e->next = NULL;
			speccache_unref(e);
			e = next;
		}
		c->buckets[b] = NULL;
	}
	c->n = 0;
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
			return e;
		}
		/* The challenge changed: drop the old entry from the table. */
		*pp = e->next;
		e->in_table = false;
		e->next = NULL;
		c->n--;
		speccache_unref(e);
		break;
	}
	if (c->n >= SPECCACHE_MAX)
		speccache_clear(c);

	struct spec_entry *e = xcalloc(1, sizeof *e);
	char err[512];
	json_error_t jerr;
	snprintf(e->challenge_id, sizeof e->challenge_id, "%s", id);
	e->hash = h;
	e->gt_bytes = glen;
	if (spec_parse(spec_text, slen, &e->spec, err, sizeof err) < 0) {
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
		}
	}
	e->refs = 2;   /* the table's and the caller's */
	e->in_table = true;
	e->next = c->buckets[b];
	c->buckets[b] = e;
	c->n++;
	return e;
}
