/*
 * The operators' HTTP listener: /metrics, /healthz, /readyz on the libuv
 * loop. One request per connection, answered with `Connection: close`.
 *
 * Limits: the request head (request line + headers) must fit in
 * HTTP_HEAD_MAX bytes and arrive within HTTP_READ_TIMEOUT_MS of the accept
 * (a total deadline: bytes dripping in do not extend it). At most
 * HTTP_MAX_CONNS connections are open at once, at most HTTP_MAX_CONNS_PER_PEER
 * of them from one peer (an IPv4 address, an IPv6 /64: the ipkey of the rate
 * limiter). A new connection is never refused for want of room: when its peer
 * is at the per-peer cap, that peer's oldest connection is closed; when the
 * listener is at the overall cap, the oldest connection is. "Oldest" prefers
 * connections already answered (draining), then those still sending a head,
 * then those being written to; within each, the earliest accepted. A client
 * that holds connections open (slowloris) therefore only ever displaces its
 * own or older ones, and a fresh /healthz or /readyz is answered at the cap.
 * Writes go through uv_write (never blocking); after the
 * response the write side is shut down and the connection lingers, discarding
 * input, until the peer closes or HTTP_LINGER_MS passes, so the client reads
 * the whole response even if it sent a body we did not read.
 *
 * Connection states (all owned by the server's list until freed):
 *   CONN_READING   reading the head; timer = read deadline
 *   CONN_WRITING   response queued in uv_write; timer = write deadline (same
 *                  length as the read deadline: a peer that never reads is dropped)
 *   CONN_DRAINING  write side shut down, discarding input; timer = linger
 *   CONN_CLOSING   uv_close called on both handles; freed after both close callbacks
 */
#include "http.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipkey.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

#define HTTP_HEAD_MAX 8192
#define HTTP_READ_TIMEOUT_MS 5000
#define HTTP_LINGER_MS 2000
#define HTTP_MAX_HEADERS 64

enum conn_state { CONN_READING, CONN_WRITING, CONN_DRAINING, CONN_CLOSING };

struct conn {
	uv_tcp_t tcp;
	uv_timer_t timer;
	uv_write_t wr;
	uv_shutdown_t sd;
	struct http_server *srv;
	struct conn *prev, *next;
	enum conn_state state;
	int open_handles;          /* handles not yet through their close callback */
	bool peer_eof;             /* the peer finished sending (or the socket failed) */
	uint64_t seq;              /* accept order: lower is older */
	struct ipkey_addr peer;    /* the peer's key (IPv6: host bits cleared to the /64) */
	size_t len;
	struct strbuf resp;
	char buf[HTTP_HEAD_MAX];
};

struct http_server {
	uv_tcp_t tcp;
	uv_loop_t *loop;
	http_ready_fn *ready;
	void *data;
	int port;
	unsigned read_timeout_ms;
	int nconns;
	uint64_t last_cap_log;     /* uv_now of the last "cap reached" warnings */
	uint64_t last_peer_log;
	uint64_t next_seq;
	struct conn *conns;
	bool closing, listener_closed;
	void (*done)(void *);
	void *done_data;
};

/* ---- parser ---- */

static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Returns the length of the line starting at p (excluding its CRLF/LF) and
 * sets *next to the start of the following line; -1 if a CR is not directly
 * followed by LF, or a NUL appears. Caller guarantees an LF exists before end. */
static long line_len(const char *p, const char *end, const char **next)
{
	const char *q = p;
	while (q < end && *q != '\n') {
		if (*q == '\0')
			return -1;
		if (*q == '\r' && (q + 1 >= end || q[1] != '\n'))
			return -1;
		q++;
	}
	if (q >= end)
		return -1;
	*next = q + 1;
	long n = (long)(q - p);
	if (n > 0 && p[n - 1] == '\r')
		n--;
	return n;
}

static bool ieq(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);
	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++) {
		char x = a[i], y = b[i];
		if (x >= 'A' && x <= 'Z')
			x = (char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (char)(y - 'A' + 'a');
		if (x != y)
			return false;
	}
	return true;
}

/* (Long: one pass over untrusted bytes, kept in one function so that every bound check is
 * seen in the order it applies; the fuzzer drives it.) */
enum http_parse http_parse_request(const char *buf, size_t len, struct http_request *req)
{
	memset(req, 0, sizeof(*req));

