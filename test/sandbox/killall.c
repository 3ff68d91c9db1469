/* Kills every process it can see, then tries to reach beyond its namespace. */
#define _GNU_SOURCE   /* POSIX calls under -std=c11 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void)
{
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int pid = atoi(e->d_name);
		if (pid > 0 && pid != getpid() && kill(pid, SIGKILL) == 0)
			n++;
	}
	for (int pid = 1; pid < 70000; pid++)
		if (pid != getpid() && kill(pid, SIGKILL) == 0)
			n++;
	printf("killed %d\n", n);
	fflush(stdout);
	kill(-1, SIGKILL);
	return 0;
}
