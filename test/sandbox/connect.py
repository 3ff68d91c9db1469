# Tries to reach 127.0.0.1:<port from stdin> over TCP (and UDP, and a Unix socket).
import socket, sys
port = int(sys.stdin.read().split()[0])
hit = False
for fam, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_STREAM)):
    try:
        s = socket.socket(fam, kind)
        s.settimeout(1)
        s.connect(("127.0.0.1", port) if fam == socket.AF_INET else ("::1", port))
        hit = True
    except OSError as e:
        print("refused:", e.__class__.__name__, file=sys.stderr)
try:
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect("/run/postgresql/.s.PGSQL.5432")
    hit = True
except OSError:
    pass
print("CONNECTED" if hit else "blocked")
