/* A compiled scoring script: reads the document and prints fixed scores. */
#include <stdio.h>
int main(void)
{
	int c, n = 0;
	while ((c = getchar()) != EOF)
		n++;
	printf("{\"scores\": {\"correctness\": %d, \"style\": 500}}\n", n > 10 ? 900 : 0);
	return 0;
}
