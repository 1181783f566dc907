#!/usr/bin/env bash
# Installs what is missing and runs the whole test suite: vet, gofmt and
# the DPDK boundary check (internal/tools/checkunsafe),
# the pure-Go packages under the race detector (-short: the qemu guests
# boot once, in the next step), then every package
# (including the DPDK, testpmd and network-namespace tests, which need
# root), then a short fuzzing pass over every parser. Every step's results
# are tallied (internal/tools/testtally): a test that skips in a full
# step fails the suite unless scripts/skips.allow lists it with a reason,
# and the end prints how many tests ran, passed and skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
. scripts/env.sh
./scripts/build-bpf.sh

echo "== gofmt / go vet / checkunsafe"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt needed: $bad" >&2; exit 1; fi
go vet ./...
# unsafe and cgo only in the *_cgo.go files of pmd, C sources only in pmd,
# and no unsafe.Pointer in any exported API.
go run ./internal/tools/checkunsafe

tally=$(mktemp -d)
trap 'rm -rf "$tally"' EXIT
go build -o "$tally/testtally" ./internal/tools/testtally
# gotest STEP [-short] [-v] -- GO-TEST-ARGS...: go test -json, printed as
# go test prints and recorded for the tally.
gotest() {
	local step=$1 flags=()
	shift
	while [ "$1" != -- ]; do flags+=("$1"); shift; done
	shift
	go test -json "$@" | "$tally/testtally" -step "$step" -record "$tally/records" "${flags[@]}"
}

echo "== race: pure-Go packages"
# The end-to-end packages hold only tests, which drive the daemon as a
# process: they run once, in their own step below. So does deploy/pkg,
# whose one test drives dpkg and apt in a Debian root, not Go code.
pure=$(go list -f '{{if not .CgoFiles}}{{.ImportPath}}{{end}}' ./... | grep -v -e '/e2e/' -e '/deploy/pkg$' | while read -r p; do
	# a package is pure when none of its dependencies inside the module use cgo
	if ! go list -deps -f '{{if and .CgoFiles (not .Standard)}}{{.ImportPath}}{{end}}' "$p" | grep -q .; then echo "$p"; fi
done)
gotest race -short -- -race -short -count=1 $pure

echo "== all packages"
# The end-to-end tests run on their own afterwards: their Ceph clusters,
# guests and floods would load the two cores the other packages' poll
# loops time their traffic on (and DPDK's af_packet PMD takes in frames of
# every interface until it has bound its socket to one).
gotest packages -- -count=1 -timeout 15m $(go list ./... | grep -v '/e2e/')
echo "== end to end"
# -v: the figure lines the tests print (FIGURES, lossy-ratio) reach the log.
gotest e2e -v -- -count=1 -timeout 25m ./e2e/...

echo "== fuzz (short)"
# A count, not a duration: a duration can end while a worker is still
# minimizing, which go test reports as "context deadline exceeded".
fuzztime="${FUZZTIME:-20000x}"
# Targets whose every input runs a whole exchange get fewer.
declare -A fuzzslow=([FuzzServerExchange]=500x [FuzzRPingServer]=2000x)
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "-- $pkg $f"
		go test -run '^$' -fuzz "^$f\$" -fuzztime "${fuzzslow[$f]:-$fuzztime}" -fuzzminimizetime 2s "$pkg"
	done
done
echo
"$tally/testtally" -report -allow scripts/skips.allow "$tally/records"
echo "== all tests passed"
