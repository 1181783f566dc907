package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Kernel configures the exception path: a kernel network interface that
// the daemon creates through DPDK (net_tap, or virtio_user over vhost-net)
// with the port's MAC address. Services whose consumer is "kernel" hand
// their packets to it, and whatever the kernel sends on it goes out the
// port. The node's IP addresses live on it, so ceph-mon and ceph-osd
// listen on ordinary kernel sockets.
type Kernel struct {
	// Interface is the kernel interface name; the port name by default,
	// so a NIC taken over by DPDK keeps its name on the node.
	Interface string `yaml:"interface"`
	// Driver is "tap" (net_tap) or "virtio_user" (needs /dev/vhost-net).
	Driver string `yaml:"driver"`
	// MTU defaults to the port's.
	MTU int `yaml:"mtu"`
	// Addresses are assigned to the interface, e.g. 10.0.0.5/24.
	Addresses []InterfaceAddr `yaml:"addresses"`
	// NetNS is a named network namespace (as in `ip netns`) or the path
	// of a namespace file to move the interface into; empty keeps it in
	// the daemon's own namespace.
	NetNS string `yaml:"netns"`
	// TxQueue is the port TX queue that carries the kernel's frames; it
	// belongs to the poll loop that drains the kernel services.
	TxQueue int `yaml:"tx_queue"`
	// Budget is how many packets each poll iteration hands to the kernel
	// at most, highest service priority first. Below the RX burst, it
	// makes an overloaded kernel side fill (and drop from) the
	// lowest-priority ring instead of the NIC's RX queue.
	Budget int `yaml:"budget"`
	// RxDescriptors and TxDescriptors size the interface's DPDK queues.
	RxDescriptors int `yaml:"rx_descriptors"`
	TxDescriptors int `yaml:"tx_descriptors"`
}

// Kernel interface drivers.
const (
	KernelTap        = "tap"
	KernelVirtioUser = "virtio_user"
)

// Limits of the kernel interface settings.
const (
	// MaxInterfaceName is IFNAMSIZ less the terminating NUL.
	MaxInterfaceName     = 15
	DefaultKernelDescs   = 512
	MaxKernelAddresses   = 64
	DefaultKernelPercent = 50 // default budget as a share of burst_size
)

// InterfaceAddr is an address with its prefix length, e.g. 10.0.0.5/24:
// unlike Prefix, the host bits are kept.
type InterfaceAddr struct{ netip.Prefix }

// UnmarshalYAML accepts "10.0.0.5/24" or a bare address (a host prefix).
func (a *InterfaceAddr) UnmarshalYAML(n *yaml.Node) error {
	if p, err := netip.ParsePrefix(n.Value); err == nil {
		a.Prefix = p
		return nil
	}
	ip, err := netip.ParseAddr(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not an address with a prefix length (10.0.0.5/24)", n.Line, n.Value)
	}
	a.Prefix = netip.PrefixFrom(ip, ip.BitLen())
	return nil
}

var ifnameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func (c *Config) kernelDefaults() {
	c.bridgeDefaults()
	k := c.Kernel
	if k == nil {
		return
	}
	if k.Interface == "" {
		k.Interface = c.Port.Name
	}
	if k.Driver == "" {
		k.Driver = KernelTap
	}
	if k.MTU == 0 {
		k.MTU = c.Port.MTU
	}
	if k.Budget == 0 {
		k.Budget = max(1, c.Burst*DefaultKernelPercent/100)
	}
	if k.RxDescriptors == 0 {
		k.RxDescriptors = DefaultKernelDescs
	}
	if k.TxDescriptors == 0 {
		k.TxDescriptors = DefaultKernelDescs
	}
}

