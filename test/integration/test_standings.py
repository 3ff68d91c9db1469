#!/usr/bin/python3
"""Standings (sql/002_standings.sql) against an independent Python model (TAP).

Results are inserted into evaluation_results the way the worker commits them
(several rows per INSERT statement, first evaluations and re-evaluations, ids
in statement order; half the statements carry each result's agent, challenge
and submission time, as the worker's commit does, sql/006), with random
agents, challenges, scores (many ties) and
submitted_at values (so "earliest" tie-breaks matter), under small windows so
tasks keep falling out. After each phase every stored aggregate must equal the
model's and `arbiter standings --check` must find no difference:

1. window 5, 700 random operations;
2. `arbiter standings --rebuild --window 3`, then more operations;
3. a rebuild (--batch 1) running while another connection keeps committing;
4. a database at migration 001 with results, then `arbiter migrate`: the
   backfill runs with a progress line and the standings are complete;
5. the commands: leaderboard (window, elo, best; JSON and CSV; errors) and
   weights from the database, compared with the model.
"""
import csv
import hashlib
import io
import json
import os
import random
import subprocess
import threading
from fractions import Fraction

import psycopg2

from services import Services
from standings_model import capped_weights, largest_remainder, standings, tasks_from_results
from workerkit import SPEC_X, Arena, done, eq, ok

BIN = os.environ.get("ARBITER_BIN", "build/worker/arbiter")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli(url, *args, stdin=None):
    env = dict(os.environ, ARBITER_DATABASE_URL=url)
    return subprocess.run([BIN] + list(args), env=env, capture_output=True, text=True, timeout=300,
                          input=stdin)


class Load:
    """Random results for a set of agents and challenges, written like the worker."""

    def __init__(self, db, rng, agents, challenges, with_hints=True):
        self.db, self.rng = db, rng
        self.with_hints = with_hints   # False: a database before sql/006 (no such columns)
        self.agents, self.challenges = agents, challenges
        self.subs = []              # submission ids with at least one result
        self.seq = {}               # submission -> last eval_seq
        self.times = ["2026-01-01 00:00:%02d+00" % s for s in range(5)]
        self.facts = {}             # submission -> (agent, challenge, submitted_at)

    def new_submission(self, cur):
        agent = self.rng.choice(self.agents)
        ch = self.rng.choice(self.challenges)
        cur.execute("INSERT INTO matches (agent_id, challenge_id, status, started_at, expires_at) "
                    "VALUES (%s, %s, 'completed', now(), now() + interval '1 hour') RETURNING id",
                    (agent, ch))
        mid = cur.fetchone()[0]
        at = self.rng.choice(self.times)
        cur.execute("INSERT INTO submissions (match_id, agent_id, source_ip, answer, status, "
                    "submitted_at) VALUES (%s, %s, '192.0.2.1', '{}', 'completed', %s) RETURNING id",
                    (mid, agent, at))
        sub = str(cur.fetchone()[0])
        self.facts[sub] = (agent, ch, at)
        return sub

    def score(self):
        s = self.rng.choice([0, 250, 400, 700, 1000, None])
        return self.rng.randrange(0, 1001) if s is None else s

    def batch(self, size):
        """One transaction, one INSERT of `size` results (new and re-evaluations). Half
        the statements carry each result's agent, challenge and submission time, as the
        worker's commit of first evaluations does (sql/006; the others are looked up)."""
        cur = self.db.cursor()
        rows = []
        hints = self.with_hints and self.rng.random() < 0.5
        for _ in range(size):
            if self.subs and self.rng.random() < 0.3:
                sub = self.rng.choice(self.subs)
            else:
                sub = self.new_submission(cur)
                self.subs.append(sub)
            self.seq[sub] = self.seq.get(sub, 0) + 1
            sc = self.score()
            res = "win" if sc >= 700 else "draw" if sc >= 400 else "loss"
            row = cur.mogrify("(%s, %s, 'deterministic', %s, %s, '{}', '[]', '[]', false, '{}', "
                              "'test', now(), now()", (sub, self.seq[sub], sc, res)).decode()
            if hints:
                row += cur.mogrify(", %s::uuid, %s::uuid, %s::timestamptz", self.facts[sub]).decode()
            rows.append(row + ")")
        cur.execute("INSERT INTO evaluation_results (submission_id, eval_seq, evaluator, score, result, "
                    "score_breakdown, submission_warnings, constraint_violations, verified, "
                    "evaluation_log, worker_id, started_at, completed_at"
                    + (", standings_agent_id, standings_challenge_id, standings_submitted_at"
                       if hints else "") + ") VALUES " + ",".join(rows))
        self.db.commit()

    def run(self, ops):
        while ops > 0:
            k = min(ops, self.rng.choice([1, 1, 2, 3, 8, 20]))
            self.batch(k)
            ops -= k


