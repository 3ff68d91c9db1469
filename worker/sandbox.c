/*
 * The sandbox: runs one untrusted command in isolation without blocking the
 * uv loop (see sandbox.h for the model).
 *
 * Process structure of one run:
 *   worker (loop thread) --clone3(NEWPID|NEWNS|NEWIPC|NEWUTS, pidfd, exit signal 0)-->
 *     "init": PID 1 of the new namespace, still root, never execs. Moves itself
 *             into the slot's cgroups, joins the shared empty network namespace,
 *             builds the root file system, pivots into it, then vforks
 *       "payload": drops to the slot's uid, rlimits, no_new_privs, seccomp,
 *                  closes every other fd, execs the command.
 *     init reaps everything. When the payload ends, or the worker sends SIGTERM
 *     because a limit was hit, init kill(-1, SIGKILL)s the rest of the namespace
 *     and reaps it too (so that all CPU time is accounted), records the status
 *     in a page shared with the worker, hands back a compile artifact through a
 *     memfd, and exits. SIGKILL on init (the kernel then empties the namespace)
 *     is the backstop. The worker sees init's pidfd become readable and reaps
 *     it with waitid(P_PIDFD, WNOHANG): the loop never blocks.
 *
 * Everything the child side needs (paths, mount options, argv, the seccomp
 * program) is prepared before clone: the child only makes system calls (no
 * malloc, no stdio), which is what is safe after forking a threaded process.
 */
#include "sandbox.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <sys/sysinfo.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#define SB_CLONE_INTO_CGROUP 0x200000000ULL
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 1U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 2U
#endif

/* struct clone_args of <linux/sched.h>, spelled out to avoid clashing with glibc's <sched.h>. */
struct sb_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls,
		set_tid, set_tid_size, cgroup;
};

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#define SB_STAGE "/tmp"               /* where init mounts the new root before pivot_root */
#define SB_DEFAULT_UID_BASE 2000000000u
#define SB_UID_BLOCK 64u               /* uids are allocated to pools in blocks of this many */
#define SB_UID_MAX_BLOCKS 4            /* 256 slots at most */
#define SB_UID_TRIES 4096              /* ranges tried before giving up */
#define SB_DEFAULT_LOCK_DIR "/run/arbiter-sandbox"
#define SB_STATUS_PAGE 4096
#define SB_MAX_STEPS 48
#define SB_TERM_MS 300                /* init gets this long to clean up before SIGKILL */
/* How far two readings of one process's RSS may differ with nothing touched in between:
 * the kernel keeps each RSS counter (anonymous, file, shared memory pages) per CPU and
 * folds a CPU's part in only once it reaches a batch of max(32, 2 x CPUs) pages, so a
 * reading may miss up to that many pages per CPU and counter. Plus this much. */
#define SB_RSS_SLACK_KB 256
#define SB_RSS_SLACK_MAX_KB (16 * 1024)
#define SB_CPU_POLL_MS 100            /* how often a run's cgroup CPU time is checked */           /* what the command's vfork may add to init's RSS */

/* ---- the page shared between the worker and a run's init ------------------------- */

enum sb_stage {
	ST_NONE, ST_FDS, ST_NETNS, ST_PRIVATE, ST_ROOT, ST_PLAN, ST_DEV, ST_PROC, ST_TMP, ST_WORK,
	ST_FILES, ST_PIVOT, ST_RDONLY, ST_CGROUP, ST_STDIN, ST_FORK, ST_SECCOMP, ST_DONE,
	ST_CLONE,   /* the worker's clone of the run's init failed (no child ran) */
};
static const char *const stage_names[] = {
	"none", "setting up file descriptors", "joining the network namespace", "making mounts private", "mounting the root tmpfs",
	"building the root", "creating /dev", "mounting /proc", "mounting /tmp", "mounting /work",
	"writing the files", "pivot_root", "remounting / read-only", "joining the slot's cgroups",
	"preparing stdin", "forking the command", "loading the seccomp filter", "done",
	"creating the run's namespaces (clone)",
};

struct sb_status {
	volatile int stage;            /* last stage reached */
	volatile int fail_stage;       /* stage that failed (0 none) */
	volatile int fail_errno;
	volatile int fail_detail;      /* index of the plan step / file that failed */
	volatile int payload_done;     /* payload_status and payload_end_ns are valid (release) */
	volatile int payload_status;   /* wait status of the command */
	volatile uint64_t payload_end_ns; /* CLOCK_MONOTONIC (uv_hrtime's clock) when init reaped it */
	volatile int exec_errno;       /* nonzero: execve failed */
	volatile long maxrss_kb;       /* largest ru_maxrss of anything init reaped (see init_rss_kb) */
	volatile long init_rss_kb;     /* init's own peak RSS once the command left its memory,
	                                * plus the counters' error (sb_rss_slack_kb) */
	volatile long self_cpu_us;     /* init's own CPU time, measured just before it exits */
	volatile long collected;       /* bytes copied into the collect memfd, -1 none */
	volatile int probe_ok;         /* probe runs: everything worked */
	volatile int seccomp_errno;    /* probe runs: loading the filter failed with */
};

/* ---- the mount plan: how the root is built, prepared once ------------------------- */

enum sb_step_kind { STEP_DIR, STEP_SYMLINK, STEP_BIND, STEP_COPY };
struct sb_step {
	enum sb_step_kind kind;
	char *target;        /* absolute path under SB_STAGE */
	char *source;        /* host path to bind, or symlink contents */
	char *data;          /* STEP_COPY contents */
	size_t len;
	bool file;           /* STEP_BIND of a regular file */
};

/* ---- cgroups ------------------------------------------------------------------------ */

enum sb_cg_mode { CG_NONE, CG_V1, CG_V2 };

struct sb_slot {
	int index;
	bool busy;
	struct sb_run *run;             /* the run using the slot, when busy */
	uid_t uid;
	struct sb_status *st;
	/* v1: memory and pids hierarchies; v2: one directory */
	char *mem_dir, *pids_dir;       /* v1 */
	char *dir;                      /* v2 */
	int dir_fd;                     /* v2: for CLONE_INTO_CGROUP */
	int mem_procs, pids_procs;      /* cgroup.procs (v2: mem_procs) */
	int mem_limit, memsw_limit, mem_maxusage, mem_failcnt, mem_oom; /* v1 control files */
	int mem_usage;                  /* v1 memory.usage_in_bytes */
	int v2_max, v2_swap, v2_events, v2_kill; /* v2 control files */
	int v2_current, v2_peak;        /* v2 memory.current; memory.peak (-1: not resettable) */
	int pids_max;
	char *cpu_dir;                  /* v1 cpuacct */
	int cpu_procs, cpu_usage;       /* v1 cpuacct cgroup.procs, cpuacct.usage */
	int v2_cpustat;                 /* v2 cpu.stat (there even without the cpu controller) */
	unsigned gen;                   /* generation of the slot's cgroups: slot-<index>-<gen> */
	bool cg_open;                   /* the slot has fresh cgroups no run used yet */
	struct sb_cgwork *cgw;          /* its cgroups are being renewed in the thread pool */
	uint64_t cur_mem, cur_pids;     /* values written last (0 = never) */
};

struct sb_run;
struct sb_nswork;
struct sb_cgwork;

struct sandbox {
	bool no_cgroups;            /* ARBITER_SANDBOX_CGROUP=none (struct sandbox_opts) */
	bool no_cgroup_mount, allow_unsafe_memory;   /* struct sandbox_opts */
	char *lock_dir;             /* uid locks and our own cgroup2 mount point */
	uv_loop_t *loop;
	int nslots;
	struct sb_slot *slots;
	void *status_pages;
	int busy, queued;
	struct sb_run *qhead, *qtail;
	int netns_fd;                   /* the probe's network namespace */
	int *spare_ns;                  /* fresh network namespaces for the next runs */
	int nspare, making, checking;   /* how many are ready / being made / being checked */
	struct sb_nswork *nswork;       /* the works in the thread pool */
	uint64_t clone_flags;
	enum sb_cg_mode cg;
	bool cg_mem, cg_pids;           /* which controllers really work */
	char *cg_base_mem, *cg_base_pids, *cg_base_v2;   /* per-process parent dirs to remove */
	char *cg_base_cpu;              /* v1 cpuacct */
	int cg_lock[4];                 /* flocks on those (ownership: see cg_clean_stale) */
	bool cg_cpu;                    /* CPU time of a run's whole tree from its cgroup */
	char **grave;                   /* slot cgroups whose rmdir failed, retried later */
	size_t ngrave;
	int uid_locks[SB_UID_MAX_BLOCKS + 1]; /* flocks on the uid blocks this pool owns (-1 unused) */
	char *uid_lock_paths[SB_UID_MAX_BLOCKS + 1]; /* their files, removed at the end */
	long rss_slack_kb;              /* sb_rss_slack_kb(), for init (init_rss_kb) */
	struct sock_fprog seccomp;      /* .filter NULL: no filter */
	struct sb_step steps[SB_MAX_STEPS];
	int nsteps;
	char *stage_dev, *stage_proc, *stage_tmp, *stage_work;
	rlim_t hard[RLIM_NLIMITS];      /* our own hard limits: a child cannot raise them */
	uint64_t data_floor;            /* smallest RLIMIT_DATA backstop with a memory cgroup */
	char cg_why[1024];
	char cg_where[256];             /* " below ..." for describe */              /* why there is no memory cgroup (for the start-up error) */
	char describe[640];
};

/* ---- one run ------------------------------------------------------------------------ */

struct sb_run {
	struct sandbox *sb;
	struct sb_run *next;
	struct sandbox_req req;
	sandbox_cb *cb;
	void *data;
	struct sb_slot *slot;
	pid_t pid;
	int pidfd, out_fd, err_fd, collect_fd;
	uv_poll_t pidfd_poll, out_poll, err_poll;
	uv_timer_t timer;
	uv_timer_t cpu_timer;           /* polls the cgroup's CPU time (the whole tree's) */
	bool pidfd_polling, out_polling, err_polling;
	int open_handles;
	bool started, reaped, out_done, err_done, finished, killed;
	enum { TM_REPORT, TM_WALL, TM_HARDKILL, TM_GRACE } tmode;   /* what the timer is for */
	struct strbuf out, err;
	size_t out_cap, err_cap;
	struct sandbox_result res;
	uint64_t start_ns;
	int netns_fd;                   /* the run's own network namespace */
	uint64_t oom_base;
	uint64_t mem_base;              /* cgroup memory usage when the run started */
	bool peak_ok;                   /* the cgroup's peak was reset for this run */
	long init_status;
	struct rusage ru;
	/* prepared for the child */
	char tmp_opts[96], work_opts[128];
	struct rlimit rl[10];
	int rl_res[10];
	int nrl;
	const char *envp[4];
	char exec_path[PATH_MAX];
	bool exec_search;
	const char *const *env;         /* the command's environment (envp, or the request's) */
	const char *search;             /* PATH-style list for exec_search */
	const char *cwd;                /* the command's working directory */
	const char *outdir;             /* the writable directory collect reads from */
	char sub_opts[128];             /* container mode: /submission's tmpfs */
};

static void run_start(struct sb_run *r);
static void on_timer(uv_timer_t *t);
static void run_finish(struct sb_run *r);
static void queue_pump(struct sandbox *sb);

/* ======================================================================================
 * Small helpers (worker side)
 * ==================================================================================== */

static uint64_t now_ns(void)
{
	return uv_hrtime();
}

static int write_str_fd(int fd, const char *s)
{
	size_t n = strlen(s);
	ssize_t w = pwrite(fd, s, n, 0);
	return w == (ssize_t)n ? 0 : -1;
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = write_str_fd(fd, s);
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

static ssize_t read_fd_at0(int fd, char *buf, size_t n)
{
	ssize_t r = pread(fd, buf, n - 1, 0);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return r;
}

static char *read_small_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct strbuf sb = { 0 };
	char buf[8192];
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			close(fd);
			strbuf_free(&sb);
			return NULL;
		}
		if (r == 0)
			break;
		strbuf_add(&sb, buf, (size_t)r);
		if (sb.len > (64u << 20))
			break;
	}
	close(fd);
	if (!sb.buf)
		strbuf_addlit(&sb, "");
	if (len)
		*len = sb.len;
	return sb.buf;
}

/* Finds the value of "key N" in a cgroup key/value file. */
static uint64_t kv_get(const char *text, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = text; p && *p;) {
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return strtoull(p + kl + 1, NULL, 10);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return 0;
}

static uint64_t fd_kv_get(int fd, const char *key)
{
	char buf[1024];
	if (fd < 0 || read_fd_at0(fd, buf, sizeof buf) < 0)
		return 0;
	return kv_get(buf, key);
}

static uint64_t fd_u64(int fd)
{
	char buf[64];
	if (fd < 0 || read_fd_at0(fd, buf, sizeof buf) < 0)
		return 0;
	return strtoull(buf, NULL, 10);
}

static int fd_write_u64(int fd, uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
	return write_str_fd(fd, buf);
}

static int pidfd_kill(int pidfd, pid_t pid, int sig)
{
	if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0)
		return 0;
	if (errno == ENOSYS && pid > 0)
		return kill(pid, sig);
	return -1;
}

bool sandbox_path_ok(const char *path)
{
	if (!path || !*path || strlen(path) > 4095 || path[0] == '/')
		return false;
	int comps = 0;
	const char *p = path;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 0 || n > 255)
			return false;
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (++comps > 32)
			return false;
		if (!e)
			break;
		p = e + 1;
		if (!*p)
			return false;   /* trailing slash */
	}
	return true;
}

/* ======================================================================================
 * The child side: init and payload. Only system calls from here to the next banner.
 * ==================================================================================== */

static void child_fail(struct sb_status *st, int stage, int detail)
{
	st->fail_stage = stage;
	st->fail_errno = errno;
	st->fail_detail = detail;
	_exit(125);
}

static size_t c_strlen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Creates path (already validated: relative, no "..") under dirfd without following
 * any symlink, with its parent directories; owner uid/gid. */
static int child_write_file(int dirfd, const char *path, const char *data, size_t len,
                            mode_t mode, uid_t uid, gid_t gid)
{
	char buf[4096];
	size_t n = c_strlen(path);
	if (n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (size_t i = 0; i <= n; i++)
		buf[i] = path[i];
	int cur = dirfd;
	char *comp = buf;
	for (;;) {
		char *slash = comp;
		while (*slash && *slash != '/')
			slash++;
		if (!*slash)
			break;
		*slash = 0;
		if (mkdirat(cur, comp, 0755) == 0) {
			int d = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (d >= 0)
				(void)fchown(d, uid, gid);
			if (cur != dirfd)
				close(cur);
			cur = d;
		} else if (errno == EEXIST) {
			int d = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cur != dirfd)
				close(cur);
			cur = d;
		} else {
			if (cur != dirfd)
				close(cur);
			return -1;
		}
		if (cur < 0)
			return -1;
		comp = slash + 1;
	}
	int fd = openat(cur, comp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	int e = errno;
	if (cur != dirfd)
		close(cur);
	if (fd < 0) {
		errno = e;
		return -1;
	}
	int rc = write_all(fd, data, len);
	if (rc == 0)
		rc = fchown(fd, uid, gid);
	e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* Closes every fd except those in keep[] (n entries, any order). */
static void close_all_but(const int *keep, int n)
{
	int sorted[8];
	int m = 0;
	for (int i = 0; i < n; i++)
		if (keep[i] >= 0)
			sorted[m++] = keep[i];
	for (int i = 1; i < m; i++)
		for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
			int t = sorted[j];
			sorted[j] = sorted[j - 1];
			sorted[j - 1] = t;
		}
	unsigned lo = 0;
	for (int i = 0; i <= m; i++) {
		unsigned hi = i < m ? (unsigned)sorted[i] : ~0u;
		if (i < m && (unsigned)sorted[i] < lo)
			continue;
		if (hi > lo) {
			if (syscall(SYS_close_range, lo, hi - 1, 0) < 0) {
				unsigned top = hi > 65536 ? 65536 : hi;
				for (unsigned fd = lo; fd < top; fd++)
					close((int)fd);
			}
		}
		lo = hi + 1;
		if (i < m && (unsigned)sorted[i] == ~0u)
			break;
	}
}

static void set_oom_adj(const char *v)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, v, c_strlen(v));
		close(fd);
	}
}

/* Set in init when the worker asks it to end the run (SIGTERM). */
static volatile sig_atomic_t init_term;

/* Kills the namespace from the handler itself: a flag alone could arrive just before
 * init blocks in wait4 again, and then nothing would wake it until the SIGKILL backstop
 * (which loses the accounting). kill is async-signal-safe. */
static void init_on_term(int sig)
{
	(void)sig;
	init_term = 1;
	(void)kill(-1, SIGKILL);
}

