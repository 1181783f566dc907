#!/usr/bin/env bash
# Builds, or reuses from the cache, the kernel and initramfs of the qemu
# guest in which cephdpdkd runs as a systemd service on an emulated PCI NIC
# (internal/testenv/sysguest boots it; e2e/systemd is its test).
#
# The initramfs is a whole Debian 12 root file system, made with mmdebstrap
# from Debian's archive: systemd as PID 1 (the kernel runs it with
# rdinit=/sbin/init, so the root stays in memory), udev, iproute2, ping,
# pciutils, ethtool, python3 and the `dpdk` package (dpdk-devbind.py, the
# PMDs net_e1000, net_virtio, net_pcap, net_af_xdp, net_tap and
# virtio_user (the exception path's two interfaces: net_tap over the tun
# module, virtio_user over vhost_net and tun) and what they need: libbpf1,
# and libxdp1, which net_af_xdp loads for the af_xdp port mode), plus
# dpdk-testpmd taken from dpdk-dev. The kernel is Debian's 6.1 (the package
# linux-image-amd64 points to, fetched with `apt-get download`), with the
# modules for e1000, e1000e, virtio-net, tun, vhost_net, uio_pci_generic
# and vfio-pci; tun and vhost_net load at boot (modules-load.d), so that
# /dev/net/tun and /dev/vhost-net are there for the daemon.
#
# Two serial ports: ttyS0 is the console (kernel and systemd messages),
# ttyS1 a root shell (cdd-control.service) that prints "SYSGUEST-READY
# <uptime> <system state>" once systemd has finished booting. The image has
# no getty, no first-boot prompts and a fixed machine-id, so that nothing
# else writes to either port. Files for a run (a cephdpdkd binary, units,
# configs) go into an uncompressed cpio archive appended to initrd.img at a
# 4-byte aligned offset; the kernel unpacks it over the root.
#
# Cache: ${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}/systemd-guest/<kernel>-<hash>/,
# where <hash> is that of this script and guest-lib.sh, so editing either
# rebuilds. Builds hold a lock, so concurrent callers build once. Progress
# goes to stderr; the last line on stdout is the directory holding vmlinuz
# and initrd.img. Needs root (mmdebstrap, apt-get) unless the image is
# cached.
set -euo pipefail

log() { echo "systemd-guest-image: $*" >&2; }
die() { log "$*"; exit 1; }

self=$(readlink -f "${BASH_SOURCE[0]}")
here=$(dirname "$self")
. "$here/guest-lib.sh"
hash=$(cat "$self" "$here/guest-lib.sh" | sha256sum | cut -c1-12)
root=${CEPHDPDKD_CACHE:-/var/cache/cephdpdkd}
cache=$root/systemd-guest
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 1800 9 || die "timed out waiting for the lock on $cache/.lock"
start=$(date +%s.%N)

if find_image "$cache" "$hash"; then
	echo "$out"
	exit 0
fi

ensure_host_pkgs mmdebstrap qemu-system-x86 zstd cpio binutils kmod

# ---------------------------------------------------------------- packages
# The kernel .deb is shared with the Soft-RoCE image's download directory
# when that has it: same kernel, and 60 MB less to fetch.
debdir=$cache/debs/$kver
mkdir -p "$debdir"
for f in "$root/rxe-guest/debs/$kver/${kpkg}"_*.deb; do
	[ -s "$f" ] && [ ! -e "$debdir/${f##*/}" ] && ln -f "$f" "$debdir/" 2>/dev/null || true
done
fetch_debs "$debdir" "$kpkg" dpdk-dev

work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
R=$work/root

# dpdk-testpmd (in dpdk-dev) links most of DPDK's libraries; the PMD
# packages (whose plugins the EAL loads from pmds-23.0 at start, each with
# its own dependencies) bring in the rest.
include=(usr-is-merged systemd systemd-sysv udev kmod iproute2 iputils-ping pciutils procps ethtool python3 dpdk
	librte-net-e1000-23 librte-net-virtio23 librte-net-pcap23 librte-net-af-xdp23 librte-net-tap23 libbpf1 libxdp1 librte-mempool-ring23
	librte-bitratestats23 librte-bpf23 librte-bus-auxiliary23 librte-bus-dpaa23 librte-bus-pci23
	librte-bus-vdev23 librte-cmdline23 librte-common-dpaax23 librte-common-iavf23 librte-common-mlx5-23
	librte-crypto-scheduler23 librte-cryptodev23 librte-eventdev23 librte-gro23 librte-gso23 librte-hash23
	librte-ip-frag23 librte-latencystats23 librte-mempool-dpaa23 librte-metrics23 librte-net-bnxt23
	librte-net-bond23 librte-net-dpaa23 librte-net-i40e23 librte-net-ice23 librte-net-ixgbe23
	librte-net-mlx5-23 librte-pcapng23 librte-pdump23 librte-rcu23 librte-reorder23 librte-sched23
	librte-security23 librte-timer23)
log "mmdebstrap (${#include[@]} packages and their dependencies)"
# Documentation, manuals and locales stay out: they would only make the
# initramfs larger and every boot slower.
mmdebstrap --mode=root --variant=minbase --skip=check/empty \
	--aptopt='APT::Install-Recommends "false"' \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
	--include="$(
		IFS=,
		echo "${include[*]}"
	)" \
	bookworm "$R" \
	"deb http://deb.debian.org/debian bookworm main" \
	"deb http://deb.debian.org/debian bookworm-updates main" \
	"deb http://deb.debian.org/debian-security bookworm-security main" >&2
