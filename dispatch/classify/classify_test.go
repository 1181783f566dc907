package classify

import (
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/cephdpdkd/cephdpdkd/header"
)

var (
	macA = net.HardwareAddr{0x52, 0x54, 0x00, 0x77, 0x00, 0x11}
	macB = net.HardwareAddr{0x52, 0x54, 0x00, 0x77, 0x00, 0x12}

	ip4A = netip.MustParseAddr("10.77.0.11")
	ip4B = netip.MustParseAddr("10.77.0.12")
	ip6A = netip.MustParseAddr("fd00:77::11")
	ip6B = netip.MustParseAddr("fd00:77::12")
)

// rawLayer serializes as its bytes: IPv6 extension headers gopacket cannot
// build, and payloads.
type rawLayer []byte

func (r rawLayer) LayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

func (r rawLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	bytes, err := b.PrependBytes(len(r))
	if err != nil {
		return err
	}
	copy(bytes, r)
	return nil
}

func serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		tb.Fatalf("serialize: %v", err)
	}
	return buf.Bytes()
}

func ethernet(et layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: et}
}

func dot1q(vid uint16, et layers.EthernetType) *layers.Dot1Q {
	return &layers.Dot1Q{VLANIdentifier: vid, Priority: 3, Type: et}
}

func ipv4(proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, Flags: layers.IPv4DontFragment,
		SrcIP: ip4A.AsSlice(), DstIP: ip4B.AsSlice()}
}

func ipv6(next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: ip6A.AsSlice(), DstIP: ip6B.AsSlice()}
}

func tcp(src, dst uint16, nl gopacket.NetworkLayer) *layers.TCP {
	l := &layers.TCP{SrcPort: layers.TCPPort(src), DstPort: layers.TCPPort(dst), Seq: 1, ACK: true, Window: 512}
	if nl == nil {
		// Behind IPv6 extension headers: the pseudo-header needs only
		// the addresses, the same in every test frame.
		nl = ipv6(0)
	}
	l.SetNetworkLayerForChecksum(nl)
	return l
}

func udp(src, dst uint16, nl gopacket.NetworkLayer) *layers.UDP {
	l := &layers.UDP{SrcPort: layers.UDPPort(src), DstPort: layers.UDPPort(dst)}
	if nl == nil {
		// Behind IPv6 extension headers: the pseudo-header needs only
		// the addresses, the same in every test frame.
		nl = ipv6(0)
	}
	l.SetNetworkLayerForChecksum(nl)
	return l
}

// IPv6 extension headers, raw. Each ends on an 8-byte multiple.
func routingHeader(next layers.IPProtocol) rawLayer {
	// Type 0 with one address, 8 + 16 bytes: deprecated, but the one type
	// gopacket decodes; Parse skips every type alike.
	h := rawLayer{byte(next), 2, 0, 1, 0, 0, 0, 0}
	return append(h, ip6B.AsSlice()...)
}

func fragmentHeader(next layers.IPProtocol, offset uint16, more bool) rawLayer {
	h := rawLayer{byte(next), 0, 0, 0, 0xde, 0xad, 0xbe, 0xef}
	ff := offset << 3
	if more {
		ff |= 1
	}
	binary.BigEndian.PutUint16(h[2:], ff)
	return h
}

func destOptions(next layers.IPProtocol) rawLayer {
	return rawLayer{byte(next), 0, 1, 4, 0, 0, 0, 0} // one PadN option
}

func authHeader(next layers.IPProtocol) rawLayer {
	// 12 bytes of fields + 12 bytes of ICV: 24 bytes, length field 4.
	h := make(rawLayer, 24)
	h[0], h[1] = byte(next), 4
	binary.BigEndian.PutUint32(h[4:], 0x1000) // SPI
	binary.BigEndian.PutUint32(h[8:], 7)      // sequence number
	return h
}

func hopByHop() *layers.IPv6HopByHop {
	// An empty experimental option (RFC 4727); FixLengths pads the header
	// to 8 bytes.
	return &layers.IPv6HopByHop{Options: []*layers.IPv6HopByHopOption{{OptionType: 0x1e}}}
}

