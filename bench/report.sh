#!/usr/bin/env bash
# Runs the comparison of actorlimit with its peers COUNT times (default 10),
# summarises it with benchstat and writes results/limiters.md: the machine,
# then median ns/op and allocs/op with the ratio to the fastest peer, the
# same for one request through each HTTP middleware (BenchmarkMiddleware),
# bytes per key, and CheckRate latencies during a sweep. Raw outputs go to
# results/limiters.txt and results/limiters-benchstat.txt (not committed).
#
# Usage: ./report.sh [COUNT]
# BENCH_FULL=1 ./report.sh adds the 1 000 000-key sets (and sweeps 1 000 000
# entries instead of 100 000); that run takes several times longer.
# BENCH_SHARDS=n starts impl=actorlimit and actorlimit-batch (and
# BenchmarkMiddleware's impl=actorlimit) with WithShards(n)
# (BenchmarkSweepUnderLoad keeps the default).
set -euo pipefail
cd "$(dirname "$0")"
count=${1:-10}
load=$(cut -d' ' -f1-3 /proc/loadavg)
benchstat=(go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da)
mkdir -p results
raw=results/limiters.txt

{
  go test -run='^$' -bench='^BenchmarkLimiters$' -count="$count" -timeout=0 .
  go test -run='^$' -bench='^BenchmarkMiddleware$' -count="$count" -timeout=0 .
  # One measurement per run: a memory reading, or 20 sweeps for enough calls
  # to give a p99.9.
  go test -run='^$' -bench='^BenchmarkMemory$' -benchtime=1x -count="$count" -timeout=0 .
  go test -run='^$' -bench='^BenchmarkSweepUnderLoad$' -benchtime=20x -count="$count" -timeout=0 .
} | tee "$raw"

"${benchstat[@]}" "$raw" >results/limiters-benchstat.txt 2>&1
csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
"${benchstat[@]}" -format csv "$raw" >"$csv" 2>/dev/null

full=no
[ "${BENCH_FULL:-}" = 1 ] && full=yes
{
  echo "# actorlimit and its peers"
  echo
  echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3-)"
  echo "- date: $(date -u +'%Y-%m-%d %H:%M UTC'); load average at the start: $load"
  echo "- runs: -count=$count (BenchmarkMemory -benchtime=1x, BenchmarkSweepUnderLoad -benchtime=20x), BENCH_FULL: $full, BENCH_SHARDS: ${BENCH_SHARDS:-default}; medians by benchstat"
  echo "- made by bench/report.sh; how each number is measured: bench/doc.go"
  echo
  go run ./internal/report <"$csv"
} >results/limiters.md
echo "wrote results/limiters.md"
