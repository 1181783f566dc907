package dispatch

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -I${SRCDIR}/../pmd
#include <rte_malloc.h>
#include "cdd.h"
#include "native.h"

#define CDD_MAX_SERVICES 64 // a service set is a uint64_t mask

struct cdd_svc_delta {
	uint64_t pkts;
	uint64_t bytes;
	uint64_t drops;
};

// A poll loop's C state: its lane of each service (NULL: closed), a bucket per service for
// sorting a burst, per-service deltas of the last dispatch, the native
// consumers the loop runs, and, per service, the local native consumer of
// its lane (NULL if none) that the dispatcher may hand packets directly.
struct cdd_loop {
	struct rte_ring **rings;
	struct cdd_native **direct;
	uint16_t nrings;
	uint16_t cap;
	struct cdd_svc_delta *d;
	void **bucket;             // nrings × cap
	struct cdd_native **natives;
	uint16_t nnatives;
};

// cdd_dispatch hands each packet of the burst to its service's lane: one
// pass to sort into per-service buckets, then per service present either
// one enqueue burst into the lane's ring or, when the lane has a local
// native consumer with nothing waiting (ring empty, nothing pending), the
// bucket straight to that consumer, which saves the ring's enqueue and
// dequeue and a second pass over the mbufs; what it does not take (a full
// TX queue) goes into the ring, behind nothing. What a full ring refuses
// is freed and counted as a drop. The burst is empty afterwards.
static void cdd_dispatch(struct cdd_burst *b, struct cdd_loop *l)
{
	// Fill counts and byte sums live in locals, set up for a service when
	// its first packet shows up: the compiler keeps them out of the
	// loop's C state, which the bucket stores could alias.
	const uint16_t nr = l->nrings, cap = l->cap, n = b->n;
	void **bucket = l->bucket;
	uint16_t fill[CDD_MAX_SERVICES];
	uint64_t bytes[CDD_MAX_SERVICES];
	uint64_t present = 0;
	for (uint16_t i = 0; i < n; i++) {
		uint8_t s = b->svc[i];
		if (unlikely(s >= nr)) {
			// Cannot happen with a validated classifier; never leak.
			rte_pktmbuf_free(b->pkts[i]);
			continue;
		}
		uint64_t bit = 1ull << s;
		if (!(present & bit)) {
			present |= bit;
			fill[s] = 0;
			bytes[s] = 0;
		}
		bucket[(uint32_t)s * cap + fill[s]++] = b->pkts[i];
		bytes[s] += b->pkt_len[i];
	}
	// The deltas of absent services stay as Go zeroed them.
	while (present) {
		uint16_t s = __builtin_ctzll(present);
		present &= present - 1;
		void **out = &bucket[(uint32_t)s * cap];
		uint16_t k = fill[s];
		if (unlikely(l->rings[s] == NULL)) {
			// A closed service (being replaced by a reload): freed
			// and counted as drops.
			rte_pktmbuf_free_bulk((struct rte_mbuf **)out, k);
			l->d[s].drops = k;
			continue;
		}
		unsigned int taken = 0;
		struct cdd_native *c = l->direct[s];
		if (c && cdd_native_idle(c) && rte_ring_empty(l->rings[s]))
			taken = cdd_native_offer(c, (struct rte_mbuf **)out, k, bytes[s]);
		unsigned int sent = taken;
		if (taken < k)
			sent += rte_ring_sp_enqueue_burst(l->rings[s], &out[taken], k - taken, NULL);
		if (sent < k) {
			for (unsigned int i = sent; i < k; i++)
				bytes[s] -= ((struct rte_mbuf *)out[i])->pkt_len;
			rte_pktmbuf_free_bulk((struct rte_mbuf **)&out[sent], k - sent);
		}
		l->d[s].pkts = sent;
		l->d[s].bytes = bytes[s];
		l->d[s].drops = k - sent;
	}
	b->n = 0;
}

// cdd_step is a poll loop's one cgo call per RX queue and iteration: it
// dispatches the burst Go has just classified, runs the native consumers
// (when run_natives), and receives the next burst into b (when rx). It
// returns the packets the natives handled. The burst and the loop state
// come as integers: both are C memory, and cgo's check that a pointer
// argument holds no Go pointer took 1.5% of a forwarding loop.
static uint32_t cdd_step(uintptr_t burst, uintptr_t loop, uint16_t port, uint16_t queue,
			 int run_natives, int rx)
{
	struct cdd_burst *b = (struct cdd_burst *)burst;
	struct cdd_loop *l = (struct cdd_loop *)loop;
	uint32_t work = 0;
	if (b && b->n)
		cdd_dispatch(b, l);
	if (run_natives)
		for (uint16_t i = 0; i < l->nnatives; i++)
			work += cdd_native_run(l->natives[i]);
	if (b && rx)
		cdd_rx_burst(b, port, queue);
	return work;
}

