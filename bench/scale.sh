#!/usr/bin/env bash
# Scaling benchmark: bench/scale.sh N... (default 1)
#
# For each N, on the same vdev (net_pcap with N RX queues, each replaying
# the sample Ceph capture in a loop; TX dropped by the PMD in N queues;
# burst 32; main lcore 0, forwarding lcores 1..N):
#   - dpdk-testpmd --forward-mode=io     --rxq=N --txq=N --nb-cores=N
#   - dpdk-testpmd --forward-mode=5tswap --rxq=N --txq=N --nb-cores=N
#   - cephdpdkd with N poll loops, each owning one RX queue, classifying
#     every packet and dispatching it to four forwarder services (each
#     loop forwards its own packets on its own TX queue)
# each for BENCH_SECONDS, and prints a table of Mpps with the ratios.
#
# Mpps come from each program's own per-second counters, the median of
# the samples after BENCH_WARMUP seconds: testpmd's Rx-pps, and the sum of
# cephdpdkd's per-service dispatch rates (packets that reached a service;
# ring drops are reported apart and excluded).
#
# Environment:
#   BENCH_SECONDS  run time per program (12)
#   BENCH_WARMUP   per-second samples to skip (3)
#   BENCH_ROUNDS   rounds per N (1): the three programs run in turn, each
#                  round, and the table gives each program's median over
#                  the rounds; every round's figures go to the log
#   BENCH_OUT      folder for the table (scale.md) and logs (bench/out)
#   BENCH_CARRY    a folder made by bench/carry.sh: run its dpdk-testpmd and
#                  cephdpdkd through its own loader and libraries, loading
#                  the PMDs in its pmds/ (for a machine without DPDK).
#                  Unset: Debian's dpdk-testpmd, and cephdpdkd built here.
#
# Paths are relative to the repository root, where the script runs. A row
# whose N needs more CPUs than this process may use (N+1) is skipped.
set -uo pipefail
cd "$(dirname "$0")/.."

[ $# -gt 0 ] || set -- 1
secs="${BENCH_SECONDS:-12}"
warm="${BENCH_WARMUP:-3}"
rounds="${BENCH_ROUNDS:-1}"
out="${BENCH_OUT:-bench/out}"
carry="${BENCH_CARRY:-}"
pcap=configs/sample/ceph-node.pcap
case "$rounds" in
'' | *[!0-9]* | 0) echo "scale.sh: BENCH_ROUNDS must be a positive number, not '$rounds'" >&2; exit 2 ;;
esac
for n in "$@"; do
	case "$n" in
	'' | *[!0-9]* | 0) echo "scale.sh: N must be a positive number, not '$n'" >&2; exit 2 ;;
	esac
done
mkdir -p "$out/logs" || exit 1

log() { echo "[$(date +%T)] $*"; }

loader=()
dflag=()
if [ -n "$carry" ]; then
	for f in "$carry/lib/ld-linux-x86-64.so.2" "$carry/dpdk-testpmd" "$carry/cephdpdkd" "$carry/pmds"; do
		[ -e "$f" ] || { echo "scale.sh: $f is missing: build the folder with bench/carry.sh" >&2; exit 1; }
	done
	# A copy may have lost the mode bits; only the loader needs one (it
	# maps the binaries itself).
	[ -x "$carry/lib/ld-linux-x86-64.so.2" ] || chmod +x "$carry/lib/ld-linux-x86-64.so.2"
	loader=("$carry/lib/ld-linux-x86-64.so.2" --library-path "$carry/lib")
	dflag=(-d "$carry/pmds")
	testpmd="$carry/dpdk-testpmd"
	cdd="$carry/cephdpdkd"
	[ -e "$carry/ceph-node.pcap" ] && pcap="$carry/ceph-node.pcap"
else
	. scripts/env.sh
	testpmd=$(command -v dpdk-testpmd) || { echo "scale.sh: dpdk-testpmd not found" >&2; exit 1; }
	cdd="$out/cephdpdkd"
	log "building cephdpdkd"
	./scripts/build-bpf.sh && go build -o "$cdd" ./cmd/cephdpdkd || exit 1
fi
[ -r "$pcap" ] || { echo "scale.sh: $pcap is missing" >&2; exit 1; }
cpus=$(nproc)
log "$cpus CPUs; N = $*; $secs s per program; capture $pcap"

# devargs: N RX queues replaying the capture; no TX argument: TX drops.
vdev() {
	local d="net_pcap0" i
	for ((i = 0; i < $1; i++)); do d+=",rx_pcap=$pcap"; done
	echo "$d,infinite_rx=1"
}

# median prints the median of the per-second numbers on stdin after the
# first $warm (after only the first, partial one when a slow start left
# fewer than $warm + 3), or nan.
median() {
	awk -v warm="$warm" '{v[NR]=$1} END {
		skip = NR >= warm + 3 ? warm : 1
		for (i = skip + 1; i <= NR; i++) print v[i]
	}' | sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "nan"; exit} printf "%.3f\n", v[int((NR+1)/2)]}'
}

testpmd_mpps() {
	local n=$1 mode=$2 f="$out/logs/testpmd-$2-N$1.log"
	timeout --signal=INT --kill-after=10 "$secs" ${loader[@]+"${loader[@]}"} "$testpmd" \
		-l "0-$n" --main-lcore 0 --no-huge -m $((1024 + 256 * n)) --no-pci \
		--file-prefix "cdd-scale-$mode" --log-level='*:warning' ${dflag[@]+"${dflag[@]}"} \
		--vdev "$(vdev "$n")" -- \
		--rxq="$n" --txq="$n" --nb-cores="$n" --total-num-mbufs=$((16384 * n)) \
		--forward-mode="$mode" --port-topology=loop --burst=32 \
		--stats-period 1 --auto-start </dev/null >"$f" 2>&1
	grep -o 'Rx-pps: *[0-9]*' "$f" | awk '{printf "%.6f\n", $2/1e6}' | median
}

