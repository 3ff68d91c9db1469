/*
 * libFuzzer harness for the metrics listener's request parser
 * (worker/http.c): any byte string is parsed as a request head; a parsed
 * request is answered with http_respond. Checks the parser's invariants:
 * it never reads past the input, INCOMPLETE only below the size limit, a
 * parsed request has a token method and an origin-form path, and every
 * response is a well-formed HTTP/1.1 status line with Connection: close.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "log.h"
#include "util.h"

static bool toggle_ready(void *data, char *why, size_t n)
{
	const uint8_t *d = data;
	if (d[0] & 1)
		return true;
	/* Echo hostile bytes into the reason: the responder must sanitize them. */
	size_t k = 0;
	for (size_t i = 1; i < 64 && k + 1 < n; i++)
		why[k++] = (char)d[i % 8];
	why[k] = 0;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool init;
	if (!init) {
		log_setup(LOG_ERROR, "fuzz");
		init = true;
	}
	/* A private copy, exactly `size` bytes, so ASan sees any over-read. */
	char *buf = malloc(size ? size : 1);
	if (size)
		memcpy(buf, data, size);

	struct http_request req;
	enum http_parse r = http_parse_request(buf, size, &req);
	if (r == HTTP_PARSE_INCOMPLETE && size >= 8192)
		abort();
	if (r == HTTP_PARSE_OK) {
		if (!req.method[0] || req.path[0] != '/' || (req.minor != 0 && req.minor != 1))
			abort();
		uint8_t seed[8] = { 0 };
		memcpy(seed, data, size < 8 ? size : 8);
		struct strbuf out = { 0 };
		int code = http_respond(&req, toggle_ready, seed, &out);
		if (code < 200 || code > 599 || !out.buf || strncmp(out.buf, "HTTP/1.1 ", 9) ||
		    !strstr(out.buf, "\r\nConnection: close\r\n\r\n"))
			abort();
		/* The head must contain no bare control characters besides CRLF. */
		const char *end = strstr(out.buf, "\r\n\r\n");
		for (const char *p = out.buf; p < end; p++)
			if ((unsigned char)*p < 0x20 && *p != '\r' && *p != '\n')
				abort();
		strbuf_free(&out);
	}
	free(buf);
	return 0;
}
