package mempool

import (
	"fmt"

	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Pool is an mbuf pool.
type Pool struct {
	name string
	size int
	mp   *pmd.Mempool
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
	if cfg.Size <= 0 || cfg.DataRoom <= pmd.MbufHeadroom || cfg.DataRoom > 65535 {
		return nil, fmt.Errorf("mempool: pool %q: size %d, data room %d: want size > 0 and data room in %d..65535",
			cfg.Name, cfg.Size, cfg.DataRoom, pmd.MbufHeadroom+1)
	}
	mp, err := pmd.NewMempool(cfg.Name, cfg.Size, cfg.CacheSize, cfg.DataRoom, cfg.Socket)
	if err != nil {
		return nil, fmt.Errorf("mempool: create pool %q of %d mbufs × %d bytes: %w", cfg.Name, cfg.Size, cfg.DataRoom, err)
	}
	return &Pool{name: cfg.Name, size: cfg.Size, mp: mp}, nil
}

// Name returns the pool name.
func (p *Pool) Name() string { return p.name }

// Size returns the number of mbufs in the pool.
func (p *Pool) Size() int { return p.size }

// C returns the pool's DPDK handle, for port setup and TX
// (pmd.Port.Configure, pmd.TxCopy) and a service process's rings.
func (p *Pool) C() *pmd.Mempool { return p.mp }

// Available counts free mbufs, including those in per-lcore caches.
func (p *Pool) Available() int { return p.mp.Available() }

// InUse counts mbufs held by queues, rings and consumers.
func (p *Pool) InUse() int { return p.mp.InUse() }

// Close checks that every mbuf came back, then frees the pool. On a leak it
// still frees the pool and returns an ErrLeak naming the count.
func (p *Pool) Close() error { return p.CloseHeld(0, "") }

// CloseHeld is Close for a pool of which a driver keeps held mbufs for
// good (who says which): DPDK 22.11's net_af_xdp does not give back the
// mbufs in its fill rings when it closes. More than held missing is a
// leak.
func (p *Pool) CloseHeld(held int, who string) error {
	if p.mp == nil {
		return nil
	}
	avail := p.Available()
	p.mp.Free()
	p.mp = nil
	if missing := p.size - avail; missing > held {
		if held > 0 {
			return fmt.Errorf("%w: pool %q has %d of %d mbufs back; %d never returned, beyond the %d %s keeps", ErrLeak, p.name, avail, p.size, missing-held, held, who)
		}
		return fmt.Errorf("%w: pool %q has %d of %d mbufs back; %d never returned", ErrLeak, p.name, avail, p.size, missing)
	}
	return nil
}
