/*
 * cplan: the commit transaction's decisions (see cplan.h for the rules).
 * Lookups are by id through sorted arrays (the locked rows) and small hash
 * maps (what the batch decided so far), so a batch costs O(n log n).
 */
#include "cplan.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elo.h"
#include "util.h"

/* ---- a string → int map for one batch (open addressing, never full) ------------------ */

struct smap {
	const char **keys;
	int *vals;
	size_t cap;                   /* a power of two, > 2 × the most keys ever added */
};

static void smap_init(struct smap *m, int max_keys)
{
	m->cap = 16;
	while (m->cap < (size_t)max_keys * 2 + 1)
		m->cap *= 2;
	m->keys = xcalloc(m->cap, sizeof *m->keys);
	m->vals = xcalloc(m->cap, sizeof *m->vals);
}

static void smap_free(struct smap *m)
{
	free(m->keys);
	free(m->vals);
}

static size_t smap_slot(const struct smap *m, const char *k)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const unsigned char *p = (const unsigned char *)k; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	size_t i = (size_t)h & (m->cap - 1);
	while (m->keys[i] && strcmp(m->keys[i], k))
		i = (i + 1) & (m->cap - 1);
	return i;
}

/* The value of k, or NULL when absent. */
static int *smap_get(struct smap *m, const char *k)
{
	size_t i = smap_slot(m, k);
	return m->keys[i] ? &m->vals[i] : NULL;
}

static void smap_put(struct smap *m, const char *k, int v)
{
	size_t i = smap_slot(m, k);
	m->keys[i] = k;
	m->vals[i] = v;
}

/* ---- the locked rows, sorted by id ----------------------------------------------------- */

static int cmp_agent(const void *a, const void *b)
{
	return strcmp(((const struct cplan_agent *)a)->id, ((const struct cplan_agent *)b)->id);
}

static int cmp_sub(const void *a, const void *b)
{
	return strcmp(((const struct cplan_sub *)a)->id, ((const struct cplan_sub *)b)->id);
}

static struct cplan_agent *find_agent(struct cplan_agent *a, int n, const char *id)
{
	struct cplan_agent key;
	if (!a || n <= 0 || strlen(id) >= sizeof key.id)
		return NULL;
	strcpy(key.id, id);
	return bsearch(&key, a, (size_t)n, sizeof *a, cmp_agent);
}

static const struct cplan_sub *find_sub(const struct cplan_sub *s, int n, const char *id)
{
	struct cplan_sub key;
	if (!s || n <= 0 || strlen(id) >= sizeof key.id)
		return NULL;
	strcpy(key.id, id);
	return bsearch(&key, s, (size_t)n, sizeof *s, cmp_sub);
}

/* ---- rules ----------------------------------------------------------------------------- */

bool cplan_touches_agent(const struct job *j)
{
	return j->op == OP_COMPLETE || (j->op == OP_REEVAL && j->elo == JOB_ELO_ADJUST);
}

bool cplan_touches_sub(const struct job *j)
{
	return j->op == OP_COMPLETE || j->op == OP_REEVAL || j->op == OP_REJECT ||
	       (j->op == OP_FAIL && j->kind == JOB_EVALUATE);
}

static enum elo_outcome elo_of(enum score_outcome o)
{
	return o == SCORE_WIN ? ELO_WIN : o == SCORE_DRAW ? ELO_DRAW : ELO_LOSS;
}

/* Counts a first evaluation's match in the agent's row. */
static void agent_play(struct cplan_agent *a, const struct job *j)
{
	a->elo = j->eu.after;
	a->mc = elo_count_inc(a->mc);       /* counts saturate (common/elo.h) */
	if (j->res.result == SCORE_WIN) {
		a->win = elo_count_inc(a->win);
		a->cs = elo_count_inc(a->cs);
	} else {
		if (j->res.result == SCORE_DRAW)
			a->draw = elo_count_inc(a->draw);
		else
			a->loss = elo_count_inc(a->loss);
		a->cs = 0;
	}
	if (a->cs > a->bs)
		a->bs = a->cs;
	a->touched = true;
}

struct state {
	struct cplan_agent *agents;
	int nagents;
	struct smap decided;          /* submission ids decided (value unused) */
	struct smap done;             /* match ids completed in this batch */
	struct smap seq;              /* submission id → highest eval_seq given out */
	struct smap madj;             /* match id → index in plan->matches */
	struct cplan *p;
};

static void add_step(struct cplan *p, int pos, enum job_op op)
{
	struct cplan_step *s = &p->steps[p->nsteps++];
	memset(s, 0, sizeof *s);
	s->pos = pos;
	s->op = op;
	switch (op) {
	case OP_COMPLETE: p->ncomplete++; break;
	case OP_REEVAL: p->nreeval++; break;
	case OP_REJECT: p->nreject++; break;
	case OP_FAIL: p->nfail++; break;
	default: break;
	}
}