func arpRequest(target netip.Addr) *layers.ARP {
	return &layers.ARP{
		AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPRequest,
		SourceHwAddress: macA, SourceProtAddress: ip4A.AsSlice(),
		DstHwAddress: make([]byte, 6), DstProtAddress: target.AsSlice(),
	}
}

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Frames captured between two Linux rdma_rxe guests.
const (
	rxeCMRequestHex = "525400770012525400770011080045000134e2974000401142710a4d000b0a4d000cd87212b7012000006400ffff000000018000000080010000000000010107020300000000000000026853f3ea0010000000000000eaf35368000000000000000001061c06505400fffe77001100000000000000000000110100000001000000a0f32083a7ffff37f0ffffffff00000000000000000000ffff0a4d000b00000000000000000000ffff0a4d000c1fab4000004000980000000000000000000000000000000000000000000000000000000000000000000000000000000000000000004093920000000000000000000000000a4d000b0000000000000000000000000a4d000c000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000095e82ec1"
	rxeSendHex      = "52540077001252540077001108004500003ce2ae4000401143520a4d000b0a4d000cfab312b7002800000400ffff0000001180b92c8d000055cb0b144370000005050000004092c93e57"
	rxeAckHex       = "525400770011525400770012080045000030e54f4000401140bd0a4d000c0a4d000bfab312b7001c00001100ffff0000001100b92c8d1f0000013908777e"
	// The host's ICMP port unreachable answering a CM request.
	rxePortUnreachableHex = "5254007700110ae3df3ee214080045c00150497a000040011ace0a4d00010a4d000b03030fab000000004500013443d740004011e13c0a4d000b0a4d0001d87212b7012000006400ffff000000018000000380010000000000010107020300000000000000026853f3eb0010000000000000ebf35368000000000000000001061c06505400fffe77001100000000000000000000120100000001000000a09ca17da7ffff37f0ffffffff00000000000000000000ffff0a4d000b00000000000000000000ffff0a4d000165d1f0000040009800000000000000000000000000000000000000000000000000000000000000000000000000000000000000000040b7c70000000000000000000000000a4d000b0000000000000000000000000a4d00010000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000f2100276"
)

type frameCase struct {
	name  string
	frame []byte
	want  Headers
}

