/* notify: completion notification payloads; see notify.h. */
#include "notify.h"

#include <string.h>

void notify_add(json_t *events, const char *submission_id, const char *status, int eval_seq,
                int score, const char *result, const char *reject_reason)
{
	json_t *o = json_object();
	json_object_set_new(o, "submission_id", json_string(submission_id));
	json_object_set_new(o, "status", json_string(status));
	if (!strcmp(status, "completed")) {
		json_object_set_new(o, "eval_seq", json_integer(eval_seq));
		json_object_set_new(o, "score", json_integer(score));
		if (result)
			json_object_set_new(o, "result", json_string(result));
	} else if (!strcmp(status, "rejected") && reject_reason) {
		json_object_set_new(o, "reject_reason", json_string(reject_reason));
	}
	json_array_append_new(events, o);
}

char *notify_param(const json_t *events)
{
	if (!events || !json_array_size(events))
		return NULL;
	return json_dumps(events, JSON_COMPACT);
}
