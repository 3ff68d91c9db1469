/*
 * test-console: the operator console's pure parts (worker/console.h): request heads
 * (limits, header fields, bad input), query parameters, the token check, text made
 * valid UTF-8 for JSON (hostile bytes shown as \xNN), the requeue's rules (what each
 * submission gets, when a bulk requeue asks first) and the charts' quantiles.
 */
#undef NDEBUG
#include <string.h>

#include "console.h"
#include "tap.h"

static enum console_parse parse(const char *s, struct console_request *r)
{
	return console_parse(s, strlen(s), r);
}

static void test_parse(void)
{
	struct console_request r;
	is_int(parse("GET /api/dead?reason=x HTTP/1.1\r\nHost: 127.0.0.1:8790\r\n"
	             "X-Arbiter-Token: abc\r\nX-Arbiter-Operator:  ann \r\n\r\n", &r), CONSOLE_OK, "a GET");
	is_str(r.path, "/api/dead", "path without the query");
	is_str(r.query, "reason=x", "query");
	is_str(r.token, "abc", "token header");
	is_str(r.operator_name, "ann", "operator header, trimmed");
	is_str(r.host, "127.0.0.1:8790", "host");
	is_int(parse("POST /api/action HTTP/1.1\nContent-Length: 12\n\n", &r), CONSOLE_OK, "bare LF");
	is_int((int)r.content_length, 12, "content length");
	is_int(parse("GET / HTTP/1.1\r\nHost: x\r\n", &r), CONSOLE_INCOMPLETE, "no blank line yet");
	is_int(parse("GET / HTTP/2.0\r\n\r\n", &r), CONSOLE_BAD, "not HTTP/1.x");
	is_int(parse("GET x HTTP/1.1\r\n\r\n", &r), CONSOLE_BAD, "target not a path");
	is_int(parse("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", &r),
	       CONSOLE_BAD, "two lengths");
	is_int(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r), CONSOLE_BAD, "chunked");
	is_int(parse("POST / HTTP/1.1\r\nContent-Length: 99999\r\n\r\n", &r), CONSOLE_TOO_LARGE,
	       "body over the limit");
	is_int(parse("GET / HTTP/1.1\r\nX-Arbiter-Token: a\x01" "b\r\n\r\n", &r), CONSOLE_BAD,
	       "control character in a header");
	static char big[CONSOLE_MAX_HEAD + 10];
	memset(big, 'a', sizeof big - 1);
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	is_int(parse(big, &r), CONSOLE_TOO_LARGE, "head over the limit");
}

static void test_params(void)
{
	char v[32];
	ok(console_param("a=1&id=ab%20c+d&z", "id", v, sizeof v) && !strcmp(v, "ab c d"), "decoded");
	ok(console_param("a=1&z", "z", v, sizeof v) && !v[0], "bare name: empty");
	ok(!console_param("a=1", "id", v, sizeof v), "absent");
	ok(!console_param("id=%00", "id", v, sizeof v), "a NUL byte is refused");
	ok(!console_param("id=%zz", "id", v, sizeof v), "bad escape refused");
	ok(!console_param("id=0123456789012345678901234567890123", "id", v, sizeof v), "too long");
	ok(console_is_uuid("0b6b0a6e-1d0c-4b7e-9a61-0a7c2f1e3d4c"), "uuid");
	ok(!console_is_uuid("0b6b0a6e-1d0c-4b7e-9a61-0a7c2f1e3d4'"), "not a uuid");
	ok(console_is_entry_id("1700000000000-0") && console_is_entry_id("17"), "entry ids");
	ok(!console_is_entry_id("17-") && !console_is_entry_id("-1") && !console_is_entry_id("1-2-3"),
	   "not entry ids");
}

