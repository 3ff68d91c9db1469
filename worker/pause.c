/* pause: the worker's copy of the pause switches; see pause.h. */
#include "pause.h"

#include <stdlib.h>
#include <string.h>

#include "rq.h"
#include "util.h"

struct pause_poller {
	uv_timer_t timer;
	struct rq *rq;
	char *k_paused, *k_challenges;
	struct pause_state st;
	void (*changed)(void *data);
	void *data;
	int inflight;           /* commands whose callback has not run */
	bool closing, timer_closed;
	bool have_all;          /* the GET of the current round answered */
	bool next_all;
};

void pause_state_clear(struct pause_state *st)
{
	for (size_t i = 0; i < st->nslugs; i++)
		free(st->slugs[i]);
	free(st->slugs);
	st->slugs = NULL;
	st->nslugs = 0;
}

void pause_state_set_slugs(struct pause_state *st, const char *const *slugs, size_t n)
{
	pause_state_clear(st);
	if (!n)
		return;
	st->slugs = xcalloc(n, sizeof *st->slugs);
	for (size_t i = 0; i < n; i++)
		st->slugs[i] = xstrdup(slugs[i]);
	st->nslugs = n;
}

bool pause_state_holds(const struct pause_state *st, const char *slug)
{
	if (!slug)
		return false;
	for (size_t i = 0; i < st->nslugs; i++)
		if (!strcmp(st->slugs[i], slug))
			return true;
	return false;
}

static void maybe_free(struct pause_poller *p)
{
	if (!p->closing || !p->timer_closed || p->inflight)
		return;
	pause_state_clear(&p->st);
	free(p->k_paused);
	free(p->k_challenges);
	free(p);
}

static void on_get(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct pause_poller *p = data;
	(void)r;
	p->inflight--;
	p->have_all = !err && reply && reply->type != REDIS_REPLY_ERROR;
	p->next_all = p->have_all && reply->type == REDIS_REPLY_STRING;
	maybe_free(p);
}

static bool same_slugs(const struct pause_state *st, const redisReply *reply)
{
	if (st->nslugs != reply->elements)
		return false;
	for (size_t i = 0; i < reply->elements; i++)
		if (reply->element[i]->type != REDIS_REPLY_STRING ||
		    !pause_state_holds(st, reply->element[i]->str))
			return false;
	return true;
}

static void on_members(struct rq *r, redisReply *reply, const char *err, void *data)
{
	struct pause_poller *p = data;
	(void)r;
	p->inflight--;
	if (p->closing) {
		maybe_free(p);
		return;
	}
	bool changed = false;
	if (p->have_all && p->next_all != p->st.all) {
		p->st.all = p->next_all;
		changed = true;
	}
	if (!err && reply && reply->type == REDIS_REPLY_ARRAY && !same_slugs(&p->st, reply)) {
		const char **slugs = xcalloc(reply->elements + 1, sizeof *slugs);
		size_t n = 0;
		for (size_t i = 0; i < reply->elements; i++)
			if (reply->element[i]->type == REDIS_REPLY_STRING)
				slugs[n++] = reply->element[i]->str;
		pause_state_set_slugs(&p->st, slugs, n);
		free(slugs);
		changed = true;
	}
	if (changed && p->changed)
		p->changed(p->data);
}

static void on_tick(uv_timer_t *t)
{
	struct pause_poller *p = t->data;
	if (p->inflight || !rq_connected(p->rq))
		return;     /* the previous round is still out, or nothing to ask */
	const char *get[] = { "GET", p->k_paused };
	const char *mem[] = { "SMEMBERS", p->k_challenges };
	if (rq_cmdv(p->rq, 0, on_get, p, 2, get, NULL) == 0)
		p->inflight++;
	else
		return;
	if (rq_cmdv(p->rq, 0, on_members, p, 2, mem, NULL) == 0)
		p->inflight++;
}

struct pause_poller *pause_poller_new(uv_loop_t *loop, struct rq *rq, const char *prefix,
                                      void (*changed)(void *data), void *data)
{
	struct pause_poller *p = xcalloc(1, sizeof *p);
	struct strbuf a = { 0 }, b = { 0 };
	strbuf_addf(&a, "%s" PAUSE_KEY_SUFFIX, prefix);
	strbuf_addf(&b, "%s" PAUSE_CHALLENGES_KEY_SUFFIX, prefix);
	p->k_paused = a.buf;
	p->k_challenges = b.buf;
	p->rq = rq;
	p->changed = changed;
	p->data = data;
	uv_timer_init(loop, &p->timer);
	p->timer.data = p;
	uv_timer_start(&p->timer, on_tick, 0, PAUSE_POLL_MS);
	return p;
}

const struct pause_state *pause_poller_state(const struct pause_poller *p)
{
	return &p->st;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct pause_poller *p = h->data;
	p->timer_closed = true;
	maybe_free(p);
}

void pause_poller_free(struct pause_poller *p)
{
	if (!p || p->closing)
		return;
	p->closing = true;
	uv_close((uv_handle_t *)&p->timer, on_timer_closed);
}
