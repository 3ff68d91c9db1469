/* Unit tests for worker/cplan: the commit transaction's decisions, without Redis or
 * PostgreSQL. Each ordering rule of cplan.h has a case, including an evaluation and
 * elo=adjust re-evaluations of the same agent mixed in one batch; and the commit queue's
 * batching (how many jobs the next transaction takes, when it starts). */
#include <stdlib.h>
#include <string.h>

#include "cplan.h"
#include "tap.h"

#define AG1 "00000000-0000-0000-0000-0000000000a1"
#define AG2 "00000000-0000-0000-0000-0000000000a2"
#define S1 "00000000-0000-0000-0000-000000000001"
#define S2 "00000000-0000-0000-0000-000000000002"
#define S3 "00000000-0000-0000-0000-000000000003"
#define M1 "00000000-0000-0000-0000-0000000000f1"
#define M2 "00000000-0000-0000-0000-0000000000f2"

static struct job jobs_store[16];
static int njobs;

static struct job *mk(enum job_op op, const char *sub, const char *agent, const char *match,
                      enum score_outcome o)
{
	struct job *j = &jobs_store[njobs++];
	memset(j, 0, sizeof *j);
	snprintf(j->id, sizeof j->id, "1-%d", njobs);
	snprintf(j->sub, sizeof j->sub, "%s", sub);
	snprintf(j->row.agent_id, sizeof j->row.agent_id, "%s", agent);
	snprintf(j->row.match_id, sizeof j->row.match_id, "%s", match);
	snprintf(j->row.difficulty, sizeof j->row.difficulty, "contender");
	j->row.attempt_number = 1;
	j->op = op;
	j->kind = op == OP_REEVAL ? JOB_REEVALUATE : JOB_EVALUATE;
	j->res.result = o;
	j->res.score = o == SCORE_WIN ? 90 : o == SCORE_DRAW ? 50 : 10;
	return j;
}

static struct cplan_agent agent(const char *id, int elo, int mc)
{
	struct cplan_agent a = { .elo = elo, .mc = mc };
	snprintf(a.id, sizeof a.id, "%s", id);
	return a;
}

static struct cplan_sub sub(const char *id, const char *status, const char *mstatus)
{
	struct cplan_sub s;
	memset(&s, 0, sizeof s);
	snprintf(s.id, sizeof s.id, "%s", id);
	s.status = job_status_parse(status);
	s.match_status = job_status_parse(mstatus);
	return s;
}

/* A re-evaluation's original: first evaluated from `before` with K 32 against 1000,
 * the match's effective change `eff`. */
static struct cplan_orig orig(int before, int eff, int max_seq)
{
	struct cplan_orig o = { .found = true, .has_result = true, .has_before = true,
	                        .elo_before = before, .k = 32, .eff_change = eff,
	                        .max_seq = max_seq, .opponent = 1000,
	                        .match_elo_before = before,
	                        .match = { .has_before = true, .has_after = true, .has_change = true,
	                                   .before = before, .after = before + eff, .change = eff } };
	return o;
}

static int expect_change(int rating, int mc, enum elo_outcome o)
{
	struct elo_update u;
	elo_compute(rating, mc, 1000, o, false, false, 1, &u);
	return u.change;
}

