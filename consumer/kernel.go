package consumer

import (
	"fmt"

	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// MaxKernelServices is how many services may share the exception path.
const MaxKernelServices = pmd.MaxKernelServices

// KernelConfig wires the exception path.
type KernelConfig struct {
	// Services are the kernel services' lanes, highest priority first.
	Services []*dispatch.RingSet
	// IfPort is the DPDK port of the kernel interface (net_tap or
	// virtio_user), with one RX and one TX queue.
	IfPort uint16
	// Port and TxQueue carry the kernel's frames out of the NIC.
	Port, TxQueue uint16
	// Budget bounds the packets handed to the kernel per Poll.
	Budget int
	// Burst bounds the kernel's frames read per Poll.
	Burst int
}

// Kernel is the exception path: it hands the kernel services' packets to
// the kernel interface, in priority order, and sends what the kernel
// transmits on that interface out the NIC. It is a dispatch.Consumer run
// by the poll loop that owns the kernel services: one cgo call per Poll
// does both directions.
type Kernel struct {
	c *pmd.Kernel
	// Services count, per service in KernelConfig order, what the kernel
	// took (Packets, Bytes) and what the interface refused (Drops).
	Services []Counts
	// FromKernel counts the kernel's frames sent out the port; Drops are
	// those freed at Close because the port never took them.
	FromKernel Counts
}

var _ dispatch.Consumer = (*Kernel)(nil)

// NewKernel creates the exception path.
func NewKernel(cfg KernelConfig) (*Kernel, error) {
	switch {
	case len(cfg.Services) == 0 || len(cfg.Services) > MaxKernelServices:
		return nil, fmt.Errorf("consumer: kernel path for %d services; want 1..%d", len(cfg.Services), MaxKernelServices)
	case cfg.Budget < 1 || cfg.Budget > pmd.MaxBurst:
		return nil, fmt.Errorf("consumer: kernel budget %d outside 1..%d", cfg.Budget, pmd.MaxBurst)
	case cfg.Burst < 1 || cfg.Burst > pmd.MaxBurst:
		return nil, fmt.Errorf("consumer: kernel burst %d outside 1..%d", cfg.Burst, pmd.MaxBurst)
	}
	c, err := pmd.NewKernel(pmd.KernelConfig{Services: cfg.Services, IfPort: cfg.IfPort, Port: cfg.Port, TxQueue: cfg.TxQueue, Budget: cfg.Budget, Burst: cfg.Burst})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return &Kernel{c: c, Services: make([]Counts, len(cfg.Services))}, nil
}

// Poll hands up to the budget of packets to the kernel and sends one
// burst of the kernel's frames out the port.
func (k *Kernel) Poll() int {
	n := k.c.Poll()
	if n > 0 {
		k.publish()
	}
	return n
}

// publish copies the C counters to the atomics readers see. Only the
// owning poll loop writes the C side.
func (k *Kernel) publish() {
	for i := range k.Services {
		k.Services[i].store(k.c.Service(i))
	}
	k.FromKernel.store(k.c.FromKernel())
}

// Rewire replaces the services the path drains, highest priority
// first: a reload that adds, removes or reorders kernel services. A set
// it drained before keeps its counters. The poll loop must not run the
// path meanwhile (the reload takes it out of its loop's table first).
func (k *Kernel) Rewire(sets []*dispatch.RingSet) error {
	if len(sets) == 0 || len(sets) > MaxKernelServices {
		return fmt.Errorf("consumer: kernel path for %d services; want 1..%d", len(sets), MaxKernelServices)
	}
	from, err := k.c.Rewire(sets)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	counts := make([]Counts, len(sets))
	for i, j := range from {
		if j >= 0 {
			counts[i].Packets.Store(k.Services[j].Packets.Load())
			counts[i].Bytes.Store(k.Services[j].Bytes.Load())
			counts[i].Drops.Store(k.Services[j].Drops.Load())
		}
	}
	k.Services = counts
	return nil
}

// Pending returns how many of the kernel's frames wait for the port's
// TX queue. Call it only when the poll loop is stopped.
func (k *Kernel) Pending() int { return k.c.Pending() }

// Close frees the kernel's frames the port has not taken, counting them
// as drops, and releases the C state. The poll loop must have stopped.
func (k *Kernel) Close() {
	if k.c == nil {
		return
	}
	k.c.Release()
	k.publish()
	k.c.Free()
	k.c = nil
}
