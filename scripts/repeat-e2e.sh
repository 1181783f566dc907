#!/usr/bin/env bash
# Runs the end-to-end packages N times, as scripts/test.sh runs them (all of
# ./e2e/... in one go test, so the Ceph tests share the machine with
# e2e/systemd's guest), to tell a flaky test from a broken one. Each run's
# output goes to $LOGDIR/run-K.log (default: a new directory under /tmp);
# a failed run's FAIL lines are echoed. The last line is
#
#	e2e-repeat <runs> <failures>
#
# and the exit status is 1 when any run failed. Extra arguments go to
# go test (e.g. -run TestCephOverRoCE). Needs root, like the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 N [go test flags...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
n=$1
shift
case $n in '' | *[!0-9]* | 0) usage ;; esac
./scripts/deps.sh >/dev/null
. scripts/env.sh
./scripts/build-bpf.sh
logdir=${LOGDIR:-$(mktemp -d /tmp/cephdpdkd-e2e-repeat.XXXXXX)}
mkdir -p "$logdir"
echo "repeat-e2e: $n runs, logs in $logdir" >&2
# Build once, so that a compile error is one failure, not N.
go test -count=1 -run '^$' ./e2e/... >/dev/null
fail=0
for i in $(seq 1 "$n"); do
	start=$(date +%s)
	if go test -count=1 -timeout 25m "$@" ./e2e/... >"$logdir/run-$i.log" 2>&1; then
		status=ok
	else
		status=FAIL
		fail=$((fail + 1))
		grep -E '^(--- FAIL|FAIL|panic:)' "$logdir/run-$i.log" | sed "s/^/repeat-e2e: run $i: /" >&2 || true
	fi
	echo "repeat-e2e: run $i/$n $status in $(($(date +%s) - start)) s ($fail failed so far)" >&2
done
echo "e2e-repeat $n $fail"
[ "$fail" -eq 0 ]
