package pmd

/*
#include <stdlib.h>
#include <rte_config.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
*/
import "C"

import (
	"unsafe"

	dpdkmempool "github.com/yerden/go-dpdk/mempool"
)

// MbufHeadroom is the room DPDK keeps before a packet's data in an mbuf
// (RTE_PKTMBUF_HEADROOM): part of a pool's data room.
const MbufHeadroom = C.RTE_PKTMBUF_HEADROOM

// Mempool is an mbuf pool (struct rte_mempool): what a port's RX queues
// fill and what TxCopy allocates from.
type Mempool struct {
	name string
	mp   *dpdkmempool.Mempool
}

// NewMempool creates a pool of n mbufs of dataRoom bytes each (headroom
// included), with a per-lcore cache of cache mbufs, on a NUMA socket (-1:
// any).
func NewMempool(name string, n, cache, dataRoom, socket int) (*Mempool, error) {
	mp, err := dpdkmempool.CreateMbufPool(name, uint32(n), uint16(dataRoom),
		dpdkmempool.OptCacheSize(uint32(cache)), dpdkmempool.OptSocket(socket))
	if err != nil {
		return nil, err
	}
	return &Mempool{name: name, mp: mp}, nil
}

// Name returns the pool's name, which secondary processes look it up by.
func (p *Mempool) Name() string { return p.name }

func (p *Mempool) c() *C.struct_rte_mempool { return (*C.struct_rte_mempool)(unsafe.Pointer(p.mp)) }

// Available counts free mbufs, including those in per-lcore caches.
func (p *Mempool) Available() int { return int(C.rte_mempool_avail_count(p.c())) }

// InUse counts mbufs held by queues, rings and consumers.
func (p *Mempool) InUse() int { return int(C.rte_mempool_in_use_count(p.c())) }

// DataRoom returns the bytes an mbuf holds after its headroom.
func (p *Mempool) DataRoom() int {
	return int(C.rte_pktmbuf_data_room_size(p.c())) - MbufHeadroom
}

// Free releases the pool. Every mbuf should be back first.
func (p *Mempool) Free() {
	if p.mp != nil {
		p.mp.Free()
		p.mp = nil
	}
}

// Zmalloc returns size zeroed bytes of DPDK memory (hugepages, or the
// EAL's anonymous memory under --no-huge), cache-line aligned and tagged
// tag in DPDK's malloc statistics, or nil when DPDK has none left. Give
// them back with FreeMemory.
func Zmalloc(tag string, size int) []byte {
	t := C.CString(tag)
	defer C.free(unsafe.Pointer(t))
	p := C.rte_zmalloc(t, C.size_t(size), C.RTE_CACHE_LINE_SIZE)
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), size)
}

// FreeMemory gives back memory from Zmalloc.
func FreeMemory(b []byte) {
	if len(b) > 0 {
		C.rte_free(unsafe.Pointer(&b[0]))
	}
}
