/* JSON-lines (or human-readable) logger on stderr; see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "redact.h"
#include "util.h"

static enum log_level log_min = LOG_INFO;
static enum log_level log_job_min = LOG_INFO;
static int log_job_set;
static int log_text;
static char log_worker[128];

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void log_setup(enum log_level min, const char *worker_id)
{
	log_min = min;
	if (!log_job_set)
		log_job_min = min;
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

void log_set_text(int text)
{
	log_text = text;
}

void log_set_job_level(enum log_level min)
{
	log_job_min = min;
	log_job_set = 1;
}

int log_enabled(enum log_level lvl)
{
	return lvl >= log_min || lvl >= log_job_min;
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

	if (lvl < ((sub || job) ? log_job_min : log_min))
		return;
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

	if (log_text) {
		/* One line, control characters shown as spaces so a message cannot forge lines. */
		strbuf_addf(&line, "%s.%03ldZ %-5s ", tbuf, ts.tv_nsec / 1000000, level_names[lvl]);
		size_t start = line.len;
		strbuf_add(&line, msg, strlen(msg));
		if (sub)
			strbuf_addf(&line, "  submission=%s", sub);
		if (job)
			strbuf_addf(&line, "  job=%s", job);
		for (size_t i = start; i < line.len; i++)
			if ((unsigned char)line.buf[i] < 0x20)
				line.buf[i] = ' ';
		strbuf_add(&line, "\n", 1);
	} else {
		strbuf_addf(&line, "{\"time\":\"%s.%03ldZ\",\"level\":\"%s\"", tbuf,
			    ts.tv_nsec / 1000000, level_names[lvl]);
		add_field(&line, "msg", msg);
		if (log_worker[0])
			add_field(&line, "worker_id", log_worker);
		if (sub)
			add_field(&line, "submission_id", sub);
		if (job)
			add_field(&line, "job_id", job);
		strbuf_add(&line, "}\n", 2);
	}
	fwrite(line.buf, 1, line.len, stderr);
	fflush(stderr);
	strbuf_free(&line);
	if (msg != small)
		free(msg);
}

char *log_redact_url(const char *url)
{
	return redact_conn(url);
}
