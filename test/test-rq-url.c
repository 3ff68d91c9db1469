/*
 * Unit test for rq_url_parse (worker/rq.c): the Redis URL forms arbiter
 * accepts, and the ones it refuses with a reason. No server needed.
 */
#undef NDEBUG
#include <stdio.h>
#include <string.h>

#include "rq.h"
#include "tap.h"

struct good {
	const char *url, *host, *path, *user, *password;
	int port, db;
};

static const struct good goods[] = {
	{ "redis://127.0.0.1:6380/2", "127.0.0.1", "", "", "", 6380, 2 },
	{ "redis://127.0.0.1", "127.0.0.1", "", "", "", 6379, 0 },
	{ "redis://127.0.0.1/", "127.0.0.1", "", "", "", 6379, 0 },
	{ "redis://localhost:7000", "localhost", "", "", "", 7000, 0 },
	{ "REDIS://h:1/15", "h", "", "", "", 1, 15 },
	{ "redis://:secret@127.0.0.1:6379/1", "127.0.0.1", "", "", "secret", 6379, 1 },
	{ "redis://alice:pw@10.0.0.1:6379/0", "10.0.0.1", "", "alice", "pw", 6379, 0 },
	{ "redis://:p%40ss%3Aw%2Fd@h:2", "h", "", "", "p@ss:w/d", 2, 0 },
	{ "redis://:p@ss@h:3", "h", "", "", "p@ss", 3, 0 },        /* last '@' splits */
	{ "redis://[::1]:6390/4", "::1", "", "", "", 6390, 4 },
	{ "redis://[::1]", "::1", "", "", "", 6379, 0 },
	{ "redis://", "127.0.0.1", "", "", "", 6379, 0 },
	{ "redis://:6400", "127.0.0.1", "", "", "", 6400, 0 },
	{ "redis://h:5?db=3", "h", "", "", "", 5, 3 },
	{ "redis://h:5?password=x%26y&user=u", "h", "", "u", "x&y", 5, 0 },
	{ "unix:///run/redis/redis.sock", "", "/run/redis/redis.sock", "", "", 6379, 0 },
	{ "unix:///tmp/r.sock?db=9", "", "/tmp/r.sock", "", "", 6379, 9 },
	{ "unix://:pw@/tmp/r.sock?db=1", "", "/tmp/r.sock", "", "pw", 6379, 1 },
	{ "unix:///tmp/r.sock?password=pw", "", "/tmp/r.sock", "", "pw", 6379, 0 },
};

struct bad {
	const char *url, *why;   /* why: a substring of the error message */
};

static const struct bad bads[] = {
	{ "", "empty" },
	{ "http://h:1", "expected" },
	{ "redis://h:1?ssl_ca_certs=/ca.pem", "rediss://" },
	{ "rediss://h:1?ssl_cert_reqs=optional", "ssl_cert_reqs" },
	{ "rediss://h:1?ssl_ca_certs=", "ssl_ca_certs" },
	{ "rediss://h:1?sslmode=verify", "unknown URL parameter" },
	{ "redis://h:0", "port" },
	{ "redis://h:65536", "port" },
	{ "redis://h:12x", "port" },
	{ "redis://h:1/x", "database" },
	{ "redis://h:1/-1", "database" },
	{ "redis://::1:6379", "brackets" },
	{ "redis://[::1:6379", "']'" },
	{ "redis://[::1]x", "after ']'" },
	{ "redis://secret@h", "':'" },
	{ "redis://u:@h", "needs a password" },
	{ "redis://:p%zz@h", "password" },
	{ "redis://:p%00@h", "password" },
	{ "redis://:p%4@h", "password" },
	{ "redis://h?foo=1", "unknown" },
	{ "redis://h?db", "'='" },
	{ "redis://h?db=x", "db" },
	{ "redis://h#frag", "'#'" },
	{ "redis://h h:1", "character" },
	{ "unix://", "absolute" },
	{ "unix://relative.sock", "absolute" },
	{ "unix:///", "absolute" },
};

