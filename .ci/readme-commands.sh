#!/usr/bin/env bash
# Runs the shell blocks (```sh) of README.md, or of the Markdown files
# given, as a user who pastes them would, against the real programs (go,
# redis-server, curl), and fails if any block fails. Each block runs in
# bash with -euo pipefail, from the repository's root, in a process group
# of its own that is killed when the block ends (or after BLOCK_TIMEOUT
# seconds, default 120): a server a block starts in the background never
# outlives it.
#
# The line before a block's fence may say how to run it:
#   <!-- sh: skip -->           not run (a long-running or illustrative block)
#   <!-- sh: new-module -->     run in an empty folder beside a link named
#                               actorlimit to this repository (the README's
#                               install steps); then the file's first Go block
#                               that is a whole program is saved as
#                               hello/main.go there
#   <!-- sh: in-new-module -->  run in that folder's hello/
# A line whose comment starts with "→" promises what the block prints: the
# block fails unless its output holds the text after the arrow, as in
#   go run .    # → allowed: true count: 1
# The test command, `go test -race -shuffle=on -count=1 ./...`, is not run
# here: .ci/run runs it, and this script checks that .ci/run still does.
#
# So that a run never depends on what else the machine is doing, the
# blocks' fixed ports (6399, 8080, 8081, 8082, 9090) are replaced by free
# ones, and /tmp/ by a folder of this run's own.
#
# Usage: .ci/readme-commands.sh [FILE.md ...]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
block_timeout=${BLOCK_TIMEOUT:-120}
test_command='go test -race -shuffle=on -count=1 ./...'
ports=(6399 8080 8081 8082 9090)

work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
mkdir -p "$work/tmp" "$work/module"
ln -s "$repo" "$work/module/actorlimit"

if ! grep -qxF "$test_command" .ci/run; then
  echo "readme-commands: .ci/run no longer runs the README's test command: $test_command"
  exit 1
fi

# free_port prints a port of 127.0.0.1 that nothing listens on and that
# this run has not handed out yet, below the kernel's ephemeral range (where
# a client's connection, to Redis say, could take it before the server that
# is handed it listens).
used=" "
read -r ephemeral _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || ephemeral=32768
free_port() {
  local p
  while :; do
    p=$((10000 + RANDOM % (ephemeral - 10000)))
    case "$used" in *" $p "*) continue ;; esac
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      used+="$p "
      echo "$p"
      return
    fi
  done
}
subst=(-e "s#/tmp/#$work/tmp/#g")
for p in "${ports[@]}"; do
  subst+=(-e "s/\\b$p\\b/$(free_port)/g")
done

# split FILE writes FILE's shell blocks to $work/blocks/N.sh, and a line
# "N<TAB>line<TAB>marker" for each to $work/blocks/index; and its first Go
# block that starts with "package main" to $work/blocks/program.go.
split() {
  rm -rf "$work/blocks"
  mkdir -p "$work/blocks"
  awk -v dir="$work/blocks" '
    !fence && /^```/ {
      fence = 1; lang = substr($0, 4); out = ""
      if (lang == "sh" || lang == "bash") {
        n++; out = dir "/" n ".sh"; printf "" > out
        marker = prev; sub(/^[ \t]+/, "", marker); sub(/[ \t]+$/, "", marker)
        printf "%d\t%d\t%s\n", n, NR, marker > (dir "/index")
      } else if (lang == "go" && !program) {
        goblock = 1; first = 1
      }
      prev = $0; next
    }
    fence && /^```[ \t]*$/ {
      fence = 0
      if (out != "") close(out)
      if (goblock && program) close(dir "/program.go")
      out = ""; goblock = 0; prev = $0; next
    }
    fence && out != "" { print > out }
    fence && goblock {
      if (first && $0 != "package main") goblock = 0
      else { program = 1; print > (dir "/program.go") }
      first = 0
    }
    { prev = $0 }
  ' "$1"
  touch "$work/blocks/index"
}

# run_block N DIR LOG runs block N from DIR, logging to LOG; it returns
# the block's status, having killed what the block left running.
run_block() {
  local script="$work/blocks/$1.run.sh" pid status
  {
    echo 'set -euo pipefail'
    # The test command: checked above to be .ci/run's, not run again.
    sed "${subst[@]}" "$work/blocks/$1.sh" |
      awk -v tc="$test_command" '{ c = $0; sub(/[ \t]*#.*$/, "", c); sub(/^[ \t]+/, "", c); if (c == tc) print ": " $0; else print }'
  } >"$script"
  # timeout puts itself and the block in a process group of their own,
  # and on expiry signals the whole group.
  (cd "$2" && exec timeout -k 5 "$block_timeout" bash "$script") </dev/null >"$3" 2>&1 &
  pid=$!
  if wait "$pid"; then status=0; else status=$?; fi
  kill -TERM -- "-$pid" 2>/dev/null || true
  [ "$status" = 0 ] || return "$status"
  local want
  while IFS= read -r want; do
    if ! grep -qF -- "$want" "$3"; then
      echo "the output lacks what the block promises: $want" >>"$3"
      return 1
    fi
  done < <(sed -n 's/.*# → \(.*[^ ]\) *$/\1/p' "$work/blocks/$1.sh" | sed "${subst[@]}")
}

failed=0
ran=0
for file in "${@:-README.md}"; do
  split "$file"
  while IFS=$'\t' read -r n line marker; do
    dir=$repo
    case "$marker" in
      '<!-- sh: skip -->')
        echo "-- $file line $line: skipped"
        continue
        ;;
      '<!-- sh: new-module -->')
        dir=$work/module
        ;;
      '<!-- sh: in-new-module -->')
        dir=$work/module/hello
        ;;
    esac
    log="$work/block-$n.log"
    start=$SECONDS
    if run_block "$n" "$dir" "$log"; then
      echo "-- $file line $line: ok ($((SECONDS - start)) s)"
    else
      status=$?
      echo "-- $file line $line: FAILED (status $status, $((SECONDS - start)) s). The block:"
      sed 's/^/    /' "$work/blocks/$n.sh"
      echo "   its output:"
      sed 's/^/    /' "$log"
      failed=$((failed + 1))
    fi
    ran=$((ran + 1))
    if [ "$marker" = '<!-- sh: new-module -->' ]; then
      if [ ! -s "$work/blocks/program.go" ] || [ ! -d "$work/module/hello" ]; then
        echo "-- $file line $line: no Go program block to save as hello/main.go, or no hello/ folder"
        failed=$((failed + 1))
      else
        cp "$work/blocks/program.go" "$work/module/hello/main.go"
      fi
    fi
  done <"$work/blocks/index"
done

echo "readme-commands: $ran blocks run, $failed failed, in ${SECONDS} s"
[ "$failed" = 0 ] && [ "$ran" -gt 0 ]
