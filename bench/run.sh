#!/usr/bin/env bash
# Runs the benchmarks COUNT times (default 10) and summarises them with
# benchstat: medians with their spread. Usage: ./run.sh [COUNT] [BENCH REGEXP]
set -euo pipefail
cd "$(dirname "$0")"
count=${1:-10}
pattern=${2:-.}
mkdir -p results
out=results/bench-$(date -u +%Y%m%dT%H%M%SZ).txt
{
  echo "# $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version)"
  go test -run='^$' -bench="$pattern" -count="$count" .
} | tee "$out"
go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da "$out"
