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
# Real nodes (itest/realnode): pods live in a cgroup root named after the
# node (/syt<run>-k<i> in every hierarchy) and outlive kubelet and
# containerd, so they are killed through their cgroups, which are then
# removed deepest first.
for h in $(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts); do
  for root in "$h"/syt[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-*; do
    [ -d "$root" ] || continue
    run=$(basename "$root" | cut -c1-9)
    alive "$run" && continue
    for i in 1 2 3 4 5; do
      find "$root" -name cgroup.procs -o -name tasks 2>/dev/null | xargs -r cat 2>/dev/null | xargs -r kill -9 2>/dev/null
      find "$root" -depth -type d -exec rmdir {} + 2>/dev/null
      [ -d "$root" ] || break
      sleep 0.2
    done
    [ -d "$root" ] && echo "clean-itest: could not remove cgroup $root" || echo "clean-itest: removed cgroup $root"
  done
done
# A real node's mount namespace is held by a bind mount of its nsfs file
# under the node's run directory; unmounting it (with nothing left inside)
# frees the namespace and every mount in it.
if [ -d "$base" ]; then
  awk '{print $2}' /proc/self/mounts | grep "^$base/syt[0-9a-f]\{6\}-" | sort -r | while read -r m; do
    run=$(sed "s|$base/||" <<<"$m" | cut -c1-9)
    alive "$run" && continue
    umount -l "$m" && echo "clean-itest: unmounted $m"
  done
fi
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
