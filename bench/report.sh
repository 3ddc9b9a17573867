#!/usr/bin/env bash
# Runs the comparison of actorlimit with its peers COUNT times (default 10),
# summarises it with benchstat and writes results/limiters.md: the machine,
# then median ns/op and allocs/op with the ratio to the fastest peer,
# actorlimit's ratios to the peers its targets name, checks per second at
# GOMAXPROCS 1, 2 and all the cores (BenchmarkScaling), the same for one
# request through each HTTP middleware (BenchmarkMiddleware), bytes per
# key, and CheckRate latencies during a sweep. Raw outputs go to
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

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go test -c -o "$bin/bench.test" .
run() { "$bin/bench.test" -test.run='^$' -test.timeout=0 "$@"; }
{
  # The costs whose ratios the targets state are measured in rounds: each
  # round runs every implementation once, so that the load of a shared
  # machine weighs alike on all of them (-count would run one
  # implementation COUNT times before the next).
  for _ in $(seq "$count"); do
    run -test.bench='^BenchmarkLimiters$' -test.count=1
    run -test.bench='^BenchmarkScaling$' -test.count=1
  done
  run -test.bench='^BenchmarkMiddleware$' -test.count="$count"
  # One measurement per run: a memory reading, or 20 sweeps for enough calls
  # to give a p99.9.
  run -test.bench='^BenchmarkMemory$' -test.benchtime=1x -test.count="$count"
  run -test.bench='^Benchmark(SweepUnderLoad|NoSweep)$' -test.benchtime=20x -test.count="$count"
} | tee "$raw"

"${benchstat[@]}" "$raw" >results/limiters-benchstat.txt 2>&1
csv=$bin/benchstat.csv
"${benchstat[@]}" -format csv "$raw" >"$csv" 2>/dev/null

full=no
[ "${BENCH_FULL:-}" = 1 ] && full=yes
{
  echo "# actorlimit and its peers"
  echo
  echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3-)"
  echo "- date: $(date -u +'%Y-%m-%d %H:%M UTC'); load average at the start: $load"
  echo "- a shared machine unless said otherwise: other work ran beside the benchmarks; compare ratios within this file, not figures across files"
  echo "- command: bench/report.sh $count (BENCH_FULL=${BENCH_FULL:-}, BENCH_SHARDS=${BENCH_SHARDS:-})"
  echo "- runs: $count rounds of BenchmarkLimiters and BenchmarkScaling, each implementation once a round; -count=$count (BenchmarkMemory -benchtime=1x, BenchmarkSweepUnderLoad -benchtime=20x), BENCH_FULL: $full, BENCH_SHARDS: ${BENCH_SHARDS:-default}; medians by benchstat"
  echo "- made by bench/report.sh; how each number is measured: bench/doc.go"
  echo
  go run ./internal/report <"$csv"
} >results/limiters.md
echo "wrote results/limiters.md"