int main(void)
{
	char err[160];
	struct rq_url u;

	for (size_t i = 0; i < sizeof goods / sizeof goods[0]; i++) {
		const struct good *g = &goods[i];
		err[0] = '\0';
		int rc = rq_url_parse(g->url, &u, err, sizeof err);
		is_int(rc, 0, "parse %s", g->url);
		if (rc < 0) {
			diag("error: %s", err);
			continue;
		}
		ok(!strcmp(u.host, g->host) && !strcmp(u.path, g->path) && !strcmp(u.user, g->user)
		   && !strcmp(u.password, g->password) && u.port == g->port && u.db == g->db,
		   "fields of %s (host '%s' path '%s' user '%s' port %d db %d)", g->url, u.host,
		   u.path, u.user, u.port, u.db);
	}
	for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
		const struct bad *b = &bads[i];
		err[0] = '\0';
		int rc = rq_url_parse(b->url, &u, err, sizeof err);
		ok(rc < 0 && strstr(err, b->why), "refuse '%s': %s", b->url, err);
	}
	ok(rq_url_parse(NULL, &u, err, sizeof err) < 0, "refuse NULL");

	/* TLS: rediss:// and its parameters (redis-py's names). */
	ok(rq_url_parse("rediss://alice:pw@redis.example:6380/2", &u, err, sizeof err) == 0 &&
	   u.tls && !u.tls_noverify && !u.tls_ca[0] && u.port == 6380 && u.db == 2 &&
	   !strcmp(u.user, "alice") && !strcmp(u.host, "redis.example"),
	   "rediss://: TLS on, verification on by default, system store: %s", err);
	ok(rq_url_parse("rediss://h/0?ssl_ca_certs=%2Fetc%2Fca.pem&ssl_certfile=/c.pem&"
	                "ssl_keyfile=/k.pem&ssl_server_name=redis.internal", &u, err, sizeof err) == 0 &&
	   !strcmp(u.tls_ca, "/etc/ca.pem") && !strcmp(u.tls_cert, "/c.pem") &&
	   !strcmp(u.tls_key, "/k.pem") && !strcmp(u.tls_server_name, "redis.internal"),
	   "rediss:// parameters: CA file, client cert and key, server name: %s", err);
	ok(rq_url_parse("rediss://h?ssl_cert_reqs=none", &u, err, sizeof err) == 0 && u.tls_noverify,
	   "ssl_cert_reqs=none turns verification off");
	ok(rq_url_parse("redis://h", &u, err, sizeof err) == 0 && !u.tls, "redis:// is plain");

	/* Sentinel. */
	ok(rq_url_parse("redis+sentinel://:pw@10.0.0.1:26380,[::1],s3.example:5000/mymaster/3"
	                "?sentinel_password=sp", &u, err, sizeof err) == 0 && u.sentinel && !u.tls &&
	   u.nhosts == 3 && !strcmp(u.hosts[0].host, "10.0.0.1") && u.hosts[0].port == 26380 &&
	   !strcmp(u.hosts[1].host, "::1") && u.hosts[1].port == 26379 &&
	   !strcmp(u.hosts[2].host, "s3.example") && u.hosts[2].port == 5000 &&
	   !strcmp(u.master_name, "mymaster") && u.db == 3 && !strcmp(u.password, "pw") &&
	   !strcmp(u.sentinel_password, "sp"), "redis+sentinel:// with three sentinels: %s", err);
	ok(rq_url_parse("rediss+sentinel://h/m?ssl_ca_certs=/ca", &u, err, sizeof err) == 0 &&
	   u.sentinel && u.tls && u.nhosts == 1 && !strcmp(u.master_name, "m") && u.db == 0,
	   "rediss+sentinel:// is TLS: %s", err);
	ok(rq_url_parse("redis+sentinel://h1,h2", &u, err, sizeof err) < 0 && strstr(err, "master"),
	   "a Sentinel URL without a master name is refused: %s", err);
	ok(rq_url_parse("redis+sentinel://h1,,h2/m", &u, err, sizeof err) < 0, "empty sentinel host refused");
	ok(rq_url_parse("redis+sentinel://h1/m/x", &u, err, sizeof err) < 0, "bad db refused");
	/* Cluster. */
	ok(rq_url_parse("redis+cluster://u:p@10.0.0.1:7000,10.0.0.2", &u, err, sizeof err) == 0 &&
	   u.cluster && !u.sentinel && u.nhosts == 2 && u.hosts[0].port == 7000 &&
	   u.hosts[1].port == 6379 && !strcmp(u.user, "u") && u.db == 0,
	   "redis+cluster:// with two seeds: %s", err);
	ok(rq_url_parse("rediss+cluster://h:7000/0?ssl_ca_certs=/ca", &u, err, sizeof err) == 0 &&
	   u.cluster && u.tls, "rediss+cluster:// is TLS: %s", err);
	ok(rq_url_parse("redis+cluster://h:7000/1", &u, err, sizeof err) < 0 && strstr(err, "database 0"),
	   "Cluster refuses a database other than 0: %s", err);
	/* Hash slots, as Redis computes them (CLUSTER KEYSLOT). */
	is_int(rq_key_slot("foo"), 12182, "slot of foo");
	is_int(rq_key_slot("{arbiter}:jobs"), rq_key_slot("arbiter"), "a hash tag decides the slot");
	is_int(rq_key_slot("{arbiter}:rl:10.0.0.1"), rq_key_slot("{arbiter}:dead"), "same tag, same slot");
	/* CRC16/XMODEM("{}x") & 16383, worked out by hand (not by rq_key_slot): neither
	 * the slot of "" (0, an empty tag taken as the tag) nor that of "x" (16287). */
	is_int(rq_key_slot("{}x"), 10595, "an empty tag hashes the whole key");
	is_int(rq_key_slot("123456789"), 0x31C3 & 16383, "CRC16/XMODEM check value");
	ok(rq_url_parse("redis://h?sentinel_password=x", &u, err, sizeof err) < 0,
	   "sentinel_password outside a Sentinel URL refused");

	/* A long socket path must not overflow sun_path. */
	char longp[200] = "unix:///";
	memset(longp + 8, 'a', 150);
	longp[158] = '\0';
	ok(rq_url_parse(longp, &u, err, sizeof err) < 0, "refuse a too long socket path");

	return tap_done();
}
