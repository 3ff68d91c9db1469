/*
 * The judge's HTTP client: libcurl multi-socket on the libuv loop (see
 * judge_http.h). curl tells us which sockets to watch (sock_cb) and when to
 * wake it (timer_cb); uv_poll / uv_timer events go back to
 * curl_multi_socket_action, and finished transfers are collected in drain().
 */
#include "judge_http.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct jreq {
	struct jreq *next, *prev;     /* h->running list, or the wait queue (next only) */
	struct jhttp *h;
	CURL *easy;
	struct curl_slist *hdrs;      /* holds the API key: freed, never logged */
	char *url, *body;
	long timeout_ms;
	struct strbuf resp;
	bool too_big;
	jhttp_cb *cb;
	void *data;
};

struct jsock {
	uv_poll_t poll;
	struct jsock *next, *prev;
	struct jhttp *h;
	curl_socket_t fd;
};

struct jhttp {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer;
	int max_inflight, nrunning, nwaiting;
	struct jreq *running;              /* doubly linked */
	struct jreq *wait_head, *wait_tail;
	struct jsock *socks;
	int open_handles;
	bool closing;
	char *ca_file;                     /* CA bundle for TLS verification; NULL = the system's */
};

static void maybe_free(struct jhttp *h)
{
	if (h->closing && h->open_handles == 0) {
		free(h->ca_file);
		free(h);
	}
}

static void handle_closed(uv_handle_t *hd)
{
	struct jhttp *h = hd->data;
	h->open_handles--;
	maybe_free(h);
}

static void sock_closed(uv_handle_t *hd)
{
	struct jsock *js = hd->data;
	struct jhttp *h = js->h;
	free(js);
	h->open_handles--;
	maybe_free(h);
}

static void sock_release(struct jsock *js)
{
	struct jhttp *h = js->h;
	if (js->prev)
		js->prev->next = js->next;
	else
		h->socks = js->next;
	if (js->next)
		js->next->prev = js->prev;
	uv_poll_stop(&js->poll);
	uv_close((uv_handle_t *)&js->poll, sock_closed);
}

static void req_free(struct jreq *r)
{
	if (r->easy)
		curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->hdrs);
	free(r->url);
	free(r->body);
	strbuf_free(&r->resp);
	free(r);
}

static void unlink_running(struct jreq *r)
{
	struct jhttp *h = r->h;
	if (r->prev)
		r->prev->next = r->next;
	else
		h->running = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->next = r->prev = NULL;
	h->nrunning--;
}

static void fail_req(struct jreq *r, const char *why)
{
	struct jhttp_resp resp = { 0, "", 0, why, 0, -1 };
	r->cb(&resp, r->data);
	req_free(r);
}

static size_t on_write(char *p, size_t size, size_t n, void *data)
{
	struct jreq *r = data;
	size_t len = size * n;
	if (r->resp.len + len > JHTTP_MAX_BODY) {
		r->too_big = true;
		return 0;   /* aborts the transfer */
	}
	strbuf_add(&r->resp, p, len);
	return len;
}

static int start(struct jreq *r)
{
	struct jhttp *h = r->h;
	r->easy = curl_easy_init();
	if (!r->easy)
		return -1;
	CURL *e = r->easy;
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	if (h->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, h->ca_file);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(r->body));
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, r->timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, r->timeout_ms < 10000 ? r->timeout_ms : 10000L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	/* Over TLS, ALPN says at the handshake whether the connection multiplexes (HTTP/2):
	 * waiting for that is cheap. Over plain http (a self-hosted server) curl would only know
	 * once the first answer came, holding every other request back until then. */
	if (!strncmp(r->url, "https:", 6))
		curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "arbiter-judge/1");
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 4096L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	if (curl_multi_add_handle(h->multi, e) != CURLM_OK)
		return -1;
	r->prev = NULL;
	r->next = h->running;
	if (h->running)
		h->running->prev = r;
	h->running = r;
	h->nrunning++;
	return 0;
}

static void start_waiting(struct jhttp *h)
{
	while (!h->closing && h->wait_head && h->nrunning < h->max_inflight) {
		struct jreq *r = h->wait_head;
		h->wait_head = r->next;
		if (!h->wait_head)
			h->wait_tail = NULL;
		h->nwaiting--;
		r->next = NULL;
		if (start(r) < 0)
			fail_req(r, "cannot start the HTTP transfer");
	}
}

static void finish(struct jreq *r, CURLcode res)
{
	struct jhttp *h = r->h;
	long status = 0;
	curl_off_t ra = 0;
	curl_multi_remove_handle(h->multi, r->easy);
	unlink_running(r);
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	if (curl_easy_getinfo(r->easy, CURLINFO_RETRY_AFTER, &ra) != CURLE_OK)
		ra = 0;
	struct jhttp_resp resp = { 0 };
	resp.status = res == CURLE_OK ? status : 0;
	resp.body = r->resp.buf ? r->resp.buf : "";
	resp.len = r->resp.len;
	/* The provider's number: saturated at a day, so the milliseconds cannot overflow (a
	 * Retry-After of 2^63-1 seconds, or a date far ahead, reaches here as such). */
	if (ra > JHTTP_RETRY_AFTER_MAX_S)
		ra = JHTTP_RETRY_AFTER_MAX_S;
	resp.retry_after_ms = ra > 0 ? (int64_t)ra * 1000 : (status == 429 && res == CURLE_OK ? 0 : -1);
	if (res != CURLE_OK) {
		resp.err = r->too_big ? "response larger than 4 MiB" : curl_easy_strerror(res);
		resp.timed_out = res == CURLE_OPERATION_TIMEDOUT;
	}
	r->cb(&resp, r->data);
	req_free(r);
}

