package afxdp

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
)

// Interface is a kernel interface as the af_xdp mode sees it.
type Interface struct {
	Name  string
	Index int
	// Kind is netlink's link type: "device" for a NIC, "veth", ...
	Kind string
	// RxQueues is how many receive queues the kernel uses on it: every
	// one needs an AF_XDP socket, or RoCE landing on it goes to the
	// kernel (counted as no_socket).
	RxQueues int
	MTU      int
	// Addrs are its IPv4 addresses.
	Addrs []netip.Addr
}

// ErrNoInterface is a missing interface.
var ErrNoInterface = errors.New("no such interface")

// kindRefusals say why an interface kind cannot be taken.
var kindRefusals = map[string]string{
	"bond":    "a bond: AF_XDP binds to one device's queues, and XDP on a bond needs every slave's driver; take each slave NIC with a daemon of its own",
	"team":    "a team device: AF_XDP binds to one device's queues; take each member NIC with a daemon of its own",
	"vlan":    "a VLAN sub-interface: name its parent (the XDP program takes 802.1Q-tagged RoCE itself)",
	"macvlan": "a macvlan: name the NIC it sits on",
	"ipvlan":  "an ipvlan: name the NIC it sits on",
	"bridge":  "a bridge: name the NIC enslaved to it",
}

// supportedKinds are the kinds taken: NICs, and veths (tests, containers).
var supportedKinds = map[string]bool{"device": true, "veth": true}

// Inspect reads the interface name.
func Inspect(name string) (Interface, error) { return inspect("/sys", name) }

func inspect(sysfs, name string) (Interface, error) {
	link, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return Interface{}, fmt.Errorf("af_xdp: interface %s: %w", name, ErrNoInterface)
		}
		return Interface{}, fmt.Errorf("af_xdp: interface %s: %w", name, err)
	}
	a := link.Attrs()
	ifc := Interface{Name: a.Name, Index: a.Index, Kind: link.Type(), MTU: a.MTU}
	if err := checkKind(ifc.Name, ifc.Kind); err != nil {
		return Interface{}, err
	}
	if ifc.RxQueues, err = rxQueues(sysfs, name); err != nil {
		return Interface{}, err
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return Interface{}, fmt.Errorf("af_xdp: interface %s: addresses: %w", name, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			ifc.Addrs = append(ifc.Addrs, ip)
		}
	}
	return ifc, nil
}

func checkKind(name, kind string) error {
	if supportedKinds[kind] {
		return nil
	}
	if why, ok := kindRefusals[kind]; ok {
		return fmt.Errorf("af_xdp: interface %s is %s", name, why)
	}
	return fmt.Errorf("af_xdp: interface %s is of kind %q, which is not supported: name a NIC (or a veth)", name, kind)
}

// rxQueues counts the queues/rx-N directories the kernel keeps for the
// interface's receive queues in use (ethtool -l's combined plus rx).
func rxQueues(sysfs, name string) (int, error) {
	dir := filepath.Join(sysfs, "class", "net", name, "queues")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("af_xdp: interface %s: receive queues: %w", name, err)
	}
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "rx-") {
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("af_xdp: interface %s: no receive queues in %s", name, dir)
	}
	return n, nil
}
