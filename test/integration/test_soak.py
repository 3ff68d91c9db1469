#!/usr/bin/python3
"""Soak: mixed traffic and a bad day in production at once (TAP on stdout).

ARBITER_SOAK_SECS long (default 180, the CI size; 1800 for the long run).
Two `arbiter worker` replicas take, all at once:
- steady traffic: new submissions of 24 agents on three challenges, from 24
  source IPs under a real rate limit (some jobs are deferred and promoted);
  some entries XADDed twice; re-evaluations (elo=keep and elo=adjust) of
  completed submissions;
- hostile rows: a submission of another agent's match (not_match_owner), an
  expired match, a challenge whose spec is invalid, a 300 KB answer, an agent
  whose stored rating/counts are at the int limits;
- hostile entries: no submission_id, a bad UUID, an unknown kind, 100 fields,
  an enqueued_at in 1970, a garbage member and a +inf member in the delayed set;
- random row locks on agents (an API transaction holding FOR UPDATE 1-5 s);
- one read-only period of the database (default_transaction_read_only);
- Redis restarts without persistence (the stream, group and delayed set lost);
- worker SIGKILLs (and restarts).
Then traffic stops and every invariant must hold:
- every submission is in exactly one final state: completed with exactly one
  eval_seq-1 result (and a matching elo_history row), or rejected/failed with no
  result; each hostile row ends as designed; no ordinary submission failed;
- every agent's Elo, counts and streaks equal a sequential replay of its
  elo_history in id order (evaluations and elo=adjust rows);
- no entry pending in the consumer group;
- each worker's RSS stayed bounded (ARBITER_SOAK_MAX_RSS_MB, default 300).
The figures (throughput, restarts, kills, latency, peak RSS) are printed as
diagnostics.
"""
import json
import os
import random
import signal
import sys
import threading
import time
import uuid

import psycopg2
import redis

from services import Services
from workerkit import (SPEC_X, Arena, Worker, diag, done, elo_expected, eq, migrate, ok,
                       wait_for)

SECS = int(os.environ.get("ARBITER_SOAK_SECS", "180"))
MAX_RSS_MB = int(os.environ.get("ARBITER_SOAK_MAX_RSS_MB", "300"))
INT_MAX = 2147483647
SEED = int(os.environ.get("ARBITER_SOAK_SEED", str(int(time.time()))))

BAD_SPEC = {"evaluator": "deterministic",
            "dimensions": [{"key": "correctness", "weight": 0.5, "primitive": "exact_match",
                            "field": "x", "ground_truth_field": "x"}]}   # weights sum to 0.5


def rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


