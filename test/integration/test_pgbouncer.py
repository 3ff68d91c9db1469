#!/usr/bin/python3
"""Every command and the worker through a real PgBouncer in transaction pooling (TAP).

Starts a private PostgreSQL and Redis (test/services.py) and Debian's
`pgbouncer` in front of PostgreSQL with pool_mode = transaction and a pool of
TWO server connections, so consecutive transactions of one client land on
different server connections and every client shares them. Then drives,
through the pooler only: `arbiter migrate` (sequential and concurrent),
`arbiter status`, the worker evaluating a job end to end, `scripts/requeue`
and `scripts/dlq replay`. After each, it checks that no server connection
was left with session state an API server would trip over: the API's INSERT
still works (no read-only default), statement_timeout is the default, and no
advisory lock is held. A second pooler with a pool of ONE connection checks
that concurrent `arbiter migrate` runs still apply each migration once.
"""
import os
import pwd
import shutil
import subprocess
import sys
import time

import psycopg2

from services import Services, free_port, _wait
from workerkit import Arena, Worker, BIN, done, eq, migrate, ok, wait_for, diag

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REQUEUE = os.path.join(ROOT, "scripts", "requeue")
DLQ = os.path.join(ROOT, "scripts", "dlq")
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

SPEC = {
    "evaluator": "deterministic",
    "dimensions": [{"key": "correctness", "weight": 1, "primitive": "exact_match",
                    "field": "a", "ground_truth_field": "a"}],
    "thresholds": {"win": 700, "draw": 400},
}


class Bouncer:
    """A pgbouncer process in transaction pooling mode in front of s's PostgreSQL."""

    def __init__(self, s, pool_size):
        self.dir = os.path.join(s.tmp, "pgbouncer-%d" % pool_size)
        os.makedirs(self.dir)
        self.port = free_port()
        with open(os.path.join(self.dir, "users.txt"), "w") as f:
            f.write('"postgres" ""\n')
        ini = os.path.join(self.dir, "pgbouncer.ini")
        with open(ini, "w") as f:
            f.write("[databases]\n* = host=127.0.0.1 port=%d\n\n[pgbouncer]\n"
                    "listen_addr = 127.0.0.1\nlisten_port = %d\nunix_socket_dir =\n"
                    "auth_type = trust\nauth_file = %s\npool_mode = transaction\n"
                    "default_pool_size = %d\nmin_pool_size = 0\nreserve_pool_size = 0\n"
                    "max_client_conn = 200\nserver_reset_query =\n"
                    "logfile = %s\npidfile = %s\n"
                    % (s.pg_port, self.port, os.path.join(self.dir, "users.txt"), pool_size,
                       os.path.join(self.dir, "pgbouncer.log"), os.path.join(self.dir, "pid")))
        drop = None
        if os.geteuid() == 0:   # pgbouncer refuses to run as root
            pw = pwd.getpwnam("postgres")
            for name in os.listdir(self.dir):
                os.chown(os.path.join(self.dir, name), pw.pw_uid, pw.pw_gid)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)

            def drop():
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)
        self.proc = subprocess.Popen([PGBOUNCER, ini], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=drop,
                                     start_new_session=True)
        self.url = "postgresql://postgres@127.0.0.1:%d/%s" % (self.port, s.dbname)

        def up():
            try:
                psycopg2.connect(self.url, connect_timeout=2).close()
                return True
            except psycopg2.Error:
                return self.proc.poll() is None and False
        _wait(up, "pgbouncer")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Via:
    """What Arena and Worker need of Services, with the database behind the pooler."""

    def __init__(self, s, url):
        self.tmp, self.redis_url, self.database_url = s.tmp, s.redis_url, url


def clean(s, b, what):
    """The checks after each command: no session state left on any pooled server connection."""
    states = set()
    for _ in range(6):   # more rounds than server connections
        with psycopg2.connect(b.url) as c, c.cursor() as cur:
            cur.execute("SHOW default_transaction_read_only")
            ro = cur.fetchone()[0]
            cur.execute("SHOW statement_timeout")
            st = cur.fetchone()[0]
            states.add((ro, st))
        c.close()
    eq(states, {("off", "0")}, "%s: every pooled connection is read-write with the default "
       "statement_timeout" % what)
    c = psycopg2.connect(b.url)
    c.autocommit = True
    try:
        with c.cursor() as cur:
            for i in range(3):
                cur.execute("INSERT INTO agents (name) VALUES (%s) RETURNING id",
                            ("api-%s-%d" % (what, i),))
        ok(True, "%s: the API server's INSERTs through the pooler still work" % what)
    except psycopg2.Error as e:
        ok(False, "%s: the API server's INSERTs through the pooler still work" % what, str(e))
    finally:
        c.close()
    locks = s.psql(s.dbname, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").stdout.strip()
    eq(locks, "0", "%s: no advisory lock left on any server connection" % what)


def run(args, env=None, **kw):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("ARBITER_") and k != "ARBITER_BIN":
            del e[k]
    e.update(env or {})
    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=120, **kw)