/* The command, in the vfork child of init. Never returns. */
__attribute__((noinline, noreturn))
static void payload_exec(struct sandbox *sb, struct sb_run *r, int in_fd, int out_w, int err_w)
{
	struct sb_status *st = r->slot->st;
	uid_t uid = r->slot->uid;
	(void)setsid();
	set_oom_adj("1000");   /* first in line for any OOM kill, the cgroup's or the host's */
	if (dup2(in_fd, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
		goto fail;
	if (syscall(SYS_close_range, 3u, ~0u, 0) < 0)
		for (int fd = 3; fd < 65536; fd++)
			close(fd);
	for (int i = 0; i < r->nrl; i++)
		if (setrlimit(r->rl_res[i], &r->rl[i]) < 0)
			goto fail;
	/* Empty the capability bounding set: nosuid mounts and no_new_privs already keep an
	 * exec from granting any (setuid or file capabilities), this is the second lock.
	 * Best effort: without CAP_SETPCAP it fails and changes nothing. */
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL)
			break;
	/* Raw system calls: the C library's wrappers would broadcast the change to the
	 * worker's other threads, which do not exist in this process (and might have left
	 * the library's thread-list lock taken when we were cloned). */
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, uid, uid, uid) < 0 ||
	    syscall(SYS_setresuid, uid, uid, uid) < 0)
		goto fail;
	if (chdir(r->cwd) < 0)
		goto fail;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		goto fail;
	if (sb->seccomp.filter && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &sb->seccomp) < 0)
		goto fail;
	if (!r->exec_search) {
		execve(r->exec_path, (char *const *)r->req.argv, (char *const *)r->env);
	} else {
		/* Each directory of the search list in turn (no C library: we are a vfork child). */
		const char *name = r->req.argv[0], *d = r->search;
		size_t nl = c_strlen(name);
		int first = 0;
		while (*d) {
			const char *e = d;
			while (*e && *e != ':')
				e++;
			size_t dl = (size_t)(e - d);
			char path[PATH_MAX];
			if (dl && dl + nl + 2 <= sizeof path) {
				for (size_t i = 0; i < dl; i++)
					path[i] = d[i];
				path[dl] = '/';
				for (size_t i = 0; i <= nl; i++)
					path[dl + 1 + i] = name[i];
				execve(path, (char *const *)r->req.argv, (char *const *)r->env);
				if (errno != ENOENT && errno != ENOTDIR && errno != EACCES)
					break;
				if (errno == EACCES && !first)
					first = EACCES;
			}
			d = *e ? e + 1 : e;
		}
		if (first && errno == ENOENT)
			errno = first;
	}
fail:
	st->exec_errno = errno ? errno : EINVAL;
	_exit(127);
}

/* vforks the command: returns its pid in init, or -1. The child never returns from here
 * (payload_exec execs or _exits). Its own function so that none of init_main's variables
 * lives across the vfork (-Wclobbered at -O3). */
__attribute__((noinline))
static pid_t spawn_payload(struct sandbox *sb, struct sb_run *r, int in_fd, int out_w, int err_w)
{
	pid_t pid = vfork();
	if (pid == 0)
		payload_exec(sb, r, in_fd, out_w, err_w);
	return pid;
}

/* Checks that the kernel takes our seccomp program, in a throwaway child (vfork: fork()
 * would take the C library's locks, which another thread of the worker may have held when
 * we were cloned). Returns 0 or the errno that refused it. */
__attribute__((noinline))
static int probe_seccomp(struct sandbox *sb, struct sb_status *st)
{
	pid_t p = vfork();
	if (p == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(errno & 0xff);
		if (sb->seccomp.filter && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &sb->seccomp) < 0)
			_exit(errno & 0xff);
		/* A forbidden call must fail. */
		if (sb->seccomp.filter && syscall(SYS_unshare, CLONE_NEWUTS) == 0)
			_exit(EINVAL);
		_exit(0);
	}
	int ws = 0;
	if (p < 0 || waitpid(p, &ws, 0) < 0)
		child_fail(st, ST_SECCOMP, 0);
	return WIFEXITED(ws) ? WEXITSTATUS(ws) : EINVAL;
}

/* init's first steps: die with the worker, default signal dispositions, nothing blocked,
 * umask 0; only the fds *mv[0..n) (n <= 8) stay open, moved above 2 (updated in place), and
 * 0..2 are /dev/null so that nothing created later (the stdin memfd) lands on them. */
static void init_reset(struct sb_status *st, int *const *mv, int n)
{
	/* Die with the worker; default signal dispositions, nothing blocked. */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	struct sigaction dfl;
	for (size_t i = 0; i < sizeof dfl; i++)
		((char *)&dfl)[i] = 0;
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			(void)sigaction(s, &dfl, NULL);
	sigset_t none;
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	umask(0);

	/* Keep only our fds, all above 2; 0..2 become /dev/null so that nothing created
	 * later (the stdin memfd) lands on them. */
	int keep[8];
	for (int i = 0; i < n && i < 8; i++)
		keep[i] = *mv[i];
	close_all_but(keep, n < 8 ? n : 8);
	for (int i = 0; i < n; i++)
		if (*mv[i] >= 0 && *mv[i] < 3) {
			int nfd = fcntl(*mv[i], F_DUPFD_CLOEXEC, 3);
			if (nfd < 0)
				child_fail(st, ST_FDS, i);
			close(*mv[i]);
			*mv[i] = nfd;
		}
	for (;;) {
		int nul = open("/dev/null", O_RDWR);
		if (nul < 0)
			child_fail(st, ST_FDS, 9);
		if (nul > 2) {
			close(nul);
			break;
		}
	}
}

/* init: the mount plan's steps (directories, symlinks, copies, read-only binds of the
 * runtime) under the new root. */
