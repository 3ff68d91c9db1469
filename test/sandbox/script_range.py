# Out-of-range scores: clamped to 0..1000 with a warning quoting them as written.
import json
print(json.dumps({"scores": {"correctness": 1001, "style": -0.4}}))
