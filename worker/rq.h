/*
 * rq: one Redis connection on a libuv loop: our own socket (TCP or unix,
 * optionally TLS through OpenSSL) on a uv_poll_t, with hiredis for the
 * protocol only (command formatting and the reply reader). It adds what
 * hiredis 0.14 lacks: TLS (rediss://), a connect timeout,
 * per-command timeouts (uv timers), AUTH + SELECT before on_connect, and
 * reconnection with exponential backoff and jitter (50 ms doubling to 5 s),
 * Redis Sentinel (discover the master, follow +switch-master) and Redis
 * Cluster (connect to the owner of one hash slot, follow MOVED). During a
 * slot migration, a command answered "-ASK" is resent once to the importing
 * node after ASKING (on a second connection, kept while the migration
 * lasts); its callback and those of the commands issued after it still run
 * in issue order. Commands inside MULTI/WATCH ... EXEC are never resent
 * alone, and what the importing node will not serve either (TRYAGAIN: a
 * multi-key command whose keys are split between the nodes or do not exist
 * yet) falls back to the MOVED/TRYAGAIN rule: the command fails
 * "disconnected" like everything in flight on the connection, which is
 * re-opened after the short backoff; callers already retry those.
 *
 * Everything here runs on the loop thread only. Every command's callback runs
 * exactly once and never synchronously inside rq_cmd*.
 */
#ifndef ARBITER_RQ_H
#define ARBITER_RQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

struct rq;                              /* one Redis connection on a uv loop; reconnects itself */

struct rq_opts {
	const char *url;                    /* see rq_url_parse: redis[s]://, redis[s]+sentinel://, redis[s]+cluster://, unix:// */
	uint32_t connect_timeout_ms;        /* default 2000 (0 = default) */
	uint32_t cmd_timeout_ms;            /* default 5000 (0 = default) */
	void (*on_connect)(struct rq *r, void *data);   /* after (re)connect+AUTH+SELECT */
	/* When a connection that had reached on_connect is lost (not for failed
	 * attempts, not after rq_close). why is valid during the call only. It
	 * runs before the pending commands are failed. */
	void (*on_disconnect)(struct rq *r, const char *why, void *data);
	void *data;
	const char *name;                   /* for logs */
	/* Cluster mode: a key whose hash slot this client serves (every key
	 * arbiter uses shares one hash tag, rkeys.h); NULL = "{arbiter}". The
	 * client connects to the master owning that slot. */
	const char *cluster_key;
};

/* Creates the client and starts connecting (asynchronously; on_connect runs
 * once the connection is usable). The options are copied; o->url is parsed
 * here. Returns 0 and *out, or -1 when the URL is invalid (logged). The
 * callbacks in o never run synchronously inside rq_new. */
int rq_new(uv_loop_t *loop, const struct rq_opts *o, struct rq **out);

/* cb runs exactly once, never synchronously inside rq_cmd*: reply != NULL (may be an error
 * reply, REDIS_REPLY_ERROR) and err == NULL; or reply == NULL and err = "timeout" |
 * "disconnected" | "not connected" | "closed". The reply is freed after cb returns.
 * timeout_ms 0 = cmd_timeout_ms. A timed-out command drops and re-opens the connection. */
#define RQ_TIMEOUT_NONE UINT32_MAX      /* timeout_ms: no command timeout (rq.c addition) */
typedef void rq_cb(struct rq *r, redisReply *reply, const char *err, void *data);

/* An rq_cb for a command whose answer changes nothing but must not fail
 * silently: logs a warning "<data> failed: <why>" on an error reply or a
 * transport error (not when the rq is closing). data is a static string
 * naming the command. */
void rq_reply_logged(struct rq *r, redisReply *reply, const char *err, void *data);

/* Sends argv[0..argc) (binary-safe; argvlen NULL = strlen of each). cb may be
 * NULL (the reply is discarded). Commands are pipelined: replies come in the
 * order the commands were issued. Returns 0 (cb will run), or -1 (cb will NOT
 * run) if the command could not be formatted, is unsupported (SUBSCRIBE and
 * the other pub/sub commands, MONITOR, HELLO, SELECT, RESET, CLIENT REPLY:
 * they would break reply matching or the handshake), or rq_close was already
 * called. A blocking command (XREADGROUP BLOCK, BLPOP) holds up every command
 * after it on the same rq: give it its own rq and a timeout_ms longer than the
 * block time. */
int rq_cmdv(struct rq *r, uint32_t timeout_ms, rq_cb *cb, void *data,
            int argc, const char **argv, const size_t *argvlen);

/* Like rq_cmdv with a hiredis format string (%s, %b, %d, %lld, ...).
 * Note: "not connected" means the command was not sent. Do not re-issue it
 * from its own callback in a loop (that spins until the next on_connect);
 * wait for on_connect or a timer instead. */
int rq_cmdf(struct rq *r, uint32_t timeout_ms, rq_cb *cb, void *data, const char *fmt, ...);

/* True when connected, authenticated and the database selected. */
bool rq_connected(const struct rq *r);

/* Fails pending commands with "closed"; done(data) runs after every handle closed.
 * The callbacks run on a later turn of the loop, never inside rq_close, and
 * every callback still pending gets "closed" (even if its reply arrives
 * meanwhile); on_connect/on_disconnect do not run any more. The rq is freed
 * just before done runs; do not call rq_* on r after rq_close except from
 * those pending callbacks (rq_cmd* then returns -1). Safe to call from any rq
 * callback; a second call is ignored. done may be NULL. */
