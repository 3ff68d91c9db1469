/*
 * Entry points of the `arbiter` subcommands. Each takes the arguments after
 * `arbiter` (argv[0] is the command name) and returns the process exit code.
 */
#ifndef ARBITER_CMD_H
#define ARBITER_CMD_H

int cmd_score(int argc, char **argv);
int cmd_validate_spec(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_migrate(int argc, char **argv);
int cmd_status(int argc, char **argv);
/* The operator console (worker/cmd_console.c). */
int cmd_console(int argc, char **argv);
/* The pause switches (worker/pause.h), in worker/cmd_status.c. */
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
/* Standings (worker/cmd_leaderboard.c). */
int cmd_leaderboard(int argc, char **argv);
int cmd_weights(int argc, char **argv);
int cmd_standings(int argc, char **argv);
/* Hidden: the metric family names the binary exports (worker/cmd_status.c). */
int cmd_metrics_names(int argc, char **argv);
/* Hidden: resolved settings as JSON, for the operator scripts (worker/cmd_config.c). */
int cmd_config_dump(int argc, char **argv);
/* The image store (worker/cmd_image.c). */
int cmd_image(int argc, char **argv);
/* Fills o from ARBITER_IMAGE_DIR, ARBITER_IMAGE_MAX_MB, ARBITER_IMAGE_MAX_UNPACKED_MB;
 * -1 (after a message on stderr) when a value is malformed. */
struct image_opts;
int image_opts_from_env(struct image_opts *o);

#endif