// validFrames returns well-formed frames with the headers Parse must find.
func validFrames(tb testing.TB) []frameCase {
	tb.Helper()
	payload := rawLayer("ceph v2\n")

	var cases []frameCase
	add := func(name string, want Headers, ls ...gopacket.SerializableLayer) {
		cases = append(cases, frameCase{name, serialize(tb, ls...), want})
	}

	ip := ipv4(layers.IPProtocolTCP)
	add("ipv4_tcp_mon", Headers{
		EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoTCP,
		HasPorts: true, SrcPort: 40000, DstPort: 3300, Src: ip4A, Dst: ip4B,
		L3Offset: 14, L4Offset: 34, PayloadOffset: 54, End: 62,
	}, ethernet(layers.EthernetTypeIPv4), ip, tcp(40000, 3300, ip), payload)

	ip = ipv4(layers.IPProtocolTCP)
	tc := tcp(6800, 51000, ip)
	tc.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}
	add("ipv4_tcp_options_osd_reply", Headers{
		EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoTCP,
		HasPorts: true, SrcPort: 6800, DstPort: 51000, Src: ip4A, Dst: ip4B,
		L3Offset: 14, L4Offset: 34, PayloadOffset: 58, End: 66,
	}, ethernet(layers.EthernetTypeIPv4), ip, tc, payload)

	ip = ipv4(layers.IPProtocolUDP)
	ip.Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}} // router alert
	add("ipv4_options_udp_roce", Headers{
		EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoUDP,
		HasPorts: true, SrcPort: 49152, DstPort: 4791, Src: ip4A, Dst: ip4B,
		L3Offset: 14, L4Offset: 38, PayloadOffset: 46, End: 54,
	}, ethernet(layers.EthernetTypeIPv4), ip, udp(49152, 4791, ip), payload)

	// The first fragment of a TCP segment: ports present.
	ip = ipv4(layers.IPProtocolTCP)
	ip.Flags = layers.IPv4MoreFragments
	add("ipv4_first_fragment_tcp", Headers{
		EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoTCP, Fragment: true,
		HasPorts: true, SrcPort: 40000, DstPort: 6800, Src: ip4A, Dst: ip4B,
		L3Offset: 14, L4Offset: 34, PayloadOffset: 34, End: 62,
	}, ethernet(layers.EthernetTypeIPv4), ip, tcp(40000, 6800, ip), payload)

	// A first fragment too short to hold the ports: not malformed.
	ip = ipv4(layers.IPProtocolUDP)
	ip.Flags = layers.IPv4MoreFragments
	add("ipv4_tiny_first_fragment", Headers{
		EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoUDP, Fragment: true,
		Src: ip4A, Dst: ip4B, L3Offset: 14, L4Offset: 34, PayloadOffset: 34, End: 37,
	}, ethernet(layers.EthernetTypeIPv4), ip, rawLayer{0x12, 0xb7, 0x12})

	// A later fragment whose first bytes look like ports 3300 → 6800.
	ip = ipv4(layers.IPProtocolTCP)
	ip.Flags = 0
	ip.FragOffset = 185
	add("ipv4_later_fragment", Headers{
		EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoTCP, Fragment: true, FragOffset: 185,
		Src: ip4A, Dst: ip4B, L3Offset: 14, L4Offset: 34, PayloadOffset: 34, End: 50,
	}, ethernet(layers.EthernetTypeIPv4), ip, rawLayer{0x0c, 0xe4, 0x1a, 0x90, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})

	ip = ipv4(layers.IPProtocolICMPv4)
	add("ipv4_icmp", Headers{
		EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoICMP, Src: ip4A, Dst: ip4B,
		L3Offset: 14, L4Offset: 34, PayloadOffset: 34, End: 50,
	}, ethernet(layers.EthernetTypeIPv4), ip,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 1, Seq: 1}, payload)

	ip6 := ipv6(layers.IPProtocolUDP)
	add("ipv6_udp_roce", Headers{
		EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoUDP,
		HasPorts: true, SrcPort: 49152, DstPort: 4791, Src: ip6A, Dst: ip6B,
		L3Offset: 14, L4Offset: 54, PayloadOffset: 62, End: 70,
	}, ethernet(layers.EthernetTypeIPv6), ip6, udp(49152, 4791, ip6), payload)

	ip6 = ipv6(layers.IPProtocolIPv6Routing)
	ip6.HopByHop = hopByHop()
	ip6.HopByHop.NextHeader = layers.IPProtocolIPv6Routing
	add("ipv6_hbh_routing_destopts_tcp", Headers{
		EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoTCP,
		HasPorts: true, SrcPort: 40000, DstPort: 6789, Src: ip6A, Dst: ip6B,
		L3Offset: 14, L4Offset: 14 + 40 + 8 + 24 + 8, PayloadOffset: 94 + 20, End: 114 + 8,
	}, ethernet(layers.EthernetTypeIPv6), ip6,
		routingHeader(layers.IPProtocolIPv6Destination), destOptions(layers.IPProtocolTCP),
		tcp(40000, 6789, nil), payload)

	ip6 = ipv6(layers.IPProtocolAH)
	add("ipv6_ah_udp", Headers{
		EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoUDP,
		HasPorts: true, SrcPort: 49152, DstPort: 4791, Src: ip6A, Dst: ip6B,
		L3Offset: 14, L4Offset: 78, PayloadOffset: 86, End: 94,
	}, ethernet(layers.EthernetTypeIPv6), ip6, authHeader(layers.IPProtocolUDP), udp(49152, 4791, nil), payload)

	ip6 = ipv6(layers.IPProtocolIPv6Fragment)
	add("ipv6_first_fragment_udp", Headers{
		EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoUDP, Fragment: true,
		HasPorts: true, SrcPort: 49152, DstPort: 4791, Src: ip6A, Dst: ip6B,
		L3Offset: 14, L4Offset: 62, PayloadOffset: 62, End: 78,
	}, ethernet(layers.EthernetTypeIPv6), ip6, fragmentHeader(layers.IPProtocolUDP, 0, true),
		udp(49152, 4791, nil), payload)

	ip6 = ipv6(layers.IPProtocolIPv6Fragment)
	add("ipv6_later_fragment", Headers{
		EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoUDP, Fragment: true, FragOffset: 181,
		Src: ip6A, Dst: ip6B, L3Offset: 14, L4Offset: 62, PayloadOffset: 62, End: 70,
	}, ethernet(layers.EthernetTypeIPv6), ip6, fragmentHeader(layers.IPProtocolUDP, 181, false),
		rawLayer{0xbf, 0x00, 0x12, 0xb7, 0, 16, 0, 0})

	ip6 = ipv6(layers.IPProtocolIPv6Fragment)
	add("ipv6_atomic_fragment_tcp", Headers{
		EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoTCP,
		HasPorts: true, SrcPort: 40000, DstPort: 7568, Src: ip6A, Dst: ip6B,
		L3Offset: 14, L4Offset: 62, PayloadOffset: 82, End: 90,
	}, ethernet(layers.EthernetTypeIPv6), ip6, fragmentHeader(layers.IPProtocolTCP, 0, false),
		tcp(40000, 7568, nil), payload)

	// Eight extension headers: the most Parse accepts.
	ip6 = ipv6(layers.IPProtocolIPv6Destination)
	ls := []gopacket.SerializableLayer{ethernet(layers.EthernetTypeIPv6), ip6}
	for range MaxIPv6ExtHeaders - 1 {
		ls = append(ls, destOptions(layers.IPProtocolIPv6Destination))
	}
	ls = append(ls, destOptions(layers.IPProtocolUDP), udp(1, 4791, nil), payload)
	add("ipv6_eight_ext_headers", Headers{
		EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoUDP,
		HasPorts: true, SrcPort: 1, DstPort: 4791, Src: ip6A, Dst: ip6B,
		L3Offset: 14, L4Offset: 54 + 64, PayloadOffset: 126, End: 134,
	}, ls...)

	ip6 = ipv6(layers.IPProtocolICMPv6)
	icmp6 := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)}
	icmp6.SetNetworkLayerForChecksum(ip6)
	add("ipv6_icmpv6", Headers{
		EtherType: EtherTypeIPv6, IPVersion: 6, Proto: ProtoICMPv6, Src: ip6A, Dst: ip6B,
		L3Offset: 14, L4Offset: 54, PayloadOffset: 54, End: 66,
	}, ethernet(layers.EthernetTypeIPv6), ip6, icmp6, payload)

	add("arp_request", Headers{
		EtherType: EtherTypeARP, Src: ip4A, Dst: ip4B, L3Offset: 14, End: 42,
	}, ethernet(layers.EthernetTypeARP), arpRequest(ip4B))

	ip = ipv4(layers.IPProtocolUDP)
	add("vlan_ipv4_udp", Headers{
		EtherType: EtherTypeIPv4, VLANs: 1, VLANTCI: [2]uint16{3<<13 | 100}, IPVersion: 4, Proto: ProtoUDP,
		HasPorts: true, SrcPort: 49152, DstPort: 4791, Src: ip4A, Dst: ip4B,
		L3Offset: 18, L4Offset: 38, PayloadOffset: 46, End: 54,
	}, ethernet(layers.EthernetTypeDot1Q), dot1q(100, layers.EthernetTypeIPv4), ip, udp(49152, 4791, ip), payload)

	ip6 = ipv6(layers.IPProtocolTCP)
	add("qinq_ipv6_tcp", Headers{
		EtherType: EtherTypeIPv6, VLANs: 2, VLANTCI: [2]uint16{3<<13 | 200, 3<<13 | 100}, IPVersion: 6, Proto: ProtoTCP,
		HasPorts: true, SrcPort: 40000, DstPort: 3300, Src: ip6A, Dst: ip6B,
		L3Offset: 22, L4Offset: 62, PayloadOffset: 82, End: 90,
	}, ethernet(layers.EthernetTypeQinQ), dot1q(200, layers.EthernetTypeDot1Q), dot1q(100, layers.EthernetTypeIPv6),
		ip6, tcp(40000, 3300, ip6), payload)

	add("double_dot1q_arp", Headers{
		EtherType: EtherTypeARP, VLANs: 2, VLANTCI: [2]uint16{3<<13 | 10, 3<<13 | 20}, Src: ip4A, Dst: ip4B,
		L3Offset: 22, End: 50,
	}, ethernet(layers.EthernetTypeDot1Q), dot1q(10, layers.EthernetTypeDot1Q), dot1q(20, layers.EthernetTypeARP),
		arpRequest(ip4B))

	add("unknown_ethertype", Headers{EtherType: 0x88b5, L3Offset: 14, End: 60},
		ethernet(0x88b5), payload)

	cases = append(cases,
		frameCase{"rxe_cm_request", mustHex(tb, rxeCMRequestHex), Headers{
			EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoUDP,
			HasPorts: true, SrcPort: 55410, DstPort: 4791, Src: ip4A, Dst: ip4B,
			L3Offset: 14, L4Offset: 34, PayloadOffset: 42, End: 322,
		}},
		frameCase{"rxe_send", mustHex(tb, rxeSendHex), Headers{
			EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoUDP,
			HasPorts: true, SrcPort: 64179, DstPort: 4791, Src: ip4A, Dst: ip4B,
			L3Offset: 14, L4Offset: 34, PayloadOffset: 42, End: 74,
		}},
		frameCase{"rxe_ack", mustHex(tb, rxeAckHex), Headers{
			EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoUDP,
			HasPorts: true, SrcPort: 64179, DstPort: 4791, Src: ip4B, Dst: ip4A,
			L3Offset: 14, L4Offset: 34, PayloadOffset: 42, End: 62,
		}},
		frameCase{"rxe_icmp_port_unreachable", mustHex(tb, rxePortUnreachableHex), Headers{
			EtherType: EtherTypeIPv4, IPVersion: 4, Proto: ProtoICMP,
			Src: netip.MustParseAddr("10.77.0.1"), Dst: ip4A,
			L3Offset: 14, L4Offset: 34, PayloadOffset: 34, End: 350,
		}},
	)
	return cases
}

