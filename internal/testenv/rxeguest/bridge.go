//go:build linux

package rxeguest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
)

// NSPrefix starts the name of every network namespace this package
// creates, so that leftovers are easy to spot.
const NSPrefix = "cddrxe-"

// VethPrefix starts the name of the root-namespace end of every veth pair
// Bridge.AddVeth creates.
const VethPrefix = "cddrxv"

// Bridge is a Linux bridge alone in a network namespace of its own: guests
// attach through taps, the root namespace through veth pairs.
type Bridge struct {
	// NS is the namespace name, as in `ip netns exec NS`.
	NS string
	// Name is the bridge device inside NS.
	Name string
	// Addr is the bridge's own address, if NewBridge was given one: the
	// namespace's kernel answers ARP and ICMP there (but not RoCE).
	Addr netip.Prefix

	suffix string

	mu    sync.Mutex
	taps  int
	veths int
}

// NewBridge creates namespace "cddrxe-XXXXXX" holding bridge br0 (up, no
// STP, forward delay 0, no multicast snooping) and registers a cleanup that
// deletes the namespace and everything in it. If hostAddr is valid it is
// assigned to br0. IPv6 is off on every device in the namespace unless
// hostAddr is an IPv6 prefix. NewBridge skips the test when Available
// reports guests cannot run, and fails it on any other error.
func NewBridge(t testing.TB, hostAddr netip.Prefix) *Bridge {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	var id [3]byte
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatalf("rxeguest: random namespace name: %v", err)
	}
	b := &Bridge{
		NS:     NSPrefix + hex.EncodeToString(id[:]),
		Name:   "br0",
		Addr:   hostAddr,
		suffix: hex.EncodeToString(id[:]),
	}
	// Registered first so that a failure half way still cleans up.
	t.Cleanup(func() {
		if err := b.destroy(); err != nil {
			t.Errorf("rxeguest: %v", err)
		}
	})
	if err := b.create(); err != nil {
		t.Fatalf("rxeguest: bridge: %v", err)
	}
	return b
}

func (b *Bridge) create() error {
	if err := netcmd.IP("netns", "add", b.NS); err != nil {
		return err
	}
	v6 := b.Addr.IsValid() && b.Addr.Addr().Is6()
	if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil && !v6 {
		// Devices created from now on inherit "default": no link-local
		// addresses, DAD, router solicitations or MLD reports on the
		// bridge, so that only the guests' traffic crosses it.
		if err := b.Exec("sh", "-c", "echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6 && "+
			"echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6"); err != nil {
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
func (b *Bridge) destroy() error {
	if _, err := os.Stat("/run/netns/" + b.NS); err != nil {
		return nil
	}
	return netcmd.IP("netns", "del", b.NS)
}

// AddTap creates a tap device named name inside the namespace, enslaved to
// the bridge and up, for a guest to attach to.
func (b *Bridge) AddTap(name string) error {
	for _, s := range [][]string{
		{"-n", b.NS, "tuntap", "add", "dev", name, "mode", "tap"},
		{"-n", b.NS, "link", "set", "dev", name, "master", b.Name},
		{"-n", b.NS, "link", "set", "dev", name, "up"},
	} {
		if err := netcmd.IP(s...); err != nil {
			return fmt.Errorf("rxeguest: tap %s: %w", name, err)
		}
	}
	return nil
}

// delTap removes a tap created by AddTap, if it is still there.
func (b *Bridge) delTap(name string) error {
	if err := exec.Command("ip", "-n", b.NS, "link", "show", "dev", name).Run(); err != nil {
		return nil
	}
	return netcmd.IP("-n", b.NS, "link", "del", "dev", name)
}

func (b *Bridge) newTapName() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.taps++
	return fmt.Sprintf("rxtap%d", b.taps)
}

// AddVeth joins the root namespace to the bridge with a veth pair and
// returns the name of the root-namespace end, "cddrxvXXXXXXN": up and
// promiscuous, without addresses, ARP, IPv6 or forwarding, for DPDK's
// net_af_packet (or a packet socket) to bind to. The other end is enslaved
// to the bridge with checksum and segmentation offloads off, so that what
// the guests send leaves through the root-namespace end as complete,
// MTU-sized frames. t's cleanup removes the pair.
func (b *Bridge) AddVeth(t testing.TB) (hostIf string, err error) {
	t.Helper()
	b.mu.Lock()
	b.veths++
	n := b.veths
	b.mu.Unlock()
	hostIf = fmt.Sprintf("%s%s%d", VethPrefix, b.suffix, n)
	peer := fmt.Sprintf("veth%d", n)
	if len(hostIf) > 15 {
		return "", fmt.Errorf("rxeguest: too many veth pairs on %s", b.NS)
	}
	t.Cleanup(func() {
		if _, err := net.InterfaceByName(hostIf); err != nil {
			return // gone already, with the namespace or never made
		}
		if err := netcmd.IP("link", "del", "dev", hostIf); err != nil {
			t.Errorf("rxeguest: %v", err)
		}
	})
	if err := b.addVeth(hostIf, peer); err != nil {
		return "", fmt.Errorf("rxeguest: veth %s: %w", hostIf, err)
	}
	return hostIf, nil
}

func (b *Bridge) addVeth(hostIf, peer string) error {
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

// Exec runs a command inside the bridge's namespace.
func (b *Bridge) Exec(name string, args ...string) error {
	argv := append([]string{"netns", "exec", b.NS, name}, args...)
	out, err := exec.Command("ip", argv...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("in %s: %s %s: %w: %s", b.NS, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