class Soak:
    def __init__(self, s):
        self.s = s
        self.rng = random.Random(SEED)
        self.a = Arena(s)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.subs = {}          # id -> expected kind: normal | not_match_owner | match_expired | invalid_spec
        self.errors = {"db": 0, "redis": 0}
        self.counts = {"dup": 0, "reeval": 0, "poison": 0, "locks": 0, "restarts": 0, "kills": 0}
        a = self.a
        self.good = [a.challenge(SPEC_X, {"x": 1}, difficulty=d)
                     for d in ("newcomer", "contender", "veteran")]
        self.good.append(a.challenge(SPEC_X, {"x": 1}, rating=INT_MAX))   # extreme opponent
        self.bad = a.challenge(BAD_SPEC, {"x": 1})
        self.agents = [a.agent() for _ in range(24)]
        self.hostile_agents = [a.agent(elo=-2147483648), a.agent(elo=INT_MAX, match_count=INT_MAX)]
        a.q("UPDATE agents SET win_count = %s, current_streak = %s, best_streak = %s WHERE id = %s",
            INT_MAX, INT_MAX, INT_MAX, self.hostile_agents[1])
        self.initial = {ag: tuple(a.q1("SELECT elo, match_count, win_count, draw_count, loss_count, "
                                      "current_streak, best_streak FROM agents WHERE id = %s", ag))
                        for ag in self.agents + self.hostile_agents}
        self.workers = []
        self.rss = {}

    # -- the API server ------------------------------------------------------------------
    def new_conn(self):
        c = psycopg2.connect(self.s.database_url, connect_timeout=5)
        c.autocommit = True
        return c

    def new_redis(self):
        return redis.Redis.from_url(self.s.redis_url, decode_responses=True, socket_timeout=5,
                                    socket_connect_timeout=2)

    def insert(self, cur, kind):
        rng = self.rng
        agent = rng.choice(self.agents + self.hostile_agents * (1 if rng.random() < 0.05 else 0))
        ch = self.bad if kind == "invalid_spec" else rng.choice(self.good)
        owner = agent
        if kind == "not_match_owner":
            owner = rng.choice([x for x in self.agents if x != agent])
        expires = "now() - interval '1 second'" if kind == "match_expired" else "now() + interval '1 hour'"
        cur.execute("INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at, "
                    "memoryless, attempt_number) VALUES (%%s, %%s, 'active', now() - interval '2 minutes', "
                    "%s, %%s, %%s) RETURNING id" % expires,
                    (owner, ch, rng.random() < 0.3, rng.choice([1, 1, 2])))
        match = cur.fetchone()[0]
        answer = {"x": 1 if rng.random() < 0.55 else rng.choice([0, 2, "1", None])}
        if kind == "big":
            answer["pad"] = "z" * 300000
        meta = {}
        if rng.random() < 0.2:
            meta = {"replay_log": [{"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}
        cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, metadata, status) "
                    "VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, 'queued') RETURNING id",
                    (match, agent, "198.51.100.%d" % rng.randrange(24), json.dumps(answer),
                     json.dumps(meta)))
        return str(cur.fetchone()[0])

    def traffic(self):
        db, r = None, None
        stream = self.a.stream
        while not self.stop.is_set():
            try:
                if db is None:
                    db = self.new_conn()
                if r is None:
                    r = self.new_redis()
                with db.cursor() as cur:
                    new = []
                    for _ in range(self.rng.randint(1, 6)):
                        x = self.rng.random()
                        kind = ("not_match_owner" if x < 0.02 else "match_expired" if x < 0.04 else
                                "invalid_spec" if x < 0.05 else "big" if x < 0.055 else "normal")
                        sid = self.insert(cur, kind)
                        new.append(sid)
                        with self.lock:
                            self.subs[sid] = "normal" if kind == "big" else kind
                pipe = r.pipeline(transaction=False)
                now = str(int(time.time() * 1000))
                for sid in new:
                    f = {"submission_id": sid, "enqueued_at": now}
                    if self.rng.random() < 0.01:
                        f["enqueued_at"] = "1000"
                    pipe.xadd(stream, f)
                    if self.rng.random() < 0.05:
                        pipe.xadd(stream, f)
                        self.counts["dup"] += 1
                if self.rng.random() < 0.1:
                    self.hostile_entries(pipe)
                if self.rng.random() < 0.15:
                    with db.cursor() as cur:
                        cur.execute("SELECT id FROM submissions WHERE status = 'completed' "
                                    "ORDER BY random() LIMIT 1")
                        row = cur.fetchone()
                    if row:
                        pipe.xadd(stream, {"submission_id": str(row[0]), "kind": "reevaluate",
                                           "elo": self.rng.choice(["keep", "adjust"])})
                        self.counts["reeval"] += 1
                pipe.execute()
            except psycopg2.Error:
                self.errors["db"] += 1
                try:
                    db.close()
                except Exception:  # noqa: BLE001
                    pass
                db = None
                time.sleep(0.3)
            except (redis.RedisError, OSError):
                self.errors["redis"] += 1
                r = None
                time.sleep(0.3)
            time.sleep(self.rng.uniform(0.02, 0.08))
        if db:
            db.close()

    def hostile_entries(self, pipe):
        rng = self.rng
        stream = self.a.stream
        k = rng.randrange(7)
        self.counts["poison"] += 1
        if k == 0:
            pipe.xadd(stream, {"kind": "evaluate"})
        elif k == 1:
            pipe.xadd(stream, {"submission_id": "not-a-uuid"})
        elif k == 2:
            pipe.xadd(stream, {"submission_id": str(uuid.uuid4()), "kind": "delete"})
        elif k == 3:
            f = {"submission_id": str(uuid.uuid4())}
            f.update({"f%d" % i: "v" for i in range(100)})
            pipe.xadd(stream, f)
        elif k == 4:
            pipe.zadd("arbiter:delayed", {"garbage %d" % rng.randrange(10 ** 9): 1})
        elif k == 5:
            pipe.zadd("arbiter:delayed", {json.dumps({"submission_id": str(uuid.uuid4()),
                                                      "_token": str(rng.random())}): float("inf")})
        else:
            pipe.xadd(stream, {"submission_id": str(uuid.uuid4())})   # submission_not_found

    # -- chaos ----------------------------------------------------------------------------
    def lock_holder(self):
        while not self.stop.is_set():
            time.sleep(self.rng.uniform(3, 8))
            if self.stop.is_set():
                break
            try:
                c = psycopg2.connect(self.s.database_url, connect_timeout=5)
                with c.cursor() as cur:
                    cur.execute("SELECT 1 FROM agents WHERE id = %s FOR UPDATE",
                                (self.rng.choice(self.agents),))
                    self.counts["locks"] += 1
                    time.sleep(self.rng.uniform(1, 5))
                c.rollback()
                c.close()
            except psycopg2.Error:
                pass

    def start_worker(self, name):
        w = Worker(self.s, name, env={
            "ARBITER_RECONCILE_MS": "2000", "ARBITER_CLAIM_IDLE_MS": "3000",
            "ARBITER_MAX_DELIVERIES": "5", "ARBITER_RATE_LIMIT": "40/5s", "ARBITER_RATE_BURST": "20",
            "ARBITER_LOG_LEVEL": "warn", "ARBITER_DRAIN_MS": "5000"})
        self.workers.append(w)
        return w

    def sample_rss(self):
        for w in self.workers:
            if w.alive():
                v = rss_mb(w.proc.pid)
                self.rss[w.proc.pid] = max(self.rss.get(w.proc.pid, 0), v)

    def run(self):
        s = self.s
        live = [self.start_worker("soak-1"), self.start_worker("soak-2")]
        threads = [threading.Thread(target=self.traffic, daemon=True),
                   threading.Thread(target=self.lock_holder, daemon=True)]
        for t in threads:
            t.start()
        t0 = time.time()
        readonly_at = t0 + SECS * 0.3
        readonly_done = False
        next_chaos = t0 + self.rng.uniform(15, 25)
        while time.time() - t0 < SECS:
            time.sleep(1)
            self.sample_rss()
            now = time.time()
            if not readonly_done and now >= readonly_at:
                readonly_done = True
                s.psql(s.dbname, "ALTER SYSTEM SET default_transaction_read_only = on")
                s.psql(s.dbname, "SELECT pg_reload_conf()")
                time.sleep(min(10, SECS * 0.06))
                s.psql(s.dbname, "ALTER SYSTEM RESET default_transaction_read_only")
                s.psql(s.dbname, "SELECT pg_reload_conf()")
                diag("t=%.0fs: read-only period over" % (time.time() - t0))
            if now >= next_chaos:
                next_chaos = now + self.rng.uniform(15, 30)
                if self.rng.random() < 0.5:
                    s.restart_redis(down_secs=self.rng.uniform(0.2, 1.5))
                    self.counts["restarts"] += 1
                    diag("t=%.0fs: Redis restarted (no persistence)" % (now - t0))
                else:
                    i = self.rng.randrange(len(live))
                    live[i].kill()
                    self.counts["kills"] += 1
                    live[i] = self.start_worker("soak-%d" % (len(self.workers) + 1))
                    diag("t=%.0fs: worker SIGKILLed and replaced" % (now - t0))
        self.stop.set()
        for t in threads:
            t.join(30)
        return live


def expected_after(before, opp, k, res, vf, ml, att):
    """The Elo rule (common/README.md "Elo") with an opponent so far above that 10^x overflows (C: pow gives inf, E = 0)."""
    if (opp - before) / 400.0 > 300:
        opp = before + 400 * 300
    return min(elo_expected(before, opp, k, res, vf, ml, att), 1000000)


def replay(a, ag, initial):
    """Replays an agent's elo_history in id order; returns (problems, replayed row)."""
    elo, mc, win, draw, loss, cs, bs = initial
    clamp = lambda v: max(0, min(1000000, v))  # noqa: E731  (common/elo.h ranges)
    sat = lambda v: min(INT_MAX, max(0, v) + 1)  # noqa: E731
    hist = a.q("SELECT h.reason, h.elo_before, h.elo_after, h.elo_change, h.opponent_elo, h.k_factor, "
               "r.result, r.verified, m.memoryless, m.attempt_number FROM elo_history h "
               "JOIN evaluation_results r ON r.id = h.result_id JOIN matches m ON m.id = h.match_id "
               "WHERE h.agent_id = %s ORDER BY h.id", ag)
    for (reason, before, after, change, opp, k, res, vf, ml, att) in hist:
        if reason == "reevaluation_adjust":
            if before != clamp(elo) or after != before + change:
                return ["agent %s adjust row %r, current %d" % (ag, (before, after, change), elo)], None
            elo = after
            continue
        want_k = 32 if mc < 30 else 16
        want = expected_after(clamp(elo), max(0, min(1000000, opp)), want_k, res, vf, ml, att)
        if before != clamp(elo) or after != want or k != want_k:
            return ["agent %s: row %r, expected before %d after %d K %d"
                    % (ag, (before, after, k), clamp(elo), want, want_k)], None
        elo = after
        mc = sat(mc)
        if res == "win":
            win, cs = sat(win), sat(cs)
        elif res == "draw":
            draw, cs = sat(draw), 0
        else:
            loss, cs = sat(loss), 0
        bs = max(bs, cs)
    return [], (elo, mc, win, draw, loss, cs, bs)


def main():
    diag("soak: %d s, seed %d" % (SECS, SEED))
    with Services() as s:
        migrate(s)
        soak = Soak(s)
        t0 = time.time()
        live = soak.run()
        a = soak.a
        subs = dict(soak.subs)
        diag("traffic: %d submissions in %.0f s; %s; errors seen by the API side %s"
             % (len(subs), time.time() - t0, soak.counts, soak.errors))
        # Everything reaches a final state: the reconciler re-enqueues what Redis lost.
        ids = list(subs)

        def unfinished():
            return a.val("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) "
                         "AND status NOT IN ('completed', 'rejected', 'failed')", ids)
        t1 = time.time()
        left = wait_for(lambda: unfinished() == 0, 240, 1.0)
        eq(unfinished(), 0, "every submission reached a final state (%.0f s after traffic stopped)"
           % (time.time() - t1), "\n".join(w.tail(15) for w in live))
        soak.sample_rss()
        del left

        rows = a.q("SELECT s.id::text, s.status, s.reject_reason, "
                   "count(r.id) FILTER (WHERE r.eval_seq = 1), count(r.id) "
                   "FROM submissions s LEFT JOIN evaluation_results r ON r.submission_id = s.id "
                   "WHERE s.id = ANY(%s::uuid[]) GROUP BY s.id", ids)
        by_status = {}
        wrong = []
        for sid, st, reason, first, total in rows:
            by_status[st] = by_status.get(st, 0) + 1
            want = subs[sid]
            if st == "completed" and first != 1:
                wrong.append((sid, "completed with %d eval_seq-1 results" % first))
            if st != "completed" and total != 0:
                wrong.append((sid, "%s with %d results" % (st, total)))
            if want != "normal" and not (st == "rejected" and reason == want):
                wrong.append((sid, "hostile %s ended %s/%s" % (want, st, reason)))
            if want == "normal" and st not in ("completed",) and reason != "match_not_active":
                wrong.append((sid, "ordinary submission ended %s/%s" % (st, reason)))
        diag("final states: %s" % by_status)
        ok(not wrong, "exactly one final state each, one result where completed, hostile rows as "
           "designed, no ordinary submission failed (%d problems)" % len(wrong), wrong[:10])
        nh = a.val("SELECT count(*) FROM elo_history h JOIN evaluation_results r ON r.id = h.result_id "
                   "WHERE r.eval_seq = 1 AND r.submission_id = ANY(%s::uuid[])", ids)
        eq(nh, by_status.get("completed", 0), "one evaluation elo_history row per completed submission")
        problems = []
        for ag in soak.agents + soak.hostile_agents:
            p, got = replay(a, ag, soak.initial[ag])
            problems += p
            if got is not None:
                row = tuple(a.q1("SELECT elo, match_count, win_count, draw_count, loss_count, "
                                 "current_streak, best_streak FROM agents WHERE id = %s", ag))
                if row != got:
                    problems.append("agent %s: row %r, replay %r" % (ag, row, got))
        ok(not problems, "every agent's Elo, counts and streaks equal the sequential replay",
           "\n".join(problems[:10]))
        ok(wait_for(lambda: a.pending() == 0, 60, 0.5), "no entry pending in the consumer group",
           a.pending())
        peak = max(soak.rss.values() or [0])
        diag("peak RSS per worker process: %s MB" % sorted(round(v, 1) for v in soak.rss.values()))
        ok(0 < peak < MAX_RSS_MB, "RSS bounded: peak %.1f MB < %d MB" % (peak, MAX_RSS_MB))
        lat = a.q1("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM "
                   "r.completed_at - s.submitted_at)), percentile_cont(0.99) WITHIN GROUP (ORDER BY "
                   "extract(epoch FROM r.completed_at - s.submitted_at)), count(*) "
                   "FROM evaluation_results r JOIN submissions s ON s.id = r.submission_id "
                   "WHERE r.eval_seq = 1 AND s.id = ANY(%s::uuid[])", ids)
        diag("submitted -> result: p50 %.2f s, p99 %.2f s over %d results" % (lat[0] or 0, lat[1] or 0,
                                                                            lat[2]))
        diag("dead letters: %d" % len(a.dead_entries()))
        for w in live:
            eq(w.term(60), 0, "worker %s exits 0 on SIGTERM" % w.name, w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