func TestParseValid(t *testing.T) {
	for _, tc := range validFrames(t) {
		t.Run(tc.name, func(t *testing.T) {
			var h Headers
			if r := Parse(tc.frame, &h); r != ReasonNone {
				t.Fatalf("Parse = %v, want none", r)
			}
			if h != tc.want {
				t.Errorf("Parse headers\n got %+v\nwant %+v", h, tc.want)
			}
			checkAgainstGopacket(t, tc.frame, &h)
		})
	}
}

// checkAgainstGopacket compares what Parse found with gopacket's decoding
// of the same frame, an independent parser.
func checkAgainstGopacket(t *testing.T, frame []byte, h *Headers) {
	t.Helper()
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if nl := pkt.NetworkLayer(); nl != nil && h.IPVersion != 0 {
		src, dst := nl.NetworkFlow().Endpoints()
		gotSrc, _ := netip.AddrFromSlice(src.Raw())
		gotDst, _ := netip.AddrFromSlice(dst.Raw())
		if gotSrc != h.Src || gotDst != h.Dst {
			t.Errorf("gopacket %v → %v, Parse %v → %v", gotSrc, gotDst, h.Src, h.Dst)
		}
	}
	if pkt.Layer(layers.LayerTypeIPv6Fragment) != nil || h.Fragment {
		return // gopacket does not decode past a fragment header
	}
	switch l := pkt.TransportLayer().(type) {
	case *layers.TCP:
		if !h.HasPorts || h.Proto != ProtoTCP || uint16(l.SrcPort) != h.SrcPort || uint16(l.DstPort) != h.DstPort {
			t.Errorf("gopacket TCP %d→%d, Parse proto %d ports %v %d→%d", l.SrcPort, l.DstPort, h.Proto, h.HasPorts, h.SrcPort, h.DstPort)
		}
		if want := h.L4Offset + int(l.DataOffset)*4; want != h.PayloadOffset {
			t.Errorf("gopacket TCP payload at %d, Parse %d", want, h.PayloadOffset)
		}
	case *layers.UDP:
		if !h.HasPorts || h.Proto != ProtoUDP || uint16(l.SrcPort) != h.SrcPort || uint16(l.DstPort) != h.DstPort {
			t.Errorf("gopacket UDP %d→%d, Parse proto %d ports %v %d→%d", l.SrcPort, l.DstPort, h.Proto, h.HasPorts, h.SrcPort, h.DstPort)
		}
	case nil:
		if h.HasPorts {
			t.Errorf("Parse found ports %d→%d, gopacket no transport layer", h.SrcPort, h.DstPort)
		}
	}
	if a, ok := pkt.Layer(layers.LayerTypeARP).(*layers.ARP); ok {
		if got := netip.AddrFrom4([4]byte(a.DstProtAddress)); got != h.Dst {
			t.Errorf("gopacket ARP target %v, Parse %v", got, h.Dst)
		}
	}
}

