# A score that is not a number.
import json
print(json.dumps({"scores": {"correctness": "1000", "style": 10}}))
