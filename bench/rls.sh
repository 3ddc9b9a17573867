#!/usr/bin/env bash
# Measures ShouldRateLimit on actorlimitd (embedded table and Redis), envoy
# ratelimit, gubernator and the floor servers (bench/rls: BenchmarkRLS and
# BenchmarkRLSFlood) in ROUNDS alternating rounds (default 5: every case of
# every server once a round, BENCH_RLS_ROUNDS), and writes results/rls.md
# (cmd/rlsreport: medians, and the issue's targets as ratios computed within
# each round, then their median) beside the raw output in
# results/rls-DATE.txt. envoy ratelimit and gubernator are built from their
# modules at pinned versions on first use (minutes), then kept beside the Go
# build cache; BENCH_RLS_PEERS (default 1: both) picks them, =envoy for
# envoy ratelimit alone. Run it on a quiet machine:
#
#   bench/rls.sh [ROUNDS] [BENCHTIME] [FILTER]
#
# The issue's measurement, 1, 16 and 64 clients against the floors and envoy
# ratelimit, 4 rounds of 1 s a case (4 minutes on the 2-core VM, envoy
# ratelimit built; the filter leaves the impl element unanchored, as Go
# adds #01, #02, ... to it):
#
#   BENCH_RLS_PEERS=envoy bench/rls.sh 4 1s '^BenchmarkRLS$/./clients=(1|16|64)$/'
#
# BENCH_RLS_CLIENT_GOGC=off takes the clients' own garbage collector out of
# the p99 (doc.go says why); it is passed on, and named in the command line
# recorded.
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
benchtime=${2:-1s}
filter=${3:-^BenchmarkRLS}
peers=${BENCH_RLS_PEERS:-1}
mkdir -p results
raw=results/rls-$(date -u +%Y%m%dT%H%M%SZ).txt
gogc=${BENCH_RLS_CLIENT_GOGC:+BENCH_RLS_CLIENT_GOGC=$BENCH_RLS_CLIENT_GOGC }
cmd="${gogc}BENCH_RLS_PEERS=$peers BENCH_RLS_ROUNDS=$rounds go test -run='^\$' -bench='$filter' -count=1 -benchtime=$benchtime -timeout=120m ./rls/"
{
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3-); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# command (in bench/): $cmd"
  BENCH_RLS_PEERS=$peers BENCH_RLS_ROUNDS=$rounds go test -run='^$' -bench="$filter" -count=1 -benchtime="$benchtime" -timeout=120m ./rls/
  echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$raw"
go run ./cmd/rlsreport < "$raw" > results/rls.md
echo "wrote results/rls.md from $raw"
