#!/usr/bin/env bash
# Compiles the XDP program of the af_xdp port mode (bpf/xdp_roce.c) into
# internal/xdp/obj/xdp_roce.o, which the Go build embeds. Needs clang and
# libbpf's headers (scripts/deps.sh installs them). The other scripts run
# it before they build; run it yourself before a plain go build.
set -euo pipefail
cd "$(dirname "$0")/.."
out=internal/xdp/obj/xdp_roce.o
src=bpf/xdp_roce.c
if [ "$out" -nt "$src" ]; then
	exit 0
fi
command -v clang >/dev/null || { echo "build-bpf: clang is missing: run scripts/deps.sh" >&2; exit 1; }
# -g: the program's BTF, which libxdp reads to adopt it.
clang -O2 -g -Wall -Werror -target bpf \
	-I"/usr/include/$(gcc -dumpmachine)" \
	-c "$src" -o "$out.tmp"
mv "$out.tmp" "$out"
