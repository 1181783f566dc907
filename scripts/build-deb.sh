#!/usr/bin/env bash
# Builds the Debian package cephdpdkd_<version>_amd64.deb for Debian 12:
#
#   /usr/bin/cephdpdkd                         the daemon, built here
#   /lib/systemd/system/cephdpdkd@.service     the unit (deploy/)
#   /usr/share/doc/cephdpdkd/examples/         configs/examples/*.yaml and
#                                              the embedded default's file
#   /usr/share/doc/cephdpdkd/prometheus/       rules and scrape config
#   /usr/share/doc/cephdpdkd/grafana/          the dashboard
#   /etc/cephdpdkd/                            empty: one NAME.yaml per NIC,
#                                              started as cephdpdkd@NAME
#
# No conffiles and nothing under /etc/cephdpdkd but the directory: every
# file there is an instance, so an example put there could be started by
# mistake. The package neither enables nor starts a unit.
#
# Depends: the shared libraries the binary links (dpkg-shlibdeps, with
# their versions) and every package of deploy/container/packages.txt,
# the one list of what cephdpdkd needs at run time (the container image
# and scripts/deps-run.sh install the same): DPDK's PMD plugins, which
# the EAL loads from pmds-23.0 at start and no linker sees, libbpf and
# kmod. A linked library's package missing from that list fails the build.
#
# The version is VERSION's, followed in a git checkout by
# +git<commits>.<hash> (and .dirty for uncommitted changes); the binary's
# --version prints the same.
#
# Usage: scripts/build-deb.sh [-o OUTDIR] [-b BINARY]
#   -o  where the .deb goes (default: dist/)
#   -b  package this binary instead of building one (its --version must
#       print the package's version)
# The last line on stdout is the .deb's path. Needs Go (scripts/env.sh),
# DPDK's development files and dpkg-dev (scripts/deps.sh); not root.
set -euo pipefail

log() { echo "build-deb: $*" >&2; }
die() { log "$*"; exit 1; }

repo=$(cd "$(dirname "$0")/.." && pwd)
outdir=$repo/dist bin=
while getopts o:b: opt; do
	case $opt in
	o) outdir=$OPTARG ;;
	b) bin=$OPTARG ;;
	*) die "usage: $0 [-o OUTDIR] [-b BINARY]" ;;
	esac
done
for c in dpkg-deb dpkg-shlibdeps; do
	command -v "$c" >/dev/null || die "$c is missing (dpkg-dev: scripts/deps.sh installs it)"
done
[ "$(dpkg --print-architecture)" = amd64 ] || die "builds for amd64 only"

# ---------------------------------------------------------------- version
version=$(tr -d ' \n' <"$repo/VERSION")
[[ $version =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "VERSION: $version is not a Debian upstream version"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
	version+="+git$(git -C "$repo" rev-list --count HEAD).$(git -C "$repo" rev-parse --short=10 HEAD)"
	git -C "$repo" diff --quiet HEAD -- 2>/dev/null || version+=.dirty
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
S=$work/stage
install -d "$S/DEBIAN" "$S/usr/bin" "$S/lib/systemd/system" "$S/etc/cephdpdkd" \
	"$S/usr/share/doc/cephdpdkd/examples" "$S/usr/share/doc/cephdpdkd/prometheus" "$S/usr/share/doc/cephdpdkd/grafana"

# ---------------------------------------------------------------- files
if [ -z "$bin" ]; then
	log "go build cephdpdkd $version"
	(cd "$repo" && go build -ldflags "-X main.version=$version" -o "$S/usr/bin/cephdpdkd" ./cmd/cephdpdkd)
else
	install -m 0755 "$bin" "$S/usr/bin/cephdpdkd"
fi
got=$("$S/usr/bin/cephdpdkd" --version) || die "the binary does not run here"
[ "$got" = "cephdpdkd $version" ] || die "the binary says \"$got\", the package is $version"
install -m 0644 "$repo/deploy/cephdpdkd@.service" "$S/lib/systemd/system/"
install -m 0644 "$repo"/configs/examples/*.yaml "$repo/configs/cephdpdkd.yaml" "$S/usr/share/doc/cephdpdkd/examples/"
install -m 0644 "$repo/deploy/prometheus/cephdpdkd.rules.yml" "$repo/deploy/prometheus/prometheus.yml" "$S/usr/share/doc/cephdpdkd/prometheus/"
install -m 0644 "$repo/deploy/grafana/cephdpdkd.json" "$S/usr/share/doc/cephdpdkd/grafana/"
install -m 0644 "$repo/deploy/container/packages.txt" "$S/usr/share/doc/cephdpdkd/"

# ---------------------------------------------------------------- depends
mapfile -t runtime < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]//g' "$repo/deploy/container/packages.txt")
((${#runtime[@]})) || die "deploy/container/packages.txt lists no package"
mkdir -p "$work/shl/debian"
printf 'Source: cephdpdkd\n\nPackage: cephdpdkd\nArchitecture: amd64\n' >"$work/shl/debian/control"
shl=$(cd "$work/shl" && dpkg-shlibdeps -O "$S/usr/bin/cephdpdkd" 2>"$work/shlibdeps.err") ||
	die "dpkg-shlibdeps: $(cat "$work/shlibdeps.err")"
shl=${shl#shlibs:Depends=}
depends=$shl
# A linked library's package the list lacks would be missing from the
# container image and from scripts/deps-run.sh.
IFS=, read -ra linked <<<"$shl"
for d in "${linked[@]}"; do
	p=$(echo "$d" | awk '{print $1}')
	[ "$p" = libc6 ] && continue
	printf '%s\n' "${runtime[@]}" | grep -qx "$p" ||
		die "the binary links $p, which deploy/container/packages.txt lacks"
done
for p in "${runtime[@]}"; do
	[[ ",$shl," =~ ,\ ?$p[\ ,] ]] || depends+=", $p"
done

size=$(du -sk --exclude=DEBIAN "$S" | cut -f1)
cat >"$S/DEBIAN/control" <<CTL
Package: cephdpdkd
Version: $version
Architecture: amd64
Maintainer: ${DEBFULLNAME:-cephdpdkd developers} <${DEBEMAIL:-cephdpdkd@users.noreply.github.com}>
Installed-Size: $size
Depends: $depends
Section: net
Priority: optional
Homepage: https://github.com/cephdpdkd/cephdpdkd
Description: kernel-bypass network path for Ceph nodes (DPDK)
 One daemon per NIC takes the port with a DPDK poll-mode driver,
 classifies Ceph's traffic and hands it to the kernel in priority order,
 and terminates RoCEv2 itself, bridged to the Ceph daemons over TCP.
 Instances are systemd units: cephdpdkd@NAME runs /etc/cephdpdkd/NAME.yaml.
 Example configurations, Prometheus rules and a Grafana dashboard are in
 /usr/share/doc/cephdpdkd.
CTL

mkdir -p "$outdir"
deb=$outdir/cephdpdkd_${version}_amd64.deb
# gzip: a few seconds for the binary, where xz takes ten times as long.
dpkg-deb --root-owner-group -Zgzip --build "$S" "$deb" >&2
log "built $deb ($(du -h "$deb" | cut -f1)); Depends: $depends"
echo "$deb"
