package trafficgen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func TestGenerateDeterministic(t *testing.T) {
	a := Generate(42, 500, DefaultMix())
	b := Generate(42, 500, DefaultMix())
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different frames")
	}
	c := Generate(43, 500, DefaultMix())
	same := 0
	for i := range a {
		if bytes.Equal(a[i].Data, c[i].Data) {
			same++
		}
	}
	if same > 50 {
		t.Errorf("seeds 42 and 43 share %d of 500 frames", same)
	}
}

func TestGenerateCount(t *testing.T) {
	onlyFrags := Mix{Weights: map[Kind]int{ICMP: 1, OtherUDP: 1}, Fragmented: 1}
	tests := []struct {
		name string
		n    int
		mix  Mix
	}{
		{"zero", 0, DefaultMix()},
		{"one", 1, DefaultMix()},
		{"default", 777, DefaultMix()},
		// Every DNS response and ping wants two frames; an odd count
		// must still come out exact.
		{"fragments odd", 1, onlyFrags},
		{"fragments", 101, onlyFrags},
		{"single kind", 50, Mix{Weights: map[Kind]int{ARP: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames := Generate(1, tt.n, tt.mix)
			if len(frames) != tt.n {
				t.Fatalf("got %d frames, want %d", len(frames), tt.n)
			}
			for i, f := range frames {
				if tt.mix.Weights[f.Kind] == 0 {
					t.Errorf("frame %d has kind %v, which has no weight", i, f.Kind)
				}
				if f.Frag == FirstFragment && (i+1 == len(frames) || frames[i+1].Frag != LaterFragment) {
					t.Errorf("first fragment %d is not followed by its later fragment", i)
				}
			}
		})
	}
}

func TestMixValidate(t *testing.T) {
	tests := []struct {
		name string
		mix  Mix
		ok   bool
	}{
		{"default", DefaultMix(), true},
		{"nil weights", Mix{}, false},
		{"all zero", Mix{Weights: map[Kind]int{OSD: 0}}, false},
		{"negative", Mix{Weights: map[Kind]int{OSD: 5, ARP: -1}}, false},
		{"invalid kind", Mix{Weights: map[Kind]int{OSD: 1, Kind(0): 1}}, false},
		{"kind past end", Mix{Weights: map[Kind]int{Kind(numKinds + 1): 1}}, false},
		{"vlan above one", Mix{Weights: map[Kind]int{OSD: 1}, VLAN: 1.5}, false},
		{"negative ipv6", Mix{Weights: map[Kind]int{OSD: 1}, IPv6: -0.1}, false},
		{"nan", Mix{Weights: map[Kind]int{OSD: 1}, Malformed: math.NaN()}, false},
		{"all variants always", Mix{Weights: map[Kind]int{OSD: 1}, VLAN: 1, IPv6: 1, Fragmented: 1, Malformed: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.mix.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadMix) {
				t.Errorf("error %v does not wrap ErrBadMix", err)
			}
		})
	}
}

func TestGeneratePanicsOnBadInput(t *testing.T) {
	for _, tt := range []struct {
		name string
		n    int
		mix  Mix
	}{
		{"bad mix", 1, Mix{}},
		{"negative count", -1, DefaultMix()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Generate did not panic")
				}
			}()
			Generate(1, tt.n, tt.mix)
		})
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{MonV2.String(), "mon-v2"},
		{OSD.String(), "osd"},
		{RoCEv2.String(), "rocev2"},
		{OtherUDP.String(), "other-udp"},
		{Kind(0).String(), "Kind(0)"},
		{Kind(200).String(), "Kind(200)"},
		{LaterFragment.String(), "later"},
		{Frag(9).String(), "Frag(9)"},
		{BadIHL.String(), "bad-ihl"},
		{Defect(9).String(), "Defect(9)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if got := len(Kinds()); got != numKinds {
		t.Errorf("Kinds() has %d kinds, want %d", got, numKinds)
	}
}

