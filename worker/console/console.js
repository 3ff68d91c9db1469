// arbiter console: the page's script. Reads the JSON API of `arbiter console` on its own
// origin and builds the views with DOM nodes and textContent only: every value (answers,
// reasons, names) is shown as text, never parsed as markup. Actions are POSTs carrying
// the operator token in the X-Arbiter-Token header.
"use strict";
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var timer = null, lastAt = 0, deadBefore = null;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function row(tbody, cells) {
    var tr = el("tr");
    cells.forEach(function (c) {
      var td = el("td");
      if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? "-" : String(c);
      tr.appendChild(td);
    });
    tbody.appendChild(tr);
    return tr;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  function dur(ms) {
    if (ms === null || ms === undefined) return "-";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(1) + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + Math.floor(s % 60) + "s";
    return Math.floor(s / 3600) + "h" + Math.floor(s % 3600 / 60) + "m";
  }
  function flash(msg, bad) { var f = $("flash"); f.textContent = msg; f.className = bad ? "bad" : ""; }
  function get(path) {
    return fetch(path, { cache: "no-store", credentials: "omit" }).then(function (r) { return r.json(); });
  }
  function action(body, confirmText) {
    if (confirmText && !window.confirm(confirmText)) return Promise.resolve(null);
    var h = { "Content-Type": "application/json" };
    var t = $("token").value;
    if (t) h["X-Arbiter-Token"] = t;
    var who = $("operator").value;
    if (who) h["X-Arbiter-Operator"] = who;
    return fetch("/api/action", { method: "POST", headers: h, body: JSON.stringify(body), credentials: "omit" })
      .then(function (r) { return r.json().then(function (j) { return { code: r.status, j: j }; }); })
      .then(function (res) {
        if (res.code === 200) flash(res.j.done, false);
        else flash("refused (" + res.code + "): " + res.j.error, true);
        return res;
      });
  }

  // ---- overview ----
  function card(label, value, key, note) {
    var c = el("div", null, "card");
    var b = el("b", value === null || value === undefined ? "-" : value);
    b.setAttribute("data-k", key);
    c.appendChild(b);
    c.appendChild(el("span", label));
    if (note) { c.appendChild(el("br")); c.appendChild(el("small", note, "muted")); }
    return c;
  }
  function renderOverview(d) {
    var rs = d.status.redis || {}, pg = d.status.postgres || {}, sp = d.delayed_split || {};
    $("mode").textContent = d.read_only ? "read-only (no token configured)" : "actions need the token";
    var cards = clear($("cards"));
    cards.appendChild(card("in the stream", rs.stream_length, "stream_length", rs.oldest_entry_age_ms !== null && rs.oldest_entry_age_ms !== undefined ? "oldest " + dur(rs.oldest_entry_age_ms) : ""));
    cards.appendChild(card("waiting (lag)", rs.lag, "lag"));
    cards.appendChild(card("in flight (pending)", rs.pending, "pending"));
    cards.appendChild(card("bulk lane", rs.bulk_lane, "bulk_lane"));
    cards.appendChild(card("judge lane", rs.judge_lane, "judge_lane"));
    cards.appendChild(card("delayed", rs.delayed, "delayed", sp.error ? sp.error : "rate limit " + sp.rate_limit + ", paused " + sp.pause + ", retry " + sp.retry + ", image " + sp.image));
    cards.appendChild(card("dead letters", rs.dead, "dead"));
    cards.appendChild(card("queued (db)", pg.queued, "queued"));
    cards.appendChild(card("evaluating (db)", pg.evaluating, "evaluating"));
    var bs = d.by_status || {};
    ["completed", "failed", "rejected"].forEach(function (k) {
      cards.appendChild(card(k + " (db)", bs.error ? null : (bs[k] || 0), "count_" + k, bs.error ? bs.error : "exact"));
    });
    cards.appendChild(card("submissions (estimate)", d.table ? d.table.submissions_estimate : null, "submissions_estimate"));
    cards.appendChild(card("schema version", pg.schema_version, "schema_version", "needs " + pg.schema_needed));

    var probs = clear($("problems"));
    if (!rs.ok) probs.appendChild(el("li", "Redis: " + rs.error, "bad"));
    if (!pg.ok) probs.appendChild(el("li", "PostgreSQL: " + pg.error, "bad"));
    if (pg.ok && !pg.schema_current) probs.appendChild(el("li", "schema " + pg.schema_version + " is older than " + pg.schema_needed + ": run arbiter migrate", "bad"));
    if (rs.ok && !rs.group_exists) probs.appendChild(el("li", "no consumer group yet (no worker has started)", "bad"));
    if (rs.paused) probs.appendChild(el("li", "every replica is paused", "bad"));
    if (!probs.firstChild) probs.appendChild(el("li", "none: Redis and PostgreSQL answer, schema current", "good"));

    var tb = clear($("replicas").tBodies[0]);
    (rs.consumers || []).forEach(function (c) { row(tb, [c.name, c.pending, dur(c.idle_ms), c.last_seen_ms === null ? "no heartbeat" : dur(c.last_seen_ms) + " ago", c.version || "unknown"]); });
    var ps = rs.paused ? "every replica paused" : "not paused";
    if (rs.paused_challenges && rs.paused_challenges.length) ps += "; paused challenges: " + rs.paused_challenges.join(", ");
    $("pause-state").textContent = ps;

    var ev = clear($("evaluators").tBodies[0]);
    Object.keys(pg.last_hour || {}).forEach(function (k) {
      var e = pg.last_hour[k];
      row(ev, [k, e.results, e.win, e.draw, e.loss, e.avg_score.toFixed(1)]);
    });
    var sv = clear($("servers"));
    [["prefix", d.status.prefix], ["Redis", rs.url], ["stream", rs.stream], ["PostgreSQL", pg.url], ["version", d.version], ["view took", d.took_ms + " ms"]].forEach(function (p) {
      sv.appendChild(el("dt", p[0])); sv.appendChild(el("dd", p[1]));
    });
    lastAt = Date.now();
  }
  function loadOverview() {
    return get("/api/overview").then(renderOverview).catch(function (e) { $("fresh").textContent = "console unreachable: " + e; $("fresh").className = "bad"; });
  }
  function tick() {
    if (lastAt) { $("fresh").textContent = "updated " + ((Date.now() - lastAt) / 1000).toFixed(0) + "s ago"; $("fresh").className = "muted"; }
  }

  // ---- charts: hand-drawn SVG (no library, nothing fetched from elsewhere) ----
  var SVG = "http://www.w3.org/2000/svg", chartsAt = 0;
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function fmt(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3); }
  function drawChart(svg, pts, series) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var W = 600, H = 170, L = 44, R = 8, T = 18, B = 22, max = 0;
    pts.forEach(function (p) { series.forEach(function (s) { if (p[s] !== null && p[s] > max) max = p[s]; }); });
    if (max <= 0) max = 1;
    var x = function (i) { return L + (W - L - R) * i / Math.max(pts.length - 1, 1); };
    var y = function (v) { return T + (H - T - B) * (1 - v / max); };
    svg.appendChild(svgEl("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, "class": "axis" }));
    svg.appendChild(svgEl("line", { x1: L, y1: T, x2: L, y2: H - B, "class": "axis" }));
    svg.appendChild(svgEl("text", { x: 2, y: T + 4 }, fmt(max)));
    svg.appendChild(svgEl("text", { x: 2, y: H - B }, "0"));
    svg.appendChild(svgEl("text", { x: L, y: H - 6 }, "-60 min"));
    svg.appendChild(svgEl("text", { x: (L + W) / 2 - 20, y: H - 6 }, "-30 min"));
    svg.appendChild(svgEl("text", { x: W - R - 22, y: H - 6 }, "now"));
    series.forEach(function (s, k) {
      var d = "", pen = false;
      pts.forEach(function (p, i) {
        if (p[s] === null || p[s] === undefined) { pen = false; return; }
        d += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(p[s]).toFixed(1);
        pen = true;
      });
      if (d) svg.appendChild(svgEl("path", { d: d, "class": "line s-" + s }));
      // a point without neighbours draws no line: a dot shows it
      pts.forEach(function (p, i) {
        var alone = p[s] !== null && p[s] !== undefined && (i === 0 || pts[i - 1][s] === null) && (i === pts.length - 1 || pts[i + 1][s] === null);
        if (alone) svg.appendChild(svgEl("circle", { cx: x(i).toFixed(1), cy: y(p[s]).toFixed(1), r: 2.5, "class": "s-" + s }));
      });
      svg.appendChild(svgEl("text", { x: L + 10 + k * 90, y: 12, "class": "s-" + s }, s));
    });
  }
  function renderCharts(d) {
    var h = d.hour || {}, lat = function (v) { return v === null || v === undefined ? "-" : fmt(v) + " s"; };
    var sum = $("chart-summary");
    clear(sum);
    if (d.error) { sum.appendChild(el("span", d.error, "bad")); return; }
    [["completed", h.completed], ["failed", h.failed], ["rejected", h.rejected]].forEach(function (p) {
      var b = el("b", p[1]); b.setAttribute("data-k", "hour_" + p[0]); sum.appendChild(b); sum.appendChild(document.createTextNode(" " + p[0] + ", "));
    });
    sum.appendChild(document.createTextNode("latency p50 " + lat(h.p50) + ", p90 " + lat(h.p90) + ", p99 " + lat(h.p99) + " (from " + d.entries + " worker reports, " + d.took_ms + " ms)"));
    drawChart($("chart-rate"), d.points || [], ["completed", "failed", "rejected"]);
    drawChart($("chart-latency"), d.points || [], ["p50", "p90", "p99"]);
  }
  function loadCharts(force) {
    if (!force && Date.now() - chartsAt < 10000) return Promise.resolve();
    chartsAt = Date.now();
    return get("/api/charts").then(renderCharts);
  }

  // ---- a submission's story ----
  function kv(obj, keys) {
    var dl = el("dl");
    keys.forEach(function (k) { dl.appendChild(el("dt", k)); var v = obj[k]; dl.appendChild(el("dd", v === null || v === undefined ? "-" : (typeof v === "object" ? JSON.stringify(v) : v))); });
    return dl;
  }
  function renderSubmission(d) {
    var out = clear($("sub-out"));
    if (d.error) { out.appendChild(el("p", d.error, "bad")); return; }
    if (d.db_error) out.appendChild(el("p", d.db_error, "bad"));
    if (d.found === false) out.appendChild(el("p", "no such submission in PostgreSQL", "bad"));
    if (d.row) {
      out.appendChild(el("h2", "Row"));
      out.appendChild(kv(d.row, ["id", "status", "attempts", "last_error", "reject_reason", "submitted_at", "agent", "challenge", "match_id", "match_status", "match_result", "match_score", "elo_before", "elo_after", "elo_change", "attempt_number", "answer_bytes"]));
      out.appendChild(el("h2", "Answer (first 4000 characters)"));
      var pre = el("pre", d.row.answer); pre.id = "sub-answer"; out.appendChild(pre);
      var rq = el("button", "Requeue this submission…"); rq.type = "button"; rq.id = "sub-requeue";
      rq.onclick = function () { $("rq-ids").value = d.row.id; document.querySelector("input[name=rq-sel][value=ids]").checked = true; location.hash = "#requeue"; };
      out.appendChild(rq);
    }
    out.appendChild(el("h2", "Where its job is now"));
    var rd = d.redis || {};
    if (rd.error) out.appendChild(el("p", rd.error, "bad"));
    var places = rd.places || [];
    if (!places.length) out.appendChild(el("p", "not in Redis (scanned: " + JSON.stringify(rd.scanned) + ", at most " + rd.scan_limit + " per key)", "muted"));
    var t = el("table"); var tb = el("tbody"); t.appendChild(tb); t.id = "sub-places";
    places.forEach(function (p) {
      var what = p.where;
      if (p.consumer) what += " — pending for " + p.consumer + " for " + dur(p.idle_ms) + ", " + p.deliveries + " deliveries";
      else if (p.where === "stream" || p.where === "bulk lane" || p.where === "judge lane") what += " — waiting, not delivered yet";
      if (p.due_in_ms !== undefined) what += " — " + p.cause + ", due in " + dur(Math.max(p.due_in_ms, 0));
      if (p.fields && p.fields.reason) what += " — reason: " + p.fields.reason;
      row(tb, [what, p.id || p.fields._token || "", JSON.stringify(p.fields)]);
    });
    if (places.length) out.appendChild(t);
    out.appendChild(el("h2", "Evaluations"));
    (d.evaluations || []).forEach(function (e) {
      out.appendChild(el("h3", "#" + e.eval_seq + " " + e.evaluator + ": " + e.result + ", score " + e.score + (e.verified ? " (verified)" : "") + ", Elo " + e.elo_before + " " + (e.elo_change >= 0 ? "+" : "") + e.elo_change + " (k " + e.k_factor + ")"));
      var dt = el("table"), db = el("tbody"); dt.appendChild(db);
      row(db, ["dimension", "score", "weight", "weighted", "judge's reasoning"]).className = "muted";
      (e.dimensions || []).forEach(function (x) { row(db, [x.key, x.score, x.weight, x.weighted, x.reasoning]); });
      out.appendChild(dt);
      out.appendChild(el("pre", JSON.stringify({ breakdown: e.score_breakdown, warnings: e.submission_warnings, violations: e.constraint_violations, worker: e.worker_id, job: e.job_id, started_at: e.started_at, completed_at: e.completed_at }, null, 2)));
    });
    if (d.evaluations && !d.evaluations.length) out.appendChild(el("p", "none yet", "muted"));
    out.appendChild(el("p", "view took " + d.took_ms + " ms", "muted"));
  }
  function loadSubmission(id) {
    $("sub-id").value = id;
    return get("/api/submission?id=" + encodeURIComponent(id)).then(renderSubmission);
  }

  // ---- dead letters ----
  function renderDead(d, append) {
    var tb = $("dead-list").tBodies[0];
    if (!append) clear(tb);
    $("dead-summary").textContent = (d.error ? d.error + "; " : "") + d.total + " dead letters (" + d.scanned + " looked at, " + d.took_ms + " ms)";
    (d.entries || []).forEach(function (e) {
      var f = e.fields, b = el("span");
      var v = el("button", "View"); v.type = "button"; v.onclick = function () { showDead(e.id); }; b.appendChild(v);
      var r = el("button", "Replay"); r.type = "button"; r.className = "replay"; r.onclick = function () { action({ action: "replay", id: e.id }, "Replay dead letter " + e.id + " to the jobs stream (and set its submission back to queued)?").then(function () { loadDead(false); }); }; b.appendChild(r);
      var x = el("button", "Drop"); x.type = "button"; x.className = "drop"; x.onclick = function () { action({ action: "drop", id: e.id }, "Permanently drop dead letter " + e.id + "?").then(function () { loadDead(false); }); }; b.appendChild(x);
      var tr = row(tb, [e.id, f.submission_id, e.challenge, f.failed_at ? new Date(Number(f.failed_at)).toISOString() : "-", f.reason, b]);
      tr.setAttribute("data-id", e.id);
    });
    deadBefore = d.next_before;
    $("dead-more").hidden = !deadBefore;
  }
  function loadDead(more) {
    var q = "/api/dead?limit=50&reason=" + encodeURIComponent($("dead-reason").value) + "&challenge=" + encodeURIComponent($("dead-challenge").value.trim());
    // datetime-local values are read as UTC; the server takes milliseconds (stream ids are times)
    [["since", "dead-since"], ["until", "dead-until"]].forEach(function (p) {
      var v = $(p[1]).value;
      if (v) { var ms = Date.parse(v + (v.length === 16 ? ":00Z" : "Z")); if (!isNaN(ms)) q += "&" + p[0] + "=" + ms; }
    });
    if (more && deadBefore) q += "&before=" + encodeURIComponent(deadBefore);
    return get(q).then(function (d) { renderDead(d, more); });
  }
  function showDead(id) {
    return get("/api/dead/entry?id=" + encodeURIComponent(id)).then(function (d) { $("dead-entry").textContent = JSON.stringify(d, null, 2); });
  }

  // ---- standings ----
  function renderStandings(d) {
    var a = d.as_of;
    $("st-asof").textContent = d.db_error ? d.db_error : "as of " + a.as_of + " (lag " + a.lag_seconds.toFixed(1) + " s; " + a.results_not_applied + " results not applied yet" + (a.agents_waiting_for_backfill ? "; " + a.agents_waiting_for_backfill + " agents wait for the backfill" : "") + ")";
    $("st-asof").className = d.db_error || (a && a.results_not_applied) ? "bad" : "muted";
    $("st-title").textContent = "Leaderboard by " + d.by + (d.challenge ? " on " + d.challenge : "") + (d.error ? ": " + d.error : "");
    var t = $("st-board"), rows = d.rows || [];
    var cols = rows.length ? Object.keys(rows[0]) : [];
    var hr = el("tr"); cols.forEach(function (k) { hr.appendChild(el("th", k.replace(/_/g, " "))); });
    clear(t.tHead).appendChild(hr);
    var tb = clear(t.tBodies[0]);
    rows.forEach(function (r) { row(tb, cols.map(function (k) { return r[k]; })); });
    if (!rows.length) row(tb, ["no agents"]);
    var w = d.weights || {};
    $("st-wsum").textContent = w.error ? w.error : "cap " + w.cap + " (effective " + w.effective_cap + "); " + w.agents + " agents, " + w.positive + " with a positive window sum, " + w.capped + " at the cap; the weights of all agents sum to 1";
    var wb = clear($("st-weights").tBodies[0]);
    (w.rows || []).forEach(function (r) { row(wb, [r.agent_id, r.name, r.window_sum, r.weight]); });
  }
  function loadStandings() {
    var q = "/api/standings?limit=50&by=" + encodeURIComponent($("st-by").value) + "&challenge=" + encodeURIComponent($("st-challenge").value.trim()) + "&cap=" + encodeURIComponent($("st-cap").value.trim());
    return get(q).then(renderStandings);
  }

  // ---- requeue ----
  function requeueBody(dry) {
    var sel = document.querySelector("input[name=rq-sel]:checked").value;
    var b = { action: "requeue", elo: $("rq-elo").value, lane: $("rq-lane").value, rejudge: $("rq-rejudge").checked, include_failed: $("rq-failed").checked, dry_run: dry };
    if (sel === "ids") b.ids = $("rq-ids").value.split(/[\s,]+/).filter(function (x) { return x; });
    else if (sel === "challenge") b.challenge = $("rq-challenge").value.trim();
    else { b.from = $("rq-from").value.trim(); b.to = $("rq-to").value.trim(); }
    return b;
  }
  function showRequeue(res) {
    if (!res) return;
    $("rq-out").textContent = res.j.done || res.j.error;
    $("rq-out").className = res.code === 200 ? "" : "bad";
    var tb = clear($("rq-skipped").tBodies[0]);
    (res.j.skipped || []).forEach(function (x) { row(tb, [x.id, x.why]); });
    if (res.j.skipped_count > (res.j.skipped || []).length) row(tb, ["...", (res.j.skipped_count - res.j.skipped.length) + " more"]);
  }
  function requeue(dry) {
    var b = requeueBody(dry);
    return action(b).then(function (res) {
      // a bulk requeue: the server asks, as scripts/requeue does; nothing was done yet
      if (res && res.code === 409 && res.j.confirm) {
        if (!window.confirm(res.j.confirm)) { flash("aborted; nothing enqueued", true); showRequeue(res); return null; }
        b.confirmed = true;
        return action(b);
      }
      return res;
    }).then(showRequeue);
  }

  // ---- navigation ----
  function route() {
    var h = location.hash || "#overview";
    var view = h.indexOf("#submission") === 0 ? "submission" : h.indexOf("#dead") === 0 ? "dead" : h.indexOf("#standings") === 0 ? "standings" : h.indexOf("#requeue") === 0 ? "requeue" : "overview";
    ["overview", "submission", "dead", "standings", "requeue"].forEach(function (v) { $("view-" + v).hidden = v !== view; });
    if (timer) { clearInterval(timer); timer = null; }
    if (view === "overview") { loadOverview(); loadCharts(true); timer = setInterval(function () { loadOverview(); loadCharts(false); }, 2000); }
    if (view === "submission") { var m = /^#submission=(.+)$/.exec(h); if (m) loadSubmission(decodeURIComponent(m[1])); }
    if (view === "dead") loadDead(false);
    if (view === "standings") loadStandings();
  }
  document.addEventListener("DOMContentLoaded", function () {
    $("sub-form").addEventListener("submit", function (ev) { ev.preventDefault(); location.hash = "#submission=" + encodeURIComponent($("sub-id").value.trim()); });
    $("dead-form").addEventListener("submit", function (ev) { ev.preventDefault(); loadDead(false); });
    $("rq-form").addEventListener("submit", function (ev) { ev.preventDefault(); requeue(false); });
    $("rq-dry").addEventListener("click", function () { requeue(true); });
    $("st-form").addEventListener("submit", function (ev) { ev.preventDefault(); loadStandings(); });
    $("dead-more").addEventListener("click", function () { loadDead(true); });
    $("pause-all").addEventListener("click", function () { action({ action: "pause" }, "Pause every replica?").then(loadOverview); });
    $("resume-all").addEventListener("click", function () { action({ action: "resume" }).then(loadOverview); });
    $("pause-one").addEventListener("click", function () { action({ action: "pause", challenge: $("pause-slug").value }).then(loadOverview); });
    $("resume-one").addEventListener("click", function () { action({ action: "resume", challenge: $("pause-slug").value }).then(loadOverview); });
    window.addEventListener("hashchange", route);
    setInterval(tick, 1000);
    route();
  });
})();
