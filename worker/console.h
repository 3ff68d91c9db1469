/*
 * The operator console's pure parts (no I/O), used by `arbiter console`
 * (worker/cmd_console.c) and tested by test/test-console.c: the request head
 * parser, query parameters, the token check, text made safe for JSON, the requeue's
 * rules (scripts/requeue's) and the charts' quantiles.
 */
#ifndef ARBITER_CONSOLE_H
#define ARBITER_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* A request head is at most this long; a request body (POST) at most CONSOLE_MAX_BODY. */
#define CONSOLE_MAX_HEAD 16384
#define CONSOLE_MAX_BODY 65536   /* a requeue of 1000 ids */

enum console_parse {
	CONSOLE_INCOMPLETE,     /* no blank line yet */
	CONSOLE_OK,
	CONSOLE_BAD,            /* malformed → 400 */
	CONSOLE_TOO_LARGE,      /* head over CONSOLE_MAX_HEAD, or a body over CONSOLE_MAX_BODY → 413 */
};

struct console_request {
	char method[8];
	char path[256];          /* without the query string */
	char query[1024];        /* after '?', undecoded; "" when none */
	char token[256];         /* X-Arbiter-Token; "" when absent */
	char operator_name[64];  /* X-Arbiter-Operator (who, for the log); "" when absent */
	char origin[256];        /* Origin; "" when absent */
	char host[256];          /* Host; "" when absent */
	long content_length;     /* -1 when absent */
	size_t head_len;         /* bytes of the head, blank line included */
};

/* Parses buf[0..len) as a request head (CRLF or LF line ends). A header longer than its
 * field in *req makes the request CONSOLE_BAD. Pure; never reads past len. */
enum console_parse console_parse(const char *buf, size_t len, struct console_request *req);

/* The value of parameter name in the query string q, %XX and '+' decoded, into out
 * (NUL-terminated, at most n bytes). Returns true if present and it fits (a decoded NUL
 * byte does not: false). */
bool console_param(const char *q, const char *name, char *out, size_t n);

/* Constant-time comparison of the token given with the configured one; an empty
 * configured token never matches. */
bool console_token_ok(const char *configured, const char *given);

/* s[0..n) as a JSON string of valid UTF-8: every byte that is not part of a well-formed
 * UTF-8 sequence (overlong forms, surrogates and code points above U+10FFFF included)
 * becomes the text \xNN. Returns a new reference; NULL s gives JSON null. */
json_t *console_text(const char *s, size_t n);

/* What a requeue does with one selected submission (scripts/requeue's rules). */
enum console_requeue {
	CONSOLE_REQUEUE_SKIP,         /* reported, not enqueued */
	CONSOLE_REQUEUE_EVALUATE,     /* queued/evaluating without a result: kind=evaluate */
	CONSOLE_REQUEUE_REEVALUATE,   /* has a result: kind=reevaluate with the chosen elo */
	CONSOLE_REQUEUE_RESET,        /* failed without a result and include_failed: set back to
	                                 queued, then kind=evaluate */
};

/* Classifies a submission with this status (NULL: no such submission) and whether it has
 * a result; *why (may be NULL) gets a static reason for the report. Pure. */
enum console_requeue console_requeue_classify(const char *status, bool has_result,
                                              bool include_failed, const char **why);

/* scripts/requeue's confirmation rule for bulk actions: more than confirm_over jobs, or
 * elo=adjust moving the Elo of a whole challenge or time range (by_ids false) with at
 * least one re-evaluation. Returns true when a confirmation is needed, the reasons in
 * why[0..n) ("; "-separated). Pure. */
bool console_requeue_confirm(long total, long confirm_over, bool elo_adjust, bool by_ids,
                             long reevaluate, char *why, size_t n);

/* The q-quantile (0 < q < 1) of a histogram: counts[0..nb] (not cumulative; counts[nb]
 * above every bound) with upper bounds[0..nb), interpolated linearly inside the bucket
 * as Prometheus' histogram_quantile does (the first bucket from 0; a quantile in the last,
 * unbounded bucket is its lower bound). Returns -1 when the histogram is empty. Pure. */
double console_quantile(const uint64_t *counts, const double *bounds, size_t nb, double q);

/* True when s is a UUID in its canonical text form (8-4-4-4-12 hex digits). */
bool console_is_uuid(const char *s);

/* True when s is a stream entry id: digits, optionally '-' and digits (≤ 20 each). */
bool console_is_entry_id(const char *s);

#endif
