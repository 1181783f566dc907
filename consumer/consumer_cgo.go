package consumer

/*
#cgo pkg-config: libdpdk
#include <rte_config.h>
#include <rte_ring.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>

#define CDD_MAX_BURST 512

struct cdd_count {
	uint64_t pkts;
	uint64_t bytes;
};

// cdd_sink dequeues up to max packets, adds them up and frees them.
static unsigned int cdd_sink(struct rte_ring *r, unsigned int max, struct cdd_count *c)
{
	struct rte_mbuf *m[CDD_MAX_BURST];
	unsigned int n = rte_ring_sc_dequeue_burst(r, (void **)m, max, NULL);
	uint64_t bytes = 0;
	for (unsigned int i = 0; i < n; i++)
		bytes += m[i]->pkt_len;
	rte_pktmbuf_free_bulk(m, n);
	c->pkts += n;
	c->bytes += bytes;
	return n;
}

// A forwarder keeps packets the TX queue did not take and offers them
// again on the next poll before dequeuing more, so a busy port applies
// back-pressure to the ring instead of losing packets here.
struct cdd_fwd {
	uint16_t port, queue;
	uint16_t npend;
	struct rte_mbuf *pend[CDD_MAX_BURST];
	uint64_t pkts, bytes;
};

static unsigned int cdd_forward(struct rte_ring *r, unsigned int max, struct cdd_fwd *f)
{
	if (f->npend < max)
		f->npend += rte_ring_sc_dequeue_burst(r, (void **)&f->pend[f->npend], max - f->npend, NULL);
	if (f->npend == 0)
		return 0;
	// Add up lengths before TX: once sent, an mbuf belongs to the PMD,
	// which may free it at once. Subtract what stays with us.
	uint64_t bytes = 0;
	for (uint16_t i = 0; i < f->npend; i++)
		bytes += f->pend[i]->pkt_len;
	uint16_t sent = rte_eth_tx_burst(f->port, f->queue, f->pend, f->npend);
	for (uint16_t i = sent; i < f->npend; i++)
		bytes -= f->pend[i]->pkt_len;
	f->bytes += bytes;
	f->pkts += sent;
	if (sent > 0 && sent < f->npend)
		memmove(&f->pend[0], &f->pend[sent], (f->npend - sent) * sizeof(f->pend[0]));
	f->npend -= sent;
	return sent;
}

static unsigned int cdd_forward_free(struct cdd_fwd *f)
{
	unsigned int n = f->npend;
	rte_pktmbuf_free_bulk(f->pend, f->npend);
	f->npend = 0;
	return n;
}
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

// Sink counts and frees every packet of its ring.
type Sink struct {
	ring  unsafe.Pointer
	burst C.uint
	c     *C.struct_cdd_count
	Counts
}

var _ dispatch.Consumer = (*Sink)(nil)

// NewSink creates a counting sink draining r in bursts of burst packets.
func NewSink(r *dispatch.Ring, burst int) (*Sink, error) {
	if burst < 1 || burst > pmd.MaxBurst {
		return nil, fmt.Errorf("consumer: sink burst %d outside 1..%d", burst, pmd.MaxBurst)
	}
	c := (*C.struct_cdd_count)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_count, 64))
	if c == nil {
		return nil, fmt.Errorf("consumer: sink for ring %q: out of DPDK memory", r.Name())
	}
	return &Sink{ring: r.Pointer(), burst: C.uint(burst), c: c}, nil
}

// Poll dequeues, counts and frees one burst.
func (s *Sink) Poll() int {
	n := int(C.cdd_sink((*C.struct_rte_ring)(s.ring), s.burst, s.c))
	if n > 0 {
		s.Packets.Store(uint64(s.c.pkts))
		s.Bytes.Store(uint64(s.c.bytes))
	}
	return n
}

// Close releases the sink's C memory. It holds no packets between polls.
func (s *Sink) Close() {
	if s.c != nil {
		C.rte_free(unsafe.Pointer(s.c))
		s.c = nil
	}
}

// Forwarder transmits its ring's packets out a port TX queue.
type Forwarder struct {
	ring  unsafe.Pointer
	burst C.uint
	f     *C.struct_cdd_fwd
	Counts
}

var _ dispatch.Consumer = (*Forwarder)(nil)

// NewForwarder creates a forwarder from r to port's TX queue. Only one
// lcore may use a TX queue.
func NewForwarder(r *dispatch.Ring, port, queue uint16, burst int) (*Forwarder, error) {
	if burst < 1 || burst > pmd.MaxBurst {
		return nil, fmt.Errorf("consumer: forwarder burst %d outside 1..%d", burst, pmd.MaxBurst)
	}
	f := (*C.struct_cdd_fwd)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_fwd, 64))
	if f == nil {
		return nil, fmt.Errorf("consumer: forwarder for ring %q: out of DPDK memory", r.Name())
	}
	f.port, f.queue = C.uint16_t(port), C.uint16_t(queue)
	return &Forwarder{ring: r.Pointer(), burst: C.uint(burst), f: f}, nil
}

// Poll offers held packets and one more burst from the ring to the TX queue.
func (f *Forwarder) Poll() int {
	n := int(C.cdd_forward((*C.struct_rte_ring)(f.ring), f.burst, f.f))
	if n > 0 {
		f.Packets.Store(uint64(f.f.pkts))
		f.Bytes.Store(uint64(f.f.bytes))
	}
	return n
}

// Pending returns how many packets wait for TX space.
func (f *Forwarder) Pending() int { return int(f.f.npend) }

// Close frees packets still waiting for TX space, counting them as drops,
// and releases the forwarder's C memory.
func (f *Forwarder) Close() {
	if f.f == nil {
		return
	}
	f.Drops.Add(uint64(C.cdd_forward_free(f.f)))
	C.rte_free(unsafe.Pointer(f.f))
	f.f = nil
}
