//go:build linux

package testenv

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/cephdpdkd/cephdpdkd/internal/trafficgen"
)

func TestNewVethNS(t *testing.T) {
	tests := []struct {
		name     string
		peer     netip.Prefix
		wantAddr string // in `ip addr show` inside the namespace
		ipv6Off  string
	}{
		{"ipv4", netip.MustParsePrefix("10.99.0.2/24"), "inet 10.99.0.2/24", "1"},
		{"ipv6", netip.MustParsePrefix("fd99::2/64"), "inet6 fd99::2/64", "0"},
		{"no address", netip.Prefix{}, "", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVethNS(t, tt.peer)
			for _, name := range []string{v.NS, v.HostIf, v.PeerIf} {
				if len(name) > 15 || !strings.HasPrefix(name, "cdd") {
					t.Errorf("name %q", name)
				}
			}
			host, err := net.InterfaceByName(v.HostIf)
			if err != nil {
				t.Fatal(err)
			}
			if host.Flags&net.FlagUp == 0 || host.Index != v.HostIndex || !bytes.Equal(host.HardwareAddr, v.HostMAC) {
				t.Errorf("host end %+v, VethNS %+v", host, v)
			}
			if addrs, err := host.Addrs(); err != nil || len(addrs) != 0 {
				t.Errorf("host end addresses %v, %v; want none", addrs, err)
			}
			if len(v.PeerMAC) != 6 || bytes.Equal(v.PeerMAC, v.HostMAC) {
				t.Errorf("peer MAC %v, host MAC %v", v.PeerMAC, v.HostMAC)
			}
			for path, want := range map[string]string{
				"/proc/sys/net/ipv6/conf/" + v.HostIf + "/disable_ipv6": "1",
				"/proc/sys/net/ipv4/conf/" + v.HostIf + "/forwarding":   "0",
			} {
				if got, err := os.ReadFile(path); err != nil || strings.TrimSpace(string(got)) != want {
					t.Errorf("%s = %q, %v; want %s", path, got, err, want)
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := v.Exec(ctx, "ip", "-o", "addr", "show", "dev", v.PeerIf)
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if tt.wantAddr != "" && !strings.Contains(string(out), tt.wantAddr) {
				t.Errorf("peer addresses lack %q:\n%s", tt.wantAddr, out)
			}
			if tt.wantAddr == "" && strings.Contains(string(out), "inet") {
				t.Errorf("peer has an address:\n%s", out)
			}
			out, err = v.Exec(ctx, "cat", "/proc/sys/net/ipv6/conf/"+v.PeerIf+"/disable_ipv6")
			if err != nil || strings.TrimSpace(string(out)) != tt.ipv6Off {
				t.Errorf("peer disable_ipv6 = %q, %v; want %s", out, err, tt.ipv6Off)
			}
			// The namespace sees its own interfaces only.
			out, err = v.Exec(ctx, "ip", "-o", "link", "show")
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if lines := strings.Count(strings.TrimSpace(string(out)), "\n") + 1; lines != 2 || !strings.Contains(string(out), v.PeerIf+"@") {
				t.Errorf("namespace links:\n%s", out)
			}
		})
	}
}

func TestExecError(t *testing.T) {
	v := NewVethNS(t, netip.Prefix{})
	out, err := v.Exec(context.Background(), "sh", "-c", "echo oops; exit 3")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || strings.TrimSpace(string(out)) != "oops" {
		t.Errorf("Exec = %q, %v; want output oops and exit status 3", out, err)
	}
}

// TestCleanup checks that the namespace, both veth ends and any socket left
// open are gone once the test that made them ends.
func TestCleanup(t *testing.T) {
	var v *VethNS
	var sock *PacketSocket
	t.Run("create", func(t *testing.T) {
		v = NewVethNS(t, netip.MustParsePrefix("10.99.0.2/24"))
		var err error
		if sock, err = v.ListenPeer(); err != nil {
			t.Fatal(err)
		}
	})
	if v == nil {
		t.Fatal("subtest created nothing")
	}
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	if strings.Contains(string(out), v.NS) {
		t.Errorf("namespace %s survives cleanup:\n%s", v.NS, out)
	}
	if _, err := os.Stat(v.nsPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s: %v", v.nsPath(), err)
	}
	if _, err := net.InterfaceByName(v.HostIf); err == nil {
		t.Errorf("%s survives cleanup", v.HostIf)
	}
	if err := sock.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("socket left open survives cleanup: Close = %v", err)
	}
	if err := v.destroy(); err != nil {
		t.Errorf("second destroy: %v", err)
	}
}