	/* Find the blank line that ends the head. */
	size_t end = 0, line_start = 0;
	bool found = false;
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\0')
			return HTTP_PARSE_BAD;
		if (buf[i] != '\n')
			continue;
		size_t l = i - line_start;
		if (l == 0 || (l == 1 && buf[line_start] == '\r')) {
			end = i + 1;
			found = true;
			break;
		}
		line_start = i + 1;
	}
	if (!found)
		return len >= HTTP_HEAD_MAX ? HTTP_PARSE_TOO_LARGE : HTTP_PARSE_INCOMPLETE;
	if (end > HTTP_HEAD_MAX)
		return HTTP_PARSE_TOO_LARGE;

	const char *p = buf, *stop = buf + end, *next = NULL;
	long n = line_len(p, stop, &next);
	if (n <= 0)
		return HTTP_PARSE_BAD;
	const char *le = p + n;

	/* method SP */
	const char *q = p;
	while (q < le && is_tchar((unsigned char)*q))
		q++;
	size_t mlen = (size_t)(q - p);
	if (mlen == 0 || mlen >= sizeof(req->method) || q >= le || *q != ' ')
		return HTTP_PARSE_BAD;
	memcpy(req->method, p, mlen);
	q++;

	/* request-target (origin-form) SP */
	const char *t = q;
	while (q < le && *q != ' ') {
		unsigned char c = (unsigned char)*q;
		if (c < 0x21 || c > 0x7e)
			return HTTP_PARSE_BAD;
		q++;
	}
	if (q == t || *t != '/' || q >= le)
		return HTTP_PARSE_BAD;
	const char *pe = t;
	while (pe < q && *pe != '?')
		pe++;
	size_t plen = (size_t)(pe - t);
	if (plen >= sizeof(req->path))
		return HTTP_PARSE_BAD;
	memcpy(req->path, t, plen);
	q++;

	/* HTTP-version */
	if (le - q != 8 || memcmp(q, "HTTP/1.", 7) || (q[7] != '0' && q[7] != '1'))
		return HTTP_PARSE_BAD;
	req->minor = q[7] - '0';

	/* header-field lines */
	int nheaders = 0, nhost = 0;
	for (p = next; p < stop;) {
		n = line_len(p, stop, &next);
		if (n < 0)
			return HTTP_PARSE_BAD;
		if (n == 0)
			break;                  /* the blank line */
		if (++nheaders > HTTP_MAX_HEADERS)
			return HTTP_PARSE_TOO_LARGE;
		le = p + n;
		q = p;
		while (q < le && is_tchar((unsigned char)*q))
			q++;
		if (q == p || q >= le || *q != ':')
			return HTTP_PARSE_BAD;   /* empty name, obs-fold, or no colon */
		size_t nlen = (size_t)(q - p);
		for (const char *v = q + 1; v < le; v++) {
			unsigned char c = (unsigned char)*v;
			if (c != '\t' && (c < 0x20 || c == 0x7f))
				return HTTP_PARSE_BAD;
		}
		if (ieq(p, nlen, "host"))
			nhost++;
		p = next;
	}
	if (nhost > 1 || (req->minor == 1 && nhost != 1))
		return HTTP_PARSE_BAD;
	return HTTP_PARSE_OK;
}

/* ---- responses ---- */

static const char *reason_phrase(int code)
{
	switch (code) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	case 503: return "Service Unavailable";
	default:  return "Error";
	}
}

static void build(struct strbuf *out, int code, const char *ctype, const char *extra,
                  const char *body, size_t blen, bool head)
{
	strbuf_addf(out, "HTTP/1.1 %d %s\r\n", code, reason_phrase(code));
	strbuf_addf(out, "Content-Type: %s\r\n", ctype);
	strbuf_addf(out, "Content-Length: %zu\r\n", blen);
	strbuf_addf(out, "Cache-Control: no-store\r\n");
	if (extra)
		strbuf_addf(out, "%s", extra);
	strbuf_addf(out, "Connection: close\r\n\r\n");
	if (!head && blen)
		strbuf_add(out, body, blen);
}

static const char text_plain[] = "text/plain; charset=utf-8";

static int simple(struct strbuf *out, int code, const char *body, bool head, const char *extra)
{
	build(out, code, text_plain, extra, body, strlen(body), head);
	return code;
}

int http_respond(const struct http_request *req, http_ready_fn *ready, void *data,
                 struct strbuf *out)
{
	bool get = !strcmp(req->method, "GET"), head = !strcmp(req->method, "HEAD");
	enum { P_METRICS, P_HEALTHZ, P_READYZ, P_NONE } path = P_NONE;