def history(db):
    cur = db.cursor()
    cur.execute("SELECT r.id, r.submission_id::text, r.eval_seq, r.score, r.result, s.agent_id::text, "
                "m.challenge_id::text, s.submitted_at FROM evaluation_results r "
                "JOIN submissions s ON s.id = r.submission_id JOIN matches m ON m.id = s.match_id")
    rows = cur.fetchall()
    db.commit()
    return tasks_from_results(rows)


def stored(db):
    cur = db.cursor()
    cur.execute("SELECT agent_id::text, tasks, w_count, w_sum, w_wins, w_draws, w_losses, w_best, "
                "w_best_seq FROM standings_agents WHERE tasks > 0")
    agents = {r[0]: tuple(r[1:]) for r in cur.fetchall()}
    cur.execute("SELECT agent_id::text, challenge_id::text, tasks, w_count, w_sum, w_wins, w_draws, "
                "w_losses, w_best, w_best_seq, best_score, best_submission::text "
                "FROM standings_agent_challenges")
    pairs = {(r[0], r[1]): tuple(r[2:]) for r in cur.fetchall()}
    db.commit()
    return agents, pairs


def catch_up(db):
    """The projection's catch-up (sql/008): what a worker's applier does, until nothing is left."""
    cur = db.cursor()
    total = 0
    while True:
        cur.execute("SELECT applied, busy, caught_up FROM standings_apply(50)")
        applied, busy, caught = cur.fetchone()
        db.commit()
        total += applied
        if caught and not busy:
            return total


def compare(db, url, n, what):
    cur = db.cursor()
    cur.execute("SELECT pending FROM standings_status()")
    behind = cur.fetchone()[0]
    db.commit()
    if behind:
        # Results not applied yet: --check says so instead of comparing.
        r = cli(url, "standings", "--check")
        ok(r.returncode == 1 and ("the projection is %d result" % behind) in r.stdout
           and "differences" not in r.stdout,
           "%s: standings --check reports the %d results not applied yet" % (what, behind),
           r.stdout[-2000:] + r.stderr)
    catch_up(db)
    want_a, want_p = standings(history(db), n)
    got_a, got_p = stored(db)
    bad_a = [(k, got_a.get(k), want_a.get(k)) for k in set(want_a) | set(got_a) if got_a.get(k) != want_a.get(k)]
    bad_p = [(k, got_p.get(k), want_p.get(k)) for k in set(want_p) | set(got_p) if got_p.get(k) != want_p.get(k)]
    ok(not bad_a, "%s: %d agent windows equal the model" % (what, len(want_a)), bad_a[:3])
    ok(not bad_p, "%s: %d agent x challenge windows and bests equal the model" % (what, len(want_p)),
       bad_p[:3])
    r = cli(url, "standings", "--check")
    ok(r.returncode == 0 and "0 differences" in r.stdout, "%s: standings --check finds nothing" % what,
       r.stdout[-2000:] + r.stderr)
    return want_a