// TestParseTruncated cuts every valid frame at every byte boundary: a frame
// cut before the end of what its headers declare is malformed, and Parse
// never panics.
func TestParseTruncated(t *testing.T) {
	for _, tc := range validFrames(t) {
		t.Run(tc.name, func(t *testing.T) {
			need := tc.want.End
			if tc.want.IPVersion == 0 && tc.want.EtherType != EtherTypeARP {
				need = tc.want.L3Offset // nothing past the link layer is read
			}
			for n := range len(tc.frame) {
				// Capacity n too: reslicing past n would panic.
				frame := tc.frame[:n:n]
				var h Headers
				r := Parse(frame, &h)
				if n < need && r == ReasonNone {
					t.Fatalf("frame cut to %d of %d bytes (headers need %d): Parse = none, headers %+v", n, len(tc.frame), need, h)
				}
				if n >= need && r != ReasonNone {
					t.Fatalf("frame cut to %d bytes (headers need %d): Parse = %v", n, need, r)
				}
				if r == ReasonNone && tc.want.IPVersion != 0 && h != tc.want {
					t.Fatalf("frame cut to %d bytes: headers %+v, want %+v", n, h, tc.want)
				}
			}
		})
	}
}

func patch(frame []byte, off int, b ...byte) []byte {
	f := append([]byte(nil), frame...)
	copy(f[off:], b)
	return f
}

