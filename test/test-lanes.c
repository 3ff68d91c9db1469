/* Unit tests for worker/lanes: how much of the bulk lane is fed per run. The feeder
 * itself runs against a real Redis in test_worker_ops.py. */
#undef NDEBUG
#include "lanes.h"
#include "tap.h"

int main(void)
{
	is_int(lanes_batch(0, 64, 10), 64, "no live backlog: a full batch");
	is_int(lanes_batch(63, 64, 10), 64, "backlog below the concurrency: a full batch");
	is_int(lanes_batch(64, 64, 10), 7, "live jobs waiting: 10%% of 64, rounded up");
	is_int(lanes_batch(100000, 64, 0), 0, "share 0: nothing while live jobs wait");
	is_int(lanes_batch(100000, 1, 1), 1, "any share > 0 moves at least one");
	is_int(lanes_batch(100000, 64, 100), 64, "share 100: as much as live");
	return tap_done();
}
