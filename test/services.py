#!/usr/bin/python3
"""Real redis-server and postgres for arbiter's tests.

Each Services object owns a private temporary directory, a redis-server and a
PostgreSQL cluster (initdb) listening on free loopback ports. Nothing is
mocked. As root, PostgreSQL runs as the `postgres` user (it refuses root).

Library use:
    with Services() as s:
        s.redis_url, s.database_url, s.restart_postgres(), s.flush_redis()
Command line:
    services.py run -- CMD ARGS...   start both, export ARBITER_TEST_REDIS_URL
                                     and ARBITER_TEST_DATABASE_URL, run CMD,
                                     stop both, exit with CMD's status.
"""
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def auto_explain_plans(log_text):
    """The JSON documents auto_explain (log_format json) wrote into a server log, in order:
    each has "Query Text" and "Plan"."""
    dec, out, pos = json.JSONDecoder(), [], 0
    while True:
        k = log_text.find("plan:", pos)
        if k < 0:
            return out
        j = log_text.find("{", k)
        try:
            obj, end = dec.raw_decode(log_text, j)
            out.append(obj)
            pos = end
        except ValueError:
            pos = k + 5


def free_port():
    """A loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bindir():
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[4]))
    if not cands:
        raise RuntimeError("postgres not found: apt-get install postgresql")
    return os.path.dirname(cands[-1])


def _wait(check, what, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


class Services:
    """A private redis-server and postgres; see the module comment."""

    def __init__(self, redis=True, postgres=True, pg_settings=None, keep=False, base_dir=None):
        self.want_redis = redis
        self.want_postgres = postgres
        self.pg_settings = dict(fsync="off", max_connections="300",
                                shared_buffers="128MB")
        self.pg_settings.update(pg_settings or {})
        self.keep = keep
        if base_dir:
            os.makedirs(base_dir, exist_ok=True)
            self.tmp = tempfile.mkdtemp(prefix="services-", dir=base_dir)
        else:
            self.tmp = tempfile.mkdtemp(prefix="arbiter-test-")
        os.chmod(self.tmp, 0o755)
        self.redis_proc = None
        self.pg_proc = None
        self.redis_port = free_port() if redis else None
        self.pg_port = free_port() if postgres else None
        self.dbname = "arbiter"

    # -- lifecycle -------------------------------------------------------
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        if self.want_redis:
            self.start_redis()
        if self.want_postgres:
            self.init_postgres()
            self.start_postgres()
            self.psql("postgres", "CREATE DATABASE %s" % self.dbname)

    def stop(self):
        self.stop_redis()
        self.stop_postgres()
        if not self.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- redis -----------------------------------------------------------
    @property
    def redis_url(self):
        return "redis://127.0.0.1:%d/0" % self.redis_port

    def start_redis(self, appendonly=False):
        rdir = os.path.join(self.tmp, "redis")
        os.makedirs(rdir, exist_ok=True)
        log = open(os.path.join(rdir, "redis.log"), "ab")
        self.redis_proc = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "yes" if appendonly else "no",
             "--dir", rdir, "--daemonize", "no", "--protected-mode", "no"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait(self._redis_ping, "redis-server")

    def _redis_ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.redis_port), 0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop_redis(self):
        if self.redis_proc and self.redis_proc.poll() is None:
            self.redis_proc.terminate()
            try:
                self.redis_proc.wait(10)
            except subprocess.TimeoutExpired:
                self.redis_proc.kill()
                self.redis_proc.wait()
        self.redis_proc = None

    def restart_redis(self, down_secs=0.0):
        self.stop_redis()
        time.sleep(down_secs)
        self.start_redis()

    def redis_cli(self, *args):
        """Runs redis-cli against this server; returns stdout text."""
        out = subprocess.run(["redis-cli", "-p", str(self.redis_port)] + [str(a) for a in args],
                             check=True, capture_output=True, text=True)
        return out.stdout

    # -- postgres --------------------------------------------------------
    @property
    def database_url(self):
        return "postgresql://postgres@127.0.0.1:%d/%s" % (self.pg_port, self.dbname)

    def _as_postgres(self):
        if os.geteuid() != 0:
            return None
        pw = pwd.getpwnam("postgres")

        def drop():
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
        return drop

    def init_postgres(self):
        self.pgdata = os.path.join(self.tmp, "pg")
        os.makedirs(self.pgdata)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.pgdata, pw.pw_uid, pw.pw_gid)
        subprocess.run([os.path.join(pg_bindir(), "initdb"), "-D", self.pgdata, "-A", "trust",
                        "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"],
                       check=True, capture_output=True, preexec_fn=self._as_postgres())

    def start_postgres(self):
        args = [os.path.join(pg_bindir(), "postgres"), "-D", self.pgdata,
                "-p", str(self.pg_port), "-k", self.pgdata,
                "-c", "listen_addresses=127.0.0.1"]
        for k, v in self.pg_settings.items():
            args += ["-c", "%s=%s" % (k, v)]
        log = open(os.path.join(self.tmp, "postgres.log"), "ab")
        self.pg_proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                        preexec_fn=self._as_postgres(), start_new_session=True)
        _wait(lambda: self.psql("postgres", "SELECT 1", check=False).returncode == 0,
              "postgres")

    def stop_postgres(self, mode="fast"):
        if self.pg_proc and self.pg_proc.poll() is None:
            sig = {"smart": signal.SIGTERM, "fast": signal.SIGINT,
                   "immediate": signal.SIGQUIT}[mode]
            self.pg_proc.send_signal(sig)
            try:
                self.pg_proc.wait(30)
            except subprocess.TimeoutExpired:
                self.pg_proc.kill()
                self.pg_proc.wait()
        self.pg_proc = None

    def restart_postgres(self, down_secs=0.0, mode="fast"):
        self.stop_postgres(mode)
        time.sleep(down_secs)
        self.start_postgres()

    def psql(self, db, sql, check=True):
        """Runs one SQL text through psql; returns the CompletedProcess."""
        return subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                               "-p", str(self.pg_port), "-U", "postgres", "-d", db,
                               "-At", "-c", sql], check=check, capture_output=True, text=True)

    def env(self):
        """Environment variables pointing tests at these services."""
        e = {}
        if self.want_redis:
            e["ARBITER_TEST_REDIS_URL"] = self.redis_url
            e["ARBITER_TEST_REDIS_PORT"] = str(self.redis_port)
        if self.want_postgres:
            e["ARBITER_TEST_DATABASE_URL"] = self.database_url
            e["ARBITER_TEST_PG_PORT"] = str(self.pg_port)
            e["ARBITER_TEST_PGDATA"] = self.pgdata
        return e


def main(argv):
    if len(argv) < 3 or argv[1] != "run" or "--" not in argv:
        sys.stderr.write("usage: services.py run -- CMD [ARGS...]\n")
        return 2
    cmd = argv[argv.index("--") + 1:]
    with Services() as s:
        env = dict(os.environ)
        env.update(s.env())
        return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
