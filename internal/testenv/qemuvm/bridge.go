//go:build linux

package qemuvm

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
)

// Switch is a Linux bridge alone in a network namespace of its own: guests
// attach through taps, the root namespace through veth pairs (AddVeth), and
// namespaces of their own through others (AddPeer).
type Switch struct {
	// NS is the namespace name, as in `ip netns exec NS`.
	NS string
	// Name is the bridge device inside NS.
	Name string
	// Addr is the bridge's own address, if NewSwitch was given one: the
	// namespace's kernel answers ARP and ICMP there (but not RoCE).
	Addr netip.Prefix

	suffix     string
	vethPrefix string

	mu    sync.Mutex
	taps  int
	veths int
	peers int
}

// NewSwitch creates namespace nsPrefix+"XXXXXX" holding bridge br0 (up, no
// STP, forward delay 0, no multicast snooping) and registers a cleanup that
// deletes the namespace and everything in it. If hostAddr is valid it is
// assigned to br0. IPv6 is off on every device in the namespace unless
// hostAddr is an IPv6 prefix. The root-namespace ends of AddVeth's pairs
// are named vethPrefix+"XXXXXXN", at most 15 bytes. NewSwitch fails the
// test on any error.
func NewSwitch(t harness.TB, nsPrefix, vethPrefix string, hostAddr netip.Prefix) *Switch {
	t.Helper()
	suffix := netcmd.Suffix(t)
	b := &Switch{
		NS:         nsPrefix + suffix,
		Name:       "br0",
		Addr:       hostAddr,
		suffix:     suffix,
		vethPrefix: vethPrefix,
	}
	// Registered first so that a failure half way still cleans up.
	t.Cleanup(func() {
		if err := b.destroy(); err != nil {
			t.Errorf("qemuvm: %v", err)
		}
	})
	if err := b.create(); err != nil {
		t.Fatalf("qemuvm: bridge: %v", err)
	}
	return b
}

func (b *Switch) create() error {
	if err := netcmd.IP("netns", "add", b.NS); err != nil {
		return err
	}
	v6 := b.Addr.IsValid() && b.Addr.Addr().Is6()
	if !v6 {
		if err := disableIPv6(b.NS); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"-n", b.NS, "link", "set", "dev", "lo", "up"},
		{"-n", b.NS, "link", "add", b.Name, "type", "bridge",
			"stp_state", "0", "forward_delay", "0", "mcast_snooping", "0"},
	}
	if b.Addr.IsValid() {
		args := []string{"-n", b.NS, "addr", "add", b.Addr.String(), "dev", b.Name}
		if v6 {
			args = append(args, "nodad")
		}
		steps = append(steps, args)
	}
	steps = append(steps, []string{"-n", b.NS, "link", "set", "dev", b.Name, "up"})
	for _, s := range steps {
		if err := netcmd.IP(s...); err != nil {
			return err
		}
	}
	return nil
}

// destroy deletes the namespace (and with it the bridge, its taps and the
// namespace ends of its veth pairs, which takes the root-namespace ends
// too). Guests must be gone: a process inside the namespace keeps it, and
// its devices, alive.
func (b *Switch) destroy() error {
	if _, err := os.Stat("/run/netns/" + b.NS); err != nil {
		return nil
	}
	return netcmd.IP("netns", "del", b.NS)
}

// AddTap creates a tap device named name inside the namespace, enslaved to
// the bridge and up, for a guest to attach to.
func (b *Switch) AddTap(name string) error {
	for _, s := range [][]string{
		{"-n", b.NS, "tuntap", "add", "dev", name, "mode", "tap"},
		{"-n", b.NS, "link", "set", "dev", name, "master", b.Name},
		{"-n", b.NS, "link", "set", "dev", name, "up"},
	} {
		if err := netcmd.IP(s...); err != nil {
			return fmt.Errorf("qemuvm: tap %s: %w", name, err)
		}
	}
	return nil
}

// DelTap removes a tap created by AddTap, if it is still there.
func (b *Switch) DelTap(name string) error {
	if err := exec.Command("ip", "-n", b.NS, "link", "show", "dev", name).Run(); err != nil {
		return nil
	}
	return netcmd.IP("-n", b.NS, "link", "del", "dev", name)
}

