package consumer

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -I${SRCDIR}/../dispatch -I${SRCDIR}/../pmd
#include <rte_malloc.h>
#include "native.h"
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Counts are a consumer's running totals, readable from any goroutine.
type Counts struct {
	Packets atomic.Uint64
	Bytes   atomic.Uint64
	Drops   atomic.Uint64
}

// Total is a snapshot of Counts, added up over several consumers (the
// local consumers of a service, one per lane).
type Total struct{ Packets, Bytes, Drops uint64 }

// Add adds c's current counts to t.
func (t *Total) Add(c *Counts) {
	t.Packets += c.Packets.Load()
	t.Bytes += c.Bytes.Load()
	t.Drops += c.Drops.Load()
}

// native is a consumer implemented in C (native.h). A poll loop runs it
// inside its single cgo call per iteration (dispatch.NativeConsumer);
// Poll runs it on its own, for callers outside a poll loop.
type native struct {
	c *C.struct_cdd_native
}

func newNative(kind int, lanes *dispatch.RingSet, burst int) (native, error) {
	if burst < 1 || burst > pmd.MaxBurst {
		return native{}, fmt.Errorf("consumer: burst %d outside 1..%d", burst, pmd.MaxBurst)
	}
	c := (*C.struct_cdd_native)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_native, C.RTE_CACHE_LINE_SIZE))
	if c == nil {
		return native{}, fmt.Errorf("consumer: for ring %q: out of DPDK memory", lanes.Rings()[0].Name())
	}
	c.lanes = ringset(lanes)
	c.kind = C.uint16_t(kind)
	c.burst = C.uint16_t(burst)
	return native{c: c}, nil
}

// ring and ringset convert dispatch's handles to this package's C types.
func ring(r *dispatch.Ring) *C.struct_rte_ring {
	return (*C.struct_rte_ring)(unsafe.Pointer(r.C()))
}

func ringset(s *dispatch.RingSet) *C.struct_cdd_ringset {
	return (*C.struct_cdd_ringset)(unsafe.Pointer(s.C()))
}

// Native returns the C consumer for the poll loop.
func (n native) Native() *pmd.CNative { return (*pmd.CNative)(unsafe.Pointer(n.c)) }

func (n native) poll() int { return int(C.cdd_native_run(n.c)) }

// load copies the C counters into counts. The C side is written only by
// the owning poll loop, which calls this after running it.
func (n native) load(into *Counts) {
	into.Packets.Store(uint64(n.c.pkts))
	into.Bytes.Store(uint64(n.c.bytes))
	into.Drops.Store(uint64(n.c.drops))
}

func (n native) close() {
	if n.c != nil {
		C.cdd_native_release(n.c)
		C.rte_free(unsafe.Pointer(n.c))
	}
}

// Sink counts and frees every packet of its lanes.
type Sink struct {
	n native
	Counts
}

var _ dispatch.NativeConsumer = (*Sink)(nil)

// NewSink creates a counting sink draining lanes in bursts of burst
// packets.
func NewSink(lanes *dispatch.RingSet, burst int) (*Sink, error) {
	n, err := newNative(C.CDD_NATIVE_SINK, lanes, burst)
	if err != nil {
		return nil, err
	}
	return &Sink{n: n}, nil
}

// Poll dequeues, counts and frees one burst.
func (s *Sink) Poll() int {
	k := s.n.poll()
	s.Publish()
	return k
}

// Native returns the C sink, run by the poll loop.
func (s *Sink) Native() *pmd.CNative { return s.n.Native() }

// Publish makes the C counters visible through Counts.
func (s *Sink) Publish() { s.n.load(&s.Counts) }

// Close releases the sink's C memory. It holds no packets between polls.
func (s *Sink) Close() {
	s.Publish()
	s.n.close()
	s.n.c = nil
}

// Forwarder transmits its lanes' packets out a port TX queue.
type Forwarder struct {
	n native
	Counts
}

var _ dispatch.NativeConsumer = (*Forwarder)(nil)

// NewForwarder creates a forwarder from lanes to port's TX queue. Only
// one lcore may use a TX queue.
func NewForwarder(lanes *dispatch.RingSet, port, queue uint16, burst int) (*Forwarder, error) {
	n, err := newNative(C.CDD_NATIVE_FORWARD, lanes, burst)
	if err != nil {
		return nil, err
	}
	n.c.port, n.c.queue = C.uint16_t(port), C.uint16_t(queue)
	return &Forwarder{n: n}, nil
}

// Poll offers held packets and one more burst from the ring to the TX queue.
func (f *Forwarder) Poll() int {
	k := f.n.poll()
	f.Publish()
	return k
}

// Native returns the C forwarder, run by the poll loop.
func (f *Forwarder) Native() *pmd.CNative { return f.n.Native() }

// Publish makes the C counters visible through Counts.
func (f *Forwarder) Publish() { f.n.load(&f.Counts) }

// Close frees packets still waiting for TX space, counting them as drops,
// and releases the forwarder's C memory.
func (f *Forwarder) Close() {
	if f.n.c == nil {
		return
	}
	C.cdd_native_release(f.n.c)
	f.Publish()
	f.n.close()
	f.n.c = nil
}