// TestDefaultMixProportions checks that kinds come out near their weights
// and that every variant and defect occurs.
func TestDefaultMixProportions(t *testing.T) {
	const n = 20000
	mix := DefaultMix()
	frames := Generate(3, n, mix)
	s := Summarize(frames)
	total := 0
	for _, w := range mix.Weights {
		total += w
	}
	for _, k := range Kinds() {
		want := float64(n) * float64(mix.Weights[k]) / float64(total)
		got := float64(s.ByKind[k])
		if math.Abs(got-want) > 0.2*want {
			t.Errorf("%v: %v frames, want about %.0f", k, got, want)
		}
	}
	if s.VLAN == 0 || s.IPv6 == 0 || s.FirstFragments == 0 || s.Malformed == 0 {
		t.Errorf("a variant is missing: %+v", s)
	}
	if s.FirstFragments != s.LaterFragments {
		t.Errorf("%d first fragments but %d later ones", s.FirstFragments, s.LaterFragments)
	}
	defects := make(map[Defect]int)
	for _, f := range frames {
		defects[f.Defect]++
	}
	for d := TruncatedIPv4; d <= BadIHL; d++ {
		if defects[d] == 0 {
			t.Errorf("no frame with defect %v", d)
		}
	}
}

// TestFramesMatchMetadata decodes every frame independently and checks it
// against its metadata, its kind's rules, checksums and the address policy.
func TestFramesMatchMetadata(t *testing.T) {
	frames := Generate(7, 5000, DefaultMix())
	for i, f := range frames {
		if f.Malformed {
			checkDefect(t, i, f)
			continue
		}
		checkAddresses(t, i, f)
		p := gopacket.NewPacket(f.Data, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
		if el := p.ErrorLayer(); el != nil {
			t.Errorf("frame %d (%v): decode: %v", i, f.Kind, el.Error())
			continue
		}
		if n := len(f.Data); n < 60 || n > 1518 {
			t.Errorf("frame %d (%v): %d bytes", i, f.Kind, n)
		}
		dot1q, _ := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q)
		if f.VLAN != (dot1q != nil) {
			t.Errorf("frame %d: VLAN=%v but tag present=%v", i, f.VLAN, dot1q != nil)
		} else if dot1q != nil && (dot1q.VLANIdentifier != f.VLANID || dot1q.Priority != f.Priority) {
			t.Errorf("frame %d: tag %d/%d, metadata %d/%d", i, dot1q.VLANIdentifier, dot1q.Priority, f.VLANID, f.Priority)
		}
		if f.VLAN && !f.Kind.isCeph() {
			t.Errorf("frame %d: %v frame is tagged", i, f.Kind)
		}
		if f.Kind == ARP {
			checkARP(t, i, f, p)
			continue
		}
		checkIP(t, i, f, p)
		checkKind(t, i, f)
	}
	checkFragments(t, frames)
}

func checkAddresses(t *testing.T, i int, f Frame) {
	t.Helper()
	dst, src := net.HardwareAddr(f.Data[0:6]), net.HardwareAddr(f.Data[6:12])
	if !slices.Equal(src[:5], []byte{0x02, 0x00, 0x0a, 0x63, 0x00}) || src[5] < FirstPeer || src[5] > LastPeer {
		t.Errorf("frame %d: source MAC %v is not a peer's", i, src)
	}
	if !bytes.Equal(dst, NodeMAC()) && !bytes.Equal(dst, broadcastMAC()) && !bytes.Equal(dst, nodeSolicitedMAC()) {
		t.Errorf("frame %d: destination MAC %v", i, dst)
	}
	for _, a := range []netip.Addr{f.SrcIP, f.DstIP} {
		if !NodePrefix4().Contains(a) && !NodePrefix6().Contains(a) && a != nodeSolicitedIPv6() {
			t.Errorf("frame %d: address %v outside the test subnets", i, a)
		}
	}
}

