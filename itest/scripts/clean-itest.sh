#!/usr/bin/env bash
# Removes what a crashed test or demo run left behind: harness namespaces
# (every name starts with "syt"), the processes the harness started (their
# command lines name /tmp/switchyard-itest), and the run directories.
set -uo pipefail
base=/tmp/switchyard-itest

for pid in $(grep -l -a "$base" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
  [ "$pid" = "$$" ] && continue
  kill -9 "$pid" 2>/dev/null && echo "clean-itest: killed $pid ($(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null | cut -c1-80))"
done
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^syt'); do
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  ip netns del "$ns" && echo "clean-itest: deleted namespace $ns"
done
for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^syt'); do
  ip link del "$link" 2>/dev/null && echo "clean-itest: deleted link $link"
done
rm -rf "$base"
exit 0
