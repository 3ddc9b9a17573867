#!/usr/bin/env bash
# Fails when git tracks a built program or a file larger than 1 MiB outside
# a testdata/ folder, naming each file and why: a clone downloads every such
# file forever. A script (a file that starts with "#!") may be executable.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1 << 20))
bad=0
while IFS= read -r -d '' entry; do
  mode=${entry%% *}
  path=${entry#*$'\t'}
  [ -f "$path" ] || continue # deleted in the work tree
  case "/$path" in */testdata/*) continue ;; esac
  size=$(stat -c %s -- "$path")
  if [ "$size" -gt "$limit" ]; then
    echo "$path: $size bytes, over 1 MiB: keep it out of git (or under a testdata/ folder if a test needs it)"
    bad=1
  fi
  magic=$(head -c 4 -- "$path" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
  7f454c46 | cffaedfe | cefaedfe | feedface | feedfacf | 4d5a*)
    echo "$path: a compiled program (ELF, Mach-O or PE): build it, don't commit it (.gitignore)"
    bad=1
    continue
    ;;
  esac
  if [ "$mode" = 100755 ] && [ "$(head -c 2 -- "$path")" != '#!' ]; then
    echo "$path: executable but not a script: clear its executable bit (git update-index --chmod=-x) or remove it"
    bad=1
  fi
done < <(git ls-files -s -z) # "MODE OBJECT STAGE<tab>PATH", NUL-terminated
exit "$bad"