static void evaluation_then_adjust_of_same_agent(void)
{
	njobs = 0;
	/* The re-evaluation comes first in the batch; the evaluation is still computed first. */
	struct job *re = mk(OP_REEVAL, S1, AG1, M1, SCORE_LOSS);
	re->elo = JOB_ELO_ADJUST;
	struct job *ev = mk(OP_COMPLETE, S2, AG1, M2, SCORE_WIN);
	struct job *jobs[] = { re, ev };
	struct cplan_agent ag[] = { agent(AG1, 1000, 3) };
	struct cplan_sub ss[] = { sub(S2, "queued", "active"), sub(S1, "completed", "completed") };
	/* The match of S1 was a win from 1000: +16. */
	struct cplan_orig ori[2] = { orig(1000, 16, 1), { 0 } };
	struct cplan p;

	cplan_make(jobs, 2, ag, 1, ss, 2, ori, &p);
	is_int(p.nsteps, 2, "mixed batch: two writes");
	is_int(p.steps[0].pos, 1, "mixed batch: the evaluation is written first");
	is_int(p.steps[0].op, OP_COMPLETE, "mixed batch: first write completes");
	is_int(p.steps[1].pos, 0, "mixed batch: the re-evaluation second");
	is_int(ev->eu.before, 1000, "evaluation computed from the locked rating");
	is_int(ev->eu.after, 1016, "evaluation: 1000 beats 1000 with K 32 -> 1016");
	is_int(re->eval_seq, 2, "re-evaluation gets eval_seq max+1");
	/* The loss from 1000 would have been -16: move the agent by -16 - 16 = -32 from the
	 * rating after the evaluation (not from the locked rating). */
	is_int(re->hist_before, 1016, "adjust starts from the rating after the evaluation");
	is_int(re->hist_change, -32, "adjust moves by new change minus effective change");
	is_int(re->hist_after, 984, "adjust: 1016 - 32");
	ok(p.steps[1].adjust, "re-evaluation step adjusts");
	is_int(ag[0].elo, 984, "agent's final rating");
	is_int(ag[0].mc, 4, "agent's match count: only the evaluation counts");
	is_int(ag[0].win, 1, "agent's wins");
	ok(ag[0].touched, "agent row written");
	is_int(p.nmatches, 1, "one match adjusted");
	is_str(p.matches[0].id, M1, "the re-evaluated match");
	is_int(p.matches[0].eff, -16, "match's effective change is the re-evaluation's");
	ok(p.matches[0].last == re, "match shows the re-evaluation");
	cplan_free(&p);
}

static void two_adjusts_of_one_match(void)
{
	njobs = 0;
	struct job *a = mk(OP_REEVAL, S1, AG1, M1, SCORE_LOSS);
	struct job *b = mk(OP_REEVAL, S1, AG1, M1, SCORE_DRAW);
	a->elo = b->elo = JOB_ELO_ADJUST;
	struct job *jobs[] = { a, b };
	struct cplan_agent ag[] = { agent(AG1, 1100, 10) };
	struct cplan_sub ss[] = { sub(S1, "completed", "completed") };
	struct cplan_orig ori[2] = { orig(1000, 16, 3), orig(1000, 16, 3) };
	struct cplan p;

	cplan_make(jobs, 2, ag, 1, ss, 1, ori, &p);
	is_int(a->eval_seq, 4, "first re-evaluation of a submission: max+1");
	is_int(b->eval_seq, 5, "second re-evaluation of the same submission: max+2");
	int loss = expect_change(1000, 0, ELO_LOSS), draw = expect_change(1000, 0, ELO_DRAW);
	is_int(a->hist_change, loss - 16, "first adjust: against the stored effective change");
	is_int(b->hist_change, draw - loss, "second adjust: against the first's change");
	is_int(ag[0].elo, 1100 - 16 + draw, "agent ends as if the match had been a draw");
	is_int(p.nmatches, 1, "one match entry for both");
	ok(p.matches[0].last == b, "the match shows the last re-evaluation");
	is_int(p.matches[0].eff, draw, "the match's change is the draw's");
	cplan_free(&p);
}

