package dispatch

/*
#cgo pkg-config: libdpdk
#include <rte_config.h>
#include <rte_ring.h>
#include <rte_mbuf.h>
#include <rte_malloc.h>

#define CDD_MAX_BURST 512

struct cdd_svc_delta {
	uint64_t pkts;
	uint64_t bytes;
	uint64_t drops;
};

// cdd_dispatch hands each packet to the ring of its verdict: one enqueue
// burst per service present in the burst; what a full ring refuses is
// freed and counted as a drop.
static void cdd_dispatch(struct rte_mbuf **pkts, const uint32_t *pkt_len, const uint8_t *svc,
			 uint16_t n, struct rte_ring **rings, uint16_t nrings,
			 struct cdd_svc_delta *d)
{
	void *out[CDD_MAX_BURST];
	uint64_t present = 0;

	for (uint16_t s = 0; s < nrings; s++)
		d[s].pkts = d[s].bytes = d[s].drops = 0;
	for (uint16_t i = 0; i < n; i++)
		present |= 1ull << svc[i];
	while (present) {
		uint16_t s = __builtin_ctzll(present);
		present &= present - 1;
		uint16_t k = 0;
		uint64_t bytes = 0;
		for (uint16_t i = 0; i < n; i++)
			if (svc[i] == s)
				out[k++] = pkts[i];
		if (s >= nrings) {
			// Cannot happen with a validated classifier; never leak.
			rte_pktmbuf_free_bulk((struct rte_mbuf **)out, k);
			continue;
		}
		unsigned int sent = rte_ring_enqueue_burst(rings[s], out, k, NULL);
		for (unsigned int i = 0; i < sent; i++)
			bytes += ((struct rte_mbuf *)out[i])->pkt_len;
		if (sent < k)
			rte_pktmbuf_free_bulk((struct rte_mbuf **)&out[sent], k - sent);
		d[s].pkts = sent;
		d[s].bytes = bytes;
		d[s].drops = k - sent;
	}
}

// cdd_ring_free_all empties a ring, freeing every mbuf in it.
static unsigned int cdd_ring_free_all(struct rte_ring *r)
{
	void *objs[64];
	unsigned int total = 0, n;
	while ((n = rte_ring_dequeue_burst(r, objs, 64, NULL)) > 0) {
		rte_pktmbuf_free_bulk((struct rte_mbuf **)objs, n);
		total += n;
	}
	return total;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/yerden/go-dpdk/ring"

	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Ring is a service's rte_ring of mbuf pointers. The dispatcher produces;
// exactly one consumer drains it.
type Ring struct {
	name string
	r    *ring.Ring
}

// NewRing creates a named ring holding size-1 packets (size is a power of
// two). singleProducer is true when one poll loop feeds it.
func NewRing(name string, size int, singleProducer bool, socket int) (*Ring, error) {
	flags := uint(C.RING_F_SC_DEQ)
	if singleProducer {
		flags |= C.RING_F_SP_ENQ
	}
	opts := []ring.Option{ring.OptFlag(flags)}
	if socket >= 0 {
		opts = append(opts, ring.OptSocket(uint(socket)))
	}
	r, err := ring.Create(name, uint(size), opts...)
	if err != nil {
		return nil, fmt.Errorf("dispatch: create ring %q of %d: %w", name, size, err)
	}
	return &Ring{name: name, r: r}, nil
}

// Name returns the ring's name, which secondary processes look it up by.
func (r *Ring) Name() string { return r.name }

// Count returns the number of packets waiting in the ring.
func (r *Ring) Count() int { return int(r.r.Count()) }

// Capacity returns how many packets the ring holds at most.
func (r *Ring) Capacity() int { return int(r.r.Cap()) }

// Pointer returns the struct rte_ring for cgo consumers.
func (r *Ring) Pointer() unsafe.Pointer { return unsafe.Pointer(r.r) }

// FreeAll frees every packet left in the ring and returns how many.
func (r *Ring) FreeAll() int {
	return int(C.cdd_ring_free_all((*C.struct_rte_ring)(r.Pointer())))
}

// Close frees the packets left in the ring, then the ring.
func (r *Ring) Close() int {
	if r.r == nil {
		return 0
	}
	n := r.FreeAll()
	r.r.Free()
	r.r = nil
	return n
}

// ringSet is the C array of rings and per-service deltas a poll loop
// passes to cdd_dispatch.
type ringSet struct {
	rings  **C.struct_rte_ring
	deltas *C.struct_cdd_svc_delta
	n      int
	view   []serviceDelta
}

// serviceDelta mirrors struct cdd_svc_delta.
type serviceDelta struct{ pkts, bytes, drops uint64 }

func newRingSet(rings []*Ring) (*ringSet, error) {
	n := len(rings)
	rs := &ringSet{n: n}
	rs.rings = (**C.struct_rte_ring)(C.rte_zmalloc(nil, C.size_t(n)*C.size_t(unsafe.Sizeof(uintptr(0))), 64))
	rs.deltas = (*C.struct_cdd_svc_delta)(C.rte_zmalloc(nil, C.size_t(n)*C.sizeof_struct_cdd_svc_delta, 64))
	if rs.rings == nil || rs.deltas == nil {
		rs.free()
		return nil, fmt.Errorf("dispatch: allocate ring table for %d services: out of DPDK memory", n)
	}
	ptrs := unsafe.Slice(rs.rings, n)
	for i, r := range rings {
		ptrs[i] = (*C.struct_rte_ring)(r.Pointer())
	}
	rs.view = unsafe.Slice((*serviceDelta)(unsafe.Pointer(rs.deltas)), n)
	return rs, nil
}

func (rs *ringSet) free() {
	C.rte_free(unsafe.Pointer(rs.rings))
	C.rte_free(unsafe.Pointer(rs.deltas))
	rs.rings, rs.deltas = nil, nil
}

// dispatch enqueues the burst into the rings by verdict: one cgo call.
// Afterwards the burst is empty and rs.view holds per-service deltas.
func (rs *ringSet) dispatch(b *pmd.Burst) {
	mbufs, lens, verdicts := b.Arrays()
	C.cdd_dispatch((**C.struct_rte_mbuf)(mbufs), (*C.uint32_t)(lens), (*C.uint8_t)(verdicts),
		C.uint16_t(b.Len()), rs.rings, C.uint16_t(rs.n), rs.deltas)
	b.SetLen(0)
}
