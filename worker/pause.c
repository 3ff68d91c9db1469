/* pause: the worker's copy of the pause switches; see pause.h. */
#include "pause.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void pause_state_clear(struct pause_state *st)
{
	for (size_t i = 0; i < st->nslugs; i++)
		free(st->slugs[i]);
	free(st->slugs);
	st->slugs = NULL;
	st->nslugs = 0;
}

void pause_state_set_slugs(struct pause_state *st, const char *const *slugs, size_t n)
{
	pause_state_clear(st);
	if (!n)
		return;
	st->slugs = xcalloc(n, sizeof *st->slugs);
	for (size_t i = 0; i < n; i++)
		st->slugs[i] = xstrdup(slugs[i]);
	st->nslugs = n;
}

bool pause_state_holds(const struct pause_state *st, const char *slug)
{
	if (!slug)
		return false;
	for (size_t i = 0; i < st->nslugs; i++)
		if (!strcmp(st->slugs[i], slug))
			return true;
	return false;
}
