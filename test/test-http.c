/*
 * Tests for worker/http: the request parser and response builder (pure), then
 * a real listener on 127.0.0.1 port 0 driven by a uv loop in the main thread
 * while a client thread talks to it over blocking sockets: /metrics,
 * /healthz, /readyz (ready and not), 404/405/400/431/408, a request with an
 * unread body, a head dripped past the deadline, and http_close. A second
 * listener with a long head deadline takes the floods: the per-peer cap and
 * the overall cap (loopback addresses 127.0.0.x stand for separate peers),
 * where the oldest connection makes room and /healthz is still answered.
 */
#undef NDEBUG
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <uv.h>

#include "http.h"
#include "log.h"
#include "metrics.h"
#include "tap.h"
#include "util.h"

/* ---- pure parser tests ---- */

static enum http_parse parse(const char *s, struct http_request *r)
{
	return http_parse_request(s, strlen(s), r);
}

static void parser_tests(void)
{
	struct http_request r;

	is_int(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &r), HTTP_PARSE_OK, "simple GET");
	is_str(r.method, "GET", "method");
	is_str(r.path, "/metrics", "path");
	is_int(r.minor, 1, "minor version");
	is_int(parse("GET /metrics?name[]=x HTTP/1.1\r\nHost: x\r\n\r\n", &r), HTTP_PARSE_OK, "query");
	is_str(r.path, "/metrics", "query stripped from path");
	is_int(parse("GET /healthz HTTP/1.0\r\n\r\n", &r), HTTP_PARSE_OK, "HTTP/1.0 without Host");
	is_int(parse("GET /healthz HTTP/1.1\n"
	             "Host: a\nUser-Agent: kube-probe/1.29\tx\n\n", &r), HTTP_PARSE_OK, "bare LF lines");
	is_int(parse("GET /healthz HTTP/1.1\r\nHost: x\r\n", &r), HTTP_PARSE_INCOMPLETE, "no blank line yet");
	is_int(parse("GE", &r), HTTP_PARSE_INCOMPLETE, "partial request line");
	is_int(parse("", &r), HTTP_PARSE_INCOMPLETE, "empty");
	is_int(parse("GET /healthz HTTP/1.1\r\n\r\n", &r), HTTP_PARSE_BAD, "HTTP/1.1 needs Host");
	is_int(parse("GET /healthz HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", &r), HTTP_PARSE_BAD, "two Host");
	is_int(parse("GET /healthz HTTP/2.0\r\n\r\n", &r), HTTP_PARSE_BAD, "HTTP/2.0 request line");
	is_int(parse("GET /healthz HTTP/1.10\r\n\r\n", &r), HTTP_PARSE_BAD, "HTTP/1.10");
	is_int(parse("GET http://x/metrics HTTP/1.0\r\n\r\n", &r), HTTP_PARSE_BAD, "absolute-form");
	is_int(parse("GET  /metrics HTTP/1.0\r\n\r\n", &r), HTTP_PARSE_BAD, "double space");
	is_int(parse("GET /metrics\r\n\r\n", &r), HTTP_PARSE_BAD, "HTTP/0.9 style");
	is_int(parse("\r\nGET /metrics HTTP/1.0\r\n\r\n", &r), HTTP_PARSE_BAD, "leading blank line");
	is_int(parse("GET /met\rrics HTTP/1.0\r\n\r\n", &r), HTTP_PARSE_BAD, "bare CR");
	is_int(parse("GET /healthz HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", &r), HTTP_PARSE_BAD, "obs-fold");
	is_int(parse("GET /healthz HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", &r), HTTP_PARSE_BAD, "empty header name");
	is_int(parse("GET /healthz HTTP/1.1\r\nHost x\r\n\r\n", &r), HTTP_PARSE_BAD, "header without colon");
	is_int(parse("GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", &r), HTTP_PARSE_BAD, "space before colon");
	is_int(parse("GET /healthz HTTP/1.1\r\nHost: x\x01y\r\n\r\n", &r), HTTP_PARSE_BAD, "control in value");
	is_int(parse("VERYLONGMETHODNAME /x HTTP/1.0\r\n\r\n", &r), HTTP_PARSE_BAD, "method too long");
	is_int(http_parse_request("GET /\0 HTTP/1.0\r\n\r\n", 19, &r), HTTP_PARSE_BAD, "NUL byte");

	char big[9000];
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.0\r\nX: ", 19);
	is_int(http_parse_request(big, 8192, &r), HTTP_PARSE_TOO_LARGE, "8 KiB without end is too large");
	is_int(http_parse_request(big, 8191, &r), HTTP_PARSE_INCOMPLETE, "just under the limit waits");
	char longpath[400];
	memset(longpath, 'p', sizeof(longpath));
	memcpy(longpath, "GET /", 5);
	memcpy(longpath + 300, " HTTP/1.0\r\n\r\n", 14);
	is_int(http_parse_request(longpath, 314, &r), HTTP_PARSE_BAD, "path over 255 bytes");
	struct strbuf many = { 0 };
	strbuf_addf(&many, "GET / HTTP/1.1\r\nHost: x\r\n");
	for (int i = 0; i < 70; i++)
		strbuf_addf(&many, "X-%d: y\r\n", i);
	strbuf_addf(&many, "\r\n");
	is_int(http_parse_request(many.buf, many.len, &r), HTTP_PARSE_TOO_LARGE, "too many headers");
	strbuf_free(&many);
}

