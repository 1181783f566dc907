package daemon

import (
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/internal/kneigh"
	"github.com/cephdpdkd/cephdpdkd/internal/roced"
)

// roceKind is the userspace RoCEv2 endpoint (roced.Node), which
// transmits on roce.tx_queue.
type roceKind struct{ noTask }

func (roceKind) drain(d *Daemon, cfg *config.Config, _ config.Service, lanes *dispatch.RingSet, _ int) (drainer, error) {
	info, err := d.port.Info()
	if err != nil {
		return drainer{}, err
	}
	rc := roced.Config{
		RoCE: cfg.RoCE, Lanes: lanes, Port: d.port.ID(), TxQueue: uint16(cfg.RoCE.TxQueue),
		Pool: d.pool, PortMAC: info.MAC, Burst: cfg.Burst, Log: d.log,
		MaxPathMTU: cfg.MaxRoCEPathMTU(),
	}
	if cfg.RoCE.Bridge != nil {
		// The bridge reaches the Ceph daemons where they listen: on the
		// kernel interface, in its namespace (the daemon's own in the
		// af_xdp mode, where the kernel keeps the NIC).
		ns := ""
		if cfg.Kernel != nil {
			ns = cfg.Kernel.NetNS
		}
		if d.dialer, err = kernelif.NewDialer(ns); err != nil {
			return drainer{}, err
		}
		rc.Dial = d.dialer.Dial
	}
	if cfg.Port.IsAFXDP() {
		// The kernel shares the address and gets the ARP replies: the
		// endpoint asks the kernel's table for its peers.
		if d.kneigh, err = kneigh.Start(cfg.Port.AFXDP.Interface); err != nil {
			return drainer{}, err
		}
		rc.Kernel = d.kneigh
	}
	if w := d.wakerOf(cfg.RoCE.Service); w != nil {
		rc.Wake = w.Wake
	}
	node, err := roced.New(rc)
	if err != nil {
		return drainer{}, err
	}
	d.roce = node
	return drainer{consumer: node, counts: node.Counts()}, nil
}
