#!/usr/bin/env bash
# Measures ShouldRateLimit on actorlimitd (embedded table and Redis), envoy
# ratelimit, gubernator and the floor server (bench/rls: BenchmarkRLS and
# BenchmarkRLSFlood), COUNT times each (default 5), and writes
# results/rls.md (medians, the issue's targets) beside the raw output in
# results/rls-DATE.txt. envoy ratelimit and gubernator are built from their
# modules at pinned versions on first use (minutes), then kept beside the Go
# build cache. Run it on a quiet machine:
#
#   bench/rls.sh [COUNT] [BENCHTIME]
set -euo pipefail
cd "$(dirname "$0")"
count=${1:-5}
benchtime=${2:-2s}
mkdir -p results
raw=results/rls-$(date -u +%Y%m%dT%H%M%SZ).txt
cmd="BENCH_RLS_PEERS=1 go test -run='^\$' -bench='^BenchmarkRLS' -count=$count -benchtime=$benchtime -timeout=120m ./rls/"
{
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3-); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# command (in bench/): $cmd"
  BENCH_RLS_PEERS=1 go test -run='^$' -bench='^BenchmarkRLS' -count="$count" -benchtime="$benchtime" -timeout=120m ./rls/
  echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$raw"
go run ./cmd/rlsreport < "$raw" > results/rls.md
echo "wrote results/rls.md from $raw"