static void duplicates_and_matches(void)
{
	njobs = 0;
	struct job *a = mk(OP_COMPLETE, S1, AG1, M1, SCORE_WIN);
	struct job *a2 = mk(OP_COMPLETE, S1, AG1, M1, SCORE_WIN);      /* same submission */
	struct job *c = mk(OP_COMPLETE, S2, AG2, M1, SCORE_WIN);       /* same match */
	struct job *d = mk(OP_COMPLETE, S3, AG2, M2, SCORE_DRAW);      /* final already */
	struct job *e = mk(OP_REJECT, "00000000-0000-0000-0000-00000000dead", AG2, M2, SCORE_LOSS);
	e->reason = REASON_RATE_LIMITED;
	struct job *jobs[] = { a, a2, c, d, e };
	/* Agents given out of order: the plan sorts them. */
	struct cplan_agent ag[] = { agent(AG2, 1200, 40), agent(AG1, 1000, 0) };
	struct cplan_sub ss[] = { sub(S3, "completed", "completed"), sub(S1, "queued", "active"),
	                          sub(S2, "queued", "active") };
	struct cplan p;

	cplan_make(jobs, 5, ag, 2, ss, 3, NULL, &p);
	ok(!a->duplicate && a->op_eff == OP_COMPLETE, "first submission completes");
	ok(a2->duplicate, "the same submission twice: the second is a duplicate");
	ok(!c->duplicate && c->op_eff == OP_REJECT, "second submission of the match is rejected");
	is_str(job_reason_name(c->reason), "match_not_active", "with match_not_active");
	ok(d->duplicate, "a submission final under the lock is a duplicate");
	ok(e->duplicate, "a submission whose row is gone is a duplicate");
	is_int(p.ncomplete, 1, "one completion");
	is_int(p.nreject, 1, "one rejection");
	is_int(p.nsteps, 2, "two writes");
	struct cplan_agent *a1 = !strcmp(ag[0].id, AG1) ? &ag[0] : &ag[1];
	struct cplan_agent *a2r = a1 == &ag[0] ? &ag[1] : &ag[0];
	ok(a1->touched && !a2r->touched, "only the completing agent is written");
	is_int(a1->elo, 1016, "its rating");
	cplan_free(&p);
}

static void agent_twice_in_order(void)
{
	njobs = 0;
	struct job *a = mk(OP_COMPLETE, S1, AG1, M1, SCORE_WIN);
	struct job *b = mk(OP_COMPLETE, S2, AG1, M2, SCORE_WIN);
	struct job *jobs[] = { a, b };
	struct cplan_agent ag[] = { agent(AG1, 1000, 29) };
	struct cplan_sub ss[] = { sub(S1, "queued", "active"), sub(S2, "evaluating", "active") };
	struct cplan p;

	cplan_make(jobs, 2, ag, 1, ss, 2, NULL, &p);
	is_int(a->eu.k, 32, "29 matches played: K 32");
	is_int(b->eu.before, a->eu.after, "second match starts from the first's rating");
	is_int(b->eu.k, 16, "second match sees match count 30: K 16");
	is_int(ag[0].mc, 31, "match count +2");
	is_int(ag[0].cs, 2, "streak 2");
	is_int(ag[0].bs, 2, "best streak 2");
	cplan_free(&p);
}

static void reeval_edges(void)
{
	njobs = 0;
	struct job *none = mk(OP_REEVAL, S1, AG1, M1, SCORE_WIN);
	struct job *again = mk(OP_REEVAL, S2, AG1, M2, SCORE_WIN);
	struct job *keep = mk(OP_REEVAL, S3, AG1, M2, SCORE_LOSS);
	struct job *floor = mk(OP_REEVAL, S3, AG2, M1, SCORE_LOSS);
	struct job *failre = mk(OP_FAIL, S3, AG1, M2, SCORE_LOSS);
	failre->kind = JOB_REEVALUATE;
	floor->elo = JOB_ELO_ADJUST;
	struct job *jobs[] = { none, again, keep, floor, failre };
	struct cplan_agent ag[] = { agent(AG1, 1000, 5), agent(AG2, 110, 5) };
	struct cplan_sub ss[] = { sub(S1, "completed", "completed"),
	                          sub(S2, "completed", "completed"),
	                          sub(S3, "completed", "completed") };
	struct cplan_orig ori[5] = { { .found = true }, orig(1000, 0, 1), orig(1000, 16, 1),
	                             orig(1000, 16, 1), { 0 } };
	ori[1].job_exists = true;
	struct cplan p;

	cplan_make(jobs, 5, ag, 2, ss, 3, ori, &p);
	is_int(none->op_eff, OP_NO_RESULT, "re-evaluation without a first result: OP_NO_RESULT");
	ok(again->duplicate, "a re-evaluation already recorded is a duplicate");
	ok(!keep->duplicate && !p.steps[0].adjust, "elo=keep writes a result, no adjustment");
	is_int(keep->hist_change, 0, "elo=keep: the rating does not move");
	is_int(floor->hist_after, ELO_FLOOR, "an adjustment stops at the floor");
	is_int(floor->hist_change, ELO_FLOOR - 110, "and records the clipped change");
	is_int(keep->eval_seq, 2, "first re-evaluation of S3: seq 2");
	is_int(floor->eval_seq, 3, "second re-evaluation of S3 in the batch: seq 3");
	ok(failre->op_eff == OP_FAIL && !failre->duplicate, "a failed re-evaluation: OP_FAIL");
	is_int(p.nfail, 0, "but it writes nothing (the submission stays as it is)");
	is_int(p.nreeval, 2, "two re-evaluation writes");
	cplan_free(&p);
}

