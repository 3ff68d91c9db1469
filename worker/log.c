/* JSON-lines logger on stderr; see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util.h"

static enum log_level log_min = LOG_INFO;
static char log_worker[128];

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void log_setup(enum log_level min, const char *worker_id)
{
	log_min = min;
	if (worker_id)
		snprintf(log_worker, sizeof log_worker, "%s", worker_id);
}

int log_level_parse(const char *s, enum log_level *out)
{
	if (!s)
		return -1;
	for (int i = 0; i < 4; i++)
		if (!strcasecmp(s, level_names[i])) {
			*out = (enum log_level)i;
			return 0;
		}
	if (!strcasecmp(s, "warning")) {
		*out = LOG_WARN;
		return 0;
	}
	return -1;
}

int log_enabled(enum log_level lvl)
{
	return lvl >= log_min;
}

/* Appends s as the body of a JSON string (without quotes). */
static void json_escape(struct strbuf *sb, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': strbuf_addlit(sb, "\\\""); break;
		case '\\': strbuf_addlit(sb, "\\\\"); break;
		case '\n': strbuf_addlit(sb, "\\n"); break;
		case '\r': strbuf_addlit(sb, "\\r"); break;
		case '\t': strbuf_addlit(sb, "\\t"); break;
		default:
			if (*p < 0x20)
				strbuf_addf(sb, "\\u%04x", *p);
			else
				strbuf_add(sb, (const char *)p, 1);
		}
	}
}

static void add_field(struct strbuf *sb, const char *name, const char *value)
{
	strbuf_addf(sb, ",\"%s\":\"", name);
	json_escape(sb, value);
	strbuf_addlit(sb, "\"");
}

void log_msg(enum log_level lvl, const char *sub, const char *job, const char *fmt, ...)
{
	struct strbuf line = { 0 };
	char small[512], *msg = small;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof small) {
		msg = xmalloc((size_t)n + 1);
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}

	struct timespec ts;
	struct tm tm;
	char tbuf[40];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(tbuf, sizeof tbuf, "%Y-%m-%dT%H:%M:%S", &tm);

	strbuf_addf(&line, "{\"time\":\"%s.%03ldZ\",\"level\":\"%s\"", tbuf,
		    ts.tv_nsec / 1000000, level_names[lvl]);
	add_field(&line, "msg", msg);
	if (log_worker[0])
		add_field(&line, "worker_id", log_worker);
	if (sub)
		add_field(&line, "submission_id", sub);
	if (job)
		add_field(&line, "job_id", job);
	strbuf_addlit(&line, "}\n");
	fwrite(line.buf, 1, line.len, stderr);
	fflush(stderr);
	strbuf_free(&line);
	if (msg != small)
		free(msg);
}

char *log_redact_url(const char *url)
{
	struct strbuf out = { 0 };
	const char *p = url;

	if (!url)
		return xstrdup("");
	const char *scheme = strstr(url, "://");
	if (scheme) {
		/* URI: scheme://[user[:password]@]host... */
		const char *auth = scheme + 3;
		const char *end = auth + strcspn(auth, "/?#");
		const char *at = memrchr(auth, '@', (size_t)(end - auth));
		strbuf_add(&out, url, (size_t)(auth - url));
		if (at) {
			const char *colon = memchr(auth, ':', (size_t)(at - auth));
			if (colon) {
				strbuf_add(&out, auth, (size_t)(colon - auth));
				strbuf_addlit(&out, ":***");
			} else {
				strbuf_add(&out, auth, (size_t)(at - auth));
			}
			p = at;
		} else {
			p = auth;
		}
	}
	/* key=value words (conninfo) and query parameters: blank any password. */
	while (*p) {
		const char *hit = strcasestr(p, "password=");
		if (!hit) {
			strbuf_add(&out, p, strlen(p));
			break;
		}
		strbuf_add(&out, p, (size_t)(hit - p) + 9);
		strbuf_addlit(&out, "***");
		p = hit + 9;
		if (*p == '\'') {
			p++;
			while (*p && *p != '\'')
				p += (*p == '\\' && p[1]) ? 2 : 1;
			if (*p)
				p++;
		} else {
			p += strcspn(p, " &");
		}
	}
	if (!out.buf)
		return xstrdup("");
	return out.buf;
}
