//go:build linux

package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
)

// Network namespace helpers give tests a kernel peer on the far side of a
// veth pair: DPDK's net_af_packet binds to the end left in the root
// namespace, and the test talks from (or lets the kernel answer from) the
// end inside a namespace of its own. Nothing is ever routed: the host end
// has no address, IPv6 and forwarding are off on it, so frames from the
// namespace cannot leave through any other interface.

// RequireRoot skips the test unless it runs as root with the ip (iproute2)
// and ethtool commands available.
func RequireRoot(t harness.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("testenv: needs root for network namespaces")
	}
	harness.RequireCommands(t, "testenv: iproute2, ethtool", "ip", "ethtool")
}

// VethNS is a network namespace joined to the root namespace by a veth
// pair.
type VethNS struct {
	// NS is the namespace name, as in `ip netns exec NS`.
	NS string
	// HostIf is the veth end in the root namespace: up, promiscuous,
	// without addresses, ARP, IPv6 or forwarding.
	HostIf    string
	HostIndex int
	HostMAC   net.HardwareAddr
	// PeerIf is the veth end inside NS, up, with PeerAddr if that is
	// valid, and with checksum and segmentation offloads off so the
	// namespace's stack sends complete, MTU-sized frames and verifies the
	// checksums of what it receives.
	PeerIf    string
	PeerIndex int
	PeerMAC   net.HardwareAddr
	PeerAddr  netip.Prefix

	mu    sync.Mutex
	socks []*PacketSocket // closed by the test's cleanup
}

