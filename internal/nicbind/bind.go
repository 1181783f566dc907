package nicbind

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/internal/statefile"
)

// Bind binds the requested device to a DPDK driver for the named port.
// It refuses an interface in use unless r.Force, loads the driver's
// module, checks that vfio-pci can take the device, and writes the state
// file before the first write to sysfs. A device already bound to
// r.Driver is left alone; its state file, if any, is returned.
func (s *System) Bind(port string, r Request) (*State, error) {
	if r.Driver != VFIO && r.Driver != UIO {
		return nil, fmt.Errorf("bind %s: driver %q: want %s or %s", port, r.Driver, VFIO, UIO)
	}
	addr, ifname, err := s.target(r)
	if err != nil && r.Interface != "" && r.PCI == "" {
		// Bound already (or half-way): the interface is gone, and the
		// state file says where it was.
		if prev, _ := s.ReadState(s.StatePath(port)); prev != nil && prev.Interface == r.Interface {
			addr, ifname, err = prev.PCI, prev.Interface, nil
		} else {
			addr, ifname, err = s.waitTarget(r)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bind %s: %w", port, err)
	}
	st, err := s.bind(port, addr, ifname, r)
	if err != nil {
		return nil, fmt.Errorf("bind %s (%s) to %s: %w", port, addr, r.Driver, err)
	}
	return st, nil
}

// waitTarget waits for the requested interface to exist: a unit started
// at boot, before network.target, may run before udev has named the NIC
// (the driver's eth0 is renamed a moment after its probe).
func (s *System) waitTarget(r Request) (addr, ifname string, err error) {
	timeout := s.AppearTimeout
	if timeout == 0 {
		timeout = DefaultAppearTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		if addr, ifname, err = s.target(r); err == nil {
			return addr, ifname, nil
		}
		if time.Now().After(deadline) {
			return "", "", fmt.Errorf("%w (waited %v for it)", err, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// target resolves a request to a PCI address and the interface it has now.
func (s *System) target(r Request) (addr, ifname string, err error) {
	switch {
	case r.Interface != "" && r.PCI != "":
		return "", "", errors.New("give an interface or a PCI address, not both")
	case r.Interface != "":
		addr, err = s.PCIOf(r.Interface)
		return addr, r.Interface, err
	case r.PCI != "":
		var ok bool
		if addr, ok = devargs.CanonicalPCI(strings.TrimSpace(r.PCI)); !ok {
			return "", "", fmt.Errorf("%q is not a PCI address", r.PCI)
		}
		if _, err := os.Stat(s.devPath(addr)); err != nil {
			return "", "", fmt.Errorf("PCI device %s: %w", addr, err)
		}
		if names := s.Interfaces(addr); len(names) > 0 {
			ifname = names[0]
		}
		return addr, ifname, nil
	}
	return "", "", errors.New("no interface or PCI address to bind")
}

func (s *System) bind(port, addr, ifname string, r Request) (*State, error) {
	cur, err := s.DriverOf(addr)
	if err != nil {
		return nil, err
	}
	prev, err := s.ReadState(s.StatePath(port))
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.PCI != addr {
		return nil, fmt.Errorf("state file %s is for %s: restore that device first (cephdpdkd restore-nic)", s.StatePath(port), prev.PCI)
	}
	if cur == r.Driver {
		if prev == nil {
			// Bound before us: there is nothing of ours to restore,
			// and no state file.
			return &State{Port: port, PCI: addr, Driver: cur}, nil
		}
		return prev, nil
	}

	st := &State{Port: port, PCI: addr, Driver: r.Driver, OrigDriver: cur, Interface: ifname, Time: time.Now().UTC()}
	if prev != nil {
		// An earlier bind stopped half-way: what it recorded is the
		// original, not what is bound now.
		st.OrigDriver, st.Interface, st.OperState, st.Up = prev.OrigDriver, prev.Interface, prev.OperState, prev.Up
		st.Network = prev.Network.Merge(r.Network)
	} else if ifname != "" {
		st.OperState, st.Up = s.linkState(ifname)
		if err := s.checkIdle(port, ifname, st.Up, r.Force); err != nil {
			return nil, err
		}
		own, err := s.network(ifname)
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", ifname, err)
		}
		st.Network = own.Merge(r.Network)
	} else {
		st.Network = r.Network
	}

	if _, err := os.Stat(s.path("bus", "pci", "drivers", r.Driver)); err != nil {
		if err := s.loadModule(r.Driver); err != nil {
			return nil, fmt.Errorf("load module %s: %w", r.Driver, err)
		}
		if _, err := os.Stat(s.path("bus", "pci", "drivers", r.Driver)); err != nil {
			return nil, fmt.Errorf("module %s loaded, but %s does not exist", r.Driver, s.path("bus", "pci", "drivers", r.Driver))
		}
	}
	if r.Driver == VFIO {
		if st.IOMMUGroup, st.NoIOMMU, err = s.iommu(addr); err != nil {
			return nil, err
		}
	}

	if err := s.writeState(st); err != nil {
		return nil, err
	}
	// The state file now says what to put back: the record of the last
	// restore has served.
	if err := os.Remove(s.RestoredPath(port)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	undo := fmt.Sprintf(" (state in %s: cephdpdkd restore-nic puts the device back)", s.StatePath(port))
	if cur != "" {
		if err := s.write(s.devPath(addr, "driver", "unbind"), addr); err != nil {
			return nil, fmt.Errorf("unbind from %s: %w%s", cur, err, undo)
		}
	}
	if err := s.write(s.devPath(addr, "driver_override"), r.Driver); err != nil {
		return nil, fmt.Errorf("%w%s", err, undo)
	}
	if err := s.write(s.path("bus", "pci", "drivers_probe"), addr); err != nil {
		return nil, fmt.Errorf("probe: %w%s", err, undo)
	}
	if now, err := s.DriverOf(addr); err != nil {
		return nil, err
	} else if now != r.Driver {
		return nil, fmt.Errorf("after the probe the device has driver %q, not %s: see the kernel log%s", now, r.Driver, undo)
	}
	return st, nil
}

// checkIdle refuses an interface that is up or has addresses or routes,
// unless force, or unless they are what the port's last Restore left on
// it (its Restored record): a restart after a crash takes the NIC back
// from the restore that followed the crash.
func (s *System) checkIdle(port, ifname string, up, force bool) error {
	if force {
		return nil
	}
	activity := s.Activity
	if activity == nil {
		activity = netlinkActivity
	}
	a, err := activity(ifname)
	if err != nil {
		return fmt.Errorf("interface %s: addresses and routes: %w", ifname, err)
	}
	if !up && len(a.Addresses) == 0 && len(a.Routes) == 0 {
		return nil
	}
	var rec Restored
	ok, err := statefile.Read(s.RestoredPath(port), &rec)
	if err != nil {
		return err
	}
	if ok && rec.Interface == ifname {
		// Only what the restore did not put there makes it busy.
		up = up && !rec.Up
		a.Addresses = without(a.Addresses, rec.Activity.Addresses)
		a.Routes = without(a.Routes, rec.Activity.Routes)
	}
	var in []string
	if up {
		in = append(in, "it is up")
	}
	if len(a.Addresses) > 0 {
		in = append(in, "it has addresses "+strings.Join(a.Addresses, ", "))
	}
	if len(a.Routes) > 0 {
		in = append(in, "routes "+strings.Join(a.Routes, ", "))
	}
	if len(in) == 0 {
		return nil
	}
	if ok && rec.Interface == ifname {
		in = append(in, "which restore-nic did not put there ("+s.RestoredPath(port)+")")
	}
	return fmt.Errorf("interface %s is active: %s; take it down and remove them (ip link set %s down; ip addr flush dev %s), or set port.bind.force",
		ifname, strings.Join(in, ", "), ifname, ifname)
}

// without returns the items of list that are not in drop.
func without(list, drop []string) []string {
	var out []string
	for _, v := range list {
		if !contains(drop, v) {
			out = append(out, v)
		}
	}
	return out
}

// network reads an interface's addresses and routes.
func (s *System) network(ifname string) (kernelif.Network, error) {
	if s.Network != nil {
		return s.Network(ifname)
	}
	return kernelif.Read(ifname)
}

func (s *System) loadModule(name string) error {
	if s.LoadModule != nil {
		return s.LoadModule(name)
	}
	return modprobe(name)
}

// Restore puts back the device a state file describes: it unbinds the
// DPDK driver, clears driver_override, binds the original driver, waits
// for the interface to come back, brings it up if it was, and removes
// the state file. With no state file it does nothing and returns nil,
// nil; running it again after it succeeded is therefore harmless.
func (s *System) Restore(statePath string) (*State, error) {
	st, err := s.ReadState(statePath)
	if err != nil || st == nil {
		return nil, err
	}
	name, err := s.restore(st)
	if err != nil {
		return nil, fmt.Errorf("restore %s (%s) to %q: %w", st.Port, st.PCI, st.OrigDriver, err)
	}
	if name != "" {
		if err := s.leaveRecord(st, name); err != nil {
			return nil, fmt.Errorf("restore %s: %w", st.Port, err)
		}
	}
	if err := os.Remove(statePath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("restore %s: %w", st.Port, err)
	}
	return st, nil
}

// restore rebinds the original driver and returns the interface that
// came back ("" for none).
func (s *System) restore(st *State) (string, error) {
	addr := st.PCI
	cur, err := s.DriverOf(addr)
	if err != nil {
		return "", err
	}
	if cur != "" && cur != st.OrigDriver {
		if err := s.write(s.devPath(addr, "driver", "unbind"), addr); err != nil {
			return "", fmt.Errorf("unbind from %s: %w", cur, err)
		}
	}
	if err := s.write(s.devPath(addr, "driver_override"), "\n"); err != nil {
		return "", err
	}
	if st.OrigDriver == "" || cur == st.OrigDriver {
		return s.waitInterface(st)
	}
	if err := s.write(s.path("bus", "pci", "drivers_probe"), addr); err != nil {
		return "", fmt.Errorf("probe: %w", err)
	}
	if now, err := s.DriverOf(addr); err != nil {
		return "", err
	} else if now == "" {
		// The probe found no match (a driver bound through new_id, say):
		// bind the original driver by name.
		if err := s.write(s.path("bus", "pci", "drivers", st.OrigDriver, "bind"), addr); err != nil {
			return "", fmt.Errorf("bind: %w", err)
		}
	}
	if now, err := s.DriverOf(addr); err != nil {
		return "", err
	} else if now != st.OrigDriver {
		return "", fmt.Errorf("the device has driver %q after the rebind: see the kernel log", now)
	}
	return s.waitInterface(st)
}

// waitInterface waits for the device's interface to come back, then
// gives it the recorded addresses and routes, which set it up, or only
// brings it up if it was up. It returns the interface's name now.
func (s *System) waitInterface(st *State) (string, error) {
	if st.Interface == "" {
		return "", nil
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	for len(s.Interfaces(st.PCI)) == 0 {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("interface %s did not reappear within %v", st.Interface, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The driver names it eth0, and udev renames it a moment later; the
	// kernel refuses to rename an interface that is up, so it must not
	// be set up before: wait for its name, until the deadline, after
	// which udev has given it another.
	name := st.Interface
	for names := s.Interfaces(st.PCI); !contains(names, name); names = s.Interfaces(st.PCI) {
		if time.Now().After(deadline) {
			if len(names) == 0 {
				return "", fmt.Errorf("interface %s went away after it reappeared", st.Interface)
			}
			name = names[0]
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !st.Network.Empty() {
		set := s.SetNetwork
		if set == nil {
			set = kernelif.Apply
		}
		if err := set(name, st.Network); err != nil {
			return "", fmt.Errorf("interface %s: addresses and routes: %w", name, err)
		}
		return name, nil
	}
	if !st.Up {
		return name, nil
	}
	set := s.SetLinkUp
	if set == nil {
		set = netlinkSetUp
	}
	if err := set(name); err != nil {
		return "", fmt.Errorf("interface %s: set up: %w", name, err)
	}
	return name, nil
}

// leaveRecord writes the Restored record of the interface name, as
// Restore left it.
func (s *System) leaveRecord(st *State, name string) error {
	activity := s.Activity
	if activity == nil {
		activity = netlinkActivity
	}
	a, err := activity(name)
	if err != nil {
		return fmt.Errorf("interface %s: addresses and routes: %w", name, err)
	}
	rec := Restored{Port: st.Port, PCI: st.PCI, Interface: name, Up: st.Up || !st.Network.Empty(), Activity: a, Time: time.Now().UTC()}
	if !rec.Up && len(a.Addresses) == 0 && len(a.Routes) == 0 {
		// An idle NIC: Bind takes it without a record.
		return nil
	}
	return statefile.Write(s.RestoredPath(st.Port), rec)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// ReadState reads a state file; nil, nil when it does not exist.
func (s *System) ReadState(path string) (*State, error) {
	var st State
	if ok, err := statefile.Read(path, &st); !ok || err != nil {
		return nil, err
	}
	if !isPCIName(st.PCI) {
		return nil, fmt.Errorf("state file %s: pci %q is not a PCI address", path, st.PCI)
	}
	return &st, nil
}

func (s *System) writeState(st *State) error { return statefile.Write(s.StatePath(st.Port), st) }