func frameData(frames []trafficgen.Frame) [][]byte {
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = f.Data
	}
	return out
}

// TestFramesCrossIntact sends generated frames (tagged, IPv6, fragments,
// runts) across the pair in both directions and checks every byte arrives
// in order.
func TestFramesCrossIntact(t *testing.T) {
	v := NewVethNS(t, netip.MustParsePrefix("10.99.0.2/24"))
	mixed := frameData(trafficgen.Generate(5, 300, trafficgen.DefaultMix()))
	tagged := frameData(trafficgen.Generate(6, 100, trafficgen.Mix{
		Weights: map[trafficgen.Kind]int{trafficgen.RoCEv2: 1, trafficgen.OSD: 1},
		VLAN:    1,
	}))
	sample := frameData(trafficgen.Generate(trafficgen.SampleSeed, trafficgen.SampleFrames, trafficgen.DefaultMix()))
	tests := []struct {
		name     string
		frames   [][]byte
		fromPeer bool
	}{
		{"peer to host", mixed, true},
		{"host to peer", mixed, false},
		{"tagged peer to host", tagged, true},
		{"tagged host to peer", tagged, false},
		{"sample burst peer to host", sample, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			listen, send := v.ListenHost, v.ListenPeer
			if !tt.fromPeer {
				listen, send = v.ListenPeer, v.ListenHost
			}
			rx, err := listen()
			if err != nil {
				t.Fatal(err)
			}
			defer rx.Close()
			tx, err := send()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Close()
			if err := tx.Send(tt.frames); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := rx.Recv(ctx, len(tt.frames))
			if err != nil {
				t.Fatalf("received %d of %d frames: %v", len(got), len(tt.frames), err)
			}
			for i := range got {
				if !bytes.Equal(got[i], tt.frames[i]) {
					t.Fatalf("frame %d differs:\n got % x\nwant % x", i, got[i], tt.frames[i])
				}
			}
		})
	}
}

// TestSendFramesRecv exercises the one-shot helpers: frames sent with
// SendFrames reach the host end; Recv sees frames the host end sends.
func TestSendFramesRecv(t *testing.T) {
	v := NewVethNS(t, netip.Prefix{})
	frames := frameData(trafficgen.Generate(8, 20, trafficgen.DefaultMix()))
	host, err := v.ListenHost()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.SendFrames(frames); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := host.Recv(ctx, len(frames))
	if err != nil || len(got) != len(frames) || !bytes.Equal(got[0], frames[0]) {
		t.Fatalf("host received %d of %d frames: %v", len(got), len(frames), err)
	}

	// Recv opens its socket when called: keep sending until it sees one.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if err := host.Send(frames[:1]); err != nil {
					return
				}
			}
		}
	}()
	got, err = v.Recv(ctx, 1)
	close(stop)
	<-stopped
	if err != nil || len(got) != 1 || !bytes.Equal(got[0], frames[0]) {
		t.Fatalf("Recv = %d frames, %v", len(got), err)
	}

	// Nothing else arrives at either end: with IPv6 off on both, the
	// kernel sends no router solicitations, DAD or MLD of its own.
	quiet, cancelQuiet := context.WithTimeout(context.Background(), time.Second)
	defer cancelQuiet()
	hostExtra := make(chan [][]byte, 1)
	go func() {
		extra, _ := host.Recv(quiet, 1)
		hostExtra <- extra
	}()
	if extra, err := v.Recv(quiet, 1); len(extra) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unexpected traffic at the peer: %d frames, %v", len(extra), err)
	}
	if extra := <-hostExtra; len(extra) != 0 {
		t.Errorf("unexpected frame at the host end: % x", extra[0])
	}
}

