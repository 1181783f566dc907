#!/usr/bin/env bash
# Installs what is missing and runs the whole test suite: vet, gofmt and
# the DPDK boundary check (internal/tools/checkunsafe),
# the pure-Go packages under the race detector (-short: the qemu guests
# boot once, in the next step), then every package
# (including the DPDK, testpmd and network-namespace tests, which need
# root), then a short fuzzing pass over every parser.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
. scripts/env.sh

echo "== gofmt / go vet / checkunsafe"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt needed: $bad" >&2; exit 1; fi
go vet ./...
# unsafe and cgo only in the *_cgo.go files of pmd, mempool, dispatch and
# consumer, and no unsafe.Pointer in any exported API.
go run ./internal/tools/checkunsafe

echo "== race: pure-Go packages"
pure=$(go list -f '{{if not .CgoFiles}}{{.ImportPath}}{{end}}' ./... | while read -r p; do
	# a package is pure when none of its dependencies inside the module use cgo
	if ! go list -deps -f '{{if and .CgoFiles (not .Standard)}}{{.ImportPath}}{{end}}' "$p" | grep -q .; then echo "$p"; fi
done)
go test -race -short -count=1 $pure

echo "== all packages"
# The end-to-end tests run on their own afterwards: their Ceph clusters,
# guests and floods would load the two cores the other packages' poll
# loops time their traffic on (and DPDK's af_packet PMD takes in frames of
# every interface until it has bound its socket to one).
go test -count=1 -timeout 15m $(go list ./... | grep -v '/e2e/')
echo "== end to end"
# -v: the figure lines the tests print (FIGURES, lossy-ratio) reach the log.
go test -v -count=1 -timeout 25m ./e2e/...

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
echo "== all tests passed"
