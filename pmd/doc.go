// Package pmd drives DPDK poll-mode drivers: it starts the EAL, opens a
// port from a PCI address or vdev devargs, configures its queues, and moves
// packets in bursts.
//
// DPDK 22.11 removed names that go-dpdk's ethdev package still uses, so the
// rte_ethdev calls here are our own cgo. Every cgo crossing on the packet
// path is one call per burst: RxBurst fills a C-allocated array of mbuf
// pointers together with each packet's data pointer and length, and Go reads
// frames through Burst.Frame without further calls into C.
//
// Gate keeps poll loops out of the port while DPDK's interrupt thread runs
// its callbacks: DPDK 22.11's net_memif unmaps a port's rings on that
// thread when the peer leaves.
//
// pmd is the module's one DPDK boundary: it alone uses cgo, unsafe and
// go-dpdk (internal/tools/checkunsafe enforces it). Above it, mempool,
// dispatch, consumer and service are plain Go over its typed handles:
// Mempool, Burst, Ring, RingSet, Native (a consumer written in C), Loop
// (a poll loop's C state and its fused per-burst Step), Kernel (the
// exception path), ProcessHost and ProcessSession (both sides of a
// service process's shared memory). The C is in .c files with its
// declarations in .h files: cdd.h (bursts, EAL, ports), lane.h and lane.c
// (ring sets, native consumers, dispatch and the step, one translation
// unit so that the step's parts inline), kernel.h/.c, svcctl.h (the
// shared-memory contract with service processes) with svcctl.c,
// svcdaemon.c and svcproc.c, gate.h/.c, quiesce.h/.c and tx.c. cgo and
// unsafe live only in the *_cgo.go files, whose preambles only include
// headers; eal.go, port.go and slots.go are plain Go.
package pmd
