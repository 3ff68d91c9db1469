/*
 * judgelane: the judge lane, so deterministic jobs never wait behind judged ones
 * (worker/README.md "LLM judge", "The judge lane").
 *
 * A job whose spec needs the LLM judge takes no ARBITER_CONCURRENCY slot while it waits for
 * the verdict, but only up to ARBITER_JUDGE_INFLIGHT such jobs. When the judge has no free
 * slot, the job leaves the shared stream for the deployment's judge lane, the stream
 * `{prefix}:jobs:judge` (rkeys_judge_lane): one Lua script checks the entry is still ours,
 * XADDs its fields to the lane, then XACKs and XDELs it, so the job is in exactly one stream
 * at any time and its slot is free at once. Its fields are kept; two are set: judge_lane=1
 * (for an operator reading the entry; the worker goes by the stream it read it from) and, after a redelivery, attempt (the attempt it was on, so
 * the move uses up no attempt and forgets none).
 *
 * Every worker reads the lane itself, through a consumer group of its own on the lane stream
 * (the same group name as the live stream's, created the same way): a non-blocking
 * XREADGROUP for as many entries as it has free judge slots, whenever a verdict frees one
 * and every JUDGELANE_TICK_MS. So a lane job is taken as soon as a judge slot frees,
 * whatever waits in the live stream. From then on the job belongs to the lane stream: its
 * entry is acknowledged (XACK + XDEL), claimed, reclaimed, released, held and dead-lettered
 * there (job.stream). A job read from the lane never goes back to it: it was read for a free
 * slot, and waits in the process if the slot was taken meanwhile. A fresh judged job takes a
 * free slot only while the lane looks empty (the last read got fewer entries than asked and
 * no divert since), so jobs waiting in the lane are not overtaken for ever.
 *
 * At start (after the lane's group exists) the reader takes back the lane entries still
 * pending under the worker's own name, like the live stream's; entries of a dead consumer
 * are taken over by XAUTOCLAIM on the lane (claim.c).
 *
 * Event-loop thread only.
 */
#ifndef ARBITER_JUDGELANE_H
#define ARBITER_JUDGELANE_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>
#include <uv.h>

struct rq;
struct judgelane;

#define JUDGELANE_TICK_MS 100

/* The divert script (EVAL; exported for the tests, see judgelane.c for its KEYS and ARGV):
 * moves one pending entry of ours to the lane. */
extern const char judgelane_divert_lua[];

/* Free judge slots this worker may fill from the lane now (0 while it takes no job: not
 * ready, draining, paused, no database). */
typedef int judgelane_room_fn(void *data);

/* Entries read from the lane (a stream reply's entry array, borrowed for the call). own:
 * they were pending under our name at start (their delivery counts are not known yet). */
typedef void judgelane_entries_fn(void *data, redisReply *entries, bool own);

/* Starts the reader on loop. stream, lane and group are copied; rq is borrowed and must
 * outlive it (free the lane first). room says how many entries to read; entries takes them. */
struct judgelane *judgelane_new(uv_loop_t *loop, struct rq *rq, const char *stream,
                                const char *lane, const char *group, const char *consumer,
                                judgelane_room_fn *room, judgelane_entries_fn *entries,
                                void *data);

/* Whether a fresh judged job (read from the live stream) goes to the judge now (true) or
 * to the lane (false): free judge slots, and whether entries may wait in the lane. Pure
 * (for the tests). */
bool judgelane_admit(int free_slots, bool lane_waiting);

/* judgelane_admit with the reader's own idea of the lane. */
bool judgelane_take(struct judgelane *l, int free_slots);

/* Whether the lane's group exists and our own pending entries were taken back. */
bool judgelane_ready(const struct judgelane *l);

/* Moves entry id of group's stream to the lane (see above). fields: 2*nf strings with
 * lengths; attempts: the job's attempt number. done gets 1 (moved), 0 (the entry is no
 * longer pending for consumer: someone else has it) or -1 (Redis refused or is gone: the
 * job stays here). Returns 0, or -1 when the command could not be sent (done not called). */
int judgelane_divert(struct judgelane *l, const char *consumer, const char *id,
                     char *const *fields, const size_t *flens, int nf, int attempts,
                     void (*done)(int rc, void *data), void *data);

/* A judge slot was freed: read the lane soon. NULL ok. */
void judgelane_kick(struct judgelane *l);

/* Builds the field list of a lane entry into out (2*n slots; at least 2*nf + 4): fields
 * without judge_lane and attempt, then judge_lane=1 and, when attempts > 1, attempt. The
 * strings are borrowed from fields / abuf (a buffer of 16 bytes). Returns the pair count. */
int judgelane_fields(char *const *fields, const size_t *flens, int nf, int attempts,
                     char *abuf, const char **out, size_t *outlens);

/* Stops; freed after its timer closed and its last command answered (the loop must run).
 * NULL ok. */
void judgelane_free(struct judgelane *l);

#endif
