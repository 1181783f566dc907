#!/usr/bin/env bash
# Installs what building and running need (scripts/deps-build.sh), builds
# cephdpdkd and runs it on the embedded default configuration: a net_pcap
# vdev replaying sample Ceph-node traffic,
# no NIC and no hugepages needed. Ctrl-C stops it (and checks for mbuf
# leaks). Extra arguments go to `cephdpdkd run`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps-build.sh
. scripts/env.sh
./scripts/build-bpf.sh
mkdir -p bin
go build -o bin/cephdpdkd ./cmd/cephdpdkd
exec ./bin/cephdpdkd run "$@"
