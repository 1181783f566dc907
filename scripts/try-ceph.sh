#!/usr/bin/env bash
# Installs what is missing, builds cephdpdkd and runs it where it belongs:
# in front of a real Ceph cluster (mon + memstore OSD, Debian's Ceph) in a
# network namespace, with the kernel exception path and the RoCE bridge
# on. Debian's rados then writes and reads objects through the daemon's
# DPDK port over TCP and, where a qemu Soft-RoCE guest can be built, over
# RoCE, and it ends with a summary (objects read back identical, MB/s,
# RoCE sessions bridged, drops). Everything it makes is removed on exit
# and on Ctrl-C. Needs root. Extra arguments go to the tool
# (internal/tools/tryceph): --bench 10s, --roce auto|off, -v.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
. scripts/env.sh
./scripts/build-bpf.sh
mkdir -p bin
echo "building cephdpdkd and the try-ceph tool"
go build -o bin/cephdpdkd ./cmd/cephdpdkd
go build -o bin/cephdpdkd-try ./internal/tools/tryceph
exec ./bin/cephdpdkd-try --daemon bin/cephdpdkd "$@"
