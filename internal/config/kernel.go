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
	// Routes are installed on the interface once it is up with its
	// addresses: the daemon owns the node's routes through this NIC (a
	// default gateway included), as it owns its addresses, and a stop
	// puts both back on the NIC (docs/operator/cutover.md).
	Routes []Route `yaml:"routes"`
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
	MaxKernelRoutes      = 64
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

// Route is one of kernel.routes: {to: 10.1.0.0/16 or default, via:
// 10.0.0.1, metric: 100}. To is the destination prefix, 0.0.0.0/0 (or
// ::/0) for "default", in the family of Via.
type Route struct {
	To     netip.Prefix
	Via    netip.Addr
	Metric int
}

// routeYAML is a Route as written.
type routeYAML struct {
	To     string `yaml:"to"`
	Via    string `yaml:"via"`
	Metric int    `yaml:"metric"`
}

// UnmarshalYAML reads {to, via, metric}; a route needs both to and via
// (a route without a gateway is the one the kernel adds for an address).
func (r *Route) UnmarshalYAML(n *yaml.Node) error {
	var y routeYAML
	if err := n.Decode(&y); err != nil {
		return err
	}
	if y.Via == "" {
		return fmt.Errorf("line %d: route to %q has no via: want {to: 10.1.0.0/16 or default, via: 10.0.0.1}", n.Line, y.To)
	}
	via, err := netip.ParseAddr(y.Via)
	if err != nil {
		return fmt.Errorf("line %d: route via %q is not an address", n.Line, y.Via)
	}
	switch {
	case y.To == "default":
		r.To = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if via.Is6() {
			r.To = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
	case y.To == "":
		return fmt.Errorf("line %d: route via %v has no to: want a prefix (10.1.0.0/16) or default", n.Line, via)
	default:
		if r.To, err = netip.ParsePrefix(y.To); err != nil {
			return fmt.Errorf("line %d: route to %q is not a prefix (10.1.0.0/16) or default", n.Line, y.To)
		}
	}
	r.Via, r.Metric = via, y.Metric
	return nil
}

// dest is the destination as ip-route(8) writes it: "default" for /0.
func (r Route) dest() string {
	if r.To.Bits() == 0 {
		return "default"
	}
	return r.To.String()
}

// validateRoutes checks kernel.routes against the addresses: each
// destination is a network address of the gateway's family, each gateway
// is on the subnet of one of the addresses (the kernel could not reach it
// otherwise: no route via a gateway behind another gateway), and no
// destination is listed twice at one metric.
func validateRoutes(bad func(string, string, ...any), addrs []InterfaceAddr, routes []Route) {
	if len(routes) > MaxKernelRoutes {
		bad("kernel.routes", "%d routes; at most %d", len(routes), MaxKernelRoutes)
	}
	type key struct {
		to     netip.Prefix
		metric int
	}
	seen := map[key]int{}
	for i, r := range routes {
		path := fmt.Sprintf("kernel.routes[%d]", i)
		onLink := false
		for _, a := range addrs {
			if a.Addr().Is4() == r.Via.Is4() && a.Masked().Contains(r.Via) && a.Addr() != r.Via {
				onLink = true
			}
		}
		k := key{r.To, r.Metric}
		j, dup := seen[k]
		switch {
		case r.To.Addr().Is4() != r.Via.Is4():
			bad(path, "%v via %v mixes IPv4 and IPv6", r.To, r.Via)
		case r.To != r.To.Masked():
			bad(path, "%v has host bits set: the network is %v", r.To, r.To.Masked())
		case !r.Via.IsGlobalUnicast() && !r.Via.IsPrivate() && !r.Via.IsLinkLocalUnicast():
			bad(path, "gateway %v is not a unicast address", r.Via)
		case r.Metric < 0:
			bad(path, "metric %d is negative", r.Metric)
		case !onLink && !r.Via.IsLinkLocalUnicast():
			bad(path, "gateway %v is on none of the subnets of kernel.addresses: the kernel could not reach it", r.Via)
		case dup:
			bad(path, "%s at metric %d is kernel.routes[%d] again", r.dest(), r.Metric, j)
		}
		seen[k] = i
	}
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
	validateRoutes(bad, k.Addresses, k.Routes)
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
		switch {
		case d.v < 64 || d.v > 4096:
			bad(d.path, "%d is outside 64..4096", d.v)
		case k.Driver == KernelVirtioUser && d.v&(d.v-1) != 0:
			// DPDK refuses a split virtqueue of another size.
			bad(d.path, "%d is not a power of two, which driver %s's virtqueues must be", d.v, KernelVirtioUser)
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