static void drain(struct jhttp *h)
{
	CURLMsg *m;
	int left;
	while (h->multi && (m = curl_multi_info_read(h->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct jreq *r = NULL;
		CURLcode res = m->data.result;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		if (r)
			finish(r, res);
	}
	start_waiting(h);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	struct jsock *js = p->data;
	struct jhttp *h = js->h;
	int flags = 0, running;
	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(h->multi, js->fd, flags, &running);
	drain(h);
}

static void on_timer(uv_timer_t *t)
{
	struct jhttp *h = t->data;
	int running;
	curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	drain(h);
}

static int sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	(void)e;
	struct jhttp *h = userp;
	struct jsock *js = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (js) {
			curl_multi_assign(h->multi, s, NULL);
			sock_release(js);
		}
		return 0;
	}
	if (!js) {
		js = xcalloc(1, sizeof *js);
		js->h = h;
		js->fd = s;
		if (uv_poll_init_socket(h->loop, &js->poll, s) < 0) {
			free(js);
			return -1;
		}
		js->poll.data = js;
		h->open_handles++;
		js->next = h->socks;
		if (h->socks)
			h->socks->prev = js;
		h->socks = js;
		curl_multi_assign(h->multi, s, js);
	}
	int ev = 0;
	if (what & CURL_POLL_IN)
		ev |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		ev |= UV_WRITABLE;
	uv_poll_start(&js->poll, ev, on_poll);
	return 0;
}

static int timer_cb(CURLM *m, long timeout_ms, void *userp)
{
	(void)m;
	struct jhttp *h = userp;
	if (h->closing)
		return 0;
	if (timeout_ms < 0)
		uv_timer_stop(&h->timer);
	else
		uv_timer_start(&h->timer, on_timer, (uint64_t)timeout_ms, 0);
	return 0;
}

int jhttp_new(uv_loop_t *loop, int max_inflight, struct jhttp **out)
{
	static bool global_done;
	*out = NULL;
	if (!global_done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return -1;
		global_done = true;
	}
	struct jhttp *h = xcalloc(1, sizeof *h);
	h->loop = loop;
	h->max_inflight = max_inflight > 0 ? max_inflight : 1;
	h->multi = curl_multi_init();
	if (!h->multi) {
		free(h);
		return -1;
	}
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
	uv_timer_init(loop, &h->timer);
	h->timer.data = h;
	h->open_handles = 1;
	*out = h;
	return 0;
}

int jhttp_post(struct jhttp *h, const char *url, const char *const *headers, size_t nheaders,
               const char *body, long timeout_ms, jhttp_cb *cb, void *data)
{
	if (!h || h->closing || !url || !body || !cb)
		return -1;
	struct jreq *r = xcalloc(1, sizeof *r);
	r->h = h;
	r->url = xstrdup(url);
	r->body = xstrdup(body);
	r->timeout_ms = timeout_ms > 0 ? timeout_ms : 60000;
	r->cb = cb;
	r->data = data;
	struct curl_slist *l = curl_slist_append(NULL, "Content-Type: application/json");
	l = l ? curl_slist_append(l, "Expect:") : NULL;
	for (size_t i = 0; l && i < nheaders; i++) {
		struct curl_slist *n = curl_slist_append(l, headers[i]);
		if (!n) {
			curl_slist_free_all(l);
			l = NULL;
		}
		l = n;
	}
	if (!l) {
		req_free(r);
		return -1;
	}
	r->hdrs = l;
	if (h->nrunning < h->max_inflight && !h->wait_head) {
		if (start(r) < 0) {
			req_free(r);
			return -1;
		}
		return 0;
	}
	if (h->wait_tail)
		h->wait_tail->next = r;
	else
		h->wait_head = r;
	h->wait_tail = r;
	h->nwaiting++;
	return 0;
}

int jhttp_inflight(const struct jhttp *h)
{
	return h ? h->nrunning + h->nwaiting : 0;
}

void jhttp_close(struct jhttp *h)
{
	if (!h || h->closing)
		return;
	h->closing = true;
	while (h->running) {
		struct jreq *r = h->running;
		curl_multi_remove_handle(h->multi, r->easy);
		unlink_running(r);
		fail_req(r, "shutting down");
	}
	while (h->wait_head) {
		struct jreq *r = h->wait_head;
		h->wait_head = r->next;
		fail_req(r, "shutting down");
	}
	h->wait_tail = NULL;
	h->nwaiting = 0;
	curl_multi_cleanup(h->multi);
	h->multi = NULL;
	while (h->socks)
		sock_release(h->socks);
	uv_timer_stop(&h->timer);
	uv_close((uv_handle_t *)&h->timer, handle_closed);
}

void jhttp_set_ca_file(struct jhttp *h, const char *path)
{
	if (!h)
		return;
	free(h->ca_file);
	h->ca_file = path && *path ? xstrdup(path) : NULL;
}
