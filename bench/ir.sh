#!/usr/bin/env bash
# Counts the instructions one benchmark op executes, with valgrind's
# callgrind: unlike a time, the count is the same on a loaded machine, so
# two builds or two implementations can be compared while others work.
# It runs the benchmark for N and for 2N iterations (-benchtime=Nx, one
# processor, Go's async preemption off, which callgrind's signal handling
# needs) and divides the difference by N, so that the setup, the same in
# both runs, cancels out; then it prints the functions whose own counts
# grew by the most per op. A count is no time: a miss in the cache costs
# hundreds of cycles and one instruction.
#
# Usage: ./ir.sh BENCH [N]   (N defaults to 100000)
# e.g.   ./ir.sh '^BenchmarkCheckRate$/^impl=actor$/^keys=10000$/^callers=1$'
# Anchor each level of BENCH (^...$ between the slashes): an unanchored
# level also matches longer names (keys=10000 matches keys=100000).
set -euo pipefail
cd "$(dirname "$0")"
bench=$1
n=${2:-100000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bench.test" .
for m in 1 2; do
  GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --dump-instr=no \
    --callgrind-out-file="$tmp/cg.$m" "$tmp/bench.test" -test.run='^$' \
    -test.bench="$bench" -test.benchtime=$((m * n))x -test.cpu=1 >/dev/null 2>&1
  # Own counts by function, recursion marks ('2) folded in.
  callgrind_annotate --auto=no --threshold=100 "$tmp/cg.$m" 2>/dev/null |
    awk '/^ *[0-9,]+ +\( *[0-9.]+%\) / {
      v = $1; gsub(",", "", v)
      f = $0; sub(/^[^)]*\) +/, "", f); sub(/ \[.*$/, "", f); sub(/^[^:]*:/, "", f); sub(/'"'"'[0-9]+$/, "", f)
      own[f] += v
    } END { for (f in own) printf "%s\t%d\n", f, own[f] }' | sort >"$tmp/own.$m"
done
join -t $'\t' -a 2 -e 0 -o 0,1.2,2.2 "$tmp/own.1" "$tmp/own.2" |
  awk -F '\t' -v n="$n" '{ d = ($3 - $2) / n; if (d >= 1 || d <= -1) printf "%9.1f  %s\n", d, $1 }' |
  sort -rn | head -40
