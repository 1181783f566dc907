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
// cgo and unsafe live only in the *_cgo.go files; eal.go and port.go are
// plain Go (option handling, validation, types). handles.go declares the
// typed handles by which the boundary packages pass C objects (a pool, a
// burst, a ring) to each other.
package pmd