def apply_001(url):
    """A database as `arbiter migrate` left it before the standings existed."""
    text = open(os.path.join(ROOT, "sql", "001_initial.sql"), "rb").read()
    db = psycopg2.connect(url)
    cur = db.cursor()
    cur.execute("CREATE TABLE arbiter_migrations (version int PRIMARY KEY, name text NOT NULL, "
                "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
    cur.execute(text.decode())
    cur.execute("INSERT INTO arbiter_migrations (version, name, checksum) VALUES (1, 'initial', %s)",
                (hashlib.sha256(text).hexdigest(),))
    db.commit()
    return db


def make_entities(db, nagents, nchallenges, tag):
    a = Arena.__new__(Arena)
    a.db = db
    agents = []
    chs = []
    cur = db.cursor()
    for i in range(nagents):
        cur.execute("INSERT INTO agents (name) VALUES (%s) RETURNING id::text", ("%s-agent-%d" % (tag, i),))
        agents.append(cur.fetchone()[0])
    for i in range(nchallenges):
        cur.execute("INSERT INTO challenges (slug, difficulty, scoring_spec, time_limit_secs) "
                    "VALUES (%s, 'veteran', %s, 600) RETURNING id::text",
                    ("%s-ch-%d" % (tag, i), json.dumps(SPEC_X)))
        chs.append(cur.fetchone()[0])
    db.commit()
    return agents, chs


def main():
    rng = random.Random(1212)
    with Services(redis=False) as s:
        url = s.database_url
        r = cli(url, "migrate")
        ok(r.returncode == 0 and "002_standings" in r.stdout, "migrate applies 002_standings", r.stderr)
        r = cli(url, "standings", "--rebuild", "--window", "5")
        ok(r.returncode == 0, "window set to 5", r.stdout + r.stderr)
        db = psycopg2.connect(url)
        agents, chs = make_entities(db, 6, 3, "p1")
        load = Load(db, rng, agents, chs)

        # 1. window 5
        load.run(700)
        want = compare(db, url, 5, "window 5 after 700 operations")
        r = cli(url, "standings", "--json")
        summ = json.loads(r.stdout) if r.returncode == 0 else {}
        eq((summ.get("window_size"), summ.get("agents_pending")), (5, 0), "summary: window 5, nothing pending")

        # 2. rebuild with window 3, then more
        r = cli(url, "standings", "--rebuild", "--window", "3", "--batch", "2")
        ok(r.returncode == 0 and "standings backfill: 6/6 agents (100%)" in r.stdout,
           "rebuild --window 3 with a progress line", r.stdout + r.stderr)
        compare(db, url, 3, "window 3 rebuilt")
        load.run(300)
        compare(db, url, 3, "window 3 after 300 more operations")

        # 3. a rebuild while commits go on
        stop = threading.Event()
        errors = []

        def writer():
            try:
                wdb = psycopg2.connect(url)
                wl = Load(wdb, random.Random(77), agents, chs)
                wl.subs, wl.seq, wl.facts = list(load.subs), dict(load.seq), dict(load.facts)
                while not stop.is_set():
                    wl.batch(rng.choice([1, 3]))
                wdb.close()
            except Exception as e:   # noqa: BLE001  (reported below)
                errors.append(repr(e))

        t = threading.Thread(target=writer)
        t.start()
        r = cli(url, "standings", "--rebuild", "--batch", "1")
        r2 = cli(url, "standings", "--backfill")
        stop.set()
        t.join()
        ok(r.returncode == 0 and r2.returncode == 0 and not errors,
           "rebuild while another connection commits", r.stdout + r.stderr + r2.stderr + repr(errors))
        compare(db, url, 3, "after a rebuild concurrent with commits")

        # 5. commands (window 3 data)
        want_a, _ = standings(history(db), 3)
        names = dict((a, "p1-agent-%d" % i) for i, a in enumerate(agents))
        order = sorted(want_a, key=lambda a: (-want_a[a][2], a))
        r = cli(url, "leaderboard", "--json", "--limit", "4")
        got = json.loads(r.stdout)["rows"] if r.returncode == 0 else []
        eq([(g["agent_id"], g["window_sum"], g["name"]) for g in got],
           [(a, want_a[a][2], names[a]) for a in order[:4]], "leaderboard --by window: top 4 as the model")
        ranks = [1 + sum(1 for b in want_a if want_a[b][2] > want_a[a][2]) for a in order[:4]]
        eq([g["rank"] for g in got], ranks, "leaderboard: equal window sums share a rank")
        eq([g["window_score"] for g in got], ["%.6f" % (want_a[a][2] / 3) for a in order[:4]],
           "window_score = window_sum / N, 6 decimals")
        r = cli(url, "leaderboard", "--csv", "--by", "elo")
        rows = list(csv.reader(io.StringIO(r.stdout)))
        ok(r.returncode == 0 and rows[0][:4] == ["rank", "agent_id", "name", "elo"] and len(rows) == 7,
           "leaderboard --by elo --csv: header and every agent", r.stdout + r.stderr)
        cur = db.cursor()
        cur.execute("SELECT id::text FROM challenges WHERE slug = 'p1-ch-1'")
        ch1 = cur.fetchone()[0]
        db.commit()
        tasks = history(db)
        best = {}
        for tk in tasks.values():
            if tk.challenge == ch1:
                k = (-tk.score, tk.submitted_at, tk.first_id)
                if tk.agent not in best or k < best[tk.agent]:
                    best[tk.agent] = k
        want_best = sorted(best, key=lambda a: best[a])
        r = cli(url, "leaderboard", "--challenge", "p1-ch-1", "--json")
        got = json.loads(r.stdout)["rows"] if r.returncode == 0 else []
        eq([(g["agent_id"], g["best_score"]) for g in got], [(a, -best[a][0]) for a in want_best],
           "leaderboard --challenge: best scores, earliest first among equals", r.stderr)
        r = cli(url, "leaderboard", "--challenge", "p1-ch-1", "--by", "window")
        ok(r.returncode == 0 and len(r.stdout.splitlines()) == 1 + len(best),
           "leaderboard --challenge --by window: a table", r.stdout + r.stderr)
        for args, code, why in [(["--challenge", "nope"], 1, "unknown challenge"),
                                (["--by", "best"], 2, "--by best without --challenge"),
                                (["--by", "x"], 2, "bad --by"), (["--limit", "0"], 2, "--limit 0"),
                                (["--json", "--csv"], 2, "--json with --csv")]:
            r = cli(url, "leaderboard", *args)
            ok(r.returncode == code and r.stderr.strip(), "leaderboard %s: exit %d" % (why, code), r.stderr)

        r = cli(url, "weights", "--json")
        got = json.loads(r.stdout) if r.returncode == 0 else {"weights": []}
        scores = [want_a[a][2] for a in order]
        ww, _ = capped_weights(scores, Fraction(15, 100))
        eq([(w["agent_id"], Fraction(w["exact"]), w["units"]) for w in got["weights"]],
           list(zip(order, ww, largest_remainder(ww, 10 ** 9))),
           "weights from the database: the model's exact weights and units", r.stderr)
        r = cli(url, "weights", "--cap", "0.4")
        ok(r.returncode == 0 and sum(int(x.split()[1].replace(".", "")) for x in r.stdout.splitlines()
                                     if not x.startswith("#")) == 10 ** 9,
           "weights text output sums to exactly 1", r.stdout + r.stderr)
        db.close()

        # 4. migrating a 001 database that already has results
        s.psql("postgres", "CREATE DATABASE old")
        old_url = url.rsplit("/", 1)[0] + "/old"
        odb = apply_001(old_url)
        oagents, ochs = make_entities(odb, 30, 2, "old")
        Load(odb, random.Random(5), oagents, ochs, with_hints=False).run(900)
        r = cli(old_url, "migrate")
        ok(r.returncode == 0 and "applied 002_standings" in r.stdout
           and "standings backfill: 30/30 agents (100%)" in r.stdout,
           "migrating a database with results backfills with a progress line", r.stdout + r.stderr)
        compare(odb, old_url, 100, "after migrating from 001 (window 100)")
        Load(odb, random.Random(6), oagents, ochs).run(200)
        compare(odb, old_url, 100, "backfilled database keeps up with new results")
        # The check really detects a difference.
        cur = odb.cursor()
        cur.execute("UPDATE standings_agents SET w_sum = w_sum + 1 WHERE agent_id = %s", (oagents[0],))
        odb.commit()
        r = cli(old_url, "standings", "--check")
        ok(r.returncode == 1 and "difference in agent: agent " + oagents[0] in r.stdout and "1 difference" in r.stdout,
           "a tampered aggregate is reported", r.stdout + r.stderr)
        cur.execute("UPDATE standings_agents SET ready = false WHERE agent_id = %s", (oagents[1],))
        odb.commit()
        r = cli(old_url, "leaderboard")
        ok(r.returncode == 1 and "backfill" in r.stderr, "leaderboard refuses while the backfill is pending",
           r.stderr)
        r = cli(old_url, "standings", "--backfill")
        ok(r.returncode == 0 and "1/1 agents" in r.stdout, "standings --backfill resumes", r.stdout + r.stderr)
        odb.close()
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
