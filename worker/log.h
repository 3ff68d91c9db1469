/*
 * Structured logging: one JSON object per line on stderr (or, with
 * log_set_text, one human-readable line), with the time, the level, the
 * message and, when known, the worker id, submission id and job id.
 * Levels are checked before formatting. Never log a secret: connection
 * strings go through log_redact_url first.
 */
#ifndef ARBITER_LOG_H
#define ARBITER_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Sets the minimum level and the worker id stamped on every line. Call once
 * at start, before the loop runs. worker_id is copied; NULL leaves it unset. */
void log_setup(enum log_level min, const char *worker_id);

/* Human-readable lines ("TIME LEVEL message  submission=… job=…") instead of
 * JSON when text is nonzero. */
void log_set_text(int text);

/* Minimum level of the lines about one job (those with a submission or job
 * id), so a large backlog can log less per job than the worker logs about
 * itself; by default the same as log_setup's. */
void log_set_job_level(enum log_level min);

/* Parses "debug", "info", "warn"/"warning", "error". Returns 0 or -1. */
int log_level_parse(const char *s, enum log_level *out);

/* Nonzero when lvl could be written (for a job's line, log_msg decides). */
int log_enabled(enum log_level lvl);

/* Writes one line. sub (submission id) and job (stream entry id) may be NULL. */
void log_msg(enum log_level lvl, const char *sub, const char *job, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define LOG_AT_(lvl, sub, job, ...) \
	do { if (log_enabled(lvl)) log_msg(lvl, sub, job, __VA_ARGS__); } while (0)
#define LOGD(sub, job, ...) LOG_AT_(LOG_DEBUG, sub, job, __VA_ARGS__)
#define LOGI(sub, job, ...) LOG_AT_(LOG_INFO, sub, job, __VA_ARGS__)
#define LOGW(sub, job, ...) LOG_AT_(LOG_WARN, sub, job, __VA_ARGS__)
#define LOGE(sub, job, ...) LOG_AT_(LOG_ERROR, sub, job, __VA_ARGS__)

/* A copy of a Redis URL or libpq conninfo/URI with any password removed,
 * printed from the parsed form (see redact.h: redact_conn). Caller frees. */
char *log_redact_url(const char *url);

#endif