# The root is merged-/usr from the start, but apt picks usrmerge for
# init-system-helpers before usr-is-merged is in: 50 MB of Perl that
# every boot would unpack.
chroot "$R" dpkg --purge usrmerge libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl \
	perl libperl5.36 perl-modules-5.36 >&2

# ---------------------------------------------------------------- kernel
mkdir -p "$work/kern" "$work/dpdkdev"
dpkg -x "$debdir/${kpkg}"_*.deb "$work/kern"
km=$work/kern/lib/modules/$kver
[ -s "$work/kern/boot/vmlinuz-$kver" ] || die "no vmlinuz in $kpkg"
mods=(e1000 e1000e virtio_pci virtio_net tun vhost_net uio_pci_generic vfio_pci vfio vfio_iommu_type1)
for m in "${mods[@]}"; do
	[ -n "$(find "$km" \( -name "$m.ko" -o -name "${m//_/-}.ko" \) -print -quit)" ] ||
		grep -q "/${m//_/[-_]}.ko$" "$km/modules.builtin" || die "module $m missing from $kpkg"
done
copy_modules "$km" "$R" "$kver" "${mods[@]}"
chroot "$R" depmod "$kver"
# The daemon checks for /dev/vhost-net before it creates a virtio_user
# port (kernel.driver: virtio_user), as an operator's node loads the
# modules at boot too.
mkdir -p "$R/etc/modules-load.d"
printf 'tun\nvhost_net\n' >"$R/etc/modules-load.d/cephdpdkd.conf"

# ---------------------------------------------------------------- testpmd
dpkg -x "$debdir"/dpdk-dev_*.deb "$work/dpdkdev"
cp "$work/dpdkdev/usr/bin/dpdk-testpmd" "$R/usr/bin/"
if chroot "$R" ldd /usr/bin/dpdk-testpmd | grep 'not found' >&2; then
	die "dpdk-testpmd misses libraries in the image"
fi

# ---------------------------------------------------------------- systemd
echo 0123456789abcdef0123456789abcdef >"$R/etc/machine-id"
echo sysguest >"$R/etc/hostname"
: >"$R/etc/fstab"
# getty-static starts gettys on tty2-6 for seconds of a TCG boot.
for u in serial-getty@ttyS0.service serial-getty@ttyS1.service getty@tty1.service \
	getty-static.service getty.target systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
	e2scrub_all.timer fstrim.timer; do
	ln -sf /dev/null "$R/etc/systemd/system/$u"
done
# The journal stays in memory; a test reads it with journalctl.
mkdir -p "$R/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' >"$R/etc/systemd/journald.conf.d/sysguest.conf"

cat >"$R/etc/systemd/system/cdd-control.service" <<'EOF'
[Unit]
Description=Test control shell on ttyS1
DefaultDependencies=no
After=systemd-journald.socket
# Nothing on the machine may stop it: the test talks through it.
IgnoreOnIsolate=yes

[Service]
ExecStart=/usr/local/sbin/cdd-control
StandardInput=tty-force
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS1
TTYReset=yes
TTYVHangup=no
Restart=always
KillMode=process

[Install]
WantedBy=sysinit.target
EOF
mkdir -p "$R/etc/systemd/system/sysinit.target.wants" "$R/usr/local/sbin"
ln -sf ../cdd-control.service "$R/etc/systemd/system/sysinit.target.wants/cdd-control.service"
cat >"$R/usr/local/sbin/cdd-control" <<'EOF'
#!/bin/bash
# The test's shell: no echo, no line editing, no prompt, no job control,
# so that ttyS1 carries only what the commands print.
stty -echo -onlcr cols 4000 rows 50 2>/dev/null
systemctl is-system-running --wait >/dev/null 2>&1
echo "SYSGUEST-READY $(cut -d' ' -f1 /proc/uptime) $(systemctl is-system-running 2>&1)"
export PS1= PS2= PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SYSTEMD_PAGER= SYSTEMD_COLORS=0
exec bash --noprofile --norc --noediting +m -i
EOF
chmod 755 "$R/usr/local/sbin/cdd-control"

rm -f "$R/usr/lib/udev/hwdb.bin"
rm -rf "$R/var/cache/apt"/* "$R/var/lib/apt/lists"/*
passwd -R "$R" -d root >/dev/null

# ---------------------------------------------------------------- pack
log "root file system $(du -sh "$R" | cut -f1)"
(cd "$R" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) | zstd -T0 -3 -q >"$work/initrd.img"
cp "$work/kern/boot/vmlinuz-$kver" "$work/vmlinuz"
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
mv "$work/vmlinuz" "$work/initrd.img" "$out.tmp/"
rm -rf "$out"
mv "$out.tmp" "$out"
cache_sweep "$cache" "$out"
find "$cache/debs" -mindepth 1 -maxdepth 1 -type d ! -name "$kver" -mmin +60 -exec rm -rf {} + 2>/dev/null || true
log "initrd.img $(du -h "$out/initrd.img" | cut -f1) in $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $start }") s"
log "built $out"
echo "$out"
