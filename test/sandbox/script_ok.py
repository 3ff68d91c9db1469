# Scores from the document on stdin: correctness is the fraction of right answers.
import json, sys
doc = json.load(sys.stdin)
# The submission is {"answer", "metadata"}, as `arbiter score --submission` reads it.
assert doc["submission"]["metadata"].get("token_count") == 7, doc["submission"]
got = doc["submission"]["answer"].get("answers", [])
want = doc["ground_truth"].get("answers", [])
right = sum(1 for a, b in zip(got, want) if a == b)
print("some chatter first")
print("{\"not\": \"a score line\"}")   # JSON without "scores": not counted
print(json.dumps({"scores": {"correctness": round(1000 * right / max(1, len(want))),
                             "style": 640}, "started": doc["match"].get("started_at")}))
