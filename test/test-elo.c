/* Unit tests for common/elo: common/README.md "Elo" worked example, bonus rounding, K switch, floor, and
 * 240 random cases checked against an independent reference. */
#include <limits.h>
#include <string.h>

#include "elo.h"
#include "tap.h"

struct elo_case {
	const char *name;
	int rating, matches, opponent;
	enum elo_outcome o;
	bool verified, memoryless;
	int attempt;
	int after, change, k, bonus;
};

static const struct elo_case cases[] = {
	{ "worked example: 1050 beats veteran", 1050, 0, 1200, ELO_WIN, false, false, 1, 1073, 23, 32, 10 },
	{ "worked example verified (bonus 1.1)", 1050, 0, 1200, ELO_WIN, true, false, 1, 1075, 25, 32, 11 },
	{ "verified, memoryless, attempt 2: 1.1", 1050, 0, 1200, ELO_WIN, true, true, 2, 1075, 25, 32, 11 },
	{ "benchmark-grade: 23 x 1.2 = 27.6 -> 28", 1050, 0, 1200, ELO_WIN, true, true, 1, 1078, 28, 32, 12 },
	{ "memoryless without verification: no bonus", 1050, 0, 1200, ELO_WIN, false, true, 1, 1073, 23, 32, 10 },
	{ "29 matches played: K 32", 1050, 29, 1200, ELO_WIN, false, false, 1, 1073, 23, 32, 10 },
	{ "30 matches played: K 16", 1050, 30, 1200, ELO_WIN, false, false, 1, 1061, 11, 16, 10 },
	{ "draw against stronger", 1050, 0, 1200, ELO_DRAW, false, false, 1, 1057, 7, 32, 10 },
	{ "loss against stronger", 1050, 0, 1200, ELO_LOSS, false, false, 1, 1041, -9, 32, 10 },
	{ "verified loss: no bonus on a negative change", 1050, 0, 1200, ELO_LOSS, true, true, 1, 1041, -9, 32, 10 },
	{ "equal draw: no change", 1000, 0, 1000, ELO_DRAW, true, true, 1, 1000, 0, 32, 10 },
	{ "draw against weaker, K 16", 1200, 40, 800, ELO_DRAW, false, false, 1, 1193, -7, 16, 10 },
	{ "floor 100 holds", 100, 0, 1400, ELO_LOSS, false, false, 1, 100, 0, 32, 10 },
	{ "floor 100 cuts a loss", 105, 0, 105, ELO_LOSS, false, false, 1, 100, -5, 32, 10 },
	{ "tiny win against much weaker", 1500, 5, 800, ELO_WIN, false, false, 1, 1501, 1, 32, 10 },
	{ "1 x 1.1 = 1.1 -> 1", 1500, 5, 800, ELO_WIN, true, false, 1, 1501, 1, 32, 11 },
	{ "15 x 1.1 = 16.5 -> 17 (half away from zero, exact)", 1000, 0, 980, ELO_WIN, true, false, 1, 1017, 17, 32, 11 },
	{ "25 x 1.1 = 27.5 -> 28", 1000, 0, 1220, ELO_WIN, true, false, 1, 1028, 28, 32, 11 },
	{ "equal win verified 16 x 1.1 = 17.6 -> 18", 1000, 0, 1000, ELO_WIN, true, false, 1, 1018, 18, 32, 11 },
	{ "equal win benchmark 16 x 1.2 = 19.2 -> 19", 1000, 0, 1000, ELO_WIN, true, true, 1, 1019, 19, 32, 12 },
	/* Random tuples (rating, match_count, opponent, outcome, verified, memoryless, attempt)
	 * computed by the independent Python reference of common/README.md "Elo" in
	 * test/integration/test_score_differential.py; regenerate with
	 * `python3 test/integration/test_score_differential.py --elo-table`. */
	{ "ref", 100, 30, 800, ELO_WIN, true, true, 1, 119, 19, 16, 12 },
	{ "ref", 2327, 0, 2328, ELO_DRAW, true, false, 3, 2327, 0, 32, 10 },
	{ "ref", 394, 30, 1200, ELO_WIN, false, true, 1, 410, 16, 16, 10 },
	{ "ref", 1050, 31, 1400, ELO_WIN, false, false, 3, 1064, 14, 16, 10 },
	{ "ref", 1200, 1, 1000, ELO_DRAW, true, false, 1, 1192, -8, 32, 10 },
	{ "ref", 1000, 22, 999, ELO_LOSS, true, true, 1, 984, -16, 32, 10 },
	{ "ref", 1050, 30, 1051, ELO_DRAW, true, false, 3, 1050, 0, 16, 10 },
	{ "ref", 101, 1, 101, ELO_LOSS, true, false, 3, 100, -1, 32, 10 },
	{ "ref", 1000, 30, 1400, ELO_DRAW, true, true, 1, 1008, 8, 16, 12 },
	{ "ref", 101, 100, 1397, ELO_WIN, false, false, 2, 117, 16, 16, 10 },
	{ "ref", 101, 31, 800, ELO_WIN, false, true, 2, 117, 16, 16, 10 },
	{ "ref", 100, 100, 99, ELO_DRAW, false, true, 1, 100, 0, 16, 10 },
	{ "ref", 1200, 1, 1201, ELO_DRAW, true, false, 1, 1200, 0, 32, 10 },
	{ "ref", 1050, 29, 1049, ELO_DRAW, false, true, 1, 1050, 0, 32, 10 },
	{ "ref", 101, 29, 101, ELO_WIN, false, false, 1, 117, 16, 32, 10 },
	{ "ref", 1472, 17, 2089, ELO_LOSS, false, false, 2, 1471, -1, 32, 10 },
	{ "ref", 1400, 35, 1400, ELO_LOSS, true, true, 2, 1392, -8, 16, 10 },
	{ "ref", 1200, 22, 1199, ELO_DRAW, false, false, 1, 1200, 0, 32, 10 },
	{ "ref", 1000, 0, 1200, ELO_LOSS, false, false, 3, 992, -8, 32, 10 },
	{ "ref", 100, 1, 99, ELO_LOSS, false, true, 1, 100, 0, 32, 10 },
	{ "ref", 105, 1, 105, ELO_WIN, true, false, 3, 123, 18, 32, 11 },
	{ "ref", 1289, 0, 1400, ELO_WIN, false, true, 2, 1310, 21, 32, 10 },
	{ "ref", 101, 44, 101, ELO_WIN, true, true, 2, 110, 9, 16, 11 },
	{ "ref", 2199, 29, 2200, ELO_DRAW, false, false, 2, 2199, 0, 32, 10 },
	{ "ref", 682, 31, 1400, ELO_WIN, false, true, 1, 698, 16, 16, 10 },
	{ "ref", 542, 31, 1200, ELO_DRAW, false, false, 3, 550, 8, 16, 10 },
	{ "ref", 1400, 30, 1401, ELO_WIN, true, true, 2, 1409, 9, 16, 11 },
	{ "ref", 100, 29, 2114, ELO_WIN, true, true, 3, 135, 35, 32, 11 },
	{ "ref", 105, 30, 104, ELO_LOSS, true, true, 3, 100, -5, 16, 10 },
	{ "ref", 1000, 1, 1270, ELO_DRAW, false, true, 1, 1010, 10, 32, 10 },
	{ "ref", 1000, 100, 1476, ELO_LOSS, true, true, 2, 999, -1, 16, 10 },
	{ "ref", 100, 31, 1000, ELO_LOSS, true, true, 3, 100, 0, 16, 10 },
	{ "ref", 1200, 30, 904, ELO_DRAW, false, true, 1, 1194, -6, 16, 10 },
	{ "ref", 1193, 30, 1200, ELO_WIN, true, false, 3, 1202, 9, 16, 11 },
	{ "ref", 1200, 31, 1000, ELO_LOSS, true, false, 1, 1188, -12, 16, 10 },
	{ "ref", 101, 100, 800, ELO_WIN, false, true, 1, 117, 16, 16, 10 },
	{ "ref", 105, 31, 106, ELO_WIN, true, true, 1, 115, 10, 16, 12 },
	{ "ref", 100, 31, 101, ELO_LOSS, true, true, 2, 100, 0, 16, 10 },
	{ "ref", 1050, 100, 800, ELO_WIN, false, true, 2, 1053, 3, 16, 10 },
	{ "ref", 1000, 31, 1065, ELO_DRAW, true, true, 1, 1001, 1, 16, 12 },
	{ "ref", 105, 100, 105, ELO_WIN, true, true, 1, 115, 10, 16, 12 },
	{ "ref", 110, 30, 110, ELO_WIN, false, true, 3, 118, 8, 16, 10 },
	{ "ref", 1339, 1, 1000, ELO_LOSS, true, true, 3, 1311, -28, 32, 10 },
	{ "ref", 1050, 31, 1051, ELO_DRAW, true, false, 2, 1050, 0, 16, 10 },
	{ "ref", 100, 31, 1200, ELO_DRAW, true, true, 1, 110, 10, 16, 12 },
	{ "ref", 1400, 30, 800, ELO_DRAW, true, false, 3, 1392, -8, 16, 10 },
	{ "ref", 101, 1, 1200, ELO_WIN, true, true, 3, 136, 35, 32, 11 },
	{ "ref", 101, 17, 761, ELO_LOSS, true, true, 1, 100, -1, 32, 10 },
	{ "ref", 100, 0, 99, ELO_WIN, true, false, 2, 118, 18, 32, 11 },
	{ "ref", 100, 100, 1400, ELO_LOSS, true, true, 2, 100, 0, 16, 10 },
	{ "ref", 1050, 0, 1200, ELO_WIN, true, true, 1, 1078, 28, 32, 12 },
	{ "ref", 100, 0, 101, ELO_WIN, true, false, 2, 118, 18, 32, 11 },
	{ "ref", 1400, 30, 1400, ELO_LOSS, true, true, 1, 1392, -8, 16, 10 },
	{ "ref", 1400, 100, 800, ELO_WIN, true, false, 3, 1400, 0, 16, 10 },
	{ "ref", 101, 29, 1000, ELO_LOSS, false, true, 1, 101, 0, 32, 10 },
	{ "ref", 978, 30, 979, ELO_LOSS, false, false, 2, 970, -8, 16, 10 },
	{ "ref", 101, 29, 1000, ELO_DRAW, false, true, 1, 117, 16, 32, 10 },
	{ "ref", 110, 0, 1400, ELO_DRAW, true, false, 1, 128, 18, 32, 11 },
	{ "ref", 101, 30, 102, ELO_LOSS, true, true, 1, 100, -1, 16, 10 },
	{ "ref", 105, 100, 800, ELO_LOSS, true, true, 1, 105, 0, 16, 10 },
	{ "ref", 1050, 29, 1200, ELO_DRAW, true, true, 1, 1058, 8, 32, 12 },
	{ "ref", 100, 0, 1200, ELO_DRAW, true, true, 1, 119, 19, 32, 12 },
	{ "ref", 105, 1, 105, ELO_WIN, true, false, 1, 123, 18, 32, 11 },
	{ "ref", 1198, 100, 1197, ELO_DRAW, false, true, 2, 1198, 0, 16, 10 },
	{ "ref", 1035, 1, 800, ELO_LOSS, false, false, 3, 1010, -25, 32, 10 },
	{ "ref", 105, 52, 800, ELO_WIN, false, true, 1, 121, 16, 16, 10 },
	{ "ref", 1400, 1, 1400, ELO_DRAW, true, true, 1, 1400, 0, 32, 10 },
	{ "ref", 1154, 53, 1153, ELO_DRAW, true, true, 1, 1154, 0, 16, 10 },
	{ "ref", 101, 30, 504, ELO_WIN, false, false, 3, 116, 15, 16, 10 },
	{ "ref", 110, 100, 1000, ELO_LOSS, false, false, 3, 110, 0, 16, 10 },
	{ "ref", 1399, 31, 1398, ELO_LOSS, false, true, 1, 1391, -8, 16, 10 },
	{ "ref", 1050, 0, 1400, ELO_DRAW, true, true, 2, 1063, 13, 32, 11 },
	{ "ref", 100, 100, 1000, ELO_WIN, false, false, 2, 116, 16, 16, 10 },
	{ "ref", 110, 31, 1000, ELO_WIN, true, false, 3, 128, 18, 16, 11 },
	{ "ref", 1200, 11, 1400, ELO_LOSS, false, true, 1, 1192, -8, 32, 10 },
	{ "ref", 101, 29, 1351, ELO_LOSS, true, false, 1, 101, 0, 32, 10 },
	{ "ref", 1130, 31, 1131, ELO_DRAW, true, true, 1, 1130, 0, 16, 10 },
	{ "ref", 101, 29, 102, ELO_WIN, true, true, 1, 120, 19, 32, 12 },
	{ "ref", 879, 100, 1000, ELO_WIN, false, true, 1, 890, 11, 16, 10 },
	{ "ref", 1379, 1, 1378, ELO_WIN, true, false, 1, 1397, 18, 32, 11 },
	{ "ref", 1050, 39, 1049, ELO_LOSS, true, false, 1, 1042, -8, 16, 10 },
	{ "ref", 1050, 6, 1400, ELO_WIN, true, true, 1, 1084, 34, 32, 12 },
	{ "ref", 1400, 0, 1400, ELO_WIN, false, true, 2, 1416, 16, 32, 10 },
	{ "ref", 100, 7, 100, ELO_LOSS, true, true, 1, 100, 0, 32, 10 },
	{ "ref", 2142, 29, 2142, ELO_WIN, true, true, 3, 2160, 18, 32, 11 },
	{ "ref", 105, 0, 104, ELO_DRAW, false, false, 3, 105, 0, 32, 10 },
	{ "ref", 1050, 8, 800, ELO_WIN, true, true, 2, 1057, 7, 32, 11 },
	{ "ref", 2403, 0, 1400, ELO_DRAW, true, false, 2, 2387, -16, 32, 10 },
	{ "ref", 100, 1, 101, ELO_LOSS, false, false, 1, 100, 0, 32, 10 },
	{ "ref", 1200, 51, 1201, ELO_WIN, false, false, 2, 1208, 8, 16, 10 },
	{ "ref", 1200, 0, 1400, ELO_DRAW, true, true, 3, 1209, 9, 32, 11 },
	{ "ref", 902, 0, 901, ELO_WIN, true, true, 3, 920, 18, 32, 11 },
	{ "ref", 1400, 31, 1200, ELO_DRAW, true, false, 1, 1396, -4, 16, 10 },
	{ "ref", 101, 1, 101, ELO_DRAW, false, true, 1, 101, 0, 32, 10 },
	{ "ref", 1008, 29, 1008, ELO_DRAW, true, true, 1, 1008, 0, 32, 10 },
	{ "ref", 100, 0, 1200, ELO_WIN, true, false, 1, 135, 35, 32, 11 },
	{ "ref", 110, 100, 1400, ELO_DRAW, true, false, 1, 119, 9, 16, 11 },
	{ "ref", 1678, 30, 1000, ELO_LOSS, true, false, 2, 1662, -16, 16, 10 },
	{ "ref", 1200, 19, 1000, ELO_LOSS, true, false, 3, 1176, -24, 32, 10 },
	{ "ref", 503, 23, 1200, ELO_DRAW, true, true, 1, 521, 18, 32, 12 },
	{ "ref", 100, 0, 100, ELO_WIN, true, true, 2, 118, 18, 32, 11 },
	{ "ref", 1000, 16, 201, ELO_DRAW, true, false, 2, 984, -16, 32, 10 },
	{ "ref", 1896, 31, 1896, ELO_LOSS, true, true, 3, 1888, -8, 16, 10 },
	{ "ref", 101, 100, 100, ELO_LOSS, true, false, 1, 100, -1, 16, 10 },
	{ "ref", 100, 100, 1985, ELO_LOSS, true, false, 1, 100, 0, 16, 10 },
	{ "ref", 1000, 30, 1323, ELO_WIN, false, true, 3, 1014, 14, 16, 10 },
	{ "ref", 1059, 29, 1400, ELO_DRAW, true, true, 1, 1073, 14, 32, 12 },
	{ "ref", 1430, 1, 1200, ELO_DRAW, true, false, 2, 1421, -9, 32, 10 },
	{ "ref", 1000, 30, 1400, ELO_LOSS, true, true, 2, 999, -1, 16, 10 },
	{ "ref", 110, 30, 1564, ELO_DRAW, false, false, 1, 118, 8, 16, 10 },
	{ "ref", 101, 100, 1200, ELO_WIN, false, false, 1, 117, 16, 16, 10 },
	{ "ref", 1200, 29, 492, ELO_WIN, true, true, 3, 1201, 1, 32, 11 },
	{ "ref", 101, 0, 102, ELO_WIN, true, true, 3, 119, 18, 32, 11 },
	{ "ref", 1000, 0, 1000, ELO_DRAW, false, true, 1, 1000, 0, 32, 10 },
	{ "ref", 1107, 0, 1108, ELO_DRAW, true, true, 3, 1107, 0, 32, 10 },
	{ "ref", 1852, 1, 1200, ELO_WIN, true, false, 1, 1853, 1, 32, 11 },
	{ "ref", 954, 29, 1915, ELO_DRAW, true, false, 3, 972, 18, 32, 11 },
	{ "ref", 105, 1, 1000, ELO_DRAW, false, true, 1, 121, 16, 32, 10 },
	{ "ref", 1928, 29, 1927, ELO_WIN, true, false, 2, 1946, 18, 32, 11 },
	{ "ref", 101, 13, 101, ELO_LOSS, true, false, 3, 100, -1, 32, 10 },
	{ "ref", 2573, 0, 1200, ELO_LOSS, true, true, 1, 2541, -32, 32, 10 },
	{ "ref", 100, 1, 101, ELO_LOSS, true, false, 3, 100, 0, 32, 10 },
	{ "ref", 1050, 100, 800, ELO_WIN, true, false, 3, 1053, 3, 16, 11 },
	{ "ref", 110, 0, 1000, ELO_LOSS, true, false, 1, 110, 0, 32, 10 },
	{ "ref", 1200, 41, 1038, ELO_WIN, true, true, 1, 1206, 6, 16, 12 },
	{ "ref", 1628, 1, 1628, ELO_LOSS, true, false, 3, 1612, -16, 32, 10 },
	{ "ref", 100, 30, 99, ELO_WIN, true, true, 1, 110, 10, 16, 12 },
	{ "ref", 1400, 31, 800, ELO_LOSS, false, false, 1, 1384, -16, 16, 10 },
	{ "ref", 110, 100, 1400, ELO_WIN, true, false, 1, 128, 18, 16, 11 },
	{ "ref", 100, 0, 1400, ELO_LOSS, false, true, 1, 100, 0, 32, 10 },
	{ "ref", 105, 30, 106, ELO_WIN, true, false, 1, 114, 9, 16, 11 },
	{ "ref", 1200, 50, 1199, ELO_LOSS, true, true, 2, 1192, -8, 16, 10 },
	{ "ref", 105, 100, 106, ELO_DRAW, false, false, 1, 105, 0, 16, 10 },
	{ "ref", 1200, 0, 1199, ELO_DRAW, false, false, 3, 1200, 0, 32, 10 },
	{ "ref", 100, 31, 99, ELO_DRAW, false, true, 2, 100, 0, 16, 10 },
	{ "ref", 105, 30, 104, ELO_WIN, true, true, 1, 115, 10, 16, 12 },
	{ "ref", 101, 100, 101, ELO_WIN, true, true, 1, 111, 10, 16, 12 },
	{ "ref", 1000, 100, 1000, ELO_LOSS, false, false, 1, 992, -8, 16, 10 },
	{ "ref", 1400, 30, 1200, ELO_DRAW, true, true, 1, 1396, -4, 16, 10 },
	{ "ref", 101, 29, 102, ELO_DRAW, true, true, 3, 101, 0, 32, 10 },
	{ "ref", 1050, 0, 1050, ELO_WIN, false, true, 1, 1066, 16, 32, 10 },
	{ "ref", 1000, 29, 1000, ELO_LOSS, true, false, 3, 984, -16, 32, 10 },
	{ "ref", 1200, 1, 1199, ELO_DRAW, false, true, 2, 1200, 0, 32, 10 },
	{ "ref", 105, 30, 686, ELO_WIN, true, false, 1, 122, 17, 16, 11 },
	{ "ref", 1201, 29, 1400, ELO_WIN, true, true, 2, 1227, 26, 32, 11 },
	{ "ref", 1200, 30, 1199, ELO_WIN, true, true, 2, 1209, 9, 16, 11 },
	{ "ref", 1000, 23, 1000, ELO_DRAW, true, true, 2, 1000, 0, 32, 10 },
	{ "ref", 1400, 29, 1200, ELO_DRAW, true, false, 2, 1392, -8, 32, 10 },
	{ "ref", 1200, 31, 1199, ELO_WIN, true, true, 1, 1210, 10, 16, 12 },
	{ "ref", 1098, 31, 1000, ELO_LOSS, true, true, 2, 1088, -10, 16, 10 },
	{ "ref", 110, 0, 109, ELO_LOSS, true, false, 2, 100, -10, 32, 10 },
	{ "ref", 1400, 0, 1400, ELO_WIN, false, true, 1, 1416, 16, 32, 10 },
	{ "ref", 1050, 29, 1051, ELO_WIN, false, true, 3, 1066, 16, 32, 10 },
	{ "ref", 100, 29, 1400, ELO_WIN, false, false, 1, 132, 32, 32, 10 },
	{ "ref", 1000, 0, 800, ELO_DRAW, true, false, 1, 992, -8, 32, 10 },
	{ "ref", 1607, 0, 1607, ELO_LOSS, true, true, 1, 1591, -16, 32, 10 },
	{ "ref", 105, 0, 1400, ELO_WIN, false, false, 1, 137, 32, 32, 10 },
	{ "ref", 1200, 100, 1400, ELO_DRAW, false, true, 1, 1204, 4, 16, 10 },
	{ "ref", 110, 30, 2676, ELO_LOSS, true, false, 3, 110, 0, 16, 10 },
	{ "ref", 489, 31, 158, ELO_WIN, true, false, 2, 491, 2, 16, 11 },
	{ "ref", 1243, 100, 1200, ELO_WIN, true, false, 1, 1251, 8, 16, 11 },
	{ "ref", 105, 31, 1400, ELO_DRAW, false, true, 2, 113, 8, 16, 10 },
	{ "ref", 101, 1, 1400, ELO_DRAW, false, true, 2, 117, 16, 32, 10 },
	{ "ref", 1400, 30, 800, ELO_DRAW, false, true, 2, 1392, -8, 16, 10 },
	{ "ref", 1050, 31, 1200, ELO_DRAW, false, false, 1, 1053, 3, 16, 10 },
	{ "ref", 110, 30, 1200, ELO_DRAW, true, true, 1, 120, 10, 16, 12 },
	{ "ref", 105, 0, 104, ELO_LOSS, false, true, 1, 100, -5, 32, 10 },
	{ "ref", 101, 0, 102, ELO_DRAW, false, false, 1, 101, 0, 32, 10 },
	{ "ref", 1444, 100, 1400, ELO_WIN, true, true, 2, 1452, 8, 16, 11 },
	{ "ref", 100, 0, 1400, ELO_LOSS, false, true, 2, 100, 0, 32, 10 },
	{ "ref", 1354, 31, 1353, ELO_WIN, true, true, 2, 1363, 9, 16, 11 },
	{ "ref", 101, 1, 101, ELO_DRAW, false, false, 2, 101, 0, 32, 10 },
	{ "ref", 1006, 30, 1000, ELO_LOSS, true, true, 1, 998, -8, 16, 10 },
	{ "ref", 1000, 1, 1400, ELO_DRAW, true, true, 3, 1014, 14, 32, 11 },
	{ "ref", 101, 16, 102, ELO_LOSS, true, true, 2, 100, -1, 32, 10 },
	{ "ref", 105, 100, 1200, ELO_DRAW, false, false, 2, 113, 8, 16, 10 },
	{ "ref", 1200, 0, 1199, ELO_DRAW, false, false, 1, 1200, 0, 32, 10 },
	{ "ref", 110, 0, 1400, ELO_LOSS, false, false, 1, 110, 0, 32, 10 },
	{ "ref", 1050, 1, 800, ELO_WIN, false, true, 3, 1056, 6, 32, 10 },
	{ "ref", 1050, 30, 1400, ELO_WIN, false, true, 1, 1064, 14, 16, 10 },
	{ "ref", 1190, 100, 800, ELO_LOSS, false, false, 1, 1176, -14, 16, 10 },
	{ "ref", 306, 53, 1200, ELO_WIN, true, false, 3, 324, 18, 16, 11 },
	{ "ref", 1356, 31, 1355, ELO_WIN, false, true, 3, 1364, 8, 16, 10 },
	{ "ref", 1050, 29, 1400, ELO_WIN, true, false, 2, 1081, 31, 32, 11 },
	{ "ref", 1050, 29, 1400, ELO_DRAW, true, true, 2, 1063, 13, 32, 11 },
	{ "ref", 1787, 11, 1787, ELO_WIN, true, true, 3, 1805, 18, 32, 11 },
	{ "ref", 1200, 29, 1201, ELO_WIN, true, true, 2, 1218, 18, 32, 11 },
	{ "ref", 1200, 29, 1199, ELO_DRAW, true, false, 1, 1200, 0, 32, 10 },
	{ "ref", 101, 30, 1569, ELO_WIN, true, false, 3, 119, 18, 16, 11 },
	{ "ref", 1200, 28, 800, ELO_LOSS, true, true, 1, 1171, -29, 32, 10 },
	{ "ref", 1050, 29, 800, ELO_LOSS, true, false, 1, 1024, -26, 32, 10 },
	{ "ref", 998, 29, 1400, ELO_LOSS, true, true, 3, 995, -3, 32, 10 },
	{ "ref", 1050, 29, 1050, ELO_WIN, false, false, 3, 1066, 16, 32, 10 },
	{ "ref", 1000, 0, 1000, ELO_LOSS, true, true, 1, 984, -16, 32, 10 },
	{ "ref", 1200, 30, 1200, ELO_DRAW, false, false, 1, 1200, 0, 16, 10 },
	{ "ref", 2342, 31, 2341, ELO_WIN, false, true, 2, 2350, 8, 16, 10 },
	{ "ref", 100, 0, 99, ELO_WIN, true, false, 1, 118, 18, 32, 11 },
	{ "ref", 108, 33, 1400, ELO_LOSS, false, true, 3, 108, 0, 16, 10 },
	{ "ref", 105, 30, 105, ELO_LOSS, false, true, 1, 100, -5, 16, 10 },
	{ "ref", 1037, 30, 1038, ELO_WIN, false, false, 3, 1045, 8, 16, 10 },
	{ "ref", 110, 20, 109, ELO_LOSS, false, true, 1, 100, -10, 32, 10 },
	{ "ref", 1097, 100, 1096, ELO_WIN, true, false, 3, 1106, 9, 16, 11 },
	{ "ref", 1200, 0, 1000, ELO_WIN, false, false, 1, 1208, 8, 32, 10 },
	{ "ref", 1050, 1, 1050, ELO_WIN, false, true, 2, 1066, 16, 32, 10 },
	{ "ref", 243, 1, 243, ELO_WIN, true, true, 1, 262, 19, 32, 12 },
	{ "ref", 100, 29, 99, ELO_DRAW, true, true, 1, 100, 0, 32, 10 },
	{ "ref", 1398, 2, 1000, ELO_LOSS, true, true, 1, 1369, -29, 32, 10 },
	{ "ref", 566, 1, 565, ELO_WIN, false, true, 1, 582, 16, 32, 10 },
	{ "ref", 1400, 29, 1400, ELO_LOSS, true, true, 1, 1384, -16, 32, 10 },
	{ "ref", 906, 100, 800, ELO_LOSS, false, false, 3, 896, -10, 16, 10 },
	{ "ref", 100, 100, 1200, ELO_WIN, true, false, 1, 118, 18, 16, 11 },
	{ "ref", 1050, 1, 1050, ELO_WIN, false, false, 3, 1066, 16, 32, 10 },
	{ "ref", 105, 31, 2349, ELO_DRAW, false, false, 3, 113, 8, 16, 10 },
	{ "ref", 105, 100, 1581, ELO_WIN, false, false, 1, 121, 16, 16, 10 },
	{ "ref", 105, 1, 105, ELO_LOSS, false, false, 3, 100, -5, 32, 10 },
	{ "ref", 1050, 1, 1000, ELO_LOSS, false, false, 2, 1032, -18, 32, 10 },
	{ "ref", 1050, 50, 1049, ELO_DRAW, false, false, 2, 1050, 0, 16, 10 },
	{ "ref", 1200, 16, 1000, ELO_DRAW, true, false, 2, 1192, -8, 32, 10 },
	{ "ref", 105, 1, 1400, ELO_WIN, true, false, 1, 140, 35, 32, 11 },
	{ "ref", 2577, 46, 2578, ELO_WIN, true, true, 3, 2586, 9, 16, 11 },
	{ "ref", 105, 31, 1400, ELO_LOSS, true, true, 3, 105, 0, 16, 10 },
	{ "ref", 1820, 29, 1000, ELO_LOSS, true, false, 1, 1788, -32, 32, 10 },
	{ "ref", 101, 31, 1200, ELO_WIN, true, true, 1, 120, 19, 16, 12 },
	{ "ref", 101, 29, 1200, ELO_WIN, false, true, 1, 133, 32, 32, 10 },
	{ "ref", 101, 26, 101, ELO_LOSS, true, false, 2, 100, -1, 32, 10 },
	{ "ref", 105, 100, 830, ELO_DRAW, true, true, 1, 115, 10, 16, 12 },
	{ "ref", 100, 1, 100, ELO_LOSS, true, false, 1, 100, 0, 32, 10 },
	{ "ref", 105, 30, 1200, ELO_WIN, false, true, 2, 121, 16, 16, 10 },
	{ "ref", 110, 50, 1400, ELO_LOSS, false, true, 3, 110, 0, 16, 10 },
	{ "ref", 1000, 0, 1000, ELO_WIN, true, true, 3, 1018, 18, 32, 11 },
	{ "ref", 1200, 30, 1201, ELO_DRAW, true, true, 1, 1200, 0, 16, 10 },
	{ "ref", 1050, 31, 1000, ELO_DRAW, false, true, 3, 1049, -1, 16, 10 },
	{ "ref", 2346, 40, 1400, ELO_DRAW, false, true, 1, 2338, -8, 16, 10 },
	{ "ref", 110, 1, 1000, ELO_DRAW, false, true, 2, 126, 16, 32, 10 },
	{ "ref", 1050, 29, 1050, ELO_WIN, false, true, 3, 1066, 16, 32, 10 },
	{ "ref", 100, 29, 1200, ELO_DRAW, true, true, 3, 118, 18, 32, 11 },
	{ "ref", 1000, 30, 1400, ELO_LOSS, true, true, 1, 999, -1, 16, 10 },
	{ "ref", 1200, 100, 1000, ELO_DRAW, false, false, 1, 1196, -4, 16, 10 },
	{ "ref", 1400, 29, 1400, ELO_DRAW, false, true, 2, 1400, 0, 32, 10 },
	{ "ref", 100, 31, 1000, ELO_WIN, true, false, 3, 118, 18, 16, 11 },
};

