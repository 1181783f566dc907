package pmd

/*
#include "kernel.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// MaxKernelServices is how many services may share the exception path.
const MaxKernelServices = C.CDD_KERNEL_MAX_SERVICES

// Kernel is the exception path's C state (struct cdd_kernel, kernel.h):
// the kernel services' lanes in drain order, the kernel interface's
// port, and the NIC queue the kernel's frames leave on. One goroutine
// (the owning poll loop) runs it.
type Kernel struct {
	c *C.struct_cdd_kernel
}

// KernelConfig is the exception path's wiring: see consumer.KernelConfig.
type KernelConfig struct {
	Services      []*RingSet // highest priority first
	IfPort        uint16
	Port, TxQueue uint16
	Budget, Burst int
}

// NewKernel creates the exception path's C state.
func NewKernel(cfg KernelConfig) (*Kernel, error) {
	switch {
	case len(cfg.Services) == 0 || len(cfg.Services) > MaxKernelServices:
		return nil, fmt.Errorf("pmd: kernel path for %d services; want 1..%d", len(cfg.Services), MaxKernelServices)
	case cfg.Budget < 1 || cfg.Budget > MaxBurst || cfg.Burst < 1 || cfg.Burst > MaxBurst:
		return nil, fmt.Errorf("pmd: kernel budget %d, burst %d: want 1..%d", cfg.Budget, cfg.Burst, MaxBurst)
	}
	c := (*C.struct_cdd_kernel)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_kernel, C.RTE_CACHE_LINE_SIZE))
	if c == nil {
		return nil, fmt.Errorf("pmd: kernel path: %w", errNoMemory)
	}
	c.nsvc = C.uint16_t(len(cfg.Services))
	c.ifport, c.port, c.txq = C.uint16_t(cfg.IfPort), C.uint16_t(cfg.Port), C.uint16_t(cfg.TxQueue)
	c.budget, c.burst = C.uint16_t(cfg.Budget), C.uint16_t(cfg.Burst)
	for i, set := range cfg.Services {
		c.svc[i].lanes = set.c
	}
	return &Kernel{c: c}, nil
}

// Poll moves up to the budget of packets from the lanes to the kernel,
// highest priority first, then one burst of the kernel's frames out the
// port: one cgo call. It returns the packets moved.
func (k *Kernel) Poll() int { return int(C.cdd_kernel_poll(k.c)) }

// Service returns the counters of the i-th service: what the kernel took
// (Packets, Bytes) and what the interface refused (Drops).
func (k *Kernel) Service(i int) Counters {
	s := &k.c.svc[i]
	return Counters{Packets: uint64(s.pkts), Bytes: uint64(s.bytes), Drops: uint64(s.drops)}
}

// FromKernel returns the counters of the kernel's frames sent out the
// port, and (Drops) those freed by Release.
func (k *Kernel) FromKernel() Counters {
	return Counters{Packets: uint64(k.c.up_pkts), Bytes: uint64(k.c.up_bytes), Drops: uint64(k.c.up_drops)}
}

// Rewire replaces the services the path drains, highest priority first.
// A set it drained before keeps its counters; from[i] is the index sets[i]
// had before, or -1 for a new one. The caller must not run the path
// meanwhile.
func (k *Kernel) Rewire(sets []*RingSet) (from []int, err error) {
	if len(sets) == 0 || len(sets) > MaxKernelServices {
		return nil, fmt.Errorf("pmd: kernel path for %d services; want 1..%d", len(sets), MaxKernelServices)
	}
	was := map[*C.struct_cdd_ringset]int{}
	for i := range int(k.c.nsvc) {
		was[k.c.svc[i].lanes] = i
	}
	var svc [MaxKernelServices]C.struct_cdd_kernel_svc
	from = make([]int, len(sets))
	for i, set := range sets {
		j, ok := was[set.c]
		if !ok {
			svc[i].lanes = set.c
			from[i] = -1
			continue
		}
		svc[i] = k.c.svc[j]
		from[i] = j
	}
	k.c.svc = svc
	k.c.nsvc = C.uint16_t(len(sets))
	return from, nil
}

// Pending returns how many of the kernel's frames wait for the port's
// TX queue.
func (k *Kernel) Pending() int { return int(k.c.npend) }

// Release frees the kernel's frames the port has not taken, counting
// them as drops.
func (k *Kernel) Release() { C.cdd_kernel_release(k.c) }

// Free releases the C state.
func (k *Kernel) Free() {
	if k.c != nil {
		C.rte_free(unsafe.Pointer(k.c))
		k.c = nil
	}
}
