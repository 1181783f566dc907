package pmd

/*
#include "lane.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// MaxServices is how many services a Loop dispatches to: a service set
// is a 64-bit mask in C.
const MaxServices = C.CDD_MAX_SERVICES

// Loop is a poll loop's C state (struct cdd_loop, lane.h): its lane of
// each service, a bucket per service to sort a burst into, the deltas
// of the last dispatch, the native consumers it runs and, per service,
// the local native consumer the dispatcher may hand packets directly.
type Loop struct {
	c      *C.struct_cdd_loop
	deltas []ServiceDelta
}

// ServiceDelta is what one Step handed a service: enqueued (or taken
// directly by its local consumer) and dropped, a lane being full.
type ServiceDelta struct{ Packets, Bytes, Drops uint64 }

// The layout of ServiceDelta is struct cdd_svc_delta's: a difference
// fails to compile.
const _ = uint(unsafe.Sizeof(ServiceDelta{})-C.sizeof_struct_cdd_svc_delta) + uint(C.sizeof_struct_cdd_svc_delta-unsafe.Sizeof(ServiceDelta{}))

// NewLoop builds the C state: rings[s] is the loop's lane of service s
// (nil for a loop that does not receive, or a closed service), direct[s]
// its local native consumer or nil, natives every native the loop runs,
// burst the most packets a burst holds.
func NewLoop(rings []*Ring, direct, natives []*Native, burst int) (*Loop, error) {
	n := len(rings)
	if n > MaxServices || len(direct) != n {
		return nil, fmt.Errorf("pmd: a poll loop of %d services (%d direct consumers); at most %d", n, len(direct), MaxServices)
	}
	ptr := C.size_t(unsafe.Sizeof(uintptr(0)))
	c := (*C.struct_cdd_loop)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_loop, C.RTE_CACHE_LINE_SIZE))
	if c == nil {
		return nil, fmt.Errorf("pmd: allocate poll loop state: %w", Errno(C.ENOMEM))
	}
	l := &Loop{c: c}
	c.nrings, c.cap, c.nnatives = C.uint16_t(n), C.uint16_t(burst), C.uint16_t(len(natives))
	c.rings = (**C.struct_rte_ring)(C.rte_zmalloc(nil, C.size_t(n)*ptr, C.RTE_CACHE_LINE_SIZE))
	c.direct = (**C.struct_cdd_native)(C.rte_zmalloc(nil, C.size_t(n)*ptr, C.RTE_CACHE_LINE_SIZE))
	c.d = (*C.struct_cdd_svc_delta)(C.rte_zmalloc(nil, C.size_t(n)*C.sizeof_struct_cdd_svc_delta, C.RTE_CACHE_LINE_SIZE))
	c.bucket = (*unsafe.Pointer)(C.rte_zmalloc(nil, C.size_t(n*burst)*ptr, C.RTE_CACHE_LINE_SIZE))
	c.natives = (**C.struct_cdd_native)(C.rte_zmalloc(nil, C.size_t(max(1, len(natives)))*ptr, C.RTE_CACHE_LINE_SIZE))
	if c.rings == nil || c.direct == nil || c.d == nil || c.bucket == nil || c.natives == nil {
		l.Free()
		return nil, fmt.Errorf("pmd: allocate poll loop state for %d services: %w", n, Errno(C.ENOMEM))
	}
	for i, r := range rings {
		if r != nil { // nil: a loop without RX queues dispatches nothing
			unsafe.Slice(c.rings, n)[i] = r.c()
		}
	}
	for i, d := range direct {
		if d != nil {
			unsafe.Slice(c.direct, n)[i] = d.c
		}
	}
	for i, nat := range natives {
		unsafe.Slice(c.natives, len(natives))[i] = nat.c
	}
	l.deltas = unsafe.Slice((*ServiceDelta)(unsafe.Pointer(c.d)), n)
	return l, nil
}

// Free releases the C state; the rings and consumers are left alone.
func (l *Loop) Free() {
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

// Deltas returns, per service, what the last Step's dispatch did: a
// view of C memory that the next Step overwrites.
func (l *Loop) Deltas() []ServiceDelta { return l.deltas }

// Step dispatches b (classified: its Verdicts set) to the lanes, runs
// the natives if asked, and receives the next burst from port's queue
// into b if asked: a poll loop's one cgo call per RX queue and
// iteration. b may be nil (a loop that only runs natives). It returns
// the packets the natives handled.
func (l *Loop) Step(b *Burst, port, queue uint16, runNatives, rx bool) int {
	// The burst and the loop state go as integers: both are C memory,
	// and cgo's check that a pointer argument holds no Go pointer took
	// 1.5% of a forwarding loop.
	var cb uintptr
	if b != nil {
		cb = uintptr(unsafe.Pointer(b.c))
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
