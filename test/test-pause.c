/* Unit tests for worker/pause: the worker's copy of the pause switches. The poller is
 * driven through a real Redis in test_pause.py. */
#undef NDEBUG
#include <string.h>

#include "pause.h"
#include "tap.h"

int main(void)
{
	struct pause_state st = { 0 };
	ok(!pause_state_holds(&st, "a"), "empty state holds nothing");
	ok(!pause_state_holds(&st, NULL), "an unknown slug is never held");
	const char *two[] = { "two-sum", "b" };
	pause_state_set_slugs(&st, two, 2);
	ok(pause_state_holds(&st, "two-sum") && pause_state_holds(&st, "b"), "both slugs held");
	ok(!pause_state_holds(&st, "two"), "a prefix of a slug is not held");
	ok(!pause_state_holds(&st, "two-sum "), "nor a longer string");
	const char *one[] = { "c" };
	pause_state_set_slugs(&st, one, 1);
	ok(!pause_state_holds(&st, "two-sum") && pause_state_holds(&st, "c"), "replaced, not added");
	pause_state_set_slugs(&st, NULL, 0);
	ok(st.nslugs == 0 && st.slugs == NULL, "set to none");
	pause_state_set_slugs(&st, one, 1);
	pause_state_clear(&st);
	ok(st.nslugs == 0 && st.slugs == NULL && !pause_state_holds(&st, "c"), "clear empties the state");
	pause_state_clear(&st);
	ok(st.nslugs == 0 && st.slugs == NULL, "clear twice is safe (a double free fails under ASan)");
	return tap_done();
}