	if (!strcmp(req->path, "/metrics"))
		path = P_METRICS;
	else if (!strcmp(req->path, "/healthz"))
		path = P_HEALTHZ;
	else if (!strcmp(req->path, "/readyz"))
		path = P_READYZ;
	if (path == P_NONE)
		return simple(out, 404, "not found\n", head, NULL);
	if (!get && !head)
		return simple(out, 405, "method not allowed\n", false, "Allow: GET, HEAD\r\n");

	switch (path) {
	case P_METRICS: {
		struct strbuf body = { 0 };
		metrics_render(&body);
		build(out, 200, "text/plain; version=0.0.4; charset=utf-8", NULL,
		      body.buf ? body.buf : "", body.len, head);
		strbuf_free(&body);
		return 200;
	}
	case P_HEALTHZ:
		return simple(out, 200, "ok\n", head, NULL);
	case P_READYZ: {
		char why[1024] = "";
		if (!ready || ready(data, why, sizeof(why)))
			return simple(out, 200, "ready\n", head, NULL);
		why[sizeof(why) - 1] = '\0';
		for (char *c = why; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = ' ';
		char body[1100];
		snprintf(body, sizeof(body), "not ready: %s\n", why[0] ? why : "unknown");
		return simple(out, 503, body, head, NULL);
	}
	default:
		return simple(out, 404, "not found\n", head, NULL);
	}
}

/* ---- connections ---- */

static void server_maybe_done(struct http_server *s)
{
	if (!s->closing || !s->listener_closed || s->nconns)
		return;
	void (*done)(void *) = s->done;
	void *dd = s->done_data;
	free(s);
	if (done)
		done(dd);
}

static void conn_handle_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	if (--c->open_handles)
		return;
	struct http_server *s = c->srv;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	strbuf_free(&c->resp);
	free(c);
	server_maybe_done(s);
}

static void conn_close(struct conn *c)
{
	if (c->state == CONN_CLOSING)
		return;
	c->state = CONN_CLOSING;
	uv_read_stop((uv_stream_t *)&c->tcp);
	uv_timer_stop(&c->timer);
	uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
	uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
}

/* Write deadline (CONN_WRITING: a peer that does not read) and linger end
 * (CONN_DRAINING): either way the connection is done. */
static void on_done_timeout(uv_timer_t *t)
{
	conn_close(t->data);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	struct conn *c = req->data;
	if (c->state == CONN_CLOSING)
		return;
	if (status < 0) {
		conn_close(c);
		return;
	}
	/* Keep reading (and discarding) until the peer closes or linger ends. */
	c->state = CONN_DRAINING;
	uv_timer_start(&c->timer, on_done_timeout, HTTP_LINGER_MS, 0);
}

static void on_written(uv_write_t *req, int status)
{
	struct conn *c = req->data;
	if (c->state == CONN_CLOSING)
		return;
	if (status < 0 || c->peer_eof ||
	    uv_shutdown(&c->sd, (uv_stream_t *)&c->tcp, on_shutdown) < 0)
		conn_close(c);
}

/* Queues resp (already in c->resp) and stops parsing. */
static void conn_send(struct conn *c)
{
	uv_buf_t b = uv_buf_init(c->resp.buf, (unsigned)c->resp.len);
	c->state = CONN_WRITING;
	uv_timer_start(&c->timer, on_done_timeout, c->srv->read_timeout_ms, 0);
	/* Reading continues (the read callback discards) so a peer reset is noticed. */
	if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0)
		conn_close(c);
}

static void conn_error(struct conn *c, int code, const char *body)
{
	simple(&c->resp, code, body, false, NULL);
	conn_send(c);
}

static void on_read_timeout(uv_timer_t *t)
{
	struct conn *c = t->data;
	if (c->state != CONN_READING)
		return;
	if (c->len == 0) {
		conn_close(c);
		return;
	}
	conn_error(c, 408, "request timeout\n");
}

static char discard_buf[4096];

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = h->data;
	(void)suggested;
	if (c->state == CONN_READING && c->len < sizeof(c->buf))
		*buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof(c->buf) - c->len));
	else
		*buf = uv_buf_init(discard_buf, sizeof(discard_buf));
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = st->data;
	(void)buf;
	if (c->state == CONN_CLOSING)
		return;
	if (nread < 0) {
		/* EOF or error: nothing more to say (a half-sent request gets no answer). */
		c->peer_eof = true;
		if (c->state != CONN_WRITING)
			conn_close(c);
		else
			uv_read_stop(st);     /* let the write finish or fail, then close */
		return;
	}
	if (nread == 0 || c->state != CONN_READING)
		return;                   /* discarded */
	c->len += (size_t)nread;

	struct http_request req;
	switch (http_parse_request(c->buf, c->len, &req)) {
	case HTTP_PARSE_INCOMPLETE:
		return;
	case HTTP_PARSE_BAD:
		conn_error(c, 400, "bad request\n");
		return;
	case HTTP_PARSE_TOO_LARGE:
		conn_error(c, 431, "request header fields too large\n");
		return;
	case HTTP_PARSE_OK:
		http_respond(&req, c->srv->ready, c->srv->data, &c->resp);
		conn_send(c);
		return;
	}
}

