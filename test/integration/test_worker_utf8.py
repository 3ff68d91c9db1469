#!/usr/bin/python3
"""`arbiter worker`: every stored failure text is valid UTF-8 (TAP on stdout).

Text from outside (a database error message, a language name from a spec) is cut to
fit: submissions.last_error and the dead-letter entry's reason must never end up
holding half a character (scripts/dlq could not read such an entry).

1. A commit that keeps failing with a long multi-byte error message (a trigger
   raises 500 characters of e-acute, with and without one ASCII byte in front so
   every byte cut lands inside a character for one of the two): after
   ARBITER_MAX_DELIVERIES the submission is `failed`, last_error and the
   dead-letter reason are valid UTF-8 without U+FFFD, the reason still starts
   with `failed: `.
2. A custom-script spec whose script.language is a long multi-byte name that is
   not configured (its name is cut at 64 bytes in the internal_error): the same.
"""
import sys

import redis

from services import Services
from workerkit import Arena, SPEC_X, Worker, done, eq, migrate, ok

TRIGGER = """
CREATE TABLE test_refuse (id uuid PRIMARY KEY, msg text NOT NULL);
CREATE FUNCTION test_refuse_fn() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE m text;
BEGIN
  SELECT msg INTO m FROM test_refuse WHERE id = NEW.submission_id;
  IF m IS NOT NULL THEN
    RAISE EXCEPTION '%', m;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER test_refuse BEFORE INSERT ON evaluation_results
  FOR EACH ROW EXECUTE FUNCTION test_refuse_fn();
"""


def strict(b):
    """b decoded as UTF-8, or None when it is not valid UTF-8."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check(a, raw, sid, what, must_have):
    row = a.q1("SELECT status, last_error FROM submissions WHERE id = %s", sid)
    eq(row[0], "failed", "%s: failed" % what)
    le = row[1] or ""
    ok("\ufffd" not in le and must_have in le,
       "%s: last_error has no replacement character (not cut inside a character)" % what,
       ascii(le[-80:]))
    dead = [f for _, f in raw.xrange(a.dead) if f.get(b"submission_id") == sid.encode()]
    ok(len(dead) == 1, "%s: dead-lettered once" % what, dead)
    reason = dead[0].get(b"reason", b"") if dead else b""
    text = strict(reason)
    ok(text is not None and text.startswith("failed: ") and must_have in text and
       "\ufffd" not in text,
       "%s: the dead-letter reason is valid UTF-8 (%d bytes)" % (what, len(reason)),
       repr(reason[-60:]))


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        a.q(TRIGGER)
        raw = redis.Redis.from_url(s.redis_url)   # bytes, as stored
        ch = a.challenge(SPEC_X, {"x": 1}, difficulty="contender")
        ag = a.agent()
        subs = []
        for lead in ("", "x"):
            _, sid = a.submit(ag, ch, {"x": 1}, enqueue=False)
            a.q("INSERT INTO test_refuse VALUES (%s, %s)", sid, lead + "\u00e9" * 500)
            a.enqueue(sid)
            subs.append(sid)
        script = a.challenge({
            "evaluator": "custom-script",
            "dimensions": [{"key": "correctness", "weight": 1}],
            "script": {"language": "l" + "\u00e9" * 100, "source": "exit 0", "timeout_ms": 5000},
        }, {}, difficulty="contender")
        _, nolang = a.submit(ag, script, {"x": 1})
        w = Worker(s, "utf8-1", env={"ARBITER_MAX_DELIVERIES": "2"})
        ok(a.wait_final(subs + [nolang], 60), "the failing jobs finished", w.tail())
        for i, sid in enumerate(subs):
            check(a, raw, sid, "commit error %d" % (i + 1), "\u00e9" * 20)
        check(a, raw, nolang, "unconfigured multi-byte language", "is not configured")
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
