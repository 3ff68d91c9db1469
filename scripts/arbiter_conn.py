"""Connection strings for arbiter's Python tools (scripts/dlq, scripts/requeue).

The same rules as the worker (worker/redact.h, worker/rq.h): a Redis URL is
parsed exactly as the worker parses it (redis://[[user]:password@]host[:port][/db],
the LAST '@' ends the user info so a password may hold '/' or '@', IPv6 hosts
in [brackets], ?db=/password=/user= parameters, unix://[[user]:password@]/path;
rediss:// with the TLS parameters ssl_ca_certs, ssl_certfile, ssl_keyfile,
ssl_cert_reqs=required|none, ssl_server_name; redis+sentinel://[[user]:password@]
s1[:26379],s2.../MASTER[/db] with sentinel_user=/sentinel_password=, and
redis+cluster://[[user]:password@]n1[:6379],n2... (rediss+ for TLS)), a PostgreSQL conninfo or URI is parsed by libpq's own
PQconninfoParse (psycopg2.extensions.parse_dsn). What a person sees is
printed back from the parsed form with every password as ***; a string that
does not parse is never echoed. test/data/redact_cases.json holds the table
both implementations must reproduce exactly.
"""
import re
import urllib.parse

INVALID_REDIS = "(unparsable Redis URL, not shown)"
INVALID_PG = "(unparsable database connection string, not shown)"
SECRET_KEYS = ("password", "sslpassword")
TLS_PARAMS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_server_name")


class ConnError(ValueError):
    """A connection string that does not parse; the message quotes none of it."""


def is_redis(s):
    low = (s or "")[:9].lower()
    return low.startswith(("redis://", "rediss://", "redis+", "rediss+", "unix://"))


def _pct(s, what):
    try:
        b = urllib.parse.unquote_to_bytes(s)
    except Exception:  # noqa: BLE001
        raise ConnError("invalid %s" % what)
    if re.search(r"%(?![0-9A-Fa-f]{2})", s) or b"\0" in b:
        raise ConnError("invalid %s" % what)
    try:
        return b.decode("utf-8", "surrogateescape")
    except UnicodeDecodeError:
        raise ConnError("invalid %s" % what)


def _int(s, lo, hi, what):
    if not re.fullmatch(r"[0-9]{1,10}", s) or not lo <= int(s) <= hi:
        raise ConnError(what)
    return int(s)


def _hostport(auth, default_port):
    """(host, port) of "host[:port]" or "[v6][:port]" by the worker's rules; raises ConnError."""
    port = None
    if auth.startswith("["):
        rb = auth.find("]")
        if rb < 0:
            raise ConnError("missing ']' after IPv6 address")
        host = auth[1:rb]
        if rb + 1 < len(auth):
            if auth[rb + 1] != ":":
                raise ConnError("unexpected text after ']'")
            port = auth[rb + 2:]
    else:
        host, colon, port = auth.partition(":")
        if not colon:
            port = None
        elif ":" in port:
            raise ConnError("IPv6 addresses must be in [brackets]")
    if len(host.encode()) >= 256 or re.search(r"[\x00- %@/\\]", host):
        raise ConnError("invalid host")
    return host or "127.0.0.1", (_int(port, 1, 65535, "port must be 1..65535")
                                 if port is not None else default_port)