func checkARP(t *testing.T, i int, f Frame, p gopacket.Packet) {
	t.Helper()
	arp, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if !ok {
		t.Errorf("frame %d: ARP frame has no ARP layer", i)
		return
	}
	src, _ := netip.AddrFromSlice(arp.SourceProtAddress)
	dst, _ := netip.AddrFromSlice(arp.DstProtAddress)
	if src != f.SrcIP || dst != f.DstIP {
		t.Errorf("frame %d: ARP %v -> %v, metadata %v -> %v", i, src, dst, f.SrcIP, f.DstIP)
	}
	if arp.Operation == layers.ARPReply && dst != NodeIPv4() {
		t.Errorf("frame %d: ARP reply to %v, not the node", i, dst)
	}
}

// checkIP compares the network and transport layers with the metadata and
// verifies checksums.
func checkIP(t *testing.T, i int, f Frame, p gopacket.Packet) {
	t.Helper()
	var src, dst netip.Addr
	var proto layers.IPProtocol
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		if f.IPv6 {
			t.Errorf("frame %d: IPv6 frame decodes as IPv4", i)
		}
		src, _ = netip.AddrFromSlice(ip.SrcIP)
		dst, _ = netip.AddrFromSlice(ip.DstIP)
		proto = ip.Protocol
		if ipChecksum(ip.Contents) != 0 {
			t.Errorf("frame %d: bad IPv4 header checksum", i)
		}
	case *layers.IPv6:
		if !f.IPv6 {
			t.Errorf("frame %d: IPv4 frame decodes as IPv6", i)
		}
		src, _ = netip.AddrFromSlice(ip.SrcIP)
		dst, _ = netip.AddrFromSlice(ip.DstIP)
		proto = ip.NextHeader
	default:
		t.Errorf("frame %d (%v): no IP layer", i, f.Kind)
		return
	}
	if src != f.SrcIP || dst != f.DstIP || proto != f.Proto {
		t.Errorf("frame %d: %v %v -> %v, metadata %v %v -> %v", i, proto, src, dst, f.Proto, f.SrcIP, f.DstIP)
	}
	if f.Frag != NotFragment {
		return // checked after reassembly
	}
	seg := p.NetworkLayer().LayerPayload()
	switch tl := p.TransportLayer().(type) {
	case *layers.TCP:
		if uint16(tl.SrcPort) != f.SrcPort || uint16(tl.DstPort) != f.DstPort || len(tl.Payload) != f.Payload {
			t.Errorf("frame %d: TCP %d -> %d len %d, metadata %d -> %d len %d", i, tl.SrcPort, tl.DstPort, len(tl.Payload), f.SrcPort, f.DstPort, f.Payload)
		}
	case *layers.UDP:
		if uint16(tl.SrcPort) != f.SrcPort || uint16(tl.DstPort) != f.DstPort || len(tl.Payload) != f.Payload {
			t.Errorf("frame %d: UDP %d -> %d len %d, metadata %d -> %d len %d", i, tl.SrcPort, tl.DstPort, len(tl.Payload), f.SrcPort, f.DstPort, f.Payload)
		}
		if tl.Checksum == 0 {
			if f.Kind != RoCEv2 {
				t.Errorf("frame %d: %v frame without UDP checksum", i, f.Kind)
			}
			return
		}
	}
	if proto == layers.IPProtocolICMPv4 {
		if ipChecksum(seg) != 0 {
			t.Errorf("frame %d: bad ICMP checksum", i)
		}
	} else if l4Checksum(src, dst, proto, seg) != 0 {
		t.Errorf("frame %d (%v): bad %v checksum", i, f.Kind, proto)
	}
}

// l4Checksum returns the Internet checksum of seg under its pseudo-header;
// zero means seg's checksum field is right.
func l4Checksum(src, dst netip.Addr, proto layers.IPProtocol, seg []byte) uint16 {
	b := append(src.AsSlice(), dst.AsSlice()...)
	if src.Is4() {
		b = append(b, 0, byte(proto))
		b = binary.BigEndian.AppendUint16(b, uint16(len(seg)))
	} else {
		b = binary.BigEndian.AppendUint32(b, uint32(len(seg)))
		b = append(b, 0, 0, 0, byte(proto))
	}
	return ipChecksum(append(b, seg...))
}

