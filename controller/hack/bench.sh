#!/usr/bin/env bash
# Runs the controller benchmarks, each workload in its own process so peak
# RSS (VmHWM) belongs to that workload alone, COUNT times (default 3), and
# prints every run plus the median of ns/op and peakRSS-GiB per benchmark.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
count="${COUNT:-3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$root"
GOTOOLCHAIN=local go test -c -o "$tmp/compute.test" ./controller/compute
GOTOOLCHAIN=local go test -c -o "$tmp/distribute.test" ./controller/distribute
run() { # binary bench benchtime
  for _ in $(seq "$count"); do
    "$1" -test.run '^$' -test.bench "^$2\$" -test.benchtime "$3" | grep '^Benchmark' | tee -a "$tmp/out"
  done
}
for b in InitSmallNamespaces InitLargeNamespaces InitOneNamespace InitNetpolPerPod InitClusterScopedNetpol; do
  run "$tmp/compute.test" "Benchmark$b" 1x
done
run "$tmp/compute.test" BenchmarkPodLabelChangeSmallNamespaces 20000x
run "$tmp/distribute.test" BenchmarkPodLabelChangeSmallNamespacesHub 20000x
echo "--- medians"
awk '{
  name=$1; sub(/-[0-9]+$/, "", name)
  for (i = 3; i < NF; i += 2) { k = name " " $(i+1); v[k] = v[k] " " $i; keys[k] = 1 }
}
END {
  for (k in keys) {
    n = split(substr(v[k], 2), a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    printf "%-60s %s\n", k, a[int((n + 1) / 2)]
  }
}' "$tmp/out" | sort
