/* Allocates and touches memory until something stops it: memory_limit_exceeded. */
#include <stdlib.h>
#include <string.h>
int main(void)
{
	for (;;) {
		char *p = malloc(16 << 20);
		if (!p)
			return 3;
		memset(p, 1, 16 << 20);
	}
}