int main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct elo_case *c = &cases[i];
		struct elo_update u;
		elo_compute(c->rating, c->matches, c->opponent, c->o, c->verified, c->memoryless,
		            c->attempt, &u);
		is_int(u.after, c->after, "%s: after", c->name);
		is_int(u.change, c->change, "%s: change", c->name);
		is_int(u.k, c->k, "%s: K", c->name);
		is_int(u.bonus_tenths, c->bonus, "%s: bonus", c->name);
		is_int(u.before, c->rating, "%s: before", c->name);
		is_int(u.opponent, c->opponent, "%s: opponent", c->name);
	}

	/* Stored values outside the documented ranges (#16): clamped, 64-bit maths, no
	 * overflow (before: INT_MIN gave change -2147483548 under UBSan's signed overflow). */
	{
		static const struct { const char *name; int rating, opponent; enum elo_outcome o;
		                      int before, after, change, opp; } ext[] = {
			{ "rating INT_MIN (floor, then the 1.2 bonus)", INT_MIN, 1200, ELO_WIN, 0, 120, 120, 1200 },
			{ "rating INT_MAX", INT_MAX, 1200, ELO_LOSS, ELO_RATING_MAX, ELO_RATING_MAX - 32,
			  -32, 1200 },
			{ "rating -5", -5, 1000, ELO_LOSS, 0, 120, 120, 1000 },
			{ "opponent INT_MIN", 1000, INT_MIN, ELO_WIN, 1000, 1000, 0, 0 },
			{ "opponent INT_MAX (32 x 1.2)", 1000, INT_MAX, ELO_WIN, 1000, 1038, 38, ELO_RATING_MAX },
			{ "both INT_MAX", INT_MAX, INT_MAX, ELO_WIN, ELO_RATING_MAX, ELO_RATING_MAX, 0,
			  ELO_RATING_MAX },
		};
		for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
			struct elo_update u;
			elo_compute(ext[i].rating, 0, ext[i].opponent, ext[i].o, true, true, 1, &u);
			is_int(u.before, ext[i].before, "%s: before clamped", ext[i].name);
			is_int(u.after, ext[i].after, "%s: after", ext[i].name);
			is_int(u.change, ext[i].change, "%s: change = after - before", ext[i].name);
			is_int(u.opponent, ext[i].opp, "%s: opponent clamped", ext[i].name);
			ok(u.clamped, "%s: flagged as clamped", ext[i].name);
			ok(u.after >= ELO_FLOOR && u.after <= ELO_RATING_MAX, "%s: after in range",
			   ext[i].name);
		}
		struct elo_update u;
		elo_compute(1000, INT_MAX, 1000, ELO_WIN, false, false, 1, &u);
		ok(!u.clamped && u.k == 16, "match_count INT_MAX: K 16, nothing clamped");
		is_int(elo_count_inc(INT_MAX), INT_MAX, "count INT_MAX + 1 saturates");
		is_int(elo_count_inc(-7), 1, "a negative count counts as 0");
		is_int(elo_count_inc(41), 42, "count 41 + 1");
		bool c = false;
		is_int(elo_clamp_count(-3, &c), 0, "clamp count -3 -> 0");
		ok(c, "and says so");
		is_int(elo_add(1000, -2000000000000LL), ELO_FLOOR, "adjust far below: floor");
		is_int(elo_add(INT_MAX, INT_MAX), ELO_RATING_MAX, "adjust far above: ELO_RATING_MAX");
		is_int(elo_add(1000, 25), 1025, "adjust 1000 + 25");
	}

	/* An elo=adjust builds on the match's stored Elo columns (#22): consistent ones pass,
	 * anything else is refused by name, checked in 64 bits whatever the int4 values. */
	{
		static const struct { const char *name; bool hb, ha, hc; long long b, a, c;
		                      const char *why; } st[] = {
			{ "consistent win", 1, 1, 1, 1000, 1024, 24, NULL },
			{ "consistent loss at the floor", 1, 1, 1, 105, 100, -5, NULL },
			{ "consistent, change at the bound", 1, 1, 1, 5000, 6000, ELO_CHANGE_PLAUSIBLE, NULL },
			{ "elo_before NULL", 0, 1, 1, 0, 1024, 24, "elo_before is NULL" },
			{ "elo_before INT_MIN", 1, 1, 1, INT_MIN, 1024, 24, "elo_before is outside" },
			{ "elo_before INT_MAX", 1, 1, 1, INT_MAX, INT_MAX, 0, "elo_before is outside" },
			{ "elo_change NULL", 1, 1, 0, 1000, 1024, 0, "elo_change is NULL" },
			{ "elo_change INT_MAX", 1, 1, 1, 1000, 1024, INT_MAX, "elo_change is implausible" },
			{ "elo_change INT_MIN", 1, 1, 1, 1000, 1024, INT_MIN, "elo_change is implausible" },
			{ "elo_change 1001", 1, 1, 1, 1000, 2001, 1001, "elo_change is implausible" },
			{ "elo_after NULL", 1, 0, 1, 1000, 0, 24, "elo_after is NULL" },
			{ "elo_after INT_MAX", 1, 1, 1, 1000, INT_MAX, 24, "elo_after is outside" },
			{ "elo_after != before + change", 1, 1, 1, 1000, 1524, 24, "not elo_before + elo_change" },
			/* Wrapped in 32 bits, 2147483000 + 1000 would be -2147483296: 64 bits tell. */
			{ "before + change wraps in 32 bits", 1, 1, 1, 999000, -2147483296LL, 1000,
			  "elo_after is outside" },
		};
		for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
			struct elo_stored x = { st[i].hb, st[i].ha, st[i].hc, st[i].b, st[i].a, st[i].c };
			const char *why = elo_stored_check(&x);
			if (!st[i].why)
				ok(!why, "stored %s: accepted (%s)", st[i].name, why ? why : "");
			else
				ok(why && strstr(why, st[i].why), "stored %s: refused: %s", st[i].name,
				   why ? why : "(accepted)");
		}
		/* The adjust's delta as cplan computes it from any int4 change and effective change:
		 * 64-bit, within the rating range, no overflow. */
		is_int(elo_add(1000, (long long)INT_MAX - INT_MIN), ELO_RATING_MAX,
		       "adjust by INT_MAX - INT_MIN: ELO_RATING_MAX");
		is_int(elo_add(1000, (long long)INT_MIN - INT_MAX), ELO_FLOOR,
		       "adjust by INT_MIN - INT_MAX: floor");
		is_int(elo_add(INT_MIN, 24), ELO_FLOOR, "adjust of a rating INT_MIN: floor");
		is_int(elo_add(1000, -24), 976, "adjust 1000 - 24");
	}

	is_int(elo_opponent("newcomer", false, 0), 800, "newcomer 800");
	is_int(elo_opponent("contender", false, 0), 1000, "contender 1000");
	is_int(elo_opponent("veteran", false, 0), 1200, "veteran 1200");
	is_int(elo_opponent("legendary", false, 0), 1400, "legendary 1400");
	is_int(elo_opponent("veteran", true, 1337), 1337, "challenge rating wins over difficulty");
	is_int(elo_opponent(NULL, true, 900), 900, "rating without difficulty");
	is_int(elo_opponent("Veteran", false, 0), -1, "difficulty is case-sensitive");
	is_int(elo_opponent("expert", false, 0), -1, "unknown difficulty");
	is_int(elo_opponent(NULL, false, 0), -1, "no difficulty, no rating");

	is_int(elo_round(2.5), 3, "round 2.5 -> 3");
	is_int(elo_round(-2.5), -3, "round -2.5 -> -3");
	is_int(elo_round(2.4999), 2, "round 2.4999 -> 2");
	is_int(elo_round(0.49999999999999994), 0, "round just below 0.5 -> 0");
	is_int(elo_round(-0.5), -1, "round -0.5 -> -1");
	is_int(elo_round(1072.508), 1073, "round 1072.508");

	/* The rules in one place: K by match count, the floor, the default opponent. */
	is_int(elo_k(0), ELO_K_NEW, "K 32 for a newcomer");
	is_int(elo_k(ELO_K_MATCHES - 1), 32, "K 32 at 29 matches");
	is_int(elo_k(ELO_K_MATCHES), 16, "K 16 at 30 matches");
	is_int(elo_floor(99), ELO_FLOOR, "floor lifts 99 to 100");
	is_int(elo_floor(-5000), 100, "floor lifts a negative rating");
	is_int(elo_floor(101), 101, "floor leaves 101");
	is_int(elo_opponent_or_default("expert", false, 0), ELO_DEFAULT_OPPONENT,
	       "unknown difficulty: default opponent 1000");
	is_int(elo_opponent_or_default("veteran", false, 0), 1200, "known difficulty kept");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct elo_case *c = &cases[i];
		struct elo_update u;
		elo_compute_k(c->rating, c->k, c->opponent, c->o, c->verified, c->memoryless,
		              c->attempt, &u);
		if (u.after != c->after || u.change != c->change || u.k != c->k) {
			ok(0, "elo_compute_k with the case's K reproduces %s", c->name);
			break;
		}
		if (i + 1 == sizeof cases / sizeof cases[0])
			ok(1, "elo_compute_k with each case's K reproduces every case");
	}
	struct elo_update u1, u2;
	elo_compute_k(1050, 7, 1200, ELO_WIN, false, false, 1, &u1);
	elo_compute(1050, 0, 1200, ELO_WIN, false, false, 1, &u2);
	ok(u1.k == ELO_K_NEW && u1.after == u2.after, "an unknown K is taken as K 32");
	return tap_done();
}
