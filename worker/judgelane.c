/* judgelane: the judge lane's divert script and reader; see judgelane.h. */
#include "judgelane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "rq.h"
#include "util.h"

/* The lane's length is read for the gauge this often. */
#define JUDGELANE_GAUGE_MS 1000

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

struct judgelane {
	uv_timer_t timer;
	uv_loop_t *loop;
	struct rq *rq;
	char *stream, *lane, *group, *consumer;
	judgelane_room_fn *room;
	judgelane_entries_fn *entries;
	void *data;
	bool waiting;                /* entries may wait unread in the lane */
	bool group_ok, creating;     /* the lane's consumer group exists / is being created */
	bool own_done;               /* our own pending lane entries were taken back */
	bool reading, again;         /* an XREADGROUP is outstanding / another is wanted */
	int asked;                   /* COUNT of the outstanding read */
	uint64_t gauge_at;
	int busy;                    /* commands outstanding */
	bool closing, timer_closed;
};

bool judgelane_admit(int free_slots, bool lane_waiting)
{
	return !lane_waiting && free_slots > 0;
}

bool judgelane_take(struct judgelane *l, int free_slots)
{
	return judgelane_admit(free_slots, l->waiting);
}

bool judgelane_ready(const struct judgelane *l)
{
	return l && l->group_ok && l->own_done;
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
	free(l->consumer);
	free(l);
}

static void run_reader(struct judgelane *l, bool poll);

static void log_refusal(const char *what, const char *str)
{
	if (rq_is_acl_refusal(str) || rq_is_tryagain(str))
		LOGD(NULL, NULL, "judge lane: %s: %s", what, str);
	else
		LOGW(NULL, NULL, "judge lane: %s: %s", what, str);
}

static void on_group(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct judgelane *l = data;
	(void)r;
	l->busy--;
	l->creating = false;
	if (!err && reply && (reply->type == REDIS_REPLY_STATUS ||
	    (reply->type == REDIS_REPLY_ERROR && strstr(reply->str, "BUSYGROUP")))) {
		l->group_ok = true;
		if (!l->closing)
			run_reader(l, false);
	} else if (!err && reply && reply->type == REDIS_REPLY_ERROR) {
		log_refusal("XGROUP CREATE", reply->str);
	}
	maybe_free(l);
}

static void on_read(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct judgelane *l = data;
	(void)r;
	l->busy--;
	l->reading = false;
	bool own = !l->own_done;
	if (err || !reply) {
		/* (rq logs connection trouble; the tick reads again.) */
	} else if (reply->type == REDIS_REPLY_ERROR) {
		if (strstr(reply->str, "NOGROUP")) {
			LOGW(NULL, NULL, "judge lane: consumer group missing: creating it again");
			l->group_ok = false;
		} else {
			log_refusal("XREADGROUP", reply->str);
		}
	} else {
		redisReply *entries = NULL;
		if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
		    reply->element[0]->type == REDIS_REPLY_ARRAY &&
		    reply->element[0]->elements >= 2 &&
		    reply->element[0]->element[1]->type == REDIS_REPLY_ARRAY)
			entries = reply->element[0]->element[1];
		size_t got = entries ? entries->elements : 0;
		if (own) {
			l->own_done = true;
			l->waiting = true;   /* not known yet: the next read says */
		} else {
			l->waiting = got >= (size_t)l->asked;
		}
		if (got > 0) {
			if (!own)
				metrics_judge_lane(0, (long long)got, -1);
			if (!l->closing)
				l->entries(l->data, entries, own);
		}
	}
	if (!l->closing && (l->again || l->waiting)) {
		l->again = false;
		run_reader(l, false);
	}
	maybe_free(l);
}

static void on_len(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct judgelane *l = data;
	(void)r;
	l->busy--;
	if (!err && reply && reply->type == REDIS_REPLY_INTEGER)
		metrics_judge_lane(0, 0, reply->integer);
	maybe_free(l);
}

/* poll: the tick's read, made even when the lane looked empty (other workers fill it). */
static void run_reader(struct judgelane *l, bool poll)
{
	if (l->closing || !rq_connected(l->rq))
		return;
	if (!l->group_ok) {
		if (l->creating)
			return;
		const char *argv[] = { "XGROUP", "CREATE", l->lane, l->group, "0", "MKSTREAM" };
		if (rq_cmdv(l->rq, 0, on_group, l, 6, argv, NULL) == 0) {
			l->busy++;
			l->creating = true;
		}
		return;
	}
	if (l->reading) {
		l->again = true;
		return;
	}
	if (l->own_done && !l->waiting && !poll)
		return;
	int n = l->room(l->data);
	if (n <= 0)
		return;
	char cnt[16];
	snprintf(cnt, sizeof cnt, "%d", n);
	const char *argv[] = { "XREADGROUP", "GROUP", l->group, l->consumer, "COUNT", cnt,
	                       "STREAMS", l->lane, l->own_done ? ">" : "0" };
	if (rq_cmdv(l->rq, 0, on_read, l, 9, argv, NULL) == 0) {
		l->busy++;
		l->reading = true;
		l->asked = n;
	}
}

static void on_tick(uv_timer_t *t)
{
	struct judgelane *l = t->data;
	run_reader(l, true);
	uint64_t now = uv_now(l->loop);
	if (!l->closing && rq_connected(l->rq) && now - l->gauge_at >= JUDGELANE_GAUGE_MS) {
		l->gauge_at = now;
		const char *argv[] = { "XLEN", l->lane };
		if (rq_cmdv(l->rq, 0, on_len, l, 2, argv, NULL) == 0)
			l->busy++;
	}
}

void judgelane_kick(struct judgelane *l)
{
	if (l)
		run_reader(l, false);
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
		if (rc == 1)
			l->waiting = true;
		metrics_judge_lane(rc, 0, reply->element[1]->integer);
	} else {
		LOGW(NULL, NULL, "judge lane: moving a job to the lane failed: %s",
		     err ? err : reply && reply->str ? reply->str : "unexpected reply");
	}
	d->done(rc, d->data);
	free(d);
	if (rc == 1)
		run_reader(l, false);   /* a slot may be free already (the job was diverted to keep
		                         * its place behind the lane's) */
	maybe_free(l);
}

int judgelane_divert(struct judgelane *l, const char *consumer, const char *id,
                     char *const *fields, const size_t *flens, int nf, int attempts,
                     void (*done)(int rc, void *data), void *data)
{
	if (!l || l->closing || !rq_connected(l->rq))
		return -1;
	int max = 8 + 2 * nf + 4;   /* the head, then at most nf + 2 pairs (judgelane_fields) */
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
                                const char *lane, const char *group, const char *consumer,
                                judgelane_room_fn *room, judgelane_entries_fn *entries,
                                void *data)
{
	struct judgelane *l = xcalloc(1, sizeof *l);
	l->loop = loop;
	l->rq = rq;
	l->stream = xstrdup(stream);
	l->lane = xstrdup(lane);
	l->group = xstrdup(group);
	l->consumer = xstrdup(consumer);
	l->room = room;
	l->entries = entries;
	l->data = data;
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
