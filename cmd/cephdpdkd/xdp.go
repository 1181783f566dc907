package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cephdpdkd/cephdpdkd/internal/afxdp"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// takeXDP takes the af_xdp mode's interface before the EAL starts: the
// lock against a second daemon, then the XDP program, attached or taken
// back from an earlier run, pointed at roce.address. release lets go of
// both but leaves the program attached: with no sockets it passes every
// frame, and the next start reuses it without touching the NIC's rings.
func (h *host) takeXDP(cfg *config.Config) (p *xdp.Program, release func() error, err error) {
	iface := cfg.Port.AFXDP.Interface
	lock, err := afxdp.Lock(h.runDir, iface)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	ifc, err := afxdp.Inspect(iface)
	if err != nil {
		return nil, nil, err
	}
	pinDir := cfg.Port.AFXDP.PinDir()
	if pinDir != "" && !xdp.IsBPFFS(pinDir) {
		h.log.Warn("no BPF file system: the XDP program is attached without a pinned link, and a clean stop (net_af_xdp's close) detaches it", "bpffs", pinDir)
		pinDir = ""
	}
	p, reused, err := afxdp.Take(pmd.LoadXDP, h.runDir, pinDir, ifc, cfg.Port.XDPMode())
	if err != nil {
		return nil, nil, err
	}
	if err := p.SetAddress(cfg.RoCE.Address.Addr()); err != nil {
		p.Close()
		return nil, nil, err
	}
	how := "attached"
	if reused {
		how = "taken back from the last run"
	}
	pin := "none"
	if pinDir != "" {
		pin = afxdp.PinPath(pinDir, iface)
	}
	h.log.Info("XDP program "+how, "interface", iface, "program", p.ID(), "mode", cfg.Port.XDPMode(),
		"roce_address", cfg.RoCE.Address.Addr(), "rx_queues", ifc.RxQueues, "link", pin)
	return p, func() error {
		if a, err := xdp.Attached(ifc.Index); err == nil && a.ID == p.ID() {
			h.log.Info("XDP program left attached: it passes every frame until the next start", "interface", iface, "program", p.ID())
		} else {
			// DPDK 22.11's net_af_xdp detaches the program of the
			// interface's default mode when it closes the port:
			// native, or generic on a driver without native XDP.
			h.log.Info("XDP program detached by net_af_xdp's close: the next start attaches it again", "interface", iface, "program", p.ID())
		}
		return errors.Join(p.Close(), lock.Close())
	}, nil
}

// checkXDP checks, reading only, that an XDP program attached to the
// af_xdp mode's interface is the one this run directory records: a
// foreign one would be refused at start. check-config runs it.
func checkXDP(cfg *config.Config, runDir string) error {
	if !cfg.Port.IsAFXDP() {
		return nil
	}
	ifc, err := afxdp.Inspect(cfg.Port.AFXDP.Interface)
	if err != nil {
		return err
	}
	return afxdp.CheckAttached(runDir, ifc)
}

// restoreXDP detaches the af_xdp mode's program, unless systemd runs
// restore-nic after a failure that it will restart (SERVICE_RESULT set
// and not "success"): the program then stays, passing every frame, for
// the next start to take back without resetting the NIC's rings.
func restoreXDP(cfg *config.Config, runDir string, keep bool, stdout io.Writer) error {
	if !cfg.Port.IsAFXDP() {
		return nil
	}
	iface := cfg.Port.AFXDP.Interface
	if keep {
		fmt.Fprintf(stdout, "restore-nic: port %s: XDP program kept on %s (--keep-xdp): the next run takes it back\n", cfg.Port.Name, iface)
		return nil
	}
	if r := os.Getenv("SERVICE_RESULT"); r != "" && r != "success" {
		fmt.Fprintf(stdout, "restore-nic: port %s: XDP program kept on %s: the unit failed (SERVICE_RESULT=%s) and systemd restarts it; it passes every frame until then\n", cfg.Port.Name, iface, r)
		return nil
	}
	released, err := afxdp.Release(runDir, iface)
	switch {
	case err != nil:
		return err
	case released:
		fmt.Fprintf(stdout, "restore-nic: port %s: XDP program detached from %s\n", cfg.Port.Name, iface)
	default:
		fmt.Fprintf(stdout, "restore-nic: port %s: no XDP program of ours on %s\n", cfg.Port.Name, iface)
	}
	return nil
}
