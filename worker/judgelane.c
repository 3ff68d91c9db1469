/* judgelane: the judge lane's divert script and mover; see judgelane.h. */
#include "judgelane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "rq.h"
#include "util.h"

/* Divert (judgelane.h): KEYS 1 live stream, 2 lane. ARGV 1 group, 2 consumer, 3 entry id, 4.. the lane
 * entry's field, value pairs. The entry must still be pending for this consumer (else
 * someone else has it: 0). The copy is added before the entry is acknowledged, so an error
 * half-way leaves the entry pending (reclaimed as today), never lost. Returns
 * {1 or 0, lane length}. */
const char judgelane_divert_lua[] =
	"local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)\n"
	"if #p == 0 or p[1][2] ~= ARGV[2] then\n"
	"  return {0, redis.call('XLEN', KEYS[2])}\n"
	"end\n"
	"local f = {}\n"
	"for i = 4, #ARGV do f[#f + 1] = ARGV[i] end\n"
	"redis.call('XADD', KEYS[2], '*', unpack(f))\n"
	"redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])\n"
	"redis.call('XDEL', KEYS[1], ARGV[3])\n"
	"return {1, redis.call('XLEN', KEYS[2])}\n";

/* Move (judgelane.h): KEYS 1 lane, 2 live stream. ARGV 1 how many. The oldest entries go to the live
 * stream with their fields (XADD before XDEL). Returns {moved, lane length after}. */
const char judgelane_move_lua[] =
	"local n = tonumber(ARGV[1])\n"
	"local moved = 0\n"
	"if n and n > 0 then\n"
	"  for _, x in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', n)) do\n"
	"    redis.call('XADD', KEYS[2], '*', unpack(x[2]))\n"
	"    redis.call('XDEL', KEYS[1], x[1])\n"
	"    moved = moved + 1\n"
	"  end\n"
	"end\n"
	"return {moved, redis.call('XLEN', KEYS[1])}\n";

struct judgelane {
	uv_timer_t timer;
	uv_loop_t *loop;
	struct rq *rq;
	char *stream, *lane, *group;
	judgelane_room_fn *room;
	void *data;
	long long len;               /* lane length last seen, -1 unknown */
	int transit;                 /* entries moved and not back yet */
	uint64_t transit_at, polled_at;
	int busy;                    /* commands outstanding */
	bool moving, again, closing, timer_closed;
};

bool judgelane_admit(int free_slots, long long lane_len, int in_transit, bool from_lane)
{
	if (from_lane)
		return free_slots > 0;
	return lane_len <= 0 && free_slots > in_transit;
}

bool judgelane_take(struct judgelane *l, int free_slots, bool from_lane)
{
	if (from_lane && l->transit > 0)
		l->transit--;
	return judgelane_admit(free_slots, l->len, l->transit, from_lane);
}

int judgelane_fields(char *const *fields, const size_t *flens, int nf, int attempts,
                     char *abuf, const char **out, size_t *outlens)
{
	int n = 0;
	for (int i = 0; i < nf; i++) {
		const char *k = fields[2 * i];
		if (!strcmp(k, "judge_lane") || !strcmp(k, "attempt"))
			continue;
		out[2 * n] = k;
		outlens[2 * n] = flens[2 * i];
		out[2 * n + 1] = fields[2 * i + 1];
		outlens[2 * n + 1] = flens[2 * i + 1];
		n++;
	}
	out[2 * n] = "judge_lane";
	outlens[2 * n] = strlen("judge_lane");
	out[2 * n + 1] = "1";
	outlens[2 * n + 1] = 1;
	n++;
	if (attempts > 1) {
		snprintf(abuf, 16, "%d", attempts);
		out[2 * n] = "attempt";
		outlens[2 * n] = strlen("attempt");
		out[2 * n + 1] = abuf;
		outlens[2 * n + 1] = strlen(abuf);
		n++;
	}
	return n;
}

static void maybe_free(struct judgelane *l)
{
	if (!l->closing || !l->timer_closed || l->busy)
		return;
	free(l->stream);
	free(l->lane);
	free(l->group);
	free(l);
}

static void run_mover(struct judgelane *l);

static void on_moved(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct judgelane *l = data;
	(void)r;
	l->busy--;
	l->moving = false;
	if (!err && reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
	    reply->element[0]->type == REDIS_REPLY_INTEGER &&
	    reply->element[1]->type == REDIS_REPLY_INTEGER) {
		long long moved = reply->element[0]->integer;
		l->len = reply->element[1]->integer;
		if (moved > 0) {
			l->transit += (int)moved;
			l->transit_at = uv_now(l->loop);
			LOGD(NULL, NULL, "judge lane: moved %lld job(s) back to the stream", moved);
		}
		metrics_judge_lane(0, moved, l->len);
	} else if (!err && reply && reply->type == REDIS_REPLY_ERROR) {
		if (rq_is_acl_refusal(reply->str))
			LOGD(NULL, NULL, "judge lane: %s", reply->str);
		else
			LOGW(NULL, NULL, "judge lane: %s", reply->str);
	}
	if (l->again && !l->closing) {
		l->again = false;
		run_mover(l);
	}
	maybe_free(l);
}

