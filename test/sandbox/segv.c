/* Dereferences NULL: runtime_error with signal 11. */
#include <stdio.h>
int main(void)
{
	volatile int *p = NULL;
	printf("before\n");
	fflush(stdout);
	return *p;
}
