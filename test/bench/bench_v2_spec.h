/* The 10-dimension spec of bench-score_v2 (worker/README.md "Measured performance"), shared with
 * test-score's prepared-vs-fresh check so both exercise the same spec; and the work budget's
 * worst nestings (bench_worst_spec), which bench-score_v2 times and test-score bounds. */
#ifndef ARBITER_BENCH_V2_SPEC_H
#define ARBITER_BENCH_V2_SPEC_H

#include "util.h"

static const char *const bench_v2_spec =
	"{\"evaluator\":\"deterministic\",\"total\":\"round_each\",\"dimensions\":["
	"{\"key\":\"correctness\",\"weight\":0.2,\"primitive\":\"match_objects\",\"field\":\"findings\","
	" \"ground_truth_field\":\"findings\",\"match_on\":\"id\",\"method\":\"f1\",\"fields\":["
	"  {\"primitive\":\"exact_match\",\"field\":\"severity\",\"normalize\":[\"casefold\",\"trim\"],\"weight\":0.5},"
	"  {\"primitive\":\"numeric_tolerance\",\"field\":\"cvss\",\"tolerance\":0.5,\"weight\":0.5}]},"
	"{\"key\":\"answers\",\"weight\":0.15,\"primitive\":\"keyed_map\",\"field\":\"answers\","
	" \"ground_truth_field\":\"answers\",\"item\":{\"primitive\":\"exact_match\",\"normalize\":[\"trim\",\"casefold\",\"numeric\"]}},"
	"{\"key\":\"methodology\",\"weight\":0.1,\"primitive\":\"term_coverage\",\"field\":\"report\","
	" \"terms\":[\"root cause\",[\"outage\",\"downtime\"],\"rollback\",\"timeline\",{\"regex\":\"\\\\bCVE-\\\\d{4}-\\\\d{4,}\\\\b\"},"
	"  {\"regex\":\"\\\\d+(\\\\.\\\\d+)? ?(ms|s|min)\\\\b\"}],\"normalize\":[\"casefold\"]},"
	"{\"key\":\"format\",\"weight\":0.05,\"primitive\":\"regex_match\",\"field\":\"ticket\","
	" \"pattern\":\"^[A-Z]{2,5}-\\\\d{1,6}$\"},"
	"{\"key\":\"length\",\"weight\":0.05,\"primitive\":\"text_length\",\"field\":\"report\",\"unit\":\"words\","
	" \"ramp\":[[0,0],[50,1],[400,1],[800,0.5]]},"
	"{\"key\":\"summary\",\"weight\":0.1,\"primitive\":\"token_overlap\",\"field\":\"summary\","
	" \"ground_truth_field\":\"summary\",\"method\":\"f1\"},"
	"{\"key\":\"coverage\",\"weight\":0.1,\"primitive\":\"set_overlap\",\"field\":\"hosts\","
	" \"ground_truth_field\":\"hosts\",\"method\":\"f1\",\"normalize\":[\"casefold\"]},"
	"{\"key\":\"distinct\",\"weight\":0.05,\"primitive\":\"count\",\"field\":\"hosts\",\"of\":\"unique_ratio\"},"
	"{\"key\":\"estimate\",\"weight\":0.1,\"primitive\":\"numeric_tolerance\",\"field\":\"impact\","
	" \"ground_truth_field\":\"impact\",\"tolerance\":5,\"decay\":\"linear\"},"
	"{\"key\":\"efficiency\",\"weight\":0.1,\"primitive\":\"expression\","
	" \"expr\":\"if(coalesce(calls, api_calls) <= 20, 1, clamp(1 - (coalesce(calls, api_calls) - 20) / 40, 0, 1)) * (1 - 0.1 * retries)\","
	" \"vars\":{\"calls\":\"@metadata.calls\",\"api_calls\":\"@metadata.api_calls\",\"retries\":{\"path\":\"@metadata.retries\",\"default\":0}}}]}";

/* Shapes of bench_worst_spec. */
#define BENCH_WORST_SHAPES 5
/* Appends to sp the spec of one leaf primitive (leaf: its JSON members, "%1$s" standing for
 * the field path path) in the worst nesting of shape: 0 sixteen top-level dimensions on
 * m.k0 .. m.k15, 1 a keyed_map over m, 2 match_objects over o with 32 such fields, 3 four
 * keyed_maps nested over n, each listing the keys of dup (a JSON list's inside), 4 thirty-two
 * composite dimensions of 64 parts each on m.k0 .. m.k15 (common/README.md "Composite
 * dimensions"). The answers and ground truths they read are built by the callers. */
static inline void bench_worst_spec(struct strbuf *sp, const char *leaf, const char *path,
                                    int shape, const char *dup)
{
	struct strbuf lf = { 0 };
	strbuf_addlit(sp, "{\"evaluator\":\"deterministic\",\"dimensions\":[");
	if (shape == 4) {
		for (int i = 0; i < 32; i++) {
			strbuf_addf(sp, "%s{\"key\":\"d%d\",\"weight\":0.03125,\"primitive\":\"expression\","
			            "\"expr\":\"max(p0", i ? "," : "", i);
			for (int j = 1; j < 64; j++)
				strbuf_addf(sp, ", p%d", j);
			strbuf_addlit(sp, ")\",\"vars\":{");
			for (int j = 0; j < 64; j++) {
				char f[32];
				snprintf(f, sizeof f, "m.k%d.%s", (i + j) % 16, path);
				lf.len = 0;
				strbuf_addf(&lf, leaf, f);
				strbuf_addf(sp, "%s\"p%d\":{%s}", j ? "," : "", j, lf.buf);
			}
			strbuf_addlit(sp, "}}");
		}
	} else if (shape == 0) {
		for (int i = 0; i < 16; i++) {
			char f[32];
			snprintf(f, sizeof f, "m.k%d.%s", i, path);
			lf.len = 0;
			strbuf_addf(&lf, leaf, f);
			strbuf_addf(sp, "%s{\"key\":\"d%d\",\"weight\":0.0625,%s}", i ? "," : "", i, lf.buf);
		}
	} else {
		strbuf_addf(&lf, leaf, path);
		if (shape == 1) {
			strbuf_addf(sp, "{\"key\":\"d\",\"weight\":1,\"primitive\":\"keyed_map\","
			            "\"field\":\"m\",\"ground_truth_field\":\"m\",\"item\":{%s}}", lf.buf);
		} else if (shape == 2) {
			strbuf_addlit(sp, "{\"key\":\"d\",\"weight\":1,\"primitive\":\"match_objects\","
			              "\"field\":\"o\",\"ground_truth_field\":\"o\",\"match_on\":\"id\","
			              "\"fields\":[");
			for (int i = 0; i < 32; i++)
				strbuf_addf(sp, "%s{%s}", i ? "," : "", lf.buf);
			strbuf_addlit(sp, "]}");
		} else {
			strbuf_addf(sp, "{\"key\":\"d\",\"weight\":1,\"primitive\":\"keyed_map\","
			            "\"field\":\"n\",\"ground_truth_field\":\"n\",\"keys\":[%s],\"item\":",
			            dup);
			for (int l = 0; l < 3; l++)
				strbuf_addf(sp, "{\"primitive\":\"keyed_map\",\"keys\":[%s],\"item\":", dup);
			strbuf_addf(sp, "{%s}}}}}", lf.buf);
		}
	}
	strbuf_addlit(sp, "]}");
	strbuf_free(&lf);
}

#endif
