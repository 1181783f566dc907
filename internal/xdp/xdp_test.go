package xdp

import (
	"errors"
	"golang.org/x/sys/unix"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

const xdpPass = 2

var (
	roceAddr  = netip.MustParseAddr("10.9.8.7")
	otherAddr = netip.MustParseAddr("10.9.8.6")
)

// load attaches the program in generic mode to a new veth (see newLink)
// and detaches it when the test ends.
func load(t *testing.T) (*Program, *link) {
	t.Helper()
	return loadMode(t, Generic, "")
}

// loadMode attaches the program to a new link in mode m, through a link
// pinned at pin if that is set.
func loadMode(t *testing.T, m Mode, pin string) (*Program, *link) {
	t.Helper()
	if err := requireBPF(); err != nil {
		t.Fatal(err)
	}
	obj, err := Object()
	if err != nil {
		t.Fatal(err)
	}
	l := newLink(t)
	p, err := Attach(pmd.LoadXDP, obj, l.hostIndex, m, pin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		if pin != "" {
			Unpin(pin, l.hostIndex)
		} else {
			Detach(l.hostIndex, m)
		}
	})
	return p, l
}

// bpffs mounts a BPF file system of the test's own, unmounted when it
// ends: the machine's /sys/fs/bpf may have none, and is not the test's.
func bpffs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Fatalf("mount bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if !IsBPFFS(dir) {
		t.Fatalf("%s: not a BPF file system after mounting one", dir)
	}
	return dir
}

// frame builds an Ethernet frame: vlans tags, then an IPv4 packet with
// a UDP or TCP header to dst:port and a small payload.
func frame(t *testing.T, vlans []layers.EthernetType, dst netip.Addr, proto layers.IPProtocol, port int, frag bool) []byte {
	t.Helper()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	eth := &layers.Ethernet{SrcMAC: mac, DstMAC: mac, EthernetType: layers.EthernetTypeIPv4}
	ls := []gopacket.SerializableLayer{eth}
	if len(vlans) > 0 {
		eth.EthernetType = vlans[0]
		for i := range vlans {
			next := layers.EthernetTypeIPv4
			if i+1 < len(vlans) {
				next = vlans[i+1]
			}
			ls = append(ls, &layers.Dot1Q{VLANIdentifier: uint16(100 + i), Type: next})
		}
	}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto,
		SrcIP: net.IP{10, 9, 8, 1}, DstIP: net.IP(dst.AsSlice())}
	if frag {
		ip.Flags = layers.IPv4MoreFragments
	}
	ls = append(ls, ip)
	switch proto {
	case layers.IPProtocolUDP:
		udp := &layers.UDP{SrcPort: 49152, DstPort: layers.UDPPort(port)}
		udp.SetNetworkLayerForChecksum(ip)
		ls = append(ls, udp)
	case layers.IPProtocolTCP:
		tcp := &layers.TCP{SrcPort: 49152, DstPort: layers.TCPPort(port), SYN: true, Window: 1024}
		tcp.SetNetworkLayerForChecksum(ip)
		ls = append(ls, tcp)
	}
	ls = append(ls, gopacket.Payload(make([]byte, 64)))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func arpFrame(t *testing.T) []byte {
	t.Helper()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
		&layers.Ethernet{SrcMAC: mac, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: mac, SourceProtAddress: []byte{10, 9, 8, 1},
			DstHwAddress: make([]byte, 6), DstProtAddress: roceAddr.AsSlice()})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReasons runs the program on frames (BPF_PROG_TEST_RUN) and checks
// that each passes to the kernel, counted under its reason. No socket is
// bound, so RoCE to the address counts as no_socket: the fallback that
// keeps the node's traffic independent of the daemon.
func TestReasons(t *testing.T) {
	p, l := load(t)
	// Down, the interface feeds the program nothing of its own: only the
	// test's frames are counted.
	if err := netcmd.IP("link", "set", l.host, "down"); err != nil {
		t.Fatal(err)
	}
	udp, tcp := layers.IPProtocolUDP, layers.IPProtocolTCP
	q, ad := layers.EthernetTypeDot1Q, layers.EthernetTypeQinQ
	roce := frame(t, nil, roceAddr, udp, 4791, false)

	// Before an address is set, nothing is RoCE of ours.
	run(t, p, "unconfigured", roce, PassUnconfigured)
	if err := p.SetAddress(roceAddr); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  Reason
	}{
		{"roce", roce, PassNoSocket},
		{"roce vlan", frame(t, []layers.EthernetType{q}, roceAddr, udp, 4791, false), PassNoSocket},
		{"roce qinq", frame(t, []layers.EthernetType{ad, q}, roceAddr, udp, 4791, false), PassNoSocket},
		{"roce three tags", frame(t, []layers.EthernetType{ad, q, q}, roceAddr, udp, 4791, false), PassNotIPv4},
		{"roce to another address", frame(t, nil, otherAddr, udp, 4791, false), PassOtherAddress},
		{"udp other port", frame(t, nil, roceAddr, udp, 4792, false), PassNotRoCE},
		{"tcp to 4791", frame(t, nil, roceAddr, tcp, 4791, false), PassNotRoCE},
		{"ceph msgr2", frame(t, []layers.EthernetType{q}, roceAddr, tcp, 3300, false), PassNotRoCE},
		{"fragment", frame(t, nil, roceAddr, udp, 4791, true), PassFragment},
		{"arp", arpFrame(t), PassNotIPv4},
		{"short ip", roce[:14+12], PassMalformed},
		{"short udp", roce[:14+20+4], PassMalformed},
		{"short vlan", frame(t, []layers.EthernetType{q}, roceAddr, udp, 4791, false)[:16], PassMalformed},
	} {
		run(t, p, tc.name, tc.frame, tc.want)
	}
}

func run(t *testing.T, p *Program, name string, frame []byte, want Reason) {
	t.Helper()
	before, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	ret, err := p.prog.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	after, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if ret != xdpPass {
		t.Errorf("%s: action %d, want XDP_PASS", name, ret)
	}
	for r := Reason(0); r < NumReasons; r++ {
		d := after[r] - before[r]
		if want := map[bool]uint64{true: 1}[r == want]; d != want {
			t.Errorf("%s: %s counted %d, want %d", name, r, d, want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mode
		err  bool
	}{{"native", Native, false}, {"generic", Generic, false}, {"skb", 0, true}, {"", 0, true}} {
		m, err := ParseMode(tc.in)
		if m != tc.want || (err != nil) != tc.err {
			t.Errorf("ParseMode(%q) = %v, %v", tc.in, m, err)
		}
		if err == nil && m.String() != tc.in {
			t.Errorf("%v.String() = %q", m, m.String())
		}
	}
}

func TestSetAddressRefusesIPv6(t *testing.T) {
	p, _ := load(t)
	if err := p.SetAddress(netip.MustParseAddr("fd00::1")); err == nil {
		t.Fatal("SetAddress took an IPv6 address")
	}
}

// foreign loads an XDP program that is not ours (it passes everything).
func foreign(t *testing.T) *ebpf.Program {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "not_cephdpdkd", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, xdpPass, asm.DWord), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

func TestOpenRefusesForeign(t *testing.T) {
	prog := foreign(t)
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	_, err = Open(uint32(id))
	var fe *ForeignError
	if !errors.As(err, &fe) || fe.ID != uint32(id) || fe.Name != "not_cephdpdkd" {
		t.Fatalf("Open(foreign) = %v, want a ForeignError naming it", err)
	}
}
