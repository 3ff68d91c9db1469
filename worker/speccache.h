/*
 * speccache: parsed challenge specs and ground truths, cached by challenge id
 * so that a backlog of one challenge parses its spec once. An entry is keyed
 * by the challenge id and a hash of both texts: a challenge whose spec or
 * ground truth changed gets a new entry (jobs holding the old one keep it).
 * Entries are refcounted: the table holds one reference, every job using the
 * entry one more. Event-loop thread only; no I/O.
 */
#ifndef ARBITER_SPECCACHE_H
#define ARBITER_SPECCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "score.h"
#include "spec.h"

/* A parsed challenge spec + ground truth. */
struct spec_entry {
	struct spec_entry *next;     /* hash chain */
	char challenge_id[37];
	uint64_t hash;               /* of the spec text and the ground-truth text */
	int refs;
	bool in_table;
	struct spec *spec;           /* NULL when the spec is invalid */
	json_t *gt;                  /* parsed ground truth (never NULL once valid) */
	/* The ground truth's side of the evaluations prepared once (score_prepare; NULL when the
	 * spec is invalid): owned, borrows spec and gt, freed before them, never changed after
	 * this entry is made, so the worker's threads read it at once. */
	struct score_prep *prep;
	char *err;                   /* invalid_spec message when spec is NULL */
	size_t gt_bytes;             /* ground-truth text length */
	size_t bytes;                /* estimated memory of the parsed spec and ground truth */
	struct spec_entry *lru_prev, *lru_next;   /* in the table: most recently used first */
	enum spec_evaluator ev;
};

#define SPECCACHE_BUCKETS 256
#define SPECCACHE_MAX 1024       /* entries; the least recently used go beyond that */
#define SPECCACHE_DEFAULT_BYTES ((size_t)64 << 20)   /* max_bytes 0: 64 MiB */

/* The table. Zero-initialise (max_bytes may be set first: ARBITER_SPEC_CACHE_BYTES);
 * speccache_clear empties it. The table holds at most max_bytes of parsed specs and
 * ground truths (estimated) and SPECCACHE_MAX entries: the least recently used are
 * dropped first (jobs holding them keep them until they are done), and an entry
 * larger than max_bytes on its own is used and never kept. */
struct jprovs;

struct speccache {
	struct spec_entry *buckets[SPECCACHE_BUCKETS];
	int n;
	size_t bytes, max_bytes;
	struct spec_entry *lru_head, *lru_tail;
	/* When set (borrowed): a judge spec whose provider or model is not configured here is
	 * an invalid spec (entry with err). NULL = not checked. */
	const struct jprovs *providers;
};

/* Returns a new reference (the caller's, dropped with speccache_unref) to the
 * entry for challenge id with these texts, parsing them when they are new or
 * changed. An invalid spec or ground truth, or a judge spec naming a provider
 * or model c->providers does not have, gives an entry with spec == NULL and
 * err set. Never NULL (out of memory aborts). */
struct spec_entry *speccache_get(struct speccache *c, const char *id, const char *spec_text,
                                 size_t slen, const char *gt_text, size_t glen);

/* Drops one reference; the last frees the entry. NULL ok. */
void speccache_unref(struct spec_entry *e);

/* Drops the table's references (entries still held by jobs live on). */
void speccache_clear(struct speccache *c);

#endif
