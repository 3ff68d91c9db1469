#!/usr/bin/python3
"""arbiter demo: the whole pipeline on example data (run through scripts/demo).

Starts redis-server and postgres under .run/ (test/services.py), runs
`arbiter migrate`, seeds agents, challenges (one per evaluator and primitive
family), active matches and submissions exactly as an API server would (only
the contract's columns), XADDs the jobs, runs one `arbiter worker`, waits for
every submission to reach a final state and prints the outcome.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test"))
from services import Services  # noqa: E402

import psycopg2  # noqa: E402
import redis  # noqa: E402

SEED_SPEC = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "correctness", "weight": 0.5, "primitive": "exact_match_ratio",
         "field": "answers", "ground_truth_field": "expected_answers"},
        {"key": "speed", "weight": 0.2, "primitive": "time_decay"},
        {"key": "methodology", "weight": 0.15, "primitive": "fuzzy_string",
         "field": "report", "ground_truth_field": "reference_report"},
        {"key": "completeness", "weight": 0.15, "primitive": "set_overlap",
         "field": "found", "ground_truth_field": "expected", "method": "intersection"},
    ],
    "thresholds": {"win": 700, "draw": 400},
    "constraints": {"token_budget": 200000, "max_llm_calls": 40, "max_tool_calls": 300},
}

WORKFLOW_SPEC = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "success", "weight": 0.5, "primitive": "expression",
         "expr": "quality * steps_completed / total_steps",
         "vars": {"quality": "output_quality", "steps_completed": "steps_completed",
                  "total_steps": "ground_truth.total_steps"}},
        {"key": "cost", "weight": 0.25, "primitive": "expression",
         "expr": "max(0, 1 - actual / budget)",
         "vars": {"actual": "actual_tao", "budget": "ground_truth.max_budget_tao"},
         "gate": {"dimension": "success", "above": 700}},
        {"key": "latency", "weight": 0.15, "primitive": "expression",
         "expr": "max(0, 1 - secs / max_secs)",
         "vars": {"secs": "actual_seconds", "max_secs": "ground_truth.max_latency_seconds"},
         "gate": {"dimension": "success", "above": 700}},
        {"key": "reliability", "weight": 0.1, "primitive": "expression",
         "expr": "1 - 0.1*max(0, retries - declared_retries) - 0.2*timeouts - 0.5*hard_failures",
         "vars": {"retries": "retries", "declared_retries": "declared_retries",
                  "timeouts": "timeouts", "hard_failures": "hard_failures"}},
    ],
}

NUMERIC_SPEC = {
    "evaluator": "deterministic",
    "dimensions": [
        {"key": "correctness", "weight": 0.7, "primitive": "numeric_tolerance",
         "field": "estimates", "ground_truth_field": "values", "tolerance": 0.01,
         "decay": "linear"},
        {"key": "completeness", "weight": 0.3, "primitive": "coverage_ratio",
         "field": "checked", "ground_truth_field": "all_ids"},
    ],
}

TEST_SUITE_SPEC = {
    "evaluator": "test-suite",
    "dimensions": [
        {"key": "correctness", "weight": 0.8},
        {"key": "speed", "weight": 0.2, "primitive": "time_decay"},
    ],
    "test_suite": {
        "language": "python3", "dimension": "correctness", "compare": "trim",
        "limits": {"cpu_ms": 2000, "wall_ms": 5000, "memory_mb": 128, "processes": 8,
                   "output_kb": 64},
        "cases": [
            {"name": "small", "stdin": "2 3\n", "expected_stdout": "5\n", "weight": 1},
            {"name": "negative", "stdin": "-4 1\n", "expected_stdout": "-3\n", "weight": 1},
            {"name": "large", "stdin": "1000000000 1000000000\n",
             "expected_stdout": "2000000000\n", "weight": 2},
        ],
    },
}

SCRIPT_SPEC = {
    "evaluator": "custom-script",
    "dimensions": [
        {"key": "analysis", "weight": 0.6},
        {"key": "precision", "weight": 0.4},
    ],
    "script": {
        "language": "python3", "timeout_ms": 5000,
        "source": "import json,sys\n"
                  "doc=json.load(sys.stdin)\n"
                  "ans=doc['submission']['answer']\n"
                  "gt=doc['ground_truth']\n"
                  "hits=len(set(ans.get('claims',[]))&set(gt.get('true_claims',[])))\n"
                  "n=max(1,len(ans.get('claims',[])))\n"
                  "print(json.dumps({'scores':{'analysis':min(1000,300*hits),"
                  "'precision':round(1000*hits/n)}}))\n",
    },
}


def challenges():
    """(slug, difficulty, rating, spec, ground_truth, time_limit_secs)."""
    return [
        ("cipher-forge", "veteran", None, SEED_SPEC,
         {"expected_answers": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"],
          "reference_report": "Decoded the Vigenere layer, then the transposition.",
          "expected": ["k1", "k2", "k3", "k4"]}, 300),
        ("workflow-composite", "contender", None, WORKFLOW_SPEC,
         {"total_steps": 4, "max_budget_tao": 2.0, "max_latency_seconds": 60}, 600),
        ("numeric-estimates", "newcomer", None, NUMERIC_SPEC,
         {"values": [1.00, 2.50, 3.14159], "all_ids": [1, 2, 3, 4, 5]}, 120),
        ("sum-two", "contender", 1100, TEST_SUITE_SPEC, {}, 300),
        ("claims-review", "legendary", None, SCRIPT_SPEC,
         {"true_claims": ["c1", "c3", "c4"]}, 300),
    ]


def submissions():
    """(agent, challenge slug, answer, metadata, seconds used, flags)."""
    replay = lambda n: [{"ts": None, "step": i} for i in range(n)]  # noqa: E731
    return [
        ("clawd", "cipher-forge",
         {"answers": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "x"],
          "report": "Decoded the Vigenère layer, then the transposition!",
          "found": ["k1", "k2", "k3"]},
         {"token_count": 120000, "llm_call_count": 12, "replay_log": replay(3)}, 66, {}),
        ("nova", "workflow-composite",
         {"output_quality": 0.95, "steps_completed": 4, "actual_tao": 0.5,
          "actual_seconds": 12, "retries": 3, "declared_retries": 2, "timeouts": 0,
          "hard_failures": 0}, {}, 30, {}),
        ("nova", "numeric-estimates",
         {"estimates": [1.01, 2.52, 3.14], "checked": [1, 2, 3]}, {}, 20, {}),
        ("clawd", "sum-two",
         {"files": {"main.py": "a, b = map(int, input().split())\nprint(a + b)\n"}}, {}, 45, {}),
        ("nova", "claims-review", {"claims": ["c1", "c2", "c3"]}, {}, 50, {}),
        ("nova", "cipher-forge", {"answers": []}, {}, 10, {"expired": True}),
        ("clawd", "numeric-estimates", {"estimates": [1]}, {}, 10, {"wrong_owner": True}),
    ]


def seed(db, r, prefix):
    cur = db.cursor()
    agents = {}
    for name in ("clawd", "nova"):
        cur.execute("INSERT INTO agents (id, name) VALUES (%s, %s)", (str(uuid.uuid4()), name))
        cur.execute("SELECT id FROM agents WHERE name = %s ORDER BY created_at DESC LIMIT 1",
                    (name,))
        agents[name] = cur.fetchone()[0]
    chal = {}
    for slug, diff, rating, spec, gt, limit in challenges():
        cid = str(uuid.uuid4())
        cur.execute("INSERT INTO challenges (id, slug, difficulty, rating, scoring_spec, "
                    "ground_truth, time_limit_secs) VALUES (%s,%s,%s,%s,%s,%s,%s)",
                    (cid, slug + "-" + cid[:8], diff, rating, json.dumps(spec), json.dumps(gt),
                     limit))
        chal[slug] = (cid, limit)
    jobs = []
    now = time.time()
    for agent, slug, answer, meta, used, flags in submissions():
        cid, limit = chal[slug]
        mid, sid = str(uuid.uuid4()), str(uuid.uuid4())
        started = now - used - 1
        expires = started + (1 if flags.get("expired") else limit)
        if "replay_log" in meta:
            ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started + used / 2))
            meta = dict(meta, replay_log=[dict(e, ts=ts) for e in meta["replay_log"]])
        owner = agents[agent]
        submitter = agents["clawd" if agent == "nova" else "nova"] if flags.get("wrong_owner") \
            else owner
        cur.execute("INSERT INTO matches (id, agent_id, challenge_id, status, started_at, "
                    "expires_at, memoryless) VALUES (%s,%s,%s,'active',to_timestamp(%s),"
                    "to_timestamp(%s), true)", (mid, owner, cid, started, expires))
        cur.execute("INSERT INTO submissions (id, match_id, agent_id, source_ip, answer, metadata, "
                    "submitted_at, status) VALUES (%s,%s,%s,%s,%s,%s,to_timestamp(%s),'queued')",
                    (sid, mid, submitter, "203.0.113.7", json.dumps(answer), json.dumps(meta),
                     started + used))
        db.commit()
        r.xadd("%s:jobs" % prefix, {"submission_id": sid, "kind": "evaluate",
                                   "source_ip": "203.0.113.7",
                                   "enqueued_at": str(int(time.time() * 1000))})
        jobs.append((sid, agent, slug))
    return jobs


def show(db, jobs):
    cur = db.cursor()
    for sid, agent, slug in jobs:
        cur.execute("SELECT status, reject_reason, last_error FROM submissions WHERE id = %s",
                    (sid,))
        status, reason, err = cur.fetchone()
        print("\n== %s by %s: %s" % (slug, agent, status), end="")
        if status == "rejected":
            print(" (%s)" % reason)
            continue
        if status == "failed":
            print(" (%s)" % err)
            continue
        print()
        cur.execute("SELECT r.score, r.result, r.verified, r.evaluator, m.elo_before, "
                    "m.elo_after, m.elo_change FROM evaluation_results r JOIN submissions s "
                    "ON s.id = r.submission_id JOIN matches m ON m.id = s.match_id "
                    "WHERE r.submission_id = %s AND r.eval_seq = 1", (sid,))
        row = cur.fetchone()
        if not row:
            continue
        score, result, verified, evaluator, before, after, change = row
        cur.execute("SELECT d.key, d.score, d.weight, d.weighted FROM evaluation_dimensions d "
                    "JOIN evaluation_results r ON r.id = d.result_id WHERE r.submission_id = %s "
                    "ORDER BY d.key", (sid,))
        for key, dscore, weight, weighted in cur.fetchall():
            print("   %-14s %4d x %-8s = %s" % (key, dscore, "{:f}".format(weight.normalize()),
                                                 "{:f}".format(weighted.normalize())))
        print("   score %d -> %s (%s, verified=%s); Elo %s -> %s (%+d)" %
              (score, result, evaluator, verified, before, after, change or 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    arbiter = os.path.abspath(args.bin)
    with Services(base_dir=os.path.join(ROOT, ".run")) as svc:
        env = dict(os.environ, ARBITER_DATABASE_URL=svc.database_url,
                   ARBITER_REDIS_URL=svc.redis_url, ARBITER_METRICS_ADDR="127.0.0.1:0",
                   ARBITER_LOG_LEVEL="warn")
        print("services: redis %s, postgres on port %d (data under %s)" %
              (svc.redis_url, svc.pg_port, svc.tmp))
        subprocess.run([arbiter, "migrate"], env=env, check=True)
        db = psycopg2.connect(svc.database_url)
        r = redis.Redis.from_url(svc.redis_url)
        jobs = seed(db, r, "arbiter")
        print("seeded %d submissions and enqueued their jobs; starting the worker" % len(jobs))
        worker = subprocess.Popen([arbiter, "worker"], env=env)
        try:
            deadline = time.time() + args.timeout
            ids = [j[0] for j in jobs]
            while time.time() < deadline:
                cur = db.cursor()
                cur.execute("SELECT count(*) FROM submissions WHERE id = ANY(%s::uuid[]) AND "
                            "status IN ('completed','rejected','failed')", (ids,))
                done = cur.fetchone()[0]
                db.commit()
                if done == len(ids):
                    break
                time.sleep(0.2)
            show(db, jobs)
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                rc = worker.wait(40)
            except subprocess.TimeoutExpired:
                worker.kill()
                rc = worker.wait()
            print("\nworker stopped (exit %d); services stopped" % rc)
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
