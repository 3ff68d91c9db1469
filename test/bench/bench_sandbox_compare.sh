#!/bin/sh
# Compares the per-run sandbox overhead of two builds on this machine, interleaved so that
# both see the same load: ROUNDS times (default 5), each build's bench-sandbox runs CASES
# cases (default 100), alternating which goes first. Prints every round's medians and the
# median over the rounds of each build and of the ratio B/A. Needs root (the sandbox).
#   test/bench/bench_sandbox_compare.sh A/bench-sandbox B/bench-sandbox [ROUNDS [CASES]]
set -eu
a=$1 b=$2 rounds=${3:-5} cases=${4:-100}
median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
one() {   # the median overhead in ms of one bench run, or "fail"
	"$1" "$cases" 2>/dev/null | awk '/^overhead per case:/ {sub(",", "", $8); print $8; found = 1}
	                                  END {if (!found) print "fail"}'
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ "$i" -lt "$rounds" ]; do
	if [ $((i % 2)) -eq 0 ]; then x=$(one "$a"); y=$(one "$b"); else y=$(one "$b"); x=$(one "$a"); fi
	echo "round $((i + 1)): A $x ms, B $y ms"
	case "$x$y" in *fail*) ;; *) echo "$x $y" >>"$out" ;; esac
	i=$((i + 1))
done
[ -s "$out" ] || { echo "no round completed"; exit 1; }
echo "median overhead: A $(cut -d' ' -f1 "$out" | median) ms, B $(cut -d' ' -f2 "$out" | median) ms;" \
     "median ratio B/A $(awk '{print $2 / $1}' "$out" | median)"
