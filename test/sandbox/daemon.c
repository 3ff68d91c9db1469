/* Double-forks a daemon that is meant to outlive the run, then exits at once.
 * The daemon would print "ALIVE" much later. */
#define _GNU_SOURCE   /* POSIX calls under -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void)
{
	pid_t p = fork();
	if (p == 0) {
		setsid();
		if (fork() == 0) {
			close(0);
			sleep(3);
			puts("ALIVE");
			fflush(stdout);
			for (;;)
				pause();
		}
		_exit(0);
	}
	puts("parent done");
	return 0;
}