void rq_close(struct rq *r, void (*done)(void *data), void *data);

/* True when an error reply's text is an ACL refusal: NOPERM, or (Redis 7.0) a script's
 * "The user executing the script can't run this command or subcommand". */
bool rq_is_acl_refusal(const char *s);

/* True when an error reply's text is a Cluster TRYAGAIN: a multi-key command not run
 * while our slot migrates (rq logs the first of a migration; callers retry quietly). */
bool rq_is_tryagain(const char *s);

/* Why r is not connected: the reason its last connection attempt failed
 * (refused, WRONGPASS, NOAUTH, a bad DB index, TLS, ...); "" while connected
 * or before an attempt failed. Valid until the next attempt. */
const char *rq_last_error(const struct rq *r);

/* The last ACL refusal (NOPERM) of one of r's commands, as "CMD refused to
 * user "U": NOPERM ...", if it came within the last within_ms ms and that
 * command has not succeeded since (a refusal inside a script is not cleared by
 * another script's success: it counts for within_ms); NULL otherwise. */
const char *rq_acl_refusal(const struct rq *r, uint64_t within_ms);

/* Counters for the metrics and the tests. */

/* The Redis Cluster hash slot (0..16383) of key: CRC16 of its hash tag
 * ("{...}", when non-empty) or of the whole key, modulo 16384. */
int rq_key_slot(const char *key);

/* Number of successful reconnects (connections after the first). */
uint64_t rq_reconnects(const struct rq *r);

/* Number of commands whose callback has not run yet. */
size_t rq_pending(const struct rq *r);

/* Blocking use, for command-line tools (arbiter status, pause, resume): an
 * rq on a private loop, so they take every URL the worker takes (TLS,
 * Sentinel, Cluster). */
struct rq_sync;

/* Connects to url, waiting up to timeout_ms (0 = 5000) for a usable
 * connection; cluster_key as in rq_opts. Returns 0 and *out, or -1 with the
 * reason in err (never the password). */
int rq_sync_open(const char *url, const char *cluster_key, uint32_t timeout_ms,
                 struct rq_sync **out, char *err, size_t errlen);

/* Sends one command and waits for its reply (at most the timeout). Returns
 * the reply (maybe an error reply; free it with freeReplyObject), or NULL
 * with the reason in err (timeout, connection lost, redirected during a
 * Cluster resharding). Never retried: the caller decides. */
redisReply *rq_sync_cmdv(struct rq_sync *s, int argc, const char **argv, char *err,
                         size_t errlen);

/* Closes the connection and frees s (NULL is ignored). */
void rq_sync_close(struct rq_sync *s);

#define RQ_MAX_HOSTS 8

/* Parsed form of a Redis URL, for rq and for tests. */
struct rq_url {
	char host[256];                     /* host name or numeric address ("" for unix) */
	int port;                           /* default 6379 */
	char path[108];                     /* unix socket path, "" for TCP */
	char user[128];                     /* "" = none (AUTH password only) */
	char password[256];                 /* "" = no AUTH */
	int db;                             /* default 0 */
	/* rediss:// (TLS) and its query parameters (names as in redis-py, so one
	 * URL serves the worker and the Python scripts; ssl_server_name is ours). */
	bool tls;
	char tls_ca[256];                   /* ssl_ca_certs: CA file ("" = system store) */
	char tls_cert[256], tls_key[256];   /* ssl_certfile, ssl_keyfile: client cert */
	char tls_server_name[256];          /* ssl_server_name: SNI + name checked ("" = host) */
	bool tls_noverify;                  /* ssl_cert_reqs=none (default required) */
	/* redis+sentinel:// and rediss+sentinel://: hosts are the sentinels (port
	 * default 26379); redis+cluster:// and rediss+cluster://: hosts are seed
	 * nodes of the cluster (port default 6379). */
	bool sentinel, cluster;
	int nhosts;                         /* 1..RQ_MAX_HOSTS */
	struct { char host[256]; int port; } hosts[RQ_MAX_HOSTS];
	char master_name[128];
	char sentinel_user[128], sentinel_password[256];   /* AUTH on the sentinels */
};

/* Parses redis://[[user]:password@]host[:port][/db] (IPv6 host in [brackets]),
 * rediss://... (TLS; ?ssl_ca_certs=F&ssl_certfile=F&ssl_keyfile=F&ssl_cert_reqs=
 * required|none&ssl_server_name=N), unix:///path[?db=N][&password=P]. Percent-escapes in
 * user and password are decoded.
 * Sentinel: redis+sentinel://[[user]:password@]h1[:p1],h2[:p2],.../master[/db][?...]
 * (rediss+sentinel:// for TLS to the sentinels and the master; user and
 * password are the data node's; sentinel_password= and sentinel_user= the
 * sentinels'). host/port then hold the first sentinel.
 * Cluster: redis+cluster://[[user]:password@]h1[:p1],h2[:p2],...[/0][?...]
 * (rediss+cluster:// for TLS); database 0 only.
 * Returns 0, or -1 with a reason in err. */
int rq_url_parse(const char *url, struct rq_url *out, char *err, size_t errlen);

#endif
