#!/usr/bin/env bash
# Builds, or reuses from the cache, the kernel and initramfs of the qemu guests
# that run Linux Soft-RoCE (rdma_rxe) as interop peers for cephdpdkd's tests
# (internal/testenv/rxeguest boots them).
#
# The guest is Debian 12's current 6.1 kernel plus a busybox initramfs holding
# rdma-core 44 userspace (librdmacm examples, rping, perftest, ibverbs-utils).
# The kernel and rdma-core packages are fetched with `apt-get download` and
# unpacked with `dpkg -x`: nothing RDMA-related is installed on the host.
#
# The guest's /init reads its settings from the kernel command line:
#   rxe_ip=10.77.0.11/24   address of eth0 (optional)
#   rxe_name=g1            hostname (optional)
#   rxe_mtu=1500           MTU of eth0 (optional)
#   rxe_ipv6=1             keep IPv6 on eth0 (default: off, so the link carries
#                          no router solicitations, DAD or MLD frames)
#   rxe_share=TAG          mount the virtio-9p share TAG (qemu -virtfs
#                          ...,mount_tag=TAG) on /mnt/host (optional)
# then loads the rxe modules, mounts the share if asked to, runs `rdma link
# add rxe0 type rxe netdev eth0`, prints "RXE-READY" (or "RXE-FAILED <why>")
# and runs a shell on ttyS0.
#
# Cache: ${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}/rxe-guest/<kernel>-<hash>/,
# where <hash> is that of this script and guest-lib.sh, so editing either
# forces a rebuild. Runs hold a lock, so concurrent callers build once and
# then share the result.
# Progress goes to stderr; the last line on stdout is the directory holding
# vmlinuz and initrd.img. Needs root (apt-get) unless the image is cached and
# qemu is installed.
set -euo pipefail

log() { echo "rxe-guest-image: $*" >&2; }
die() { log "$*"; exit 1; }

self=$(readlink -f "${BASH_SOURCE[0]}")
here=$(dirname "$self")
. "$here/guest-lib.sh"
hash=$(cat "$self" "$here/guest-lib.sh" | sha256sum | cut -c1-12)
cache=${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}/rxe-guest
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 1800 9 || die "timed out waiting for the lock on $cache/.lock"

# ---------------------------------------------------------------- host packages
ensure_host_pkgs qemu-system-x86 busybox-static cpio iproute2 binutils

# ---------------------------------------------------------------- which kernel
if find_image "$cache" "$hash"; then
	echo "$out"
	exit 0
fi

# ---------------------------------------------------------------- download
debs=(libibverbs1 ibverbs-providers librdmacm1 rdmacm-utils perftest ibverbs-utils
	libibumad3 libnl-3-200 libnl-route-3-200)
debdir=$cache/debs/$kver
fetch_debs "$debdir" "$kpkg" "${debs[@]}"

# ---------------------------------------------------------------- unpack
work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building in $work"
mkdir -p "$work/kern" "$work/stage"
dpkg -x "$debdir/${kpkg}"_*.deb "$work/kern"
for d in "$debdir"/*.deb; do
	case ${d##*/} in "$kpkg"_*) ;; *) dpkg -x "$d" "$work/stage" ;; esac
done
km=$work/kern/lib/modules/$kver
[ -s "$work/kern/boot/vmlinuz-$kver" ] || die "no vmlinuz in $kpkg"

