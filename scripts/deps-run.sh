#!/usr/bin/env bash
# Installs what running cephdpdkd needs on a Debian 12 machine, skipping
# what is already there: the packages of deploy/container/packages.txt
# (DPDK 22.11's runtime libraries, the PMD plugins the EAL loads at
# start, libbpf, kmod), which are also the Debian package's dependencies
# and the container image's. Hugepages and the NIC's driver are the
# daemon's own business (eal.hugepages, port.bind). Nothing for building
# or testing: scripts/deps-build.sh and scripts/deps.sh add those. Safe to
# run repeatedly; needs root when something is missing.
set -euo pipefail
log() { echo "deps: $*" >&2; }
die() { log "$*"; exit 1; }
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
. "$here/guest-lib.sh"
mapfile -t pkgs < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]//g' "$here/../deploy/container/packages.txt")
ensure_host_pkgs "${pkgs[@]}"
