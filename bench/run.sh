#!/usr/bin/env bash
# Data-path benchmark on one forwarding lcore: bench/scale.sh 1 (testpmd
# io, testpmd 5tswap and cephdpdkd, one after another on the same vdev),
# then the ratios as ratio_vs_5tswap= and ratio_vs_io=.
#
# Figures on a shared machine drift; the ratios, measured minutes apart in
# one run, are what to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
BENCH_SECONDS="${BENCH_SECONDS:-10}" BENCH_OUT="$out" bash bench/scale.sh 1
awk -F' *[|] *' '$2 == "1" {print "ratio_vs_5tswap=" $6; print "ratio_vs_io=" $7}' "$out/scale.md"
