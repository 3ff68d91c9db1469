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
	char *err;                   /* invalid_spec message when spec is NULL */
	size_t gt_bytes;             /* ground-truth text length */
	enum spec_evaluator ev;
};

#define SPECCACHE_BUCKETS 256
#define SPECCACHE_MAX 1024       /* entries; the table is emptied when it would hold more */

/* The table. Zero-initialise; speccache_clear empties it. */
struct speccache {
	struct spec_entry *buckets[SPECCACHE_BUCKETS];
	int n;
};

/* Returns a new reference (the caller's, dropped with speccache_unref) to the
 * entry for challenge id with these texts, parsing them when they are new or
 * changed. An invalid spec or ground truth gives an entry with spec == NULL
 * and err set. Never NULL (out of memory aborts). */
struct spec_entry *speccache_get(struct speccache *c, const char *id, const char *spec_text,
                                 size_t slen, const char *gt_text, size_t glen);

/* Drops one reference; the last frees the entry. NULL ok. */
void speccache_unref(struct spec_entry *e);

/* Drops the table's references (entries still held by jobs live on). */
void speccache_clear(struct speccache *c);

#endif
