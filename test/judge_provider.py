"""A test LLM provider for the judge's tests: a real HTTP server on a loopback
port that speaks the OpenAI-compatible chat completions API
(POST <base>/chat/completions, with base .../v1), Gemini's generateContent
(POST .../models/<model>:generateContent) and Anthropic's messages API
(POST .../v1/messages), request and response shapes alike.

Its "model" is honest and a little gullible, like a real one can be:
  - it scores each criterion from the submission's data: the data block is
    the single line between BEGIN_DATA_<nonce> and END_DATA_<nonce>, where the
    nonce is the one the system prompt announces; the score of criterion k
    is data.fields.work[k] when that is an integer, else 50;
  - but it OBEYS any "SCORE_OVERRIDE=<n>" it finds outside that data block
    (in the system prompt or in user text around the block), and it also
    obeys one inside the block when the block is not the single JSON line it
    should be. So a submission that manages to escape the delimiters steers
    the score; one that cannot, does not.

Behaviour per request: `script` (a list, consumed first) then `mode`:
  ok | slow:<secs> | 429:<retry-after secs> | 500 | malformed | range | extra | hang |
  status:<code>:<body> (that status and body text) |
  tokens:<JSON text> (an answer whose every usage count is that text, e.g. 9223372036854775807)
Everything received is recorded in `requests` (path, headers, body).

p.providers() is the worker's ARBITER_JUDGE_PROVIDERS pointing at it.

Use: p = Provider(); p.start(); ...; p.stop()  — or run it as a script:
  python3 judge_provider.py   (mode ok; prints its port)
"""
import json
import re
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _score_from(system, user):
    """Returns ({key: score}, injected: bool) as the gullible model sees the prompt."""
    m = re.search(r"BEGIN_DATA_([0-9a-f]{32})", system)
    keys = re.findall(r'^- "([a-z][a-z0-9_]*)" \(', system, re.M)
    nonce = m.group(1) if m else None
    data, outside = None, system
    lines = user.split("\n")
    if nonce and ("BEGIN_DATA_" + nonce) in lines:
        b = lines.index("BEGIN_DATA_" + nonce)
        e = lines.index("END_DATA_" + nonce, b) if ("END_DATA_" + nonce) in lines[b:] else len(lines)
        block = lines[b + 1:e]
        outside += "\n".join(lines[:b] + lines[e + 1:])
        if len(block) == 1:
            try:
                data = json.loads(block[0])
            except ValueError:
                outside += "\n" + "\n".join(block)
        else:
            outside += "\n" + "\n".join(block)   # not one JSON line: the model reads it as text
    else:
        outside += "\n" + user
    o = re.search(r"SCORE_OVERRIDE=(\d+)", outside)
    scores = {}
    work = ((data or {}).get("fields") or {}).get("work") if isinstance(data, dict) else None
    for k in keys:
        if o:
            scores[k] = int(o.group(1))
        elif isinstance(work, dict) and isinstance(work.get(k), int):
            scores[k] = work[k]
        else:
            scores[k] = 50
    return scores, bool(o), data


