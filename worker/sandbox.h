/*
 * The isolation primitive: runs one command in a fresh sandbox, asynchronously
 * on a uv loop, and reports how it ended (exit status, signal, CPU and wall
 * time, peak memory, which limit it hit) with its captured stdout/stderr.
 *
 * Each run is a child cloned into new PID, mount, IPC and UTS namespaces that
 * joins one empty network namespace created by sandbox_new (no interfaces,
 * loopback down). The child, PID 1 of its namespace, builds a tmpfs root with
 * read-only bind mounts of the runtime (/usr and friends, a few /etc pieces),
 * a fresh /proc, a minimal /dev, a private size-limited /tmp and /work holding
 * the request's files, pivots into it, then forks the command as an
 * unprivileged uid with an empty environment (PATH, HOME, LANG), rlimits,
 * no_new_privs and a seccomp filter. Memory and task limits use cgroups (v2,
 * else v1, else rlimits only, with a warning). When the command exits, PID 1
 * exits and the kernel kills everything left in the namespace; a wall-clock
 * uv timer kills PID 1 earlier when needed. Children are reaped through a
 * pidfd watched by uv_poll: the loop never blocks.
 *
 * Concurrency is bounded by slots: sandbox_run queues requests (FIFO) while
 * every slot is busy. Requires root (CAP_SYS_ADMIN and friends).
 */
#ifndef ARBITER_SANDBOX_H
#define ARBITER_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct sandbox;

/* One file placed in /work before the command starts. */
struct sandbox_file {
	const char *path;          /* relative, checked by sandbox_path_ok */
	const char *data;
	size_t len;
	bool executable;           /* mode 0755 instead of 0644 */
};

struct sandbox_limits {
	uint32_t cpu_ms;           /* CPU time (user+sys) of the whole tree */
	uint32_t wall_ms;          /* wall clock from start to the end of PID 1 */
	uint64_t memory_bytes;     /* cgroup memory limit (rlimit fallback) */
	uint32_t processes;        /* tasks, threads included */
	uint64_t output_bytes;     /* cap for stdout and for stderr, each */
	uint64_t file_bytes;       /* RLIMIT_FSIZE and the size of /tmp and /work */
	uint32_t open_files;       /* RLIMIT_NOFILE */
	uint64_t stack_bytes;      /* RLIMIT_STACK (also the default thread stack); 0: min(memory, 64 MiB) */
};

struct sandbox_req {
	const char *const *argv;   /* NULL-terminated; argv[0] absolute or relative to /work */
	const struct sandbox_file *files;
	size_t nfiles;
	const char *stdin_data;    /* may be NULL (empty stdin) */
	size_t stdin_len;
	struct sandbox_limits lim;
	const char *collect;       /* file in /work to hand back when the command exits 0, or NULL */
	size_t collect_max;        /* larger files are not collected */
	const char *log_sub;       /* submission id for log lines, may be NULL */
	/* Container mode (worker/image.h), when rootfs is set: that host directory, which must
	 * hold empty directories dev, proc, tmp, submission and output, is bind-mounted
	 * read-only, nosuid, nodev as the root instead of the host's runtime; the files go to a
	 * tmpfs /submission remounted read-only once written; /output is the writable,
	 * size-limited tmpfs owned by the sandbox user (collect is relative to it); /tmp, /proc
	 * and /dev as always. */
	const char *rootfs;
	const char *const *envp;   /* container mode: the environment (NULL-terminated); NULL: none */
	const char *cwd;           /* container mode: the working directory; NULL: "/" */
	const char *path;          /* container mode: where argv[0] without '/' is searched
	                            * (PATH's form); NULL: /usr/local/bin:/usr/bin:/bin */
};

enum sandbox_end {
	SANDBOX_EXITED,            /* exit_code is valid */
	SANDBOX_SIGNALED,          /* signal is valid (SIGKILL when a limit killed it) */
	SANDBOX_NOT_RUN,           /* internal error before the command started */
};

struct sandbox_result {
	enum sandbox_end end;
	int exit_code;             /* when EXITED */
	int signal;                /* when SIGNALED */
	bool internal_error;       /* the sandbox itself failed: error says why */
	char error[256];
	bool wall_exceeded, cpu_exceeded, memory_exceeded, output_exceeded;
	uint64_t cpu_ms;           /* user + system of everything the run ran (init's set-up excluded) */
	uint64_t wall_ms;          /* from the clone to the end of the command */
	uint64_t memory_kb;        /* larger of its processes' peak RSS and its cgroup's peak */
	int exec_errno;            /* nonzero: the command could not be executed (then exit 127);
	                            * internal_error too unless argv[0] is a file of /work */
	const char *out;           /* stdout (NUL-terminated, at most output_bytes) */
	size_t out_len;
	const char *err;           /* stderr, likewise */
	size_t err_len;
	const char *collected;     /* the collected file, or NULL */
	size_t collected_len;
};

/* Called once per run, never synchronously inside sandbox_run. Every pointer in r
 * is valid only during the call. */
typedef void sandbox_cb(const struct sandbox_result *r, void *data);

struct sandbox_opts {
	int slots;                 /* concurrent sandboxes; <= 0: number of online CPUs */
	uint32_t uid_base;         /* slot i runs as uid/gid uid_base + i; 0: default */
	bool no_cgroups;           /* ARBITER_SANDBOX_CGROUP=none: rlimits only */
	const char *lock_dir;      /* ARBITER_SANDBOX_LOCK_DIR; NULL or "": /run/arbiter-sandbox */
	bool no_cgroup_mount;      /* ARBITER_SANDBOX_CGROUP_MOUNT=no: never mount cgroup2 ourselves */
	bool allow_unsafe_memory;  /* ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY=1: start without a memory cgroup */
};

/* Prepares the process-wide sandbox state on loop: the empty network namespace, the
 * cgroups of each slot (v2, v1 or none), the seccomp program, the mount plan; then
 * checks that a sandbox can really be built (a short blocking probe, at start only).
 * Logs a warning for each degraded feature. Returns 0 and *out, or -1 with err. */
int sandbox_new(uv_loop_t *loop, const struct sandbox_opts *o, struct sandbox **out,
                char *err, size_t errlen);

/* Frees everything, removes the cgroups. Only when no run is in flight or queued
 * (sandbox_busy and sandbox_queued both 0) and the loop no longer runs its handles;
 * closing the handles needs one more turn of the loop, so call it after uv_run
 * returned. NULL ok. */
void sandbox_free(struct sandbox *sb);

/* Starts req now, or queues it until a slot is free. req and everything it points to
 * are borrowed until cb ran. Returns 0 (cb will run exactly once), or -1 if req is
 * unusable (no argv, a bad file path): then cb never runs. */
int sandbox_run(struct sandbox *sb, const struct sandbox_req *req, sandbox_cb *cb, void *data);

int sandbox_busy(const struct sandbox *sb);     /* runs in progress */
int sandbox_queued(const struct sandbox *sb);   /* runs waiting for a slot */
int sandbox_slots(const struct sandbox *sb);

/* A one-line summary of what isolation is active ("pid,mnt,ipc,uts,net namespaces;
 * cgroup v1 memory+pids; seccomp"). Borrowed. */
const char *sandbox_describe(const struct sandbox *sb);

/* True when path is an acceptable file name for /work: relative, components of 1..255
 * bytes separated by single '/', no "." or "..", no NUL, at most 4095 bytes, at most
 * 32 components. */
bool sandbox_path_ok(const char *path);

#endif
