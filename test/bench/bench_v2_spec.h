/* The 10-dimension spec of bench-score_v2 (worker/README.md "Measured performance"), shared with
 * test-score's prepared-vs-fresh check so both exercise the same spec. */
#ifndef ARBITER_BENCH_V2_SPEC_H
#define ARBITER_BENCH_V2_SPEC_H

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

#endif