func TestRecvHonoursContext(t *testing.T) {
	v := NewVethNS(t, netip.Prefix{})
	s, err := v.ListenHost()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	got, err := s.Recv(ctx, 1)
	if len(got) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Recv on a quiet link = %d frames, %v", len(got), err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Recv took %v past a 150ms deadline", d)
	}

	// Close unblocks a pending Recv.
	errc := make(chan error, 1)
	go func() {
		_, err := s.Recv(context.Background(), 1)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("Recv on a closed socket returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv did not return after Close")
	}
}

// TestKernelPeer checks the namespace's kernel answers as a peer should: an
// ARP request for its address and then a ping, both sent on the host end
// as the node 10.99.0.1 would.
func TestKernelPeer(t *testing.T) {
	v := NewVethNS(t, netip.MustParsePrefix("10.99.0.2/24"))
	host, err := v.ListenHost()
	if err != nil {
		t.Fatal(err)
	}
	nodeMAC, nodeIP, peerIP := trafficgen.NodeMAC(), trafficgen.NodeIPv4(), netip.MustParseAddr("10.99.0.2")
	serialize := func(ls ...gopacket.SerializableLayer) []byte {
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	arpRequest := serialize(
		&layers.Ethernet{SrcMAC: nodeMAC, DstMAC: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: nodeMAC, SourceProtAddress: nodeIP.AsSlice(),
			DstHwAddress: make(net.HardwareAddr, 6), DstProtAddress: peerIP.AsSlice(),
		})
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: nodeIP.AsSlice(), DstIP: peerIP.AsSlice()}
	ping := serialize(
		&layers.Ethernet{SrcMAC: nodeMAC, DstMAC: v.PeerMAC, EthernetType: layers.EthernetTypeIPv4}, ip,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 7, Seq: 1},
		gopacket.Payload("cephdpdkd"))

	tests := []struct {
		name  string
		frame []byte
		reply func(gopacket.Packet) bool
	}{
		{"arp", arpRequest, func(p gopacket.Packet) bool {
			arp, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
			return ok && arp.Operation == layers.ARPReply &&
				bytes.Equal(arp.SourceHwAddress, v.PeerMAC) && bytes.Equal(arp.SourceProtAddress, peerIP.AsSlice()) &&
				bytes.Equal(arp.DstHwAddress, nodeMAC)
		}},
		{"ping", ping, func(p gopacket.Packet) bool {
			icmp, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
			return ok && icmp.TypeCode.Type() == layers.ICMPv4TypeEchoReply && icmp.Id == 7 &&
				string(icmp.Payload) == "cephdpdkd"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := host.Send([][]byte{tt.frame}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for {
				got, err := host.Recv(ctx, 1)
				if err != nil {
					t.Fatalf("no reply: %v", err)
				}
				if p := gopacket.NewPacket(got[0], layers.LayerTypeEthernet, gopacket.Default); tt.reply(p) {
					return
				}
			}
		})
	}
}

// kernelPeer returns a namespace at 10.99.0.2/24 whose kernel, the peer,
// sends to the node (trafficgen's MAC at 10.99.0.1) without asking by
// ARP, which the node has no kernel to answer, and a socket on the host
// end that sees what it sends.
func kernelPeer(ctx context.Context, t *testing.T) (*VethNS, *PacketSocket) {
	t.Helper()
	v := NewVethNS(t, netip.MustParsePrefix("10.99.0.2/24"))
	if out, err := v.Exec(ctx, "ip", "neigh", "replace", "10.99.0.1", "lladdr", trafficgen.NodeMAC().String(), "dev", v.PeerIf); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	host, err := v.ListenHost()
	if err != nil {
		t.Fatal(err)
	}
	return v, host
}

