#!/usr/bin/python3
"""The spec cache is bounded by bytes (TAP on stdout).

Six challenges whose ground truths hold 600,000 numbers each (about 34 MB
each once parsed, by the cache's estimate), one submission on each, one after
the other, with ARBITER_SPEC_CACHE_BYTES = 64 MiB. The worker's resident
memory must stay near what two such entries need, not grow with every
challenge. Before #16 the cache kept every parsed ground truth: here 37, 66,
89, 111, 134, 157 MB after each challenge; now it levels off (about 74 MB).
"""
import json
import os
import sys
import time

from services import Services
from workerkit import SPEC_X, Arena, Worker, diag, done, eq, migrate, ok

N = 600000
LIMIT_MB = 120


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main():
    with Services() as s:
        migrate(s)
        a = Arena(s)
        ag = a.agent()
        gt = json.dumps({"x": 1, "big": list(range(N))})
        chs = [a.challenge(SPEC_X, None, difficulty="contender") for _ in range(6)]
        for c in chs:
            a.q("UPDATE challenges SET ground_truth = %s::jsonb WHERE id = %s", gt, c)
        # Under AddressSanitizer freed memory sits in a quarantine (256 MB) before
        # it is reused: keep it small, or RSS measures the quarantine.
        asan = ":".join(x for x in (os.environ.get("ASAN_OPTIONS"), "quarantine_size_mb=4") if x)
        w = Worker(s, "cache-1", env={"ARBITER_SPEC_CACHE_BYTES": str(64 << 20),
                                      "ARBITER_RECONCILE_MS": "600000", "ASAN_OPTIONS": asan})
        time.sleep(1)
        base = rss_mb(w.proc.pid)
        peaks = []
        for c in chs:
            _, sid = a.submit(ag, c, {"x": 1})
            ok(a.wait_final([sid], 60), "submission on a 600,000-number ground truth evaluated",
               w.tail())
            peaks.append(rss_mb(w.proc.pid))
        diag("RSS: start %.0f MB, after each challenge %s MB" % (base, [round(p) for p in peaks]))
        ok(max(peaks) < LIMIT_MB, "RSS stays bounded: peak %.0f MB < %d MB" % (max(peaks), LIMIT_MB))
        ok(peaks[-1] < peaks[1] * 1.5 + 20,
           "no growth with each new challenge (%.0f MB after the 2nd, %.0f after the 6th)"
           % (peaks[1], peaks[-1]))
        eq(w.term(30), 0, "worker exits 0", w.tail())
        a.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
