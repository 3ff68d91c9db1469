/* A few bytes of source, a 20 MiB program: more than the worker keeps for an evaluation. */
char big[20 << 20] = { 1 };
int main(void)
{
	return big[0] - 1;
}
