#!/usr/bin/python3
"""The source-IP rate limit (worker/README.md "Rate limiting") across two `arbiter worker` replicas
(TAP on stdout), with a real redis-server and PostgreSQL.

Rate 5/2s, burst 5 (T = 400 ms, tau = 1.6 s). A hot IPv4 address and a hot
IPv6 /64 send many submissions at once, each job spelling its source_ip
differently (IPv4-mapped, upper case, leading zeros, brackets, a %zone, other
hosts of the /64), in between normal traffic from many other IPs.

defer: in every window the hot keys get at most burst + W/T evaluations
(measured on evaluation_results.started_at, which follows the Redis decision
by milliseconds); one replica is SIGKILLed while most hot jobs sit in the
delayed set, a fresh replica takes its place, and still every submission is
evaluated exactly once (one result, one Elo move) and nothing is left in the
stream, the delayed set or the pending list; the normal traffic completes
without waiting for the hot backlog.

reject: the excess is rejected with reject_reason rate_limited, nothing else
is rejected, and the normal traffic completes.
"""
import sys
import time

from services import Services
from tap import slow
from workerkit import (SPEC_X, Arena, Worker, diag, done, eq, exactly_once, migrate, ok,
                       wait_for)

RATE, BURST, T = "5/2s", 5, 0.4
HOT = 30                      # submissions per hot key (defer)
HOT_REJECT = 20               # per hot key (reject)
NORMAL = 40

V4_SPELLINGS = ["203.0.113.50", "::ffff:203.0.113.50", "::FFFF:CB00:7132",
                "203.000.113.050", "[203.0.113.50]", "0:0:0:0:0:ffff:203.0.113.50"]
V6_SPELLINGS = ["2001:db8:aa:bb::1", "[2001:DB8:AA:BB::2]", "2001:0db8:00aa:00bb:0:0:0:3",
                "2001:db8:aa:bb:ffff::9%eth0", "2001:db8:aa:bb:1:2:3:4/128",
                "2001:DB8:AA:BB:0:0:0:0"]


def env(policy, prefix):
    return {"ARBITER_RATE_LIMIT": RATE, "ARBITER_RATE_BURST": str(BURST),
            "ARBITER_RATE_POLICY": policy, "ARBITER_PREFIX": prefix,
            "ARBITER_CLAIM_IDLE_MS": "2000", "ARBITER_RECONCILE_MS": "5000",
            "ARBITER_CONCURRENCY": "32"}


def make_subs(a, ch, agents, n, row_ip, job_ips, key):
    """n submissions (one match each); returns [(sub, job_source_ip, key)]."""
    out = []
    for i in range(n):
        ag = agents[i % len(agents)]
        m = a.match(ag, ch)
        sid = a.submission(m, ag, {"x": 1}, source_ip=row_ip)
        out.append((sid, job_ips[i % len(job_ips)], key))
    return out


def enqueue(a, items):
    pipe = a.r.pipeline(transaction=False)
    now = str(int(time.time() * 1000))
    for sid, ip, _ in items:
        f = {"submission_id": sid, "enqueued_at": now}
        if ip is not None:
            f["source_ip"] = ip
        pipe.xadd(a.stream, f)
    pipe.execute()


def window_violations(times, burst=BURST, t=T, eps=0.1):
    """Pairs (i, j) of sorted times whose window [t_i, t_j] holds more than
    burst + (t_j - t_i)/T evaluations (eps absorbs the decision→started_at
    delay). Returns (worst excess, the window)."""
    times = sorted(times)
    worst, where = 0.0, None
    for i in range(len(times)):
        for j in range(i, len(times)):
            w = times[j] - times[i]
            count = j - i + 1
            allowed = burst + (w + eps) / t
            if count - allowed > worst:
                worst, where = count - allowed, (i, j, count, w)
    return worst, where


def started_times(a, subs):
    rows = a.q("SELECT extract(epoch FROM started_at)::float8, extract(epoch FROM completed_at)::float8 "
               "FROM evaluation_results WHERE submission_id = ANY(%s::uuid[])", list(subs))
    return [r[0] for r in rows], [r[1] for r in rows]


