package dispatch

import (
	"fmt"

	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Ring is a lane: the ring of mbuf pointers that carries one poll loop's
// packets for one service. Exactly one loop produces and exactly one
// consumer drains it, so it uses DPDK's single-producer, single-consumer
// paths: no compare-and-swap on the ring heads.
type Ring = pmd.Ring

// NewRing creates a named lane holding size-1 packets (size is a power of
// two) on a NUMA socket (-1: any).
func NewRing(name string, size int, socket int) (*Ring, error) {
	r, err := pmd.NewRing(name, size, socket)
	if err != nil {
		return nil, fmt.Errorf("dispatch: create ring %q of %d: %w", name, size, err)
	}
	return r, nil
}

// RingSet is a service's lanes as its single consumer (the RoCE
// endpoint, the kernel exception path) drains them: one cgo call takes a
// burst from all of them, in turn.
type RingSet = pmd.RingSet

// NewRingSet gathers rings, which stay the caller's to close.
func NewRingSet(rings []*Ring) (*RingSet, error) {
	s, err := pmd.NewRingSet(rings)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	return s, nil
}