# cephdpdkd's configuration for N loops: bench/datapath.yaml filled in,
# with loop k on lcore k+1 receiving RX queue k.
cdd_config() {
	local n=$1 k extra='"--log-level=*:warning"'
	for k in ${dflag[@]+"${dflag[@]}"}; do extra+=", \"$k\""; done
	sed -e "s|{{lcores}}|0-$n|" -e "s|{{memory_mb}}|$((1024 + 256 * n))|" -e "s|{{extra_args}}|$extra|" \
		-e "s|{{device}}|$(vdev "$n")|" -e "s|{{queues}}|$n|" bench/datapath.yaml
	for ((k = 0; k < n; k++)); do echo "  - {lcore: $((k + 1)), rx_queues: [$k]}"; done
}

# The status line (--status=on) is one sample a second: "rx R | svc R
# [drop D] | ... | malformed M | ...", R as "X Mpps", "X kpps" or "X pps".
# Prints per sample: dispatched Mpps (all services), rx Mpps, drops.
cdd_samples() {
	tr '\r' '\n' | awk -F' [|] ' '
	function mpps(s,   a) { split(s, a, " "); return a[2] * (a[3] == "Mpps" ? 1 : a[3] == "kpps" ? 1e-3 : 1e-6) }
	{ sub(/^.*\[K/, "") } # the terminal escape that starts each redraw
	/^rx / {
		rx = mpps($1); sum = 0; drops = 0
		for (i = 2; i <= NF && $i !~ /^malformed/; i++) {
			sum += mpps($i)
			if (match($i, /drop [0-9]+/)) drops += substr($i, RSTART + 5, RLENGTH - 5)
		}
		printf "%.6f %.6f %d\n", sum, rx, drops
	}'
}

cdd_mpps() {
	local n=$1 f="$out/logs/cephdpdkd-N$1"
	timeout --signal=INT --kill-after=10 $((secs + 30)) ${loader[@]+"${loader[@]}"} "$cdd" \
		run --config "$f.yaml" --status=on --duration "${secs}s" >"$f.status" 2>"$f.log"
	local rc=$?
	cdd_samples <"$f.status" >"$f.samples"
	if [ $rc -ne 0 ] || grep -qE 'MBUF LEAK|level=ERROR' "$f.log"; then
		echo "cephdpdkd N=$n: exit status $rc; see $f.log" >&2
		tail -n 5 "$f.log" >&2
		echo nan
		return
	fi
	awk '{print $1}' "$f.samples" | median
}

# middle prints the median of its arguments (the lower middle one of an
# even count), or nan if any is nan.
middle() {
	printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} /nan/ {bad = 1} END {if (bad) print "nan"; else print v[int((NR + 1) / 2)]}'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.2f\n", a / b}'; }

# Every row's cephdpdkd configuration must pass validation before any
# program runs: a mistake found at N=14 would waste the whole run.
for n in "$@"; do
	f="$out/logs/cephdpdkd-N$n"
	cdd_config "$n" >"$f.yaml"
	if ! ${loader[@]+"${loader[@]}"} "$cdd" check-config --offline "$f.yaml" >"$f.check" 2>&1; then
		echo "scale.sh: the N=$n configuration is refused:" >&2
		cat "$f.check" >&2
		exit 1
	fi
done
log "configurations checked"

table="$out/scale.md"
{
	echo "| N lcores | testpmd io | testpmd 5tswap | cephdpdkd | ÷5tswap | ÷io |"
	echo "|---|---|---|---|---|---|"
} >"$table"
for n in "$@"; do
	if [ $((n + 1)) -gt "$cpus" ]; then
		log "N=$n: skipped, needs $((n + 1)) CPUs and this process may use $cpus"
		echo "| $n | n/a | n/a | n/a | | |" >>"$table"
		continue
	fi
	ios=() tswaps=() cs=()
	for ((r = 1; r <= rounds; r++)); do
		[ "$rounds" -eq 1 ] || log "N=$n round $r of $rounds"
		io=$(testpmd_mpps "$n" io)
		log "N=$n testpmd io:     $io Mpps"
		tswap=$(testpmd_mpps "$n" 5tswap)
		log "N=$n testpmd 5tswap: $tswap Mpps"
		c=$(cdd_mpps "$n")
		extra=$(awk 'NR > '"$warm"' {rx += $2; d += $3; k++} END {if (k) printf "rx %.3f Mpps, ring drops %d/s", rx / k, d / k}' "$out/logs/cephdpdkd-N$n.samples" 2>/dev/null)
		log "N=$n cephdpdkd:      $c Mpps dispatched ($extra): ÷5tswap $(ratio "$c" "$tswap"), ÷io $(ratio "$c" "$io")"
		ios+=("$io") tswaps+=("$tswap") cs+=("$c")
	done
	io=$(middle "${ios[@]}") tswap=$(middle "${tswaps[@]}") c=$(middle "${cs[@]}")
	echo "| $n | $io | $tswap | $c | $(ratio "$c" "$tswap") | $(ratio "$c" "$io") |" >>"$table"
done
model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
echo "
bench/scale.sh $*: $cpus CPUs ($model), $secs s per program, $rounds round(s), $(date -u '+%Y-%m-%d %H:%M UTC')" >>"$table"
log "table ($table):"
cat "$table"
