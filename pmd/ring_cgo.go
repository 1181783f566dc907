package pmd

/*
#include "lane.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/yerden/go-dpdk/ring"
)

// Ring is an rte_ring of mbuf pointers with one producer and one
// consumer (DPDK's single-producer, single-consumer paths: no
// compare-and-swap on the ring heads): a service's lane, or one of a
// service process's rings. Another process of the same EAL finds it by
// name.
type Ring struct {
	name string
	r    *ring.Ring
}

// NewRing creates a named ring holding size-1 packets (size is a power
// of two) on a NUMA socket (-1: any).
func NewRing(name string, size int, socket int) (*Ring, error) {
	opts := []ring.Option{ring.OptFlag(C.RING_F_SP_ENQ | C.RING_F_SC_DEQ)}
	if socket >= 0 {
		opts = append(opts, ring.OptSocket(uint(socket)))
	}
	r, err := ring.Create(name, uint(size), opts...)
	if err != nil {
		return nil, err
	}
	return &Ring{name: name, r: r}, nil
}

func (r *Ring) c() *C.struct_rte_ring { return (*C.struct_rte_ring)(unsafe.Pointer(r.r)) }

// Name returns the ring's name, which secondary processes look it up by.
func (r *Ring) Name() string { return r.name }

// Count returns the number of packets waiting in the ring.
func (r *Ring) Count() int { return int(r.r.Count()) }

// Capacity returns how many packets the ring holds at most.
func (r *Ring) Capacity() int { return int(r.r.Cap()) }

// FreeAll frees every packet left in the ring and returns how many.
func (r *Ring) FreeAll() int { return int(C.cdd_ring_free_all(r.c())) }

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

// RingSet is a service's lanes as its single consumer drains them: in
// turn, one call for a burst from all of them (struct cdd_ringset,
// lane.h).
type RingSet struct {
	c     *C.struct_cdd_ringset
	rings []*Ring
}

// NewRingSet gathers rings, which stay the caller's to close.
func NewRingSet(rings []*Ring) (*RingSet, error) {
	if len(rings) == 0 || len(rings) > 0xffff {
		return nil, fmt.Errorf("pmd: a ring set of %d rings", len(rings))
	}
	ptr := C.size_t(unsafe.Sizeof(uintptr(0)))
	c := (*C.struct_cdd_ringset)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_ringset+C.size_t(len(rings))*ptr, C.RTE_CACHE_LINE_SIZE))
	if c == nil {
		return nil, fmt.Errorf("pmd: allocate a set of %d rings: %w", len(rings), Errno(C.ENOMEM))
	}
	c.n = C.uint16_t(len(rings))
	slots := unsafe.Slice((**C.struct_rte_ring)(unsafe.Add(unsafe.Pointer(c), C.sizeof_struct_cdd_ringset)), len(rings))
	for i, r := range rings {
		slots[i] = r.c()
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

// Dequeue frees what b still holds and replaces it with up to max
// packets from the set's rings: one cgo call.
func (s *RingSet) Dequeue(b *Burst, max int) int {
	return int(C.cdd_ringset_burst(b.c, s.c, C.uint16_t(min(max, MaxBurst))))
}

// Free releases the set; its rings are left alone.
func (s *RingSet) Free() {
	if s.c != nil {
		C.rte_free(unsafe.Pointer(s.c))
		s.c = nil
	}
}