// NewTapName returns a name for a tap in the namespace no other call has
// returned.
func (b *Switch) NewTapName() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.taps++
	return fmt.Sprintf("rxtap%d", b.taps)
}

// AddVeth joins the root namespace to the bridge with a veth pair and
// returns the name of the root-namespace end, vethPrefix+"XXXXXXN": up and
// promiscuous, without addresses, ARP, IPv6 or forwarding, for DPDK's
// net_af_packet (or a packet socket) to bind to. The other end is enslaved
// to the bridge with checksum and segmentation offloads off, so that what
// the guests send leaves through the root-namespace end as complete,
// MTU-sized frames. t's cleanup removes the pair.
func (b *Switch) AddVeth(t harness.TB) (hostIf string, err error) {
	t.Helper()
	b.mu.Lock()
	b.veths++
	n := b.veths
	b.mu.Unlock()
	hostIf = fmt.Sprintf("%s%s%d", b.vethPrefix, b.suffix, n)
	peer := fmt.Sprintf("veth%d", n)
	if len(hostIf) > 15 {
		return "", fmt.Errorf("qemuvm: too many veth pairs on %s", b.NS)
	}
	t.Cleanup(func() {
		if _, err := net.InterfaceByName(hostIf); err != nil {
			return // gone already, with the namespace or never made
		}
		if err := netcmd.IP("link", "del", "dev", hostIf); err != nil {
			t.Errorf("qemuvm: %v", err)
		}
	})
	if err := b.addVeth(hostIf, peer); err != nil {
		return "", fmt.Errorf("qemuvm: veth %s: %w", hostIf, err)
	}
	return hostIf, nil
}

func (b *Switch) addVeth(hostIf, peer string) error {
	if err := netcmd.IP("link", "add", "dev", hostIf, "type", "veth", "peer", "name", peer, "netns", b.NS); err != nil {
		return err
	}
	for _, s := range []struct{ path, value string }{
		{"/proc/sys/net/ipv6/conf/" + hostIf + "/disable_ipv6", "1"},
		{"/proc/sys/net/ipv4/conf/" + hostIf + "/forwarding", "0"},
	} {
		if err := netcmd.WriteSysctl(s.path, s.value); err != nil {
			return err
		}
	}
	if err := netcmd.IP("link", "set", "dev", hostIf, "arp", "off", "promisc", "on", "up"); err != nil {
		return err
	}
	// Without this the bridge would hand the root-namespace end frames
	// with unfinished checksums, and TCP segments merged into 64 KiB
	// frames, which a packet socket sees as they are.
	if err := b.Exec("ethtool", "-K", peer, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off"); err != nil {
		return err
	}
	if err := netcmd.IP("-n", b.NS, "link", "set", "dev", peer, "master", b.Name); err != nil {
		return err
	}
	return netcmd.IP("-n", b.NS, "link", "set", "dev", peer, "up")
}

// AddNSVeth joins namespace ns to the bridge with a veth pair whose end
// in ns, named name, is an ordinary kernel interface with the address
// addr (ARP on, not promiscuous): a node's own NIC, which the af_xdp mode
// leaves to the kernel. The bridge's end has the offloads off as AddVeth's
// has, so that what the guests send reaches ns as complete, MTU-sized
// frames. The pair goes with either namespace.
func (b *Switch) AddNSVeth(ns, name string, addr netip.Prefix) error {
	b.mu.Lock()
	b.veths++
	peer := fmt.Sprintf("veth%d", b.veths)
	b.mu.Unlock()
	if err := netcmd.IP("-n", ns, "link", "add", "dev", name, "type", "veth", "peer", "name", peer, "netns", b.NS); err != nil {
		return fmt.Errorf("qemuvm: veth %s: %w", name, err)
	}
	if err := b.Exec("ethtool", "-K", peer, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off"); err != nil {
		return fmt.Errorf("qemuvm: veth %s: %w", name, err)
	}
	for _, s := range [][]string{
		{"-n", b.NS, "link", "set", "dev", peer, "master", b.Name, "up"},
		{"-n", ns, "addr", "add", addr.String(), "dev", name},
		{"-n", ns, "link", "set", "dev", name, "up"},
	} {
		if err := netcmd.IP(s...); err != nil {
			return fmt.Errorf("qemuvm: veth %s: %w", name, err)
		}
	}
	return nil
}

