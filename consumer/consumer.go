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

// native is a consumer implemented in C (pmd.Native) and the counters
// it publishes. A poll loop runs it inside its single cgo call per
// iteration (dispatch.NativeConsumer); Poll runs it on its own, for
// callers outside a poll loop.
type native struct {
	n *pmd.Native
	Counts
}

// Poll runs the consumer once and publishes its counters.
func (n *native) Poll() int {
	k := n.n.Run()
	n.Publish()
	return k
}

// Native returns the C consumer, run by the poll loop.
func (n *native) Native() *pmd.Native { return n.n }

// Publish makes the C counters visible through Counts. The C side is
// written only by whoever runs the consumer, which calls this after.
func (n *native) Publish() { n.store(n.n.Counters()) }

// close publishes the counters and releases the C memory.
func (n *native) close() {
	n.Publish()
	n.n.Free()
	n.n = nil
}

// Sink counts and frees every packet of its lanes.
type Sink struct{ native }

var _ dispatch.NativeConsumer = (*Sink)(nil)

// NewSink creates a counting sink draining lanes in bursts of burst
// packets.
func NewSink(lanes *dispatch.RingSet, burst int) (*Sink, error) {
	n, err := pmd.NewSink(lanes, burst)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return &Sink{native{n: n}}, nil
}

// Close releases the sink's C memory. It holds no packets between polls.
func (s *Sink) Close() { s.close() }

// Forwarder transmits its lanes' packets out a port TX queue, keeping
// what the queue refuses for its next run.
type Forwarder struct{ native }

var _ dispatch.NativeConsumer = (*Forwarder)(nil)

// NewForwarder creates a forwarder from lanes to port's TX queue. Only
// one lcore may use a TX queue.
func NewForwarder(lanes *dispatch.RingSet, port, queue uint16, burst int) (*Forwarder, error) {
	n, err := pmd.NewForwarder(lanes, port, queue, burst)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return &Forwarder{native{n: n}}, nil
}

// Close frees packets still waiting for TX space, counting them as drops,
// and releases the forwarder's C memory.
func (f *Forwarder) Close() {
	if f.n == nil {
		return
	}
	f.n.Release()
	f.close()
}
