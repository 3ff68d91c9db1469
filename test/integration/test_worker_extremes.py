#!/usr/bin/python3
"""Stored values at the edges, and stale fields (TAP on stdout).

1. Elo at the int limits (#16): an agent with elo INT_MIN, one with elo,
   match_count, win_count and current_streak INT_MAX, a challenge rated
   INT_MAX. Ratings are clamped into 0..1,000,000 with a warning, the
   arithmetic is 64-bit: elo_change = elo_after - elo_before on every row,
   counts saturate at INT_MAX instead of wrapping to INT_MIN, and K stays 16
   for the agent with INT_MAX matches. (Before: elo_change -2147483548, the
   counts wrapped.)
2. A submission that carries a reject_reason / last_error from an earlier
   attempt and then completes has both cleared.
3. A completed submission that an API server sets back to `queued` and
   enqueues again: the rule is that its first result stands, so it ends
   `completed` again, with its one result and no Elo move (before: it ended
   `rejected` / match_not_active while keeping its result).
"""
import sys
import time

from services import Services
from workerkit import SPEC_X, Arena, Worker, done, eq, migrate, ok

INT_MAX = 2147483647
INT_MIN = -2147483648


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="veteran")
        ch_max = a.challenge(SPEC_X, {"x": 1}, rating=INT_MAX)
        low = a.agent(elo=INT_MIN)
        high = a.agent(elo=INT_MAX, match_count=INT_MAX)
        a.q("UPDATE agents SET win_count = %s, current_streak = %s, best_streak = %s WHERE id = %s",
            INT_MAX, INT_MAX, INT_MAX, high)
        plain = a.agent()
        _, s_low = a.submit(low, ch, {"x": 1})
        _, s_high = a.submit(high, ch, {"x": 1})
        _, s_opp = a.submit(plain, ch_max, {"x": 1})
        _, s_stale = a.submit(plain, ch, {"x": 1}, enqueue=False)
        a.q("UPDATE submissions SET reject_reason = 'rate_limited', last_error = 'old failure' "
            "WHERE id = %s", s_stale)
        w = Worker(s, "ext-1")
        subs = [s_low, s_high, s_opp]
        ok(a.wait_final(subs, 30), "all evaluated", w.tail())
        a.enqueue(s_stale)
        ok(a.wait_final([s_stale], 30), "stale submission evaluated", w.tail())
        rows = a.q("SELECT s.id::text, s.status, r.elo_before, r.elo_change, h.elo_before, "
                   "h.elo_after, h.elo_change, h.opponent_elo, h.k_factor FROM submissions s "
                   "JOIN evaluation_results r ON r.submission_id = s.id "
                   "JOIN elo_history h ON h.result_id = r.id WHERE s.id = ANY(%s::uuid[])", subs)
        eq(len(rows), 3, "three results with their elo_history rows")
        for sid, st, rb, rc, hb, ha, hc, opp, k in rows:
            ok(st == "completed" and ha - hb == hc and rc == hc and rb == hb,
               "%s: elo_after - elo_before = elo_change (%r)" % (sid[:8], (hb, ha, hc)))
            ok(0 <= hb <= 1000000 and 100 <= ha <= 1000000 and 0 <= opp <= 1000000,
               "%s: ratings within 0..1,000,000 (%d -> %d vs %d)" % (sid[:8], hb, ha, opp))
        by = {r[0]: r for r in rows}
        eq(by[s_low][4], 0, "INT_MIN rating clamped to 0 before the update")
        eq(by[s_high][8], 16, "INT_MAX matches played: K 16")
        eq(by[s_opp][7], 1000000, "INT_MAX challenge rating clamped to 1,000,000")
        row = a.q1("SELECT elo, match_count, win_count, current_streak, best_streak FROM agents "
                   "WHERE id = %s", high)
        eq(tuple(row[1:]), (INT_MAX, INT_MAX, INT_MAX, INT_MAX),
           "counts and streaks saturate at INT_MAX")
        ok(100 <= row[0] <= 1000000, "its rating is within range (%d)" % row[0])
        out = w.output()
        ok("clamped" in out, "a warning says what was clamped")
        stale = a.q1("SELECT status, reject_reason, last_error FROM submissions WHERE id = %s", s_stale)
        eq(tuple(stale), ("completed", None, None), "completion clears reject_reason and last_error")
        # 3. A completed submission the API sets back to queued and enqueues again.
        before = a.q1("SELECT elo, match_count FROM agents WHERE id = %s", plain)
        a.q("UPDATE submissions SET status = 'queued' WHERE id = %s", s_stale)
        a.enqueue(s_stale)
        ok(a.wait_final([s_stale], 30), "reset submission handled", w.tail())
        time.sleep(0.5)
        row = a.q1("SELECT s.status, s.reject_reason, (SELECT count(*) FROM evaluation_results r "
                   "WHERE r.submission_id = s.id) FROM submissions s WHERE s.id = %s", s_stale)
        eq(tuple(row), ("completed", None, 1),
           "set back to queued after completion: completed again, one result, no rejection")
        eq(a.q1("SELECT elo, match_count FROM agents WHERE id = %s", plain), before,
           "and no Elo move")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