/* The peer's key from the accepted socket: IPv4 (also IPv4-mapped IPv6) as
 * ::ffff:a.b.c.d with v4 set, IPv6 cut to its /64. 0, or -1 (peer gone). */
static int conn_peer(struct conn *c)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(&c->peer, 0, sizeof(c->peer));
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET) {
		memcpy(c->peer.b, mapped, sizeof(mapped));
		memcpy(c->peer.b + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
		c->peer.v4 = true;
	} else if (ss.ss_family == AF_INET6) {
		memcpy(c->peer.b, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
		c->peer.v4 = !memcmp(c->peer.b, mapped, sizeof(mapped));
		if (!c->peer.v4)
			memset(c->peer.b + 8, 0, 8);
	} else {
		return -1;
	}
	return 0;
}

/* Eviction order: answered and lingering first, then reading a head, then writing. */
static int victim_rank(const struct conn *c)
{
	switch (c->state) {
	case CONN_DRAINING: return 0;
	case CONN_READING:  return 1;
	default:            return 2;
	}
}

static bool better_victim(const struct conn *x, const struct conn *cur)
{
	if (!cur)
		return true;
	int rx = victim_rank(x), rc = victim_rank(cur);
	return rx < rc || (rx == rc && x->seq < cur->seq);
}

static void log_evict(struct http_server *s, uint64_t *last, const char *what, int cap,
                      const struct conn *v)
{
	uint64_t now = uv_now(s->loop);
	char key[IPKEY_MAX];
	if (*last && now - *last < 60000)
		return;
	*last = now;
	ipkey_format(&v->peer, key, sizeof(key));
	LOGW(NULL, NULL, "metrics listener: %s (%d) reached, closing the oldest connection "
	     "(from %s) for a new one (logged once a minute)", what, cap, key);
}

/* Makes room for the new connection c (already counted in s->conns): closes
 * the oldest connection of c's peer when that peer is at its cap, else the
 * oldest connection of all when the listener is at its cap. Before c came
 * at most HTTP_MAX_CONNS were open, so one eviction always suffices. */
static void make_room(struct http_server *s, struct conn *c)
{
	struct conn *oldest = NULL, *oldest_peer = NULL;
	int open = 0, same = 0;

	for (struct conn *x = s->conns; x; x = x->next) {
		if (x == c || x->state == CONN_CLOSING)
			continue;
		open++;
		if (better_victim(x, oldest))
			oldest = x;
		if (x->peer.v4 == c->peer.v4 && !memcmp(x->peer.b, c->peer.b, sizeof(x->peer.b))) {
			same++;
			if (better_victim(x, oldest_peer))
				oldest_peer = x;
		}
	}
	if (same >= HTTP_MAX_CONNS_PER_PEER) {
		log_evict(s, &s->last_peer_log, "per-peer connection cap",
		          HTTP_MAX_CONNS_PER_PEER, oldest_peer);
		conn_close(oldest_peer);
	} else if (open >= HTTP_MAX_CONNS) {
		log_evict(s, &s->last_cap_log, "connection cap", HTTP_MAX_CONNS, oldest);
		conn_close(oldest);
	}
}

static void on_connection(uv_stream_t *ls, int status)
{
	struct http_server *s = ls->data;
	if (status < 0) {
		LOGW(NULL, NULL, "metrics listener: accept failed: %s", uv_strerror(status));
		return;
	}
	if (s->closing)
		return;
	struct conn *c = xcalloc(1, sizeof(*c));
	c->srv = s;
	c->state = CONN_READING;
	c->seq = s->next_seq++;
	uv_tcp_init(s->loop, &c->tcp);
	uv_timer_init(s->loop, &c->timer);
	c->tcp.data = c;
	c->timer.data = c;
	c->wr.data = c;
	c->sd.data = c;
	c->open_handles = 2;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;

	if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0 || conn_peer(c) < 0) {
		conn_close(c);
		return;
	}
	make_room(s, c);
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
		conn_close(c);
		return;
	}
	uv_timer_start(&c->timer, on_read_timeout, s->read_timeout_ms, 0);
}

/* ---- listener ---- */

