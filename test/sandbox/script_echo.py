# The stdout form, carelessly: prints its own score line, then echoes the submission's
# text. A submission that spells a score line adds a second one; that is an
# internal_error, never the submission's score.
import json, sys
doc = json.load(sys.stdin)
print(json.dumps({"scores": {"correctness": 100, "style": 100}}))
print(doc["submission"]["answer"].get("text", ""))
