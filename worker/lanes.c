/* lanes: the feeder of the bulk lane; see lanes.h. */
#include "lanes.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "rq.h"
#include "util.h"

/* KEYS: 1 live stream, 2 bulk stream. ARGV: 1 group, 2 concurrency, 3 batch while live jobs
 * wait. Returns {moved, bulk length after}. The live backlog is XLEN minus the group's
 * pending count (the worker deletes finished entries). A missing group counts as an empty
 * backlog. */
static const char feed_lua[] =
	"local len = redis.call('XLEN', KEYS[1])\n"
	"local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1])\n"
	"local pending = 0\n"
	"if ok and type(p) == 'table' then pending = tonumber(p[1]) or 0 end\n"
	"local backlog = len - pending\n"
	"local n = tonumber(ARGV[3])\n"
	"if backlog < tonumber(ARGV[2]) then n = tonumber(ARGV[2]) end\n"
	"local moved = 0\n"
	"if n > 0 then\n"
	"  local e = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', n)\n"
	"  for _, x in ipairs(e) do\n"
	"    local f = x[2]\n"
	"    f[#f + 1] = 'lane'\n"
	"    f[#f + 1] = 'bulk'\n"
	"    redis.call('XADD', KEYS[1], '*', unpack(f))\n"
	"    redis.call('XDEL', KEYS[2], x[1])\n"
	"    moved = moved + 1\n"
	"  end\n"
	"end\n"
	"return {moved, redis.call('XLEN', KEYS[2])}\n";

struct lanes {
	uv_timer_t timer;
	struct rq *rq;
	char *stream, *bulk, *group;
	char conc[16], share_batch[16];
	bool busy, closing, timer_closed;
};

int lanes_batch(long long live_backlog, int concurrency, int share)
{
	if (live_backlog < concurrency)
		return concurrency;
	return (int)(((long long)concurrency * share + 99) / 100);
}

static void maybe_free(struct lanes *l)
{
	if (!l->closing || !l->timer_closed || l->busy)
		return;
	free(l->stream);
	free(l->bulk);
	free(l->group);
	free(l);
}

static void on_fed(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct lanes *l = data;
	(void)r;
	l->busy = false;
	if (!err && reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
	    reply->element[0]->type == REDIS_REPLY_INTEGER) {
		metrics_bulk(reply->element[0]->integer, reply->element[1]->integer);
		if (reply->element[0]->integer)
			LOGD(NULL, NULL, "bulk lane: moved %lld job(s) to the live stream",
			     reply->element[0]->integer);
	} else if (!err && reply && reply->type == REDIS_REPLY_ERROR) {
		/* NOPERM: rq logs it once and /readyz reports it; not every tick. */
		if (rq_is_acl_refusal(reply->str) || rq_is_tryagain(reply->str))
			LOGD(NULL, NULL, "bulk lane: %s", reply->str);
		else
			LOGW(NULL, NULL, "bulk lane: %s", reply->str);
	}
	maybe_free(l);
}

static void on_tick(uv_timer_t *t)
{
	struct lanes *l = t->data;
	if (l->busy || !rq_connected(l->rq))
		return;
	const char *argv[] = { "EVAL", feed_lua, "2", l->stream, l->bulk, l->group, l->conc,
	                       l->share_batch };
	if (rq_cmdv(l->rq, 0, on_fed, l, 8, argv, NULL) == 0)
		l->busy = true;
}

struct lanes *lanes_new(uv_loop_t *loop, struct rq *rq, const char *stream, const char *bulk,
                        const char *group, int concurrency, int share)
{
	struct lanes *l = xcalloc(1, sizeof *l);
	l->rq = rq;
	l->stream = xstrdup(stream);
	l->bulk = xstrdup(bulk);
	l->group = xstrdup(group);
	snprintf(l->conc, sizeof l->conc, "%d", concurrency);
	snprintf(l->share_batch, sizeof l->share_batch, "%d",
	         lanes_batch((long long)concurrency, concurrency, share));
	uv_timer_init(loop, &l->timer);
	l->timer.data = l;
	uv_timer_start(&l->timer, on_tick, LANES_FEED_MS, LANES_FEED_MS);
	return l;
}

static void on_closed(uv_handle_t *h)
{
	struct lanes *l = h->data;
	l->timer_closed = true;
	maybe_free(l);
}

void lanes_free(struct lanes *l)
{
	if (!l || l->closing)
		return;
	l->closing = true;
	uv_timer_stop(&l->timer);
	uv_close((uv_handle_t *)&l->timer, on_closed);
}
