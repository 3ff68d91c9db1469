#!/usr/bin/python3
"""The LLM judge's providers are operator configuration (ARBITER_JUDGE_PROVIDERS), and
what providers send is not trusted (TAP on stdout). Against real Redis and PostgreSQL and
the test provider (test/judge_provider.py).

Covers:
- a spec that carries the connection (base_url, api_key_env) is refused by `arbiter
  validate-spec`, `arbiter score` and the worker (invalid_spec), naming the setting, and
  nothing reaches the host it named, with the worker's key or without;
- a provider that is not configured, or a model not on the provider's list, is refused the
  same way; validate-spec without the setting checks the rest and says so;
- a provider's 4xx puts its status and at most a short code into last_error and the dead
  letter: none of its body (a message echoing a key, escapes, HTML) and not its URL;
- provider numbers: usage counts of 2^63-1, -5, 1e308 and "NaN" refuse the reply (no
  verdict row, nothing added to the token limit or the spend budget), and a Retry-After of
  2^63-1 seconds is a long wait, not an overflow; run it on the ASan+UBSan build too
  (UBSAN_OPTIONS halt_on_error=1: a finding kills the worker and fails the test).
"""
import json
import os
import subprocess
import tempfile

from judge_provider import Provider
from services import Services
from workerkit import BIN, Arena, Worker, done, eq, migrate, ok, wait_for

KEY = "sk-test-SECRET-4242"


def spec(**judge):
    j = {"provider": "openai", "model": "test-model", "max_retries": 1, "timeout_ms": 5000,
         "reads": {"fields": ["work"]}}
    j.update(judge)
    return {"mode": "llm", "judge": j, "thresholds": {"win": 700, "draw": 400}, "rubric": [
        {"key": "quality", "name": "Quality", "weight": 60},
        {"key": "docs", "name": "Docs", "weight": 40}]}


def run(args, env=None):
    e = {"PATH": os.environ["PATH"]}
    e.update(env or {})
    return subprocess.run([BIN] + args, env=e, capture_output=True, text=True, timeout=60)