// NewVethNS creates a namespace "cdd-XXXXXX" and a veth pair "cddh-XXXXXX"
// (root namespace) / "cddp-XXXXXX" (inside it), with a random suffix, and
// registers a cleanup that removes both even if the test fails or panics.
//
// If peerAddr is valid it is assigned to the peer end. IPv6 is disabled on
// the peer end unless peerAddr is an IPv6 prefix, so that the kernel sends
// no unsolicited router solicitations or MLD reports; with an IPv6 address
// it still sends MLD reports for the address's solicited-node group.
// NewVethNS skips the test when not root (see RequireRoot).
func NewVethNS(t harness.TB, peerAddr netip.Prefix) *VethNS {
	t.Helper()
	RequireRoot(t)
	suffix := netcmd.Suffix(t)
	v := &VethNS{
		NS:       "cdd-" + suffix,
		HostIf:   "cddh-" + suffix,
		PeerIf:   "cddp-" + suffix,
		PeerAddr: peerAddr,
	}
	// Registered before anything exists so that a failure half way
	// through still cleans up; destroy skips what is missing.
	t.Cleanup(func() {
		if err := v.destroy(); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	if err := v.create(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return v
}

// HostAddr makes the root end an ordinary kernel interface with the
// address addr, as a node's NIC is: ARP on, not promiscuous (NewVethNS
// leaves it deaf, for DPDK).
func (v *VethNS) HostAddr(addr netip.Prefix) error {
	if err := netcmd.IP("link", "set", "dev", v.HostIf, "arp", "on", "promisc", "off"); err != nil {
		return err
	}
	return netcmd.IP("addr", "add", addr.String(), "dev", v.HostIf)
}

func (v *VethNS) nsPath() string { return "/run/netns/" + v.NS }

func (v *VethNS) create() error {
	if err := netcmd.IP("netns", "add", v.NS); err != nil {
		return err
	}
	if err := netcmd.IP("link", "add", v.HostIf, "type", "veth", "peer", "name", v.PeerIf, "netns", v.NS); err != nil {
		return err
	}

	if err := deafen(v.HostIf); err != nil {
		return err
	}

	v6 := v.PeerAddr.IsValid() && v.PeerAddr.Addr().Is6()
	if err := v.Do(func() error {
		if !v6 {
			return netcmd.WriteSysctl("/proc/sys/net/ipv6/conf/"+v.PeerIf+"/disable_ipv6", "1")
		}
		return nil
	}); err != nil {
		return err
	}
	if v6 {
		// No link-local address: no DAD or router solicitations.
		if err := netcmd.IP("-n", v.NS, "link", "set", "dev", v.PeerIf, "addrgenmode", "none"); err != nil {
			return err
		}
	}
	// Offloads off on the peer end: veth would otherwise hand the host end
	// frames with unfinished checksums and 64 KiB GSO frames from the
	// namespace's TCP. Receive checksum offload goes too, so that no
	// kernel version takes frames from the host end as already verified.
	if out, err := exec.Command("ip", "netns", "exec", v.NS, "ethtool", "-K", v.PeerIf,
		"rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off").CombinedOutput(); err != nil {
		return fmt.Errorf("ethtool -K %s: %w: %s", v.PeerIf, err, bytes.TrimSpace(out))
	}
	if err := netcmd.IP("-n", v.NS, "link", "set", "dev", "lo", "up"); err != nil {
		return err
	}
	if err := netcmd.IP("-n", v.NS, "link", "set", "dev", v.PeerIf, "up"); err != nil {
		return err
	}
	if v.PeerAddr.IsValid() {
		args := []string{"-n", v.NS, "addr", "add", v.PeerAddr.String(), "dev", v.PeerIf}
		if v6 {
			args = append(args, "nodad")
		}
		if err := netcmd.IP(args...); err != nil {
			return err
		}
	}

	host, err := net.InterfaceByName(v.HostIf)
	if err != nil {
		return fmt.Errorf("look up %s: %w", v.HostIf, err)
	}
	v.HostIndex, v.HostMAC = host.Index, host.HardwareAddr
	return v.Do(func() error {
		peer, err := net.InterfaceByName(v.PeerIf)
		if err != nil {
			return fmt.Errorf("look up %s in %s: %w", v.PeerIf, v.NS, err)
		}
		v.PeerIndex, v.PeerMAC = peer.Index, peer.HardwareAddr
		return nil
	})
}

// destroy closes the sockets the test left open and deletes the veth pair
// and the namespace, skipping whatever does not exist.
func (v *VethNS) destroy() error {
	v.mu.Lock()
	socks := v.socks
	v.socks = nil
	v.mu.Unlock()
	var errs []error
	for _, s := range socks {
		if err := s.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, err)
		}
	}
	// Deleting the host end removes both ends at once, even while a socket
	// elsewhere still holds the namespace alive.
	if _, err := net.InterfaceByName(v.HostIf); err == nil {
		if err := netcmd.IP("link", "del", "dev", v.HostIf); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Stat(v.nsPath()); err == nil {
		if err := netcmd.IP("netns", "del", v.NS); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Do runs f on an OS thread that has joined the namespace, and returns its
// error. Sockets f opens (net.Listen, net.Dial, raw sockets) belong to the
// namespace and stay there after f returns. f must not start goroutines that
// expect to be in the namespace: only its own thread is.
func (v *VethNS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := inNetns(v.nsPath(), f)
		if restored {
			runtime.UnlockOSThread()
		}
		// Otherwise the thread is still in the test namespace: leaving it
		// locked makes the runtime destroy it when this goroutine exits,
		// instead of handing it to other goroutines.
		errc <- err
	}()
	return <-errc
}

// inNetns runs f with the calling (locked) thread in the network namespace
// at path, then moves the thread back. restored reports whether the thread
// is back in its original namespace.
func inNetns(path string, f func() error) (restored bool, err error) {
	orig, err := syscall.Open("/proc/thread-self/ns/net", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return true, fmt.Errorf("open own network namespace: %w", err)
	}
	defer syscall.Close(orig)
	target, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return true, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer syscall.Close(target)
	if err := setns(target); err != nil {
		return true, fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	ferr := f()
	if err := setns(orig); err != nil {
		return false, errors.Join(ferr, fmt.Errorf("leave network namespace %s: %w", path, err))
	}
	return true, ferr
}

func setns(fd int) error {
	if _, _, errno := syscall.RawSyscall(sysSetns, uintptr(fd), syscall.CLONE_NEWNET, 0); errno != 0 {
		return errno
	}
	return nil
}

// ListenPeer opens a packet socket on PeerIf inside the namespace. The
// socket is closed when the test ends if the caller has not closed it.
func (v *VethNS) ListenPeer() (*PacketSocket, error) {
	var s *PacketSocket
	err := v.Do(func() error {
		var err error
		s, err = openPacketSocket(v.PeerIf, v.PeerIndex)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: namespace %s: %w", v.NS, err)
	}
	v.track(s)
	return s, nil
}

// ListenHost opens a packet socket on HostIf in the root namespace, next to
// whatever (DPDK's net_af_packet, say) is bound there. The socket is closed
// when the test ends if the caller has not closed it.
func (v *VethNS) ListenHost() (*PacketSocket, error) {
	s, err := openPacketSocket(v.HostIf, v.HostIndex)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	v.track(s)
	return s, nil
}

func (v *VethNS) track(s *PacketSocket) {
	v.mu.Lock()
	v.socks = append(v.socks, s)
	v.mu.Unlock()
}

// SendFrames sends raw Ethernet frames out of PeerIf, so that they arrive at
// HostIf.
func (v *VethNS) SendFrames(frames [][]byte) error {
	s, err := v.ListenPeer()
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Send(frames)
}

// Exec runs a command inside the namespace and returns its combined
// output.
func (v *VethNS) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{"netns", "exec", v.NS, name}, args...)
	out, err := exec.CommandContext(ctx, "ip", argv...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("testenv: in %s: %s %s: %w", v.NS, name, strings.Join(args, " "), err)
	}
	return out, nil
}

// Recv returns up to max frames arriving at PeerIf before ctx is done (see
// PacketSocket.Recv). Frames that arrive before Recv has opened its socket
// are missed: to capture a reply to something sent, open ListenPeer first.
func (v *VethNS) Recv(ctx context.Context, max int) ([][]byte, error) {
	s, err := v.ListenPeer()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Recv(ctx, max)
}

// deafen readies a root-namespace interface for DPDK's net_af_packet
// alone: no IPv6 (no link-local address, DAD or router solicitations), no
// IPv4 forwarding (frames arriving on it must never be routed out of the
// box), no ARP; promiscuous and up.
func deafen(ifname string) error {
	for _, s := range []struct{ path, value string }{
		{"/proc/sys/net/ipv6/conf/" + ifname + "/disable_ipv6", "1"},
		{"/proc/sys/net/ipv4/conf/" + ifname + "/forwarding", "0"},
	} {
		if err := netcmd.WriteSysctl(s.path, s.value); err != nil {
			return err
		}
	}
	return netcmd.IP("link", "set", "dev", ifname, "arp", "off", "promisc", "on", "up")
}

// NewVethPair creates a veth pair "cdda-XXXXXX"/"cddb-XXXXXX" in the root
// namespace, both ends deaf to the kernel (see deafen), for two DPDK
// net_af_packet ports of one process to talk over, and removes it when
// the test ends.
func NewVethPair(t harness.TB) (a, b string) {
	t.Helper()
	RequireRoot(t)
	sfx := netcmd.Suffix(t)
	a, b = "cdda-"+sfx, "cddb-"+sfx
	t.Cleanup(func() {
		if _, err := net.InterfaceByName(a); err == nil {
			if err := netcmd.IP("link", "del", "dev", a); err != nil {
				t.Errorf("testenv: %v", err)
			}
		}
	})
	if err := netcmd.IP("link", "add", a, "type", "veth", "peer", "name", b); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for _, ifname := range []string{a, b} {
		if err := deafen(ifname); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		// Full-size frames only, as on a wire.
		if out, err := exec.Command("ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off").CombinedOutput(); err != nil {
			t.Fatalf("testenv: ethtool -K %s: %v: %s", ifname, err, bytes.TrimSpace(out))
		}
	}
	return a, b
}
