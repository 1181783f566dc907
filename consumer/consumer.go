package consumer

import (
	"fmt"
	"sync/atomic"

	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Counts are a consumer's running totals, readable from any goroutine.
type Counts struct {
	Packets atomic.Uint64
	Bytes   atomic.Uint64
	Drops   atomic.Uint64
}

// store sets c to the C side's counters.
func (c *Counts) store(from pmd.Counters) {
	c.Packets.Store(from.Packets)
	c.Bytes.Store(from.Bytes)
	c.Drops.Store(from.Drops)
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

// native is a consumer implemented in C (pmd.Native). A poll loop runs
// it inside its single cgo call per iteration (dispatch.NativeConsumer);
// Poll runs it on its own, for callers outside a poll loop.
type native struct {
	n *pmd.Native
}

// Native returns the C consumer for the poll loop.
func (n native) Native() *pmd.Native { return n.n }

func (n native) poll() int { return n.n.Run() }

// load copies the C counters into counts. The C side is written only by
// the owning poll loop, which calls this after running it.
func (n native) load(into *Counts) {
	into.store(n.n.Counters())
}

func (n *native) close() {
	n.n.Free()
	n.n = nil
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
	n, err := pmd.NewSink(lanes, burst)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return &Sink{n: native{n}}, nil
}

// Poll dequeues, counts and frees one burst.
func (s *Sink) Poll() int {
	k := s.n.poll()
	s.Publish()
	return k
}

// Native returns the C sink, run by the poll loop.
func (s *Sink) Native() *pmd.Native { return s.n.Native() }

// Publish makes the C counters visible through Counts.
func (s *Sink) Publish() { s.n.load(&s.Counts) }

// Close releases the sink's C memory. It holds no packets between polls.
func (s *Sink) Close() {
	s.Publish()
	s.n.close()
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
	n, err := pmd.NewForwarder(lanes, port, queue, burst)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return &Forwarder{n: native{n}}, nil
}

// Poll offers held packets and one more burst from the ring to the TX queue.
func (f *Forwarder) Poll() int {
	k := f.n.poll()
	f.Publish()
	return k
}

// Native returns the C forwarder, run by the poll loop.
func (f *Forwarder) Native() *pmd.Native { return f.n.Native() }

// Publish makes the C counters visible through Counts.
func (f *Forwarder) Publish() { f.n.load(&f.Counts) }

// Close frees packets still waiting for TX space, counting them as drops,
// and releases the forwarder's C memory.
func (f *Forwarder) Close() {
	if f.n.n == nil {
		return
	}
	f.n.n.Release()
	f.Publish()
	f.n.close()
}
