# Sourced by the guest image scripts (rxe-guest-image.sh,
# systemd-guest-image.sh): what they share to install host packages, pick
# and fetch Debian's 6.1 kernel and copy kernel modules into a root tree.
# The caller defines log and die; every image script hashes this file with
# itself, so that editing it rebuilds their images.

apt_updated=0
apt_update() {
	((apt_updated)) && return 0
	log "apt-get update"
	apt-get -q -o DPkg::Lock::Timeout=600 update >&2
	apt_updated=1
}

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# ensure_host_pkgs PKG...: installs those that are missing (root only).
ensure_host_pkgs() {
	local p missing=()
	for p in "$@"; do
		have_pkg "$p" || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	[ "$(id -u)" -eq 0 ] || die "missing host packages ${missing[*]}; run as root to install them"
	apt_update
	log "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 install -y \
		--no-install-recommends "${missing[@]}" >&2
}

# kernel_pkg prints the package linux-image-amd64 points to in bookworm:
# linux-image-6.1.0-NN-amd64 (nothing without package lists).
kernel_pkg() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-6\.1\.[0-9.-]+-amd64$/ { print $2; exit }'
}

# find_image CACHE HASH sets kpkg (the kernel package), kver and out
# (CACHE/KVER-HASH, the image's directory), and succeeds when out holds
# an image already. Without package lists, the newest image of HASH is
# good enough before asking the network: out then names it.
find_image() {
	local cache=$1 hash=$2 newest
	kpkg=$(kernel_pkg || true)
	if [ -z "$kpkg" ]; then
		newest=$(ls -1dt "$cache"/6.1*-"$hash" 2>/dev/null | head -1 || true)
		if [ -n "$newest" ] && [ -s "$newest/vmlinuz" ] && [ -s "$newest/initrd.img" ]; then
			log "no apt lists; reusing $newest"
			out=$newest
			return 0
		fi
		apt_update
		kpkg=$(kernel_pkg || true)
		[ -n "$kpkg" ] || die "cannot resolve a linux-image-6.1 package from linux-image-amd64"
	fi
	kver=${kpkg#linux-image-}
	out=$cache/$kver-$hash
	[ -s "$out/vmlinuz" ] && [ -s "$out/initrd.img" ] || return 1
	log "cached image for $kver"
}

# fetch_debs DIR PKG...: makes sure DIR holds a .deb of every PKG,
# downloading what is missing (apt-get download, as root: as _apt it
# would warn that _apt cannot write there). Stale package lists name
# versions the archive no longer has, so a failure updates them and tries
# again.
fetch_debs() {
	local dir=$1 p
	shift
	mkdir -p "$dir"
	have_debs() {
		for p in "$@"; do
			compgen -G "$dir/${p}_*.deb" >/dev/null || return 1
		done
	}
	have_debs "$@" && return 0
	log "downloading $*"
	(cd "$dir" && apt-get -q -o APT::Sandbox::User=root download "$@") >&2 || true
	have_debs "$@" && return 0
	apt_update
	(cd "$dir" && apt-get -q -o APT::Sandbox::User=root download "$@") >&2 || true
	have_debs "$@" || die "apt-get download failed for $*"
}

# copy_modules KMDIR ROOT KVER MODULE...: copies each module found under
# KMDIR/kernel (an unpacked /lib/modules/KVER) into ROOT, with the closure
# of their depends= fields, and the module indexes depmod needs. Modules
# built into the kernel are not found, and need nothing. The caller runs
# depmod.
copy_modules() {
	local km=$1 root=$2 kver=$3
	shift 3
	local -A seen=()
	add_mod() {
		local m=$1 f d
		[ -n "${seen[$m]:-}" ] && return 0
		seen[$m]=1
		f=$(find "$km/kernel" \( -name "$m.ko" -o -name "${m//_/-}.ko" \) -print -quit)
		[ -n "$f" ] || return 0
		mkdir -p "$root/lib/modules/$kver/$(dirname "${f#"$km"/}")"
		cp "$f" "$root/lib/modules/$kver/${f#"$km"/}"
		for d in $(strings "$f" | sed -n 's/^depends=//p' | tr ',' ' '); do
			add_mod "$d"
		done
	}
	for m in "$@"; do
		add_mod "$m"
	done
	mkdir -p "$root/lib/modules/$kver"
	cp "$km/modules.builtin" "$km/modules.order" "$root/lib/modules/$kver/"
	[ ! -e "$km/modules.builtin.modinfo" ] || cp "$km/modules.builtin.modinfo" "$root/lib/modules/$kver/"
}

# cache_sweep DIR KEEP: removes the images in DIR other than KEEP that are
# more than an hour old (a concurrent test may have been handed one just
# before a rebuild).
cache_sweep() {
	find "$1" -mindepth 1 -maxdepth 1 -type d -name '6.1*' ! -path "$2" -mmin +60 -exec rm -rf {} + 2>/dev/null || true
}