static void init_plan(struct sandbox *sb, struct sb_status *st)
{
	st->stage = ST_PLAN;
	for (int i = 0; i < sb->nsteps; i++) {
		const struct sb_step *s = &sb->steps[i];
		switch (s->kind) {
		case STEP_DIR:
			if (mkdir(s->target, 0755) < 0 && errno != EEXIST)
				child_fail(st, ST_PLAN, i);
			break;
		case STEP_SYMLINK:
			if (symlink(s->source, s->target) < 0)
				child_fail(st, ST_PLAN, i);
			break;
		case STEP_COPY: {
			int fd = open(s->target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (fd < 0 || write_all(fd, s->data, s->len) < 0)
				child_fail(st, ST_PLAN, i);
			close(fd);
			break;
		}
		case STEP_BIND:
			if (s->file) {
				int fd = open(s->target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
				if (fd < 0)
					child_fail(st, ST_PLAN, i);
				close(fd);
			} else if (mkdir(s->target, 0755) < 0 && errno != EEXIST) {
				child_fail(st, ST_PLAN, i);
			}
			if (mount(s->source, s->target, NULL, MS_BIND, NULL) < 0)
				child_fail(st, ST_PLAN, i);
			if (mount(NULL, s->target, NULL,
			          MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
				child_fail(st, ST_PLAN, i);
			break;
		}
	}
}

/* init, container mode: the image's root, read-only, with /dev, /proc, /tmp, a read-only
 * /submission holding the request's files and a writable /output, pivoted into. */
static void init_image_root(struct sb_run *r, struct sb_status *st, uid_t uid)
{
	st->stage = ST_ROOT;
	if (mount(r->req.rootfs, SB_STAGE, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, SB_STAGE, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		child_fail(st, ST_ROOT, 0);

	st->stage = ST_DEV;
	if (mount("tmpfs", SB_STAGE "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
	          "size=64k,nr_inodes=32,mode=755") < 0)
		child_fail(st, ST_DEV, 0);
	{
		int dev = open(SB_STAGE "/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dev < 0)
			child_fail(st, ST_DEV, 0);
		if (mknodat(dev, "null", S_IFCHR | 0666, makedev(1, 3)) < 0 ||
		    mknodat(dev, "zero", S_IFCHR | 0666, makedev(1, 5)) < 0 ||
		    mknodat(dev, "urandom", S_IFCHR | 0666, makedev(1, 9)) < 0 ||
		    symlinkat("/proc/self/fd", dev, "fd") < 0 ||
		    symlinkat("/proc/self/fd/0", dev, "stdin") < 0 ||
		    symlinkat("/proc/self/fd/1", dev, "stdout") < 0 ||
		    symlinkat("/proc/self/fd/2", dev, "stderr") < 0)
			child_fail(st, ST_DEV, 1);
		close(dev);
		if (mount(NULL, SB_STAGE "/dev", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
		          "size=64k,nr_inodes=32,mode=755") < 0)
			child_fail(st, ST_DEV, 2);
	}

	st->stage = ST_PROC;
	if (mount("proc", SB_STAGE "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          "hidepid=2,subset=pid") < 0 &&
	    mount("proc", SB_STAGE "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") < 0)
		child_fail(st, ST_PROC, 0);

	st->stage = ST_TMP;
	if (mount("tmpfs", SB_STAGE "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, r->tmp_opts) < 0)
		child_fail(st, ST_TMP, 0);

	st->stage = ST_WORK;
	if (mount("tmpfs", SB_STAGE "/output", "tmpfs", MS_NOSUID | MS_NODEV, r->work_opts) < 0 ||
	    mount("tmpfs", SB_STAGE "/submission", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          r->sub_opts) < 0)
		child_fail(st, ST_WORK, 0);

	st->stage = ST_FILES;
	{
		int sub = open(SB_STAGE "/submission", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sub < 0)
			child_fail(st, ST_FILES, -1);
		for (size_t i = 0; i < r->req.nfiles; i++) {
			const struct sandbox_file *f = &r->req.files[i];
			if (child_write_file(sub, f->path, f->data, f->len, f->executable ? 0755 : 0644,
			                     0, 0) < 0)
				child_fail(st, ST_FILES, (int)i);
		}
		close(sub);
		if (mount(NULL, SB_STAGE "/submission", NULL,
		          MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, r->sub_opts) < 0)
			child_fail(st, ST_FILES, -2);
	}
	(void)uid;

	st->stage = ST_PIVOT;
	if (chdir(SB_STAGE) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		child_fail(st, ST_PIVOT, 0);
	st->stage = ST_RDONLY;   /* the bind mount is read-only already */
}

/* init: the run's root file system (the mount plan, /dev, /proc, /tmp, /work with the
 * request's files), pivoted into and remounted read-only. */
static void init_build_root(struct sandbox *sb, struct sb_run *r, struct sb_status *st, uid_t uid)
{
	st->stage = ST_PRIVATE;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(st, ST_PRIVATE, 0);
	if (r->req.rootfs) {
		init_image_root(r, st, uid);
		return;
	}

	st->stage = ST_ROOT;
	if (mount("tmpfs", SB_STAGE, "tmpfs", MS_NOSUID, "size=4m,nr_inodes=512,mode=755") < 0)
		child_fail(st, ST_ROOT, 0);

	init_plan(sb, st);

	st->stage = ST_DEV;
	{
		int dev = open(sb->stage_dev, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dev < 0)
			child_fail(st, ST_DEV, 0);
		if (mknodat(dev, "null", S_IFCHR | 0666, makedev(1, 3)) < 0 ||
		    mknodat(dev, "zero", S_IFCHR | 0666, makedev(1, 5)) < 0 ||
		    mknodat(dev, "urandom", S_IFCHR | 0666, makedev(1, 9)) < 0 ||
		    symlinkat("/proc/self/fd", dev, "fd") < 0 ||
		    symlinkat("/proc/self/fd/0", dev, "stdin") < 0 ||
		    symlinkat("/proc/self/fd/1", dev, "stdout") < 0 ||
		    symlinkat("/proc/self/fd/2", dev, "stderr") < 0)
			child_fail(st, ST_DEV, 1);
		close(dev);
	}

	st->stage = ST_PROC;
	/* subset=pid (5.8+): only the processes, none of the host's files (cmdline, kcore,
	 * pressure, sys, ...); older kernels get the processes with hidepid alone. */
	if (mount("proc", sb->stage_proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          "hidepid=2,subset=pid") < 0 &&
	    mount("proc", sb->stage_proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") < 0)
		child_fail(st, ST_PROC, 0);

	st->stage = ST_TMP;
	if (mount("tmpfs", sb->stage_tmp, "tmpfs", MS_NOSUID | MS_NODEV, r->tmp_opts) < 0)
		child_fail(st, ST_TMP, 0);

	st->stage = ST_WORK;
	if (mount("tmpfs", sb->stage_work, "tmpfs", MS_NOSUID | MS_NODEV, r->work_opts) < 0)
		child_fail(st, ST_WORK, 0);

	st->stage = ST_FILES;
	{
		int work = open(sb->stage_work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (work < 0)
			child_fail(st, ST_FILES, -1);
		for (size_t i = 0; i < r->req.nfiles; i++) {
			const struct sandbox_file *f = &r->req.files[i];
			if (child_write_file(work, f->path, f->data, f->len, f->executable ? 0755 : 0644,
			                     uid, uid) < 0)
				child_fail(st, ST_FILES, (int)i);
		}
		close(work);
	}

	st->stage = ST_PIVOT;
	if (chdir(SB_STAGE) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		child_fail(st, ST_PIVOT, 0);

	st->stage = ST_RDONLY;
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) < 0)
		child_fail(st, ST_RDONLY, 0);
}

/* init, once the command runs: reaps everything until the namespace is empty; when the
 * command ends, or the worker asks (SIGTERM: a limit was hit), kills whatever else runs. */
static void init_reap(struct sb_status *st, pid_t payload)
{
	/* Reap everything. When the command ends, or the worker asks (SIGTERM: a limit was
	 * hit), kill whatever else runs in the namespace and reap it too, so that its CPU time
	 * is accounted to us and so to the worker's waitid. */
	bool killed_all = false;
	for (;;) {
		int ws;
		struct rusage ru;
		pid_t p = wait4(-1, &ws, __WALL, &ru);
		if (p < 0) {
			if (errno == EINTR) {
				if (init_term && !killed_all) {
					(void)kill(-1, SIGKILL);
					killed_all = true;
				}
				continue;
			}
			break;   /* ECHILD: the namespace is empty */
		}
		/* The command's peak includes ours at its execve: only a larger one is its own. */
		long rss = ru.ru_maxrss;
		if (p == payload && rss <= st->init_rss_kb)
			rss = 0;
		if (rss > st->maxrss_kb)
			st->maxrss_kb = rss;
		if (p == payload) {
			struct timespec ts;
			if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
				st->payload_end_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
			st->payload_status = ws;
			__atomic_store_n(&st->payload_done, 1, __ATOMIC_RELEASE);
		}
		if ((p == payload || init_term) && !killed_all) {
			(void)kill(-1, SIGKILL);
			killed_all = true;
		}
	}
}

/* init: the command's stdin, a sealed memfd holding the request's (or /dev/null). */
static int init_stdin(struct sb_run *r, struct sb_status *st)
{
	st->stage = ST_STDIN;
	int in_fd;
	if (r->req.stdin_len) {
		in_fd = (int)syscall(SYS_memfd_create, "stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (in_fd < 0 || write_all(in_fd, r->req.stdin_data, r->req.stdin_len) < 0 ||
		    lseek(in_fd, 0, SEEK_SET) < 0)
			child_fail(st, ST_STDIN, 0);
		(void)fcntl(in_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
	} else {
		in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (in_fd < 0)
			child_fail(st, ST_STDIN, 1);
	}
	return in_fd;
}

/* init, at the end: a compile step hands its output file back through the memfd. */
static void init_collect(struct sb_run *r, struct sb_status *st, int collect_fd)
{
	if (collect_fd >= 0 && st->payload_done && WIFEXITED(st->payload_status) &&
	    WEXITSTATUS(st->payload_status) == 0 && r->req.collect) {
		int wd = open(r->outdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int fd = wd < 0 ? -1 : openat(wd, r->req.collect, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat sbuf;
		if (fd >= 0 && fstat(fd, &sbuf) == 0 && S_ISREG(sbuf.st_mode) &&
		    (size_t)sbuf.st_size <= r->req.collect_max) {
			long total = 0;
			for (;;) {
				ssize_t n = sendfile(collect_fd, fd, NULL, 1 << 20);
				if (n <= 0)
					break;
				total += n;
				if ((size_t)total > r->req.collect_max)
					break;
			}
			/* all of it, or nothing (a failed copy is not a shorter program) */
			if ((size_t)total <= r->req.collect_max && total == (long)sbuf.st_size)
				st->collected = total;
		}
	}
}

/* (Long: the stages of a run's set-up, in the order the child takes them.) */
/* PID 1 of the sandbox. probe: build everything, test the seccomp filter, exit 0. */
__attribute__((noreturn))
static void init_main(struct sandbox *sb, struct sb_run *r, const int *join, int out_w, int err_w,
                      int collect_fd, bool probe)
{
	struct sb_status *st = r->slot->st;
	uid_t uid = r->slot->uid;

	int netns_fd = r->netns_fd;
	int join0 = join[0], join1 = join[1], join2 = join[2];
	{
		int *mv[] = { &netns_fd, &join0, &join1, &join2, &out_w, &err_w, &collect_fd };
		init_reset(st, mv, 7);
	}

	/* Into the slot's cgroups first, so that everything from here on (the files in /work
	 * included) is charged to the run: "0" is the writer itself, v1 and v2 alike. */
	st->stage = ST_CGROUP;
	if ((join0 >= 0 && pwrite(join0, "0", 1, 0) != 1) || (join1 >= 0 && pwrite(join1, "0", 1, 0) != 1) ||
	    (join2 >= 0 && pwrite(join2, "0", 1, 0) != 1))
		child_fail(st, ST_CGROUP, 0);
	if (join0 >= 0)
		close(join0);
	if (join1 >= 0)
		close(join1);
	if (join2 >= 0)
		close(join2);
	/* A cgroup namespace rooted at the run's own cgroups: /proc/self/cgroup shows "/", not
	 * the host's paths (best effort: kernels before 4.6 have none). */
	(void)unshare(CLONE_NEWCGROUP);

	if (sb->clone_flags & CLONE_NEWUTS)
		(void)sethostname("sandbox", 7);   /* not the host's name */

	st->stage = ST_NETNS;
	if (setns(netns_fd, CLONE_NEWNET) < 0)
		child_fail(st, ST_NETNS, 0);
	close(netns_fd);

	init_build_root(sb, r, st, uid);

	/* The OOM killer must pick the command, not us (we hold the accounting): -1000 here
	 * when we have CAP_SYS_RESOURCE, and +1000 for the command in any case. */
	set_oom_adj("-1000");

	if (probe)
		st->seccomp_errno = probe_seccomp(sb, st);

	if (probe) {
		st->probe_ok = 1;
		st->stage = ST_DONE;
		_exit(0);
	}

	int in_fd = init_stdin(r, st);

	st->stage = ST_FORK;
	/* The command is vforked from us, and the kernel records the peak RSS of the memory
	 * it leaves at execve: ours, which is a copy of the worker's (it can be hundreds of
	 * MB). Remember it, so that the command's own peak can be told apart (below). */
	{
		struct rusage self0;
		if (getrusage(RUSAGE_SELF, &self0) == 0)
			st->init_rss_kb = self0.ru_maxrss;
	}
	struct sigaction term;
	for (size_t i = 0; i < sizeof term; i++)
		((char *)&term)[i] = 0;
	term.sa_handler = init_on_term;   /* no SA_RESTART: wait4 returns EINTR */
	(void)sigaction(SIGTERM, &term, NULL);
	pid_t payload = spawn_payload(sb, r, in_fd, out_w, err_w);
	if (payload < 0)
		child_fail(st, ST_FORK, 0);
	/* vfork: until its execve the command ran in our memory, and what it touched there
	 * (its stack; allocations, and a sanitizer build's shadow memory) is in the peak the
	 * kernel recorded for it. Ours includes it now, the command having left. */
	{
		struct rusage self1;
		if (getrusage(RUSAGE_SELF, &self1) == 0 && self1.ru_maxrss > st->init_rss_kb)
			st->init_rss_kb = self1.ru_maxrss;
		st->init_rss_kb += sb->rss_slack_kb;
	}
	close(in_fd);
	close(out_w);
	close(err_w);

	init_reap(st, payload);

	init_collect(r, st, collect_fd);
	struct rusage self;
	if (getrusage(RUSAGE_SELF, &self) == 0)
		st->self_cpu_us = (long)(self.ru_utime.tv_sec + self.ru_stime.tv_sec) * 1000000L +
		                  self.ru_utime.tv_usec + self.ru_stime.tv_usec;
	st->stage = ST_DONE;
	_exit(0);
}

/* ======================================================================================
 * Start-up: network namespace, mount plan, cgroups, seccomp, probe
 * ==================================================================================== */

/* The body of the short-lived thread of make_netns: a thread may have a network namespace
 * of its own, so no process (and no copy of the worker's memory) is needed. */
static void *netns_thread(void *arg)
{
	int *res = arg;   /* in: nothing; out: the fd, or -errno */
	if (unshare(CLONE_NEWNET) < 0) {
		res[0] = -errno;
		return NULL;
	}
	res[0] = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (res[0] < 0)
		res[0] = -errno;
	return NULL;
}

/* A new, empty network namespace (an fd on it), made by a thread that unshares its own and
 * ends: the namespace lives on through the fd. -1 with err. */
static int make_netns(char *err, size_t errlen)
{
	int res[1] = { -EINVAL };
	pthread_t t;
	int rc = pthread_create(&t, NULL, netns_thread, res);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start a thread for a network namespace: %s", strerror(rc));
		return -1;
	}
	(void)pthread_join(t, NULL);
	if (res[0] < 0) {
		snprintf(err, errlen, "cannot create a network namespace: %s", strerror(-res[0]));
		return -1;
	}
	int fd = res[0];
	/* Must differ from ours: otherwise the unshare silently did nothing. */
	struct stat a, b;
	if (fstat(fd, &a) == 0 && stat("/proc/self/ns/net", &b) == 0 && a.st_ino == b.st_ino) {
		close(fd);
		snprintf(err, errlen, "the network namespace was not created");
		return -1;
	}
	return fd;
}

/* The body of netns_unix_sockets' thread: joins the namespace and reads its socket table. */
static void *netns_count_thread(void *arg)
{
	long *io = arg;   /* in: the fd; out: the number of sockets, or -errno */
	if (setns((int)io[0], CLONE_NEWNET) < 0) {
		io[0] = -errno;
		return NULL;
	}
	int fd = open("/proc/thread-self/net/unix", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		io[0] = -errno;
		return NULL;
	}
	long lines = 0;
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
	io[0] = n < 0 ? -errno : lines - 1;   /* the first line is the header */
	close(fd);
	return NULL;
}

/* How many AF_UNIX sockets exist in the network namespace fd (in flight, bound or not), or
 * a negative errno. Read by a short-lived thread, which may switch namespaces. */
static long netns_unix_sockets(int fd)
{
	long io[1] = { fd };
	pthread_t t;
	int rc = pthread_create(&t, NULL, netns_count_thread, io);
	if (rc != 0)
		return -rc;
	(void)pthread_join(t, NULL);
	return io[0];
}

/* -- per-run network namespaces ------------------------------------------------------
 * Every run joins a network namespace no other run holds, with no socket in it: its
 * abstract AF_UNIX names, its sockets and whatever a run leaves in flight are unreachable
 * from any other run. A run cannot create anything but AF_UNIX socket pairs (seccomp), its
 * processes are gone when its init is reaped, so a namespace it leaves without a socket is
 * back where it started and is used again; one that still holds a socket (in flight, in a
 * cycle the kernel has not collected yet) is dropped. Making one costs about a millisecond
 * of kernel time and as much again to destroy it, so both the check and the making of new
 * ones happen in the thread pool, off the path of a run. */

struct sb_nswork {
	uv_work_t req;
	struct sandbox *sb;             /* NULL: the sandbox was freed meanwhile */
	struct sb_nswork *next;         /* sb->nswork list (to detach them in sandbox_free) */
	int fd;                         /* in: a used namespace to check (-1: make one); out */
	bool check;
	long sockets;                   /* what the check found */
	char err[160];
};

static void ns_work(uv_work_t *w)
{
	struct sb_nswork *nw = w->data;
	if (nw->check) {
		nw->sockets = netns_unix_sockets(nw->fd);
		if (nw->sockets != 0) {
			close(nw->fd);   /* not empty, or cannot tell: dropped */
			nw->fd = -1;
		}
		return;
	}
	nw->fd = make_netns(nw->err, sizeof nw->err);
}

static void ns_refill(struct sandbox *sb);

static void ns_after(uv_work_t *w, int status)
{
	struct sb_nswork *nw = w->data;
	struct sandbox *sb = nw->sb;
	if (!sb) {   /* the sandbox was freed meanwhile */
		if (nw->fd >= 0)
			close(nw->fd);
		free(nw);
		return;
	}
	for (struct sb_nswork **pp = &sb->nswork; *pp; pp = &(*pp)->next)
		if (*pp == nw) {
			*pp = nw->next;
			break;
		}
	if (nw->check)
		sb->checking--;
	else
		sb->making--;
	if (status == 0 && nw->fd >= 0 && sb->nspare < sb->nslots)
		sb->spare_ns[sb->nspare++] = nw->fd;
	else if (nw->fd >= 0)
		close(nw->fd);
	if (status == 0 && nw->check && nw->sockets < 0)
		LOGW(NULL, NULL, "sandbox: cannot read the sockets of a used network namespace: %s",
		     strerror((int)-nw->sockets));
	if (status == 0 && !nw->check && nw->fd < 0)
		LOGW(NULL, NULL, "sandbox: making a network namespace ahead failed: %s", nw->err);
	bool again = status == 0 && (nw->check || nw->fd >= 0);
	free(nw);
	if (again)
		ns_refill(sb);
}

/* Queues a work on the namespaces: check fd (>= 0) or make one (-1). -1 if the pool
 * refused it. */
static int ns_queue(struct sandbox *sb, int fd)
{
	struct sb_nswork *nw = xcalloc(1, sizeof *nw);
	nw->sb = sb;
	nw->fd = fd;
	nw->check = fd >= 0;
	nw->req.data = nw;
	if (uv_queue_work(sb->loop, &nw->req, ns_work, ns_after) < 0) {
		free(nw);
		return -1;
	}
	if (nw->check)
		sb->checking++;
	else
		sb->making++;
	nw->next = sb->nswork;
	sb->nswork = nw;
	return 0;
}

/* Makes namespaces ahead until every slot has one: ready, being made or checked, or held
 * by its run (which returns it). */
static void ns_refill(struct sandbox *sb)
{
	while (sb->nspare + sb->making + sb->checking + sb->busy < sb->nslots && sb->making < 1)
		if (ns_queue(sb, -1) < 0)
			return;
}

/* A run's namespace once its processes are gone: checked, then used again or dropped. */
static void ns_return(struct sandbox *sb, int fd)
{
	if (fd >= 0 && ns_queue(sb, fd) < 0)
		close(fd);
}

/* A fresh network namespace for a run: a spare one, else made now. -1 with err. The caller
 * calls ns_refill once the run is cloned (not before: the two would compete). */
static int ns_take(struct sandbox *sb, char *err, size_t errlen)
{
	return sb->nspare ? sb->spare_ns[--sb->nspare] : make_netns(err, errlen);
}

static void plan_add(struct sandbox *sb, enum sb_step_kind k, const char *target, const char *source)
{
	if (sb->nsteps >= SB_MAX_STEPS)
		return;
	struct sb_step *s = &sb->steps[sb->nsteps++];
	memset(s, 0, sizeof *s);
	s->kind = k;
	struct strbuf t = { 0 };
	strbuf_addf(&t, "%s/%s", SB_STAGE, target);
	s->target = t.buf;
	s->source = source ? xstrdup(source) : NULL;
}

/* /usr, /lib... as the host has them (merged-/usr symlinks are copied as symlinks). */
static void plan_host_path(struct sandbox *sb, const char *name, bool required_dir)
{
	char host[PATH_MAX];
	snprintf(host, sizeof host, "/%s", name);
	struct stat st;
	if (lstat(host, &st) < 0)
		return;
	if (S_ISLNK(st.st_mode)) {
		char link[PATH_MAX];
		ssize_t n = readlink(host, link, sizeof link - 1);
		if (n <= 0)
			return;
		link[n] = 0;
		plan_add(sb, STEP_SYMLINK, name, link);
	} else if (S_ISDIR(st.st_mode)) {
		plan_add(sb, STEP_BIND, name, host);
	} else if (S_ISREG(st.st_mode) && !required_dir) {
		plan_add(sb, STEP_BIND, name, host);
		sb->steps[sb->nsteps - 1].file = true;
	}
}

static void build_plan(struct sandbox *sb)
{
	static const char *const top[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
	for (size_t i = 0; i < sizeof top / sizeof *top; i++)
		plan_host_path(sb, top[i], true);
	plan_add(sb, STEP_DIR, "etc", NULL);
	/* The /etc pieces the languages need: nothing else of the host's /etc is visible. */
	plan_host_path(sb, "etc/alternatives", true);
	plan_host_path(sb, "etc/localtime", true);      /* a symlink on Debian */
	{
		size_t len;
		char *cache = read_small_file("/etc/ld.so.cache", &len);
		if (cache) {
			plan_add(sb, STEP_COPY, "etc/ld.so.cache", NULL);
			sb->steps[sb->nsteps - 1].data = cache;
			sb->steps[sb->nsteps - 1].len = len;
		}
	}
	plan_host_path(sb, "etc/ssl", true);            /* openssl.cnf for node/python (keys: 0700) */
	plan_host_path(sb, "etc/ld.so.conf", false);
	plan_host_path(sb, "etc/ld.so.conf.d", true);
	/* Debian's python3 reads /etc/python3.X/sitecustomize.py. */
	DIR *d = opendir("/etc");
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (!strncmp(de->d_name, "python3", 7)) {
				char name[300];
				snprintf(name, sizeof name, "etc/%s", de->d_name);
				plan_host_path(sb, name, true);
			}
		}
		closedir(d);
	}
	plan_add(sb, STEP_DIR, "dev", NULL);
	plan_add(sb, STEP_DIR, "proc", NULL);
	plan_add(sb, STEP_DIR, "tmp", NULL);
	plan_add(sb, STEP_DIR, "work", NULL);
	struct strbuf p = { 0 };
	strbuf_addf(&p, "%s/dev", SB_STAGE);
	sb->stage_dev = p.buf;
	p = (struct strbuf){ 0 };
	strbuf_addf(&p, "%s/proc", SB_STAGE);
	sb->stage_proc = p.buf;
	p = (struct strbuf){ 0 };
	strbuf_addf(&p, "%s/tmp", SB_STAGE);
	sb->stage_tmp = p.buf;
	p = (struct strbuf){ 0 };
	strbuf_addf(&p, "%s/work", SB_STAGE);
	sb->stage_work = p.buf;
}

/* -- seccomp ------------------------------------------------------------------------- */

static const char *const denied_syscalls[] = {
	"ptrace", "mount", "umount", "umount2", "pivot_root", "chroot", "keyctl", "add_key",
	"request_key", "bpf", "perf_event_open", "unshare", "setns", "kexec_load",
	"kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
	"swapoff", "acct", "userfaultfd", "process_vm_readv", "process_vm_writev",
	"process_madvise", "pidfd_getfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	"open_by_handle_at", "name_to_handle_at", "fanotify_init", "lookup_dcookie", "quotactl",
	"quotactl_fd", "syslog", "vhangup", "iopl", "ioperm", "settimeofday", "clock_settime",
	"clock_adjtime", "adjtimex", "nfsservctl", "uselib", "_sysctl", "kcmp", "move_mount",
	"open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "sethostname",
	"setdomainname", "personality", "modify_ldt",
};

/* What a program may call: the system calls of ordinary processes (files, memory, threads,
 * signals, time, pipes and socketpairs, polling, process control within the run) that the
 * shipped languages (sh, python3, gcc and its tools, node) need. Anything else, a kernel
 * interface added after this list was written included, fails with ENOSYS (which runtimes
 * take as "not available here" and fall back from). */
static const char *const allowed_syscalls[] = {
	"read", "write", "open", "openat", "openat2", "close", "close_range", "creat", "stat",
	"fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
	"faccessat2", "lseek", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
	"preadv2", "pwritev2", "sendfile", "copy_file_range", "splice", "tee", "vmsplice",
	"dup", "dup2", "dup3", "pipe", "pipe2", "fcntl", "flock", "fsync", "fdatasync", "sync",
	"syncfs", "sync_file_range", "fadvise64", "readahead", "fallocate", "truncate",
	"ftruncate", "getdents", "getdents64", "getcwd", "chdir", "fchdir", "rename", "renameat",
	"renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat", "unlink", "unlinkat",
	"symlink", "symlinkat", "readlink", "readlinkat", "chmod", "fchmod", "fchmodat",
	"fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask", "utime", "utimes",
	"futimesat", "utimensat", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
	"llistxattr", "flistxattr", "ioctl", "memfd_create", "inotify_init", "inotify_init1",
	"inotify_add_watch", "inotify_rm_watch",
	"mmap", "mprotect", "munmap", "mremap", "msync", "mincore", "madvise", "brk", "mlock",
	"mlock2", "munlock", "mlockall", "munlockall", "get_mempolicy", "membarrier",
	"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
	"msgget", "msgsnd", "msgrcv", "msgctl",
	"clone", "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
	"kill", "tkill", "tgkill", "getpid", "getppid", "gettid", "getpgid", "setpgid",
	"getpgrp", "getsid", "setsid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
	"getresgid", "getgroups", "capget", "uname", "getrlimit", "setrlimit", "prlimit64",
	"getrusage", "sysinfo", "times", "getpriority", "setpriority", "prctl", "arch_prctl",
	"set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex", "futex_waitv",
	"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
	"sched_setparam", "sched_getscheduler", "sched_setscheduler", "sched_getattr",
	"sched_setattr", "sched_get_priority_max", "sched_get_priority_min",
	"sched_rr_get_interval", "getcpu", "pidfd_open", "pidfd_send_signal", "restart_syscall",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait",
	"rt_sigqueueinfo", "rt_tgsigqueueinfo", "rt_sigsuspend", "sigaltstack", "pause",
	"signalfd", "signalfd4", "alarm", "getitimer", "setitimer", "nanosleep",
	"clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time",
	"timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
	"timerfd_create", "timerfd_settime", "timerfd_gettime", "eventfd", "eventfd2",
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "getrandom",
	"socketpair", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
	"getsockname", "getpeername", "setsockopt", "getsockopt",
};

/* (Long: one filter, its rules in the order the kernel applies them.) */
static int build_seccomp(struct sandbox *sb, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (!ctx) {
		snprintf(err, errlen, "seccomp_init failed");
		return -1;
	}
	int rc = 0;
	(void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);   /* the payload sets it itself */
	/* A binary tree instead of a list of ~300 comparisons: every run loads the filter, and
	 * the kernel then runs it once per system call number to fill its cache of calls that
	 * are always allowed (0.3 ms per run with the list, 0.1 ms with the tree, measured by
	 * test/bench/bench_sandbox.c). Best effort: older libseccomp keep the list. */
	(void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	for (size_t i = 0; i < sizeof allowed_syscalls / sizeof *allowed_syscalls && rc == 0; i++) {
		int nr = seccomp_syscall_resolve_name(allowed_syscalls[i]);
		if (nr == __NR_SCMP_ERROR || nr == __NR_clone)
			continue;   /* unknown here; clone: below, by its flags */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	}
	for (size_t i = 0; i < sizeof denied_syscalls / sizeof *denied_syscalls && rc == 0; i++) {
		int nr = seccomp_syscall_resolve_name(denied_syscalls[i]);
		if (nr == __NR_SCMP_ERROR)
			continue;   /* unknown to this libseccomp or architecture */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	/* clone with any namespace flag; clone3 hides its flags in memory: ENOSYS makes the
	 * C library fall back to clone. */
	static const uint64_t ns_flags[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
	                                     CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP };
	uint64_t all_ns = 0;
	for (size_t i = 0; i < sizeof ns_flags / sizeof *ns_flags && rc == 0; i++) {
		all_ns |= ns_flags[i];
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	}
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, all_ns, 0));
	/* clone3 is not on the list: ENOSYS, the default, as said above */
	/* No sockets at all (socketpair stays: it reaches nobody), and none of the calls that
	 * give a socket an address or reach one by address: a socketpair's end could otherwise
	 * bind an abstract name or send to one (sendto with an address; sendmsg's is in memory,
	 * which the run's own network namespace leaves without anybody to reach). */
	static const char *const addr_calls[] = { "socket", "bind", "connect", "listen", "accept",
	                                          "accept4" };
	for (size_t i = 0; i < sizeof addr_calls / sizeof *addr_calls && rc == 0; i++) {
		int nr = seccomp_syscall_resolve_name(addr_calls[i]);
		if (nr != __NR_SCMP_ERROR)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), nr, 0);
	}
	/* The comparisons spelled out: SCMP_A4's two-operand form leaves datum_b out, which
	 * clang's -Wmissing-field-initializers reports. */
	const struct scmp_arg_cmp dest_set = { .arg = 4, .op = SCMP_CMP_NE, .datum_a = 0, .datum_b = 0 };
	const struct scmp_arg_cmp dest_none = { .arg = 4, .op = SCMP_CMP_EQ, .datum_a = 0, .datum_b = 0 };
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(sendto), 1, dest_set);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendto), 1, dest_none);
	if (rc < 0) {
		snprintf(err, errlen, "seccomp_rule_add: %s", strerror(-rc));
		seccomp_release(ctx);
		return -1;
	}
	int mfd = (int)syscall(SYS_memfd_create, "seccomp", MFD_CLOEXEC);
	if (mfd < 0 || (rc = seccomp_export_bpf(ctx, mfd)) < 0) {
		snprintf(err, errlen, "seccomp_export_bpf: %s", strerror(mfd < 0 ? errno : -rc));
		if (mfd >= 0)
			close(mfd);
		seccomp_release(ctx);
		return -1;
	}
	seccomp_release(ctx);
	off_t size = lseek(mfd, 0, SEEK_END);
	if (size <= 0 || size % sizeof(struct sock_filter) || size / sizeof(struct sock_filter) > 4096) {
		close(mfd);
		snprintf(err, errlen, "seccomp program has a bad size");
		return -1;
	}
	struct sock_filter *prog = xmalloc((size_t)size);
	if (pread(mfd, prog, (size_t)size, 0) != size) {
		close(mfd);
		free(prog);
		snprintf(err, errlen, "reading the seccomp program failed");
		return -1;
	}
	close(mfd);
	sb->seccomp.filter = prog;
	sb->seccomp.len = (unsigned short)(size / sizeof(struct sock_filter));
	return 0;
}

/* -- cgroups -------------------------------------------------------------------------- */

/* The mount point of a cgroup v1 hierarchy carrying controller, or of cgroup2
 * (controller NULL), from /proc/self/mountinfo. Caller frees. */
static char *cg_mount(const char *controller)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return NULL;
	char line[4096];
	char *found = NULL;
	while (!found && fgets(line, sizeof line, f)) {
		/* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		char fstype[64], source[256], super[1024];
		if (sscanf(sep + 3, "%63s %255s %1023s", fstype, source, super) < 3)
			continue;
		char root[1024], mnt[1024];
		if (sscanf(line, "%*s %*s %*s %1023s %1023s", root, mnt) < 2)
			continue;
		if (strcmp(root, "/"))
			continue;
		if (!controller) {
			if (!strcmp(fstype, "cgroup2"))
				found = xstrdup(mnt);
		} else if (!strcmp(fstype, "cgroup")) {
			char *save = NULL;
			for (char *t = strtok_r(super, ",", &save); t; t = strtok_r(NULL, ",", &save))
				if (!strcmp(t, controller))
					found = xstrdup(mnt);
		}
	}
	fclose(f);
	return found;
}

/* Our own cgroup path for controller (v1) or the unified one (NULL). Caller frees. */
static char *cg_self_path(const char *controller)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return NULL;
	char line[4096];
	char *found = NULL;
	while (!found && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		const char *ctrls = c1 + 1, *path = c2 + 1;
		if (!controller) {
			if (!*ctrls && !strncmp(line, "0", 1))
				found = xstrdup(path);
		} else {
			char buf[512];
			snprintf(buf, sizeof buf, "%s", ctrls);
			char *save = NULL;
			for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
				if (!strcmp(t, controller))
					found = xstrdup(path);
		}
	}
	fclose(f);
	return found;
}

static int open_ctl(const char *dir, const char *name, int flags)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return open(path, flags | O_CLOEXEC);
}

/* Removes the slot directories and the directory dir of a pool (best effort). */
static void cg_remove_pool(const char *dir)
{
	DIR *s = opendir(dir);
	if (s) {
		struct dirent *se;
		while ((se = readdir(s))) {
			if (strncmp(se->d_name, "slot-", 5))
				continue;
			char sub[PATH_MAX + 700];
			snprintf(sub, sizeof sub, "%s/%s", dir, se->d_name);
			(void)rmdir(sub);
		}
		closedir(s);
	}
	(void)rmdir(dir);
}

/* Removes leftovers of dead arbiter processes: <parent>/arbiter-sandbox-<pid>-<n>/slot-*.
 * A live pool holds an flock on its directory for its whole life; a pid is no proof
 * (another arbiter in another PID namespace may share the cgroup parent), the lock is:
 * it survives namespaces and dies with its holder. */
static void cg_clean_stale(const char *parent)
{
	DIR *d = opendir(parent);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		int pid;
		if (sscanf(de->d_name, "arbiter-sandbox-%d-", &pid) != 1)
			continue;
		char dir[PATH_MAX + 300];
		snprintf(dir, sizeof dir, "%s/%s", parent, de->d_name);
		int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			cg_remove_pool(dir);   /* nobody holds it: its owner is gone */
		close(fd);
	}
	closedir(d);
}

static int cg_seq;

/* <parent>/arbiter-sandbox-<pid>-<seq>; created and locked (*lock_fd holds the flock for
 * the pool's life). Caller frees.
 * Between our mkdir and our flock the directory is empty and unlocked: another process's
 * cg_clean_stale may lock it (our flock then fails) and remove it (our open fails, or we
 * lock a removed directory). So the lock counts only once the path still names the
 * directory we locked; otherwise we start over (a few times: every round needs another
 * process's clean-up to land in a window of microseconds). */
static char *cg_make_base(const char *parent, int *lock_fd)
{
	cg_clean_stale(parent);
	struct strbuf b = { 0 };
	strbuf_addf(&b, "%s/arbiter-sandbox-%d-%d", parent, (int)getpid(), cg_seq);
	int e = 0;
	for (int round = 0; round < 20; round++) {
		if (round)
			nanosleep(&(struct timespec){ 0, 1000000L * round }, NULL);
		*lock_fd = -1;
		if (mkdir(b.buf, 0755) < 0 && errno != EEXIST) {
			e = errno;
			break;
		}
		*lock_fd = open(b.buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (*lock_fd < 0) {
			e = errno;
			if (e == ENOENT)
				continue;           /* removed before we opened it */
			break;
		}
		if (flock(*lock_fd, LOCK_EX | LOCK_NB) < 0) {
			e = errno;
			close(*lock_fd);
			*lock_fd = -1;
			if (e == EWOULDBLOCK)
				continue;           /* another clean-up holds it: it is removing it */
			break;
		}
		struct stat locked, named;
		if (fstat(*lock_fd, &locked) == 0 && stat(b.buf, &named) == 0 &&
		    locked.st_dev == named.st_dev && locked.st_ino == named.st_ino)
			return b.buf;
		e = ENOENT;                 /* we locked a directory removed meanwhile */
		close(*lock_fd);
		*lock_fd = -1;
	}
	if (*lock_fd >= 0)
		close(*lock_fd);
	*lock_fd = -1;
	(void)rmdir(b.buf);
	strbuf_free(&b);
	errno = e;
	return NULL;
}

/* Retries the removal of slot cgroups whose rmdir failed (a task still leaving). */
static void cg_graves(struct sandbox *sb)
{
	size_t k = 0;
	for (size_t i = 0; i < sb->ngrave; i++) {
		if (rmdir(sb->grave[i]) == 0 || errno == ENOENT)
			free(sb->grave[i]);
		else
			sb->grave[k++] = sb->grave[i];
	}
	sb->ngrave = k;
}

static void cg_rmdir(struct sandbox *sb, char *dir)
{
	if (!dir)
		return;
	if (rmdir(dir) == 0 || errno == ENOENT) {
		free(dir);
		return;
	}
	sb->grave = xrealloc(sb->grave, (sb->ngrave + 1) * sizeof *sb->grave);
	sb->grave[sb->ngrave++] = dir;
}

/* Closes the slot's control files and hands its cgroup directories to dirs (to be removed
 * by the caller). Touches the slot only: safe in the thread pool (see slot_recycle). */
static void slot_release_cg(struct sb_slot *s, char *dirs[4])
{
	int *fds[] = { &s->dir_fd, &s->mem_procs, &s->pids_procs, &s->mem_limit, &s->memsw_limit,
	               &s->mem_maxusage, &s->mem_failcnt, &s->mem_oom, &s->v2_max, &s->v2_swap,
	               &s->v2_events, &s->v2_kill, &s->pids_max, &s->mem_usage, &s->v2_current,
	               &s->v2_peak, &s->cpu_procs, &s->cpu_usage, &s->v2_cpustat };
	for (size_t i = 0; i < sizeof fds / sizeof *fds; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	dirs[0] = s->mem_dir;
	dirs[1] = s->pids_dir;
	dirs[2] = s->cpu_dir;
	dirs[3] = s->dir;
	s->mem_dir = s->pids_dir = s->cpu_dir = s->dir = NULL;
	s->cur_mem = s->cur_pids = 0;
	s->cg_open = false;
}

/* Closes the slot's control files and removes its cgroups: every run gets fresh ones, so
 * that nothing a run leaves charged (memory pinned by fds in flight, page cache) and no
 * counter it moved is seen by the next. */
static void slot_close_cg(struct sandbox *sb, struct sb_slot *s)
{
	char *dirs[4];
	slot_release_cg(s, dirs);
	for (int i = 0; i < 4; i++)
		cg_rmdir(sb, dirs[i]);
}

static char *slot_dirname(const char *base, const struct sb_slot *s)
{
	struct strbuf d = { 0 };
	strbuf_addf(&d, "%s/slot-%d-%u", base, s->index, s->gen);
	return d.buf;
}

/* v2: a fresh slot-<i>-<gen> with its control files. -1 with errno. */
static int v2_slot_open(const struct sandbox *sb, struct sb_slot *s)
{
	s->dir = slot_dirname(sb->cg_base_v2, s);
	if (mkdir(s->dir, 0755) < 0)
		return -1;
	s->dir_fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	s->mem_procs = open_ctl(s->dir, "cgroup.procs", O_WRONLY);
	s->v2_max = open_ctl(s->dir, "memory.max", O_WRONLY);
	s->v2_swap = open_ctl(s->dir, "memory.swap.max", O_WRONLY);
	s->v2_events = open_ctl(s->dir, "memory.events", O_RDONLY);
	s->v2_kill = open_ctl(s->dir, "cgroup.kill", O_WRONLY);   /* 5.14+ */
	/* a fresh cgroup's peak is this run's: no reset (which needs 6.12) */
	s->v2_peak = open_ctl(s->dir, "memory.peak", O_RDONLY);   /* 5.19+ */
	s->v2_cpustat = open_ctl(s->dir, "cpu.stat", O_RDONLY);
	s->pids_max = open_ctl(s->dir, "pids.max", O_WRONLY);
	if (s->dir_fd < 0 || s->mem_procs < 0 || s->v2_max < 0 || s->v2_events < 0 ||
	    s->pids_max < 0 || s->v2_cpustat < 0)
		return -1;
	if (s->v2_swap >= 0)
		(void)write_str_fd(s->v2_swap, "0");
	return 0;
}

static int v1_mem_open(const struct sandbox *sb, struct sb_slot *s)
{
	s->mem_dir = slot_dirname(sb->cg_base_mem, s);
	if (mkdir(s->mem_dir, 0755) < 0)
		return -1;
	s->mem_procs = open_ctl(s->mem_dir, "cgroup.procs", O_WRONLY);
	s->mem_limit = open_ctl(s->mem_dir, "memory.limit_in_bytes", O_RDWR);
	s->memsw_limit = open_ctl(s->mem_dir, "memory.memsw.limit_in_bytes", O_RDWR);
	s->mem_maxusage = open_ctl(s->mem_dir, "memory.max_usage_in_bytes", O_RDONLY);
	s->mem_oom = open_ctl(s->mem_dir, "memory.oom_control", O_RDONLY);
	if (s->mem_procs < 0 || s->mem_limit < 0 || s->mem_oom < 0)
		return -1;
	/* Older kernels have no oom_kill counter: then we cannot tell. */
	char buf[512];
	if (read_fd_at0(s->mem_oom, buf, sizeof buf) < 0 || !strstr(buf, "oom_kill ")) {
		errno = ENOTSUP;
		return -1;
	}
	return 0;
}

static int v1_pids_open(const struct sandbox *sb, struct sb_slot *s)
{
	s->pids_dir = slot_dirname(sb->cg_base_pids, s);
	if (mkdir(s->pids_dir, 0755) < 0)
		return -1;
	s->pids_procs = open_ctl(s->pids_dir, "cgroup.procs", O_WRONLY);
	s->pids_max = open_ctl(s->pids_dir, "pids.max", O_WRONLY);
	return s->pids_procs < 0 || s->pids_max < 0 ? -1 : 0;
}

static int v1_cpu_open(const struct sandbox *sb, struct sb_slot *s)
{
	s->cpu_dir = slot_dirname(sb->cg_base_cpu, s);
	if (mkdir(s->cpu_dir, 0755) < 0)
		return -1;
	s->cpu_procs = open_ctl(s->cpu_dir, "cgroup.procs", O_WRONLY);
	s->cpu_usage = open_ctl(s->cpu_dir, "cpuacct.usage", O_RDONLY);
	return s->cpu_procs < 0 || s->cpu_usage < 0 ? -1 : 0;
}

/* Fresh cgroups for the slot's next run. -1 with errno. Reads only the sandbox's set-up
 * (fixed after sandbox_new) and writes only the slot: safe in the thread pool. */
static int slot_cg_open(const struct sandbox *sb, struct sb_slot *s)
{
	s->gen++;
	s->cg_open = true;
	if (sb->cg == CG_V2)
		return v2_slot_open(sb, s);
	if (sb->cg == CG_V1) {
		if ((sb->cg_mem && v1_mem_open(sb, s) < 0) || (sb->cg_pids && v1_pids_open(sb, s) < 0) ||
		    (sb->cg_cpu && v1_cpu_open(sb, s) < 0))
			return -1;
	}
	return 0;
}

/* -- renewing a slot's cgroups off the run's path ------------------------------------
 * Removing a run's cgroups and making the next ones (mkdir, rmdir, a dozen opens: about
 * 0.4 ms of kernel time on cgroup v1) happens in the uv thread pool once a run ended, so
 * that the next run of the slot finds them ready. Until cg_after ran, the slot is not
 * handed out and its cgroup fields belong to the work. */
struct sb_cgwork {
	uv_work_t req;
	struct sandbox *sb;             /* NULL: the sandbox was freed meanwhile */
	struct sb_slot *slot;
	char *left[4];                  /* used cgroups whose rmdir failed (a task still leaving) */
	int rc;                         /* of slot_cg_open */
	int done;                       /* cg_work returned (atomic; sandbox_free waits for it) */
};

static void cg_work(uv_work_t *req)
{
	struct sb_cgwork *w = req->data;
	slot_release_cg(w->slot, w->left);
	for (int i = 0; i < 4; i++)
		if (w->left[i] && (rmdir(w->left[i]) == 0 || errno == ENOENT)) {
			free(w->left[i]);
			w->left[i] = NULL;
		}
	w->rc = slot_cg_open(w->sb, w->slot);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
}

/* The end of a renewal, on the loop thread: the slot is free again (its used cgroups that
 * could not be removed yet are retried later). */
static void cg_done(struct sandbox *sb, struct sb_cgwork *w, int status)
{
	struct sb_slot *s = w->slot;
	s->cgw = NULL;
	for (int i = 0; i < 4; i++) {
		cg_rmdir(sb, w->left[i]);   /* retried later (cg_graves) */
		w->left[i] = NULL;
	}
	if (status < 0 || w->rc < 0)
		slot_close_cg(sb, s);   /* the next run tries again and reports the error */
}

static void cg_after(uv_work_t *req, int status)
{
	struct sb_cgwork *w = req->data;
	struct sandbox *sb = w->sb;
	if (!sb) {   /* freed: what the work made went with sandbox_free's teardown */
		for (int i = 0; i < 4; i++)
			if (w->left[i]) {
				(void)rmdir(w->left[i]);
				free(w->left[i]);
			}
		free(w);
		return;
	}
	cg_done(sb, w, status);
	free(w);
	queue_pump(sb);
}

/* A run waits while the thread pool is busy with other work (the worker scores there too)
 * and a free slot's renewal has not started: it is taken back and done here, now. Returns
 * that slot, ready, or NULL. */
static struct sb_slot *slot_renew_now(struct sandbox *sb)
{
	for (int i = 0; i < sb->nslots; i++) {
		struct sb_slot *s = &sb->slots[i];
		struct sb_cgwork *w = s->cgw;
		if (s->busy || !w || !w->sb || uv_cancel((uv_req_t *)&w->req) != 0)
			continue;
		cg_work(&w->req);
		cg_done(sb, w, 0);
		w->sb = NULL;   /* its cancelled callback only frees it */
		if (s->cg_open)
			return s;
	}
	return NULL;
}

/* After a run: the slot's cgroups are to be renewed; it is not handed out until they are.
 * slot_recycle_start then queues the work: after the run's callback, so that the worker
 * thread it wakes (which on a small machine may take the CPU at once) does not delay the
 * result. */
static void slot_recycle(struct sb_slot *s)
{
	struct sb_cgwork *w = xcalloc(1, sizeof *w);
	w->slot = s;
	w->req.data = w;
	s->cgw = w;
}

static void slot_recycle_start(struct sandbox *sb, struct sb_slot *s)
{
	struct sb_cgwork *w = s->cgw;
	if (!w || w->sb)
		return;
	if (sb->ngrave)
		cg_graves(sb);
	w->sb = sb;
	if (uv_queue_work(sb->loop, &w->req, cg_work, cg_after) < 0) {
		s->cgw = NULL;
		free(w);
		slot_close_cg(sb, s);
		queue_pump(sb);
	}
}

/* Waits until no renewal touches a slot any more (sandbox_free): a work not started yet
 * is cancelled, one running is waited for (a few system calls). Their callbacks, if the
 * loop runs again, only free what is theirs. */
static void cg_work_detach(struct sandbox *sb)
{
	for (int i = 0; sb->slots && i < sb->nslots; i++) {
		struct sb_cgwork *w = sb->slots[i].cgw;
		if (!w)
			continue;
		sb->slots[i].cgw = NULL;
		if (!w->sb) {   /* never queued */
			free(w);
			continue;
		}
		/* cancelled: it never runs, the slot keeps its used cgroups for the teardown */
		if (uv_cancel((uv_req_t *)&w->req) != 0)
			while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE)) {
				struct timespec ts = { 0, 1000000 };
				nanosleep(&ts, NULL);
			}
		w->sb = NULL;   /* read by cg_work: only once it is done */
		for (int k = 0; k < 4; k++) {
			cg_rmdir(sb, w->left[k]);   /* the teardown retries them */
			w->left[k] = NULL;
		}
	}
}

/* CPU time (µs) the slot's cgroup has accounted, everything it ever held. */
static uint64_t slot_cpu_us(const struct sandbox *sb, const struct sb_slot *s)
{
	if (sb->cg == CG_V2)
		return fd_kv_get(s->v2_cpustat, "usage_usec");
	if (sb->cg_cpu)
		return fd_u64(s->cpu_usage) / 1000;
	return 0;
}

static void cg_teardown(struct sandbox *sb)
{
	for (int i = 0; sb->slots && i < sb->nslots; i++)
		slot_close_cg(sb, &sb->slots[i]);
	cg_graves(sb);
	for (size_t i = 0; i < sb->ngrave; i++) {
		LOGW(NULL, NULL, "sandbox: cannot remove %s: %s", sb->grave[i], strerror(EBUSY));
		free(sb->grave[i]);
	}
	free(sb->grave);
	sb->grave = NULL;
	sb->ngrave = 0;
	char **bases[] = { &sb->cg_base_mem, &sb->cg_base_pids, &sb->cg_base_v2, &sb->cg_base_cpu };
	for (size_t i = 0; i < 4; i++) {
		if (*bases[i])
			(void)rmdir(*bases[i]);
		free(*bases[i]);
		*bases[i] = NULL;
		if (sb->cg_lock[i] >= 0)
			close(sb->cg_lock[i]);   /* after the rmdir: the lock guards the directory */
		sb->cg_lock[i] = -1;
	}
	sb->cg = CG_NONE;
	sb->cg_mem = sb->cg_pids = sb->cg_cpu = false;
}

static bool file_has_word(const char *path, const char *word)
{
	char *t = read_small_file(path, NULL);
	if (!t)
		return false;
	bool found = false;
	char *save = NULL;
	for (char *w = strtok_r(t, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		if (!strcmp(w, word))
			found = true;
	free(t);
	return found;
}

/* True when the cgroup directory dir holds no process but ours. */
static bool cg_only_us(const char *dir)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	char *t = read_small_file(path, NULL);
	if (!t)
		return false;
	bool only = true;
	char *save = NULL;
	for (char *w = strtok_r(t, "\n", &save); w; w = strtok_r(NULL, "\n", &save))
		if (atoi(w) != (int)getpid())
			only = false;
	free(t);
	return only;
}

/* cgroup v2: the slots live below our own cgroup when it is delegated to us (we are its
 * only process: we move into a leaf so that the "no internal processes" rule lets us
 * enable memory+pids for children), else below the root of the hierarchy. */
static int cg_setup_v2_at(struct sandbox *sb, const char *mnt, const char *self, char *why,
                          size_t n)
{
	int rc = -1;
	char parent[PATH_MAX], path[PATH_MAX + 64];
	snprintf(parent, sizeof parent, "%s%s", mnt, strcmp(self, "/") ? self : "");
	/* An earlier pool of this process moved us to our leaf: the delegated cgroup is its
	 * parent (without this, every further pool would nest one level deeper). */
	size_t pl = strlen(parent), ll = strlen("/arbiter-worker");
	if (pl > ll && !strcmp(parent + pl - ll, "/arbiter-worker"))
		parent[pl - ll] = 0;
	snprintf(path, sizeof path, "%s/cgroup.controllers", parent);
	/* Ours when we are its only process: a delegated service (Delegate=yes), or the root of
	 * a container's own cgroup namespace, which is not the hierarchy's real root (that one
	 * has no cgroup.type). */
	snprintf(path + strlen(path) - strlen("cgroup.controllers"), 32, "cgroup.type");
	bool real_root = access(path, F_OK) != 0;
	snprintf(path, sizeof path, "%s/cgroup.controllers", parent);
	bool own_ok = file_has_word(path, "memory") && file_has_word(path, "pids") &&
	              (strcmp(self, "/") || !real_root) && cg_only_us(parent);
	if (own_ok) {
		snprintf(path, sizeof path, "%s/cgroup.subtree_control", parent);
		if (write_file(path, "+memory +pids") < 0 && errno == EBUSY) {
			char leaf[PATH_MAX + 64], procs[PATH_MAX + 96], pid[32];
			snprintf(leaf, sizeof leaf, "%.3000s/arbiter-worker", parent);
			snprintf(procs, sizeof procs, "%s/cgroup.procs", leaf);
			snprintf(pid, sizeof pid, "%d", (int)getpid());
			own_ok = (mkdir(leaf, 0755) == 0 || errno == EEXIST) && write_file(procs, pid) == 0 &&
			         write_file(path, "+memory +pids") == 0;
		}
		own_ok = own_ok && file_has_word(path, "memory") && file_has_word(path, "pids");
	}
	if (!own_ok) {
		/* the root cgroup is exempt from the no-internal-processes rule */
		snprintf(parent, sizeof parent, "%s", mnt);
		snprintf(path, sizeof path, "%s/cgroup.controllers", parent);
		if (!file_has_word(path, "memory") || !file_has_word(path, "pids")) {
			snprintf(why, n, "cgroup2 at %.300s has no memory+pids controllers", mnt);
			goto out;
		}
		snprintf(path, sizeof path, "%s/cgroup.subtree_control", parent);
		(void)write_file(path, "+memory +pids");
		if (!file_has_word(path, "memory") || !file_has_word(path, "pids")) {
			snprintf(why, n, "cannot enable memory+pids in %.300s: %s", path, strerror(errno));
			goto out;
		}
	}
	sb->cg_base_v2 = cg_make_base(parent, &sb->cg_lock[2]);
	if (!sb->cg_base_v2) {
		snprintf(why, n, "cannot create a cgroup below %.300s: %s", parent, strerror(errno));
		goto out;
	}
	snprintf(path, sizeof path, "%s/cgroup.subtree_control", sb->cg_base_v2);
	if (write_file(path, "+memory +pids") < 0) {
		snprintf(why, n, "cannot enable memory+pids in %.300s: %s", path, strerror(errno));
		goto out;
	}
	for (int i = 0; i < sb->nslots; i++) {
		struct sb_slot *s = &sb->slots[i];
		s->gen++;
		s->cg_open = true;
		if (v2_slot_open(sb, s) < 0) {
			snprintf(why, n, "cannot set up %.300s: %s", s->dir, strerror(errno));
			goto out;
		}
		if (fd_write_u64(s->v2_max, 64u << 20) < 0) {
			snprintf(why, n, "cannot write %.300s/memory.max: %s", s->dir, strerror(errno));
			goto out;
		}
		s->cur_mem = 64u << 20;
	}
	sb->cg = CG_V2;
	sb->cg_mem = sb->cg_pids = sb->cg_cpu = true;
	snprintf(sb->cg_where, sizeof sb->cg_where, " below %s%.200s", own_ok ? "our own cgroup " : "the root ",
	         own_ok ? self : mnt);
	rc = 0;
out:
	return rc;
}

/* The directory our own cgroup2 mount goes to when we make one (see cg_setup_v2). */
static void cg_own_mount_dir(const struct sandbox *sb, char *buf, size_t n)
{
	snprintf(buf, n, "%s/cgroup2", sb->lock_dir);
}

/* cgroup v2: below the cgroup2 mount we find; failing that (a container's cgroup mount is
 * read-only, or its mountinfo root is not "/"), below a cgroup2 mount of our own, which
 * needs CAP_SYS_ADMIN and is private to our mount namespace: in a container with its own
 * cgroup namespace, its root is the container's cgroup, and as its only process we move to a
 * leaf and delegate memory+pids to the slots ourselves. */
static int cg_setup_v2(struct sandbox *sb, char *why, size_t n)
{
	char *mnt = cg_mount(NULL), *self = cg_self_path(NULL);
	int rc = -1;
	if (mnt && self)
		rc = cg_setup_v2_at(sb, mnt, self, why, n);
	else
		snprintf(why, n, "no cgroup2 hierarchy mounted");
	if (rc < 0 && self && !sb->no_cgroup_mount) {
		char own[PATH_MAX], why2[512];
		cg_own_mount_dir(sb, own, sizeof own);
		struct statfs fs;
		bool mounted = statfs(own, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
		bool ours = false;
		(void)mkdir(sb->lock_dir, 0700);
		if (!mounted && (mkdir(own, 0700) == 0 || errno == EEXIST) &&
		    mount("cgroup2", own, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0)
			mounted = ours = true;
		if (mounted) {
			for (int i = 0; sb->slots && i < sb->nslots; i++)
				slot_close_cg(sb, &sb->slots[i]);
			char **b = &sb->cg_base_v2;
			if (*b)
				(void)rmdir(*b);
			free(*b);
			*b = NULL;
			if (sb->cg_lock[2] >= 0)
				close(sb->cg_lock[2]);
			sb->cg_lock[2] = -1;
			rc = cg_setup_v2_at(sb, own, self, why2, sizeof why2);
			if (rc == 0)
				LOGI(NULL, NULL, "sandbox: cgroup v2 through our own mount at %s", own);
			else
				snprintf(why + strlen(why), n - strlen(why), "; our own cgroup2 mount: %.200s", why2);
			if (rc < 0 && ours)
				(void)umount2(own, MNT_DETACH);   /* nothing to gain from it: leave no trace */
		} else {
			snprintf(why + strlen(why), n - strlen(why), "; cannot mount cgroup2 at %.200s: %s",
			         own, strerror(errno));
		}
	}
	free(mnt);
	free(self);
	return rc;
}

/* (Long: three hierarchies set up alike, each step's failure reported as it is.) */
/* cgroup v1: separate memory and pids hierarchies; either may be missing. */
static int cg_setup_v1(struct sandbox *sb, char *why, size_t n)
{
	char *mmnt = cg_mount("memory"), *mself = cg_self_path("memory");
	char *pmnt = cg_mount("pids"), *pself = cg_self_path("pids");
	why[0] = 0;
	if (mmnt && mself) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%s%s", mmnt, strcmp(mself, "/") ? mself : "");
		sb->cg_base_mem = cg_make_base(parent, &sb->cg_lock[0]);
		bool ok = sb->cg_base_mem != NULL;
		for (int i = 0; ok && i < sb->nslots; i++) {
			struct sb_slot *s = &sb->slots[i];
			if (!s->cg_open) {
				s->gen++;
				s->cg_open = true;
			}
			if (v1_mem_open(sb, s) < 0 || fd_write_u64(s->mem_limit, 64u << 20) < 0) {
				ok = false;
				break;
			}
			s->cur_mem = 64u << 20;
			if (s->memsw_limit >= 0 && fd_write_u64(s->memsw_limit, 64u << 20) < 0) {
				close(s->memsw_limit);
				s->memsw_limit = -1;
			}
		}
		sb->cg_mem = ok;
		if (!ok)
			snprintf(why, n, "memory cgroup v1 unusable below %.200s%.200s: %s", mmnt, mself,
			         strerror(errno));
	} else {
		snprintf(why, n, "no memory cgroup v1 hierarchy");
	}
	if (pmnt && pself) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%s%s", pmnt, strcmp(pself, "/") ? pself : "");
		sb->cg_base_pids = cg_make_base(parent, &sb->cg_lock[1]);
		bool ok = sb->cg_base_pids != NULL;
		for (int i = 0; ok && i < sb->nslots; i++) {
			struct sb_slot *s = &sb->slots[i];
			if (!s->cg_open) {
				s->gen++;
				s->cg_open = true;
			}
			if (v1_pids_open(sb, s) < 0) {
				ok = false;
				break;
			}
		}
		sb->cg_pids = ok;
		if (!ok)
			snprintf(why + strlen(why), n - strlen(why), "%spids cgroup v1 unusable: %s",
			         why[0] ? "; " : "", strerror(errno));
	} else {
		snprintf(why + strlen(why), n - strlen(why), "%sno pids cgroup v1 hierarchy",
		         why[0] ? "; " : "");
	}
	/* CPU time of the whole tree, children that were never waited for included */
	char *cmnt = cg_mount("cpuacct"), *cself = cg_self_path("cpuacct");
	if (cmnt && cself && (sb->cg_mem || sb->cg_pids)) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%s%s", cmnt, strcmp(cself, "/") ? cself : "");
		sb->cg_base_cpu = cg_make_base(parent, &sb->cg_lock[3]);
		bool ok = sb->cg_base_cpu != NULL;
		for (int i = 0; ok && i < sb->nslots; i++) {
			struct sb_slot *s = &sb->slots[i];
			if (v1_cpu_open(sb, s) < 0)
				ok = false;
		}
		sb->cg_cpu = ok;
	}
	free(cmnt);
	free(cself);
	free(mmnt);
	free(mself);
	free(pmnt);
	free(pself);
	if (!sb->cg_mem && !sb->cg_pids)
		return -1;
	sb->cg = CG_V1;
	return 0;
}

static void cg_setup(struct sandbox *sb)
{
	char why2[512] = "", why1[1024] = "";
	if (sb->no_cgroups) {
		snprintf(sb->cg_why, sizeof sb->cg_why, "cgroups disabled by ARBITER_SANDBOX_CGROUP=none");
		LOGW(NULL, NULL, "sandbox: cgroups disabled by ARBITER_SANDBOX_CGROUP=none; "
		     "memory and process limits fall back to rlimits");
		return;
	}
	if (cg_setup_v2(sb, why2, sizeof why2) == 0)
		return;
	cg_teardown(sb);
	int rc = cg_setup_v1(sb, why1, sizeof why1);
	snprintf(sb->cg_why, sizeof sb->cg_why, "v2: %.400s; v1: %.500s", why2, why1);
	if (rc == 0 && sb->cg_mem && sb->cg_pids)
		return;
	if (rc < 0) {
		cg_teardown(sb);
		LOGW(NULL, NULL, "sandbox: no usable cgroups (v2: %s; v1: %s); memory and process "
		     "limits fall back to rlimits (RLIMIT_DATA, RLIMIT_NPROC)", why2, why1);
	} else {
		LOGW(NULL, NULL, "sandbox: cgroup v1 only partly usable (%s); the missing limits "
		     "fall back to rlimits", why1);
	}
}

/* ======================================================================================
 * Runs (worker side)
 * ==================================================================================== */

static void set_err(struct sb_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(struct sb_run *r, const char *fmt, ...)
{
	if (r->res.internal_error)
		return;   /* keep the first reason */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->res.error, sizeof r->res.error, fmt, ap);
	va_end(ap);
	r->res.internal_error = true;
}

/* The last resort: SIGKILL to init (the kernel then kills the whole namespace) and
 * cgroup.kill where there is one. */
static void run_hardkill(struct sb_run *r)
{
	if (r->reaped || r->pidfd < 0)
		return;
	if (pidfd_kill(r->pidfd, r->pid, SIGKILL) < 0)
		LOGE(r->req.log_sub, NULL, "sandbox: cannot kill pid %d: %s", (int)r->pid, strerror(errno));
	if (r->sb->cg == CG_V2 && r->slot->v2_kill >= 0)
		(void)write_str_fd(r->slot->v2_kill, "1");
}

/* Ends a run early: SIGTERM asks init to kill and reap everything (so the CPU time of
 * the whole tree is accounted); if init has not ended within SB_TERM_MS, SIGKILL. */
static void run_kill(struct sb_run *r)
{
	if (r->killed || r->reaped || r->pidfd < 0)
		return;
	r->killed = true;
	if (pidfd_kill(r->pidfd, r->pid, SIGTERM) < 0) {
		run_hardkill(r);
		return;
	}
	r->tmode = TM_HARDKILL;
	uv_timer_stop(&r->timer);
	uv_timer_start(&r->timer, on_timer, SB_TERM_MS, 0);
}

static void on_close(uv_handle_t *h)
{
	struct sb_run *r = h->data;
	if (--r->open_handles == 0) {
		strbuf_free(&r->out);
		strbuf_free(&r->err);
		free(r);
	}
}

static void stop_poll(uv_poll_t *p, bool *polling)
{
	if (*polling) {
		uv_poll_stop(p);
		*polling = false;
	}
}

static void maybe_finish(struct sb_run *r)
{
	if (r->finished)
		return;
	if (r->reaped && r->out_done && r->err_done)
		run_finish(r);
}

/* Reads what a pipe has; caps the kept bytes; marks the output limit. */
static void drain(struct sb_run *r, int which)
{
	int fd = which ? r->err_fd : r->out_fd;
	struct strbuf *b = which ? &r->err : &r->out;
	size_t cap = which ? r->err_cap : r->out_cap;
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			if (which) {
				stop_poll(&r->err_poll, &r->err_polling);
				r->err_done = true;
			} else {
				stop_poll(&r->out_poll, &r->out_polling);
				r->out_done = true;
			}
			maybe_finish(r);
			return;
		}
		size_t room = b->len < cap ? cap - b->len : 0;
		size_t take = (size_t)n < room ? (size_t)n : room;
		if (take)
			strbuf_add(b, buf, take);
		if ((size_t)n > take) {
			/* stdout over its cap is the output limit; stderr over the limit too, but
			 * only what we keep of it is smaller */
			if (!which || b->len + ((size_t)n - take) > r->req.lim.output_bytes ||
			    r->req.lim.output_bytes <= cap) {
				r->res.output_exceeded = true;
				run_kill(r);
			}
		}
	}
}

static void on_out(uv_poll_t *p, int status, int events)
{
	(void)p;
	(void)status;
	(void)events;
	drain(p->data, 0);
}

static void on_err(uv_poll_t *p, int status, int events)
{
	(void)status;
	(void)events;
	drain(p->data, 1);
}

static void on_exit_ready(uv_poll_t *p, int status, int events)
{
	(void)status;
	(void)events;
	struct sb_run *r = p->data;
	siginfo_t si;
	memset(&si, 0, sizeof si);
	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	long rc = syscall(SYS_waitid, P_PIDFD, r->pidfd, &si, WEXITED | WNOHANG | __WALL, &ru);
	if (rc < 0) {
		if (errno == EINTR)
			return;
		set_err(r, "waitid: %s", strerror(errno));
	} else if (si.si_pid == 0) {
		return;   /* not yet */
	}
	r->ru = ru;
	r->init_status = si.si_code == CLD_EXITED ? si.si_status : -si.si_status;
	r->reaped = true;
	stop_poll(&r->pidfd_poll, &r->pidfd_polling);
	r->res.wall_ms = (now_ns() - r->start_ns) / 1000000;
	/* The namespace is empty now; pipes reach EOF unless someone passed an fd away. */
	if (!r->out_done)
		drain(r, 0);
	if (!r->err_done && !r->finished)
		drain(r, 1);
	if (!r->finished && !(r->out_done && r->err_done)) {
		r->tmode = TM_GRACE;
		uv_timer_stop(&r->timer);
		uv_timer_start(&r->timer, on_timer, 200, 0);
	}
	maybe_finish(r);
}

/* CPU time (µs) of process pid itself (not its children), from /proc; 0 if unknown. */
static uint64_t proc_cpu_us(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *p = strrchr(buf, ')');   /* the command name may hold spaces */
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	long hz = sysconf(_SC_CLK_TCK);
	return hz > 0 ? (ut + st) * 1000000ull / (uint64_t)hz : 0;
}

/* The CPU limit on the whole tree: RLIMIT_CPU is per process, and children nobody waits
 * for never reach init's accounting, so the cgroup's figure is checked as the run goes. */
static void on_cpu_timer(uv_timer_t *t)
{
	struct sb_run *r = t->data;
	if (r->reaped || r->killed || r->finished) {
		uv_timer_stop(t);
		return;
	}
	/* the run's time, as run_finish counts it: the cgroup's minus init's own */
	uint64_t used = slot_cpu_us(r->sb, r->slot), init = proc_cpu_us(r->pid);
	if ((used > init ? used - init : 0) / 1000 > r->req.lim.cpu_ms) {
		uv_timer_stop(t);
		r->res.cpu_exceeded = true;
		run_kill(r);
	}
}

static void on_timer(uv_timer_t *t)
{
	struct sb_run *r = t->data;
	switch (r->tmode) {
	case TM_REPORT:      /* failed to start: report asynchronously */
		run_finish(r);
		break;
	case TM_GRACE:       /* reaped, but a pipe never reached EOF: stop waiting */
		r->out_done = r->err_done = true;
		run_finish(r);
		break;
	case TM_HARDKILL:
		run_hardkill(r);
		break;
	case TM_WALL: {
		/* A busy loop runs this timer late, before it sees that init ended: a command that
		 * ended in time (init says when) is not over the limit. init is cleaning up; it gets
		 * the usual time before the backstop. */
		struct sb_status *st = r->slot->st;
		if (__atomic_load_n(&st->payload_done, __ATOMIC_ACQUIRE) &&
		    st->payload_end_ns >= r->start_ns &&
		    st->payload_end_ns - r->start_ns <= (uint64_t)r->req.lim.wall_ms * 1000000u) {
			r->tmode = TM_HARDKILL;
			uv_timer_start(&r->timer, on_timer, SB_TERM_MS, 0);
			break;
		}
		r->res.wall_exceeded = true;
		run_kill(r);
		break;
	}
	}
}

/* v1: sets memory (and memsw, kept equal: no swap) to mem. memsw >= memory at all
 * times, so memsw goes first when raising and last when lowering. Lowering below what the
 * cgroup still holds (page cache of earlier runs) may need force_empty. */
static int v1_set_mem(struct sb_slot *s, uint64_t mem)
{
	if (!s->cur_mem)
		s->cur_mem = fd_u64(s->mem_limit);   /* unknown after an error: ask */
	if (mem == s->cur_mem)
		return 0;
	bool raise = mem > s->cur_mem;
	if (raise && s->memsw_limit >= 0 && fd_write_u64(s->memsw_limit, mem) < 0)
		return -1;
	if (fd_write_u64(s->mem_limit, mem) < 0) {
		char path[PATH_MAX + 32];
		snprintf(path, sizeof path, "%s/memory.force_empty", s->mem_dir);
		(void)write_file(path, "0");
		if (fd_write_u64(s->mem_limit, mem) < 0)
			return -1;
	}
	if (!raise && s->memsw_limit >= 0 && fd_write_u64(s->memsw_limit, mem) < 0)
		return -1;
	s->cur_mem = mem;
	return 0;
}

/* After a failed write the kernel's values are unknown: rewrite them next time. */
static void s_cur_reset(struct sb_slot *s)
{
	s->cur_mem = s->cur_pids = 0;
}

/* Sets the slot's cgroup limits for r and reads the OOM counter's baseline. */
static int slot_cg_prepare(struct sandbox *sb, struct sb_run *r)
{
	struct sb_slot *s = r->slot;
	uint64_t mem = r->req.lim.memory_bytes;
	uint64_t pids = (uint64_t)r->req.lim.processes + 1;   /* + init */
	if (sb->cg != CG_NONE && !s->cg_open) {
		if (sb->ngrave)
			cg_graves(sb);
		if (slot_cg_open(sb, s) < 0)
			return -1;
	}
	if (sb->cg == CG_V2) {
		if (mem != s->cur_mem) {
			if (fd_write_u64(s->v2_max, mem) < 0)
				return -1;
			s->cur_mem = mem;
		}
		if (pids != s->cur_pids) {
			if (fd_write_u64(s->pids_max, pids) < 0)
				return -1;
			s->cur_pids = pids;
		}
		/* fresh cgroups: the counters and the peak start from zero */
		r->oom_base = 0;
		r->peak_ok = s->v2_peak >= 0;
		r->mem_base = 0;
		return 0;
	}
	if (sb->cg_mem) {
		if (v1_set_mem(s, mem) < 0)
			return -1;
		r->peak_ok = s->mem_maxusage >= 0;
		r->mem_base = 0;
		r->oom_base = 0;
	}
	if (sb->cg_pids && pids != s->cur_pids) {
		if (fd_write_u64(s->pids_max, pids) < 0)
			return -1;
		s->cur_pids = pids;
	}
	return 0;
}

/* The cgroup.procs files init writes itself into (-1: none). */
static void slot_join_fds(const struct sandbox *sb, const struct sb_slot *s, bool in_cgroup,
                          int join[3])
{
	join[0] = join[1] = join[2] = -1;
	if (sb->cg == CG_V2) {
		if (!in_cgroup)
			join[0] = s->mem_procs;
	} else if (sb->cg == CG_V1) {
		if (sb->cg_mem)
			join[0] = s->mem_procs;
		if (sb->cg_pids)
			join[1] = s->pids_procs;
		if (sb->cg_cpu)
			join[2] = s->cpu_procs;
	}
}

static void prepare_child_args(struct sandbox *sb, struct sb_run *r)
{
	const struct sandbox_limits *l = &r->req.lim;
	uint64_t fsz = l->file_bytes;
	uint64_t files = 0, inodes = 4096;
	for (size_t i = 0; i < r->req.nfiles; i++) {
		files += r->req.files[i].len + 4096;
		/* the file and each of its directories: a request's own files never run /work
		 * out of inodes (that would be a set-up failure, an internal error) */
		inodes++;
		for (const char *c = r->req.files[i].path; *c; c++)
			inodes += *c == '/';
	}
	snprintf(r->tmp_opts, sizeof r->tmp_opts, "size=%llu,nr_inodes=4096,mode=1777",
	         (unsigned long long)fsz);
	snprintf(r->work_opts, sizeof r->work_opts,
	         "size=%llu,nr_inodes=%llu,mode=755,uid=%u,gid=%u", (unsigned long long)(fsz + files),
	         (unsigned long long)inodes, (unsigned)r->slot->uid, (unsigned)r->slot->uid);
	int n = 0;
	uint64_t cpu_s = (l->cpu_ms + 999) / 1000;   /* whole seconds; cpu_ms is checked exactly */
	r->rl_res[n] = RLIMIT_CPU;
	r->rl[n++] = (struct rlimit){ cpu_s, cpu_s + 1 };
	r->rl_res[n] = RLIMIT_CORE;
	r->rl[n++] = (struct rlimit){ 0, 0 };
	r->rl_res[n] = RLIMIT_FSIZE;
	r->rl[n++] = (struct rlimit){ fsz, fsz };
	r->rl_res[n] = RLIMIT_NOFILE;
	r->rl[n++] = (struct rlimit){ l->open_files, l->open_files };
	/* RLIMIT_NPROC counts every process of the uid on the whole host, and another arbiter
	 * process (a second replica, `arbiter score`) may run sandboxes with the same uids: a
	 * fork bomb there would then make our execve fail (EAGAIN) or our forks. The pids
	 * cgroup counts this run alone; the rlimit is only the fallback without one. */
	if (!sb->cg_pids) {
		r->rl_res[n] = RLIMIT_NPROC;
		r->rl[n++] = (struct rlimit){ l->processes, l->processes };
	}
	r->rl_res[n] = RLIMIT_MSGQUEUE;
	r->rl[n++] = (struct rlimit){ 0, 0 };
	uint64_t stack = l->stack_bytes ? l->stack_bytes
	                 : l->memory_bytes < (64u << 20) ? l->memory_bytes : (64u << 20);
	r->rl_res[n] = RLIMIT_STACK;
	r->rl[n++] = (struct rlimit){ stack, stack };
	/* With a memory cgroup the data limit is only a backstop (runtimes such as V8 reserve
	 * much more than they use), at least the machine's memory (sb->data_floor) so that an
	 * allocation the kernel would grant reaches the cgroup, which reports a memory limit
	 * when it is used, instead of failing at an arbitrary size (a runtime error); without
	 * a cgroup it is the memory limit. */
	uint64_t data = l->memory_bytes;
	if (sb->cg_mem) {
		data = l->memory_bytes * 4 + (1ull << 30);
		if (data < sb->data_floor)
			data = sb->data_floor;
	}
	r->rl_res[n] = RLIMIT_DATA;
	r->rl[n++] = (struct rlimit){ data, data };
	for (int i = 0; i < n; i++) {
		rlim_t h = sb->hard[r->rl_res[i]];
		if (h != RLIM_INFINITY && r->rl[i].rlim_max > h)
			r->rl[i].rlim_max = h;
		if (r->rl[i].rlim_cur > r->rl[i].rlim_max)
			r->rl[i].rlim_cur = r->rl[i].rlim_max;
	}
	r->nrl = n;
	r->envp[0] = "PATH=/usr/local/bin:/usr/bin:/bin";
	r->envp[1] = "HOME=/tmp";
	r->envp[2] = "LANG=C.UTF-8";
	r->envp[3] = NULL;
	r->env = r->envp;
	r->search = "/usr/local/bin:/usr/bin:/bin";
	r->cwd = "/work";
	r->outdir = "/work";
	if (r->req.rootfs) {
		static const char *const none[] = { NULL };
		r->env = r->req.envp ? r->req.envp : none;
		r->search = r->req.path ? r->req.path : r->search;
		r->cwd = r->req.cwd ? r->req.cwd : "/";
		r->outdir = "/output";
		snprintf(r->sub_opts, sizeof r->sub_opts, "size=%llu,nr_inodes=%llu,mode=755",
		         (unsigned long long)(files + 4096), (unsigned long long)inodes);
		snprintf(r->work_opts, sizeof r->work_opts, "size=%llu,nr_inodes=4096,mode=755,uid=%u,gid=%u",
		         (unsigned long long)fsz, (unsigned)r->slot->uid, (unsigned)r->slot->uid);
	}
	const char *a0 = r->req.argv[0];
	r->exec_search = !strchr(a0, '/');
	if (!r->exec_search)
		snprintf(r->exec_path, sizeof r->exec_path, "%s", a0);
}

/* clone3 into the sandbox's namespaces (v2: straight into the slot's cgroup when the kernel
 * can; *in_cgroup says whether it did, in the child too). Returns the pid (0 in the child)
 * or -1. */
static pid_t do_clone(struct sandbox *sb, struct sb_slot *slot, int *pidfd, bool *in_cgroup)
{
	*in_cgroup = false;
	struct sb_clone_args ca;
	memset(&ca, 0, sizeof ca);
	ca.flags = sb->clone_flags | CLONE_PIDFD;
	ca.pidfd = (uint64_t)(uintptr_t)pidfd;
	ca.exit_signal = 0;
	if (sb->cg == CG_V2 && slot && slot->dir_fd >= 0) {
		ca.flags |= SB_CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)slot->dir_fd;
	}
	/* *in_cgroup is set before each attempt: the child sees the value of the one that
	 * created it. */
	*in_cgroup = (ca.flags & SB_CLONE_INTO_CGROUP) != 0;
	long rc = syscall(SYS_clone3, &ca, sizeof ca);
	if (rc < 0 && (errno == ENOSYS || errno == E2BIG || errno == EINVAL) &&
	    (ca.flags & SB_CLONE_INTO_CGROUP)) {
		ca.flags &= ~SB_CLONE_INTO_CGROUP;
		ca.cgroup = 0;
		*in_cgroup = false;
		rc = syscall(SYS_clone3, &ca, sizeof ca);
	}
	if (rc < 0 && errno == ENOSYS) {  /* kernel < 5.3: clone(2), x86-64 argument order */
		*in_cgroup = false;
		rc = syscall(SYS_clone, sb->clone_flags | CLONE_PIDFD, 0, pidfd, NULL, 0);
	}
	return (pid_t)rc;
}

/* (Long: one run's start, each step's failure reported through the same path.) */
/* Spawns r into its slot. On failure sets the error and schedules the report. */
static void run_start(struct sb_run *r)
{
	struct sandbox *sb = r->sb;
	int outp[2] = { -1, -1 }, errp[2] = { -1, -1 };
	r->start_ns = now_ns();   /* again just before the clone (below) */
	memset(r->slot->st, 0, sizeof *r->slot->st);
	r->slot->st->collected = -1;
	prepare_child_args(sb, r);
	if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		set_err(r, "pipe: %s", strerror(errno));
		goto fail;
	}
	(void)fcntl(outp[0], F_SETFL, O_NONBLOCK);
	(void)fcntl(errp[0], F_SETFL, O_NONBLOCK);
	(void)fcntl(outp[0], F_SETPIPE_SZ, 1 << 20);
	if (r->req.collect) {
		r->collect_fd = (int)syscall(SYS_memfd_create, "collect", MFD_CLOEXEC);
		if (r->collect_fd < 0) {
			set_err(r, "memfd_create: %s", strerror(errno));
			goto fail;
		}
	}
	{
		char nerr[160];
		r->netns_fd = ns_take(sb, nerr, sizeof nerr);
		if (r->netns_fd < 0) {
			set_err(r, "%s", nerr);
			goto fail;
		}
	}
	if (slot_cg_prepare(sb, r) < 0) {
		set_err(r, "cannot set the cgroup limits of slot %d: %s", r->slot->index, strerror(errno));
		s_cur_reset(r->slot);
		goto fail;
	}

	/* The wall clock starts here: lowering the slot's memory limit above may have had to
	 * reclaim page cache an earlier run left there, which is not this run's time. */
	r->start_ns = now_ns();
	int pidfd = -1;
	bool in_cgroup;
	pid_t pid = do_clone(sb, r->slot, &pidfd, &in_cgroup);
	if (pid == 0) {
		int join[3];
		slot_join_fds(sb, r->slot, in_cgroup, join);
		init_main(sb, r, join, outp[1], errp[1], r->collect_fd, false);
	}
	ns_refill(sb);   /* the next run's namespace, made while this one runs */
	if (pid < 0) {
		set_err(r, "clone: %s", strerror(errno));
		goto fail;
	}
	r->pid = pid;
	r->pidfd = pidfd;
	close(outp[1]);
	close(errp[1]);
	outp[1] = errp[1] = -1;
	r->out_fd = outp[0];
	r->err_fd = errp[0];
	r->started = true;

	uv_poll_init(sb->loop, &r->pidfd_poll, r->pidfd);
	uv_poll_init(sb->loop, &r->out_poll, r->out_fd);
	uv_poll_init(sb->loop, &r->err_poll, r->err_fd);
	r->pidfd_poll.data = r->out_poll.data = r->err_poll.data = r;
	r->open_handles += 3;
	uv_poll_start(&r->pidfd_poll, UV_READABLE, on_exit_ready);
	uv_poll_start(&r->out_poll, UV_READABLE, on_out);
	uv_poll_start(&r->err_poll, UV_READABLE, on_err);
	r->pidfd_polling = r->out_polling = r->err_polling = true;
	{
		r->tmode = TM_WALL;
		uv_update_time(sb->loop);   /* the limit counts from now, not from the loop's tick */
		uv_timer_start(&r->timer, on_timer, r->req.lim.wall_ms ? r->req.lim.wall_ms : 1, 0);
		if (sb->cg_cpu) {
			uint64_t first = r->req.lim.cpu_ms < SB_CPU_POLL_MS ? r->req.lim.cpu_ms : SB_CPU_POLL_MS;
			uv_timer_start(&r->cpu_timer, on_cpu_timer, first ? first : 1, SB_CPU_POLL_MS);
		}
	}
	return;
fail:
	ns_refill(sb);
	for (int i = 0; i < 2; i++) {
		if (outp[i] >= 0)
			close(outp[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	r->out_done = r->err_done = r->reaped = true;
	r->res.end = SANDBOX_NOT_RUN;
	r->tmode = TM_REPORT;
	uv_timer_start(&r->timer, on_timer, 0, 0);
}

/* (Long: every figure of the result, each with the rule it follows.) */
/* The figures of a run that started (its end, CPU, memory, limits hit, collected file),
 * from init's status page, its rusage and the run's cgroups, into r->res. */
static void finish_figures(struct sb_run *r)
{
	struct sandbox *sb = r->sb;
	struct sb_slot *s = r->slot;
	struct sb_status *st = s->st;
	struct sandbox_result *res = &r->res;
	/* CPU: everything init reaped, minus init's own set-up work. */
	long total_us = (long)(r->ru.ru_utime.tv_sec + r->ru.ru_stime.tv_sec) * 1000000L +
	                r->ru.ru_utime.tv_usec + r->ru.ru_stime.tv_usec;
	long cpu_us = total_us - (st->self_cpu_us > 0 ? st->self_cpu_us : 0);
	res->cpu_ms = cpu_us > 0 ? (uint64_t)cpu_us / 1000 : 0;
	/* The cgroup counts what waitid cannot see: children the command never waited
	 * for (SIGCHLD ignored: the kernel reaps them, their time reaches nobody). */
	if (sb->cg_cpu) {
		uint64_t cg_us = slot_cpu_us(sb, s);
		uint64_t self = st->self_cpu_us > 0 ? (uint64_t)st->self_cpu_us : 0;
		uint64_t ms = cg_us > self ? (cg_us - self) / 1000 : 0;
		if (ms > res->cpu_ms)
			res->cpu_ms = ms;
	}
	/* memory_kb: the larger of the peak RSS of its processes (init's own excluded, see
	 * init_main) and how far the cgroup's charge rose above where the run found it
	 * (the files in /work and /tmp count there, shared libraries do not). */
	res->memory_kb = st->maxrss_kb > 0 ? (uint64_t)st->maxrss_kb : 0;
	uint64_t peak = 0;
	if (sb->cg == CG_V2) {
		if (fd_kv_get(s->v2_events, "oom_kill") > r->oom_base)
			res->memory_exceeded = true;
		if (r->peak_ok)
			peak = fd_u64(s->v2_peak);
	} else if (sb->cg_mem) {
		if (fd_kv_get(s->mem_oom, "oom_kill") > r->oom_base)
			res->memory_exceeded = true;
		if (r->peak_ok)
			peak = fd_u64(s->mem_maxusage);
	}
	if (peak > r->mem_base && (peak - r->mem_base) / 1024 > res->memory_kb)
		res->memory_kb = (peak - r->mem_base) / 1024;
	if (st->payload_done) {
		int ws = st->payload_status;
		/* the command's own wall time, not when the loop got round to the reap */
		if (st->payload_end_ns >= r->start_ns)
			res->wall_ms = (st->payload_end_ns - r->start_ns) / 1000000;
		if (WIFEXITED(ws)) {
			res->end = SANDBOX_EXITED;
			res->exit_code = WEXITSTATUS(ws);
		} else {
			res->end = SANDBOX_SIGNALED;
			res->signal = WTERMSIG(ws);
		}
		/* A file of /work (a compiled submission) that cannot be executed is the
		 * command's failure (exit 127); a runtime of the host that cannot be is ours. */
		res->exec_errno = st->exec_errno;
		const char *a0 = r->req.argv[0];
		bool in_work = !strncmp(a0, "/work/", 6) || (a0[0] != '/' && strchr(a0, '/'));
		if (st->exec_errno && !in_work)
			set_err(r, "cannot execute %s: %s", a0, strerror(st->exec_errno));
	} else if (st->fail_stage) {
		res->end = SANDBOX_NOT_RUN;
		set_err(r, "sandbox set-up failed while %s (step %d): %s",
		        stage_names[st->fail_stage], st->fail_detail, strerror(st->fail_errno));
	} else {
		/* init was killed (a limit, or the OOM killer chose it) */
		res->end = SANDBOX_SIGNALED;
		res->signal = r->init_status < 0 ? (int)-r->init_status : SIGKILL;
		if (!r->killed && !res->memory_exceeded && st->stage < ST_FORK)
			set_err(r, "sandbox init ended early (stage: %s, status %ld)",
			        stage_names[st->stage], r->init_status);
	}
	if (r->req.lim.cpu_ms && res->cpu_ms > r->req.lim.cpu_ms)
		res->cpu_exceeded = true;
	if (res->end == SANDBOX_SIGNALED && res->signal == SIGXCPU)
		res->cpu_exceeded = true;
	/* Without a memory cgroup the kernel tells nobody that an allocation failed on
	 * RLIMIT_DATA: a run that failed with its peak RSS at 70% of the limit or more is
	 * taken as a failed allocation at the limit (heuristic of the degraded mode). */
	if (!sb->cg_mem && !res->memory_exceeded && res->memory_kb &&
	    res->memory_kb * 1024 >= r->req.lim.memory_bytes / 10 * 7 &&
	    (res->end == SANDBOX_SIGNALED || res->exit_code != 0))
		res->memory_exceeded = true;
	if (r->collect_fd >= 0 && st->collected >= 0) {
		size_t n = (size_t)st->collected;
		char *buf = xmalloc(n + 1);
		if (pread(r->collect_fd, buf, n, 0) == (ssize_t)n) {
			buf[n] = 0;
			res->collected = buf;
			res->collected_len = n;
		} else {
			free(buf);
		}
	}
}

static void run_finish(struct sb_run *r)
{
	struct sandbox *sb = r->sb;
	struct sb_slot *s = r->slot;
	r->finished = true;
	uv_timer_stop(&r->timer);
	struct sandbox_result *res = &r->res;

	if (r->started)
		finish_figures(r);
	if (!r->out.buf)
		strbuf_addlit(&r->out, "");
	if (!r->err.buf)
		strbuf_addlit(&r->err, "");
	res->out = r->out.buf;
	res->out_len = r->out.len;
	res->err = r->err.buf;
	res->err_len = r->err.len;

	if (r->collect_fd >= 0)
		close(r->collect_fd);
	r->collect_fd = -1;
	int used_ns = r->netns_fd;   /* returned after the callback (like the cgroups) */
	r->netns_fd = -1;
	if (!r->reaped && used_ns >= 0) {
		close(used_ns);
		used_ns = -1;
	}
	if (r->pidfd >= 0 && !r->reaped)
		run_hardkill(r);  /* cannot happen: finish waits for the reap */

	if (sb->cg != CG_NONE)
		slot_recycle(s);   /* the next run gets fresh cgroups, made ahead */
	/* Free the slot before the callback, so a run it queues can take it. */
	s->busy = false;
	s->run = NULL;
	sb->busy--;
	if (log_enabled(LOG_DEBUG))
		LOGD(r->req.log_sub, NULL, "sandbox: %s end=%d exit=%d sig=%d cpu=%llums wall=%llums "
		     "mem=%llukB tle=%d/%d mle=%d ole=%d err=%s", r->req.argv[0], (int)res->end,
		     res->exit_code, res->signal, (unsigned long long)res->cpu_ms,
		     (unsigned long long)res->wall_ms, (unsigned long long)res->memory_kb,
		     res->wall_exceeded, res->cpu_exceeded, res->memory_exceeded, res->output_exceeded,
		     res->internal_error ? res->error : "-");
	r->cb(res, r->data);
	free((void *)res->collected);

	if (r->out_fd >= 0)
		close(r->out_fd);
	if (r->err_fd >= 0)
		close(r->err_fd);
	if (r->pidfd >= 0)
		close(r->pidfd);
	r->out_fd = r->err_fd = r->pidfd = -1;
	if (r->started) {
		uv_close((uv_handle_t *)&r->pidfd_poll, on_close);
		uv_close((uv_handle_t *)&r->out_poll, on_close);
		uv_close((uv_handle_t *)&r->err_poll, on_close);
	}
	uv_close((uv_handle_t *)&r->timer, on_close);
	uv_timer_stop(&r->cpu_timer);
	uv_close((uv_handle_t *)&r->cpu_timer, on_close);
	ns_return(sb, used_ns);   /* empty: used again; else dropped */
	slot_recycle_start(sb, s);
	queue_pump(sb);
}

static void queue_pump(struct sandbox *sb)
{
	while (sb->qhead && sb->busy < sb->nslots) {
		struct sb_slot *slot = NULL;
		for (int i = 0; i < sb->nslots; i++)
			if (!sb->slots[i].busy && !sb->slots[i].cgw) {
				slot = &sb->slots[i];
				break;
			}
		if (!slot)
			slot = slot_renew_now(sb);
		if (!slot)
			return;   /* the free slots' cgroups are being renewed: cg_after pumps */
		struct sb_run *r = sb->qhead;
		sb->qhead = r->next;
		if (!sb->qhead)
			sb->qtail = NULL;
		sb->queued--;
		slot->busy = true;
		slot->run = r;
		sb->busy++;
		r->slot = slot;
		run_start(r);
	}
}

int sandbox_run(struct sandbox *sb, const struct sandbox_req *req, sandbox_cb *cb, void *data)
{
	if (!sb || !req || !req->argv || !req->argv[0] || !cb)
		return -1;
	for (size_t i = 0; i < req->nfiles; i++)
		if (!sandbox_path_ok(req->files[i].path))
			return -1;
	if (req->collect && !sandbox_path_ok(req->collect))
		return -1;
	struct sb_run *r = xcalloc(1, sizeof *r);
	r->sb = sb;
	r->req = *req;
	r->cb = cb;
	r->data = data;
	r->pidfd = r->out_fd = r->err_fd = r->collect_fd = r->netns_fd = -1;
	/* defaults for unset limits */
	struct sandbox_limits *l = &r->req.lim;
	if (!l->cpu_ms)
		l->cpu_ms = 2000;
	if (!l->wall_ms)
		l->wall_ms = l->cpu_ms * 2 + 1000;
	if (!l->memory_bytes)
		l->memory_bytes = 256u << 20;
	if (l->memory_bytes < (4u << 20))
		l->memory_bytes = 4u << 20;
	if (!l->processes)
		l->processes = 32;
	if (!l->output_bytes)
		l->output_bytes = 1u << 20;
	if (!l->file_bytes)
		l->file_bytes = 64u << 20;
	if (!l->open_files)
		l->open_files = 128;
	r->out_cap = l->output_bytes;
	r->err_cap = l->output_bytes;
	uv_timer_init(sb->loop, &r->timer);
	r->timer.data = r;
	uv_timer_init(sb->loop, &r->cpu_timer);
	r->cpu_timer.data = r;
	r->open_handles = 2;
	if (sb->qtail)
		sb->qtail->next = r;
	else
		sb->qhead = r;
	sb->qtail = r;
	sb->queued++;
	queue_pump(sb);
	return 0;
}

int sandbox_busy(const struct sandbox *sb)
{
	return sb ? sb->busy : 0;
}

int sandbox_queued(const struct sandbox *sb)
{
	return sb ? sb->queued : 0;
}

int sandbox_slots(const struct sandbox *sb)
{
	return sb ? sb->nslots : 0;
}

const char *sandbox_describe(const struct sandbox *sb)
{
	return sb ? sb->describe : "";
}

/* ======================================================================================
 * Start-up probe: one sandbox built for real, synchronously (start-up only).
 * ==================================================================================== */

/* The smallest RLIMIT_DATA backstop under a memory cgroup: the machine's memory and swap
 * (what the kernel's overcommit heuristic would grant at most), or 0 under strict
 * overcommit (vm.overcommit_memory=2), where address space is a budget shared with the
 * host and the backstop stays small. */
static uint64_t data_floor(void)
{
	char *oc = read_small_file("/proc/sys/vm/overcommit_memory", NULL);
	bool strict = !oc || oc[0] == '2';
	free(oc);
	struct sysinfo si;
	if (strict || sysinfo(&si) < 0)
		return 0;
	return ((uint64_t)si.totalram + si.totalswap) * (si.mem_unit ? si.mem_unit : 1);
}

/* Builds one sandbox for real and waits for it (blocking; start-up only). Returns 0, or -1
 * with err; *stage gets the stage that failed (ST_CGROUP: the cgroups are unusable;
 * ST_CLONE: the namespaces could not be created at all). */
static int probe(struct sandbox *sb, char *err, size_t errlen, int *seccomp_errno, int *stage)
{
	struct sb_run r;
	memset(&r, 0, sizeof r);
	static const char *const argv[] = { "/bin/true", NULL };
	r.sb = sb;
	r.req.argv = argv;
	r.req.lim.file_bytes = 1 << 20;
	r.req.lim.memory_bytes = 64u << 20;
	r.req.lim.processes = 4;
	r.req.lim.open_files = 16;
	r.slot = &sb->slots[0];
	r.netns_fd = sb->netns_fd;
	memset(r.slot->st, 0, sizeof *r.slot->st);
	*stage = 0;
	prepare_child_args(sb, &r);
	(void)slot_cg_prepare(sb, &r);
	int pidfd = -1;
	bool in_cgroup;
	pid_t pid = do_clone(sb, r.slot, &pidfd, &in_cgroup);
	if (pid == 0) {
		int join[3];
		slot_join_fds(sb, r.slot, in_cgroup, join);
		init_main(sb, &r, join, -1, -1, -1, true);
	}
	if (pid < 0) {
		int e = errno;
		snprintf(err, errlen, "clone: %s", strerror(e));
		*stage = ST_CLONE;
		errno = e;
		return -1;
	}
	siginfo_t si;
	memset(&si, 0, sizeof si);
	while (syscall(SYS_waitid, P_PIDFD, pidfd, &si, WEXITED | __WALL, NULL) < 0 && errno == EINTR)
		;
	close(pidfd);
	if (sb->cg != CG_NONE)
		slot_close_cg(sb, r.slot);   /* the first run gets fresh ones */
	struct sb_status *st = r.slot->st;
	*seccomp_errno = st->seccomp_errno;
	if (st->probe_ok)
		return 0;
	*stage = st->fail_stage;
	if (st->fail_stage)
		snprintf(err, errlen, "sandbox set-up failed while %s (step %d): %s",
		         stage_names[st->fail_stage], st->fail_detail, strerror(st->fail_errno));
	else
		snprintf(err, errlen, "sandbox probe ended with status %d at stage %s", si.si_status,
		         stage_names[st->stage]);
	errno = EINVAL;
	return -1;
}

/* True when fd (open on path) is still the file path names: a lock file removed by
 * uid_locks_sweep or by its last owner after we opened it no longer guards anything. */
static bool same_file(int fd, const char *path)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Removes the lock files of dir nobody holds (pools that ended without removing theirs:
 * killed). A file is removed only while we hold its lock and only if the path still names
 * the file we locked; an allocator that opened it before checks the same after locking
 * (uid_lock_block), so two pools never hold the same block through different files. */
static void uid_locks_sweep(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		unsigned long long first;
		char tail;
		if (sscanf(de->d_name, "uid-%llu%c", &first, &tail) != 1)
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && same_file(fd, path))
			(void)unlink(path);
		close(fd);
	}
	closedir(d);
}

/* Opens and locks the lock file of one uid block: the fd, -1 when another pool holds it,
 * -2 with errno when the file cannot be opened. */
static int uid_lock_block(const char *path)
{
	for (int tries = 0; tries < 8; tries++) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return -2;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			close(fd);
			return -1;
		}
		if (same_file(fd, path))
			return fd;
		close(fd);   /* removed meanwhile: lock the file that is there now */
	}
	return -1;
}

/* Releases the pool's uid blocks, removing their lock files (while still holding them). */
static void uid_release(struct sandbox *sb)
{
	for (int i = 0; i <= SB_UID_MAX_BLOCKS; i++) {
		if (sb->uid_locks[i] < 0)
			continue;
		if (sb->uid_lock_paths[i] && same_file(sb->uid_locks[i], sb->uid_lock_paths[i]))
			(void)unlink(sb->uid_lock_paths[i]);
		close(sb->uid_locks[i]);
		sb->uid_locks[i] = -1;
		free(sb->uid_lock_paths[i]);
		sb->uid_lock_paths[i] = NULL;
	}
}

/* Gives the pool a uid range of its own: [start, start + nslots) where every block of
 * SB_UID_BLOCK uids it touches is locked (an flock on <lock dir>/uid-<block>, held for the
 * pool's life) by no other pool. Ranges are tried from base upwards, starting at a random
 * range when the base is the default (so that instances that do not share a lock directory,
 * pods on one node, still rarely meet). Per-user kernel quotas (processes, inotify, pipe
 * pages, signals, message queues) are then this pool's alone. Returns the start, or 0 with
 * err. */
static uint32_t uid_allocate(struct sandbox *sb, uint32_t base, bool randomize, char *err,
                             size_t errlen)
{
	const char *dir = sb->lock_dir;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create the uid lock directory %.300s (set "
		         "ARBITER_SANDBOX_LOCK_DIR to a writable directory shared by the arbiter "
		         "processes of this host): %s", dir, strerror(errno));
		return 0;
	}
	uid_locks_sweep(dir);
	uint32_t stride = ((uint32_t)sb->nslots + SB_UID_BLOCK - 1) / SB_UID_BLOCK * SB_UID_BLOCK;
	uint64_t nranges = ((uint64_t)UINT32_MAX - 1 - base) / stride;
	if (nranges == 0) {
		snprintf(err, errlen, "no room for %d sandbox uids above %u", sb->nslots, base);
		return 0;
	}
	uint64_t first = 0;
	if (randomize) {
		uint64_t rnd = 0;
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (read(fd, &rnd, sizeof rnd) != (ssize_t)sizeof rnd)
				rnd = (uint64_t)getpid() * 2654435761u;
			close(fd);
		}
		first = rnd % (nranges < (1u << 20) ? nranges : (1u << 20));
	}
	for (uint64_t t = 0; t < SB_UID_TRIES && t < nranges; t++) {
		uint64_t start = base + ((first + t) % nranges) * stride;
		uint64_t b0 = start / SB_UID_BLOCK, b1 = (start + stride - 1) / SB_UID_BLOCK;
		int n = 0;
		bool got = true;
		for (uint64_t b = b0; b <= b1 && got; b++) {
			char path[PATH_MAX];
			snprintf(path, sizeof path, "%s/uid-%llu", dir, (unsigned long long)(b * SB_UID_BLOCK));
			int fd = n < SB_UID_MAX_BLOCKS + 1 ? uid_lock_block(path) : -1;
			if (fd == -2) {
				snprintf(err, errlen, "cannot open the uid lock %.300s: %s", path, strerror(errno));
				uid_release(sb);
				return 0;
			}
			if (fd < 0) {
				got = false;
				break;
			}
			sb->uid_lock_paths[n] = xstrdup(path);
			sb->uid_locks[n++] = fd;
		}
		if (got)
			return (uint32_t)start;
		uid_release(sb);
	}
	snprintf(err, errlen, "every sandbox uid range above %u is in use by other arbiter processes "
	         "(locks in %.300s)", base, dir);
	return 0;
}

