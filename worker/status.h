/*
 * What `arbiter status` reads, for other commands (the console, worker/console.h):
 * the Redis key names, a connection through the worker's transport, the --json
 * document and the pause switches. Implemented in worker/cmd_status.c; blocking
 * (a command-line tool's calls, never on the worker's loop).
 */
#ifndef ARBITER_STATUS_H
#define ARBITER_STATUS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "config.h"

struct rq_sync;

/* The names status reads and writes (rkeys.h; the operator switches and the
 * bulk lane of pause.h and lanes.h share the base, so one Cluster slot). */
struct status_keys {
	char jobs[512], dead[512], delayed[512], group[512], paused[512], pausedc[512], bulk[512];
	char judge_lane[512];
	char other_jobs[512];        /* the other key style's stream; "" in Cluster mode */
	char heartbeats[512];        /* rkeys_heartbeats */
	char stats[512];             /* rkeys_stats: the workers' throughput history */
	const char *style;           /* "plain" or "tagged" */
};

/* Fills *sk for cfg's prefix and key style. Returns 0, or -1 with a message in err. */
int status_keys(const struct config *cfg, struct status_keys *sk, char *err, size_t errlen);

/* A blocking connection to cfg's Redis (rq_sync_open: TLS, Sentinel and Cluster URLs as
 * for the worker), 5 s timeouts; NULL with the reason in err. Sets the log to errors only,
 * as text. Close with rq_sync_close. */
struct rq_sync *status_redis_open(const struct config *cfg, const struct status_keys *sk,
                                  char *err, size_t errlen);

/* The document `arbiter status --json` prints (no pruning), URLs redacted. Returns a new
 * reference (the caller decrefs); *code (may be NULL) gets status's exit code: 0 both
 * servers answered and the schema is current, else 1. */
json_t *status_document(const struct config *cfg, int *code);

/* `arbiter pause` / `resume`: resume false sets the global switch (slug NULL) or adds
 * slug to the paused challenges; resume true clears the global switch (slug NULL; all:
 * the challenges too) or removes slug. Returns 0 with what was done in msg ("paused every
 * replica (prefix P)"), 1 Redis failed or 2 bad settings, with the reason in msg. */
int status_pause_set(const struct config *cfg, bool resume, const char *slug, bool all,
                     char *msg, size_t msglen);

#endif