static void run_mover(struct judgelane *l)
{
	if (l->closing)
		return;
	if (l->moving) {
		l->again = true;
		return;
	}
	uint64_t now = uv_now(l->loop);
	if (l->transit > 0 && now - l->transit_at >= JUDGELANE_TRANSIT_MS)
		l->transit = 0;
	int n = l->room(l->data) - l->transit;
	if (n <= 0 || !rq_connected(l->rq))
		return;
	if (l->len == 0 && now - l->polled_at < JUDGELANE_POLL_MS)
		return;
	l->polled_at = now;
	char cnt[16];
	snprintf(cnt, sizeof cnt, "%d", n);
	const char *argv[] = { "EVAL", judgelane_move_lua, "2", l->lane, l->stream, cnt };
	if (rq_cmdv(l->rq, 0, on_moved, l, 6, argv, NULL) == 0) {
		l->busy++;
		l->moving = true;
	}
}

static void on_tick(uv_timer_t *t)
{
	run_mover(t->data);
}

void judgelane_kick(struct judgelane *l)
{
	if (l && l->len != 0)
		run_mover(l);
}

struct divert_req {
	struct judgelane *l;
	void (*done)(int rc, void *data);
	void *data;
};

static void on_diverted(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct divert_req *d = data;
	struct judgelane *l = d->l;
	(void)r;
	l->busy--;
	int rc = -1;
	if (!err && reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
	    reply->element[0]->type == REDIS_REPLY_INTEGER &&
	    reply->element[1]->type == REDIS_REPLY_INTEGER) {
		rc = reply->element[0]->integer == 1 ? 1 : 0;
		l->len = reply->element[1]->integer;
		metrics_judge_lane(rc, 0, l->len);
	} else {
		LOGW(NULL, NULL, "judge lane: moving a job to the lane failed: %s",
		     err ? err : reply && reply->str ? reply->str : "unexpected reply");
	}
	d->done(rc, d->data);
	free(d);
	maybe_free(l);
}

int judgelane_divert(struct judgelane *l, const char *consumer, const char *id,
                     char *const *fields, const size_t *flens, int nf, int attempts,
                     void (*done)(int rc, void *data), void *data)
{
	if (!l || l->closing || !rq_connected(l->rq))
		return -1;
	int max = 7 + 2 * nf + 4;
	const char **argv = xcalloc((size_t)max, sizeof *argv);
	size_t *lens = xcalloc((size_t)max, sizeof *lens);
	const char *head[] = { "EVAL", judgelane_divert_lua, "2", l->stream, l->lane, l->group, consumer, id };
	for (int i = 0; i < 8; i++) {
		argv[i] = head[i];
		lens[i] = strlen(head[i]);
	}
	char abuf[16];
	int np = judgelane_fields(fields, flens, nf, attempts, abuf, argv + 8, lens + 8);
	struct divert_req *d = xcalloc(1, sizeof *d);
	d->l = l;
	d->done = done;
	d->data = data;
	int rc = rq_cmdv(l->rq, 0, on_diverted, d, 8 + 2 * np, argv, lens);
	free(argv);
	free(lens);
	if (rc < 0) {
		free(d);
		return -1;
	}
	l->busy++;
	return 0;
}

struct judgelane *judgelane_new(uv_loop_t *loop, struct rq *rq, const char *stream,
                                const char *lane, const char *group,
                                judgelane_room_fn *room, void *data)
{
	struct judgelane *l = xcalloc(1, sizeof *l);
	l->loop = loop;
	l->rq = rq;
	l->stream = xstrdup(stream);
	l->lane = xstrdup(lane);
	l->group = xstrdup(group);
	l->room = room;
	l->data = data;
	l->len = -1;
	uv_timer_init(loop, &l->timer);
	l->timer.data = l;
	uv_timer_start(&l->timer, on_tick, JUDGELANE_TICK_MS, JUDGELANE_TICK_MS);
	return l;
}

static void on_closed(uv_handle_t *h)
{
	struct judgelane *l = h->data;
	l->timer_closed = true;
	maybe_free(l);
}

void judgelane_free(struct judgelane *l)
{
	if (!l || l->closing)
		return;
	l->closing = true;
	uv_timer_stop(&l->timer);
	uv_close((uv_handle_t *)&l->timer, on_closed);
}
