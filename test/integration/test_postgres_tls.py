#!/usr/bin/python3
"""`arbiter migrate` and `arbiter worker` against a PostgreSQL that takes
only TLS connections with client certificates (TAP on stdout).

The test makes a CA with the openssl command line, turns ssl on in its
private postgres and lets the postgres user in only with `hostssl ... cert`
(a client certificate whose common name is the user). libpq does TLS for
arbiter; this keeps sslmode=verify-full, sslrootcert, sslcert and sslkey
tested end to end:
 1. migrate and a worker over verify-full with the client certificate:
    every job evaluated exactly once, and every connection of the worker
    is encrypted (pg_stat_ssl).
 2. A CA the server's certificate does not chain to: nothing connects, and
    the worker says why.
 3. No client certificate: refused by the server, and the worker says why.
"""
import os
import shutil
import subprocess

import psycopg2
import redis

from pki import make_pki
from services import Services
from workerkit import BIN, SPEC_X, Arena, Worker, bulk, done, exactly_once, ok, wait_for


def main():
    with Services() as s:
        pki = make_pki(os.path.join(s.tmp, "pki"), client_cn="postgres")
        # The server's files must belong to the server's user, key mode 0600.
        for src, dst in (("server.pem", "server.crt"), ("server.key", "server.key"), ("ca.pem", "root.crt")):
            shutil.copy(pki[src], os.path.join(s.pgdata, dst))
            st = os.stat(s.pgdata)
            os.chown(os.path.join(s.pgdata, dst), st.st_uid, st.st_gid)
            os.chmod(os.path.join(s.pgdata, dst), 0o600)
        with open(os.path.join(s.pgdata, "pg_hba.conf"), "w") as f:
            f.write("local all all trust\n"
                    "hostssl all postgres 127.0.0.1/32 cert\n"
                    "host all all 127.0.0.1/32 reject\n")
        s.psql("postgres", "ALTER SYSTEM SET ssl = on")
        s.psql("postgres", "ALTER SYSTEM SET ssl_ca_file = 'root.crt'")
        s.psql("postgres", "SELECT pg_reload_conf()")

        base = "postgresql://postgres@127.0.0.1:%d/arbiter" % s.pg_port
        good = base + "?sslmode=verify-full&sslrootcert=%s&sslcert=%s&sslkey=%s" % (
            pki["ca.pem"], pki["client.pem"], pki["client.key"])
        ok(wait_for(lambda: psql_ok(good), 10), "postgres takes TLS + client certificate")
        ok(not psql_ok(base + "?sslmode=disable"), "postgres refuses a connection without TLS")

        r = subprocess.run([BIN, "migrate"], env=dict(os.environ, ARBITER_DATABASE_URL=good),
                           capture_output=True, text=True, timeout=120)
        ok(r.returncode == 0, "arbiter migrate over verify-full with a client certificate",
           r.stdout + r.stderr)

        sv = Via(s, good)
        a = Arena(sv)
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ags = [a.agent() for _ in range(5)]
        subs = bulk(a, ags, ch, 200)
        w = Worker(s, "pgtls", env={"ARBITER_DATABASE_URL": good})
        ok(a.wait_final(subs, 60), "worker over TLS: 200 submissions final", w.tail(10))
        problems = exactly_once(a, subs, ags)
        ok(not problems, "worker over TLS: exactly once", "\n".join(problems[:5]))
        rows = a.q("SELECT s.ssl, s.version FROM pg_stat_activity p JOIN pg_stat_ssl s USING (pid) "
                   "WHERE p.backend_type = 'client backend' AND p.datname = 'arbiter' "
                   "AND p.pid <> pg_backend_pid()")
        ok(rows and all(x[0] for x in rows), "every worker connection is encrypted (pg_stat_ssl: %s)"
           % sorted({x[1] for x in rows}), rows)
        ok(w.term(30) == 0, "worker over TLS exits 0")

        for name, url, want in (
                ("unknown CA", base + "?sslmode=verify-full&sslrootcert=%s&sslcert=%s&sslkey=%s" % (
                    pki["rogue.pem"], pki["client.pem"], pki["client.key"]), "certificate verify failed"),
                ("no client certificate", base + "?sslmode=verify-full&sslrootcert=%s" % pki["ca.pem"],
                 "certificate")):
            w = Worker(s, "pg-" + name.replace(" ", "-"), env={"ARBITER_DATABASE_URL": url})
            got = wait_for(lambda: want in w.output(), 20, 0.1)
            ok(got, "%s: the worker says %r" % (name, want), w.tail(6))
            w.term(30)
        redis.Redis.from_url(s.redis_url).close()
    return done()


class Via:
    """The services, with another database URL (the test's own clients use it too)."""

    def __init__(self, s, url):
        self._s = s
        self.database_url = url

    def __getattr__(self, k):
        return getattr(self._s, k)


def psql_ok(url):
    try:
        psycopg2.connect(url, connect_timeout=3).close()
        return True
    except psycopg2.Error:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