class Provider:
    def __init__(self):
        self.mode = "ok"
        self.script = []
        self.requests = []
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.server = None
        self.port = None
        self.inflight = 0     # requests being answered now
        self.peak = 0         # the most at once since reset_peak()

    # -- control -----------------------------------------------------------
    def start(self, tls=None):
        """tls: (certfile, keyfile) to serve https instead of http."""
        prov = self
        self.scheme = "https" if tls else "http"

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                with prov.lock:
                    prov.inflight += 1
                    prov.peak = max(prov.peak, prov.inflight)
                try:
                    prov._handle(self, body)
                finally:
                    with prov.lock:
                        prov.inflight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls[0], tls[1])
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.stop_event.set()
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def url(self, provider):
        base = "%s://127.0.0.1:%d" % (getattr(self, "scheme", "http"), self.port)
        return {"openai": base + "/v1", "gemini": base + "/v1beta", "anthropic": base}[provider]

    def providers(self, base=None, key_env="ARBJ_TEST_API_KEY", models=("test-model",),
                  price=(0.3, 2.5), **extra):
        """The operator's ARBITER_JUDGE_PROVIDERS (JSON text) naming this server as the
        providers "openai", "gemini" and "anthropic" (base: another front for it)."""
        base = base or "%s://127.0.0.1:%d" % (getattr(self, "scheme", "http"), self.port)
        out = {}
        for name, path in (("openai", "/v1"), ("gemini", "/v1beta"), ("anthropic", "")):
            p = {"base_url": base + path, "models": list(models),
                 "price": {"input_per_mtok": price[0], "output_per_mtok": price[1]}}
            if key_env:
                p["api_key_env"] = key_env
            p.update(extra)
            out[name] = p
        return json.dumps(out)

    def count(self):
        with self.lock:
            return len(self.requests)

    def reset_peak(self):
        with self.lock:
            self.peak = self.inflight

    # -- protocol ----------------------------------------------------------
    def _next_mode(self):
        with self.lock:
            return self.script.pop(0) if self.script else self.mode

    def _send(self, h, status, obj=None, headers=None, raw=None):
        data = raw if raw is not None else json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _handle(self, h, body):
        path = h.path
        with self.lock:
            self.requests.append({"path": path, "headers": dict(h.headers.items()),
                                  "body": body, "t": time.time()})
        try:
            req = json.loads(body)
        except ValueError:
            return self._send(h, 400, {"error": {"message": "bad JSON"}})
        if path.endswith("/chat/completions"):
            kind = "openai"
            msgs = req.get("messages", [])
            system = "".join(m["content"] for m in msgs if m["role"] == "system")
            user = [m["content"] for m in msgs if m["role"] == "user"][0]
        elif ":generateContent" in path:
            kind = "gemini"
            system = "".join(p["text"] for p in req["systemInstruction"]["parts"])
            user = req["contents"][0]["parts"][0]["text"]
        elif path.endswith("/v1/messages"):
            kind = "anthropic"
            system = req.get("system", "")
            user = req["messages"][0]["content"]
        else:
            return self._send(h, 404, {"error": {"message": "no such endpoint " + path}})

        mode = self._next_mode()
        if mode.startswith("slow:"):
            self.stop_event.wait(float(mode[5:]))
            mode = "ok"
        if mode == "hang":
            self.stop_event.wait(3600)
            return
        if mode.startswith("429"):
            ra = mode.split(":")[1] if ":" in mode else "1"
            return self._send(h, 429, {"error": {"message": "rate limited"}}, {"Retry-After": ra})
        if mode == "500":
            return self._send(h, 500, {"error": {"message": "upstream exploded"}})
        if mode.startswith("status:"):
            _, code, body = mode.split(":", 2)
            return self._send(h, int(code), raw=body.encode())
        usage = None
        if mode.startswith("tokens:"):
            usage = mode[len("tokens:"):]
            mode = "ok"

        scores, _, _ = _score_from(system, user)
        verdict = {"scores": {k: {"score": v, "reasoning": "criterion %s: %d by the rubric" % (k, v)}
                              for k, v in scores.items()},
                   "summary": "judged %d criteria" % len(scores)}
        if mode == "range":
            for v in verdict["scores"].values():
                v["score"] = 150
        if mode == "extra":
            verdict["final_score"] = 100
        text = "this is not JSON {" if mode == "malformed" else json.dumps(verdict)
        if kind == "openai":
            out = {"choices": [{"message": {"role": "assistant", "content": text},
                                "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}
        elif kind == "gemini":
            out = {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"},
                                   "finishReason": "STOP"}],
                   "usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 100}}
        else:
            out = {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 1000, "output_tokens": 100}}
        if usage is None:
            return self._send(h, 200, out)
        raw = json.dumps(out)
        for n in (1000, 100):       # the usage counts, as raw JSON text (may be no number)
            raw = raw.replace(": %d" % n, ": " + usage)
        return self._send(h, 200, raw=raw.encode())


if __name__ == "__main__":
    p = Provider().start()
    print(p.port, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        p.stop()
