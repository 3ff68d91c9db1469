/* Burns CPU forever: time_limit_exceeded. */
int main(void)
{
	volatile unsigned long x = 0;
	for (;;)
		x++;
}