static void describe(struct sandbox *sb)
{
	char ns[64];
	snprintf(ns, sizeof ns, "pid,mnt%s%s,net,cgroup", (sb->clone_flags & CLONE_NEWIPC) ? ",ipc" : "",
	         (sb->clone_flags & CLONE_NEWUTS) ? ",uts" : "");
	const char *cg = sb->cg == CG_V2 ? "cgroup v2 memory+pids" :
	                 sb->cg == CG_V1 ? (sb->cg_mem && sb->cg_pids ? (sb->cg_cpu ? "cgroup v1 memory+pids+cpuacct"
	                                                                         : "cgroup v1 memory+pids") :
	                                    sb->cg_mem ? "cgroup v1 memory, NPROC rlimit" :
	                                                 "cgroup v1 pids, DATA rlimit") :
	                 "rlimits only (no cgroups)";
	snprintf(sb->describe, sizeof sb->describe, "%d slots; %s namespaces; %s%s; %s", sb->nslots, ns,
	         cg, sb->cg == CG_V2 ? sb->cg_where : "", sb->seccomp.filter ? "seccomp filter" : "NO seccomp filter");
}

/* (Long: start-up in order, each degraded feature reported where it is found.) */
/* SB_RSS_SLACK_KB plus the most the kernel's per-CPU RSS counters can be behind (see
 * there): 3 counters x max(32, 2 x CPUs) pages x CPUs, at most SB_RSS_SLACK_MAX_KB (on a
 * machine with many CPUs the bound grows into gigabytes, while only the CPUs the process
 * ran on hold a part; a larger slack would hide commands' real peaks without cgroups). */
