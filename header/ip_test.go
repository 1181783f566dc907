package header

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// unhex decodes hex words.
func unhex(tb testing.TB, words ...string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.Join(words, ""))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// ipv4Packet returns an IPv4 header with options opts (a multiple of 4
// bytes) and a valid checksum, followed by payload.
func ipv4Packet(tb testing.TB, ff uint16, proto uint8, opts, payload []byte) []byte {
	tb.Helper()
	ihl := IPv4MinimumSize + len(opts)
	b := make([]byte, ihl+len(payload))
	IPv4(b).Encode(&IPv4Fields{
		TOS: 0x02, TotalLength: uint16(len(b)), ID: 0x1234, FlagsFragmentOffset: ff, TTL: 64, Protocol: proto,
		Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2},
	})
	b[0] = 0x40 | byte(ihl/4)
	copy(b[IPv4MinimumSize:], opts)
	copy(b[ihl:], payload)
	b[10], b[11] = 0, 0
	binary.BigEndian.PutUint16(b[10:12], ^Checksum(b[:ihl]))
	return b
}

// udpDatagram returns a UDP header from src to dst and payload.
func udpDatagram(src, dst uint16, payload []byte) []byte {
	b := make([]byte, UDPMinimumSize+len(payload))
	UDP(b).Encode(&UDPFields{SrcPort: src, DstPort: dst, Length: uint16(len(b))})
	copy(b[UDPMinimumSize:], payload)
	return b
}

// patched returns a copy of b with v written at off.
func patched(b []byte, off int, v ...byte) []byte {
	b = bytes.Clone(b)
	copy(b[off:], v)
	return b
}

// checkCase is a row of a Check table: b is the first segment of a
// packet of size bytes (-1: b is the whole packet), want the error.
type checkCase struct {
	name string
	b    []byte
	size int
	want error
}

// runChecks runs check on each case and holds valid (the IsValid method)
// to it.
func runChecks(t *testing.T, cases []checkCase, check checkFunc, valid validFunc) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b[:len(tc.b):len(tc.b)]
			size := tc.size
			if size < 0 {
				size = len(b)
			}
			if err := check(b, size); err != tc.want {
				t.Fatalf("Check(%d) = %v, want %v", size, err, tc.want)
			}
			if valid(b, size) != (tc.want == nil) {
				t.Errorf("IsValid(%d) = %v, Check %v", size, valid(b, size), tc.want)
			}
		})
	}
}

func TestIPv4Check(t *testing.T) {
	udp := udpDatagram(49152, 4791, []byte("payload"))
	good := ipv4Packet(t, IPv4FlagDontFragment, ProtoUDP, nil, udp)
	opts := ipv4Packet(t, 0, ProtoUDP, []byte{0x94, 4, 0, 0}, udp) // router alert
	runChecks(t, []checkCase{
		{"good", good, -1, nil},
		{"options", opts, -1, nil},
		{"padding after the datagram", append(bytes.Clone(good), 0, 0, 0), -1, nil},
		{"empty", nil, -1, ErrTruncatedIPv4},
		{"short of a header", good[:19], -1, ErrTruncatedIPv4},
		{"version 6", patched(good, 0, 0x65), -1, ErrBadIPv4Header},
		{"ihl 4", patched(good, 0, 0x44), -1, ErrBadIPv4Header},
		{"ihl beyond total", patched(good, 0, 0x4f), -1, ErrBadIPv4Length},
		{"total below header", patched(good, 2, 0, 19), -1, ErrBadIPv4Length},
		{"total beyond packet", patched(good, 2, 0x05, 0xdc), -1, ErrTruncatedIPv4},
		{"options cut", opts[:22], -1, ErrTruncatedIPv4},
		// The first segment of a chained packet.
		{"chain: header in segment", good[:20], len(good), nil},
		{"chain: fixed header split", good[:19], len(good), ErrSplitHeader},
		{"chain: options split", opts[:22], len(opts), ErrSplitHeader},
		{"chain: total beyond packet", patched(good, 2, 0x05, 0xdc)[:20], len(good), ErrTruncatedIPv4},
		{"chain: packet short of a header", good[:10], 19, ErrTruncatedIPv4},
	}, func(b []byte, size int) error { return IPv4(b).Check(size) }, func(b []byte, size int) bool { return IPv4(b).IsValid(size) })
}