# ---------------------------------------------------------------- initramfs tree
R=$work/root
mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,root,usr/bin,usr/sbin,lib64,lib/x86_64-linux-gnu}
mkdir -p "$R/lib/modules/$kver" "$R/usr/lib/x86_64-linux-gnu/libibverbs" "$R/etc/libibverbs.d"
cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list); do
	[ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"
done

stage_lib=$work/stage/usr/lib/x86_64-linux-gnu
bins=()
# iproute2's rdma, ip (richer than busybox's ip) and tc (qdisc counters,
# netem for the link-fault tests), from the host: same release.
for b in rdma ip tc; do
	f=$(command -v "$b" 2>/dev/null || true)
	[ -n "$f" ] && [ -x "$(readlink -f "$f")" ] || die "host has no $b (iproute2)"
	cp -L "$f" "$R/usr/sbin/$b"
	bins+=("$(readlink -f "$f")")
done
for b in ibv_devinfo ibv_devices ibv_rc_pingpong ibv_ud_pingpong \
	rping ucmatose udaddy rdma_client rdma_server rdma_xclient rdma_xserver cmtime \
	ib_send_bw ib_send_lat ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_atomic_bw; do
	[ -x "$work/stage/usr/bin/$b" ] || die "$b missing from the rdma-core packages"
	cp "$work/stage/usr/bin/$b" "$R/usr/bin/"
	bins+=("$work/stage/usr/bin/$b")
done
# libibverbs dlopen()s the rxe provider named by /etc/libibverbs.d/rxe.driver;
# only rxe is copied, so no other driver file may be listed.
rxe_so=$(ls "$stage_lib"/libibverbs/librxe-rdmav*.so | head -1)
cp "$rxe_so" "$R/usr/lib/x86_64-linux-gnu/libibverbs/"
cp "$work/stage/etc/libibverbs.d/rxe.driver" "$R/etc/libibverbs.d/"
bins+=("$rxe_so")

# Shared-library closure: staged packages first, the host's libraries otherwise.
libpath=$stage_lib:$work/stage/lib/x86_64-linux-gnu
for f in "${bins[@]}"; do
	if LD_LIBRARY_PATH=$libpath ldd "$f" | grep -q 'not found'; then
		LD_LIBRARY_PATH=$libpath ldd "$f" >&2
		die "unresolved libraries in $f"
	fi
done
for f in "${bins[@]}"; do
	LD_LIBRARY_PATH=$libpath ldd "$f" | awk '/=>/ { print $3 } /ld-linux/ { print $1 }'
done | sort -u | while read -r lib; do
	case $lib in
	*/ld-linux-x86-64.so.2) cp -L "$lib" "$R/lib64/" ;;
	/*) cp -L "$lib" "$R/lib/x86_64-linux-gnu/" ;;
	esac
done
# glibc dlopen()s libgcc_s for pthread_cancel/pthread_exit (rping uses them).
cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$R/lib/x86_64-linux-gnu/"

# Kernel modules: closure over each module's depends= field, then depmod.
for m in rdma_rxe ib_core ib_uverbs ib_umad rdma_ucm rdma_cm iw_cm ib_cm udp_tunnel ip6_udp_tunnel virtio_net \
	9p 9pnet_virtio sch_netem ifb sch_ingress act_mirred cls_matchall; do
	[ -n "$(find "$km" -name "$m.ko" -print -quit)" ] || die "module $m missing from $kpkg"
done
copy_modules "$km" "$R" "$kver" virtio_pci virtio_net rdma_rxe ib_uverbs ib_umad rdma_ucm rdma_cm ib_cm iw_cm \
	crc32_generic crc32_pclmul 9p 9pnet_virtio sch_netem ifb sch_ingress act_mirred cls_matchall
/bin/busybox depmod -b "$R" "$kver"

# ---------------------------------------------------------------- /init
cat >"$R/init" <<'EOF'
#!/bin/sh
# Soft-RoCE guest: network from the kernel command line, rxe0 on eth0, then a
# shell on the serial console for the test harness.
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmp /tmp
mount -t tmpfs shm /dev/shm
# busybox ash runs its own applets before anything on PATH; iproute2's ip
# is /usr/sbin/ip, which interactive shells get through this function.
cat >/etc/profile.rxe <<'PROFILE'
ip() { /usr/sbin/ip "$@"; }
PS1='rxe# '
PROFILE
IP= NAME= MTU= V6=0 SHARE=
for x in $(cat /proc/cmdline); do
	case $x in
	rxe_ip=*) IP=${x#rxe_ip=} ;;
	rxe_name=*) NAME=${x#rxe_name=} ;;
	rxe_mtu=*) MTU=${x#rxe_mtu=} ;;
	rxe_ipv6=*) V6=${x#rxe_ipv6=} ;;
	rxe_share=*) SHARE=${x#rxe_share=} ;;
	esac
done
hostname "${NAME:-rxeguest}"
fail() { echo "RXE-FAILED $*"; exec setsid cttyhack /bin/sh; }

for m in virtio_pci virtio_net crc32_pclmul crc32_generic rdma_rxe ib_uverbs rdma_ucm ib_umad; do
	modprobe $m 2>/dev/null
done
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -e /sys/class/net/eth0 ] || fail "no eth0"
# A directory of the host's, for files too large for the console. No
# caching: what either side writes, the other reads at once.
if [ -n "$SHARE" ]; then
	modprobe 9pnet_virtio && modprobe 9p || fail "9p modules"
	mkdir -p /mnt/host
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none "$SHARE" /mnt/host ||
		fail "mount 9p share $SHARE"
fi
[ "$V6" = 1 ] || echo 1 >/proc/sys/net/ipv6/conf/eth0/disable_ipv6
. /etc/profile.rxe
ip link set lo up
[ -n "$MTU" ] && { ip link set eth0 mtu "$MTU" || fail "mtu $MTU"; }
ip link set eth0 up || fail "eth0 up"
[ -n "$IP" ] && { ip addr add "$IP" dev eth0 || fail "address $IP"; }
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add"
# Both the port and eth0's operational state (which linkwatch updates up to
# a second after the carrier) are up before READY.
i=0
until ibv_devinfo -d rxe0 2>/dev/null | grep -q PORT_ACTIVE && [ "$(cat /sys/class/net/eth0/operstate)" = up ]; do
	[ $i -ge 100 ] && fail "rxe0 port or eth0 not up"
	sleep 0.1
	i=$((i + 1))
done
echo "=== eth0"
ip -br addr show dev eth0
ip -br link show dev eth0
echo "=== rxe0"
rdma link show
ibv_devinfo -v -d rxe0 | grep -E 'transport|node_guid|state|active_mtu|link_layer|GID'
# Keep kernel messages off the console from here on: they would interleave
# with command output. `dmesg` still has them.
dmesg -n 1
# A wide terminal keeps ash's line editor from wrapping long command lines.
stty cols 4000 rows 50 2>/dev/null
export ENV=/etc/profile.rxe
echo "RXE-READY $(cut -d' ' -f1 /proc/uptime)"
exec setsid cttyhack /bin/sh
EOF
chmod +x "$R/init"

(cd "$R" && find . | cpio -o -H newc --quiet) | gzip -6 >"$work/initrd.img"
cp "$work/kern/boot/vmlinuz-$kver" "$work/vmlinuz"
log "initrd.img $(du -h "$work/initrd.img" | cut -f1), vmlinuz $(du -h "$work/vmlinuz" | cut -f1)"

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
mv "$work/vmlinuz" "$work/initrd.img" "$out.tmp/"
rm -rf "$out"
mv "$out.tmp" "$out"

# Images of other kernels or script versions: kept for an hour (a concurrent
# test may have been handed one just before this rebuild), then removed.
cache_sweep "$cache" "$out"
find "$cache/debs" -mindepth 1 -maxdepth 1 -type d ! -name "$kver" -mmin +60 -exec rm -rf {} + 2>/dev/null || true
log "built $out"
echo "$out"
