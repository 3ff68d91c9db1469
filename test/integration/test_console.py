#!/usr/bin/python3
"""`arbiter console` against a private Redis and PostgreSQL and a real worker, over HTTP and
in a real browser (Debian's chromium + chromium-driver through python3-selenium; CI installs
them with scripts/deps, and without them this test fails: it is never skipped).

HTTP: every answer has the strict Content-Security-Policy; the overview's counts are those
of `arbiter status --json` (the worker paused, so nothing moves between the two readings);
an action without the token is refused (401), a cross-origin one too (403), a console
started without a token refuses every action (403); a dead letter whose fields are not
UTF-8 is served as valid JSON with \\xNN text; each view's latency is measured.

Browser: the overview shows the same counts as `arbiter status --json`; the page resumes
the paused worker with the token (logged with the operator's name) and the jobs flow to
completion; a failed submission's page shows its last_error and the dead letter's reason;
`<script>` in an answer and in a reason is shown as text and never runs; the pause button
without the token is refused and nothing is paused; a dead letter replayed from the page
completes; no console errors (CSP violations included); the page's weight is measured
(target 200 KB).

The panels added since (panel_checks): the charts (jobs per second and latency percentiles of
the last hour from the workers' stats stream) count the jobs that flowed and survive a
worker's restart; the replicas show each worker's version; the exact counts by status equal
PostgreSQL's; the standings equal `arbiter leaderboard --json` and `arbiter weights --json`
(an agent named with <script> shown as text); dead letters filter by challenge and time;
requeue by ids (dry run, include failed), without the token refused, and a bulk one (elo=adjust
over a challenge) asks for the confirmation in the browser before anything is enqueued, then
the re-evaluations are committed. A screenshot of the overview with its charts is taken
(ARBITER_CONSOLE_SCREENSHOT, else the temp dir).
"""
import json
import os
import re
import statistics
import subprocess
import time
import urllib.error
import urllib.request

import redis

from services import Services
from workerkit import BIN, SPEC_X, Arena, Worker, cli, diag, done, eq, migrate, ok, wait_for

TOKEN = "console-test-token-0123456789"
HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"


