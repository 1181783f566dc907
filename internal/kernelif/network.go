package kernelif

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Route is a route through an interface to a gateway on one of its
// subnets. To is 0.0.0.0/0 (or ::/0) for the default route.
type Route struct {
	To     netip.Prefix `json:"to"`
	Via    netip.Addr   `json:"via"`
	Metric int          `json:"metric,omitempty"`
}

// String writes the route as ip-route(8) does.
func (r Route) String() string {
	to := r.To.String()
	if r.To.Bits() == 0 {
		to = "default"
	}
	s := to + " via " + r.Via.String()
	if r.Metric != 0 {
		s += fmt.Sprintf(" metric %d", r.Metric)
	}
	return s
}

// Network is the node's network on one interface: its addresses, and
// the routes through gateways on their subnets. The routes the kernel
// derives from an address (its subnet's) are not listed.
type Network struct {
	Addresses []netip.Prefix `json:"addresses,omitempty"`
	Routes    []Route        `json:"routes,omitempty"`
}

// Empty reports that n holds neither addresses nor routes.
func (n Network) Empty() bool { return len(n.Addresses) == 0 && len(n.Routes) == 0 }

// Merge returns n with what o adds to it.
func (n Network) Merge(o Network) Network {
	add := o.Minus(n)
	return Network{Addresses: append(slices.Clone(n.Addresses), add.Addresses...), Routes: append(slices.Clone(n.Routes), add.Routes...)}
}

// Minus returns what n holds that o does not.
func (n Network) Minus(o Network) Network {
	return Network{Addresses: without(n.Addresses, o.Addresses), Routes: without(n.Routes, o.Routes)}
}

// without returns the items of list not in drop, each once.
func without[T comparable](list, drop []T) []T {
	var out []T
	for _, v := range list {
		if !slices.Contains(drop, v) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// ipv6DefaultMetric is the metric the kernel gives an IPv6 route added
// with none.
const ipv6DefaultMetric = 1024

// installed returns n as the kernel lists it once applied: an IPv6
// route without a metric has the kernel's default one.
func (n Network) installed() Network {
	out := Network{Addresses: n.Addresses, Routes: slices.Clone(n.Routes)}
	for i, r := range out.Routes {
		if r.Metric == 0 && r.Via.Is6() {
			out.Routes[i].Metric = ipv6DefaultMetric
		}
	}
	return out
}

// dumpRetries bounds the retries of a netlink dump that changed while
// the kernel wrote it.
const dumpRetries = 10

// RetryDump runs a netlink dump (AddrList, RouteList) again while the
// kernel reports it interrupted: addresses change state under it (IPv6
// duplicate address detection ending, a route added), and the library
// then returns partial results with netlink.ErrDumpInterrupted.
func RetryDump[T any](dump func() ([]T, error)) ([]T, error) {
	for i := 0; ; i++ {
		v, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || i == dumpRetries {
			return v, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dadTimeout bounds the wait for IPv6 duplicate address detection: one
// probe and a second by default, more where dad_transmits is raised.
const dadTimeout = 10 * time.Second

// apply gives link n's addresses, sets it up, then installs n's routes
// (a gateway is reachable only once the link is up with its subnet),
// and waits until no address is tentative: a daemon cannot bind an IPv6
// address under duplicate address detection, so the node's network is
// not there before.
func apply(h *netlink.Handle, link netlink.Link, n Network) error {
	name := link.Attrs().Name
	for _, a := range n.Addresses {
		if err := h.AddrReplace(link, &netlink.Addr{IPNet: prefixToIPNet(a)}); err != nil {
			return fmt.Errorf("kernelif: %s address %v: %w", name, a, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("kernelif: %s up: %w", name, err)
	}
	for _, r := range n.Routes {
		nr := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixToIPNet(r.To), Gw: net.IP(r.Via.AsSlice()),
			Priority: r.Metric, Protocol: unix.RTPROT_STATIC, Table: unix.RT_TABLE_MAIN}
		if err := h.RouteReplace(nr); err != nil {
			return fmt.Errorf("kernelif: %s route %v: %w", name, r, err)
		}
	}
	return waitDAD(h, link, dadTimeout)
}

// waitDAD waits until none of link's addresses is tentative. An address
// whose detection failed (a duplicate on the link) is an error.
func waitDAD(h *netlink.Handle, link netlink.Link, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		addrs, err := RetryDump(func() ([]netlink.Addr, error) { return h.AddrList(link, netlink.FAMILY_V6) })
		if err != nil {
			return fmt.Errorf("kernelif: %s addresses: %w", link.Attrs().Name, err)
		}
		var tentative []string
		for _, a := range addrs {
			if a.Flags&unix.IFA_F_DADFAILED != 0 {
				return fmt.Errorf("kernelif: %s address %v: another host on the link has it (duplicate address detection failed)", link.Attrs().Name, a.IPNet)
			}
			if a.Flags&unix.IFA_F_TENTATIVE != 0 {
				tentative = append(tentative, a.IPNet.String())
			}
		}
		if len(tentative) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kernelif: %s addresses %v still tentative after %v (duplicate address detection)", link.Attrs().Name, tentative, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Apply gives the interface ifname, in the caller's network namespace,
// the addresses and routes of n and sets it up: what a restored NIC
// gets back when the daemon lets go of it.
func Apply(ifname string, n Network) error {
	// Route only: a handle for every family would also open XFRM and
	// netfilter sockets, which a kernel without those modules refuses.
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("kernelif: netlink: %w", err)
	}
	defer h.Close()
	link, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("kernelif: interface %s: %w", ifname, err)
	}
	return apply(h, link, n)
}

// Read returns the network of the interface ifname in the caller's
// namespace: its addresses but the IPv6 link-local ones the kernel adds
// itself, and its main-table routes through a gateway.
func Read(ifname string) (Network, error) {
	var n Network
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return n, fmt.Errorf("kernelif: interface %s: %w", ifname, err)
	}
	addrs, err := RetryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(link, netlink.FAMILY_ALL) })
	if err != nil {
		return n, fmt.Errorf("kernelif: %s addresses: %w", ifname, err)
	}
	for _, a := range addrs {
		p, ok := ipNetToPrefix(a.IPNet)
		if !ok || p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
			continue
		}
		n.Addresses = append(n.Addresses, p)
	}
	routes, err := RetryDump(func() ([]netlink.Route, error) { return netlink.RouteList(link, netlink.FAMILY_ALL) })
	if err != nil {
		return n, fmt.Errorf("kernelif: %s routes: %w", ifname, err)
	}
	for _, r := range routes {
		gw, ok := netip.AddrFromSlice(r.Gw)
		if !ok || r.Table != unix.RT_TABLE_MAIN {
			continue
		}
		gw = gw.Unmap()
		to := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if gw.Is6() {
			to = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		if r.Dst != nil {
			if to, ok = ipNetToPrefix(r.Dst); !ok {
				continue
			}
		}
		n.Routes = append(n.Routes, Route{To: to.Masked(), Via: gw, Metric: r.Priority})
	}
	return n, nil
}

// ipNetToPrefix keeps the host bits, as prefixToIPNet does.
func ipNetToPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	a = a.Unmap()
	if a.Is4() && bits > 32 {
		bits -= 96
	}
	return netip.PrefixFrom(a, bits), true
}
