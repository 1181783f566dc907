#!/usr/bin/env bash
# Installs what the test suite needs on a Debian 12 machine, on top of
# what building and running cephdpdkd need (scripts/deps-build.sh,
# scripts/deps-run.sh), skipping what is already there: DPDK's tools
# (dpdk: dpdk-testpmd, dpdk-devbind), iproute2/ethtool for the
# network-namespace tests, tshark for capture checks, Ceph (mon, OSD,
# MGR, client tools), socat and ping for the Ceph-node tests, nftables
# for their lossy links, systemd-analyze (Debian's systemd) for the
# unit's checks, podman and runc (crun refuses a hybrid cgroup hierarchy)
# for the container image's test, prometheus and promtool for the checks
# of deploy/prometheus, qemu for the test guests, curl, and mmdebstrap,
# zstd and cpio for the systemd guest's image and the Debian package's
# test root (the guest images themselves are built and cached by
# scripts/rxe-guest-image.sh and scripts/systemd-guest-image.sh, which the
# tests run). None of it belongs on a production node. Safe to run
# repeatedly; needs root when something is missing.
set -euo pipefail
log() { echo "deps: $*" >&2; }
die() { log "$*"; exit 1; }
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
"$here/deps-build.sh"
. "$here/guest-lib.sh"
ensure_host_pkgs dpdk iproute2 ethtool curl tshark ceph-mon ceph-osd ceph-mgr ceph-common socat iputils-ping \
	prometheus qemu-system-x86 mmdebstrap zstd cpio nftables podman runc
# systemd-analyze comes with systemd, which a container may lack.
command -v systemd-analyze >/dev/null || ensure_host_pkgs systemd
