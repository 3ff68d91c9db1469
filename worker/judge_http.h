/*
 * judge_http: the LLM judge's HTTP client, on the worker's libuv loop with no
 * blocking call and no thread per request: libcurl's multi-socket interface
 * driven by uv_poll (one per socket curl asks about) and one uv_timer.
 * libcurl brings TLS with certificate verification (on by default), the
 * usual proxy environment variables (https_proxy, no_proxy, ...), connection
 * reuse across requests, HTTP/2 where the server offers it, and an
 * asynchronous resolver. Only http:// and https:// are allowed, no redirects.
 * Requests beyond the in-flight cap wait in FIFO order. Nothing of a request
 * (headers hold the API key) is logged.
 */
#ifndef ARBITER_JUDGE_HTTP_H
#define ARBITER_JUDGE_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define JHTTP_MAX_BODY (4u << 20)   /* a response larger than this fails */
#define JHTTP_RETRY_AFTER_MAX_S 86400   /* a longer Retry-After is read as this */

struct jhttp;

struct jhttp_resp {
	long status;               /* HTTP status, 0 when no response (err set) */
	const char *body;          /* NUL-terminated, valid during the callback */
	size_t len;
	const char *err;           /* transport error (timeout, refused, TLS, too large) or NULL */
	int timed_out;             /* err is a timeout */
	int64_t retry_after_ms;    /* Retry-After (seconds or HTTP date, at most
	                            * JHTTP_RETRY_AFTER_MAX_S), -1 when absent */
};
/* Runs exactly once per request, never synchronously inside jhttp_post. */
typedef void jhttp_cb(const struct jhttp_resp *r, void *data);

/* Creates a client on loop with at most max_inflight transfers at once (≥ 1). Returns 0 or -1
 * (libcurl could not be initialised). */
int jhttp_new(uv_loop_t *loop, int max_inflight, struct jhttp **out);

/* POSTs body to url with the given header lines ("Name: value", copied). timeout_ms bounds the
 * whole transfer. Returns 0 (cb will run) or -1 (client closing, bad arguments). */
int jhttp_post(struct jhttp *h, const char *url, const char *const *headers, size_t nheaders,
               const char *body, long timeout_ms, jhttp_cb *cb, void *data);

/* Verifies TLS servers against the CA certificates in the PEM file path (copied) instead of
 * the system's bundle (a private CA of a self-hosted provider); NULL or "" = the system's.
 * Verification itself stays on. For requests started after the call. */
void jhttp_set_ca_file(struct jhttp *h, const char *path);

/* Transfers running or waiting now. */
int jhttp_inflight(const struct jhttp *h);

/* Stops: every request not finished gets its callback with err "shutting down" (from within
 * this call), then the handles close and the client frees itself. NULL ok. */
void jhttp_close(struct jhttp *h);

#endif
