/* Writes to stdout without end: output_limit_exceeded. */
#define _GNU_SOURCE   /* POSIX calls under -std=c11 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void)
{
	char buf[65536];
	memset(buf, 'y', sizeof buf);
	for (;;)
		if (write(1, buf, sizeof buf) < 0)
			return 1;
}
