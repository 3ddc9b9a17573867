#!/usr/bin/env bash
# Counts the instructions one request of service's BenchmarkServeRedis
# executes (a request's bytes decoded, decided on a local redis-server and
# the answer encoded, one caller), by area, with valgrind's callgrind: as
# ir.sh does, it runs the benchmark for N and 2N iterations and divides the
# difference by N. The benchmark starts its own redis-server, and callgrind
# fails on a signal when the test kills it, so the counts are dumped just
# before that (--dump-before the kill). GOGC=off (the default here) leaves
# the garbage collector out, whose work varies with the heap; the
# allocations a request stand for it. The scheduler's and the netpoller's
# counts vary with how long each round trip waits, the rest does not.
#
# Usage: ./irserve.sh [DESCRIPTORS [N]]   (1 and 5000 by default)
set -uo pipefail
cd "$(dirname "$0")/.."
d=${1:-1}
n=${2:-5000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/svc.test" ./service/ || exit 1
for m in 1 2; do
  GOGC=${GOGC:-off} GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --dump-instr=no \
    --dump-before='github.com/actorlimit/actorlimit/internal/redistest.(*Server).Kill' \
    --callgrind-out-file="$tmp/cg.$m" "$tmp/svc.test" -test.run='^$' \
    -test.bench="^BenchmarkServeRedis\$/^descriptors=$d\$" -test.benchtime=$((m * n))x -test.cpu=1 \
    -test.benchmem >"$tmp/out.$m" 2>&1
  grep -h '^BenchmarkServeRedis' "$tmp/out.$m"
  callgrind_annotate --auto=no --threshold=100 "$tmp/cg.$m.1" 2>/dev/null |
    awk '/^ *[0-9,]+ +\( *[0-9.]+%\) / {
      v = $1; gsub(",", "", v)
      f = $0; sub(/^[^)]*\) +/, "", f); sub(/ \[.*$/, "", f); sub(/^[^:]*:/, "", f); sub(/'"'"'[0-9]+$/, "", f)
      own[f] += v
    } END { for (f in own) printf "%s\t%d\n", f, own[f] }' | sort >"$tmp/own.$m"
done
join -t $'\t' -a 2 -e 0 -o 0,1.2,2.2 "$tmp/own.1" "$tmp/own.2" | awk -F '\t' -v n="$n" '
{ d = ($3 - $2) / n; f = $1
  if (f ~ /PROGRAM TOTALS/) next
  if (f ~ /^runtime\.(scan|gcDrain|markroot|tryDefer|greyobject|findObject|gcBgMarkWorker|wbBuf|bulkBarrier|gcmark|sweep|.mspan..sweep|.spanInlineMarkBits|typePointers|.gcWork|heapBitsSmallForAddr|extractHeapBits|spanOf|markBits)/) g = "runtime: garbage collector"
  else if (f ~ /^runtime\.(malloc|memclr|.mspan..writeHeapBits|newobject|makeslice|growslice|convT|nextFreeFast|.mcache|.mcentral|heapSetType|deductAssistCredit|memmove|makemap|publicationBarrier|gcStart|.mheap)/) g = "runtime: allocation, copies"
  else if (f ~ /^runtime\.|^internal\/runtime|^sync|^internal\/sync|^aeshash|^memeqbody|^indexbyte|^gogo|^_/) g = "runtime: scheduler, netpoller, locks, timers"
  else if (f ~ /go-redis/) g = "go-redis"
  else if (f ~ /actorlimit\/service\./) g = "service (codec, matching)"
  else if (f ~ /redisstore/) g = "redisstore"
  else if (f ~ /actorlimit\/actorlimit\/actor\.|actorlimit\/actorlimit\.[(a-z]/) g = "limiter and actor"
  else if (f ~ /protobuf/) g = "protobuf"
  else if (f ~ /^bufio|^internal\/poll|^net\.|^syscall|^time\.|^internal\/strconv|^strconv|^context|^unicode/) g = "standard library: bufio, poll, time, strconv"
  else g = "other"
  s[g] += d; t += d
} END { for (g in s) printf "%8.0f  %s\n", s[g], g; printf "%8.0f  total\n", t }' | sort -rn