static void test_token(void)
{
	ok(console_token_ok("secret-token-123", "secret-token-123"), "same token");
	ok(!console_token_ok("secret-token-123", "secret-token-12"), "prefix");
	ok(!console_token_ok("secret-token-123", "secret-token-1234"), "longer");
	ok(!console_token_ok("", ""), "no configured token never matches");
}

static void test_requeue(void)
{
	const char *why;
	is_int(console_requeue_classify(NULL, false, true, &why), CONSOLE_REQUEUE_SKIP, "not found: skip");
	is_int(console_requeue_classify("completed", true, false, NULL), CONSOLE_REQUEUE_REEVALUATE,
	       "a result: reevaluate");
	is_int(console_requeue_classify("failed", true, false, NULL), CONSOLE_REQUEUE_REEVALUATE,
	       "failed with a result: reevaluate");
	is_int(console_requeue_classify("queued", false, false, NULL), CONSOLE_REQUEUE_EVALUATE,
	       "queued: evaluate");
	is_int(console_requeue_classify("evaluating", false, false, NULL), CONSOLE_REQUEUE_EVALUATE,
	       "evaluating: evaluate");
	is_int(console_requeue_classify("failed", false, false, &why), CONSOLE_REQUEUE_SKIP,
	       "failed without include_failed: skip");
	ok(strstr(why, "include failed") != NULL, "and says how");
	is_int(console_requeue_classify("failed", false, true, NULL), CONSOLE_REQUEUE_RESET,
	       "failed with include_failed: reset");
	is_int(console_requeue_classify("rejected", false, true, NULL), CONSOLE_REQUEUE_SKIP,
	       "rejected: skip");
	char why2[200];
	ok(!console_requeue_confirm(1000, 1000, false, false, 1000, why2, sizeof why2), "1000 of 1000: no question");
	ok(console_requeue_confirm(1001, 1000, false, true, 0, why2, sizeof why2) &&
	   strstr(why2, "1001 jobs"), "1001: asks");
	ok(console_requeue_confirm(2, 1000, true, false, 1, why2, sizeof why2) &&
	   strstr(why2, "elo=adjust"), "elo=adjust over a challenge: asks");
	ok(!console_requeue_confirm(2, 1000, true, true, 2, why2, sizeof why2), "elo=adjust by ids: no question");
	ok(!console_requeue_confirm(2, 1000, true, false, 0, why2, sizeof why2), "elo=adjust, no re-evaluation: no question");
	ok(!console_requeue_confirm(0, 0, true, false, 0, why2, sizeof why2), "nothing to enqueue: no question");
}

static void test_quantile(void)
{
	const double b[] = { 1, 2, 4 };
	uint64_t none[4] = { 0 }, one[4] = { 0, 10, 0, 0 }, spread[4] = { 10, 10, 0, 0 },
	         high[4] = { 0, 0, 0, 5 };
	ok(console_quantile(none, b, 3, 0.5) < 0, "empty: -1");
	ok(console_quantile(one, b, 3, 0.5) == 1.5, "median inside the bucket (1, 2]: 1.5");
	ok(console_quantile(spread, b, 3, 0.25) == 0.5, "first bucket from 0");
	ok(console_quantile(spread, b, 3, 0.75) == 1.5, "p75 in the second bucket");
	ok(console_quantile(high, b, 3, 0.99) == 4, "above every bound: the last bound");
}

static void test_text(void)
{
	const char in[] = "ok \xc3\xa9 \xc3( \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf <script>\0!";
	json_t *j = console_text(in, sizeof in - 1);
	is_str(json_string_value(j), "ok \xc3\xa9 \\xc3( \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 "
	       "\\xc0\\xaf <script>\\x00!", "invalid UTF-8 and NUL as \\xNN, the rest unchanged");
	json_decref(j);
	j = console_text(NULL, 0);
	ok(json_is_null(j), "NULL is null");
	json_decref(j);
}

int main(void)
{
	test_parse();
	test_params();
	test_token();
	test_text();
	test_requeue();
	test_quantile();
	return tap_done();
}
