# Prints a score, then crashes: a crash is an internal_error, never a score.
import json, sys
print(json.dumps({"scores": {"correctness": 1000, "style": 1000}}))
sys.stdout.flush()
raise RuntimeError("boom")
