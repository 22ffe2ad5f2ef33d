#!/usr/bin/env bash
# Runs every benchmark COUNT times (default 5) and prints per-benchmark
# medians with benchstat. Ratios against baselines are reported by the
# benchmarks themselves as custom metrics measured in the same run
# (e.g. "ratio" for ours/ovs-ofctl), since the machine is too noisy to
# compare numbers taken at different times.
set -euo pipefail
count=${1:-5}
cd "$(git rev-parse --show-toplevel)"
out=bin/bench
mkdir -p "$out"
mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Benchmark' host controller cni plugins itest 2>/dev/null | xargs -r -n1 dirname | sort -u | sed 's|^|./|')
if [ ${#pkgs[@]} -eq 0 ]; then
  echo "bench: no benchmarks found"; exit 1
fi
: > "$out/bench.txt"
for p in "${pkgs[@]}"; do
  echo "bench: $p"
  go test -run '^$' -bench . -benchmem -count "$count" -timeout 60m "$p" | tee -a "$out/bench.txt"
done
if [ -d sdk ] && grep -rlq --include='*_test.go' '^func Benchmark' sdk; then
  (cd sdk && go test -run '^$' -bench . -benchmem -count "$count" ./...) | tee -a "$out/bench.txt"
fi
GOBIN="$PWD/bin" go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
echo; echo "== medians over $count runs (benchstat), raw results in $out/bench.txt =="
bin/benchstat "$out/bench.txt"