// validateKernel checks the kernel section and the services that use it.
// kernelPoller is the poll loop that drains the kernel services (-1 if
// none does), which also carries kernel.tx_queue.
func (c *Config) validateKernel(bad func(string, string, ...any)) {
	c.validateBridge(bad)
	k := c.Kernel
	users := 0
	for i, s := range c.Services {
		if s.Priority < 0 || s.Priority > 255 {
			bad(fmt.Sprintf("services[%d].priority", i), "%d is outside 0..255", s.Priority)
		}
		if s.Consumer.Type == ConsumerKernel {
			users++ // kernelKind.check asks for the kernel section
		}
	}
	if k == nil {
		return
	}
	if users == 0 {
		bad("kernel", "no service has consumer type %q: the interface would receive nothing", ConsumerKernel)
	}
	checkIfName(bad, "kernel.interface", k.Interface)
	switch k.Driver {
	case KernelTap, KernelVirtioUser:
	default:
		bad("kernel.driver", "%q: want %q or %q", k.Driver, KernelTap, KernelVirtioUser)
	}
	if k.MTU < 68 || k.MTU > c.Port.MTU {
		bad("kernel.mtu", "%d is outside 68..port.mtu %d: the kernel's frames must fit the port", k.MTU, c.Port.MTU)
	}
	if len(k.Addresses) > MaxKernelAddresses {
		bad("kernel.addresses", "%d addresses; at most %d", len(k.Addresses), MaxKernelAddresses)
	}
	seen := map[netip.Addr]bool{}
	for i, a := range k.Addresses {
		path := fmt.Sprintf("kernel.addresses[%d]", i)
		switch {
		case !a.IsValid() || a.Addr().IsUnspecified() || a.Addr().IsMulticast():
			bad(path, "%v is not a unicast address", a.Prefix)
		case seen[a.Addr()]:
			bad(path, "%v is listed twice", a.Addr())
		case c.RoCE != nil && c.RoCE.Address.Addr() == a.Addr() && c.RoCE.MAC != "":
			// A shared address has one MAC: the kernel answers ARP for
			// both, with the port's MAC, which the endpoint uses too.
			bad(path, "%v is also roce.address, which has a MAC of its own (roce.mac); a shared address uses the port's", a.Addr())
		}
		seen[a.Addr()] = true
	}
	if strings.ContainsAny(k.NetNS, "\x00") || (k.NetNS != "" && !strings.HasPrefix(k.NetNS, "/") && strings.ContainsAny(k.NetNS, "/ ")) {
		bad("kernel.netns", "%q: want a name from `ip netns list` or an absolute path", k.NetNS)
	}
	if k.TxQueue < 0 || k.TxQueue >= c.Port.TxQueues {
		bad("kernel.tx_queue", "tx queue %d does not exist: the port has %d", k.TxQueue, c.Port.TxQueues)
	}
	if k.Budget < 1 || k.Budget > MaxBurst {
		bad("kernel.budget", "%d is outside 1..%d", k.Budget, MaxBurst)
	}
	for _, d := range []struct {
		path string
		v    int
	}{{"kernel.rx_descriptors", k.RxDescriptors}, {"kernel.tx_descriptors", k.TxDescriptors}} {
		if d.v < 64 || d.v > 4096 {
			bad(d.path, "%d is outside 64..4096", d.v)
		}
	}
	// One poll loop runs the exception path in both directions: it drains
	// every kernel service (in priority order, through one interface
	// queue) and owns the TX queue the kernel's frames leave on.
	owner := -1
	for i, pl := range c.Pollers {
		for j, name := range pl.Services {
			si := c.ServiceIndex(name)
			if si < 0 || c.Services[si].Consumer.Type != ConsumerKernel {
				continue
			}
			if owner >= 0 && owner != i {
				bad(fmt.Sprintf("pollers[%d].services[%d]", i, j),
					"service %q uses the kernel interface, which pollers[%d] already drains: one poll loop owns the exception path", name, owner)
				continue
			}
			owner = i
		}
	}
	if owner < 0 {
		return
	}
	for i, pl := range c.Pollers {
		if i == owner {
			continue
		}
		for j, name := range pl.Services {
			si := c.ServiceIndex(name)
			if si < 0 {
				continue
			}
			s := c.Services[si]
			shared := s.Consumer.Type == ConsumerForward && s.Consumer.TxQueue == k.TxQueue ||
				s.Consumer.Type == ConsumerRoCE && c.RoCE != nil && c.RoCE.TxQueue == k.TxQueue
			if shared {
				bad(fmt.Sprintf("pollers[%d].services[%d]", i, j),
					"service %q transmits on tx queue %d, which the kernel path on pollers[%d] uses; tx queues are not shared between lcores", name, k.TxQueue, owner)
			}
		}
	}
}

// checkIfName reports an interface name Linux would refuse at path.
func checkIfName(bad func(path, format string, args ...any), path, name string) {
	if len(name) > MaxInterfaceName || !ifnameRE.MatchString(name) {
		bad(path, "%q: a Linux interface name is 1..%d letters, digits, '-', '_' or '.'", name, MaxInterfaceName)
	}
}
