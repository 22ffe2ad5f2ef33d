#!/usr/bin/env bash
# Runs every benchmark COUNT times (default 5) and prints per-benchmark
# medians with benchstat. Baseline comparisons (ours vs ovs-ofctl, plugin path
# vs direct, our CNI vs the bridge plugin, the service plugin vs kube-proxy
# nftables) are measured inside one benchmark run and reported as extra
# metrics, since numbers taken at different times on a noisy 2-core machine
# do not compare. make bench builds kube-proxy first (make tools-bench).
set -euo pipefail
count=${1:-5}
cd "$(git rev-parse --show-toplevel)"
out=bin/bench
mkdir -p "$out"
: > "$out/bench.txt"

# Micro-benchmarks run for the default benchtime; the whole-system ones
# (100k flows, 100 pods, 100k-pod policy workloads) take seconds per
# iteration, so one iteration per run is the measurement.
micro=(./host/openflow ./host/agent ./host/ifstore ./sdk/internal/fromproto ./plugins/netpol/flows ./plugins/egress/placement)
system=(./itest/openflow ./itest/host ./itest/cni ./itest/ovs ./itest/nodeagent ./itest/tunnel ./itest/netpolmodel ./itest/service ./itest/egress ./itest/ops ./itest/realnode)

run() { # benchtime pkg
  echo "bench: $2" >&2
  if [[ $2 == ./sdk/* ]]; then
    (cd sdk && go test -run '^$' -bench . -benchmem -count "$count" -benchtime "$1" -timeout 90m "./${2#./sdk/}")
  else
    go test -run '^$' -bench . -benchmem -count "$count" -benchtime "$1" -timeout 90m "$2"
  fi
}
for p in "${micro[@]}"; do run 1s "$p" | tee -a "$out/bench.txt"; done
for p in "${system[@]}"; do run 1x "$p" | tee -a "$out/bench.txt"; done
# The controller workloads each run in a process of their own, so that each
# one's peak RSS is its own (see controller/hack/bench.sh).
echo "bench: controller workloads" >&2
COUNT="$count" bash controller/hack/bench.sh | tee "$out/controller.txt"
# Only the benchmark lines go to benchstat, under their package header.
{ echo "pkg: switchyard.dev/switchyard/controller"; grep -E '^Benchmark[^ ]*-[0-9]+[[:space:]]' "$out/controller.txt"; } >> "$out/bench.txt"

GOBIN="$PWD/bin" go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
echo
echo "== medians over $count runs (benchstat); raw results in $out/bench.txt =="
bin/benchstat "$out/bench.txt"