/* A first evaluation (or its rejection, or a failure): pass 1. */
static void decide_first(struct state *s, struct job *j, int pos,
                         const struct cplan_sub *subs, int nsubs)
{
	const struct cplan_sub *st = cplan_touches_sub(j) ? find_sub(subs, nsubs, j->sub) : NULL;

	if (cplan_touches_sub(j)) {
		if (!st || job_status_final(st->status) || smap_get(&s->decided, j->sub)) {
			/* Gone (deleted by hand), final already, or decided earlier in
			 * this batch: the first decision stands. */
			j->duplicate = true;
			return;
		}
		smap_put(&s->decided, j->sub, 1);
		if (st->has_result && j->kind == JOB_EVALUATE) {
			/* Evaluated already (an API server set it back to queued): the
			 * result stands; the status goes back to completed. A new
			 * evaluation is a reevaluate job. */
			j->op_eff = OP_RESTORE;
			add_step(s->p, pos, OP_RESTORE);
			return;
		}
	}
	if (j->op == OP_COMPLETE &&
	    (st->match_status != ST_ACTIVE || smap_get(&s->done, j->row.match_id))) {
		/* Another submission of the match completed first. */
		j->op_eff = OP_REJECT;
		j->reason = REASON_MATCH_NOT_ACTIVE;
	}
	switch (j->op_eff) {
	case OP_COMPLETE: {
		struct cplan_agent *a = find_agent(s->agents, s->nagents, j->row.agent_id);
		if (!a) {
			j->duplicate = true;   /* agent row gone: cannot happen with the FKs */
			return;
		}
		int opp = elo_opponent_or_default(j->row.difficulty, j->row.has_rating, j->row.rating);
		elo_compute(a->elo, a->mc, opp, elo_of(j->res.result), j->res.verified,
		            j->row.memoryless, j->row.attempt_number, &j->eu);
		agent_play(a, j);
		smap_put(&s->done, j->row.match_id, 1);
		add_step(s->p, pos, OP_COMPLETE);
		return;
	}
	case OP_REJECT:
		add_step(s->p, pos, OP_REJECT);
		return;
	case OP_FAIL:
		/* A failed re-evaluation leaves the submission as it is (dead-lettered only). */
		if (j->kind == JOB_EVALUATE)
			add_step(s->p, pos, OP_FAIL);
		return;
	default:
		return;
	}
}

/* The elo=adjust part of a re-evaluation: moves the agent by the difference
 * between this evaluation's change and the match's effective change so far. */
static bool adjust_agent(struct state *s, struct job *j, const struct cplan_orig *x)
{
	struct cplan *p = s->p;
	int *mi = smap_get(&s->madj, j->row.match_id);
	struct cplan_match *m;
	if (mi) {
		m = &p->matches[*mi];
	} else {
		m = &p->matches[p->nmatches];
		memset(m, 0, sizeof *m);
		snprintf(m->id, sizeof m->id, "%s", j->row.match_id);
		m->eff = x->eff_change;
		m->elo_before = x->match_elo_before;
		smap_put(&s->madj, m->id, p->nmatches++);
	}
	struct cplan_agent *a = find_agent(s->agents, s->nagents, j->row.agent_id);
	if (!a)
		return false;
	a->elo = elo_clamp_rating(a->elo, NULL);
	int nr = elo_add(a->elo, (long long)j->eu.change - m->eff);   /* 64-bit, bounded */
	j->hist_before = a->elo;
	j->hist_after = nr;
	j->hist_change = nr - a->elo;   /* both within [0, ELO_RATING_MAX] */
	a->elo = nr;
	a->touched = true;
	m->eff += j->hist_change;
	m->last = j;
	return true;
}

/* A re-evaluation refused for a stored value it cannot build on: the submission ends
 * failed with last_error "<reason>: <why>" (and the job is dead-lettered with it). */
static void refuse(struct state *s, struct job *j, int pos, const char *reason, const char *why)
{
	char buf[200];
	(void)s;
	(void)pos;
	snprintf(buf, sizeof buf, "%s: %s", reason, why);
	job_set_error(j, buf);
	j->op_eff = OP_REFUSED;
	j->eval_seq = 0;
	j->hist_before = j->hist_after = j->hist_change = 0;
}

