/*
 * Line-oriented driver over common/rx for test/rx_differential.py: each input
 * line is "I PATTERN TEXT" (I is 0 or 1 for case-insensitive; PATTERN and
 * TEXT are hex-encoded bytes, "-" for empty), and each output line is the
 * search's result (1 match, 0 no match, -1 budget spent, with a budget of
 * 10 million steps) or "E <message>" when the pattern does not compile.
 */
#include "rx.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decodes hex s (or "-" for empty) into a new buffer of *n bytes; NULL on bad input. */
static char *unhex(const char *s, size_t *n)
{
	size_t len = strlen(s);
	if (!strcmp(s, "-"))
		len = 0;
	if (len % 2)
		return NULL;
	char *out = xmalloc(len / 2 + 1);
	for (size_t i = 0; i < len / 2; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1) {
			free(out);
			return NULL;
		}
		out[i] = (char)v;
	}
	*n = len / 2;
	return out;
}

int main(void)
{
	static char line[1 << 16];
	while (fgets(line, sizeof line, stdin)) {
		char *icase = strtok(line, " \n"), *hp = strtok(NULL, " \n"), *ht = strtok(NULL, " \n");
		size_t pn, tn;
		char *pat = hp ? unhex(hp, &pn) : NULL, *text = ht ? unhex(ht, &tn) : NULL;
		if (!icase || !pat || !text) {
			fprintf(stderr, "rx-driver: bad input line\n");
			return 2;
		}
		struct rx *r;
		char err[200];
		if (rx_compile(pat, pn, icase[0] == '1', &r, err, sizeof err) < 0) {
			printf("E %s\n", err);
		} else {
			uint64_t budget = 10000000;
			printf("%d\n", rx_search(r, text, tn, &budget));
			rx_free(r);
		}
		free(pat);
		free(text);
	}
	return 0;
}
