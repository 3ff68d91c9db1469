/*
 * Shared by the sandbox and evaluator tests: what a sandbox may leave behind.
 * sandbox_strays counts processes — children of this test process, or any
 * process running as one of the 64 sandbox uids from uid_base — and reports
 * each with diag(); sandbox_cgroup_leftovers counts this process's sandbox
 * cgroup directories.
 */
#ifndef ARBITER_TEST_SANDBOX_STRAYS_H
#define ARBITER_TEST_SANDBOX_STRAYS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

__attribute__((unused))
static int sandbox_strays(unsigned long uid_base)
{
	int n = 0;
	char path[64], buf[256] = "";
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
	FILE *f = fopen(path, "r");
	if (f) {
		if (fgets(buf, sizeof buf, f) && buf[0] && buf[0] != '\n') {
			diag("children left: %s", buf);
			n++;
		}
		fclose(f);
	}
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int pid = atoi(e->d_name);
		if (pid <= 0)
			continue;
		char sp[64], line[256];
		snprintf(sp, sizeof sp, "/proc/%d/status", pid);
		FILE *s = fopen(sp, "r");
		if (!s)
			continue;
		while (fgets(line, sizeof line, s))
			if (!strncmp(line, "Uid:", 4)) {
				unsigned long uid = strtoul(line + 4, NULL, 10);
				if (uid >= uid_base && uid < uid_base + 64) {
					diag("stray sandbox process %d (uid %lu)", pid, uid);
					n++;
				}
			}
		fclose(s);
	}
	if (d)
		closedir(d);
	return n;
}

/* Sandbox cgroup directories of this process still present (-1 if unknown). */
__attribute__((unused))
static int sandbox_cgroup_leftovers(void)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "find /sys/fs/cgroup -maxdepth 6 -type d -name "
	         "'arbiter-sandbox-%d-*' 2>/dev/null | wc -l", (int)getpid());
	FILE *p = popen(cmd, "r");
	int n = -1;
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

#endif
