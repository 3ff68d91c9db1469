/*
 * libFuzzer harness for common/ipkey (source IPs come from jobs and rows, the
 * allow list from configuration) and the rate-string parser of common/gcra.
 * Input: any bytes. The first line (up to '\n') is an address for
 * ipkey_make_n; the rest is an allow list. Checks, besides memory safety:
 * a key is stable (the key of a key is itself), a key fits IPKEY_MAX, a
 * parsed address matches an allow list made of itself, and ipkey_make_n
 * agrees with ipkey_parse.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gcra.h"
#include "ipkey.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	const char *nl = memchr(s, '\n', size);
	size_t alen = nl ? (size_t)(nl - s) : size;
	char key[IPKEY_MAX], again[IPKEY_MAX];
	struct ipkey_addr a;
	int rc = ipkey_make_n(s, alen, key, sizeof key);

	if (strlen(key) >= IPKEY_MAX - 1)
		abort();
	if ((rc == 0) != (ipkey_parse(s, alen, &a) == 0))
		abort();
	if (rc == 0) {
		/* The key is itself a spelling of the same key. */
		if (ipkey_make(key, again, sizeof again) != 0 || strcmp(key, again))
			abort();
		/* An allow list holding exactly the key's network matches a. */
		struct ipkey_allow l;
		char err[256];
		if (ipkey_allow_parse(key, &l, err, sizeof err) != 0)
			abort();
		/* IPv4: a host entry; IPv6: the /64 entry parsed back from the key. */
		if (!ipkey_allow_match(&l, &a))
			abort();
		ipkey_allow_free(&l);
	}

	/* The remainder (or the whole input) as an allow list and a rate string. */
	{
		const char *rest = nl ? nl + 1 : s;
		size_t rlen = nl ? size - alen - 1 : size;
		char *buf = malloc(rlen + 1);
		struct ipkey_allow l;
		struct gcra_rate r;
		char err[400];
		if (!buf)
			return 0;
		memcpy(buf, rest, rlen);
		buf[rlen] = '\0';
		if (ipkey_allow_parse(buf, &l, err, sizeof err) == 0) {
			if (rc == 0)
				(void)ipkey_allow_match(&l, &a);
			for (size_t i = 0; i < l.n; i++)
				if (l.v[i].bits < 0 || l.v[i].bits > 128)
					abort();
			ipkey_allow_free(&l);
		} else if (l.n != 0 || l.v != NULL) {
			abort();
		}
		if (gcra_rate_parse(buf, &r, err, sizeof err) == 0 && r.count) {
			struct gcra_params p;
			if (r.count < 1 || r.period_us < 1 || r.period_us > GCRA_MAX_PERIOD_US)
				abort();
			if (gcra_params_make(&r, 10, &p, err, sizeof err) == 0 &&
			    (p.emission_us < 1 || p.tolerance_us != 9 * p.emission_us))
				abort();
		}
		free(buf);
	}
	return 0;
}