def parse_redis(url):
    """The parts of a Redis URL as a dict (host, port, path, user, password, db),
    by the worker's rules; raises ConnError."""
    u = {"host": "", "port": 6379, "path": "", "user": "", "password": "", "db": 0, "mode": ""}
    low = (url or "")[:18].lower()
    if not url:
        raise ConnError("empty Redis URL")
    multi = False
    for scheme, tls, mode in (("redis+sentinel://", False, "sentinel"),
                              ("rediss+sentinel://", True, "sentinel"),
                              ("redis+cluster://", False, "cluster"),
                              ("rediss+cluster://", True, "cluster")):
        if low.startswith(scheme):
            p, unix, multi = url[len(scheme):], False, True
            u["mode"] = mode
            if tls:
                u["tls"] = True
            break
    else:
        if low.startswith("redis://"):
            p, unix = url[8:], False
        elif low.startswith("unix://"):
            p, unix = url[7:], True
        elif low.startswith("rediss://"):
            p, unix = url[9:], False
            u["tls"] = True
        else:
            raise ConnError("expected redis://host:port/db, unix:///path, redis+sentinel:// or "
                            "redis+cluster://")
    if "#" in p:
        raise ConnError("unexpected '#' in URL")
    p, has_query, query = p.partition("?")

    def userinfo(s):
        if ":" not in s:
            raise ConnError("user info without ':'")
        user, _, pw = s.partition(":")
        u["user"], u["password"] = _pct(user, "user name"), _pct(pw, "password")
        if len(u["user"].encode()) > 127 or len(u["password"].encode()) > 255:
            raise ConnError("too long")

    if unix:
        if not p.startswith("/"):
            at = p.rfind("@/")
            if at < 0:
                raise ConnError("unix:// URL needs an absolute path")
            userinfo(p[:at])
            p = p[at + 1:]
        u["path"] = _pct(p, "socket path")
        if len(u["path"].encode()) > 107 or not u["path"].startswith("/") or u["path"] == "/":
            raise ConnError("unix:// URL needs an absolute path")
    elif multi:
        at = p.rfind("@")
        if at >= 0:
            userinfo(p[:at])
            p = p[at + 1:]
        auth, slash, rest = p.partition("/")
        if not auth:
            raise ConnError("a %s URL needs at least one host" % u["mode"].capitalize())
        hosts = auth.split(",")
        if len(hosts) > 8:
            raise ConnError("too many hosts (at most 8)")
        u["nodes"] = [_hostport(h, 6379 if u["mode"] == "cluster" else 26379) for h in hosts]
        u["host"], u["port"] = u["nodes"][0]
        if u["mode"] == "cluster":
            if rest not in ("", "0"):
                raise ConnError("Redis Cluster has database 0 only")
        else:
            master, _, dbpart = rest.partition("/")
            if not slash or not master:
                raise ConnError("a Sentinel URL names the master: "
                                "redis+sentinel://host:26379,host2:26379/mymaster[/db]")
            u["master"] = _pct(master, "master name")
            if re.search(r"[\x00- ]", u["master"]) or len(u["master"].encode()) > 255:
                raise ConnError("invalid character in the master name")
            if dbpart:
                u["db"] = _int(dbpart, 0, 2**31 - 1, "database (after the master name) must be "
                               "a non-negative integer")
    else:
        at = p.rfind("@")
        if at >= 0:
            userinfo(p[:at])
            p = p[at + 1:]
        auth, slash, dbpart = p.partition("/")
        u["host"], u["port"] = _hostport(auth, 6379)
        if slash and dbpart:
            u["db"] = _int(dbpart, 0, 2**31 - 1, "database must be a non-negative integer")
    if has_query and query:
        for part in query.split("&"):
            k, eq, v = part.partition("=")
            if not eq:
                raise ConnError("URL parameter without '='")
            if k == "db":
                u["db"] = _int(v, 0, 2**31 - 1, "db must be a non-negative integer")
            elif k == "password":
                u["password"] = _pct(v, "password")
            elif k in ("user", "username"):
                u["user"] = _pct(v, "user name")
            elif k in ("sentinel_password", "sentinel_user") and u["mode"] == "sentinel":
                u[k] = _pct(v, k)
            elif k in TLS_PARAMS:
                u[k] = _pct(v, k)
                if not u[k] or len(u[k].encode()) > 255:
                    raise ConnError("invalid or too long %s" % k)
                if k == "ssl_cert_reqs" and u[k] not in ("required", "none"):
                    raise ConnError("ssl_cert_reqs must be required (the default) or none")
            else:
                raise ConnError("unknown URL parameter (db, password, user, %s)" % ", ".join(TLS_PARAMS))
    if not u.get("tls") and any(k in u for k in TLS_PARAMS):
        raise ConnError("ssl_* parameters need a rediss:// URL")
    if u["user"] and not u["password"]:
        raise ConnError("a user name needs a password")
    return u


def check_pg(s):
    """Raises ConnError for a postgresql:// URI whose password holds an unencoded
    '/' (libpq would read part of it as host, port or database)."""
    m = re.match(r"(?i)postgres(ql)?://", s or "")
    if m:
        rest = s[m.end():].split("?", 1)[0]
        if "/" in rest and "@" in rest[rest.index("/"):]:
            raise ConnError("'@' after the host in a postgresql:// URI: percent-encode "
                            "'/' in the password as %2F and '@' as %40")


def parse_pg(s):
    """The libpq keywords a conninfo/URI sets (dict in libpq's order); raises ConnError."""
    import psycopg2
    import psycopg2.extensions
    check_pg(s)
    try:
        return psycopg2.extensions.parse_dsn(s)
    except psycopg2.Error:
        raise ConnError("invalid database connection string")


def _pct_out(s, keep=""):
    return "".join(c if re.fullmatch(r"[A-Za-z0-9._~-]", c) or c in keep
                   else "".join("%%%02X" % b for b in c.encode("utf-8", "surrogateescape"))
                   for c in s)


def _value(v):
    if v and not re.search(r"[ \t\n\r\f\v'\\]", v):
        return v
    return "'" + re.sub(r"(['\\])", r"\\\1", v) + "'"


