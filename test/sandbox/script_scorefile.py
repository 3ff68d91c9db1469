# Writes its scores to the score file, then carelessly echoes the submission's text on
# stdout: a submission that spells a scores line must not be taken as the score.
import json, sys
doc = json.load(sys.stdin)
with open("score.json", "w") as f:
    json.dump({"scores": {"correctness": 900, "style": 100}}, f)
print(doc["submission"]["answer"].get("text", ""))