/* Parses "host:port", "[v6]:port" or ":port" into ss. 0 or -1. */
static int parse_addr(const char *addr, struct sockaddr_storage *ss, char *err, size_t errlen)
{
	char host[64];
	const char *colon, *hs;
	size_t hlen;

	if (addr[0] == '[') {
		const char *rb = strchr(addr, ']');
		if (!rb || rb[1] != ':')
			goto bad;
		hs = addr + 1;
		hlen = (size_t)(rb - hs);
		colon = rb + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon || memchr(addr, ':', (size_t)(colon - addr)))
			goto bad;
		hs = addr;
		hlen = (size_t)(colon - addr);
	}
	if (hlen >= sizeof(host))
		goto bad;
	memcpy(host, hs, hlen);
	host[hlen] = '\0';

	const char *ps = colon + 1;
	if (!*ps || strlen(ps) > 5)
		goto bad;
	long port = 0;
	for (const char *d = ps; *d; d++) {
		if (*d < '0' || *d > '9')
			goto bad;
		port = port * 10 + (*d - '0');
	}
	if (port > 65535)
		goto bad;

	if (addr[0] == '[') {
		if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss))
			goto bad;
	} else {
		if (!host[0])
			strcpy(host, "0.0.0.0");
		else if (!strcmp(host, "localhost"))
			strcpy(host, "127.0.0.1");
		if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss))
			goto bad;
	}
	return 0;
bad:
	snprintf(err, errlen, "ARBITER_METRICS_ADDR: '%s' is not host:port "
	         "(an IPv4 address or [IPv6], port 0-65535; empty disables)", addr);
	return -1;
}

int http_addr_check(const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	if (!addr || !*addr)
		return 0;
	memset(&ss, 0, sizeof(ss));
	return parse_addr(addr, &ss, err, errlen);
}

static void on_listener_closed_early(uv_handle_t *h)
{
	free(h->data);
}

int http_start(uv_loop_t *loop, const char *addr, http_ready_fn *ready, void *data,
               struct http_server **out, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int rc;

	*out = NULL;
	if (!addr || !*addr)
		return 0;
	memset(&ss, 0, sizeof(ss));
	if (parse_addr(addr, &ss, err, errlen) < 0)
		return -1;

	struct http_server *s = xcalloc(1, sizeof(*s));
	s->loop = loop;
	s->ready = ready;
	s->data = data;
	s->read_timeout_ms = HTTP_READ_TIMEOUT_MS;
	if ((rc = uv_tcp_init(loop, &s->tcp)) < 0) {
		snprintf(err, errlen, "metrics listener: %s", uv_strerror(rc));
		free(s);
		return -1;
	}
	s->tcp.data = s;
	if ((rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&ss, 0)) < 0 ||
	    (rc = uv_listen((uv_stream_t *)&s->tcp, 128, on_connection)) < 0) {
		snprintf(err, errlen, "metrics listener: cannot listen on %s: %s", addr,
		         uv_strerror(rc));
		uv_close((uv_handle_t *)&s->tcp, on_listener_closed_early);
		return -1;
	}

	struct sockaddr_storage bound;
	int blen = sizeof(bound);
	char host[64] = "?";
	if (!uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&bound, &blen)) {
		if (bound.ss_family == AF_INET6) {
			s->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
			uv_ip6_name((struct sockaddr_in6 *)&bound, host, sizeof(host));
		} else {
			s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
			uv_ip4_name((struct sockaddr_in *)&bound, host, sizeof(host));
		}
	}
	LOGI(NULL, NULL, "metrics listener on %s%s%s:%d (/metrics /healthz /readyz)",
	     bound.ss_family == AF_INET6 ? "[" : "", host,
	     bound.ss_family == AF_INET6 ? "]" : "", s->port);
	*out = s;
	return 0;
}

void http_set_read_timeout(struct http_server *h, unsigned ms)
{
	if (h)
		h->read_timeout_ms = ms ? ms : 1;
}

int http_port(const struct http_server *h)
{
	return h ? h->port : -1;
}

static void on_listener_closed(uv_handle_t *h)
{
	struct http_server *s = h->data;
	s->listener_closed = true;
	server_maybe_done(s);
}

void http_close(struct http_server *h, void (*done)(void *), void *data)
{
	if (!h) {
		if (done)
			done(data);
		return;
	}
	if (h->closing)
		return;
	h->closing = true;
	h->done = done;
	h->done_data = data;
	for (struct conn *c = h->conns; c; c = c->next)
		conn_close(c);
	uv_close((uv_handle_t *)&h->tcp, on_listener_closed);
}
