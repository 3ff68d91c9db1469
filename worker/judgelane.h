/*
 * judgelane: the judge lane, so deterministic jobs never wait behind judged ones
 * (README "LLM judge", "The judge lane").
 *
 * A job whose spec needs the LLM judge takes no ARBITER_CONCURRENCY slot while it waits for
 * the verdict, but only up to ARBITER_JUDGE_INFLIGHT such jobs. When the judge has no free
 * slot, the job leaves the shared stream for the deployment's judge lane, the stream
 * `{prefix}:jobs:judge` (rkeys_judge_lane): one Lua script checks the entry is still ours,
 * XADDs its fields to the lane, then XACKs and XDELs it, so the job is in exactly one stream
 * at any time and its slot is free at once. Its fields are kept; two are set: judge_lane=1
 * (it comes back from the lane) and, after a redelivery, attempt (the attempt it was on, so
 * the move uses up no attempt and forgets none).
 *
 * The mover of every worker brings lane entries back as its judge slots free up: one script
 * moves the oldest entries (XRANGE, XADD to the live stream, XDEL), at most as many as the
 * worker has free judge slots minus those it moved that have not arrived yet. It runs when a
 * verdict frees a slot and every JUDGELANE_TICK_MS. Replicas share the lane; each script is
 * atomic, so an entry is moved once. A job back from the lane goes to the judge if a slot is
 * free, else back to the lane; a fresh judged job takes a free slot only while the lane is
 * empty, so jobs waiting in the lane are not overtaken for ever.
 *
 * Event-loop thread only.
 */
#ifndef ARBITER_JUDGELANE_H
#define ARBITER_JUDGELANE_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

struct rq;
struct judgelane;

#define JUDGELANE_TICK_MS 100
/* Entries this worker moved count against its free judge slots for this long, or until
 * as many jobs came back from the lane to it (another worker may read them). */
#define JUDGELANE_TRANSIT_MS 2000
/* While the lane looks empty, its length is polled this often (other workers fill it). */
#define JUDGELANE_POLL_MS 1000

/* The two Lua scripts (EVAL; exported for the tests, see judgelane.c for their KEYS and
 * ARGV): divert moves one pending entry of ours to the lane, move brings the oldest lane
 * entries back to the live stream. */
extern const char judgelane_divert_lua[];
extern const char judgelane_move_lua[];

/* Free judge slots of this worker (ARBITER_JUDGE_INFLIGHT minus jobs waiting for or
 * heading to the judge). */
typedef int judgelane_room_fn(void *data);

/* Starts the mover on loop. stream, lane and group are copied; rq is borrowed and must
 * outlive it (free the lane first). room says how many judge slots are free. */
struct judgelane *judgelane_new(uv_loop_t *loop, struct rq *rq, const char *stream,
                                const char *lane, const char *group,
                                judgelane_room_fn *room, void *data);

/* Whether a judged job goes to the judge now (true) or to the lane (false): free judge
 * slots, the lane's last known length (-1 unknown), entries in transit to this worker;
 * from_lane: the job came back from the lane. Pure (for the tests). */
bool judgelane_admit(int free_slots, long long lane_len, int in_transit, bool from_lane);

/* judgelane_admit with the mover's own lane length and transit count; notes a job that
 * came back from the lane. */
bool judgelane_take(struct judgelane *l, int free_slots, bool from_lane);

/* Moves entry id of group's stream to the lane (see above). fields: 2*nf strings with
 * lengths; attempts: the job's attempt number. done gets 1 (moved), 0 (the entry is no
 * longer pending for consumer: someone else has it) or -1 (Redis refused or is gone: the
 * job stays here). Returns 0, or -1 when the command could not be sent (done not called). */
int judgelane_divert(struct judgelane *l, const char *consumer, const char *id,
                     char *const *fields, const size_t *flens, int nf, int attempts,
                     void (*done)(int rc, void *data), void *data);

/* A judge slot was freed: run the mover soon. NULL ok. */
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
