/* One allocation far over the memory limit, then used: memory_limit_exceeded (it once
 * failed at the address-space backstop instead and ran as a runtime error). */
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
	size_t n = (size_t)3 << 30;
	volatile char *p = malloc(n);
	if (!p) {
		fputs("malloc failed\n", stderr);
		return 1;
	}
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	puts("touched");
	return 0;
}
