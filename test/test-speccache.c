/* Unit tests for worker/speccache: one parse per challenge and texts, a changed
 * challenge parsed again, invalid specs and ground truths kept with their message,
 * reference counting across clear. */
#include <string.h>

#include "speccache.h"
#include "tap.h"

#define C1 "00000000-0000-0000-0000-0000000000c1"
#define C2 "00000000-0000-0000-0000-0000000000c2"

static const char SPEC[] = "{\"evaluator\":\"deterministic\",\"dimensions\":["
	"{\"key\":\"ok\",\"weight\":1,\"primitive\":\"numeric_tolerance\",\"field\":\"a\","
	"\"ground_truth_field\":\"b\"}]}";
static const char GT[] = "{\"b\": 1}";

static struct spec_entry *get(struct speccache *c, const char *id, const char *spec,
                              const char *gt)
{
	return speccache_get(c, id, spec, strlen(spec), gt, strlen(gt));
}

int main(void)
{
	struct speccache c;
	memset(&c, 0, sizeof c);

	struct spec_entry *a = get(&c, C1, SPEC, GT);
	ok(a && a->spec && a->gt && !a->err, "valid spec parsed");
	is_int(a->refs, 2, "the table's reference and ours");
	is_int(a->gt_bytes, (int)strlen(GT), "ground-truth size recorded");
	ok(a->ev == SPEC_DETERMINISTIC, "evaluator recorded");
	struct spec_entry *b = get(&c, C1, SPEC, GT);
	ok(a == b, "same challenge and texts: the same entry");
	is_int(a->refs, 3, "one more reference");
	is_int(c.n, 1, "one entry in the table");

	struct spec_entry *d = get(&c, C1, SPEC, "{\"b\": 2}");
	ok(d != a, "changed ground truth: a new entry");
	ok(!a->in_table && a->refs == 2, "the old entry left the table, its holders keep it");
	is_int(c.n, 1, "still one entry for the challenge");

	struct spec_entry *bad = get(&c, C2, "{\"evaluator\":", GT);
	ok(!bad->spec && bad->err && *bad->err, "invalid spec: entry with a message");
	struct spec_entry *badgt = get(&c, C2, SPEC, "{\"b\":");
	ok(bad != badgt && !badgt->spec && badgt->err &&
	   !strncmp(badgt->err, "ground_truth: line", 18), "invalid ground truth: says where");
	struct spec_entry *big = get(&c, C2, SPEC, "{\"b\": 18446744073709551616}");
	ok(big->spec && big->gt, "an integer beyond 64 bits is read as a double");

	speccache_clear(&c);
	is_int(c.n, 0, "clear empties the table");
	is_int(d->refs, 1, "an entry still held survives clear");
	ok(d->spec != NULL, "and stays usable");
	speccache_unref(a);
	speccache_unref(b);
	speccache_unref(d);
	speccache_unref(bad);
	speccache_unref(badgt);
	speccache_unref(big);
	speccache_unref(NULL);
	ok(1, "every reference dropped (leaks show under ASan)");
	return tap_done();
}