def main():
    t0 = time.time()
    with Services() as s:
        b = Bouncer(s, pool_size=2)
        b1 = Bouncer(s, pool_size=1)
        env = {"ARBITER_DATABASE_URL": b.url, "ARBITER_REDIS_URL": s.redis_url}
        w = None
        try:
            # migrate: concurrent runs on an empty database through a pool of one
            # connection (the old session lock was re-entrant there: all three applied).
            procs = [subprocess.Popen([BIN, "migrate", "--database-url", b1.url],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for _ in range(3)]
            outs = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
            ok(all(o[2] == 0 for o in outs), "3 concurrent migrates through a 1-connection pool "
               "succeed", "\n".join(o[0] + o[1] for o in outs))
            applied = sum(o[0].count("applied 0") for o in outs)
            eq(applied, len([f for f in os.listdir(os.path.join(ROOT, "sql"))
                             if f.endswith(".sql")]), "each migration applied exactly once",
               "\n".join(o[0] for o in outs))
            for i in range(3):
                r = run([BIN, "migrate"], env)
                ok(r.returncode == 0 and "up to date" in r.stdout,
                   "migrate again through the 2-connection pool (%d)" % i, r.stdout + r.stderr)
            clean(s, b, "migrate")

            # status (was: a session-level SET default_transaction_read_only = on).
            for i in range(3):
                r = run([BIN, "status", "--json"], env)
                ok(r.returncode == 0, "arbiter status through the pooler (%d)" % i, r.stdout + r.stderr)
            clean(s, b, "status")

            # The worker, end to end.
            via = Via(s, b.url)
            a = Arena(via)
            agent = a.agent()
            ch = a.challenge(SPEC, {"a": 1}, slug="bouncer")
            subs = [a.submit(agent, ch, {"a": 1 if i % 2 else 2})[1] for i in range(6)]
            # Debian 12's PgBouncer (1.18) keeps no prepared statements across a
            # transaction pool: the README says to turn preparing off there.
            w = Worker(via, "wb", env={"ARBITER_PG_POOL_SIZE": "4", "ARBITER_PG_PREPARE": "off"})
            fin = a.wait_final(subs, timeout=60)
            ok(fin, "the worker evaluates 6 jobs through the pooler", w.tail())
            eq(a.count_status(subs, ("completed",)), 6, "all 6 completed", w.tail())
            elo_rows = a.val("SELECT count(*) FROM elo_history WHERE agent_id = %s", agent)
            eq(elo_rows, 6, "one elo_history row each")

            # requeue: re-evaluation jobs through the pooler.
            r = run([REQUEUE, "--challenge", "bouncer", "--quiet", "--lane", "live"], env)
            ok(r.returncode == 0, "scripts/requeue through the pooler", r.stdout + r.stderr)
            ok(wait_for(lambda: a.val("SELECT count(*) FROM evaluation_results r JOIN submissions s"
                                      " ON s.id = r.submission_id WHERE s.id = ANY(%s::uuid[])"
                                      " AND r.eval_seq = 2", subs) == 6, 60),
               "the worker appends a second result to each", w.tail())
            clean(s, b, "worker+requeue")

            # dlq replay of a failed submission (its UPDATE goes through the pooler).
            m = a.match(agent, ch)
            bad = a.submission(m, agent, {"a": 1})
            a.q("UPDATE submissions SET status = 'failed', last_error = 'x' WHERE id = %s", bad)
            a.r.xadd("arbiter:dead", {"submission_id": bad, "kind": "evaluate", "reason": "test",
                                      "failed_at": str(int(time.time() * 1000))})
            r = run([DLQ, "replay", "--all", "--yes"], env)
            ok(r.returncode == 0, "scripts/dlq replay through the pooler", r.stdout + r.stderr)
            ok(wait_for(lambda: a.status(bad) == "completed", 60),
               "the replayed submission is evaluated", w.tail())
            r = run([BIN, "status"], env)
            ok(r.returncode == 0, "status while the worker runs", r.stdout + r.stderr)
            eq(w.term(30), 0, "the worker drains and exits 0", w.tail())
            a.close()
            clean(s, b, "dlq+worker")
        finally:
            if w is not None:
                w.kill()
            b.stop()
            b1.stop()
    diag("pgbouncer suite took %.1f s" % (time.time() - t0))
    return done()


if __name__ == "__main__":
    sys.exit(main())
