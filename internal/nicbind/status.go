package nicbind

import (
	"github.com/cephdpdkd/cephdpdkd/internal/statefile"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Device is one network-class PCI device, as dpdk-devbind.py --status
// lists it.
type Device struct {
	PCI       string
	Vendor    string // "8086"
	DeviceID  string // "1572"
	Class     string // "020000"
	Driver    string // bound now; "" for none
	Override  string // driver_override; "" for none
	Interface string // kernel interface, if any
	// OrigDriver, OrigInterface and Port come from a state file that
	// names the device.
	OrigDriver    string
	OrigInterface string
	Port          string
}

// DPDK reports whether the device is bound to a DPDK driver.
func (d Device) DPDK() bool {
	return d.Driver == VFIO || d.Driver == UIO || d.Driver == "igb_uio"
}

// Status lists every network-class (0x02xxxx) PCI device, in address
// order, with the original driver of those a state file in the run
// directory names.
func (s *System) Status() ([]Device, error) {
	ents, err := os.ReadDir(s.path("bus", "pci", "devices"))
	if err != nil {
		return nil, err
	}
	states := s.states()
	var out []Device
	for _, e := range ents {
		addr := e.Name()
		class := strings.TrimPrefix(readAttr(s.devPath(addr, "class")), "0x")
		if !strings.HasPrefix(class, "02") {
			continue
		}
		d := Device{
			PCI:      addr,
			Vendor:   strings.TrimPrefix(readAttr(s.devPath(addr, "vendor")), "0x"),
			DeviceID: strings.TrimPrefix(readAttr(s.devPath(addr, "device")), "0x"),
			Class:    class,
			Override: readAttr(s.devPath(addr, "driver_override")),
		}
		if d.Override == "(null)" {
			d.Override = ""
		}
		if d.Driver, err = s.DriverOf(addr); err != nil {
			return nil, err
		}
		if names := s.Interfaces(addr); len(names) > 0 {
			d.Interface = strings.Join(names, ",")
		}
		if st, ok := states[addr]; ok {
			d.OrigDriver, d.OrigInterface, d.Port = st.OrigDriver, st.Interface, st.Port
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PCI < out[j].PCI })
	return out, nil
}

// states reads the run directory's state files by PCI address; files it
// cannot read are left out.
func (s *System) states() map[string]*State {
	m := map[string]*State{}
	paths, _ := filepath.Glob(filepath.Join(statefile.Dir(s.RunDir), "*.json"))
	for _, p := range paths {
		if strings.HasSuffix(p, "."+restoredKind+".json") {
			continue // what a restore left, not a bind
		}
		if st, err := s.ReadState(p); err == nil && st != nil {
			m[st.PCI] = st
		}
	}
	return m
}
