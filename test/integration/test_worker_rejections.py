#!/usr/bin/python3
"""`arbiter worker`: worker/README.md "Validation before scoring" rejections and poison entries (TAP on stdout).

Each reason of worker/README.md "Validation before scoring" in its place (not_match_owner, match_expired, match_not_active,
invalid_spec with the validation message in last_error), the first failing
check wins, rejected submissions get no result and move no Elo; poison
entries (missing / invalid submission_id, unknown kind or elo value, unknown
submission) land in {prefix}:dead with the original fields and reason,
original_id, worker_id, failed_at and are acknowledged; with policy `reject`
the excess of a hot IP is rejected with rate_limited. A custom prefix is used
throughout.
"""
import sys
import time
import uuid

from services import Services
from workerkit import Arena, Worker, done, eq, migrate, ok, wait_for

SPEC = {
    "evaluator": "deterministic",
    "dimensions": [{"key": "correctness", "weight": 1, "primitive": "exact_match",
                    "field": "x", "ground_truth_field": "x"}],
}
BAD_SPEC = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "correctness", "weight": 0.5, "primitive": "exact_match", "field": "x",
         "ground_truth_field": "x"},
        {"key": "speed", "weight": 0.4, "primitive": "time_decay"},
    ],
}
PREFIX = "arena7"


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s, prefix=PREFIX)
        w = Worker(s, "rej-1", env={"ARBITER_PREFIX": PREFIX})
        ch = a.challenge(SPEC, {"x": 1})
        bad = a.challenge(BAD_SPEC, {"x": 1})
        owner, other = a.agent(), a.agent()

        cases = {}
        # not_match_owner: the submission's agent is not the match's agent.
        m = a.match(owner, ch)
        cases["not_match_owner"] = a.submission(m, other, {"x": 1})
        # match_expired: submitted after expires_at (and the match is also not active:
        # the first failing check wins).
        m = a.match(owner, ch, status="expired", started_ago=7200, expires_in=-3600)
        cases["match_expired"] = a.submission(m, owner, {"x": 1})
        # match_not_active: a second submission for a completed match.
        m = a.match(owner, ch, status="completed")
        cases["match_not_active"] = a.submission(m, owner, {"x": 1})
        # invalid_spec: weights sum to 0.9.
        m = a.match(owner, bad)
        cases["invalid_spec"] = a.submission(m, owner, {"x": 1})
        # not_match_owner wins over an invalid spec and an expired match.
        m = a.match(owner, bad, status="expired", expires_in=-10)
        first_wins = a.submission(m, other, {"x": 1})
        for sid in list(cases.values()) + [first_wins]:
            a.enqueue(sid)
        subs = list(cases.values()) + [first_wins]
        ok(a.wait_final(subs, 30), "rejections finished", w.tail())
        for reason, sid in cases.items():
            row = a.q1("SELECT status, reject_reason, last_error FROM submissions WHERE id = %s", sid)
            eq(row[:2], ("rejected", reason), "%s: rejected with its reason" % reason)
            if reason == "invalid_spec":
                ok(row[2] and "weight" in row[2], "invalid_spec: validation message in last_error",
                   row[2])
        eq(a.q1("SELECT status, reject_reason FROM submissions WHERE id = %s", first_wins),
           ("rejected", "not_match_owner"), "checks run in the documented order")
        eq(a.val("SELECT count(*) FROM evaluation_results WHERE submission_id = ANY(%s::uuid[])",
                 subs), 0, "no result for rejected submissions")
        eq(a.val("SELECT count(*) FROM elo_history"), 0, "no Elo history")
        eq(a.q("SELECT elo, match_count FROM agents WHERE id IN (%s, %s)", owner, other),
           [(1000, 0), (1000, 0)], "no Elo change, no match counted")

        # Two submissions for one active match, enqueued together (same batch or not):
        # one is evaluated, the other is a second submission: match_not_active.
        solo = a.agent()
        m = a.match(solo, ch)
        twins = [a.submission(m, solo, {"x": 1}), a.submission(m, solo, {"x": 1})]
        for sid in twins:
            a.enqueue(sid)
        ok(a.wait_final(twins, 30), "two submissions of one match finished", w.tail())
        eq(sorted(a.q("SELECT status, reject_reason FROM submissions WHERE id = ANY(%s::uuid[])", twins),
                  key=str), sorted([("completed", None), ("rejected", "match_not_active")], key=str),
           "one completed, the other rejected match_not_active")
        eq(a.q1("SELECT match_count, elo > 1000 FROM agents WHERE id = %s", solo), (1, True),
           "the match counted once")

        # Poison entries.
        missing = str(uuid.uuid4())
        poison = [
            ({"kind": "evaluate", "note": "no id"}, "missing_submission_id"),
            ({"submission_id": "not-a-uuid"}, "invalid_submission_id"),
            ({"submission_id": cases["invalid_spec"], "kind": "explode"}, "invalid_kind"),
            ({"submission_id": cases["invalid_spec"], "kind": "reevaluate", "elo": "double"},
             "invalid_elo"),
            ({"submission_id": missing, "source_ip": "203.0.113.9"}, "submission_not_found"),
        ]
        ids = {}
        for fields, reason in poison:
            ids[reason] = a.r.xadd(a.stream, fields)
        ok(wait_for(lambda: a.r.xlen(a.dead) >= len(poison), 20), "poison entries dead-lettered",
           w.tail())
        dead = {f.get("reason"): f for _, f in a.dead_entries()}
        for fields, reason in poison:
            d = dead.get(reason)
            if not ok(d is not None, "%s: in %s:dead" % (reason, PREFIX), dead):
                continue
            eq(d.get("original_id"), ids[reason], "%s: original_id" % reason)
            eq(d.get("worker_id"), "rej-1", "%s: worker_id" % reason)
            ok(d.get("failed_at", "").isdigit() and abs(int(d["failed_at"]) / 1000 - time.time()) < 120,
               "%s: failed_at in Unix ms" % reason, d)
            ok(all(d.get(k) == v for k, v in fields.items()), "%s: original fields kept" % reason, d)
        ok(wait_for(lambda: a.r.xlen(a.stream) == 0 and a.pending() == 0, 10),
           "poison entries acknowledged and deleted", (a.r.xlen(a.stream), a.pending()))
        eq(a.status(cases["invalid_spec"]), "rejected", "a poison entry changes nothing in the database")
        rc = w.term(30)
        eq(rc, 0, "worker exits 0", w.tail())

        # Rate limit with policy reject: burst 2 for one IP, the rest rejected.
        w2 = Worker(s, "rej-2", env={"ARBITER_PREFIX": PREFIX, "ARBITER_RATE_LIMIT": "1/60s",
                                     "ARBITER_RATE_BURST": "2", "ARBITER_RATE_POLICY": "reject"})
        hot = []
        for i in range(5):
            _, sid = a.submit(owner, ch, {"x": 1}, source_ip="198.51.100.77")
            hot.append(sid)
        _, cold = a.submit(other, ch, {"x": 1}, source_ip="198.51.100.78")
        ok(a.wait_final(hot + [cold], 30), "rate-limited batch finished", w2.tail())
        rows = a.q("SELECT status, reject_reason FROM submissions WHERE id = ANY(%s::uuid[])", hot)
        eq(sorted(rows, key=str), sorted([("completed", None)] * 2 + [("rejected", "rate_limited")] * 3,
                                         key=str), "hot IP: burst 2 completed, 3 rejected rate_limited")
        eq(a.status(cold), "completed", "another IP is not limited")
        eq(w2.term(30), 0, "worker exits 0", w2.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