static bool never_ready(void *data, char *why, size_t n)
{
	(void)data;
	snprintf(why, n, "postgres\r\ndown");
	return false;
}

static void respond_tests(void)
{
	struct http_request r;
	struct strbuf sb = { 0 };

	parse("HEAD /metrics HTTP/1.0\r\n\r\n", &r);
	is_int(http_respond(&r, NULL, NULL, &sb), 200, "HEAD /metrics 200");
	ok(strstr(sb.buf, "Content-Type: text/plain; version=0.0.4") != NULL, "metrics content type");
	ok(strstr(sb.buf, "\r\n\r\n")[4] == '\0', "HEAD has no body");
	ok(strstr(sb.buf, "Content-Length: 0\r\n") == NULL, "HEAD keeps the GET Content-Length");
	strbuf_free(&sb);

	parse("POST /metrics HTTP/1.0\r\n\r\n", &r);
	is_int(http_respond(&r, NULL, NULL, &sb), 405, "POST 405");
	ok(strstr(sb.buf, "\r\nAllow: GET, HEAD\r\n") != NULL, "405 has Allow");
	ok(strstr(sb.buf, "\r\nConnection: close\r\n") != NULL, "Connection: close");
	strbuf_free(&sb);

	parse("DELETE /nope HTTP/1.0\r\n\r\n", &r);
	is_int(http_respond(&r, NULL, NULL, &sb), 404, "unknown path 404");
	strbuf_free(&sb);

	parse("GET /readyz HTTP/1.0\r\n\r\n", &r);
	is_int(http_respond(&r, never_ready, NULL, &sb), 503, "not ready 503");
	ok(strstr(sb.buf, "not ready: postgres  down\n") != NULL, "reason in body, control chars removed");
	strbuf_free(&sb);
	is_int(http_respond(&r, NULL, NULL, &sb), 200, "NULL ready fn means ready");
	strbuf_free(&sb);
}

/* ---- live listener ---- */

static uv_loop_t loop;
static struct http_server *srv;
static uv_async_t wake;
static atomic_int ready_flag = 1;
static atomic_int port;
static struct http_server *srv2;   /* long head deadline: the flood tests */
static atomic_int port2;
static int closed_done;

static bool ready_fn(void *data, char *why, size_t n)
{
	(void)data;
	if (atomic_load(&ready_flag))
		return true;
	snprintf(why, n, "postgres not connected");
	return false;
}

/* A connection to 127.0.0.1:p from the loopback address src (NULL: any). */
static int dial_from(const char *src, int p)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (src) {
		struct sockaddr_in me = { .sin_family = AF_INET };
		inet_pton(AF_INET, src, &me.sin_addr);
		if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
			close(fd);
			return -1;
		}
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int dial(void)
{
	return dial_from(NULL, port);
}

static bool send_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return false;
		s += w;
		n -= (size_t)w;
	}
	return true;
}

/* Reads to EOF. Returns a malloc'd NUL-terminated string ("" if nothing). */
static char *read_all(int fd)
{
	struct strbuf sb = { 0 };
	char buf[4096];
	ssize_t r;
	strbuf_add(&sb, "", 0);
	while ((r = recv(fd, buf, sizeof(buf), 0)) > 0)
		strbuf_add(&sb, buf, (size_t)r);
	return sb.buf;
}

