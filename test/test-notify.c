/* Unit tests for worker/notify: the completion notification payloads. */
#undef NDEBUG
#include <stdlib.h>
#include <string.h>

#include "notify.h"
#include "tap.h"

int main(void)
{
	json_t *ev = json_array();
	ok(notify_param(ev) == NULL, "no events: no statement parameter");
	notify_add(ev, "6b0c0000-0000-4000-8000-0000000000e1", "completed", 2, 823, "win", "ignored");
	notify_add(ev, "6b0c0000-0000-4000-8000-0000000000e2", "rejected", 0, 0, NULL, "match_expired");
	notify_add(ev, "6b0c0000-0000-4000-8000-0000000000e3", "failed", 0, 0, NULL, NULL);
	char *p = notify_param(ev);
	is_str(p, "[{\"submission_id\":\"6b0c0000-0000-4000-8000-0000000000e1\",\"status\":\"completed\","
	          "\"eval_seq\":2,\"score\":823,\"result\":\"win\"},"
	          "{\"submission_id\":\"6b0c0000-0000-4000-8000-0000000000e2\",\"status\":\"rejected\","
	          "\"reject_reason\":\"match_expired\"},"
	          "{\"submission_id\":\"6b0c0000-0000-4000-8000-0000000000e3\",\"status\":\"failed\"}]",
	       "payload array, only the fields of each status");
	ok(strstr(NOTIFY_SQL, "'arbiter_results'") != NULL, "the documented channel");
	free(p);
	json_decref(ev);
	return tap_done();
}