def cli(p, evil, tmp):
    def write(name, doc):
        path = os.path.join(tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    exfil = write("exfil", spec(base_url=evil.url("openai"), api_key_env="ARBJ_TEST_API_KEY"))
    keyonly = write("keyonly", spec(api_key_env="OPENAI_API_KEY"))
    good = write("good", spec())
    offlist = write("offlist", spec(model="gpt-5"))
    unknown = write("unknown", spec(provider="evil"))
    sub = write("sub", {"answer": {"work": {"quality": 40, "docs": 40}}})
    provs = p.providers()

    r = run(["validate-spec", exfil])
    ok(r.returncode == 2 and "judge.base_url is not a spec setting" in r.stderr and
       "ARBITER_JUDGE_PROVIDERS" in r.stderr, "validate-spec refuses base_url, naming the setting",
       r.stderr)
    r = run(["validate-spec", keyonly])
    ok(r.returncode == 2 and "judge.api_key_env is not a spec setting" in r.stderr,
       "validate-spec refuses api_key_env", r.stderr)
    r = run(["validate-spec", good])
    ok(r.returncode == 0 and r.stdout == "ok\n" and "not checked" in r.stderr,
       "validate-spec without providers: ok, with a note that provider and model were not checked",
       (r.stdout, r.stderr))
    r = run(["validate-spec", "--judge-providers", provs, good])
    ok(r.returncode == 0 and r.stdout == "ok\n" and not r.stderr, "validate-spec with providers: ok",
       r.stderr)
    r = run(["validate-spec", "--judge-providers", provs, offlist])
    ok(r.returncode == 2 and "judge.model 'gpt-5' is not one of provider openai's models" in r.stderr,
       "validate-spec: a model off the provider's list", r.stderr)
    r = run(["validate-spec", unknown], {"ARBITER_JUDGE_PROVIDERS": provs})
    ok(r.returncode == 2 and "judge.provider 'evil' is not configured" in r.stderr,
       "validate-spec (providers from the environment): an unknown provider", r.stderr)

    env = {"ARBJ_TEST_API_KEY": KEY, "ARBITER_JUDGE_PROVIDERS": provs}
    r = run(["score", "--spec", exfil, "--submission", sub], env)
    ok(r.returncode == 2 and "judge.base_url is not a spec setting" in r.stderr and
       "ARBITER_JUDGE_PROVIDERS" in r.stderr, "score refuses a spec with base_url (exit 2)",
       r.stderr)
    r = run(["score", "--spec", offlist, "--submission", sub], env)
    ok(r.returncode == 2 and "not one of provider openai's models" in r.stderr,
       "score refuses a model off the list (exit 2)", r.stderr)
    r = run(["score", "--spec", good, "--submission", sub, "--judge-providers", "/nonexistent"], env)
    ok(r.returncode == 2 and "/nonexistent" in r.stderr, "score: an unreadable providers file",
       r.stderr)
    pf = os.path.join(tmp, "providers.json")
    with open(pf, "w") as f:
        f.write(provs)
    n = p.count()
    r = run(["score", "--spec", good, "--submission", sub, "--judge-providers", pf], env)
    eq((r.returncode, json.loads(r.stdout or "{}").get("score")), (0, 400),
       "score with the providers from a file: judged", r.stderr)
    eq(p.count() - n, 1, "one request, to the configured provider")
    eq(evil.count(), 0, "nothing reached the host a spec named")


def main():
    p = Provider().start()
    evil = Provider().start()      # where a hostile spec would send the key
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cli(p, evil, tmp)
        with Services() as s:
            migrate(s)
            a = Arena(s)
            env = {"ARBJ_TEST_API_KEY": KEY, "ARBITER_JUDGE_PROVIDERS": p.providers(),
                   "ARBITER_MAX_DELIVERIES": "1", "ARBITER_JUDGE_TPM": "100000000",
                   "ARBITER_JUDGE_BUDGET": "1000000/day"}
            w = Worker(s, "prov-1", env=env)

            # -- the connection is the operator's -------------------------------------------
            cases = [
                ("base_url + api_key_env", spec(base_url=evil.url("openai"),
                                                api_key_env="ARBJ_TEST_API_KEY"),
                 "judge.base_url is not a spec setting"),
                ("api_key_env", spec(api_key_env="ARBJ_TEST_API_KEY"),
                 "judge.api_key_env is not a spec setting"),
                ("unknown provider", spec(provider="evil"),
                 "judge.provider 'evil' is not configured on this worker"),
                ("model off the list", spec(model="gpt-5"),
                 "judge.model 'gpt-5' is not one of provider openai's models"),
            ]
            for name, sp, want in cases:
                _, sid = a.submit(a.agent(), a.challenge(sp), {"work": {"quality": 40, "docs": 40}})
                ok(a.wait_final([sid], 30), "%s: final" % name, w.tail())
                st, reason, err = a.q1("SELECT status, reject_reason, last_error FROM submissions "
                                       "WHERE id = %s", sid)
                ok(st == "rejected" and reason == "invalid_spec" and want in (err or "") and
                   "ARBITER_JUDGE_PROVIDERS" in (err or ""),
                   "%s: rejected as invalid_spec, naming the setting" % name, (st, reason, err))
            eq(evil.count(), 0, "nothing reached the host the spec named")
            ch = a.challenge(spec())
            n = p.count()
            _, sid = a.submit(a.agent(), ch, {"work": {"quality": 40, "docs": 40}})
            ok(a.wait_final([sid], 30), "a spec naming a configured provider and model", w.tail())
            eq((a.status(sid), a.val("SELECT score FROM evaluation_results WHERE submission_id = %s",
                                     sid)), ("completed", 400), "judged")
            eq(p.count() - n, 1, "one provider call")

            # -- a provider's error body stays out of last_error and the dead letter ---------
            leak = "sk-live-LEAK-7777"
            bodies = [
                (json.dumps({"error": {"message": "Incorrect API key provided: %s" % leak,
                                       "type": "invalid_request_error", "code": "invalid_api_key"}}),
                 " (invalid_api_key)"),
                (json.dumps({"error": {"message": leak, "code": "\u001b[31m" + leak}}), ""),
                ("<html><body>%s \u001b]0;pwned\u0007 %s</body></html>" % (leak, "x" * 500), ""),
            ]
            for i, (body, reason) in enumerate(bodies):
                p.script = ["status:401:" + body]
                _, sid = a.submit(a.agent(), ch, {"work": {"quality": 41 + i, "docs": 40}})
                ok(a.wait_final([sid], 30), "401 #%d: final" % i, w.tail())
                err = a.val("SELECT last_error FROM submissions WHERE id = %s", sid) or ""
                dead = [f for _, f in a.dead_entries() if f.get("submission_id") == sid]
                dl = json.dumps(dead)
                want = "provider openai answered HTTP 401" + reason
                ok(want in err and leak not in err and "\u001b" not in err and "html" not in err and
                   "127.0.0.1" not in err, "401 #%d: last_error has the status%s and none of the "
                   "body or URL" % (i, reason and " and the code"), err)
                ok(dead and want in dl and leak not in dl and "127.0.0.1" not in dl,
                   "401 #%d: the dead letter too" % i, dl)

            # -- provider numbers ----------------------------------------------------------
            nv = a.val("SELECT count(*) FROM judge_verdicts")
            for i, n in enumerate(("9223372036854775807", "-5", "1e308", '"NaN"')):
                p.script = ["tokens:" + n, "tokens:" + n]     # the answer and the repair's
                _, sid = a.submit(a.agent(), ch, {"work": {"quality": 51 + i, "docs": 40}})
                ok(a.wait_final([sid], 30), "usage %s: final" % n, w.tail())
                err = a.val("SELECT last_error FROM submissions WHERE id = %s", sid) or ""
                ok(a.status(sid) == "failed" and "implausible token count" in err,
                   "usage %s: the replies are refused" % n, (a.status(sid), err))
            eq(a.val("SELECT count(*) FROM judge_verdicts"), nv, "no verdict row for them")
            ok(a.val("SELECT count(*) FROM judge_verdicts WHERE tokens_in < 0 OR tokens_out < 0 "
                     "OR tokens_in > 100000000 OR cost_usd < 0 OR cost_usd > 1000") == 0,
               "no verdict row holds an implausible figure")
            tpm = [int(a.r.get(k)) for k in a.r.keys("arbiter:judge:tpm:*")]
            ok(all(0 <= t <= 100000 for t in tpm), "the token limit counted nothing implausible", tpm)
            spent = [float(a.r.get(k)) for k in a.r.keys("arbiter:judge:spend:*")]
            ok(spent and all(0 <= x < 1 for x in spent), "nor did the spend budget", spent)

            n = p.count()
            p.script = ["429:9223372036854775807"]
            _, sid = a.submit(a.agent(), ch, {"work": {"quality": 61, "docs": 40}})
            ok(a.wait_final([sid], 40), "Retry-After 2^63-1 s: final", w.tail())
            eq(a.status(sid), "completed", "a Retry-After beyond the cap is provider trouble: "
               "retried and judged", a.val("SELECT last_error FROM submissions WHERE id = %s", sid))
            ok(p.count() - n >= 2, "asked again", p.count() - n)

            out = w.output()
            ok("runtime error" not in out and "AddressSanitizer" not in out,
               "no sanitizer finding in the worker", w.tail())
            ok(KEY not in out and leak not in out, "no key and no body in the worker's log")
            ok(w.alive(), "the worker is alive")
            eq(w.term(), 0, "worker exits 0")
            bad = Worker(s, "prov-bad", env=dict(env, ARBITER_JUDGE_PROVIDERS='{"openai": 1}'))
            ok(wait_for(lambda: not bad.alive(), 20), "a worker with providers that do not parse "
               "does not start", bad.tail())
            ok("ARBITER_JUDGE_PROVIDERS" in bad.output(), "and says why", bad.tail())
            a.close()
    finally:
        p.stop()
        evil.stop()
    done()


if __name__ == "__main__":
    main()
