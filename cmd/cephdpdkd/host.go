package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

// host is what `run` takes from the machine before the EAL starts and
// gives back after it stops: hugepages reserved and mounted when
// eal.hugepages says so, and the NIC, moved to a DPDK driver when
// port.bind says so. Each step records what it changed in a state file
// under the run directory first, so `restore-nic` (the unit's
// ExecStopPost) undoes it after a crash too.
type host struct {
	nic    *nicbind.System
	huge   *hugepages.System
	runDir string
	log    *slog.Logger
}

// with runs body between acquiring what cfg needs from the machine and
// releasing it: hugepages and the NIC (or in the af_xdp mode, the
// interface's XDP program, handed to body) are ready before body starts
// the EAL, and given back whatever body returns, panics included.
func (h *host) with(cfg *config.Config, body func(*xdp.Program) error) (err error) {
	releaseHuge, err := h.reserveHugepages(cfg)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, releaseHuge())
	}()
	releaseNIC, err := h.bindNIC(cfg)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, releaseNIC())
	}()
	if !cfg.Port.IsAFXDP() {
		return body(nil)
	}
	prog, releaseXDP, err := h.takeXDP(cfg)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, releaseXDP())
	}()
	return body(prog)
}

// reserveHugepages provides eal.hugepages; on failure it leaves nothing
// behind. release gives back what it added.
func (h *host) reserveHugepages(cfg *config.Config) (release func() error, err error) {
	hp := cfg.EAL.Hugepages
	if hp == nil {
		return func() error { return nil }, nil
	}
	statePath := h.huge.StatePath(cfg.Port.Name)
	st, err := h.huge.Reserve(cfg.Port.Name, hp.Request())
	if err != nil {
		return nil, err
	}
	h.log.Info("hugepages ready", "pages", hp.Pages, "size", hp.Size, "mount", hp.Mount,
		"added", st.Added, "mounted", st.Mounted != "", "state", statePath)
	return releaser(h.huge.Release, statePath, func(rs *hugepages.State) {
		h.log.Info("hugepages given back", "pages", rs.Added, "size", hp.Size, "unmounted", rs.Mounted)
	}), nil
}

// releaser returns the release of what the state file at statePath
// records: release gives it back and returns the record, nil when there
// was none, which done then logs. A failed release says how to retry.
func releaser[S any](release func(statePath string) (*S, error), statePath string, done func(*S)) func() error {
	return func() error {
		rs, err := release(statePath)
		if err != nil {
			return fmt.Errorf("%w (retry with: cephdpdkd restore-nic)", err)
		}
		if rs != nil {
			done(rs)
		}
		return nil
	}
}

// bindNIC binds the port's device; on failure it leaves nothing behind.
// release restores it.
func (h *host) bindNIC(cfg *config.Config) (release func() error, err error) {
	b := cfg.Port.Bind
	if b == nil {
		return func() error { return nil }, nil
	}
	if err := checkBind(cfg, h.nic); err != nil {
		return nil, err
	}
	iface, pci := cfg.Port.BindTarget()
	want := devargs.Name(cfg.Port.Device)
	statePath := h.nic.StatePath(cfg.Port.Name)
	st, err := h.nic.Bind(cfg.Port.Name, nicbind.Request{Driver: b.Driver, Interface: iface, PCI: pci, Force: b.Force, Network: nodeNetwork(cfg)})
	if err != nil {
		// A bind that failed half-way has its state file: put back
		// what it changed.
		if _, rerr := h.nic.Restore(statePath); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	if st.PCI != want {
		err := fmt.Errorf("port.bind bound %s, not port.device %s", st.PCI, want)
		_, rerr := h.nic.Restore(statePath)
		return nil, errors.Join(err, rerr)
	}
	if rec, _ := h.nic.ReadState(statePath); rec == nil {
		h.log.Info("NIC already on its DPDK driver, bound before: nothing to restore at stop", "pci", st.PCI, "driver", st.Driver)
	} else {
		h.log.Info("NIC bound", "pci", st.PCI, "driver", st.Driver, "original_driver", st.OrigDriver,
			"interface", st.Interface, "state", statePath,
			"restores_addresses", st.Network.Addresses, "restores_routes", st.Network.Routes)
	}
	return releaser(h.nic.Restore, statePath, func(rs *nicbind.State) {
		h.log.Info("NIC restored", "pci", rs.PCI, "driver", rs.OrigDriver, "interface", rs.Interface,
			"addresses", rs.Network.Addresses, "routes", rs.Network.Routes)
	}), nil
}

// nodeNetwork is what the daemon owns on the exception path and a stop
// puts back on the NIC: kernel.addresses and kernel.routes, when the
// interface stays in the daemon's namespace and so takes the NIC's place
// there. Moved to another namespace, they are not the host's.
func nodeNetwork(cfg *config.Config) kernelif.Network {
	if cfg.Kernel == nil || cfg.Kernel.NetNS != "" {
		return kernelif.Network{}
	}
	return daemon.KernelNetwork(cfg.Kernel)
}

// checkBind checks, reading only, that port.bind.interface is
// port.device's: otherwise the EAL would open another device than the
// one bound. An interface already gone (bound by a run that crashed) is
// left to Bind, which finds it in the state file. check-config runs it
// too: it must not bind.
func checkBind(cfg *config.Config, sys *nicbind.System) error {
	iface, _ := cfg.Port.BindTarget()
	if iface == "" {
		return nil
	}
	want := devargs.Name(cfg.Port.Device)
	if got, err := sys.PCIOf(iface); err == nil && got != want {
		return fmt.Errorf("port.bind.interface %s is PCI device %s, not port.device %s", iface, got, want)
	}
	return nil
}