// TestIPv4Fields reads headers gopacket wrote, and checks Encode's
// against gopacket's decoding.
func TestIPv4Fields(t *testing.T) {
	for _, ff := range []uint16{0, IPv4FlagDontFragment, IPv4FlagMoreFragments, 185, IPv4FlagMoreFragments | 185} {
		ref := &layers.IPv4{Version: 4, TOS: 0xb8, Id: 0xbeef, TTL: 63, Protocol: layers.IPProtocolTCP,
			Flags: layers.IPv4Flag(ff >> 13), FragOffset: ff & 0x1fff,
			SrcIP: []byte{192, 0, 2, 1}, DstIP: []byte{198, 51, 100, 7},
			Options: []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}}}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			ref, gopacket.Payload("data")); err != nil {
			t.Fatal(err)
		}
		ip := IPv4(buf.Bytes())
		if err := ip.Check(len(ip)); err != nil {
			t.Fatalf("flags %#x: %v", ff, err)
		}
		if ip.HeaderLength() != 24 || ip.TotalLength() != 28 || ip.TOS() != 0xb8 || ip.ID() != 0xbeef || ip.TTL() != 63 ||
			ip.Protocol() != ProtoTCP || ip.FlagsFragmentOffset() != ff || ip.FragmentOffset() != ff&0x1fff ||
			ip.SourceAddress() != netip.MustParseAddr("192.0.2.1") || ip.DestinationAddress() != netip.MustParseAddr("198.51.100.7") ||
			!ip.IsChecksumValid() {
			t.Errorf("flags %#x: fields of %x", ff, []byte(ip))
		}
		if want := ff&0x3fff != 0; ip.IsFragment() != want {
			t.Errorf("flags %#x: IsFragment %v", ff, ip.IsFragment())
		}
		ip[8]-- // TTL
		if ip.IsChecksumValid() {
			t.Errorf("flags %#x: checksum still valid after a change", ff)
		}
	}

	b := make([]byte, IPv4MinimumSize)
	f := IPv4Fields{TOS: 1, TotalLength: 1500, ID: 7, FlagsFragmentOffset: IPv4FlagDontFragment, TTL: 2,
		Protocol: ProtoUDP, Src: [4]byte{10, 1, 2, 3}, Dst: [4]byte{10, 4, 5, 6}}
	IPv4(b).Encode(&f)
	pkt := gopacket.NewPacket(b, layers.LayerTypeIPv4, gopacket.DecodeOptions{SkipDecodeRecovery: true})
	got, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if got == nil || got.IHL != 5 || got.Length != 1500 || got.Id != 7 || got.Flags != layers.IPv4DontFragment ||
		got.TTL != 2 || got.Protocol != layers.IPProtocolUDP || got.SrcIP.String() != "10.1.2.3" || got.DstIP.String() != "10.4.5.6" ||
		!IPv4(b).IsChecksumValid() {
		t.Errorf("Encode wrote %x, gopacket reads %+v", b, got)
	}
}

func TestChecksum(t *testing.T) {
	// RFC 1071 section 3's example: 0001 f203 f4f5 f6f7 sums to ddf2.
	if got := Checksum(unhex(t, "0001f203f4f5f6f7")); got != 0xddf2 {
		t.Errorf("Checksum = %#04x, want 0xddf2", got)
	}
	// An odd length is padded with a zero byte.
	if got := Checksum([]byte{0x01, 0x02, 0x03}); got != 0x0402 {
		t.Errorf("Checksum of odd length = %#04x, want 0x0402", got)
	}
}

// ipv6Packet returns an IPv6 header with next header next and payload.
func ipv6Packet(next uint8, payload []byte) []byte {
	b := make([]byte, IPv6MinimumSize+len(payload))
	IPv6(b).Encode(&IPv6Fields{TrafficClass: 0x28, FlowLabel: 0xabcde, PayloadLength: uint16(len(payload)), NextHeader: next, HopLimit: 64,
		Src: netip.MustParseAddr("fd00::1").As16(), Dst: netip.MustParseAddr("fd00::2").As16()})
	copy(b[IPv6MinimumSize:], payload)
	return b
}

// ext returns an extension header with next header next and n 8-byte
// units (4-byte units for the Authentication Header).
func ext(next uint8, units int, auth bool) []byte {
	n := (units + 1) * 8
	if auth {
		n = (units + 2) * 4
	}
	b := make([]byte, n)
	b[0], b[1] = next, byte(units)
	return b
}

