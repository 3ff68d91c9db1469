# Out-of-range score.
import json
print(json.dumps({"scores": {"correctness": 1001, "style": 10}}))
