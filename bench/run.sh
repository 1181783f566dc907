#!/usr/bin/env bash
# Data-path benchmark: testpmd io, testpmd 5tswap and cephdpdkd, one after
# another on the same vdev (net_pcap replaying the sample Ceph capture in a
# loop, TX dropped by the PMD), each with one forwarding lcore (lcore 1)
# and the main lcore on CPU 0. Prints Mpps for each, then the ratios.
#
# Figures on a shared machine drift; the ratios, measured minutes apart in
# one run, are what to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
secs="${BENCH_SECONDS:-10}"
warm=3
pcap="$PWD/configs/sample/ceph-node.pcap"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/cephdpdkd" ./cmd/cephdpdkd

# testpmd prints "Rx-pps: N" per port every second; average after warm-up.
testpmd_mpps() {
	local mode=$1
	timeout --signal=INT --kill-after=5 "$secs" dpdk-testpmd -l 0-1 --main-lcore 0 --no-huge -m 1024 --no-pci \
		--file-prefix "cdd-bench-$mode" --log-level='*:warning' \
		--vdev "net_pcap0,rx_pcap=$pcap,infinite_rx=1" -- \
		--total-num-mbufs=16384 --forward-mode="$mode" --port-topology=loop --burst=32 \
		--stats-period 1 --auto-start </dev/null >"$work/$mode.log" 2>&1 || true
	# Median of the per-second samples after warm-up.
	grep -o 'Rx-pps: *[0-9]*' "$work/$mode.log" | awk '{print $2}' | tail -n +$((warm + 1)) | sort -n |
		awk '{v[NR]=$1} END {if (NR==0) {print "nan"; exit} printf "%.3f\n", v[int((NR+1)/2)]/1e6}'
}

# cephdpdkd: scrape its queue counter twice after warm-up.
cephdpdkd_mpps() {
	sed "s|{{pcap}}|$pcap|" bench/datapath.yaml >"$work/bench.yaml"
	"$work/cephdpdkd" run --config "$work/bench.yaml" --status=off --duration "${secs}s" 2>"$work/cephdpdkd.log" &
	local pid=$!
	sleep "$warm"
	local a b t0 t1
	t0=$(date +%s.%N); a=$(scrape); sleep $((secs - warm - 2)); t1=$(date +%s.%N); b=$(scrape)
	wait "$pid"
	awk -v a="$a" -v b="$b" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.3f\n", (b-a)/(t1-t0)/1e6}'
}
scrape() {
	curl -s http://127.0.0.1:9478/metrics | awk '/^cephdpdkd_queue_rx_packets_total/ {s+=$2} END {printf "%d\n", s}'
}

io=$(testpmd_mpps io)
echo "testpmd io:       $io Mpps"
tswap=$(testpmd_mpps 5tswap)
echo "testpmd 5tswap:   $tswap Mpps"
cdd=$(cephdpdkd_mpps)
echo "cephdpdkd:        $cdd Mpps (rx → classify → 4 rings → forwarders → tx)"
grep -E 'MBUF LEAK|level=ERROR' "$work/cephdpdkd.log" && { echo "cephdpdkd reported errors" >&2; exit 1; }
awk -v c="$cdd" -v t="$tswap" 'BEGIN {printf "ratio_vs_5tswap=%.2f\n", c/t}'
awk -v c="$cdd" -v i="$io" 'BEGIN {printf "ratio_vs_io=%.2f\n", c/i}'