// cdd_ringset_burst frees what b still holds and fills it from a ring
// set, as cdd_rx_burst fills it from a port queue: one call a burst.
static uint16_t cdd_ringset_burst(struct cdd_burst *b, struct cdd_ringset *s, uint16_t max)
{
	if (b->n > 0)
		cdd_burst_free(b);
	if (max > b->cap)
		max = b->cap;
	uint16_t n = (uint16_t)cdd_ringset_dequeue(s, b->pkts, max);
	cdd_burst_fill(b, n);
	return n;
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

// NativeConsumer is a Consumer implemented in C that the poll loop runs
// inside its one cgo call per iteration instead of calling Poll.
type NativeConsumer interface {
	Consumer
	// Native returns the consumer's struct cdd_native (native.h).
	Native() *pmd.CNative
	// Publish makes counters the C side keeps visible to readers; the
	// loop calls it when it publishes its own.
	Publish()
}

// Ring is a lane: the rte_ring of mbuf pointers that carries one poll
// loop's packets for one service. Exactly one loop produces and exactly
// one consumer drains it, so it uses DPDK's single-producer,
// single-consumer paths: no compare-and-swap on the ring heads.
type Ring struct {
	name string
	r    *ring.Ring
}

// NewRing creates a named lane holding size-1 packets (size is a power of
// two) on a NUMA socket (-1: any).
func NewRing(name string, size int, socket int) (*Ring, error) {
	opts := []ring.Option{ring.OptFlag(C.RING_F_SP_ENQ | C.RING_F_SC_DEQ)}
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

// C returns the struct rte_ring for cgo consumers.
func (r *Ring) C() *pmd.CRing { return (*pmd.CRing)(unsafe.Pointer(r.r)) }

// FreeAll frees every packet left in the ring and returns how many.
func (r *Ring) FreeAll() int {
	return int(C.cdd_ring_free_all((*C.struct_rte_ring)(unsafe.Pointer(r.r))))
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

// RingSet is a service's lanes as its single consumer (the RoCE
// endpoint, the kernel exception path) drains them: one cgo call takes a
// burst from all of them, in turn (struct cdd_ringset, native.h).
type RingSet struct {
	c     *C.struct_cdd_ringset
	rings []*Ring
}

// NewRingSet gathers rings, which stay the caller's to close.
func NewRingSet(rings []*Ring) (*RingSet, error) {
	if len(rings) == 0 || len(rings) > 0xffff {
		return nil, fmt.Errorf("dispatch: a ring set of %d rings", len(rings))
	}
	ptr := C.size_t(unsafe.Sizeof(uintptr(0)))
	c := (*C.struct_cdd_ringset)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_ringset+C.size_t(len(rings))*ptr, C.RTE_CACHE_LINE_SIZE))
	if c == nil {
		return nil, fmt.Errorf("dispatch: allocate a set of %d rings: %w", len(rings), pmd.Errno(C.ENOMEM))
	}
	c.n = C.uint16_t(len(rings))
	slots := unsafe.Slice((**C.struct_rte_ring)(unsafe.Add(unsafe.Pointer(c), C.sizeof_struct_cdd_ringset)), len(rings))
	for i, r := range rings {
		slots[i] = (*C.struct_rte_ring)(unsafe.Pointer(r.r))
	}
	return &RingSet{c: c, rings: rings}, nil
}

// Rings returns the set's rings.
func (s *RingSet) Rings() []*Ring { return s.rings }

// Count returns the packets waiting in all the set's rings.
func (s *RingSet) Count() int {
	n := 0
	for _, r := range s.rings {
		n += r.Count()
	}
	return n
}

// C returns the struct cdd_ringset for cgo consumers.
func (s *RingSet) C() *pmd.CRingSet { return (*pmd.CRingSet)(unsafe.Pointer(s.c)) }

// Dequeue frees what b still holds and replaces it with up to max
// packets from the set's rings: one cgo call.
func (s *RingSet) Dequeue(b *pmd.Burst, max int) int {
	return int(C.cdd_ringset_burst((*C.struct_cdd_burst)(unsafe.Pointer(b.C())), s.c, C.uint16_t(min(max, pmd.MaxBurst))))
}

// Free releases the set; its rings are left alone.
func (s *RingSet) Free() {
	if s.c != nil {
		C.rte_free(unsafe.Pointer(s.c))
		s.c = nil
	}
}

// loop is a poll loop's C state (struct cdd_loop) and Go views of it.
type loop struct {
	c      *C.struct_cdd_loop
	deltas []serviceDelta
}

// serviceDelta mirrors struct cdd_svc_delta.
type serviceDelta struct{ pkts, bytes, drops uint64 }

// newLoop builds the C state: rings[s] is the loop's lane of service s
// (nil for a loop that does not receive, or a closed service), direct[s] its local native
// consumer or nil, natives every native the loop runs.
func newLoop(rings []*Ring, direct, natives []NativeConsumer, burst int) (*loop, error) {
	n := len(rings)
	ptr := C.size_t(unsafe.Sizeof(uintptr(0)))
	c := (*C.struct_cdd_loop)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_loop, C.RTE_CACHE_LINE_SIZE))
	if c == nil {
		return nil, fmt.Errorf("dispatch: allocate poll loop state: %w", pmd.Errno(C.ENOMEM))
	}
	l := &loop{c: c}
	c.nrings, c.cap, c.nnatives = C.uint16_t(n), C.uint16_t(burst), C.uint16_t(len(natives))
	c.rings = (**C.struct_rte_ring)(C.rte_zmalloc(nil, C.size_t(n)*ptr, C.RTE_CACHE_LINE_SIZE))
	c.direct = (**C.struct_cdd_native)(C.rte_zmalloc(nil, C.size_t(n)*ptr, C.RTE_CACHE_LINE_SIZE))
	c.d = (*C.struct_cdd_svc_delta)(C.rte_zmalloc(nil, C.size_t(n)*C.sizeof_struct_cdd_svc_delta, C.RTE_CACHE_LINE_SIZE))
	c.bucket = (*unsafe.Pointer)(C.rte_zmalloc(nil, C.size_t(n*burst)*ptr, C.RTE_CACHE_LINE_SIZE))
	c.natives = (**C.struct_cdd_native)(C.rte_zmalloc(nil, C.size_t(max(1, len(natives)))*ptr, C.RTE_CACHE_LINE_SIZE))
	if c.rings == nil || c.direct == nil || c.d == nil || c.bucket == nil || c.natives == nil {
		l.free()
		return nil, fmt.Errorf("dispatch: allocate poll loop state for %d services: %w", n, pmd.Errno(C.ENOMEM))
	}
	for i, r := range rings {
		if r != nil { // nil: a loop without RX queues dispatches nothing
			unsafe.Slice(c.rings, n)[i] = (*C.struct_rte_ring)(unsafe.Pointer(r.r))
		}
	}
	for i, d := range direct {
		if d != nil {
			unsafe.Slice(c.direct, n)[i] = (*C.struct_cdd_native)(unsafe.Pointer(d.Native()))
		}
	}
	for i, n := range natives {
		unsafe.Slice(c.natives, len(natives))[i] = (*C.struct_cdd_native)(unsafe.Pointer(n.Native()))
	}
	l.deltas = unsafe.Slice((*serviceDelta)(unsafe.Pointer(c.d)), n)
	return l, nil
}

func (l *loop) free() {
	c := l.c
	if c == nil {
		return
	}
	for _, p := range []unsafe.Pointer{unsafe.Pointer(c.rings), unsafe.Pointer(c.direct), unsafe.Pointer(c.d), unsafe.Pointer(c.bucket),
		unsafe.Pointer(c.natives)} {
		C.rte_free(p)
	}
	C.rte_free(unsafe.Pointer(c))
	l.c = nil
}

// step dispatches b (classified), runs the natives if asked, and receives
// the next burst into b if asked: one cgo call. l.deltas then holds what
// the dispatch did per service.
func (l *loop) step(b *pmd.Burst, port, queue uint16, runNatives, rx bool) int {
	var cb uintptr
	if b != nil {
		cb = uintptr(unsafe.Pointer(b.C()))
	}
	return int(C.cdd_step(C.uintptr_t(cb), C.uintptr_t(uintptr(unsafe.Pointer(l.c))), C.uint16_t(port), C.uint16_t(queue),
		cbool(runNatives), cbool(rx)))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
