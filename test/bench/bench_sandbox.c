/*
 * Benchmark of the sandbox's per-run overhead: N cases (default 50) of a
 * trivial compiled C program, run one after another through sandbox_run
 * (fresh namespaces, mounts, cgroup slot, seccomp, the binary written into
 * /work), against a bare fork+exec+wait of the same binary on the host.
 * Prints the mean and median of both and the difference. Needs root and gcc.
 *   bench-sandbox [cases]
 * Exit status 0 when the median overhead is within the 2 ms target, 1 if not,
 * 77 (skip) when the sandbox cannot run here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "log.h"
#include "sandbox.h"
#include "util.h"

static int ncases = 50;
static int done_cases;  /* index of the running case (negative: warm-up) */
static double *times;          /* ms per sandboxed case */
static uint64_t case_start;
static struct sandbox *sb;
static struct sandbox_req req;
static struct sandbox_file file;
static int failures;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double mean(const double *v, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	return s / n;
}

static void on_done(const struct sandbox_result *r, void *data)
{
	(void)data;
	double ms = (double)(uv_hrtime() - case_start) / 1e6;
	if (r->internal_error || r->end != SANDBOX_EXITED || r->exit_code != 0 ||
	    strcmp(r->out, "ok\n")) {
		fprintf(stderr, "case %d failed: end %d exit %d %s\n", done_cases, (int)r->end,
		        r->exit_code, r->error);
		failures++;
	}
	if (done_cases >= 0)
		times[done_cases] = ms;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		ncases = atoi(argv[1]);
	if (ncases < 2)
		ncases = 2;
	log_setup(LOG_WARN, "bench");
	if (geteuid() != 0) {
		printf("skip: the sandbox needs root\n");
		return 77;
	}
	char dir[] = "/tmp/bench-sandbox-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char src[256], bin[256], cmd[1024];
	snprintf(src, sizeof src, "%s/main.c", dir);
	snprintf(bin, sizeof bin, "%s/main", dir);
	FILE *f = fopen(src, "w");
	fputs("#include <stdio.h>\nint main(void) { puts(\"ok\"); return 0; }\n", f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "gcc -std=c11 -O2 -o %s %s", bin, src);
	if (system(cmd) != 0) {
		printf("skip: gcc failed\n");
		return 77;
	}
	struct stat st;
	stat(bin, &st);
	FILE *bf = fopen(bin, "rb");
	char *content = xmalloc((size_t)st.st_size);
	if (fread(content, 1, (size_t)st.st_size, bf) != (size_t)st.st_size)
		return 1;
	fclose(bf);

	uv_loop_t *loop = uv_default_loop();
	char err[512];
	struct sandbox_opts o = { .slots = 1 };
	if (sandbox_new(loop, &o, &sb, err, sizeof err) < 0) {
		printf("skip: %s\n", err);
		return 77;
	}
	static const char *const av[] = { "./main", NULL };
	file = (struct sandbox_file){ "main", content, (size_t)st.st_size, true };
	req.argv = av;
	req.files = &file;
	req.nfiles = 1;
	req.lim.cpu_ms = 1000;
	req.lim.wall_ms = 5000;
	req.lim.memory_bytes = 64u << 20;

	/* Alternate one bare run and one sandboxed run, so that both see the same load on
	 * the machine; the first 3 of each are warm-up. */
	double *bare = xcalloc((size_t)ncases, sizeof *bare);
	times = xcalloc((size_t)ncases, sizeof *times);
	for (int i = -3; i < ncases; i++) {
		uint64_t t0 = uv_hrtime();
		pid_t p = fork();
		if (p == 0) {
			if (!freopen("/dev/null", "w", stdout))
				_exit(126);
			char *bav[] = { bin, NULL };
			execv(bin, bav);
			_exit(127);
		}
		int ws;
		waitpid(p, &ws, 0);
		if (i >= 0)
			bare[i] = (double)(uv_hrtime() - t0) / 1e6;
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
			failures++;

		done_cases = i;
		case_start = uv_hrtime();
		if (sandbox_run(sb, &req, on_done, NULL) < 0)
			failures++;
		uv_run(loop, UV_RUN_DEFAULT);
	}

	double bmean = mean(bare, ncases), smean = mean(times, ncases);
	double bmed = median(bare, ncases), smed = median(times, ncases);
	printf("sandbox: %s\n", sandbox_describe(sb));
	printf("binary: %ld bytes, %d cases each\n", (long)st.st_size, ncases);
	printf("bare fork+exec+wait: mean %.3f ms, median %.3f ms\n", bmean, bmed);
	printf("sandboxed run:       mean %.3f ms, median %.3f ms\n", smean, smed);
	printf("overhead per case:   mean %.3f ms, median %.3f ms (target <= 2 ms)\n",
	       smean - bmean, smed - bmed);
	sandbox_free(sb);
	uv_run(loop, UV_RUN_DEFAULT);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", dir);
	free(content);
	free(bare);
	free(times);
	if (failures) {
		printf("%d runs failed\n", failures);
		return 1;
	}
	return smed - bmed <= 2.0 ? 0 : 1;
}