// TestKernelPeerVerifiesChecksums checks that the kernel peer drops a frame
// with a bad checksum, so tests can rely on it to catch checksum bugs in
// frames built in userspace: a ping with a broken ICMP checksum gets no
// reply, while the good ping sent after it does.
func TestKernelPeerVerifiesChecksums(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, host := kernelPeer(ctx, t)
	ping := func(id uint16) []byte {
		buf := gopacket.NewSerializeBuffer()
		err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: trafficgen.NodeMAC(), DstMAC: v.PeerMAC, EthernetType: layers.EthernetTypeIPv4},
			&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4,
				SrcIP: trafficgen.NodeIPv4().AsSlice(), DstIP: net.IPv4(10, 99, 0, 2)},
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: id, Seq: 1},
			gopacket.Payload("cephdpdkd"))
		if err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	bad := ping(8)
	bad[14+20+2] ^= 0xff // ICMP checksum
	if err := host.Send([][]byte{bad, ping(9)}); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := host.Recv(ctx, 1)
		if err != nil {
			t.Fatalf("no reply to the good ping: %v", err)
		}
		p := gopacket.NewPacket(got[0], layers.LayerTypeEthernet, gopacket.Default)
		icmp, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		if !ok || icmp.TypeCode.Type() != layers.ICMPv4TypeEchoReply {
			continue
		}
		if icmp.Id == 8 {
			t.Fatal("the kernel peer answered a ping with a bad checksum")
		}
		if icmp.Id == 9 {
			return
		}
	}
}

func netnsLink(t *testing.T) string {
	t.Helper()
	l, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestInNetnsRestoresThread checks that the calling thread is inside the
// namespace only while f runs, and that f's error comes back.
func TestInNetnsRestoresThread(t *testing.T) {
	v := NewVethNS(t, netip.Prefix{})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := netnsLink(t)
	var inside string
	errF := errors.New("from f")
	restored, err := inNetns(v.nsPath(), func() error {
		inside = netnsLink(t)
		return errF
	})
	if !restored || !errors.Is(err, errF) {
		t.Fatalf("inNetns = %v, %v", restored, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(v.nsPath(), &st); err != nil {
		t.Fatal(err)
	}
	if want := "net:[" + strconv.FormatUint(st.Ino, 10) + "]"; inside != want {
		t.Errorf("inside f the thread is in %s, want %s", inside, want)
	}
	if after := netnsLink(t); after != before {
		t.Errorf("thread left in %s, started in %s", after, before)
	}

	if err := (&VethNS{NS: "cdd-missing"}).Do(func() error { return nil }); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Do in a missing namespace: %v", err)
	}
}

// TestKernelPeerChecksums checks that datagrams and segments the
// namespace's own stack sends reach the host end with complete checksums
// and at most MTU size, not as checksum-offloaded or GSO frames.
func TestKernelPeerChecksums(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, host := kernelPeer(ctx, t)
	var udp net.Conn
	// Every socket is made on Do's thread, inside the namespace: a socket
	// made anywhere else would route 10.99.0.1 out of the box.
	err := v.Do(func() error {
		var err error
		if udp, err = net.Dial("udp4", "10.99.0.1:4791"); err != nil {
			return err
		}
		// Nobody answers the SYN: the dial times out, having sent it.
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		if c, err := d.Dial("tcp4", "10.99.0.1:6800"); err == nil {
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	if _, err := udp.Write(bytes.Repeat([]byte("ceph"), 100)); err != nil {
		t.Fatal(err)
	}
	seen := map[gopacket.LayerType]bool{}
	for !seen[layers.LayerTypeUDP] || !seen[layers.LayerTypeTCP] {
		got, err := host.Recv(ctx, 1)
		if err != nil {
			t.Fatalf("saw %v: %v", seen, err)
		}
		p := gopacket.NewPacket(got[0], layers.LayerTypeEthernet, gopacket.Default)
		ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if !ok || p.TransportLayer() == nil {
			continue
		}
		if len(got[0]) > 1514 {
			t.Errorf("%d-byte frame", len(got[0]))
		}
		tl := p.TransportLayer()
		if sum := l4Checksum(ip, ip.Payload); sum != 0 {
			t.Errorf("%v from the kernel peer has a bad checksum (residue %#04x)", tl.LayerType(), sum)
		}
		seen[tl.LayerType()] = true
	}
}

// l4Checksum returns the Internet checksum of an IPv4 TCP or UDP segment
// under its pseudo-header: zero when the segment's checksum is right.
func l4Checksum(ip *layers.IPv4, seg []byte) uint16 {
	b := append(append([]byte{}, ip.SrcIP.To4()...), ip.DstIP.To4()...)
	b = append(b, 0, byte(ip.Protocol), byte(len(seg)>>8), byte(len(seg)))
	b = append(b, seg...)
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