// fragment returns a fragment header with next header next, offset off
// (8-byte units) and the M flag more.
func fragment(next uint8, off uint16, more bool) []byte {
	b := []byte{next, 0, 0, 0, 0, 0, 0, 1}
	ff := off << 3
	if more {
		ff |= 1
	}
	binary.BigEndian.PutUint16(b[2:4], ff)
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func TestIPv6(t *testing.T) {
	udp := udpDatagram(49152, 4791, []byte("x"))
	good := ipv6Packet(ProtoUDP, udp)
	ip := IPv6(good)
	if ip.TrafficClass() != 0x28 || ip.FlowLabel() != 0xabcde || ip.PayloadLength() != len(udp) || ip.NextHeader() != ProtoUDP ||
		ip.HopLimit() != 64 || ip.SourceAddress() != netip.MustParseAddr("fd00::1") || ip.DestinationAddress() != netip.MustParseAddr("fd00::2") {
		t.Errorf("fields of %x", good)
	}
	pkt := gopacket.NewPacket(good, layers.LayerTypeIPv6, gopacket.Default)
	if g, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6); g == nil || g.TrafficClass != 0x28 || g.FlowLabel != 0xabcde ||
		g.Length != uint16(len(udp)) || g.HopLimit != 64 {
		t.Errorf("gopacket reads %+v", g)
	}
	runChecks(t, []checkCase{
		{"good", good, -1, nil},
		{"padding", append(bytes.Clone(good), 0, 0), -1, nil},
		{"short", good[:39], -1, ErrTruncatedIPv6},
		{"version 4", patched(good, 0, 0x45), -1, ErrBadIPv6Header},
		{"payload beyond packet", patched(good, 4, 0x01, 0), -1, ErrTruncatedIPv6},
		{"chain: header split", good[:39], len(good), ErrSplitHeader},
		{"chain: header in segment", good[:40], len(good), nil},
	}, func(b []byte, size int) error { return IPv6(b).Check(size) }, func(b []byte, size int) bool { return IPv6(b).IsValid(size) })
}

func TestIPv6Extensions(t *testing.T) {
	udp := udpDatagram(1, 4791, []byte("data"))
	nine := []byte{}
	for range MaxIPv6ExtHeaders + 1 {
		nine = append(nine, ext(IPv6ExtDestOptions, 0, false)...)
	}
	nine[len(nine)-8] = ProtoUDP
	eight := nine[8:]
	for _, tc := range []struct {
		name  string
		first uint8
		rest  []byte
		want  IPv6Payload
		err   error
	}{
		{"none", ProtoUDP, udp, IPv6Payload{Protocol: ProtoUDP, Offset: 40}, nil},
		{"hop-by-hop, routing, destination options", IPv6ExtHopByHop,
			cat(ext(IPv6ExtRouting, 0, false), ext(IPv6ExtDestOptions, 1, false), ext(ProtoTCP, 0, false), make([]byte, 20)),
			IPv6Payload{Protocol: ProtoTCP, Offset: 40 + 8 + 8 + 16}, nil},
		{"authentication header", IPv6ExtAuth, cat(ext(ProtoUDP, 4, true), udp), IPv6Payload{Protocol: ProtoUDP, Offset: 40 + 24}, nil},
		{"first fragment", IPv6ExtFragment, cat(fragment(ProtoUDP, 0, true), udp),
			IPv6Payload{Protocol: ProtoUDP, Offset: 48, Fragment: true}, nil},
		{"later fragment", IPv6ExtFragment, cat(fragment(ProtoUDP, 185, false), udp),
			IPv6Payload{Protocol: ProtoUDP, Offset: 48, Fragment: true, FragmentOffset: 185}, nil},
		{"atomic fragment", IPv6ExtFragment, cat(fragment(ProtoUDP, 0, false), udp), IPv6Payload{Protocol: ProtoUDP, Offset: 48}, nil},
		{"no next header", IPv6ExtDestOptions, ext(59, 0, false), IPv6Payload{Protocol: 59, Offset: 48}, nil},
		{"eight", IPv6ExtDestOptions, cat(eight, udp), IPv6Payload{Protocol: ProtoUDP, Offset: 40 + 64}, nil},
		{"nine", IPv6ExtDestOptions, cat(nine, udp), IPv6Payload{}, ErrTooManyIPv6ExtHeaders},
		{"hop-by-hop not first", IPv6ExtDestOptions, cat(ext(IPv6ExtHopByHop, 0, false), ext(ProtoUDP, 0, false), udp),
			IPv6Payload{}, ErrBadIPv6ExtHeader},
		{"shorter than 8", IPv6ExtRouting, []byte{17, 0, 0, 0}, IPv6Payload{}, ErrBadIPv6ExtHeader},
		{"overruns the packet", IPv6ExtDestOptions, cat(ext(ProtoUDP, 3, false)[:16]), IPv6Payload{}, ErrBadIPv6ExtHeader},
		{"fragment then overrun", IPv6ExtFragment, cat(fragment(IPv6ExtRouting, 0, true), ext(ProtoUDP, 5, false)[:8]),
			IPv6Payload{Fragment: true}, ErrBadIPv6ExtHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ipv6Packet(tc.first, tc.rest)
			b = b[:len(b):len(b)]
			if err := IPv6(b).Check(len(b)); err != nil {
				t.Fatal(err)
			}
			var p IPv6Payload
			if err := IPv6(b).ParseExtensions(&p); err != tc.err || p != tc.want {
				t.Fatalf("ParseExtensions = %v, %+v; want %v, %+v", err, p, tc.err, tc.want)
			}
			if tc.err != nil {
				return
			}
			// Cut after every byte as the first segment of a chain:
			// the headers parse once they are in it.
			for k := IPv6MinimumSize; k < tc.want.Offset; k++ {
				if err := IPv6(b[:k:k]).ParseExtensions(&p); err != ErrSplitHeader {
					t.Fatalf("first segment of %d bytes, headers end at %d: %v", k, tc.want.Offset, err)
				}
			}
			if err := IPv6(b[:tc.want.Offset]).ParseExtensions(&p); err != nil || p != tc.want {
				t.Fatalf("first segment of %d bytes: %v %+v", tc.want.Offset, err, p)
			}
		})
	}
	if !IsIPv6ExtHeader(IPv6ExtAuth) || IsIPv6ExtHeader(ProtoUDP) || IsIPv6ExtHeader(59) || IsIPv6ExtHeader(255) {
		t.Error("IsIPv6ExtHeader")
	}
}

