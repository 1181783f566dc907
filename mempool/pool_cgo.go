package mempool

/*
#cgo pkg-config: libdpdk
#include <rte_config.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	dpdkmempool "github.com/yerden/go-dpdk/mempool"

	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Pool is an mbuf pool.
type Pool struct {
	name string
	size int
	mp   *dpdkmempool.Mempool
}

// Config describes a pool to create.
type Config struct {
	Name      string
	Size      int // number of mbufs
	CacheSize int // per-lcore cache
	DataRoom  int // bytes per mbuf including RTE_PKTMBUF_HEADROOM
	Socket    int // NUMA socket, -1 for any
}

// New creates an mbuf pool.
func New(cfg Config) (*Pool, error) {
	if cfg.Size <= 0 || cfg.DataRoom <= C.RTE_PKTMBUF_HEADROOM || cfg.DataRoom > 65535 {
		return nil, fmt.Errorf("mempool: pool %q: size %d, data room %d: want size > 0 and data room in %d..65535",
			cfg.Name, cfg.Size, cfg.DataRoom, C.RTE_PKTMBUF_HEADROOM+1)
	}
	mp, err := dpdkmempool.CreateMbufPool(cfg.Name, uint32(cfg.Size), uint16(cfg.DataRoom),
		dpdkmempool.OptCacheSize(uint32(cfg.CacheSize)), dpdkmempool.OptSocket(cfg.Socket))
	if err != nil {
		return nil, fmt.Errorf("mempool: create pool %q of %d mbufs × %d bytes: %w", cfg.Name, cfg.Size, cfg.DataRoom, err)
	}
	return &Pool{name: cfg.Name, size: cfg.Size, mp: mp}, nil
}

// Name returns the pool name.
func (p *Pool) Name() string { return p.name }

// Size returns the number of mbufs in the pool.
func (p *Pool) Size() int { return p.size }

// C returns the pool's struct rte_mempool for port setup and TX
// (pmd.Port.Configure, pmd.TxCopy) and cgo code in other packages.
func (p *Pool) C() *pmd.CMempool { return (*pmd.CMempool)(unsafe.Pointer(p.mp)) }

// Available counts free mbufs, including those in per-lcore caches.
func (p *Pool) Available() int {
	return int(C.rte_mempool_avail_count((*C.struct_rte_mempool)(unsafe.Pointer(p.mp))))
}

// InUse counts mbufs held by queues, rings and consumers.
func (p *Pool) InUse() int {
	return int(C.rte_mempool_in_use_count((*C.struct_rte_mempool)(unsafe.Pointer(p.mp))))
}

// Close checks that every mbuf came back, then frees the pool. On a leak it
// still frees the pool and returns an ErrLeak naming the count.
func (p *Pool) Close() error {
	if p.mp == nil {
		return nil
	}
	avail := p.Available()
	p.mp.Free()
	p.mp = nil
	if avail != p.size {
		return fmt.Errorf("%w: pool %q has %d of %d mbufs back; %d never returned", ErrLeak, p.name, avail, p.size, p.size-avail)
	}
	return nil
}
