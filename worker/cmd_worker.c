/*
 * `arbiter worker`: loads the configuration (flags > environment > file,
 * worker/config.h), sets up logging and runs the daemon (worker/worker.h)
 * until SIGTERM / SIGINT. Exit 0 after a clean drain, 1 when it cannot start,
 * 2 on a configuration error (every setting is checked before any connection
 * or sandbox set-up).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "config.h"
#include "log.h"
#include "worker.h"

int cmd_worker(int argc, char **argv)
{
	struct config cfg;
	char err[512];
	enum log_level lvl;

	/* Hold SIGTERM / SIGINT back from the first instant: worker_run delivers
	 * them once its handlers are installed, so a stop requested during
	 * start-up drains (exit 0) instead of killing the process. */
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	pthread_sigmask(SIG_BLOCK, &term, NULL);

	int rc = config_load(argc, argv, &cfg, err, sizeof err);
	if (rc == 1)
		return 0;           /* --help */
	if (rc < 0 || config_validate(&cfg, err, sizeof err) < 0) {
		config_report("worker", err);
		if (rc == 0)
			config_free(&cfg);
		return 2;
	}
	if (log_level_parse(cfg.log_level, &lvl) < 0)
		lvl = LOG_INFO;
	log_setup(lvl, cfg.worker_id);
	if (log_level_parse(cfg.job_log_level, &lvl) == 0)
		log_set_job_level(lvl);
	log_set_text(!strcmp(cfg.log_format, "text") ||
	             (!strcmp(cfg.log_format, "auto") && isatty(STDERR_FILENO)));
	rc = worker_run(&cfg);
	config_free(&cfg);
	return rc;
}