func TestTransport(t *testing.T) {
	tcp := make([]byte, 24)
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 6800)
	tcp[12] = 6 << 4 // data offset 24
	if h := TCP(tcp); h.SourcePort() != 40000 || h.DestinationPort() != 6800 || h.DataOffset() != 24 {
		t.Errorf("tcp fields of %x", tcp)
	}
	udp := udpDatagram(49152, 4791, []byte("abc"))
	if h := UDP(udp); h.SourcePort() != 49152 || h.DestinationPort() != 4791 || h.Length() != 11 || h.Checksum() != 0 {
		t.Errorf("udp fields of %x", udp)
	}
	t.Run("tcp", func(t *testing.T) {
		runChecks(t, []checkCase{
			{"good", tcp, -1, nil},
			{"with payload", append(bytes.Clone(tcp), 1, 2, 3), -1, nil},
			{"short", tcp[:19], -1, ErrTruncatedTCP},
			{"data offset 4", patched(tcp, 12, 4<<4), -1, ErrBadTCPHeader},
			{"data offset beyond", patched(tcp, 12, 7<<4), -1, ErrBadTCPHeader},
			{"options split", tcp[:20], 24, ErrSplitHeader},
			{"fixed header split", tcp[:10], 24, ErrSplitHeader},
			// Link padding after the segment: b is longer than size.
			{"padded", append(bytes.Clone(tcp), 0, 0), 24, nil},
		}, func(b []byte, size int) error { return TCP(b).Check(size) }, func(b []byte, size int) bool { return TCP(b).IsValid(size) })
	})
	t.Run("udp", func(t *testing.T) {
		runChecks(t, []checkCase{
			{"good", udp, -1, nil},
			{"length below the datagram", patched(udp, 4, 0, 8), -1, nil},
			{"short", udp[:7], -1, ErrTruncatedUDP},
			{"length 7", patched(udp, 4, 0, 7), -1, ErrBadUDPLength},
			{"length beyond", patched(udp, 4, 0, 12), -1, ErrBadUDPLength},
			{"split", udp[:6], 11, ErrSplitHeader},
			{"padded", append(bytes.Clone(udp), 0), 11, nil},
		}, func(b []byte, size int) error { return UDP(b).Check(size) }, func(b []byte, size int) bool { return UDP(b).IsValid(size) })
	})
}

