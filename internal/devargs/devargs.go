// Package devargs parses the device strings DPDK's EAL takes: a PCI
// address (the -a allow list) or a virtual device name (--vdev), either
// followed by comma-separated key=value arguments, such as
// "0000:3b:00.0,rxq_cqe_comp_en=1" or "net_af_packet0,iface=veth0".
//
// It is the one place that decides what a PCI address is and what DPDK
// will call a device: the configuration (internal/config) validates
// port.device and port.bind.pci with it, the EAL command line (pmd)
// sorts devices into -a and --vdev with it, and the NIC binder
// (internal/nicbind) names sysfs devices with it. It is plain Go.
package devargs

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// PCIAddr is a PCI address: domain, bus, device and function.
type PCIAddr struct {
	Domain   uint32
	Bus      uint8
	Device   uint8 // 0..0x1f
	Function uint8 // 0..7
}

// String returns the address as sysfs and DPDK name the device
// (PCI_PRI_FMT): lower case, the domain in at least four digits.
func (a PCIAddr) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.Domain, a.Bus, a.Device, a.Function)
}

// ErrBadPCI: the string is not a PCI address.
var ErrBadPCI = errors.New("not a PCI address")

// badPCI is ParsePCI's error for s.
func badPCI(s string) error {
	return fmt.Errorf("%q is %w ([dddd:]bb:dd.f, such as 0000:3b:00.0)", s, ErrBadPCI)
}

// Limits of the fields of a PCI address as written: the bus and device in
// two hex digits, the function in one, the domain, when given, in four to
// eight (Linux names domains past 0xffff, such as Intel VMD's, in five).
const (
	maxDevice       = 0x1f // 5 bits
	maxFunction     = 7    // 3 bits
	minDomainDigits = 4
	maxDomainDigits = 8
)

// ParsePCI parses a PCI address, [dddd:]bb:dd.f in hex, either case; the
// domain defaults to 0. It is stricter than DPDK's rte_pci_addr_parse,
// which takes any number of digits and a device or function beyond what
// PCI has: what it accepts, DPDK, sysfs and lspci all name the same way.
func ParsePCI(s string) (PCIAddr, error) {
	var a PCIAddr
	rest := s
	if strings.Count(s, ":") == 2 {
		dom, r, _ := strings.Cut(s, ":")
		if len(dom) < minDomainDigits || len(dom) > maxDomainDigits {
			return PCIAddr{}, badPCI(s)
		}
		d, ok := hex(dom)
		if !ok {
			return PCIAddr{}, badPCI(s)
		}
		a.Domain, rest = uint32(d), r
	}
	bus, r, ok1 := strings.Cut(rest, ":")
	dev, fn, ok2 := strings.Cut(r, ".")
	if !ok1 || !ok2 || len(bus) != 2 || len(dev) != 2 || len(fn) != 1 {
		return PCIAddr{}, badPCI(s)
	}
	b, okB := hex(bus)
	d, okD := hex(dev)
	f, okF := hex(fn)
	if !okB || !okD || !okF || d > maxDevice || f > maxFunction {
		return PCIAddr{}, badPCI(s)
	}
	a.Bus, a.Device, a.Function = uint8(b), uint8(d), uint8(f)
	return a, nil
}

// hex parses a string of hex digits, nothing else (no sign, prefix or
// underscore, which strconv would take).
func hex(s string) (uint64, bool) {
	if s == "" || strings.IndexFunc(s, func(r rune) bool {
		return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F')
	}) >= 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 16, 32)
	return v, err == nil
}

// Arg is one key=value device argument.
type Arg struct{ Key, Value string }

// Device is a parsed device string.
type Device struct {
	// Name is what DPDK registers the device under, which ports are
	// opened by: for a PCI device its canonical address (PCIAddr.String,
	// whatever case and domain the string had), for a vdev its name.
	Name string
	// PCI is set for a PCI device; Addr is then its address.
	PCI  bool
	Addr PCIAddr
	Args []Arg
}

// Values returns the values of the arguments named key, in order.
func (d *Device) Values(key string) []string {
	var out []string
	for _, a := range d.Args {
		if a.Key == key {
			out = append(out, a.Value)
		}
	}
	return out
}

// ErrBadDevice: the string is neither a PCI address nor a vdev name, or
// its arguments are malformed.
var ErrBadDevice = errors.New("neither a PCI address (0000:01:00.0) nor vdev devargs (net_<driver><n>), with optional ,key=value arguments")

var (
	// vdevRE is the name of a network vdev: net_, the driver, the
	// instance number.
	vdevRE = regexp.MustCompile(`^net_[a-z_]+[0-9]+$`)
	keyRE  = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// Parse parses a device string: a PCI address or a network vdev name
// (net_<driver><n>), then ,key=value arguments, a value running to the
// next comma.
func Parse(s string) (Device, error) {
	name, args, hasArgs := strings.Cut(s, ",")
	var d Device
	if a, err := ParsePCI(name); err == nil {
		d = Device{Name: a.String(), PCI: true, Addr: a}
	} else if vdevRE.MatchString(name) {
		d = Device{Name: name}
	} else {
		return Device{}, fmt.Errorf("%q is %w", s, ErrBadDevice)
	}
	if !hasArgs {
		return d, nil
	}
	for _, kv := range strings.Split(args, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !keyRE.MatchString(k) {
			return Device{}, fmt.Errorf("%q: argument %q is not key=value: %w", s, kv, ErrBadDevice)
		}
		d.Args = append(d.Args, Arg{k, v})
	}
	return d, nil
}

// IsPCI reports whether the device string s names a PCI device: a PCI
// address, with or without arguments. It does not check the arguments:
// Parse does.
func IsPCI(s string) bool {
	name, _, _ := strings.Cut(s, ",")
	_, err := ParsePCI(name)
	return err == nil
}

// Name returns the name DPDK registers the device of the string s under:
// the canonical PCI address for a PCI device, otherwise the part before
// the first comma.
func Name(s string) string {
	name, _, _ := strings.Cut(s, ",")
	if a, err := ParsePCI(name); err == nil {
		return a.String()
	}
	return name
}

// CanonicalPCI returns the PCI address s as sysfs names it, or ok false
// if s is not a PCI address.
func CanonicalPCI(s string) (addr string, ok bool) {
	a, err := ParsePCI(s)
	if err != nil {
		return "", false
	}
	return a.String(), true
}
