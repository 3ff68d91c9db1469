#!/usr/bin/python3
"""`arbiter worker` against Redis with TLS and ACL users (TAP on stdout).

The test makes its own CA with the openssl command line (a CA, a server
certificate for localhost/127.0.0.1, a client certificate, and a second,
unrelated CA) and starts Debian's redis-server with --tls-port only.

TLS:
 1. rediss://localhost with the CA file and a client certificate, as an ACL
    user: every job evaluated exactly once (the API side XADDs over TLS too).
 2. A CA the server's certificate does not chain to, and the system store:
    the worker logs "unknown CA" and evaluates nothing.
 3. A server name the certificate does not hold: "name mismatch".
 4. A listener that accepts and never answers: "TLS handshake timed out".
 5. The server requires a client certificate and none is given: the message
    says so.
ACL (plain Redis):
 6. redis://user:password@ works.
 7. A wrong password: "authentication refused for user ...".
 8. A user the ACL denies XAUTOCLAIM: an error naming XAUTOCLAIM; the jobs
    are still evaluated (reading and acknowledging are allowed).
"""
import os
import socket
import subprocess
import threading
import time

import redis

import docs
from pki import make_pki
from services import Services, free_port
from workerkit import cli, operator_cli_checks, script, SPEC_X, Arena, Worker, bulk, diag, done, exactly_once, migrate, ok, wait_for


class TlsRedis:
    def __init__(self, s, pki):
        self.port = free_port()
        self.pki = pki
        d = os.path.join(s.tmp, "redis-tls")
        os.makedirs(d, exist_ok=True)
        self.log = open(os.path.join(d, "redis.log"), "ab")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
             "--tls-cert-file", pki["server.pem"], "--tls-key-file", pki["server.key"],
             "--tls-ca-cert-file", pki["ca.pem"], "--tls-auth-clients", "optional",
             "--save", "", "--appendonly", "no", "--dir", d, "--protected-mode", "no"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.client = redis.Redis(host="127.0.0.1", port=self.port, ssl=True,
                                  ssl_ca_certs=pki["ca.pem"], ssl_certfile=pki["client.pem"],
                                  ssl_keyfile=pki["client.key"], decode_responses=True)
        ok(wait_for(self.ping, 20), "TLS redis-server is up on port %d" % self.port)

    def ping(self):
        try:
            return self.client.ping()
        except (redis.RedisError, OSError):
            return False

    def stop(self):
        self.client.close()
        self.proc.terminate()
        self.proc.wait(10)


def q(pki, **kw):
    return "&".join("%s=%s" % (k, v) for k, v in kw.items())


def run_jobs(s, a, url, n, name, env=None):
    """n submissions through a worker on url; True when all evaluated exactly once."""
    ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
    ags = [a.agent() for _ in range(5)]
    subs = bulk(a, ags, ch, n)
    w = Worker(s, name, env=dict({"ARBITER_REDIS_URL": url}, **(env or {})))
    fin = a.wait_final(subs, 60)
    ok(fin, "%s: %d submissions final" % (name, n), w.tail(20))
    problems = exactly_once(a, subs, ags)
    ok(not problems, "%s: exactly once" % name, "\n".join(problems[:5]))
    return w


def expect_log(s, url, want, name, secs=20):
    """A worker on url that must not get connected, and must log want."""
    # The worker id is on every line: it must not contain want itself.
    w = Worker(s, name.replace(" ", "-"), env={"ARBITER_REDIS_URL": url})
    got = wait_for(lambda: want in w.output(), secs, 0.1)
    out = w.output()
    ok(got, "%s: the log says %r" % (name, want), "\n".join(out.splitlines()[-8:]))
    ok("connected to" not in out, "%s: never connected" % name)
    w.term(30)
    return out


def scripts_over_tls(s, a, url, rogue, named):
    """scripts/dlq and scripts/requeue over rediss:// with the worker's URL."""
    dead = a.r.xadd(a.dead, {"submission_id": "not-a-uuid", "enqueued_at": "1", "reason": "tls check",
                             "original_id": "1-1", "worker_id": "tls",
                             "failed_at": str(int(time.time() * 1000))})
    p = script(s, "dlq", url, "list")
    ok(p.returncode == 0 and dead in p.stdout and "not-a-uuid" in p.stdout,
       "dlq list over TLS (CA file, client cert, ACL user)", p.stdout + p.stderr)
    p = script(s, "dlq", url, "drop", dead, "--yes")
    ok(p.returncode == 0 and a.r.xlen(a.dead) == 0, "dlq drop --yes over TLS", p.stdout + p.stderr)
    sub = a.q1("SELECT id FROM submissions WHERE status = 'completed' LIMIT 1")[0]
    before = a.r.xlen(a.stream)
    p = script(s, "requeue", url, "--ids", str(sub), "--lane", "live", "--yes")
    got = [f for _, f in a.r.xrange(a.stream) if f.get("submission_id") == str(sub)]
    ok(p.returncode == 0 and a.r.xlen(a.stream) == before + 1 and got
       and got[0].get("kind") == "reevaluate", "requeue over TLS enqueues the submission",
       p.stdout + p.stderr + repr(got))
    for i, f in a.r.xrange(a.stream):
        if f.get("submission_id") == str(sub):
            a.r.xdel(a.stream, i)
    for name, args in (("dlq", ["count"]), ("requeue", ["--ids", str(sub), "--lane", "live", "--yes"])):
        p = script(s, name, rogue, *args)
        out = p.stdout + p.stderr
        ok(p.returncode == 1 and "certificate verify failed" in out and "tls-s3cret" not in out,
           "%s with an unknown CA: exit 1, says the certificate was refused, no password" % name, out)
    p = script(s, "dlq", named, "count")
    ok(p.returncode == 2 and "ssl_server_name is not supported" in p.stdout + p.stderr,
       "dlq with ssl_server_name: refused with the reason (exit 2)", p.stdout + p.stderr)