/* Stored values the worker did not write (#22): an elo=adjust of a match whose Elo
 * columns are inconsistent, and a re-evaluation past eval_seq INT_MAX, are refused by
 * name (OP_FAIL, a write of its own); nothing moves, a second adjust of the same match
 * in the batch is refused too, and an elo=keep of that match goes ahead. */
static void refused_stored_values(void)
{
	njobs = 0;
	struct job *a = mk(OP_REEVAL, S1, AG1, M1, SCORE_LOSS);
	struct job *b = mk(OP_REEVAL, S1, AG1, M1, SCORE_DRAW);
	struct job *k = mk(OP_REEVAL, S1, AG1, M1, SCORE_DRAW);
	struct job *e = mk(OP_REEVAL, S2, AG2, M2, SCORE_WIN);
	a->elo = b->elo = JOB_ELO_ADJUST;
	struct job *jobs[] = { a, b, k, e };
	struct cplan_agent ag[] = { agent(AG1, 1100, 10), agent(AG2, 1000, 1) };
	struct cplan_sub ss[] = { sub(S1, "completed", "completed"), sub(S2, "completed", "completed") };
	struct cplan_orig bad = orig(1000, 16, 1);
	bad.eff_change = bad.match.change = 2147482731;   /* an API server's garbage */
	struct cplan_orig ori[4] = { bad, bad, bad, orig(1000, 16, 2147483647) };
	struct cplan p;

	cplan_make(jobs, 4, ag, 2, ss, 2, ori, &p);
	is_int(a->op_eff, OP_REFUSED, "garbage elo_change: the adjust is refused");
	ok(a->last_error && !strncmp(a->last_error, "elo_inconsistent: ", 18),
	   "refused as elo_inconsistent (%s)", a->last_error ? a->last_error : "NULL");
	is_int(b->op_eff, OP_REFUSED, "a second adjust of the same match: refused too");
	is_int(k->op_eff, OP_REEVAL, "elo=keep of that match goes ahead");
	is_int(k->eval_seq, 2, "elo=keep: eval_seq max+1 (the refused took none)");
	is_int(e->op_eff, OP_REFUSED, "eval_seq INT_MAX: refused");
	ok(e->last_error && !strncmp(e->last_error, "eval_seq_exhausted: ", 20),
	   "refused as eval_seq_exhausted (%s)", e->last_error ? e->last_error : "NULL");
	is_int(p.nfail, 0, "three refusals, nothing written for them (the submissions keep their status)");
	is_int(p.nreeval, 1, "one re-evaluation written");
	is_int(p.nmatches, 0, "no match adjusted");
	ok(!ag[0].touched && ag[0].elo == 1100, "the agent's rating does not move");
	for (int i = 0; i < 4; i++)
		free(jobs[i]->last_error);
	cplan_free(&p);
}

/* The commit queue's next batch: a solo job alone, otherwise up to the next solo job and
 * at most ARBITER_BATCH_MAX. */
