/*
 * A tiny HTTP/1.x listener on the libuv loop for operators: GET /metrics
 * (Prometheus text 0.0.4), /healthz (the loop is alive) and /readyz (the
 * readiness callback). Strict and bounded: request head ≤ 8 KiB, a read
 * deadline from the accept, a connection cap overall and per peer (reached:
 * the oldest connection is closed for the new one, so a probe is answered
 * even under a flood), GET/HEAD only, one request per connection
 * (`Connection: close`). Never blocks the loop; never crashes on input.
 */
#ifndef ARBITER_HTTP_H
#define ARBITER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

struct http_server;

/* Connections open at once, overall and from one peer (an IPv4 address or an
 * IPv6 /64). At either cap a new connection closes the oldest one in its way. */
#define HTTP_MAX_CONNS 64
#define HTTP_MAX_CONNS_PER_PEER 8

/* Readiness probe: return true when ready; else write a reason into why
 * (NUL-terminated, at most n bytes). Runs on the loop for each /readyz. */
typedef bool http_ready_fn(void *data, char *why, size_t n);

/* Checks that addr is what http_start accepts ("host:port", "[v6]:port", ":port",
 * or empty = disabled) without binding anything. Returns 0, or -1 with a message
 * naming ARBITER_METRICS_ADDR in err. */
int http_addr_check(const char *addr, char *err, size_t errlen);

/* Starts listening. addr is "host:port" (IPv4 or [IPv6]); port 0 picks a
 * free port, which is logged and returned by http_port. "" (or NULL)
 * disables: *out = NULL and returns 0. ready may be NULL (always ready).
 * Returns 0, or -1 with a message in err (bad address, bind failure). */
int http_start(uv_loop_t *loop, const char *addr, http_ready_fn *ready, void *data,
               struct http_server **out, char *err, size_t errlen);
/* The bound port, or -1 if h is NULL. */
int http_port(const struct http_server *h);
/* Stops listening and closes every connection; done(data) runs from the loop
 * (never synchronously) once every handle is closed and h is freed. If h is
 * NULL (listener disabled) done runs synchronously. done may be NULL. */
void http_close(struct http_server *h, void (*done)(void *), void *data);

/* Settings and helpers for tests and tools. */

/* Changes the request-head deadline (default 5000 ms; tests use less). */
void http_set_read_timeout(struct http_server *h, unsigned ms);

/* Outcome of parsing a request head; exposed for the fuzzer and tests. */
enum http_parse {
	HTTP_PARSE_INCOMPLETE,  /* need more bytes (no blank line yet) */
	HTTP_PARSE_OK,          /* method, path filled */
	HTTP_PARSE_BAD,         /* malformed → 400 */
	HTTP_PARSE_TOO_LARGE,   /* head over the limit → 431 */
};
struct http_request {
	char method[16];
	char path[256];         /* path without the query string */
	int minor;              /* HTTP/1.<minor> */
};
/* Parses buf[0..len) as a request head (request line + headers, CRLF or bare
 * LF line ends). Pure; never reads past len. */
enum http_parse http_parse_request(const char *buf, size_t len, struct http_request *req);
/* Builds the complete response for a parsed request into out (status line,
 * headers, body; body omitted for HEAD) and returns its status code.
 * ready may be NULL (always ready). Exposed for the fuzzer and tests. */
struct strbuf;
int http_respond(const struct http_request *req, http_ready_fn *ready, void *data,
                 struct strbuf *out);

#endif