func isOSDPort(p uint16) bool       { return p >= PortOSDFirst && p <= PortOSDLast }
func isEphemeralPort(p uint16) bool { return p >= ephemeralLow && p <= ephemeralHigh }

// checkKind checks the rules each kind promises about ports and protocols.
func checkKind(t *testing.T, i int, f Frame) {
	t.Helper()
	ok := true
	switch f.Kind {
	case MonV2:
		ok = f.Proto == layers.IPProtocolTCP && f.DstPort == PortMonV2 && isEphemeralPort(f.SrcPort)
	case MonV1:
		ok = f.Proto == layers.IPProtocolTCP && f.DstPort == PortMonV1 && isEphemeralPort(f.SrcPort)
	case OSD:
		ok = f.Proto == layers.IPProtocolTCP &&
			(isOSDPort(f.DstPort) && isEphemeralPort(f.SrcPort) || isOSDPort(f.SrcPort) && isEphemeralPort(f.DstPort))
	case OtherTCP:
		ok = f.Proto == layers.IPProtocolTCP && (f.DstPort == 22 || f.DstPort == 9100 || f.SrcPort == 443)
	case OtherUDP:
		ok = f.Proto == layers.IPProtocolUDP && (f.SrcPort == 53 || f.DstPort == 123 || f.DstPort == 161)
	case ICMP:
		ok = f.Proto == layers.IPProtocolICMPv4 && !f.IPv6
	case ICMPv6:
		ok = f.Proto == layers.IPProtocolICMPv6 && f.IPv6
	case RoCEv2:
		ok = f.Proto == layers.IPProtocolUDP && f.DstPort == PortRoCEv2 && f.SrcPort >= 0xc000 && !f.IPv6
		checkRoCE(t, i, f)
	default:
		ok = false
	}
	if !ok {
		t.Errorf("frame %d breaks the %v rules: %v %d -> %d", i, f.Kind, f.Proto, f.SrcPort, f.DstPort)
	}
}

// checkRoCE parses the BTH by hand and checks it, the pad and the ICRC.
func checkRoCE(t *testing.T, i int, f Frame) {
	t.Helper()
	ipOff := 14
	if f.VLAN {
		ipOff = 18
	}
	ipLen := int(binary.BigEndian.Uint16(f.Data[ipOff+2:]))
	pkt := f.Data[ipOff : ipOff+ipLen]
	bth := pkt[28:]
	got := BTH{
		Opcode: bth[0],
		PadCnt: bth[1] >> 4 & 3,
		DestQP: binary.BigEndian.Uint32(bth[4:]) & 0xffffff,
		AckReq: bth[8]&0x80 != 0,
		PSN:    binary.BigEndian.Uint32(bth[8:]) & 0xffffff,
		ICRC:   binary.LittleEndian.Uint32(pkt[len(pkt)-4:]),
	}
	ext := map[uint8]int{OpAck: aethLen, OpWriteFirst: rethLen, OpWriteOnly: rethLen}[got.Opcode]
	got.Payload = len(pkt) - 28 - bthLen - ext - int(got.PadCnt) - icrcLen
	if got != f.BTH {
		t.Errorf("frame %d: BTH %+v, metadata %+v", i, got, f.BTH)
	}
	if binary.BigEndian.Uint16(bth[2:]) != 0xffff || bth[1]&0x0f != 0 {
		t.Errorf("frame %d: P_Key %#x TVer %d", i, binary.BigEndian.Uint16(bth[2:]), bth[1]&0x0f)
	}
	if (got.Payload+int(got.PadCnt))%4 != 0 || got.Payload > roceMTU {
		t.Errorf("frame %d: payload %d with pad %d", i, got.Payload, got.PadCnt)
	}
	if want := icrc(pkt[:len(pkt)-4]); got.ICRC != want {
		t.Errorf("frame %d: ICRC %#08x, want %#08x", i, got.ICRC, want)
	}
}