def silent_listener():
    """A TCP listener that accepts and never sends a byte."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    conns = []

    def loop():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            conns.append(c)
    threading.Thread(target=loop, daemon=True).start()
    return srv, conns


def main():
    with Services() as s:
        migrate(s)
        pki = make_pki(os.path.join(s.tmp, "pki"))
        tr = TlsRedis(s, pki)
        try:
            tr.client.execute_command("ACL", "SETUSER", "arb", "on", ">tls-s3cret", "~*", "&*", "+@all")
            a = Arena(s)
            a.r = redis.Redis(host="127.0.0.1", port=tr.port, ssl=True, ssl_ca_certs=pki["ca.pem"],
                              ssl_certfile=pki["client.pem"], ssl_keyfile=pki["client.key"],
                              decode_responses=True)
            base = "rediss://arb:tls-s3cret@localhost:%d/0?" % tr.port
            t0 = time.monotonic()
            url = base + q(pki, ssl_ca_certs=pki["ca.pem"], ssl_certfile=pki["client.pem"],
                           ssl_keyfile=pki["client.key"])
            w = run_jobs(s, a, url, 300, "tls")
            out = w.output()
            ok("connected to localhost:%d/0 (TLS)" % tr.port in out, "tls: log names the TLS endpoint")
            ok("tls-s3cret" not in out, "tls: the password is not logged")
            ok(w.term(30) == 0, "tls: worker exits 0")
            diag("TLS run: %.1f s" % (time.monotonic() - t0))
            # The operator commands take the same URL (CA, client cert, ACL user).
            operator_cli_checks(s, url, a.r, "tls", secret="tls-s3cret")

            rogue = base + q(pki, ssl_ca_certs=pki["rogue.pem"], ssl_certfile=pki["client.pem"],
                             ssl_keyfile=pki["client.key"])
            expect_log(s, rogue, "unknown CA", "unknown CA (CA file)")
            scripts_over_tls(s, a, url, rogue, url + "&ssl_server_name=localhost")
            p = cli(s, rogue, "status")
            ok(p.returncode == 1 and "unknown CA" in p.stdout + p.stderr
               and "tls-s3cret" not in p.stdout + p.stderr,
               "status with an unknown CA: exit 1, says why", p.stdout + p.stderr)
            out = expect_log(s, "rediss://localhost:%d/0" % tr.port, "unknown CA",
                             "unknown CA (system store)")
            ok("system store" in out, "unknown CA (system store): says the system store was used")

            mism = base + q(pki, ssl_ca_certs=pki["ca.pem"], ssl_server_name="redis.other.example")
            out = expect_log(s, mism, "name mismatch", "name mismatch")
            ok("redis.other.example" in out, "name mismatch: names the name checked", out[-3000:])

            srv, conns = silent_listener()
            try:
                expect_log(s, "rediss://127.0.0.1:%d/0" % srv.getsockname()[1],
                           "TLS handshake timed out", "handshake timeout")
            finally:
                srv.close()
                for c in conns:
                    c.close()

            tr.client.config_set("tls-auth-clients", "yes")
            nocert = base + q(pki, ssl_ca_certs=pki["ca.pem"])
            expect_log(s, nocert, "client certificate", "client certificate required")
            tr.client.config_set("tls-auth-clients", "optional")
        finally:
            tr.stop()

        # ACL on the plain Redis.
        r = redis.Redis.from_url(s.redis_url)
        # The user worker/README.md "ACL users" documents, word for word.
        readme = docs.text()
        acl = readme.split("ACL SETUSER arbiter ", 1)[1].split("```", 1)[0].split()
        acl = [">acl-pw" if x == ">PASSWORD" else x for x in acl]
        r.execute_command("ACL", "SETUSER", "arb", *acl)
        r.execute_command("ACL", "SETUSER", "lim", "on", ">lim-pw", "~*", "&*", "+@all", "-xautoclaim")
        a = Arena(s)
        hostport = s.redis_url.split("//", 1)[1]
        w = run_jobs(s, a, "redis://arb:acl-pw@" + hostport, 100, "acl user",
                     env={"ARBITER_RATE_LIMIT": "1000/1s", "ARBITER_RECONCILE_MS": "300",
                          "ARBITER_CLAIM_IDLE_MS": "400"})
        time.sleep(1.5)     # a few reconciler, reclaim and gauge rounds
        ok("NOPERM" not in w.output(), "acl user: the documented ACL refuses nothing",
           "\n".join(l for l in w.output().splitlines() if "NOPERM" in l)[:2000])
        ok(w.term(30) == 0, "acl user: worker exits 0")
        out = expect_log(s, "redis://arb:wrong@" + hostport, 'authentication refused for user \\"arb\\"',
                         "WRONGPASS")
        ok("wrong" not in out.replace("wrong user name", ""), "WRONGPASS: the password is not logged")
        w = run_jobs(s, a, "redis://lim:lim-pw@" + hostport, 50, "NOPERM",
                     env={"ARBITER_CLAIM_IDLE_MS": "400"})
        ok(wait_for(lambda: 'the ACL refuses XAUTOCLAIM to user \\"lim\\"' in w.output(), 15),
           "NOPERM: an error names the refused command and the user", w.tail(10))
        ok(w.output().count("the ACL refuses XAUTOCLAIM") == 1, "NOPERM: logged once, not per retry")
        ok(w.term(30) == 0, "NOPERM: worker exits 0")
    return done()


if __name__ == "__main__":
    raise SystemExit(main())