static long sb_rss_slack_kb(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF), page_kb = sysconf(_SC_PAGESIZE) / 1024;
	if (cpus < 1)
		cpus = 1;
	if (page_kb < 1)
		page_kb = 4;
	long batch = 2 * cpus > 32 ? 2 * cpus : 32;
	long kb = SB_RSS_SLACK_KB + 3 * batch * cpus * page_kb;
	return kb < SB_RSS_SLACK_MAX_KB ? kb : SB_RSS_SLACK_MAX_KB;
}

int sandbox_new(uv_loop_t *loop, const struct sandbox_opts *o, struct sandbox **out,
                char *err, size_t errlen)
{
	*out = NULL;
	if (geteuid() != 0) {
		snprintf(err, errlen, "the sandbox needs root (namespaces, mounts, cgroups, uid switch)");
		return -1;
	}
	struct sandbox *sb = xcalloc(1, sizeof *sb);
	sb->loop = loop;
	sb->netns_fd = -1;
	sb->no_cgroups = o && o->no_cgroups;
	sb->no_cgroup_mount = o && o->no_cgroup_mount;
	sb->allow_unsafe_memory = o && o->allow_unsafe_memory;
	sb->lock_dir = xstrdup(o && o->lock_dir && *o->lock_dir ? o->lock_dir : SB_DEFAULT_LOCK_DIR);
	sb->cg_lock[0] = sb->cg_lock[1] = sb->cg_lock[2] = sb->cg_lock[3] = -1;
	for (int i = 0; i <= SB_UID_MAX_BLOCKS; i++)
		sb->uid_locks[i] = -1;
	sb->rss_slack_kb = sb_rss_slack_kb();
	int n = o && o->slots > 0 ? o->slots : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	if (n > 256)
		n = 256;
	sb->nslots = n;
	cg_seq++;
	uint32_t uid_base = uid_allocate(sb, o && o->uid_base ? o->uid_base : SB_DEFAULT_UID_BASE,
	                                 !(o && o->uid_base), err, errlen);
	if (!uid_base)
		goto fail;
	sb->status_pages = mmap(NULL, (size_t)n * SB_STATUS_PAGE, PROT_READ | PROT_WRITE,
	                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sb->status_pages == MAP_FAILED) {
		snprintf(err, errlen, "mmap: %s", strerror(errno));
		sb->status_pages = NULL;
		goto fail;
	}
	sb->slots = xcalloc((size_t)n, sizeof *sb->slots);
	for (int i = 0; i < n; i++) {
		struct sb_slot *s = &sb->slots[i];
		s->index = i;
		s->uid = (uid_t)(uid_base + (uint32_t)i);
		s->st = (struct sb_status *)((char *)sb->status_pages + (size_t)i * SB_STATUS_PAGE);
		s->dir_fd = s->mem_procs = s->pids_procs = s->mem_limit = s->memsw_limit = -1;
		s->mem_maxusage = s->mem_failcnt = s->mem_oom = s->v2_max = s->v2_swap = -1;
		s->v2_events = s->v2_kill = s->pids_max = s->mem_usage = s->v2_current = -1;
		s->v2_peak = s->cpu_procs = s->cpu_usage = s->v2_cpustat = -1;
	}
	for (int i = 0; i < RLIM_NLIMITS; i++) {
		struct rlimit rl;
		sb->hard[i] = getrlimit(i, &rl) == 0 ? rl.rlim_max : RLIM_INFINITY;
	}
	sb->netns_fd = make_netns(err, errlen);
	if (sb->netns_fd < 0)
		goto fail;
	build_plan(sb);
	char serr[256];
	if (build_seccomp(sb, serr, sizeof serr) < 0)
		LOGW(NULL, NULL, "sandbox: no seccomp filter: %s", serr);
	cg_setup(sb);
	sb->data_floor = data_floor();

	sb->clone_flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
	int sec_errno = 0, stage = 0;
	int rc = probe(sb, err, errlen, &sec_errno, &stage);
	if (rc < 0 && stage == ST_CGROUP && sb->cg != CG_NONE) {
		LOGW(NULL, NULL, "sandbox: cannot place a process into the slot cgroups (%s); memory "
		     "and process limits fall back to rlimits", err);
		snprintf(sb->cg_why, sizeof sb->cg_why, "cannot place a process into the slot cgroups: %.900s", err);
		cg_teardown(sb);
		rc = probe(sb, err, errlen, &sec_errno, &stage);
	}
	if (rc < 0 && stage == ST_CLONE) {
		LOGW(NULL, NULL, "sandbox: %s with IPC+UTS namespaces; retrying without them", err);
		sb->clone_flags = CLONE_NEWPID | CLONE_NEWNS;
		rc = probe(sb, err, errlen, &sec_errno, &stage);
	}
	if (rc < 0)
		goto fail;
	/* RLIMIT_DATA bounds none of shared memory, memfds, socket buffers or in-flight fds:
	 * without a memory cgroup a run's memory limit cannot be enforced, and untrusted code
	 * does not run unless the operator said so in a setting that names the risk. */
	if (!sb->cg_mem) {
		if (!sb->allow_unsafe_memory) {
			snprintf(err, errlen, "no usable memory cgroup (%.700s): the memory limit of a run "
			         "cannot be enforced; give the worker a writable cgroup subtree with the "
			         "memory and pids controllers (systemd Delegate=yes, a container with its own "
			         "cgroup namespace and CAP_SYS_ADMIN, or a cgroup v1 memory hierarchy), or set "
			         "ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY=1 to run untrusted code without one",
			         sb->cg_why[0] ? sb->cg_why : "the slot cgroups are unusable");
			goto fail;
		}
		LOGW(NULL, NULL, "sandbox: ARBITER_SANDBOX_ALLOW_UNSAFE_MEMORY=1: running untrusted code "
		     "without a memory cgroup; shared memory, memfds, socket buffers and in-flight fds "
		     "are not bounded by the memory limit");
	}
	if (sec_errno && sb->seccomp.filter) {
		LOGW(NULL, NULL, "sandbox: the kernel refused the seccomp filter (%s); running "
		     "without it", strerror(sec_errno));
		free(sb->seccomp.filter);
		sb->seccomp.filter = NULL;
	}
	char *core = read_small_file("/proc/sys/kernel/core_pattern", NULL);
	if (core && core[0] == '|')
		LOGW(NULL, NULL, "sandbox: kernel.core_pattern pipes core dumps to a helper on the host, "
		     "which ignores RLIMIT_CORE: a crashing submission leaves a core dump there; set "
		     "kernel.core_pattern=core to keep them out");
	free(core);
	sb->spare_ns = xcalloc((size_t)sb->nslots, sizeof *sb->spare_ns);   /* filled after a run */
	/* The first runs find their cgroups ready (cg_setup made those of every slot but the
	 * probe's). A failure: made again by the run, which reports why. */
	for (int i = 0; i < sb->nslots && sb->cg != CG_NONE; i++)
		if (!sb->slots[i].cg_open && slot_cg_open(sb, &sb->slots[i]) < 0)
			slot_close_cg(sb, &sb->slots[i]);
	describe(sb);
	LOGI(NULL, NULL, "sandbox ready: %s", sb->describe);
	*out = sb;
	return 0;
fail:
	sandbox_free(sb);
	return -1;
}

