/* A program the kernel will not execute: one byte appended to its .interp section (the
 * interpreter path is no longer NUL-terminated: ENOEXEC). The submission's own doing. */
#include <stdio.h>
__attribute__((section(".interp"), used)) static const char extra[1] = { 0x58 };
int main(void)
{
	puts("hi");
	return 0;
}