// checkFragments reassembles each fragment pair and verifies the datagram.
func checkFragments(t *testing.T, frames []Frame) {
	t.Helper()
	for i := 0; i < len(frames); i++ {
		if frames[i].Frag == NotFragment {
			continue
		}
		if frames[i].Frag != FirstFragment || i+1 >= len(frames) || frames[i+1].Frag != LaterFragment {
			t.Errorf("frame %d: fragment %v out of order", i, frames[i].Frag)
			continue
		}
		a, b := frames[i].Data[14:], frames[i+1].Data[14:]
		i++
		if binary.BigEndian.Uint16(a[4:]) != binary.BigEndian.Uint16(b[4:]) {
			t.Errorf("frame %d: fragments have different IDs", i)
		}
		if ff := binary.BigEndian.Uint16(a[6:]); ff != 0x2000 {
			t.Errorf("frame %d: first fragment flags/offset %#x", i, ff)
		}
		if ff := binary.BigEndian.Uint16(b[6:]); ff != maxFragPayload/8 {
			t.Errorf("frame %d: later fragment flags/offset %#x", i, ff)
		}
		l4 := append(slices.Clone(a[20:binary.BigEndian.Uint16(a[2:])]), b[20:binary.BigEndian.Uint16(b[2:])]...)
		f := frames[i]
		switch f.Proto {
		case layers.IPProtocolUDP:
			if got := binary.BigEndian.Uint16(l4[2:]); got != f.DstPort || int(binary.BigEndian.Uint16(l4[4:])) != len(l4) {
				t.Errorf("frame %d: reassembled UDP to %d, length %d of %d", i, got, binary.BigEndian.Uint16(l4[4:]), len(l4))
			}
			if l4Checksum(f.SrcIP, f.DstIP, f.Proto, l4) != 0 {
				t.Errorf("frame %d: reassembled UDP checksum bad", i)
			}
		case layers.IPProtocolICMPv4:
			if ipChecksum(l4) != 0 {
				t.Errorf("frame %d: reassembled ICMP checksum bad", i)
			}
		default:
			t.Errorf("frame %d: fragmented %v", i, f.Proto)
		}
	}
}

func checkDefect(t *testing.T, i int, f Frame) {
	t.Helper()
	d := f.Data
	ok := false
	switch f.Defect {
	case TruncatedIPv4:
		ok = len(d) > 14 && len(d) < 34
	case TruncatedTCP:
		ok = len(d) > 34 && len(d) < 54
	case BadIPv4Length:
		ok = len(d) >= 34 && int(binary.BigEndian.Uint16(d[16:])) > len(d)-14
	case BadIHL:
		ok = len(d) >= 34 && d[14]&0x0f < 5
	}
	if !ok || f.VLAN || f.IPv6 || binary.BigEndian.Uint16(d[12:]) != uint16(layers.EthernetTypeIPv4) {
		t.Errorf("frame %d: %d bytes do not show defect %v", i, len(d), f.Defect)
	}
	if f.Proto != layers.IPProtocolTCP || f.Kind == RoCEv2 {
		t.Errorf("frame %d: damaged %v %v frame", i, f.Kind, f.Proto)
	}
}

// TestTCPStreams checks that each TCP flow starts with its handshake and
// that sequence numbers follow on, skipping damaged frames.
func TestTCPStreams(t *testing.T) {
	type flowID struct {
		src, dst         netip.AddrPort
		vlan             bool
		srcPort, dstPort uint16
	}
	next := make(map[flowID]uint32)
	for i, f := range Generate(11, 5000, DefaultMix()) {
		if f.Proto != layers.IPProtocolTCP || f.Malformed {
			continue
		}
		p := gopacket.NewPacket(f.Data, layers.LayerTypeEthernet, gopacket.Default)
		tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok {
			t.Fatalf("frame %d: no TCP layer", i)
		}
		id := flowID{netip.AddrPortFrom(f.SrcIP, f.SrcPort), netip.AddrPortFrom(f.DstIP, f.DstPort), f.VLAN, f.SrcPort, f.DstPort}
		want, seen := next[id]
		switch {
		case !seen && !tcp.SYN:
			t.Errorf("frame %d: flow %v starts without SYN", i, id)
		case seen && tcp.SYN:
			t.Errorf("frame %d: flow %v has a second SYN", i, id)
		case seen && tcp.Seq != want:
			t.Errorf("frame %d: flow %v seq %d, want %d", i, id, tcp.Seq, want)
		}
		if tcp.SYN && tcp.ACK == isEphemeralPort(f.SrcPort) {
			t.Errorf("frame %d: SYN=%v ACK=%v from port %d", i, tcp.SYN, tcp.ACK, f.SrcPort)
		}
		adv := uint32(len(tcp.Payload))
		if tcp.SYN {
			adv++
		}
		next[id] = tcp.Seq + adv
	}
}

