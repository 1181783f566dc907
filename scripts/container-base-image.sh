#!/usr/bin/env bash
# Builds, or reuses from the cache, the base image of the cephdpdkd
# container (deploy/container/Containerfile) without a container
# registry: a Debian 12 minbase root made with mmdebstrap from Debian's
# archive, with the packages of deploy/container/packages.txt (DPDK
# 22.11's runtime and PMDs, kmod) already in, imported into podman's
# local storage. The Containerfile then finds every package installed and
# fetches nothing: `podman build --build-arg BASE=<this image>`.
#
# The image's DPDK is the archive's current 22.11 point release; cephdpdkd
# is built on the host against the host's, and the ABI (librte_*.so.23)
# is the same across 22.11 point releases. The host's version is in the
# key all the same, so that an upgraded host gets a base to match.
#
# Cache: ${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}/container-base/<key>/rootfs.tar,
# and the image localhost/cephdpdkd-base:<key>, where <key> is the host's
# librte-eal23 version and the hash of this script and packages.txt:
# editing either rebuilds. A cached tarball whose image was removed is
# imported again (seconds). Builds hold a lock, so concurrent callers
# build once. Progress goes to stderr; the last line on stdout is the
# image's name. Needs root and podman.
set -euo pipefail

log() { echo "container-base-image: $*" >&2; }
die() { log "$*"; exit 1; }

self=$(readlink -f "${BASH_SOURCE[0]}")
repo=$(dirname "$(dirname "$self")")
pkgfile=$repo/deploy/container/packages.txt
[ -s "$pkgfile" ] || die "no $pkgfile"
command -v podman >/dev/null || die "podman missing (scripts/deps.sh installs it)"
command -v mmdebstrap >/dev/null || die "mmdebstrap missing (scripts/deps.sh installs it)"

dpdk=$(dpkg-query -W -f='${Version}' librte-eal23 2>/dev/null) || die "librte-eal23 is not installed on this host (scripts/deps.sh)"
hash=$(cat "$self" "$pkgfile" | sha256sum | cut -c1-12)
# A tag is [A-Za-z0-9_.-]: 22.11.11-0+deb12u1 becomes 22.11.11-0_deb12u1.
key=$(echo "$dpdk" | tr -c 'A-Za-z0-9_.\n-' _)-$hash
image=localhost/cephdpdkd-base:$key

cache=${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}/container-base
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 1800 9 || die "timed out waiting for the lock on $cache/.lock"
start=$(date +%s.%N)

if podman image exists "$image"; then
	log "cached image $image"
	echo "$image"
	exit 0
fi

out=$cache/$key
if [ ! -s "$out/rootfs.tar" ]; then
	mapfile -t pkgs < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$pkgfile")
	log "mmdebstrap bookworm minbase with ${#pkgs[@]} packages and their dependencies"
	work=$(mktemp -d "$cache/.build.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	# Documentation, manuals and locales stay out of the image.
	mmdebstrap --mode=root --variant=minbase --format=tar \
		--aptopt='APT::Install-Recommends "false"' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		--include="$(
			IFS=,
			echo "${pkgs[*]}"
		)" \
		bookworm "$work/rootfs.tar" \
		"deb http://deb.debian.org/debian bookworm main" \
		"deb http://deb.debian.org/debian bookworm-updates main" \
		"deb http://deb.debian.org/debian-security bookworm-security main" >&2
	rm -rf "$out"
	mkdir -p "$out"
	mv "$work/rootfs.tar" "$out/rootfs.tar"
	log "rootfs.tar $(du -h "$out/rootfs.tar" | cut -f1)"
fi

log "podman import $image"
podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'CMD ["/bin/bash"]' "$out/rootfs.tar" "$image" >&2

# Older keys: their tarballs once an hour has passed (a concurrent build
# may still be reading one), their images when nothing uses them.
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name '.*' ! -path "$out" -mmin +60 -exec rm -rf {} + 2>/dev/null || true
podman images --format '{{.Repository}}:{{.Tag}}' --filter reference=localhost/cephdpdkd-base |
	grep -vxF "$image" | xargs -r podman rmi >&2 2>/dev/null || true

log "built $image in $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s"
echo "$image"