func TestARP(t *testing.T) {
	b := make([]byte, ARPSize)
	f := ARPFields{Op: ARPRequest, SenderHardwareAddr: macSrc, SenderProtocolAddr: [4]byte{10, 0, 0, 1}, TargetProtocolAddr: [4]byte{10, 0, 0, 2}}
	ARP(b).Encode(&f)
	pkt := gopacket.NewPacket(b, layers.LayerTypeARP, gopacket.Default)
	g, _ := pkt.Layer(layers.LayerTypeARP).(*layers.ARP)
	if g == nil || g.AddrType != layers.LinkTypeEthernet || g.Protocol != layers.EthernetTypeIPv4 || g.Operation != layers.ARPRequest ||
		!bytes.Equal(g.SourceHwAddress, macSrc[:]) || !bytes.Equal(g.SourceProtAddress, []byte{10, 0, 0, 1}) ||
		!bytes.Equal(g.DstHwAddress, make([]byte, 6)) || !bytes.Equal(g.DstProtAddress, []byte{10, 0, 0, 2}) {
		t.Fatalf("Encode wrote %x, gopacket reads %+v", b, g)
	}
	a := ARP(b)
	if err := a.Check(len(a)); err != nil || !a.IsEthernetIPv4() || a.Op() != ARPRequest || a.Len() != ARPSize ||
		!bytes.Equal(a.SenderHardwareAddress(), macSrc[:]) || !bytes.Equal(a.SenderProtocolAddress(), []byte{10, 0, 0, 1}) ||
		!bytes.Equal(a.TargetHardwareAddress(), make([]byte, 6)) || !bytes.Equal(a.TargetProtocolAddress(), []byte{10, 0, 0, 2}) {
		t.Fatalf("%x: check %v, fields", b, a.Check(len(a)))
	}
	// Another hardware: 8-byte hardware addresses (EUI-64), IPv4.
	long := unhex(t, "001b", "0800", "08", "04", "0002", "0102030405060708", "0a000001", "1112131415161718", "0a000002")
	if a := ARP(long); a.Check(len(a)) != nil || a.IsEthernetIPv4() || a.Len() != len(long) ||
		!bytes.Equal(a.TargetProtocolAddress(), []byte{10, 0, 0, 2}) || !bytes.Equal(a.TargetHardwareAddress(), long[20:28]) {
		t.Errorf("%x: check %v, fields", long, a.Check(len(a)))
	}
	runChecks(t, []checkCase{
		{"short of the fixed part", b[:7], -1, ErrTruncatedARP},
		{"addresses cut", b[:27], -1, ErrTruncatedARP},
		{"padded", append(bytes.Clone(b), 0, 0), -1, nil},
		{"long addresses", append(bytes.Clone(b[:4]), 200, 4, 0, 1), -1, ErrTruncatedARP},
		{"chain: fixed part split", b[:6], 28, ErrSplitHeader},
		{"chain: addresses split", b[:20], 28, ErrSplitHeader},
		{"chain: addresses beyond the packet", b[:20], 27, ErrTruncatedARP},
	}, func(b []byte, size int) error { return ARP(b).Check(size) }, func(b []byte, size int) bool { return ARP(b).IsValid(size) })
}

func TestNoAllocs(t *testing.T) {
	v4 := ipv4Packet(t, 0, ProtoUDP, []byte{1, 1, 1, 0}, udpDatagram(1, 2, nil))
	v6 := ipv6Packet(IPv6ExtFragment, cat(fragment(ProtoUDP, 0, true), udpDatagram(1, 2, nil)))
	arp := make([]byte, ARPSize)
	ARP(arp).Encode(&ARPFields{Op: ARPReply})
	out := make([]byte, IPv4MinimumSize)
	var p IPv6Payload
	var sink int
	if a := testing.AllocsPerRun(1000, func() {
		ip := IPv4(v4)
		if ip.Check(len(ip)) != nil || !ip.IsValid(len(ip)) || !ip.IsChecksumValid() || UDP(ip[ip.HeaderLength():]).Check(8) != nil {
			t.Fatal("v4")
		}
		sink += int(ip.SourceAddress().As4()[0])
		ip6 := IPv6(v6)
		if ip6.Check(len(ip6)) != nil || ip6.ParseExtensions(&p) != nil {
			t.Fatal("v6")
		}
		sink += int(ip6.DestinationAddress().As16()[0])
		if ARP(arp).Check(len(arp)) != nil {
			t.Fatal("arp")
		}
		IPv4(out).Encode(&IPv4Fields{TotalLength: 28})
	}); a != 0 {
		t.Errorf("%v allocations", a)
	}
	_ = sink
}
