#!/usr/bin/env bash
# bench/carry.sh [DIR]: build a self-contained folder (default
# .bench-carry, git-ignored) that runs bench/scale.sh on a machine without
# DPDK: cephdpdkd built here, Debian's dpdk-testpmd, the sample capture,
# lib/ (the ldd closure of both binaries and of the PMDs, with
# ld-linux-x86-64.so.2) and pmds/ (only the PMDs the benchmark loads, each
# named *.so, none that lib/ already holds).
#
# On the other machine, from the repository root of a copy of the working
# tree with DIR in it:
#   sh DIR/run.sh 1 2 4 8 14     # BENCH_OUT (default: $OUT, else bench/out)
# Each binary runs as DIR/lib/ld-linux-x86-64.so.2 --library-path DIR/lib
# BIN, never with LD_LIBRARY_PATH: the host's own tools (grep, awk) may need
# a newer libc than Debian 12's.
#
# Check it here with Debian's plugin directory hidden, as it is there:
#   unshare -m sh -c 'mount -t tmpfs none /usr/lib/x86_64-linux-gnu/dpdk && DIR/run.sh 1'
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
./scripts/build-bpf.sh
dir="${1:-.bench-carry}"
case "$dir" in
/* | *..* | */*) echo "carry.sh: DIR must be a folder name in the repository root, not $dir" >&2; exit 2 ;;
esac
pmdsrc=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
pmds=(librte_net_pcap librte_mempool_ring)

rm -rf "$dir"
mkdir -p "$dir/lib" "$dir/pmds"
echo "building cephdpdkd"
go build -trimpath -ldflags="-s -w" -o "$dir/cephdpdkd" ./cmd/cephdpdkd
cp -L "$(command -v dpdk-testpmd)" "$dir/dpdk-testpmd"
cp configs/sample/ceph-node.pcap "$dir/"

# lib/: every library the binaries and PMDs load, under the name the
# loader looks for (the soname ldd prints), symlinks resolved.
objs=("$dir/cephdpdkd" "$dir/dpdk-testpmd")
for p in "${pmds[@]}"; do objs+=("$pmdsrc/$p.so"); done
for o in "${objs[@]}"; do
	ldd "$o" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3} $1 ~ /^\// {print $1, $1}'
done | sort -u | while read -r name path; do
	cp -L "$path" "$dir/lib/$(basename "$name")"
done
[ -e "$dir/lib/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$dir/lib/"

# pmds/: EAL's -d loads only *.so and *.so.23.0 there. A PMD lib/ holds
# already would load twice, its drivers registering on one copy and the
# probe using the other.
for p in "${pmds[@]}"; do
	if [ -e "$dir/lib/$p.so.23" ]; then
		echo "carry.sh: $p is a dependency in lib/; leave it out of pmds/" >&2
		exit 1
	fi
	cp -L "$pmdsrc/$p.so" "$dir/pmds/$p.so"
done

cat >"$dir/run.sh" <<'EOF'
#!/bin/sh
# Runs bench/scale.sh N... with the DPDK of this folder, from the
# repository root above it; the table goes to $BENCH_OUT (default: $OUT,
# else bench/out)/scale.md.
here=$(basename "$(cd "$(dirname "$0")" && pwd)")
cd "$(dirname "$0")/.." || exit 1
BENCH_CARRY="$here" BENCH_OUT="${BENCH_OUT:-${OUT:-bench/out}}" exec bash bench/scale.sh "$@"
EOF
chmod +x "$dir/run.sh"
du -sh "$dir"
size=$(du -sm "$dir" | cut -f1)
if [ "$size" -ge 60 ]; then
	echo "carry.sh: $dir is $size MiB; it must stay well under 64 MiB" >&2
	exit 1
fi