void sandbox_free(struct sandbox *sb)
{
	if (!sb)
		return;
	if (sb->busy || sb->queued) {
		/* Misuse: runs still reference sb. Kill what runs and leak rather than free
		 * memory that their handles will still touch. */
		LOGE(NULL, NULL, "sandbox_free with %d runs in progress and %d queued: killing them, "
		     "not freeing", sb->busy, sb->queued);
		for (int i = 0; i < sb->nslots; i++)
			if (sb->slots[i].busy && sb->slots[i].run)
				run_hardkill(sb->slots[i].run);
		return;
	}
	cg_work_detach(sb);
	cg_teardown(sb);
	if (sb->netns_fd >= 0)
		close(sb->netns_fd);
	for (struct sb_nswork *nw = sb->nswork; nw; nw = nw->next)
		nw->sb = NULL;   /* their callbacks close what they made */
	for (int i = 0; i < sb->nspare; i++)
		close(sb->spare_ns[i]);
	free(sb->spare_ns);
	for (int i = 0; i < sb->nsteps; i++) {
		free(sb->steps[i].target);
		free(sb->steps[i].source);
		free(sb->steps[i].data);
	}
	free(sb->stage_dev);
	free(sb->stage_proc);
	free(sb->stage_tmp);
	free(sb->stage_work);
	free(sb->seccomp.filter);
	uid_release(sb);
	free(sb->lock_dir);
	if (sb->status_pages)
		munmap(sb->status_pages, (size_t)sb->nslots * SB_STATUS_PAGE);
	free(sb->slots);
	free(sb);
}
