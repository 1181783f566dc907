#!/usr/bin/env bash
# Soaks one Ceph node behind cephdpdkd (e2e/cephnode's TestSoak, behind
# the soak build tag: not part of the suite): for M minutes a TCP client
# and a Soft-RoCE client put objects of known sha256 while faults are
# injected on a schedule (daemon kill and restart, OSD stop and start,
# monitor restart, 1% loss on the guest's link, a client vanishing
# mid-connection, a reconnect storm); then every acknowledged object is
# read back. The output ends with a table, one row per fault kind:
#
#	SOAK fault injected ops errors lost
#
# and the exit status is 1 unless every check passed and lost is 0
# throughout. The log goes to $LOGDIR/soak.log (default: a new directory
# under /tmp). Needs root, like the suite; the first run builds the guest
# image (minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 --minutes M" >&2; exit 2; }
minutes=
while [ $# -gt 0 ]; do
	case $1 in
	--minutes) [ $# -ge 2 ] || usage; minutes=$2; shift 2 ;;
	--minutes=*) minutes=${1#--minutes=}; shift ;;
	*) usage ;;
	esac
done
case $minutes in '' | *[!0-9]* | 0) usage ;; esac
. scripts/env.sh
./scripts/build-bpf.sh
logdir=${LOGDIR:-$(mktemp -d /tmp/cephdpdkd-soak.XXXXXX)}
mkdir -p "$logdir"
echo "soak: $minutes minutes, log in $logdir/soak.log" >&2
# The node's setup, the faults' recovery and the read-back come on top
# of the soak itself.
status=0
CDD_SOAK_MINUTES=$minutes go test -tags soak -run '^TestSoak$' -count=1 -v -timeout "$((minutes + 25))m" \
	./e2e/cephnode/ >"$logdir/soak.log" 2>&1 || status=$?
grep -E '^SOAK ' "$logdir/soak.log" || echo "soak: no table (see the log)" >&2
grep -E '^(--- FAIL|FAIL|panic:)|soak_test.go:.*(lost|after .* in 3 minutes)' "$logdir/soak.log" >&2 || true
echo "soak: $([ "$status" -eq 0 ] && echo ok || echo FAIL), log in $logdir/soak.log" >&2
exit "$status"
