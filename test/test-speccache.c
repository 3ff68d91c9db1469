/* Unit tests for worker/speccache: one parse per challenge and texts, a changed
 * challenge parsed again, invalid specs and ground truths kept with their message,
 * the ground truth's side prepared with the entry, reference counting across clear. */
#include <string.h>

#include "speccache.h"
#include "util.h"
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
	ok(a->prep != NULL, "the ground truth's side prepared with it");
	struct spec_entry *b = get(&c, C1, SPEC, GT);
	ok(a == b, "same challenge and texts: the same entry");
	is_int(a->refs, 3, "one more reference");
	is_int(c.n, 1, "one entry in the table");

	struct spec_entry *d = get(&c, C1, SPEC, "{\"b\": 2}");
	ok(d != a, "changed ground truth: a new entry");
	ok(!a->in_table && a->refs == 2, "the old entry left the table, its holders keep it");
	is_int(c.n, 1, "still one entry for the challenge");

	struct spec_entry *bad = get(&c, C2, "{\"evaluator\":", GT);
	ok(!bad->spec && bad->err && *bad->err && !bad->prep, "invalid spec: entry with a message");
	struct spec_entry *badgt = get(&c, C2, SPEC, "{\"b\":");
	ok(bad != badgt && !badgt->spec && badgt->err &&
	   !strncmp(badgt->err, "ground_truth: line", 18), "invalid ground truth: says where");
	struct spec_entry *big = get(&c, C2, SPEC, "{\"b\": 18446744073709551616}");
	ok(big->spec && big->gt, "an integer beyond 64 bits is read as a double");

	speccache_clear(&c);
	is_int(c.n, 0, "clear empties the table");
	is_int(d->refs, 1, "an entry still held survives clear");
	ok(d->spec != NULL, "and stays usable");
	{   /* with its preparation: {"a": 2} against {"b": 2} */
		json_t *ans = json_pack("{s:i}", "a", 2);
		struct score_result r;
		char err[128];
		ok(score_eval_prepared(d->prep, ans, NULL, NULL, NULL, NULL, &r, err, sizeof err) == 0 &&
		   r.score == 1000, "an entry held after clear scores with its preparation");
		score_result_clear(&r);
		json_decref(ans);
	}
	speccache_unref(a);
	speccache_unref(b);
	speccache_unref(d);
	speccache_unref(bad);
	speccache_unref(badgt);
	speccache_unref(big);
	speccache_unref(NULL);
	ok(1, "every reference dropped (only ASan's leak report can fail this)");

	/* The byte bound (#16): least recently used entries leave the table. */
	struct speccache lc;
	memset(&lc, 0, sizeof lc);
	lc.max_bytes = 3u << 20;                    /* 3 MiB */
	struct strbuf big_gt = { 0 };               /* ~25,000 numbers: about 1.2 MB parsed */
	strbuf_add(&big_gt, "{\"b\": [", 7);
	for (int i = 0; i < 25000; i++)
		strbuf_addf(&big_gt, "%s%d", i ? "," : "", i);
	strbuf_add(&big_gt, "]}", 2);
	static const char *const ids[] = { C1, C2, "00000000-0000-0000-0000-0000000000c3",
	                                   "00000000-0000-0000-0000-0000000000c4" };
	struct spec_entry *e[4];                    /* our references, held to the end */
	for (int i = 0; i < 3; i++)
		e[i] = get(&lc, ids[i], SPEC, big_gt.buf);
	ok(e[0]->bytes > (1u << 20) && e[0]->bytes < (2u << 20),
	   "a 25,000-number ground truth is estimated at %zu bytes", e[0]->bytes);
	ok(lc.bytes <= lc.max_bytes, "the table stays within max_bytes (%zu <= %zu)", lc.bytes,
	   lc.max_bytes);
	is_int(lc.n, 2, "two of three fit");
	ok(!e[0]->in_table && e[1]->in_table && e[2]->in_table, "the oldest (c1) was evicted");
	struct spec_entry *again = get(&lc, ids[1], SPEC, big_gt.buf);   /* use c2: c3 is now oldest */
	ok(again == e[1], "c2 is still cached (same entry)");
	speccache_unref(again);
	e[3] = get(&lc, ids[3], SPEC, big_gt.buf);
	ok(e[1]->in_table && !e[2]->in_table && e[3]->in_table,
	   "the next insert evicts the least recently used (c3), not the recently used c2");
	ok(lc.bytes <= lc.max_bytes && lc.n == 2, "still within bounds (%zu bytes, %d entries)",
	   lc.bytes, lc.n);
	ok(e[2]->spec != NULL, "an evicted entry stays usable by its holders");
	for (int i = 0; i < 4; i++)
		speccache_unref(e[i]);
	lc.max_bytes = 1u << 20;                    /* smaller than one entry */
	struct spec_entry *huge = get(&lc, ids[0], SPEC, big_gt.buf);
	ok(huge->spec && !huge->in_table && huge->refs == 1,
	   "an entry larger than the whole cache is used but not kept");
	speccache_unref(huge);
	speccache_clear(&lc);
	is_int(lc.n, 0, "cleared");
	ok(lc.bytes == 0, "no bytes counted");
	strbuf_free(&big_gt);
	return tap_done();
}
