#!/usr/bin/env bash
# Profiles actorlimit's single-call hot path,
# BenchmarkLimiters/impl=actorlimit/keys=10000/callers=256: writes
# results/cpu.prof and results/mem.prof (not committed) and prints the top of
# each. The allocation profile records every allocation (-memprofilerate=1),
# so it is made by a second run that the CPU profile does not see; both
# include the benchmark's setup (starting the limiter, one hit per key).
#
# Usage: ./profile.sh [BENCHTIME]   (default 5s)
set -euo pipefail
cd "$(dirname "$0")"
benchtime=${1:-5s}
bench='^BenchmarkLimiters$/^impl=actorlimit$/^keys=10000$/^callers=256$'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p results

go test -run='^$' -bench="$bench" -benchtime="$benchtime" -count=1 -o "$tmp/bench.test" \
  -cpuprofile=results/cpu.prof .
go test -run='^$' -bench="$bench" -benchtime="$benchtime" -count=1 -o "$tmp/bench.test" \
  -memprofile=results/mem.prof -memprofilerate=1 .

echo; echo "== CPU (results/cpu.prof)"
go tool pprof -top -nodecount=30 results/cpu.prof 2>/dev/null | head -40
echo; echo "== CPU, cumulative (results/cpu.prof)"
go tool pprof -top -cum -nodecount=30 results/cpu.prof 2>/dev/null | head -40
echo; echo "== allocated objects (results/mem.prof)"
go tool pprof -top -sample_index=alloc_objects -nodecount=20 results/mem.prof 2>/dev/null | head -30
echo; echo "== allocated bytes (results/mem.prof)"
go tool pprof -top -sample_index=alloc_space -nodecount=20 results/mem.prof 2>/dev/null | head -30
