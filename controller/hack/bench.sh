#!/usr/bin/env bash
# Runs the controller benchmarks, each workload in its own process so peak
# RSS (VmHWM) belongs to that workload alone, COUNT times (default 3), and
# prints every run plus the median of every metric per benchmark, then the
# whole-controller medians as ratios to Antrea's full-controller test
# (TestInitXLargeScale*, figures measured on this machine, issue 13).
# WORKLOADS limits the run, e.g. WORKLOADS="LargeNamespaces OneNamespace".
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
count="${COUNT:-3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$root"
GOTOOLCHAIN=local go test -c -o "$tmp/compute.test" ./controller/compute
GOTOOLCHAIN=local go test -c -o "$tmp/distribute.test" ./controller/distribute
GOTOOLCHAIN=local go test -c -o "$tmp/app.test" ./controller/app
workloads="${WORKLOADS:-SmallNamespaces LargeNamespaces OneNamespace NetpolPerPod ClusterScopedNetpol}"
run() { # binary bench benchtime
  for _ in $(seq "$count"); do
    "$1" -test.run '^$' -test.bench "^$2\$" -test.benchtime "$3" | grep '^Benchmark' | tee -a "$tmp/out"
  done
}
for w in $workloads; do
  # The engine alone, the whole controller over fake clientsets, and the
  # baseline beside the latter: the fake clientset and default informers
  # with no-op handlers.
  run "$tmp/compute.test" "BenchmarkInit$w" 1x
  run "$tmp/app.test" "BenchmarkControllerInit$w" 1x
  run "$tmp/app.test" "BenchmarkInformersOnly$w" 1x
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
}' "$tmp/out" | sort | tee "$tmp/medians"
echo "--- whole controller against Antrea's full-controller test (time s, peak RSS GiB; targets 0.2x and 0.3x)"
awk '
BEGIN {
  at["SmallNamespaces"] = 7.23; ar["SmallNamespaces"] = 2.12
  at["LargeNamespaces"] = 2.89; ar["LargeNamespaces"] = 1.20
  at["OneNamespace"] = 3.48;    ar["OneNamespace"] = 0.94
  at["NetpolPerPod"] = 34.6;    ar["NetpolPerPod"] = 0.28   # 34.6-51 s; the lower bound
}
$1 ~ /^BenchmarkControllerInit/ { w = substr($1, 24); v[w, $2] = $3 }
END {
  for (k in v) { split(k, p, SUBSEP); ws[p[1]] = 1 }
  for (w in ws) {
    if (w in at)
      printf "%-20s %6.2f s = %.3fx of %.2f s   %5.2f GiB = %.2fx of %.2f GiB\n", w, v[w, "s"], v[w, "s"] / at[w], at[w], v[w, "peakRSS-GiB"], v[w, "peakRSS-GiB"] / ar[w], ar[w]
    else
      printf "%-20s %6.2f s   %5.2f GiB   (no Antrea figure)\n", w, v[w, "s"], v[w, "peakRSS-GiB"]
  }
}' "$tmp/medians" | sort
