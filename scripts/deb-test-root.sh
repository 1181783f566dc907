#!/usr/bin/env bash
# Builds, or reuses from the cache, the fresh Debian 12 root the Debian
# package's test (deploy/pkg) installs cephdpdkd_*.deb into: a minbase
# root made with mmdebstrap from Debian's archive (apt, dpkg and the
# Essential set) and systemd, as on a node (the test runs the root's
# systemd-analyze on the unit), nothing of DPDK's, with its package
# lists kept, so that `apt-get install ./cephdpdkd_*.deb` resolves the
# dependencies from the archive without an apt-get update.
#
# Cache: ${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}/deb-root/<hash>/root.tar,
# where <hash> is that of this script (editing it rebuilds, with lists as
# fresh as the archive), and deb-root/archives/, which the test mounts as
# the root's /var/cache/apt/archives so that the dependencies are
# downloaded once (a .deb unused for 30 days is removed). Builds hold a lock, so concurrent callers
# build once. Progress goes to stderr; the last line on stdout is the
# directory of root.tar. Needs root and mmdebstrap (scripts/deps.sh) unless cached.
set -euo pipefail

log() { echo "deb-test-root: $*" >&2; }
die() { log "$*"; exit 1; }

self=$(readlink -f "${BASH_SOURCE[0]}")
hash=$(sha256sum <"$self" | cut -c1-12)
cache=${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}/deb-root
out=$cache/$hash
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 1800 9 || die "timed out waiting for the lock on $cache/.lock"

mkdir -p "$cache/archives/partial"
find "$cache/archives" -maxdepth 1 -name '*.deb' -atime +30 -delete 2>/dev/null || true
if [ -s "$out/root.tar" ]; then
	echo "$out"
	exit 0
fi
command -v mmdebstrap >/dev/null || die "mmdebstrap missing (scripts/deps.sh installs it)"
start=$(date +%s.%N)
work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "mmdebstrap bookworm minbase"
# The lists stay (cleanup/apt/lists skipped); the downloaded .debs of
# the base itself do not.
mmdebstrap --mode=root --variant=minbase --format=tar --skip=cleanup/apt/lists \
	--aptopt='APT::Install-Recommends "false"' --include=systemd \
	bookworm "$work/root.tar" \
	"deb http://deb.debian.org/debian bookworm main" \
	"deb http://deb.debian.org/debian bookworm-updates main" \
	"deb http://deb.debian.org/debian-security bookworm-security main" >&2
rm -rf "$out"
mkdir -p "$out"
mv "$work/root.tar" "$out/"
# Older keys' roots and downloads go once unused for a day.
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name '.*' ! -name archives ! -path "$out" -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
log "root.tar $(du -h "$out/root.tar" | cut -f1) in $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s"
echo "$out"