// Exec runs a command inside the bridge's namespace.
func (b *Switch) Exec(name string, args ...string) error { return nsExec(b.NS, name, args...) }

// Peer is a network namespace of its own joined to the bridge by a veth
// pair: a host on the guests' network, with a kernel that answers ARP and
// pings, for traffic to and from them.
type Peer struct {
	// NS is the namespace name.
	NS string
	// If is the peer's interface, "eth0".
	If string
	// Addr is its address.
	Addr netip.Prefix
	// MAC is its hardware address.
	MAC net.HardwareAddr
}

// AddPeer creates namespace NS+"-peerN" whose eth0 (address addr, IPv6
// off) is a veth pair's end, the other end enslaved to the bridge. t's
// cleanup deletes the namespace, and the pair with it; register it after
// the bridge, so that it runs first.
func (b *Switch) AddPeer(t harness.TB, addr netip.Prefix) (*Peer, error) {
	t.Helper()
	b.mu.Lock()
	b.peers++
	n := b.peers
	b.mu.Unlock()
	p := &Peer{NS: fmt.Sprintf("%s-peer%d", b.NS, n), If: "eth0", Addr: addr}
	t.Cleanup(func() {
		if _, err := os.Stat("/run/netns/" + p.NS); err != nil {
			return
		}
		if err := netcmd.IP("netns", "del", p.NS); err != nil {
			t.Errorf("qemuvm: %v", err)
		}
	})
	if err := b.addPeer(p, fmt.Sprintf("pv%d", n)); err != nil {
		return nil, fmt.Errorf("qemuvm: peer %s: %w", p.NS, err)
	}
	return p, nil
}

func (b *Switch) addPeer(p *Peer, brEnd string) error {
	if err := netcmd.IP("netns", "add", p.NS); err != nil {
		return err
	}
	// Before the pair exists: its end takes the namespace's defaults.
	if err := disableIPv6(p.NS); err != nil {
		return err
	}
	for _, s := range [][]string{
		{"-n", p.NS, "link", "set", "dev", "lo", "up"},
		{"-n", b.NS, "link", "add", "dev", brEnd, "type", "veth", "peer", "name", p.If, "netns", p.NS},
		{"-n", b.NS, "link", "set", "dev", brEnd, "master", b.Name, "up"},
		{"-n", p.NS, "addr", "add", p.Addr.String(), "dev", p.If},
		{"-n", p.NS, "link", "set", "dev", p.If, "up"},
	} {
		if err := netcmd.IP(s...); err != nil {
			return err
		}
	}
	out, err := exec.Command("ip", "netns", "exec", p.NS, "cat", "/sys/class/net/"+p.If+"/address").Output()
	if err != nil {
		return fmt.Errorf("address of %s: %w", p.If, err)
	}
	p.MAC, err = net.ParseMAC(strings.TrimSpace(string(out)))
	return err
}

// Exec runs a command inside the peer's namespace and returns its
// combined output.
func (p *Peer) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{"netns", "exec", p.NS, name}, args...)
	out, err := exec.CommandContext(ctx, "ip", argv...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("in %s: %s %s: %w: %s", p.NS, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// disableIPv6 turns IPv6 off in namespace ns for the devices that exist and
// those created from now on: no link-local addresses, DAD, router
// solicitations or MLD reports, so that only the traffic a test makes
// crosses the bridge.
func disableIPv6(ns string) error {
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		return nil
	}
	return nsExec(ns, "sh", "-c", "echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6 && "+
		"echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6")
}

func nsExec(ns, name string, args ...string) error {
	argv := append([]string{"netns", "exec", ns, name}, args...)
	out, err := exec.Command("ip", argv...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("in %s: %s %s: %w: %s", ns, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