def phase_defer(s, a, ch, agents):
    hot4 = make_subs(a, ch, agents, HOT, "203.0.113.50", V4_SPELLINGS, "v4")
    hot6 = make_subs(a, ch, agents, HOT, "2001:db8:aa:bb::1", V6_SPELLINGS, "v6")
    normal = []
    for i in range(NORMAL):
        ip = "198.51.100.%d" % (i + 1) if i % 2 else "2001:db8:cc:%x::1" % (i + 1)
        # half of them carry no source_ip field: the row's source_ip is used
        normal += make_subs(a, ch, agents, 1, ip, [ip if i % 4 < 2 else None], "n")
    workers = [Worker(s, "rl-a", env=env("defer", "arbiter")),
               Worker(s, "rl-b", env=env("defer", "arbiter"))]
    ok(wait_for(lambda: a.r.exists(a.stream) and a.r.xinfo_groups(a.stream), 15),
       "two replicas up (group created)", "\n".join(w.tail() for w in workers))

    # Interleave: hot first in the stream, normal traffic between and after.
    items, k = [], 0
    for i in range(HOT):
        items += [hot4[i], hot6[i]]
        if i % 2 == 0:
            items.append(normal[k])
            k += 1
    items += normal[k:]
    t0 = time.time()
    enqueue(a, items)

    normal_ids = [x[0] for x in normal]
    ok(a.wait_final(normal_ids, 10), "normal traffic completes while the hot keys wait",
       "\n".join(w.tail() for w in workers))
    t_normal = time.time() - t0
    diag("normal traffic final after %.2fs" % t_normal)
    ok(t_normal < slow(5), "normal traffic did not wait for the hot backlog (%.2fs)" % t_normal)

    # Most hot jobs are now deferred. Kill one replica while they wait.
    time.sleep(1.0)
    delayed = a.r.zcard(a.delayed)
    diag("delayed set holds %d jobs at the kill" % delayed)
    ok(delayed >= 2 * HOT - 2 * (BURST + 8), "hot jobs are waiting in the delayed set (%d)" % delayed)
    workers[0].kill()
    workers.append(Worker(s, "rl-c", env=env("defer", "arbiter")))

    hot_ids = [x[0] for x in hot4 + hot6]
    # The last deferred job of a key is due ~(HOT - BURST) * T = 10 s after t0.
    ok(a.wait_final(hot_ids, 40), "every hot submission evaluated in the end",
       "\n".join(w.tail(20) for w in workers[1:]))
    diag("hot traffic final after %.2fs" % (time.time() - t0))

    all_ids = hot_ids + normal_ids
    problems = exactly_once(a, all_ids, agents)
    ok(not problems, "exactly once: one result and one Elo move per submission, ratings replay",
       "\n".join(problems))
    eq(a.val("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) AND status <> 'completed'",
             all_ids), 0, "nothing rejected or failed under defer")
    ok(wait_for(lambda: a.r.zcard(a.delayed) == 0 and a.r.xlen(a.stream) == 0
                and a.pending() == 0, 15),
       "delayed set, stream and pending list empty",
       "delayed %d xlen %d pending %d" % (a.r.zcard(a.delayed), a.r.xlen(a.stream),
                                          a.pending()))
    eq(a.r.xlen(a.dead), 0, "nothing dead-lettered")

    for name, group in (("IPv4", hot4), ("IPv6 /64", hot6)):
        st, ct = started_times(a, [x[0] for x in group])
        worst, where = window_violations(st)
        strict, _ = window_violations(st, eps=0.0)
        span = max(st) - min(st)
        diag("%s: %d evaluations over %.2fs; worst window excess %.2f %r (%.2f with no slack)"
             % (name, len(st), span, worst, where, strict))
        ok(worst <= 0, "%s hot key: every window holds at most burst + W/T evaluations" % name)
        ok(span >= (HOT - BURST) * T - 0.5, "%s: the excess was spread at the rate (%.2fs)"
           % (name, span))
        first = sorted(st)[:BURST + 1]
        ok(first[BURST - 1] - first[0] < 1.0 and first[BURST] - first[0] >= T - 0.05,
           "%s: burst of %d at once, then one per T" % (name, BURST))
    deferred = a.val("SELECT count(*) FROM evaluation_results r WHERE submission_id = ANY(%s::uuid[]) "
                     "AND started_at > (SELECT min(started_at) + interval '1 second' FROM "
                     "evaluation_results WHERE submission_id = ANY(%s::uuid[]))", hot_ids, hot_ids)
    ok(deferred >= 2 * (HOT - BURST) - 6, "most hot jobs went through the delayed set (%d)" % deferred)
    diag("evaluations per replica: %r" % dict(a.q(
        "SELECT worker_id, count(*) FROM evaluation_results WHERE submission_id = ANY(%s::uuid[]) "
        "GROUP BY 1 ORDER BY 1", all_ids)))
    for w in workers[1:]:
        eq(w.term(30), 0, "%s exits 0" % w.name, w.tail())
    return all_ids