static char *request(const char *raw, size_t n)
{
	int fd = dial();
	if (fd < 0)
		return xstrdup("");
	send_all(fd, raw, n);
	char *resp = read_all(fd);
	close(fd);
	return resp;
}

static char *get(const char *raw)
{
	return request(raw, strlen(raw));
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* True once the server has closed fd (EOF or reset; data counts as open). */
static bool is_closed(int fd)
{
	char c;
	ssize_t rr = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
	return rr == 0 || (rr < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static int count_closed(const int *fds, int n)
{
	int closed = 0;
	for (int i = 0; i < n; i++)
		closed += is_closed(fds[i]);
	return closed;
}

/* Polls until want of the n fds are closed (or 20 s pass); returns the count. */
static int wait_closed(const int *fds, int n, int want)
{
	int closed = count_closed(fds, n);
	for (int i = 0; i < 2000 && closed < want; i++) {
		usleep(10 * 1000);
		closed = count_closed(fds, n);
	}
	return closed;
}

/* One byte then nothing, from src: a slot held open (slowloris). */
static int hold_from(const char *src)
{
	int fd = dial_from(src, port2);
	if (fd >= 0)
		send_all(fd, "G", 1);
	return fd;
}

static char *get_from(const char *src, int p, const char *raw)
{
	int fd = dial_from(src, p);
	if (fd < 0)
		return xstrdup("");
	send_all(fd, raw, strlen(raw));
	char *resp = read_all(fd);
	close(fd);
	return resp;
}

/* Against srv2 (head deadline 60 s, so nothing here ends by time). */
static void flood_tests(void)
{
	char *r;
	enum { FLOOD = 80 };
	int fds[FLOOD];

	/* One peer opens 80: each new one past the per-peer cap closes that
	 * peer's oldest, so the newest HTTP_MAX_CONNS_PER_PEER stay open. */
	for (int i = 0; i < FLOOD; i++)
		fds[i] = hold_from("127.0.0.1");
	int closed = wait_closed(fds, FLOOD, FLOOD - HTTP_MAX_CONNS_PER_PEER);
	is_int(closed, FLOOD - HTTP_MAX_CONNS_PER_PEER, "one peer keeps at most %d connections",
	       HTTP_MAX_CONNS_PER_PEER);
	is_int(count_closed(fds + FLOOD - HTTP_MAX_CONNS_PER_PEER, HTTP_MAX_CONNS_PER_PEER), 0,
	       "the peer's newest connections are the ones kept");
	r = get_from("127.0.0.1", port2, "GET /healthz HTTP/1.0\r\n\r\n");
	ok(starts(r, "HTTP/1.1 200 "), "that peer's own /healthz is answered at its cap");
	free(r);
	r = get_from("127.0.0.2", port2, "GET /healthz HTTP/1.0\r\n\r\n");
	ok(starts(r, "HTTP/1.1 200 "), "another peer's /healthz is answered");
	free(r);
	for (int i = 0; i < FLOOD; i++)
		close(fds[i]);

	/* Eight peers at their cap fill the listener's: a probe from a ninth
	 * closes the oldest connection of all and is answered. */
	enum { PEERS = HTTP_MAX_CONNS / HTTP_MAX_CONNS_PER_PEER };
	int held[HTTP_MAX_CONNS];
	char src[32];
	for (int i = 0; i < HTTP_MAX_CONNS; i++) {
		snprintf(src, sizeof(src), "127.0.1.%d", 1 + i / HTTP_MAX_CONNS_PER_PEER);
		held[i] = hold_from(src);
	}
	is_int(count_closed(held, HTTP_MAX_CONNS), 0, "%d peers hold %d connections (the cap)",
	       PEERS, HTTP_MAX_CONNS);
	r = get_from("127.0.2.1", port2, "GET /healthz HTTP/1.0\r\n\r\n");
	ok(starts(r, "HTTP/1.1 200 ") && strstr(r, "\r\n\r\nok\n"), "/healthz answered at the cap");
	free(r);
	r = get_from("127.0.2.1", port2, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
	ok(starts(r, "HTTP/1.1 200 "), "/readyz answered at the cap");
	free(r);
	ok(wait_closed(held, 1, 1) == 1, "the oldest connection made room");
	is_int(count_closed(held + 1, HTTP_MAX_CONNS - 1), 0, "the others are kept");
	for (int i = 0; i < HTTP_MAX_CONNS; i++)
		close(held[i]);
}

static void *client(void *arg)
{
	char *r;
	(void)arg;

	metrics_job("deterministic", "completed");
	r = get("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
	ok(starts(r, "HTTP/1.1 200 OK\r\n"), "GET /metrics 200");
	ok(strstr(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != NULL,
	   "exposition content type");
	ok(strstr(r, "arbiter_jobs_total{evaluator=\"deterministic\",outcome=\"completed\"} 1\n") != NULL,
	   "body has the counter");
	char *body = strstr(r, "\r\n\r\n");
	const char *cl = strstr(r, "Content-Length: ");
	ok(body && cl && (size_t)atol(cl + 16) == strlen(body + 4), "Content-Length matches the body");
	free(r);

	r = get("GET /healthz HTTP/1.0\r\n\r\n");
	ok(starts(r, "HTTP/1.1 200 OK\r\n") && strstr(r, "\r\n\r\nok\n"), "healthz ok");
	free(r);

	r = get("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
	ok(starts(r, "HTTP/1.1 200 OK\r\n"), "readyz 200 when ready");
	free(r);
	atomic_store(&ready_flag, 0);
	r = get("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
	ok(starts(r, "HTTP/1.1 503 Service Unavailable\r\n"), "readyz 503 when not ready");
	ok(strstr(r, "not ready: postgres not connected\n") != NULL, "readyz gives the reason");
	free(r);
	atomic_store(&ready_flag, 1);

	r = get("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
	ok(starts(r, "HTTP/1.1 200 OK\r\n") && !strstr(r, "ok\n"), "HEAD: headers only");
	free(r);

	r = get("PUT /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	ok(starts(r, "HTTP/1.1 405 ") && strstr(r, "Allow: GET, HEAD\r\n"), "PUT 405 with Allow");
	free(r);

	r = get("GET /admin HTTP/1.1\r\nHost: x\r\n\r\n");
	ok(starts(r, "HTTP/1.1 404 "), "unknown path 404");
	free(r);

	{
		static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n";
		r = request(tls, sizeof(tls) - 1);
	}
	ok(starts(r, "HTTP/1.1 400 "), "TLS-looking garbage 400");
	free(r);

	/* A head over 8 KiB: 431, and the client can still read the answer. */
	{
		struct strbuf big = { 0 };
		strbuf_addf(&big, "GET /metrics HTTP/1.1\r\nHost: x\r\n");
		for (int i = 0; i < 200; i++)
			strbuf_addf(&big, "X-Filler-%03d: %060d\r\n", i, i);
		strbuf_addf(&big, "\r\n");
		r = request(big.buf, big.len);
		ok(starts(r, "HTTP/1.1 431 "), "oversized head 431 (%zu bytes)", big.len);
		free(r);
		strbuf_free(&big);
	}

	/* A POST with a 256 KiB body we never parse: the 405 still arrives intact. */
	{
		struct strbuf post = { 0 };
		strbuf_addf(&post, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 262144\r\n\r\n");
		char *blob = xmalloc(262144);
		memset(blob, 'z', 262144);
		strbuf_add(&post, blob, 262144);
		free(blob);
		r = request(post.buf, post.len);
		ok(starts(r, "HTTP/1.1 405 ") && strstr(r, "method not allowed\n"), "405 delivered despite unread body");
		free(r);
		strbuf_free(&post);
	}

	/* Byte at a time: the parser waits for the whole head. */
	{
		const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
		int fd = dial();
		for (const char *p = req; *p; p++) {
			send_all(fd, p, 1);
			usleep(1000);
		}
		r = read_all(fd);
		close(fd);
		ok(starts(r, "HTTP/1.1 200 "), "request sent byte by byte");
		free(r);
	}

	/* Slow client: a partial head gets 408 at the deadline; a silent one is closed. */
	{
		struct timeval t0, t1;
		int fd = dial();
		gettimeofday(&t0, NULL);
		send_all(fd, "GET /metr", 9);
		r = read_all(fd);
		gettimeofday(&t1, NULL);
		close(fd);
		long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_usec - t0.tv_usec) / 1000;
		ok(starts(r, "HTTP/1.1 408 "), "partial head times out with 408");
		ok(ms >= 250 && ms < 5000, "after the read timeout (%ld ms)", ms);
		free(r);
		fd = dial();
		r = read_all(fd);
		close(fd);
		is_str(r, "", "idle connection closed without a response");
		free(r);
	}

	/* A head dripped one byte every 20 ms: the deadline counts from the accept,
	 * so the bytes do not extend it. */
	{
		const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: drip\r\n"
		                  "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
		int fd = dial();
		size_t sent = 0;
		for (const char *p = req; p[1] && send_all(fd, p, 1); p++) {
			sent++;
			char ch;
			if (recv(fd, &ch, 1, MSG_DONTWAIT | MSG_PEEK) >= 0 || errno == ECONNRESET)
				break;      /* answered or closed */
			usleep(20 * 1000);
		}
		r = read_all(fd);
		close(fd);
		ok(starts(r, "HTTP/1.1 408 "), "dripped head gets 408 at the deadline");
		ok(sent < strlen(req) - 1, "before the head was complete (%zu of %zu bytes)",
		   sent, strlen(req));
		free(r);
	}

	flood_tests();

		uv_async_send(&wake);
	return NULL;
}

static void on_closed(void *data)
{
	(void)data;
	closed_done++;
}

static void on_wake(uv_async_t *a)
{
	http_close(srv, on_closed, NULL);
	http_close(srv2, on_closed, NULL);
	uv_close((uv_handle_t *)a, NULL);
}

static void live_tests(void)
{
	char err[256] = "";
	struct http_server *h = (struct http_server *)1;

	uv_loop_init(&loop);
	is_int(http_start(&loop, "", ready_fn, NULL, &h, err, sizeof(err)), 0, "empty addr disables");
	ok(h == NULL, "disabled: no server");
	int called = 0;
	http_close(NULL, on_closed, NULL);
	called = closed_done;
	is_int(called, 1, "http_close(NULL) still calls done");
	closed_done = 0;
	is_int(http_port(NULL), -1, "http_port(NULL)");

	const char *bad[] = { "nope", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:abc", "[::1]9464",
	                      "::1:9464", "999.1.1.1:80", "127.0.0.1:", "[zz]:80" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		is_int(http_start(&loop, bad[i], ready_fn, NULL, &h, err, sizeof(err)), -1,
		       "bad address '%s' refused", bad[i]);
		ok(strstr(err, "ARBITER_METRICS_ADDR") != NULL, "error names the setting");
	}

	struct http_server *v6 = NULL;
	if (http_start(&loop, "[::1]:0", NULL, NULL, &v6, err, sizeof(err)) == 0) {
		ok(http_port(v6) > 0, "IPv6 loopback listener on port %d", http_port(v6));
		http_close(v6, on_closed, NULL);
	} else {
		ok(1, "# SKIP no IPv6 loopback (%s)", err);
		closed_done++;
	}

	is_int(http_start(&loop, "127.0.0.1:0", ready_fn, NULL, &srv, err, sizeof(err)), 0,
	       "listen on 127.0.0.1:0");
	atomic_store(&port, http_port(srv));
	ok(port > 0, "port 0 picked a free port (%d)", (int)port);
	http_set_read_timeout(srv, 300);
	is_int(http_start(&loop, "127.0.0.1:0", ready_fn, NULL, &srv2, err, sizeof(err)), 0,
	       "second listener for the floods");
	atomic_store(&port2, http_port(srv2));
	http_set_read_timeout(srv2, 60000);

	/* A second listener on the same port fails cleanly. */
	char addr[64];
	struct http_server *dup = NULL;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", (int)port);
	is_int(http_start(&loop, addr, NULL, NULL, &dup, err, sizeof(err)), -1, "port in use refused");
	ok(strstr(err, "address already in use") != NULL, "error says why (%s)", err);

	uv_async_init(&loop, &wake, on_wake);
	pthread_t th;
	pthread_create(&th, NULL, client, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	pthread_join(th, NULL);
	is_int(closed_done, 3, "http_close completion ran for the three listeners");
	is_int(uv_loop_close(&loop), 0, "no handle left open on the loop");
}

int main(void)
{
	log_setup(LOG_WARN, "test-http");
	parser_tests();
	respond_tests();
	live_tests();
	return tap_done();
}
