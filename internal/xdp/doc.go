// Package xdp loads, attaches, finds and reads cephdpdkd's XDP program
// (bpf/xdp_roce.c), which splits one kernel interface between the node's
// stack and the daemon: RoCEv2 to the RoCE address is redirected to the
// AF_XDP socket of its receive queue, everything else passes.
//
// The daemon attaches the program itself, in the mode the config asks
// for, and DPDK's net_af_xdp (through libxdp) adopts it as its default
// program and fills its socket map. The program stays attached when the
// daemon stops or dies, so that restarts do not reset the NIC's rings;
// without sockets it passes every frame. Detach removes it on request.
package xdp