def phase_reject(s, agents, ch):
    a = Arena(s, prefix="rj")
    hot4 = make_subs(a, ch, agents, HOT_REJECT, "203.0.113.60", V4_SPELLINGS, "v4")
    v6 = [ip.replace("aa:bb", "aa:cc").replace("AA:BB", "AA:CC").replace("00aa:00bb", "00aa:00cc")
          for ip in V6_SPELLINGS]
    hot6 = make_subs(a, ch, agents, HOT_REJECT, "2001:db8:aa:cc::1", v6, "v6")
    normal = []
    for i in range(NORMAL):
        ip = "198.51.101.%d" % (i + 1) if i % 2 else "2001:db8:dd:%x::1" % (i + 1)
        normal += make_subs(a, ch, agents, 1, ip, [ip], "n")
    workers = [Worker(s, "rj-a", env=env("reject", "rj")),
               Worker(s, "rj-b", env=env("reject", "rj"))]
    ok(wait_for(lambda: a.r.exists(a.stream) and a.r.xinfo_groups(a.stream), 15),
       "reject: two replicas up")
    items = []
    for i in range(HOT_REJECT):
        items += [hot4[i], hot6[i], normal[i]]
    items += normal[HOT_REJECT:]
    t0 = time.time()
    enqueue(a, items)
    all_ids = [x[0] for x in items]
    ok(a.wait_final(all_ids, 30), "reject: everything final", "\n".join(w.tail() for w in workers))
    span = time.time() - t0
    for name, group in (("IPv4", hot4), ("IPv6 /64", hot6)):
        ids = [x[0] for x in group]
        done_n = a.val("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) "
                       "AND status = 'completed'", ids)
        rej = a.q("SELECT status, reject_reason, count(*) FROM submissions WHERE id = ANY(%s::uuid[]) "
                  "AND status <> 'completed' GROUP BY 1, 2", ids)
        diag("reject %s: %d completed, %r" % (name, done_n, rej))
        ok(BURST <= done_n <= BURST + int(span / T) + 1,
           "%s: the burst completed (%d), at most burst + span/T" % (name, done_n))
        eq(rej, [("rejected", "rate_limited", HOT_REJECT - done_n)],
           "%s: the excess rejected with rate_limited" % name)
        st, _ = started_times(a, ids)
        worst, where = window_violations(st)
        ok(worst <= 0, "%s: window bound holds under reject" % name, repr(where))
    nids = [x[0] for x in normal]
    eq(a.val("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) AND status = 'completed'",
             nids), len(nids), "reject: normal traffic all completed, nothing else rejected")
    eq(a.val("SELECT count(*) FROM evaluation_results r JOIN submissions s ON s.id = r.submission_id "
             "WHERE s.status = 'rejected' AND s.id = ANY(%s::uuid[])", all_ids), 0,
       "rejected submissions have no result")
    for w in workers:
        eq(w.term(30), 0, "%s exits 0" % w.name, w.tail())
    a.close()


def main():
    t_start = time.time()
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="veteran")
        agents = [a.agent() for _ in range(8)]
        phase_defer(s, a, ch, agents)
        phase_reject(s, agents, ch)
        a.close()
    diag("total %.1fs" % (time.time() - t_start))
    return done()


if __name__ == "__main__":
    sys.exit(main())