static void batch_size(void)
{
	struct job q[6];
	memset(q, 0, sizeof q);
	for (int i = 0; i < 5; i++)
		q[i].qnext = &q[i + 1];
	is_int(cplan_batch_size(NULL, 8), 0, "batch size: an empty queue takes none");
	is_int(cplan_batch_size(q, 8), 6, "batch size: the whole queue when it fits");
	is_int(cplan_batch_size(q, 4), 4, "batch size: at most ARBITER_BATCH_MAX");
	q[3].solo = true;
	is_int(cplan_batch_size(q, 8), 3, "batch size: up to the next solo job");
	is_int(cplan_batch_size(&q[3], 8), 1, "batch size: a solo job at the head goes alone");
	is_int(cplan_batch_size(&q[4], 8), 2, "batch size: after it, the others again");
	q[0].solo = true;
	is_int(cplan_batch_size(q, 1), 1, "batch size: solo with ARBITER_BATCH_MAX 1");
}

/* Start now (0) or wait: ARBITER_COMMIT_OVERLAP_MIN, then ARBITER_COMMIT_DELAY_MS; a full
 * batch, no running commit or a draining worker never waits. */
static void batch_wait(void)
{
	/* n, max, overlap_min, delay_ms, inflight, age, running */
	is_int(cplan_batch_wait(1, 64, 4, 0, 0, 0, true), 0, "no commit running: one job starts at once");
	is_int(cplan_batch_wait(1, 64, 4, 0, 1, 0, true), CPLAN_OVERLAP_WAIT_MS,
	       "a commit running, 1 job of overlap_min 4: waits the whole overlap wait");
	is_int(cplan_batch_wait(3, 64, 4, 0, 1, 20, true), CPLAN_OVERLAP_WAIT_MS - 20,
	       "queued 20 ms ago: waits the rest of it");
	is_int(cplan_batch_wait(3, 64, 4, 0, 1, CPLAN_OVERLAP_WAIT_MS, true), 0,
	       "queued the overlap wait ago: starts (a commit stuck on a lock holds nothing back)");
	is_int(cplan_batch_wait(4, 64, 4, 0, 1, 0, true), 0, "overlap_min jobs: a second commit starts");
	is_int(cplan_batch_wait(2, 2, 4, 0, 1, 0, true), 0,
	       "a full batch (n == ARBITER_BATCH_MAX) below overlap_min starts");
	is_int(cplan_batch_wait(1, 64, 4, 0, 1, 0, false), 0, "draining: never waits");
	is_int(cplan_batch_wait(1, 64, 1, 0, 3, 0, true), 0, "overlap_min 1 and no delay: never waits");
	is_int(cplan_batch_wait(2, 64, 1, 30, 1, 10, true), 20,
	       "ARBITER_COMMIT_DELAY_MS 30, head queued 10 ms ago: waits 20 ms to fill up");
	is_int(cplan_batch_wait(2, 64, 1, 30, 1, 30, true), 0, "... and starts at that age");
	is_int(cplan_batch_wait(2, 64, 1, 30, 0, 10, true), 0, "the delay applies only beside a running commit");
	is_int(cplan_batch_wait(2, 64, 4, 200, 1, 10, true), CPLAN_OVERLAP_WAIT_MS - 10,
	       "both apply: the overlap wait is asked first");
	is_int(cplan_batch_wait(2, 64, 4, 200, 1, CPLAN_OVERLAP_WAIT_MS, true), 200 - CPLAN_OVERLAP_WAIT_MS,
	       "the overlap wait over, the delay still holds a small batch");
	is_int(cplan_batch_wait(64, 64, 4, 200, 1, 0, true), 0, "a full batch ignores the delay too");
}

int main(void)
{
	batch_size();
	batch_wait();
	refused_stored_values();
	evaluation_then_adjust_of_same_agent();
	two_adjusts_of_one_match();
	duplicates_and_matches();
	agent_twice_in_order();
	reeval_edges();
	cplan_free(NULL);
	return tap_done();
}
