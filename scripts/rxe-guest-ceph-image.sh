#!/usr/bin/env bash
# Builds, or reuses from the cache, the Ceph variant of the rxe guest image
# (internal/testenv/rxeguest boots it with WithCeph): the kernel and
# initramfs of scripts/rxe-guest-image.sh, with an uncompressed cpio archive
# appended that holds the host's Debian `rados` (Ceph 16.2, ceph-common), the
# shared libraries it needs that the base initramfs lacks, and Ceph's
# compressor and crypto plugins. The kernel unpacks concatenated archives in
# order, so the base image is reused as it is; the guest's /init is the
# base's. The client is configured after boot (/etc/ceph/ceph.conf and the
# keyring are written by the test): the image holds no cluster identity.
#
#   rxe-guest-ceph-image.sh             the client: rados (~24 MB appended)
#   rxe-guest-ceph-image.sh --daemons   also ceph-mon, ceph-osd, monmaptool,
#                                       ceph-authtool and the erasure-code
#                                       plugins the OSD preloads, for a
#                                       cluster inside a guest (~60 MB)
#
# There is no `ceph` command (it is Python): mon commands come from the
# host's `ceph`, over TCP.
#
# Cache: ${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}/rxe-guest-ceph/<base>-<hash>[-daemons]/,
# where <base> names the base image's directory and <hash> covers this
# script and the name, size and modification time of every file copied from
# the host, so that editing the script, a new base image or an upgrade of
# the Ceph packages forces a rebuild. Builds hold a lock. Progress goes to
# stderr; the last line on stdout is the directory holding vmlinuz and
# initrd.img. Needs the host's ceph-common (and ceph-mon and ceph-osd for
# --daemons) installed, and what the base script needs.
set -euo pipefail

log() { echo "rxe-guest-ceph-image: $*" >&2; }
die() { log "$*"; exit 1; }

daemons=0 suffix= pkgs=ceph-common
case ${1:-} in
"") ;;
--daemons) daemons=1 suffix=-daemons pkgs="ceph-common ceph-mon ceph-osd" ;;
*) die "usage: $0 [--daemons]" ;;
esac

self=$(readlink -f "${BASH_SOURCE[0]}")
here=$(dirname "$self")
cache=${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}/rxe-guest-ceph
start=$(date +%s.%N)

# ---------------------------------------------------------------- inputs
bins=(rados)
plugdirs=(compressor crypto) # what a librados client may dlopen
if ((daemons)); then
	bins+=(ceph-mon ceph-osd monmaptool ceph-authtool)
	plugdirs+=(erasure-code) # the OSD preloads them (osd_erasure_code_plugins)
fi
binpaths=()
for b in "${bins[@]}"; do
	f=$(command -v "$b" 2>/dev/null || true)
	[ -n "$f" ] || die "no $b on the host: apt-get install $pkgs"
	binpaths+=("$(readlink -f "$f")")
done
plugdir=/usr/lib/x86_64-linux-gnu/ceph
plugins=()
for d in "${plugdirs[@]}"; do
	[ -d "$plugdir/$d" ] || die "no $plugdir/$d: is ceph-common installed?"
	for f in "$plugdir/$d"/*.so*; do
		[ -L "$f" ] || plugins+=("$f")
	done
done
objs=("${binpaths[@]}" "${plugins[@]}")
for f in "${objs[@]}"; do
	if ldd "$f" | grep -q 'not found'; then
		ldd "$f" >&2
		die "unresolved libraries in $f"
	fi
done
mapfile -t libs < <(for f in "${objs[@]}"; do
	ldd "$f" | awk '/=>/ { print $3 }'
done | sort -u)
# libgcc_s is dlopen()ed by glibc for thread cancellation.
libs+=(/lib/x86_64-linux-gnu/libgcc_s.so.1)

base=$(bash "$here/rxe-guest-image.sh" | tail -1)
[ -s "$base/vmlinuz" ] && [ -s "$base/initrd.img" ] || die "base image script gave no image ($base)"

hash=$({
	sha256sum "$self"
	for f in "${objs[@]}" "${libs[@]}"; do stat -L -c '%n %s %Y' "$f"; done
} | sha256sum | cut -c1-12)
out=$cache/$(basename "$base")-$hash$suffix
if [ -s "$out/vmlinuz" ] && [ -s "$out/initrd.img" ]; then
	log "cached image $out"
	echo "$out"
	exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 600 9 || die "timed out waiting for the lock on $cache/.lock"
if [ -s "$out/vmlinuz" ] && [ -s "$out/initrd.img" ]; then # built while we waited
	echo "$out"
	exit 0
fi

# ---------------------------------------------------------------- overlay tree
work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
R=$work/root
mkdir -p "$R/usr/bin" "$R/etc/ceph"
for i in "${!bins[@]}"; do
	cp "${binpaths[$i]}" "$R/usr/bin/${bins[$i]}"
done
# Symlinks included (libceph_zlib.so -> .so.2 -> .so.2.0.0): Ceph dlopen()s
# the unversioned names.
for d in "${plugdirs[@]}"; do
	mkdir -p "$R$plugdir/$d"
	cp -a "$plugdir/$d"/. "$R$plugdir/$d/"
done
# Libraries the base initramfs already has (libc, libibverbs, librdmacm,
# libnl, ...) are left out: they come from the same Debian release.
in_base=$work/base.list
zcat "$base/initrd.img" | cpio -it --quiet 2>/dev/null | sed 's|^\./||; s|^|/|' >"$in_base"
skipped=0
for lib in "${libs[@]}"; do
	if grep -qxF "$lib" "$in_base"; then
		skipped=$((skipped + 1))
		continue
	fi
	mkdir -p "$R$(dirname "$lib")"
	cp -L "$lib" "$R$lib"
done
log "overlay: ${bins[*]}, ${#plugins[@]} plugins, $((${#libs[@]} - skipped)) libraries ($skipped more are in the base)"

# ---------------------------------------------------------------- pack
(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$work/overlay.cpio"
# The kernel takes an uncompressed archive after a compressed one only at a
# 4-byte aligned offset; the zeros in between it skips.
size=$(stat -c %s "$base/initrd.img")
{
	cat "$base/initrd.img"
	head -c $(((4 - size % 4) % 4)) /dev/zero
	cat "$work/overlay.cpio"
} >"$work/initrd.img"
# A hard link where possible: the base directory may be removed later (the
# base script keeps superseded images for an hour only).
ln "$base/vmlinuz" "$work/vmlinuz" 2>/dev/null || cp "$base/vmlinuz" "$work/vmlinuz"

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
mv "$work/vmlinuz" "$work/initrd.img" "$out.tmp/"
rm -rf "$out"
mv "$out.tmp" "$out"
# Images of other base images, script versions or Ceph builds: kept for an
# hour, as the base script does, then removed.
find "$cache" -mindepth 1 -maxdepth 1 -type d -name '6.1*' ! -name "$(basename "$base")-$hash*" -mmin +60 \
	-exec rm -rf {} + 2>/dev/null || true
log "overlay $(du -h "$work/overlay.cpio" | cut -f1), initrd.img $(du -h "$out/initrd.img" | cut -f1) in $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s"
log "built $out"
echo "$out"
