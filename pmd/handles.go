package pmd

// Typed handles for the C objects that cross between the boundary
// packages. cgo gives each package its own C types (dispatch's
// *C.struct_rte_ring is not consumer's), so an exported API cannot name
// them; it passes these instead, and the receiving package's cgo code
// converts with (*C.struct_x)(unsafe.Pointer(h)). Go code holds them only
// by pointer, and the pointers are to DPDK (rte_malloc or hugepage)
// memory, never to the Go heap: the collector ignores them and cgo's
// pointer checks pass them. A value of one means nothing ([0]func() also
// makes it incomparable).

// CMempool is DPDK's struct rte_mempool: an mbuf pool (mempool.Pool).
type CMempool struct{ _ [0]func() }

// CBurst is cdd.h's struct cdd_burst: received mbufs and their views (Burst).
type CBurst struct{ _ [0]func() }

// CRing is DPDK's struct rte_ring: a lane (dispatch.Ring).
type CRing struct{ _ [0]func() }

// CRingSet is native.h's struct cdd_ringset: a service's lanes
// (dispatch.RingSet).
type CRingSet struct{ _ [0]func() }

// CNative is native.h's struct cdd_native: a consumer implemented in C
// that a poll loop runs (dispatch.NativeConsumer).
type CNative struct{ _ [0]func() }
