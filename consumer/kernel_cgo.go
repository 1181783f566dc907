package consumer

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -I${SRCDIR}/../dispatch -I${SRCDIR}/../pmd
#include <rte_malloc.h>
#include "native.h"

#define CDD_KERNEL_MAX_SERVICES 64
#define CDD_KERNEL_RX_SKIP 7

struct cdd_kernel_svc {
	struct cdd_ringset *lanes;
	uint64_t pkts, bytes, drops;
};

// The exception path's C state: the kernel services' lanes in drain
// order (highest priority first), the kernel interface's DPDK port, the
// NIC port and TX queue the kernel's frames leave on, and the frames
// the NIC's TX queue has not taken yet.
struct cdd_kernel {
	uint16_t nsvc;
	uint16_t ifport;
	uint16_t port, txq;
	uint16_t budget, burst;
	uint16_t npend;
	uint16_t rx_skip; // polls left before reading the interface again
	struct cdd_kernel_svc svc[CDD_KERNEL_MAX_SERVICES];
	uint64_t up_pkts, up_bytes, up_drops; // kernel → port
	struct rte_mbuf *pend[CDD_MAX_BURST];
};

// cdd_kernel_poll moves at most budget packets from the services' lanes
// to the kernel, highest priority first, so that when the kernel side is
// the bottleneck the lowest-priority ring is the one that fills and
// drops at dispatch. Then it moves one burst the kernel sent out the
// port, keeping what the TX queue refuses for the next call.
static unsigned int cdd_kernel_poll(struct cdd_kernel *k)
{
	struct rte_mbuf *m[CDD_MAX_BURST];
	unsigned int work = 0;
	uint16_t left = k->budget;
	for (uint16_t i = 0; i < k->nsvc && left > 0; i++) {
		struct cdd_kernel_svc *s = &k->svc[i];
		unsigned int n = cdd_ringset_dequeue(s->lanes, m, left);
		if (n == 0)
			continue;
		uint64_t bytes = 0;
		for (unsigned int j = 0; j < n; j++)
			bytes += m[j]->pkt_len;
		uint16_t sent = rte_eth_tx_burst(k->ifport, 0, m, n);
		for (unsigned int j = sent; j < n; j++)
			bytes -= m[j]->pkt_len;
		if (sent < n)
			rte_pktmbuf_free_bulk(&m[sent], n - sent);
		s->pkts += sent;
		s->bytes += bytes;
		s->drops += n - sent;
		left -= n;
		work += n;
	}

	// Reading a tap is a system call even when the kernel sent nothing:
	// after an empty read, skip a few polls (a few microseconds).
	if (k->rx_skip > 0) {
		k->rx_skip--;
	} else if (k->npend < k->burst) {
		uint16_t n = rte_eth_rx_burst(k->ifport, 0, &k->pend[k->npend], k->burst - k->npend);
		k->npend += n;
		if (n == 0)
			k->rx_skip = CDD_KERNEL_RX_SKIP;
	}
	if (k->npend == 0)
		return work;
	uint64_t bytes = 0;
	for (uint16_t i = 0; i < k->npend; i++)
		bytes += k->pend[i]->pkt_len;
	uint16_t sent = rte_eth_tx_burst(k->port, k->txq, k->pend, k->npend);
	for (uint16_t i = sent; i < k->npend; i++)
		bytes -= k->pend[i]->pkt_len;
	k->up_pkts += sent;
	k->up_bytes += bytes;
	if (sent > 0 && sent < k->npend)
		memmove(&k->pend[0], &k->pend[sent], (k->npend - sent) * sizeof(k->pend[0]));
	k->npend -= sent;
	return work + sent;
}

// cdd_kernel_release frees the kernel's frames the port never took.
static void cdd_kernel_release(struct cdd_kernel *k)
{
	rte_pktmbuf_free_bulk(k->pend, k->npend);
	k->up_drops += k->npend;
	k->npend = 0;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// MaxKernelServices is how many services may share the exception path.
const MaxKernelServices = C.CDD_KERNEL_MAX_SERVICES

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
	c *C.struct_cdd_kernel
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
	c := (*C.struct_cdd_kernel)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_kernel, C.RTE_CACHE_LINE_SIZE))
	if c == nil {
		return nil, fmt.Errorf("consumer: kernel path: out of DPDK memory")
	}
	c.nsvc = C.uint16_t(len(cfg.Services))
	c.ifport, c.port, c.txq = C.uint16_t(cfg.IfPort), C.uint16_t(cfg.Port), C.uint16_t(cfg.TxQueue)
	c.budget, c.burst = C.uint16_t(cfg.Budget), C.uint16_t(cfg.Burst)
	for i, set := range cfg.Services {
		c.svc[i].lanes = ringset(set)
	}
	return &Kernel{c: c, Services: make([]Counts, len(cfg.Services))}, nil
}

// Poll hands up to the budget of packets to the kernel and sends one
// burst of the kernel's frames out the port.
func (k *Kernel) Poll() int {
	n := int(C.cdd_kernel_poll(k.c))
	if n > 0 {
		k.publish()
	}
	return n
}

// publish copies the C counters to the atomics readers see. Only the
// owning poll loop writes the C side.
func (k *Kernel) publish() {
	for i := range k.Services {
		s := &k.c.svc[i]
		k.Services[i].Packets.Store(uint64(s.pkts))
		k.Services[i].Bytes.Store(uint64(s.bytes))
		k.Services[i].Drops.Store(uint64(s.drops))
	}
	k.FromKernel.Packets.Store(uint64(k.c.up_pkts))
	k.FromKernel.Bytes.Store(uint64(k.c.up_bytes))
	k.FromKernel.Drops.Store(uint64(k.c.up_drops))
}

// Rewire replaces the services the path drains, highest priority
// first: a reload that adds, removes or reorders kernel services. A set
// it drained before keeps its counters. The poll loop must not run the
// path meanwhile (the reload takes it out of its loop's table first).
func (k *Kernel) Rewire(sets []*dispatch.RingSet) error {
	if len(sets) == 0 || len(sets) > MaxKernelServices {
		return fmt.Errorf("consumer: kernel path for %d services; want 1..%d", len(sets), MaxKernelServices)
	}
	was := map[*C.struct_cdd_ringset]int{}
	for i := range int(k.c.nsvc) {
		was[k.c.svc[i].lanes] = i
	}
	var svc [MaxKernelServices]C.struct_cdd_kernel_svc
	counts := make([]Counts, len(sets))
	for i, set := range sets {
		lanes := ringset(set)
		j, ok := was[lanes]
		if !ok {
			svc[i].lanes = lanes
			continue
		}
		svc[i] = k.c.svc[j]
		counts[i].Packets.Store(k.Services[j].Packets.Load())
		counts[i].Bytes.Store(k.Services[j].Bytes.Load())
		counts[i].Drops.Store(k.Services[j].Drops.Load())
	}
	k.c.svc = svc
	k.c.nsvc = C.uint16_t(len(sets))
	k.Services = counts
	return nil
}

// Pending returns how many of the kernel's frames wait for the port's
// TX queue. Call it only when the poll loop is stopped.
func (k *Kernel) Pending() int { return int(k.c.npend) }

// Close frees the kernel's frames the port has not taken, counting them
// as drops, and releases the C state. The poll loop must have stopped.
func (k *Kernel) Close() {
	if k.c == nil {
		return
	}
	C.cdd_kernel_release(k.c)
	k.publish()
	C.rte_free(unsafe.Pointer(k.c))
	k.c = nil
}
