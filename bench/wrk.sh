#!/usr/bin/env bash
# Measures a whole server: cmd/httpserver on a free loopback port, serving
# the HTTP benchmarks' handler without a middleware (-limit=none) and with
# actorlimit's (-limit=actorlimit: one rule per client IP, never reached),
# driven by wrk. ROUNDS rounds (default 5) each start, load and stop both
# servers, in alternating order. Writes results/wrk.md: requests/s and
# latencies of every run, the medians and the ratio with / without. Installs
# Debian's wrk with apt-get if it is missing. Only 127.0.0.1 is loaded.
#
# Usage: ./wrk.sh [ROUNDS]
# WRK_DURATION (default 10s), WRK_THREADS (2), WRK_CONNECTIONS (64) and
# WRK_WARMUP (1s, a run before each measured one, not recorded) set wrk's
# -d, -t and -c.
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
duration=${WRK_DURATION:-10s}
threads=${WRK_THREADS:-2}
conns=${WRK_CONNECTIONS:-64}
warmup=${WRK_WARMUP:-1s}
load=$(cut -d' ' -f1-3 /proc/loadavg)

if ! command -v wrk >/dev/null 2>&1; then
  sudo=
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq wrk >/dev/null
fi

tmp=$(mktemp -d)
pid=
# The server is stopped however the script ends.
cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # exit runs the EXIT trap

go build -o "$tmp/httpserver" ./cmd/httpserver

# start MODE starts the server with -limit=MODE on a port the system picks,
# and sets pid and addr once it listens.
start() {
  "$tmp/httpserver" -limit="$1" -addr=127.0.0.1:0 >"$tmp/server.out" 2>&1 &
  pid=$!
  addr=
  for _ in $(seq 100); do
    addr=$(awk '/^listening on /{print $3}' "$tmp/server.out")
    case "$addr" in
    127.0.0.1:*) return 0 ;;
    "") ;;
    *)
      echo "wrk.sh: server listens on $addr, not on loopback" >&2
      return 1
      ;;
    esac
    if ! kill -0 "$pid" 2>/dev/null; then
      cat "$tmp/server.out" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "wrk.sh: the server did not start in 10 s" >&2
  return 1
}

# stop stops the server and fails if it did not exit cleanly.
stop() {
  kill "$pid"
  wait "$pid"
  pid=
}

# measure MODE runs one server and writes wrk's output to $tmp/MODE.txt.
measure() {
  start "$1"
  wrk -t"$threads" -c"$conns" -d"$warmup" "http://$addr/" >/dev/null
  wrk -t"$threads" -c"$conns" -d"$duration" --latency "http://$addr/" >"$tmp/$1.txt"
  stop
  if grep -q 'Non-2xx or 3xx responses' "$tmp/$1.txt"; then
    cat "$tmp/$1.txt" >&2
    echo "wrk.sh: -limit=$1 answered other than 2xx: the run measures no plain request" >&2
    return 1
  fi
}

# field RE FILE prints the second field of the first line of FILE matching RE.
field() { awk -v re="$1" '$0 ~ re {print $2; exit}' "$2"; }

median() { sort -g | awk '{v[NR] = $1} END {printf "%.0f\n", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

rows=()
declare -A rps=([none]="" [actorlimit]="")
for round in $(seq "$rounds"); do
  order="none actorlimit"
  [ $((round % 2)) = 0 ] && order="actorlimit none"
  for mode in $order; do
    measure "$mode"
    r=$(field '^Requests/sec:' "$tmp/$mode.txt")
    errs=$(awk '/Socket errors:/ {sub(/^ *Socket errors: */, ""); print}' "$tmp/$mode.txt")
    rows+=("| $round | $mode | $r | $(field '^ +50%' "$tmp/$mode.txt") | $(field '^ +99%' "$tmp/$mode.txt") | ${errs:-none} |")
    rps[$mode]+="$r"$'\n'
    echo "round $round, -limit=$mode: $r requests/s" >&2
  done
done

none=$(printf '%s' "${rps[none]}" | median)
with=$(printf '%s' "${rps[actorlimit]}" | median)
mkdir -p results
{
  echo "# A whole server with and without actorlimit's middleware (wrk)"
  echo
  echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3-), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
  echo "- date: $(date -u +'%Y-%m-%d %H:%M UTC'); load average at the start: $load"
  echo "- server: bench/cmd/httpserver on 127.0.0.1, the handler of BenchmarkMiddleware alone (-limit=none) or behind httpadapter with one block rule per client IP, 2^40 an hour, never reached (-limit=actorlimit); every connection comes from 127.0.0.1, so every request counts against one key"
  echo "- load: wrk -t$threads -c$conns -d$duration --latency after a $warmup warm-up, on the same $(nproc) cores as the server; $rounds rounds, each starts, loads and stops both servers, -limit=none first in odd rounds"
  echo "- made by bench/wrk.sh"
  echo
  echo "| round | -limit | requests/s | p50 | p99 | socket errors |"
  echo "|--:|---|--:|--:|--:|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "| | median requests/s |"
  echo "|---|--:|"
  echo "| none | $none |"
  echo "| actorlimit | $with |"
  echo "| actorlimit ÷ none | $(awk -v a="$with" -v b="$none" 'BEGIN {printf "%.3f", a / b}') |"
} >results/wrk.md
echo "wrote results/wrk.md"
