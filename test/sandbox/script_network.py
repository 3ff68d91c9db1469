# Scores 1000 only if it can reach 127.0.0.1:<ground_truth.port>.
import json, socket, sys
doc = json.load(sys.stdin)
ok = 0
try:
    s = socket.create_connection(("127.0.0.1", doc["ground_truth"]["port"]), timeout=1)
    s.sendall(b"hello from the sandbox\n")
    ok = 1000
except OSError:
    pass
print(json.dumps({"scores": {"correctness": ok, "style": ok}}))