class Console:
    """One `arbiter console` process on a free loopback port."""

    def __init__(self, s, token=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_")}
        env.update(ARBITER_REDIS_URL=s.redis_url, ARBITER_DATABASE_URL=s.database_url)
        if token:
            env["ARBITER_CONSOLE_TOKEN"] = token
        self.log_path = os.path.join(s.tmp, "console-%d.log" % int(time.time() * 1000))
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen([BIN, "console", "--listen", "127.0.0.1:0"], env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        m = wait_for(lambda: re.search(r"listening on (http://\S+/)", self.output()), 20)
        if not m:
            raise RuntimeError("console did not start: " + self.output())
        self.url = m.group(1)

    def output(self):
        with open(self.log_path) as f:
            return f.read()

    def get(self, path):
        with urllib.request.urlopen(self.url + path.lstrip("/"), timeout=10) as r:
            return r.status, dict(r.headers), r.read()

    def post(self, body, headers=None):
        req = urllib.request.Request(self.url + "api/action", data=json.dumps(body).encode(),
                                     headers=dict({"Content-Type": "application/json"}, **(headers or {})),
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


COUNTS = [("redis", "stream_length"), ("redis", "lag"), ("redis", "pending"), ("redis", "delayed"),
          ("redis", "dead"), ("redis", "bulk_lane"), ("redis", "judge_lane"),
          ("postgres", "queued"), ("postgres", "evaluating"), ("postgres", "schema_version")]


def status_counts(s):
    r = cli(s, s.redis_url, "status", "--json")
    doc = json.loads(r.stdout)
    return {k: doc[sec][k] for sec, k in COUNTS}


def http_checks(s, a, con, ro):
    st, h, body = con.get("/")
    csp = h.get("Content-Security-Policy", "")
    ok(st == 200 and "default-src 'none'" in csp and "script-src 'self'" in csp
       and "unsafe-inline" not in csp, "the page has a strict CSP", csp)
    st, h, body = con.get("/api/overview")
    ok("default-src 'none'" in h.get("Content-Security-Policy", ""), "the API has the CSP too")
    page = json.loads(body)["status"]
    want = status_counts(s)
    got = {k: page[sec][k] for sec, k in COUNTS}
    eq(got, want, "the overview's counts are those of arbiter status --json")
    ok("secret" not in body.decode(), "no password on the overview (URLs redacted)")
    # the delayed set split by each member's _cause, as arbiter status counts it (due in an
    # hour: no worker takes them meanwhile)
    causes = ["rate_limit", "pause", "pause", "retry", "image", "image", "image"]
    far = time.time() * 1000 + 3600e3
    members = {json.dumps({"submission_id": "00000000-0000-4000-8000-00000000000%d" % i,
                           "_cause": c, "_token": "t%d" % i}, separators=(",", ":")): far
               for i, c in enumerate(causes)}
    a.r.zadd(a.delayed, members)
    split = api(con, "/api/overview")["delayed_split"]
    want = {"rate_limit": 1, "pause": 2, "retry": 1, "image": 3}
    eq({k: split.get(k) for k in want}, want, "the overview splits the delayed set by cause", split)
    by = json.loads(cli(s, s.redis_url, "status", "--json").stdout)["redis"]["delayed_by_cause"]
    eq({k: split.get(k) for k in want}, by, "the same split as arbiter status --json")
    a.r.zrem(a.delayed, *members)
    before = (a.r.get(a.base + ":paused"), a.r.smembers(a.base + ":paused:challenges"))
    eq(con.post({"action": "resume", "all": True})[0], 401, "an action without the token is refused")
    eq(con.post({"action": "resume"}, {"X-Arbiter-Token": TOKEN + "x"})[0], 401,
       "an action with a wrong token is refused")
    eq(con.post({"action": "resume"}, {"X-Arbiter-Token": TOKEN, "Origin": "http://evil.example"})[0],
       403, "a cross-origin action is refused")
    eq(ro.post({"action": "resume"}, {"X-Arbiter-Token": TOKEN})[0], 403,
       "a console without a token refuses every action")
    eq((a.r.get(a.base + ":paused"), a.r.smembers(a.base + ":paused:challenges")), before,
       "refused actions changed no pause switch")
    # a dead letter of any bytes
    raw = redis.Redis.from_url(s.redis_url)
    bad_id = raw.xadd(a.dead, {b"submission_id": b"\xff\xfe", b"reason": b"bad \xc3\x28 \xed\xa0\x80 \x00",
                               b"failed_at": str(int(time.time() * 1000)).encode()}).decode()
    st, _, body = con.get("/api/dead/entry?id=" + bad_id)
    doc = json.loads(body.decode("utf-8"))    # strict: raises on invalid UTF-8
    eq(doc["fields"]["reason"], "bad \\xc3( \\xed\\xa0\\x80 \\x00", "invalid UTF-8 is served as \\xNN text")
    eq(con.post({"action": "drop", "id": bad_id}, {"X-Arbiter-Token": TOKEN})[0], 200, "drop with the token")
    eq(raw.xlen(a.dead), 1, "the dropped dead letter is gone")
    # latency of each view
    views_answer_fast(con, ("/api/overview", "/api/dead?limit=50",
                            "/api/submission?id=" + a.failed_sub))


def shown_figures(d):
    """The figures the page shows, {data-k: text}: one script call (the cards are rebuilt
    every 2 s, element handles go stale)."""
    return dict(d.execute_script(
        "return Array.from(document.querySelectorAll('[data-k]'))"
        ".map(function (e) { return [e.getAttribute('data-k'), e.textContent]; });"))


def page_weight(d):
    """Bytes the page loaded: the document and every resource, encoded."""
    return d.execute_script(
        "var n = performance.getEntriesByType('navigation')[0];"
        "return performance.getEntriesByType('resource').reduce(function (t, e) {"
        "  return t + e.encodedBodySize; }, n.encodedBodySize);")


def console_errors(d):
    """The browser's SEVERE log entries, but those of /api/action (a refused or
    to-be-confirmed action answers 401 or 409 on purpose)."""
    return [e for e in d.get_log("browser") if e.get("level") == "SEVERE"
            and "/api/action" not in e.get("message", "")]


def views_answer_fast(con, paths):
    """Each view answers in <= 200 ms (median of 10 GETs); prints median and max."""
    for path in paths:
        ts = []
        for _ in range(10):
            t0 = time.time()
            con.get(path)
            ts.append((time.time() - t0) * 1000)
        diag("latency %s: median %.1f ms, max %.1f ms" % (path, statistics.median(ts), max(ts)))
        ok(statistics.median(ts) <= 200, "%s answers in <= 200 ms (median)" % path.split("?")[0])


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as ChromeService
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1400"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=ChromeService("/usr/bin/chromedriver"), options=opts)


def browser_checks(s, a, con, worker_subs):
    from selenium.webdriver.common.by import By
    d = browser()
    try:
        d.get(con.url)

        def shown():
            return shown_figures(d)
        wait_for(lambda: shown().get("stream_length") not in (None, "", "-"), 15)
        want = status_counts(s)
        got = shown()
        eq({k: got.get(k) for _, k in COUNTS if k in got}, {k: str(v) for k, v in want.items() if k in got},
           "browser: the overview shows arbiter status --json's counts")
        ok(wait_for(lambda: "updated" in d.find_element(By.ID, "fresh").text, 10),
           "browser: the overview says how fresh it is")
        # without the token: refused, nothing paused
        d.find_element(By.ID, "pause-all").click()
        d.switch_to.alert.accept()
        ok(wait_for(lambda: "refused (401)" in d.find_element(By.ID, "flash").text, 10),
           "browser: pause without the token is refused", d.find_element(By.ID, "flash").text)
        # with the token: resume, and the jobs flow
        d.find_element(By.CSS_SELECTOR, "#auth summary").click()
        d.find_element(By.ID, "token").send_keys(TOKEN)
        d.find_element(By.ID, "operator").send_keys("ops-test")
        d.find_element(By.ID, "resume-all").click()
        ok(wait_for(lambda: "resumed every replica" in d.find_element(By.ID, "flash").text, 10),
           "browser: resume with the token", d.find_element(By.ID, "flash").text)
        ok(a.wait_final(worker_subs, 60), "the resumed worker finishes the jobs")
        ok('"operator":"ops-test"' in con.output() and '"action":"resume"' in con.output(),
           "the action is logged with who and what")
        ok(wait_for(lambda: shown().get("stream_length") == "0" and shown().get("queued") == "1", 15),
           "browser: the live overview follows the flow without a reload", shown())
        want = status_counts(s)
        got = shown()
        eq({k: got.get(k) for _, k in COUNTS if k in got}, {k: str(v) for k, v in want.items() if k in got},
           "browser: after the flow the counts match arbiter status --json again")
        # the page's weight
        weight = page_weight(d)
        diag("page weight (HTML, script, style and one overview reading): %d bytes" % weight)
        ok(0 < weight <= 200 * 1024, "the page weighs at most 200 KB", weight)
        # a failed submission's story
        d.get(con.url + "#submission=" + a.failed_sub)
        ok(wait_for(lambda: "status" in d.find_element(By.ID, "sub-out").text, 10), "browser: the story loads")
        text = d.find_element(By.ID, "sub-out").text
        ok("sandbox exploded " in text and HOSTILE in text, "browser: the failed submission shows its last_error, as text", text)
        ok("dead letters" in text and "reason: sandbox exploded" in text,
           "browser: and its dead letter with the reason", text)
        ok("<script>window.__pwned = 1</script>" in d.find_element(By.ID, "sub-answer").text,
           "browser: <script> in the answer is shown as text")
        eq(d.execute_script("return window.__pwned === undefined && "
                            "document.querySelectorAll('#sub-out script, #sub-out img').length"), 0,
           "browser: nothing of the hostile text ran or became an element")
        # dead letters: replay from the page, and it completes
        d.get(con.url + "#dead")
        row = '#dead-list tr[data-id="%s"]' % a.failed_dead
        ok(wait_for(lambda: d.find_elements(By.CSS_SELECTOR, row), 10), "browser: the dead letter is listed")
        ok(HOSTILE in d.find_element(By.CSS_SELECTOR, row).text, "browser: its reason is shown as text")
        d.execute_script("document.getElementById('auth').open = true")
        d.find_element(By.ID, "token").clear()
        d.find_element(By.ID, "token").send_keys(TOKEN)
        d.find_element(By.CSS_SELECTOR, row + " button.replay").click()
        d.switch_to.alert.accept()
        ok(wait_for(lambda: "replayed" in d.find_element(By.ID, "flash").text, 10),
           "browser: replay with the token", d.find_element(By.ID, "flash").text)
        ok(wait_for(lambda: a.status(a.failed_sub) == "completed", 30),
           "the replayed dead letter's submission completes", a.status(a.failed_sub))
        eq(console_errors(d), [], "browser: no console errors (CSP violations included)")
    finally:
        d.quit()


def api(con, path):
    return json.loads(con.get(path)[2])


def panel_checks(s, a, con, w, ch_slug, worker_subs):
    """The standings, requeue, dead-letter filters, versions, exact counts and charts.
    Returns the worker running at the end (it is restarted once)."""
    from selenium.webdriver.common.by import By
    version = cli(s, s.redis_url, "--version").stdout.split()[-1]
    # charts: the 40 jobs that flowed, from the workers' stats stream (written every 10 s)
    ok(wait_for(lambda: api(con, "/api/charts")["hour"]["completed"] >= len(worker_subs), 30),
       "charts: the last hour counts the completed jobs", api(con, "/api/charts")["hour"])
    doc = api(con, "/api/charts")
    eq(len(doc["points"]), 120, "charts: 120 points of 30 s")
    ok(doc["hour"]["p50"] is not None and 0 <= doc["hour"]["p50"] <= doc["hour"]["p99"],
       "charts: latency percentiles", doc["hour"])
    ok(sum(p["completed"] for p in doc["points"]) * 30 >= len(worker_subs) - 0.01,
       "charts: the points' rates add up to the jobs")
    before = doc["hour"]["completed"]
    w.term()
    w = Worker(s, "c2", env={"ARBITER_RECONCILE_MS": "1h"})
    ok(wait_for(lambda: any(c["name"] == "c2" and c["version"] for c in
                            api(con, "/api/overview")["status"]["redis"]["consumers"]), 20),
       "the new worker's heartbeat", w.tail())
    eq(api(con, "/api/charts")["hour"]["completed"], before, "charts: the history survives the worker's restart")
    cons = api(con, "/api/overview")["status"]["redis"]["consumers"]
    eq({c["name"]: c["version"] for c in cons if c["name"] == "c2"}, {"c2": version},
       "replicas: the worker's version from its heartbeat")
    st = json.loads(cli(s, s.redis_url, "status", "--json").stdout)
    ok(any(c.get("version") == version for c in st["redis"]["consumers"]), "arbiter status --json has it too")
    # exact counts by status
    want = dict(a.q("SELECT status, count(*) FROM submissions GROUP BY status"))
    got = {k: v for k, v in api(con, "/api/overview")["by_status"].items() if v}
    eq(got, want, "overview: the counts by status are PostgreSQL's, exactly")

    # standings: the CLI's numbers
    lb = json.loads(cli(s, s.redis_url, "leaderboard", "--json", "--limit", "50").stdout)["rows"]
    doc = api(con, "/api/standings?limit=50")
    eq([(r["rank"], r["agent_id"], r["window_sum"]) for r in doc["rows"]],
       [(r["rank"], r["agent_id"], r["window_sum"]) for r in lb], "standings: arbiter leaderboard's rows")
    ok(doc["as_of"]["as_of"] and doc["as_of"]["results_not_applied"] >= 0, "standings: its as of", doc["as_of"])
    wt = json.loads(cli(s, s.redis_url, "weights", "--json").stdout)
    eq([(r["agent_id"], r["weight"]) for r in doc["weights"]["rows"]],
       [(r["agent_id"], r["weight"]) for r in wt["weights"]][:50], "standings: arbiter weights' weights")
    lb = json.loads(cli(s, s.redis_url, "leaderboard", "--json", "--challenge", ch_slug).stdout)["rows"]
    doc = api(con, "/api/standings?challenge=" + ch_slug)
    eq([(r["rank"], r["agent_id"]) for r in doc["rows"]], [(r["rank"], r["agent_id"]) for r in lb],
       "standings: a challenge's best scores as the CLI's")

    # dead-letter filters
    dead_id = a.r.xadd(a.dead, {"submission_id": a.failed_sub, "kind": "evaluate", "reason": "filter me",
                                "failed_at": str(int(time.time() * 1000))})
    ms = int(dead_id.split("-")[0])
    ids = lambda q: [e["id"] for e in api(con, "/api/dead?" + q)["entries"]]
    ok(dead_id in ids("challenge=" + ch_slug) and not ids("challenge=no-such-challenge"),
       "dead letters: filtered by challenge")
    eq(api(con, "/api/dead?challenge=" + ch_slug)["entries"][0]["challenge"], ch_slug, "each entry names its challenge")
    ok(dead_id in ids("since=%d&until=%d" % (ms - 1, ms + 1)) and not ids("since=%d" % (ms + 1))
       and dead_id not in ids("until=%d" % (ms - 1)), "dead letters: filtered by time")
    ok(ids("reason=filter+me") == [dead_id], "dead letters: filtered by reason")
    eq(con.post({"action": "drop", "id": dead_id}, {"X-Arbiter-Token": TOKEN})[0], 200, "dropped again")

    # requeue over HTTP: the token, the dry run, include failed
    _, failed2 = a.submit(a.ag, a.ch, {"x": 1}, enqueue=False)
    a.q("UPDATE submissions SET status = 'failed', last_error = 'x' WHERE id = %s", failed2)
    body = {"action": "requeue", "ids": [failed2, worker_subs[0], "not-a-uuid"]}
    eq(con.post(body)[0], 401, "requeue without the token is refused")
    code, doc = con.post(dict(body, dry_run=True), {"X-Arbiter-Token": TOKEN})
    ok(code == 200 and doc["jobs"] == 1 and doc["reevaluate"] == 1 and doc["skipped_count"] == 2
       and "would enqueue 1 job" in doc["done"], "requeue dry run: one re-evaluation, failed and bad id skipped", doc)
    eq(a.r.xlen(a.base + ":jobs:bulk"), 0, "a dry run enqueues nothing")
    code, doc = con.post(dict(body, include_failed=True, lane="live"), {"X-Arbiter-Token": TOKEN, "X-Arbiter-Operator": "ops-rq"})
    ok(code == 200 and doc["jobs"] == 2 and doc["reset_failed"] == 1, "requeue with include failed", doc)
    ok(a.wait_final([failed2], 30) and a.status(failed2) == "completed", "the failed submission is evaluated again")
    ok(wait_for(lambda: a.val("SELECT max(eval_seq) FROM evaluation_results WHERE submission_id = %s",
                              worker_subs[0]) == 2, 30), "the re-evaluation is committed (eval_seq 2)")
    ok('"operator":"ops-rq"' in con.output() and '"action":"requeue"' in con.output(), "requeue logged with who and what")
    eq(con.post({"action": "requeue", "challenge": ch_slug, "from": "2020-01-01T00:00:00Z"},
                {"X-Arbiter-Token": TOKEN})[0], 400, "requeue with two selections is refused")
    eq(con.post({"action": "requeue", "from": "2020-01-01T00:00:00", "to": "2030-01-01T00:00:00Z"},
                {"X-Arbiter-Token": TOKEN})[0], 400, "a time without a zone is refused")

    d = browser()
    try:
        # standings in the browser, a hostile agent name as text
        d.get(con.url + "#standings")
        ok(wait_for(lambda: "as of" in d.find_element(By.ID, "st-asof").text, 10), "browser: standings as of")
        ok(wait_for(lambda: HOSTILE in d.find_element(By.ID, "st-board").text, 10),
           "browser: the leaderboard shows the <script> name as text", d.find_element(By.ID, "st-board").text)
        ok("weights of all agents sum to 1" in d.find_element(By.ID, "st-wsum").text, "browser: the capped weights")
        eq(d.execute_script("return window.__pwned === undefined && document.querySelectorAll('main script, main img').length"),
           0, "browser: nothing of the hostile name ran")
        # a bulk requeue asks first, as scripts/requeue does
        d.get(con.url + "#requeue")
        d.execute_script("document.getElementById('auth').open = true")
        d.find_element(By.ID, "token").send_keys(TOKEN)
        d.find_element(By.CSS_SELECTOR, "input[name=rq-sel][value=challenge]").click()
        d.find_element(By.ID, "rq-challenge").send_keys(ch_slug)
        d.execute_script("document.getElementById('rq-elo').value = 'adjust'")
        n0 = a.val("SELECT count(*) FROM evaluation_results")
        d.find_element(By.ID, "rq-go").click()
        ok(wait_for(lambda: _alert_text(d), 10), "browser: a bulk requeue asks for a confirmation")
        text = _alert_text(d)
        ok("elo=adjust" in text, "browser: the question says why", text)
        d.switch_to.alert.dismiss()
        ok(wait_for(lambda: "aborted" in d.find_element(By.ID, "flash").text, 10), "browser: declined, nothing enqueued")
        eq(a.val("SELECT count(*) FROM evaluation_results"), n0, "declined: nothing enqueued, nothing evaluated")
        d.find_element(By.ID, "rq-go").click()
        ok(wait_for(lambda: _alert_text(d), 10), "browser: asked again")
        d.switch_to.alert.accept()
        ok(wait_for(lambda: "enqueued" in d.find_element(By.ID, "rq-out").text, 10),
           "browser: confirmed, enqueued", d.find_element(By.ID, "rq-out").text)
        nsub = a.val("SELECT count(*) FROM submissions s JOIN matches m ON m.id = s.match_id JOIN challenges c "
                     "ON c.id = m.challenge_id WHERE c.slug = %s AND EXISTS (SELECT 1 FROM evaluation_results r "
                     "WHERE r.submission_id = s.id)", ch_slug)
        ok(wait_for(lambda: a.val("SELECT count(*) FROM evaluation_results") >= n0 + nsub, 60),
           "the confirmed requeue's re-evaluations are committed", (n0, nsub))
        # the overview with its charts: the page's figures and the screenshot
        d.get(con.url)
        ok(wait_for(lambda: d.execute_script("var e = document.querySelector('[data-k=hour_completed]');"
                                             "return e && Number(e.textContent) >= %d;" % len(worker_subs)), 15),
           "browser: the charts' summary counts the jobs")
        ok(d.execute_script("return document.querySelectorAll('#chart-rate path, #chart-latency path').length") >= 2,
           "browser: the charts are drawn")
        shown = shown_figures(d)
        want = dict(a.q("SELECT status, count(*) FROM submissions GROUP BY status"))
        eq(shown.get("count_completed"), str(want.get("completed", 0)), "browser: the exact completed count")
        ok(version in d.find_element(By.ID, "replicas").text, "browser: the replicas show the version")
        weight = page_weight(d)
        diag("page weight with the charts: %d bytes" % weight)
        ok(0 < weight <= 200 * 1024, "the page with its charts weighs at most 200 KB", weight)
        shot = os.environ.get("ARBITER_CONSOLE_SCREENSHOT") or os.path.join(s.tmp, "console.png")
        d.save_screenshot(shot)
        diag("screenshot: %s" % shot)
        eq(console_errors(d), [], "browser: no console errors on the new panels")
    finally:
        d.quit()
    views_answer_fast(con, ("/api/standings", "/api/charts", "/api/dead?challenge=" + ch_slug))
    return w


def _alert_text(d):
    try:
        return d.switch_to.alert.text
    except Exception:
        return None


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ch = a.challenge(SPEC_X, {"x": 1})
        ag = a.agent(name=HOSTILE)
        a.ag, a.ch = ag, ch
        ch_slug = a.val("SELECT slug FROM challenges WHERE id = %s", ch)
        # a failed submission with its dead letter, both with hostile text
        _, a.failed_sub = a.submit(ag, ch, {"x": HOSTILE}, enqueue=False)
        a.q("UPDATE submissions SET status = 'failed', attempts = 3, last_error = %s WHERE id = %s",
            "sandbox exploded " + HOSTILE, a.failed_sub)
        a.failed_dead = a.r.xadd(a.dead, {"submission_id": a.failed_sub, "kind": "evaluate",
                                          "enqueued_at": str(int(time.time() * 1000)),
                                          "reason": "sandbox exploded " + HOSTILE,
                                          "failed_at": str(int(time.time() * 1000)),
                                          "original_id": "1-0", "worker_id": "w0"})
        # the answer of the failed submission wins when replayed: x = 1 is the ground truth
        a.q("UPDATE submissions SET answer = jsonb_build_object('x', 1, 'note', %s::text) WHERE id = %s",
            HOSTILE, a.failed_sub)
        # no reconciler pass during the test: the one queued submission without a job stays so
        w = Worker(s, "c1", env={"ARBITER_RECONCILE_MS": "1h"})
        ok(wait_for(lambda: a.r.exists(a.stream), 20), "worker up", w.tail())
        eq(cli(s, s.redis_url, "pause").returncode, 0, "paused for stable counts")
        subs = [a.submit(ag, ch, {"x": 1 if i % 2 else 0})[1] for i in range(40)]
        a.submit(ag, ch, {"x": 1}, enqueue=False)      # one queued without a job: queued stays 1
        con = Console(s, TOKEN)
        ro = Console(s)
        try:
            http_checks(s, a, con, ro)
            browser_checks(s, a, con, subs)
            w = panel_checks(s, a, con, w, ch_slug, subs)
        finally:
            con.stop()
            ro.stop()
            w.term()
        a.close()
    done()


if __name__ == "__main__":
    main()