def redact(s):
    """What a person may see of a connection string (see the module comment)."""
    if not s:
        return ""
    if is_redis(s):
        try:
            u = parse_redis(s)
        except ConnError:
            return INVALID_REDIS
        out = (("unix" if u["path"] else "rediss" if u.get("tls") else "redis") +
               ("+" + u["mode"] if u["mode"] else "") + "://")
        if u["user"] or u["password"]:
            out += _pct_out(u["user"]) + (":***" if u["password"] else "") + "@"
        if u["path"]:
            return out + _pct_out(u["path"], "/") + "?db=%d" % u["db"]
        nodes = u.get("nodes") or [(u["host"], u["port"])]
        out += ",".join(("[%s]:%d" if ":" in h else "%s:%d") % (h, p) for h, p in nodes)
        out += "/%d" % u["db"]
        return out + (" (master %s)" % u["master"] if u.get("master") else "")
    try:
        opts = parse_pg(s)
    except ConnError:
        return INVALID_PG
    return " ".join("%s=%s" % (k, "***" if k in SECRET_KEYS else _value(v))
                    for k, v in opts.items() if v)


def secret_free(text, *conn):
    """text with every password of the given connection strings replaced by ***
    (for driver error messages that might quote one)."""
    text = str(text)
    for s in conn:
        secrets = []
        try:
            if is_redis(s):
                secrets = [parse_redis(s)["password"]]
            elif s:
                secrets = [v for k, v in parse_pg(s).items() if k in SECRET_KEYS]
        except ConnError:
            pass
        for x in secrets:
            if x:
                text = text.replace(x, "***")
    return text


def key_base(prefix, style="auto", url=""):
    """The base of arbiter's Redis keys (worker/README.md "Redis keys"), as the worker builds it: the
    prefix itself (arbiter:jobs, ...) for "plain" / "legacy" and for "auto" without a Cluster
    URL; with "tagged" (or "auto" and a redis+cluster:// URL), the prefix in one hash tag
    ("{arbiter}") so every key lives in one Cluster slot, unless it already holds a tag."""
    if style == "auto":
        style = "tagged" if (url or "").lower().startswith(("redis+cluster://",
                                                            "rediss+cluster://")) else "plain"
    if style != "tagged" or re.search(r"\{[^}]+\}", prefix):
        return prefix
    return "{%s}" % prefix


def redis_client(url, slot_key="arbiter", **kw):
    """A redis.Redis for url, parsed by the worker's rules; raises ConnError.
    rediss://: TLS as the worker does it: the server's certificate verified
    (unless ssl_cert_reqs=none) against ssl_ca_certs or the system store, for
    the URL's host (ssl_server_name is refused); a client certificate when given.
    redis+sentinel://: the master the sentinels name (checked to be a master).
    redis+cluster://: the master serving slot_key's slot (every arbiter key is in
    that one slot, so WATCH/MULTI work as on a single Redis); a MOVED during a
    slot migration fails the command (run the tool again)."""
    import redis
    u = parse_redis(url)
    common = dict(password=u["password"] or None, username=u["user"] or None, **kw)
    if u["mode"] != "cluster":
        common["db"] = u["db"]
    if u["path"]:
        return redis.Redis(unix_socket_path=u["path"], **common)
    if u.get("tls"):
        if bool(u.get("ssl_certfile")) != bool(u.get("ssl_keyfile")):
            raise ConnError("ssl_certfile and ssl_keyfile go together")
        verify = u.get("ssl_cert_reqs", "required") == "required"
        common.update(ssl=True, ssl_cert_reqs="required" if verify else "none",
                      ssl_check_hostname=verify, ssl_ca_certs=u.get("ssl_ca_certs"),
                      ssl_certfile=u.get("ssl_certfile"), ssl_keyfile=u.get("ssl_keyfile"))
        if u.get("ssl_server_name"):
            # redis-py checks the host it connects to; it cannot check another name.
            raise ConnError("ssl_server_name is not supported by the Python tools: connect by a "
                            "name the server's certificate holds")
    if u["mode"] == "sentinel":
        from redis.sentinel import Sentinel
        skw = {k: v for k, v in common.items() if k not in ("db", "password", "username")}
        skw.update(password=u.get("sentinel_password") or None,
                   username=u.get("sentinel_user") or None)
        return Sentinel(u["nodes"], sentinel_kwargs=skw, **common).master_for(u["master"], **common)
    if u["mode"] == "cluster":
        from redis.cluster import ClusterNode, RedisCluster
        from redis.exceptions import RedisClusterException
        try:
            rc = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in u["nodes"]], **common)
        except RedisClusterException as e:   # not a RedisError: the tools report those
            raise redis.ConnectionError(str(e))
        try:
            node = rc.get_node_from_key(slot_key)
        finally:
            rc.close()
        return redis.Redis(host=node.host, port=node.port, **common)
    return redis.Redis(host=u["host"], port=u["port"], **common)
