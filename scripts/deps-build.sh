#!/usr/bin/env bash
# Installs what building cephdpdkd and its Debian package needs on a
# Debian 12 machine, on top of what running it needs
# (scripts/deps-run.sh): DPDK 22.11's development files, pkg-config and
# a C compiler for cgo, clang and libbpf-dev for the af_xdp mode's XDP
# program (scripts/build-bpf.sh), dpkg-dev for scripts/build-deb.sh, git.
# Go 1.26 must be on PATH or in /usr/local/go. Safe to run repeatedly;
# needs root when something is missing.
set -euo pipefail
log() { echo "deps: $*" >&2; }
die() { log "$*"; exit 1; }
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
"$here/deps-run.sh"
. "$here/guest-lib.sh"
ensure_host_pkgs dpdk-dev libdpdk-dev pkg-config gcc libc6-dev clang libbpf-dev dpkg-dev git

if ! command -v go >/dev/null; then
	if [ -x /usr/local/go/bin/go ]; then
		log "add /usr/local/go/bin to PATH"
	else
		die "Go 1.26 is required (https://go.dev/dl/); none found"
	fi
fi