// TestRoCEMessages checks that each queue pair's requests carry consecutive
// PSNs and well-formed FIRST/MIDDLE/LAST sequences.
func TestRoCEMessages(t *testing.T) {
	type qpID struct {
		vlan    bool
		srcPort uint16
		qp      uint32
	}
	type state struct {
		psn   uint32
		inMsg bool
		write bool
	}
	qps := make(map[qpID]*state)
	for i, f := range Generate(5, 5000, DefaultMix()) {
		if f.Kind != RoCEv2 || f.BTH.Opcode == OpAck {
			continue
		}
		id := qpID{f.VLAN, f.SrcPort, f.BTH.DestQP}
		s, ok := qps[id]
		if !ok {
			s = &state{psn: f.BTH.PSN}
			qps[id] = s
		}
		if f.BTH.PSN != s.psn {
			t.Errorf("frame %d: qp %v PSN %d, want %d", i, id, f.BTH.PSN, s.psn)
		}
		s.psn = (f.BTH.PSN + 1) & 0xffffff
		op := f.BTH.Opcode
		starts := op == OpSendFirst || op == OpSendOnly || op == OpWriteFirst || op == OpWriteOnly
		ends := op == OpSendLast || op == OpSendOnly || op == OpWriteLast || op == OpWriteOnly
		write := op >= OpWriteFirst && op <= OpWriteOnly
		if starts == s.inMsg || (!starts && write != s.write) {
			t.Errorf("frame %d: qp %v opcode %#x out of sequence", i, id, op)
		}
		if f.BTH.AckReq != ends || (!ends && f.BTH.Payload != roceMTU) {
			t.Errorf("frame %d: opcode %#x AckReq %v payload %d", i, op, f.BTH.AckReq, f.BTH.Payload)
		}
		s.inMsg, s.write = !ends, write
	}
	if len(qps) == 0 {
		t.Fatal("no RoCEv2 requests generated")
	}
}

// TestICRC checks the ICRC and the IPv4 checksum against the ConnectX-4 Lx
// CNP capture in scapy's RoCE tests.
func TestICRC(t *testing.T) {
	pkt := []byte{
		0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61,
		0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01, // IPv4
		0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, // UDP
		0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, // BTH
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // CNP reserved
	}
	if got, want := icrc(pkt), uint32(0x2a00fd82); got != want {
		t.Errorf("icrc = %#08x, want %#08x", got, want)
	}
	if got := ipChecksum(pkt[:20]); got != 0 {
		t.Errorf("checksum over a correct IPv4 header = %#04x, want 0", got)
	}
}

func TestSummaryString(t *testing.T) {
	frames := Generate(1, 200, DefaultMix())
	s := Summarize(frames)
	sum := 0
	for _, n := range s.ByKind {
		sum += n
	}
	if sum != 200 || s.Frames != 200 {
		t.Fatalf("summary counts %d frames by kind, %d in all", sum, s.Frames)
	}
	str := s.String()
	for _, k := range Kinds() {
		if !bytes.Contains([]byte(str), []byte("| "+k.String()+" | ")) {
			t.Errorf("summary lacks a row for %v:\n%s", k, str)
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	mix := DefaultMix()
	b.ReportAllocs()
	for b.Loop() {
		Generate(1, 1000, mix)
	}
}
