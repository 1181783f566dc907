package daemon

import (
	"errors"
	"fmt"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/mempool"
)

// Plan is a configuration resolved into what the data path will build.
type Plan struct {
	Config     *config.Config
	Classifier *classify.Classifier
	Demand     mempool.Demand
	PoolSize   int
}

// NewPlan compiles the rules and sizes the mbuf pool.
func NewPlan(cfg *config.Config) (*Plan, error) {
	// The RoCE endpoint's rules come first: its frames must not fall to a
	// broader configured rule.
	all := append(cfg.RoCERules(), cfg.Rules...)
	rules := make([]classify.Rule, len(all))
	for i, r := range all {
		dr := classify.Rule{
			Service:   cfg.ServiceIndex(r.Service),
			EtherType: uint16(r.EtherType),
			Proto:     uint8(r.Protocol),
		}
		for _, p := range r.DstPorts {
			dr.DstPorts = append(dr.DstPorts, classify.PortRange{Lo: p.Lo, Hi: p.Hi})
		}
		for _, p := range r.SrcPorts {
			dr.SrcPorts = append(dr.SrcPorts, classify.PortRange{Lo: p.Lo, Hi: p.Hi})
		}
		for _, p := range r.DstCIDRs {
			dr.DstPrefixes = append(dr.DstPrefixes, p.Prefix)
		}
		rules[i] = dr
	}
	cls, err := classify.Compile(rules, len(cfg.Services), cfg.ServiceIndex(cfg.DefaultService))
	if err != nil {
		return nil, fmt.Errorf("daemon: rules: %w", err)
	}
	// Every service has a ring per lane (receiving poll loop), and a
	// consumer per lane when it is local.
	lanes := cfg.Lanes()
	ringSlots, consumers := 0, 0
	for i, s := range cfg.Services {
		ringSlots += lanes * (s.RingSize - 1)
		if cfg.IsLocal(i) {
			consumers += lanes
		} else {
			consumers++
		}
	}
	lcores, err := config.ParseLcores(cfg.EAL.Lcores)
	if err != nil {
		return nil, err
	}
	d := mempool.Demand{
		RxDescriptors: cfg.Port.RxQueues * cfg.Port.RxDescriptors,
		TxDescriptors: cfg.Port.TxQueues * cfg.Port.TxDescriptors,
		RingSlots:     ringSlots,
		Lcores:        len(lcores),
		CacheSize:     cfg.Mempool.CacheSize,
		// A poller holds one RX burst and each forwarder one pending burst.
		InFlight: len(cfg.Pollers)*cfg.Burst + consumers*cfg.Burst,
		Headroom: cfg.Mempool.Headroom,
	}
	for _, s := range cfg.Services {
		// What a consumer holds beyond its burst (a service process's
		// rings and bursts) comes on top of its lanes.
		d.InFlight += s.Kind().Mbufs(cfg)
	}
	if cfg.Port.IsAFXDP() {
		// net_af_xdp's receive buffers are its fill rings, not the
		// descriptors.
		d.RxDescriptors = cfg.Port.RxQueues * config.AFXDPFillRing
	}
	if k := cfg.Kernel; k != nil {
		// The kernel interface's queues fill from the same pool, and the
		// exception path holds one burst of the kernel's frames.
		d.RxDescriptors += k.RxDescriptors
		d.TxDescriptors += k.TxDescriptors
		d.InFlight += cfg.Burst
	}
	size, err := mempool.Size(cfg.Mempool.Mbufs, d)
	if err != nil {
		line := cfg.Line("mempool.mbufs")
		if line > 0 {
			return nil, fmt.Errorf("line %d: mempool.mbufs: %w", line, err)
		}
		return nil, err
	}
	if err := checkNoHugeMemory(cfg, size); err != nil {
		return nil, err
	}
	return &Plan{Config: cfg, Classifier: cls, Demand: d, PoolSize: size}, nil
}

// mbufOverhead is what an mbuf takes besides its data room: struct
// rte_mbuf. Mempool object headers come on top, so sums with it are a
// lower bound.
const mbufOverhead = 128

// checkNoHugeMemory refuses a pool and rings that cannot fit eal.memory_mb
// without hugepages, where the EAL has that much memory and no more.
func checkNoHugeMemory(cfg *config.Config, poolSize int) error {
	if !cfg.EAL.NoHuge {
		return nil // hugepage memory grows past -m on demand
	}
	pool := poolSize * (cfg.Mempool.DataRoom + mbufOverhead)
	rings := 0
	for _, s := range cfg.Services {
		rings += cfg.Lanes() * s.RingSize * 8 // one pointer per slot
	}
	if have := cfg.EAL.MemoryMB << 20; pool+rings > have {
		msg := fmt.Sprintf("eal.memory_mb: %d MB cannot hold the mbuf pool (%d mbufs × %d bytes = %d MB) and the service rings (%d MB) without hugepages",
			cfg.EAL.MemoryMB, poolSize, cfg.Mempool.DataRoom+mbufOverhead, pool>>20, (rings+(1<<20)-1)>>20)
		if line := cfg.Line("eal.memory_mb"); line > 0 {
			return fmt.Errorf("line %d: %s", line, msg)
		}
		return errors.New(msg)
	}
	return nil
}
