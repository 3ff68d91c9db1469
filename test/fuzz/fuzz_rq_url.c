/*
 * libFuzzer harness for rq_url_parse (worker/rq.c): any byte string must be
 * parsed or refused without reading or writing out of bounds, and an accepted
 * URL must yield a consistent struct rq_url.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	struct rq_url u;
	char err[64];
	if (rq_url_parse(s, &u, err, sizeof err) == 0) {
		if (u.port < 1 || u.port > 65535 || u.db < 0)
			abort();
		if (strlen(u.host) >= sizeof u.host || strlen(u.path) >= sizeof u.path ||
		    strlen(u.user) >= sizeof u.user || strlen(u.password) >= sizeof u.password)
			abort();
		if (!u.path[0] == !u.host[0])          /* exactly one of TCP host / unix path */
			abort();
		if (u.path[0] && u.path[0] != '/')
			abort();
		if (u.user[0] && !u.password[0])
			abort();
	} else if (!memchr(err, '\0', sizeof err) || !err[0]) {
		abort();
	}
	free(s);
	return 0;
}
