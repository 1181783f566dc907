#!/usr/bin/env bash
# Installs what cephdpdkd needs on a Debian 12 machine, skipping what is
# already there: DPDK 22.11 (libraries, PMDs, dpdk-testpmd), pkg-config,
# iproute2/ethtool for the network-namespace tests, tshark for capture checks,
# Ceph (mon, OSD, MGR, client tools), socat and ping for the Ceph-node
# tests, nftables for their lossy links, systemd-analyze (Debian's systemd)
# for the unit's checks, clang and libbpf-dev for the af_xdp mode's XDP
# program (scripts/build-bpf.sh), podman and runc (crun refuses a hybrid cgroup
# hierarchy) for the container image's test,
# prometheus and promtool for the checks of deploy/prometheus, qemu for
# the test guests, and mmdebstrap, zstd and cpio for the systemd guest's
# image (the guest images themselves are built and cached by
# scripts/rxe-guest-image.sh and scripts/systemd-guest-image.sh, which the
# tests run). Go 1.26 must be on PATH or in
# /usr/local/go. Safe to run repeatedly. Needs root.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in dpdk dpdk-dev libdpdk-dev pkg-config iproute2 ethtool gcc libc6-dev curl git tshark \
	ceph-mon ceph-osd ceph-mgr ceph-common socat iputils-ping prometheus \
	qemu-system-x86 mmdebstrap zstd cpio nftables podman runc clang libbpf-dev; do
	have_pkg "$p" || need+=("$p")
done
# systemd-analyze comes with systemd, which a container may lack.
command -v systemd-analyze >/dev/null || need+=(systemd)
if ((${#need[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing packages ${need[*]}; run as root to install them" >&2
		exit 1
	fi
	echo "deps: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${need[@]}"
fi

if ! command -v go >/dev/null; then
	if [ -x /usr/local/go/bin/go ]; then
		echo "deps: add /usr/local/go/bin to PATH" >&2
	else
		echo "deps: Go 1.26 is required (https://go.dev/dl/); none found" >&2
		exit 1
	fi
fi
