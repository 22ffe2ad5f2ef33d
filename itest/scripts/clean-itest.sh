#!/usr/bin/env bash
# Removes what crashed test or demo runs left behind: harness namespaces
# (named syt<run id>-…), the processes the harness started (their command
# lines name /tmp/switchyard-itest/syt<run id>-…), and run directories.
# A run whose owning process is still alive (its pid is in
# /tmp/switchyard-itest/owner-syt<run id>) is left alone, so this is safe to
# run while other tests are running.
set -uo pipefail
base=/tmp/switchyard-itest

alive() { # run id (syt + 6 hex)
  local f="$base/owner-$1" pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

for f in /proc/[0-9]*/cmdline; do
  pid=${f#/proc/}; pid=${pid%/cmdline}
  [ "$pid" = "$$" ] && continue
  cmd=$({ tr '\0' ' ' <"$f"; } 2>/dev/null) || continue
  run=$(grep -o "$base/syt[0-9a-f]\{6\}" <<<"$cmd" | head -1 | sed "s|$base/||")
  [ -n "$run" ] || continue
  alive "$run" && continue
  kill -9 "$pid" 2>/dev/null && echo "clean-itest: killed $pid (${cmd:0:80})"
done
# Processes chrooted into a run's directory (itest/images runs the OVS
# image's entrypoint that way; its command line names no run directory).
for r in /proc/[0-9]*/root; do
  pid=${r#/proc/}; pid=${pid%/root}
  root=$(readlink "$r" 2>/dev/null) || continue
  run=$(grep -o "^$base/syt[0-9a-f]\{6\}" <<<"$root" | sed "s|$base/||")
  [ -n "$run" ] || continue
  alive "$run" && continue
  kill -9 "$pid" 2>/dev/null && echo "clean-itest: killed $pid (chrooted in $root)"
done
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^syt[0-9a-f]\{6\}-'); do
  alive "${ns:0:9}" && continue
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  ip netns del "$ns" && echo "clean-itest: deleted namespace $ns"
done
if [ -d "$base" ]; then
  for d in "$base"/syt[0-9a-f]*; do
    [ -e "$d" ] || continue
    run=$(basename "$d" | cut -c1-9)
    alive "$run" && continue
    rm -rf "$d" && echo "clean-itest: removed $d"
  done
  for f in "$base"/owner-syt*; do
    [ -e "$f" ] || continue
    alive "${f#$base/owner-}" || rm -f "$f"
  done
fi
# Work directories of an interrupted build-images (make images), unless one
# is running now.
if ! pgrep -x build-images >/dev/null; then
  for d in /tmp/switchyard-images-*; do
    [ -e "$d" ] && rm -rf "$d" && echo "clean-itest: removed $d"
  done
fi
exit 0
