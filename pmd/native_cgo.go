package pmd

/*
#include "lane.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Counters are a consumer's running totals as its C state keeps them.
type Counters struct{ Packets, Bytes, Drops uint64 }

// Native is a consumer implemented in C (struct cdd_native, lane.h): a
// counting sink, a forwarder, or a service process's daemon side. A
// poll loop runs it inside its one cgo call per iteration (Loop.Step);
// Run runs it alone. Its counters are written by whoever runs it.
type Native struct {
	c *C.struct_cdd_native
}

func newNative(kind int, lanes *RingSet, burst int) (*Native, error) {
	if burst < 1 || burst > MaxBurst {
		return nil, fmt.Errorf("pmd: burst %d outside 1..%d", burst, MaxBurst)
	}
	c := (*C.struct_cdd_native)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_native, C.RTE_CACHE_LINE_SIZE))
	if c == nil {
		return nil, fmt.Errorf("pmd: for ring %q: %w", lanes.Rings()[0].Name(), errNoMemory)
	}
	c.lanes = lanes.c
	c.kind = C.uint16_t(kind)
	c.burst = C.uint16_t(burst)
	return &Native{c: c}, nil
}

var errNoMemory = errors.New("out of DPDK memory")

// NewSink creates a consumer that counts and frees every packet of
// lanes, in bursts of burst packets.
func NewSink(lanes *RingSet, burst int) (*Native, error) {
	return newNative(C.CDD_NATIVE_SINK, lanes, burst)
}

// NewForwarder creates a consumer that transmits lanes' packets out
// port's TX queue, keeping what the queue refuses for its next run. Only
// one lcore may use a TX queue.
func NewForwarder(lanes *RingSet, port, queue uint16, burst int) (*Native, error) {
	n, err := newNative(C.CDD_NATIVE_FORWARD, lanes, burst)
	if err != nil {
		return nil, err
	}
	n.c.port, n.c.queue = C.uint16_t(port), C.uint16_t(queue)
	return n, nil
}

// Run runs the consumer once and returns the packets it handled.
func (n *Native) Run() int { return int(C.cdd_native_run(n.c)) }

// Counters returns the C counters. Read them on the goroutine that runs
// the consumer, or once it stopped.
func (n *Native) Counters() Counters {
	return Counters{Packets: uint64(n.c.pkts), Bytes: uint64(n.c.bytes), Drops: uint64(n.c.drops)}
}

// Release frees what the consumer holds (a forwarder's packets the TX
// queue has not taken), counting them as drops, and returns how many.
func (n *Native) Release() int { return int(C.cdd_native_release(n.c)) }

// Free releases what the consumer holds and its C memory.
func (n *Native) Free() {
	if n == nil || n.c == nil {
		return
	}
	C.cdd_native_release(n.c)
	C.rte_free(unsafe.Pointer(n.c))
	n.c = nil
}