func TestParseMalformed(t *testing.T) {
	payload := rawLayer("ceph v2\n")
	ip := ipv4(layers.IPProtocolTCP)
	v4tcp := serialize(t, ethernet(layers.EthernetTypeIPv4), ip, tcp(40000, 6800, ip), payload)
	ip = ipv4(layers.IPProtocolUDP)
	v4udp := serialize(t, ethernet(layers.EthernetTypeIPv4), ip, udp(40000, 4791, ip), payload)
	ip6 := ipv6(layers.IPProtocolUDP)
	v6udp := serialize(t, ethernet(layers.EthernetTypeIPv6), ip6, udp(40000, 4791, ip6), payload)
	arp := serialize(t, ethernet(layers.EthernetTypeARP), arpRequest(ip4B))

	ninth := []gopacket.SerializableLayer{ethernet(layers.EthernetTypeIPv6), ipv6(layers.IPProtocolIPv6Destination)}
	for range MaxIPv6ExtHeaders {
		ninth = append(ninth, destOptions(layers.IPProtocolIPv6Destination))
	}
	ninth = append(ninth, destOptions(layers.IPProtocolUDP), udp(1, 4791, nil), payload)

	tests := []struct {
		name  string
		frame []byte
		want  Reason
	}{
		{"empty", nil, ReasonTruncatedEthernet},
		{"short_ethernet", v4tcp[:13], ReasonTruncatedEthernet},
		{"vlan_cut", serialize(t, ethernet(layers.EthernetTypeDot1Q))[:16], ReasonTruncatedVLAN},
		{"three_vlans", serialize(t, ethernet(layers.EthernetTypeQinQ), dot1q(1, layers.EthernetTypeDot1Q),
			dot1q(2, layers.EthernetTypeDot1Q), dot1q(3, layers.EthernetTypeIPv4), ipv4(layers.IPProtocolICMPv4)), ReasonTooManyVLANs},
		{"arp_cut", arp[:20], ReasonTruncatedARP},
		{"arp_long_addresses", patch(arp, 14+4, 200), ReasonTruncatedARP},
		{"ipv4_cut", v4tcp[:30], ReasonTruncatedIPv4},
		{"ipv4_version_6", patch(v4tcp, 14, 0x65), ReasonBadIPv4Header},
		{"ipv4_ihl_4", patch(v4tcp, 14, 0x44), ReasonBadIPv4Header},
		{"ipv4_ihl_beyond_total", patch(v4tcp, 14, 0x4f), ReasonBadIPv4Length},
		{"ipv4_total_below_header", patch(v4tcp, 16, 0, 19), ReasonBadIPv4Length},
		{"ipv4_total_beyond_frame", patch(v4tcp, 16, 0x05, 0xdc), ReasonTruncatedIPv4},
		{"ipv4_total_cuts_tcp", patch(v4tcp, 16, 0, 30), ReasonTruncatedTCP},
		{"tcp_data_offset_4", patch(v4tcp, 34+12, 0x40), ReasonBadTCPHeader},
		{"tcp_data_offset_beyond_packet", patch(v4tcp, 34+12, 0xf0), ReasonBadTCPHeader},
		{"ipv4_total_cuts_udp", patch(v4udp, 16, 0, 27), ReasonTruncatedUDP},
		{"udp_length_7", patch(v4udp, 34+4, 0, 7), ReasonBadUDPLength},
		{"udp_length_beyond_packet", patch(v4udp, 34+4, 0, 17), ReasonBadUDPLength},
		{"ipv6_cut", v6udp[:50], ReasonTruncatedIPv6},
		{"ipv6_version_4", patch(v6udp, 14, 0x40), ReasonBadIPv6Header},
		{"ipv6_payload_beyond_frame", patch(v6udp, 14+4, 0, 17), ReasonTruncatedIPv6},
		{"ipv6_payload_cuts_udp", patch(v6udp, 14+4, 0, 7), ReasonTruncatedUDP},
		{"ipv6_hbh_not_first", serialize(t, ethernet(layers.EthernetTypeIPv6), ipv6(layers.IPProtocolIPv6Destination),
			destOptions(layers.IPProtocolIPv6HopByHop), rawLayer{17, 0, 1, 4, 0, 0, 0, 0}, udp(1, 4791, nil), payload),
			ReasonBadIPv6ExtHeader},
		{"ipv6_ext_overruns_packet", serialize(t, ethernet(layers.EthernetTypeIPv6), ipv6(layers.IPProtocolIPv6Destination),
			rawLayer{17, 3, 1, 4, 0, 0, 0, 0}, udp(1, 4791, nil), payload), ReasonBadIPv6ExtHeader},
		{"ipv6_ext_shorter_than_8", serialize(t, ethernet(layers.EthernetTypeIPv6), ipv6(layers.IPProtocolIPv6Routing),
			rawLayer{17, 0, 0, 0}), ReasonBadIPv6ExtHeader},
		{"ipv6_ah_overruns_packet", serialize(t, ethernet(layers.EthernetTypeIPv6), ipv6(layers.IPProtocolAH),
			rawLayer(patch(authHeader(layers.IPProtocolUDP), 1, 7)), udp(1, 4791, nil)), ReasonBadIPv6ExtHeader},
		{"ipv6_nine_ext_headers", serialize(t, ninth...), ReasonTooManyIPv6ExtHeaders},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Headers
			if got := Parse(tt.frame, &h); got != tt.want {
				t.Errorf("Parse = %v, want %v (headers %+v)", got, tt.want, h)
			}
			checkOffsets(t, tt.frame, &h, tt.want)
		})
	}
}