/* A re-evaluation: pass 2. */
static void decide_reeval(struct state *s, struct job *j, int pos, const struct cplan_orig *x)
{
	if (!x || !x->found || !x->has_result) {
		j->op_eff = OP_NO_RESULT;
		return;
	}
	if (x->job_exists) {
		j->duplicate = true;
		return;
	}
	/* The match's stored columns, checked once per match and batch (a later
	 * adjustment of the same match builds on the batch's own values). */
	if (j->elo == JOB_ELO_ADJUST && !smap_get(&s->madj, j->row.match_id)) {
		const char *why = elo_stored_check(&x->match);
		if (why) {
			refuse(s, j, pos, "elo_inconsistent", why);
			return;
		}
	}
	int *seen = smap_get(&s->seq, j->sub);
	int seq = seen && *seen > x->max_seq ? *seen : x->max_seq;
	if (seq >= INT_MAX) {
		refuse(s, j, pos, "eval_seq_exhausted", "the submission's highest eval_seq is 2147483647");
		return;
	}
	j->eval_seq = seq + 1;
	smap_put(&s->seq, j->sub, j->eval_seq);

	/* The change this evaluation implies, from the original rating and K. */
	int opp = x->opponent >= 0 ? x->opponent
	          : elo_opponent_or_default(j->row.difficulty, j->row.has_rating, j->row.rating);
	if (x->has_before)
		elo_compute_k(x->elo_before, x->k, opp, elo_of(j->res.result), j->res.verified,
		              j->row.memoryless, j->row.attempt_number, &j->eu);
	else
		memset(&j->eu, 0, sizeof j->eu);
	j->hist_before = j->hist_after = j->hist_change = 0;
	bool adjust = j->elo == JOB_ELO_ADJUST && x->has_before && adjust_agent(s, j, x);

	add_step(s->p, pos, OP_REEVAL);
	struct cplan_step *st = &s->p->steps[s->p->nsteps - 1];
	st->has_before = x->has_before;
	st->adjust = adjust;
	st->opp = opp;
}

int cplan_make(struct job **jobs, int n, struct cplan_agent *agents, int nagents,
               struct cplan_sub *subs, int nsubs, const struct cplan_orig *orig,
               struct cplan *out)
{
	struct state s = { .agents = agents, .nagents = nagents, .p = out };

	memset(out, 0, sizeof *out);
	out->steps = xcalloc((size_t)n + 1, sizeof *out->steps);
	out->matches = xcalloc((size_t)n + 1, sizeof *out->matches);
	if (agents && nagents > 1)
		qsort(agents, (size_t)nagents, sizeof *agents, cmp_agent);
	if (subs && nsubs > 1)
		qsort(subs, (size_t)nsubs, sizeof *subs, cmp_sub);
	smap_init(&s.decided, n);
	smap_init(&s.done, n);
	smap_init(&s.seq, n);
	smap_init(&s.madj, n);

	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < n; i++) {
			struct job *j = jobs[i];
			if ((j->op == OP_REEVAL) != (pass == 1))
				continue;
			j->duplicate = false;
			j->op_eff = j->op;
			if (pass == 0)
				decide_first(&s, j, i, subs, nsubs);
			else if (!find_sub(subs, nsubs, j->sub))
				j->duplicate = true;   /* the row vanished (deleted by hand) */
			else
				decide_reeval(&s, j, i, orig ? &orig[i] : NULL);
		}
	}
	smap_free(&s.decided);
	smap_free(&s.done);
	smap_free(&s.seq);
	smap_free(&s.madj);
	return 0;
}

void cplan_free(struct cplan *p)
{
	if (!p)
		return;
	free(p->steps);
	free(p->matches);
	p->steps = NULL;
	p->matches = NULL;
}

int cplan_batch_size(const struct job *head, int max)
{
	if (!head)
		return 0;
	if (head->solo)
		return 1;
	int n = 0;
	for (const struct job *x = head; x && !x->solo && n < max; x = x->qnext)
		n++;
	return n;
}

uint64_t cplan_batch_wait(int n, int max, int overlap_min, int delay_ms, int inflight,
                          uint64_t age_ms, bool running)
{
	if (n >= max || inflight <= 0 || !running)
		return 0;
	/* ARBITER_COMMIT_OVERLAP_MIN: while a commit of this process runs, a second one starts
	 * only with that many jobs; a smaller batch waits for the running one to end (its end
	 * flushes again), at most CPLAN_OVERLAP_WAIT_MS. A commit costs the database about the
	 * same CPU whatever its size (~1-2 ms with 1-10 jobs), so at moderate rates two small
	 * commits in flight cost twice one larger one and saturate the database long before its
	 * backlog rate; under a backlog the queue reaches the threshold at once.
	 * worker/README.md "Settings"; bench_commit measures it. */
	if (n < overlap_min && age_ms < CPLAN_OVERLAP_WAIT_MS)
		return CPLAN_OVERLAP_WAIT_MS - age_ms;
	/* ARBITER_COMMIT_DELAY_MS: while another commit runs, let a small batch fill up a
	 * little (fewer, larger transactions). */
	if (delay_ms > 0 && age_ms < (uint64_t)delay_ms)
		return (uint64_t)delay_ms - age_ms;
	return 0;
}