// checkOffsets fails if h reports an offset outside frame or, for a frame
// that parsed, out of order.
func checkOffsets(t testing.TB, frame []byte, h *Headers, r Reason) {
	t.Helper()
	for _, o := range []int{h.L3Offset, h.L4Offset, h.PayloadOffset, h.End} {
		if o < 0 || o > len(frame) {
			t.Fatalf("frame of %d bytes: offset %d outside it (headers %+v)", len(frame), o, h)
		}
	}
	if r != ReasonNone {
		return
	}
	if h.IPVersion != 0 && !(h.L3Offset <= h.L4Offset && h.L4Offset <= h.PayloadOffset && h.PayloadOffset <= h.End) {
		t.Fatalf("frame of %d bytes: offsets L3 %d L4 %d payload %d end %d out of order",
			len(frame), h.L3Offset, h.L4Offset, h.PayloadOffset, h.End)
	}
	if h.HasPorts && h.L4Offset+4 > h.End {
		t.Fatalf("ports at %d beyond end %d", h.L4Offset, h.End)
	}
}

func TestReasonString(t *testing.T) {
	seen := map[string]Reason{}
	for r := range NumReasons {
		s := r.String()
		if s == "" || strings.HasPrefix(s, "reason(") {
			t.Errorf("Reason %d has no name: %q", r, s)
		}
		if prev, ok := seen[s]; ok {
			t.Errorf("Reasons %d and %d share the name %q", prev, r, s)
		}
		seen[s] = r
	}
	if got := NumReasons.String(); !strings.HasPrefix(got, "reason(") {
		t.Errorf("NumReasons.String() = %q, want reason(N)", got)
	}
	if ReasonNone.String() != "none" || ReasonTruncatedTCP.String() != "truncated_tcp" {
		t.Errorf("unexpected names %q %q", ReasonNone, ReasonTruncatedTCP)
	}
}

// TestReasons checks that every error of package header's parsers past
// the link layer has its own reason, so that reason never needs its
// fallback.
func TestReasons(t *testing.T) {
	for err, want := range map[error]Reason{
		header.ErrSplitHeader:           ReasonMultiSegmentHeaders,
		header.ErrTruncatedARP:          ReasonTruncatedARP,
		header.ErrTruncatedIPv4:         ReasonTruncatedIPv4,
		header.ErrBadIPv4Header:         ReasonBadIPv4Header,
		header.ErrBadIPv4Length:         ReasonBadIPv4Length,
		header.ErrTruncatedIPv6:         ReasonTruncatedIPv6,
		header.ErrBadIPv6Header:         ReasonBadIPv6Header,
		header.ErrBadIPv6ExtHeader:      ReasonBadIPv6ExtHeader,
		header.ErrTooManyIPv6ExtHeaders: ReasonTooManyIPv6ExtHeaders,
		header.ErrTruncatedTCP:          ReasonTruncatedTCP,
		header.ErrBadTCPHeader:          ReasonBadTCPHeader,
		header.ErrTruncatedUDP:          ReasonTruncatedUDP,
		header.ErrBadUDPLength:          ReasonBadUDPLength,
	} {
		if got := reason(err, ReasonNone); got != want {
			t.Errorf("reason(%v) = %v, want %v", err, got, want)
		}
	}
	if got := reason(nil, ReasonTruncatedIPv4); got != ReasonNone {
		t.Errorf("reason(nil) = %v", got)
	}
}
