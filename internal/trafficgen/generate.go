package trafficgen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Ports of the services in the mix.
const (
	PortMonV2     = 3300
	PortMonV1     = 6789
	PortOSDFirst  = 6800
	PortOSDLast   = 7568
	PortRoCEv2    = 4791
	ephemeralLow  = 32768 // Linux ip_local_port_range; disjoint from every
	ephemeralHigh = 60999 // service port above
)

// TCP maximum segment sizes on a 1500-byte MTU with the 12-byte timestamp
// option that Linux sends on every segment.
const (
	mss4 = 1500 - 20 - 32
	mss6 = 1500 - 40 - 32
)

// maxFragPayload is the IPv4 payload of a first fragment on a 1500-byte MTU,
// a multiple of 8 as fragment offsets require.
const maxFragPayload = 1480

// Generate returns n frames drawn from mix. The result depends only on seed,
// n and mix. Frames of one TCP flow or RoCEv2 queue pair carry consecutive
// sequence numbers; the two fragments of a datagram are adjacent.
//
// Generate panics if mix is not valid (see Mix.Validate) or n is negative.
func Generate(seed int64, n int, mix Mix) []Frame {
	if err := mix.Validate(); err != nil {
		panic(err)
	}
	if n < 0 {
		panic(fmt.Sprintf("trafficgen: negative frame count %d", n))
	}
	g := newGenerator(seed, mix)
	frames := make([]Frame, 0, n)
	for len(frames) < n {
		frames = g.emit(frames, n-len(frames))
	}
	return frames
}

type generator struct {
	r       *rng
	mix     Mix
	kinds   []Kind
	weights []int
	total   int

	tcp map[tcpKey]*tcpFlow
	qps map[qpKey]*queuePair

	// Per-peer IPv4 identification and ICMP echo sequence counters.
	ipID    [LastPeer + 1]uint16
	echoSeq [LastPeer + 1]uint16
}

func newGenerator(seed int64, mix Mix) *generator {
	g := &generator{
		r:   newRNG(seed),
		mix: mix,
		tcp: make(map[tcpKey]*tcpFlow),
		qps: make(map[qpKey]*queuePair),
	}
	for _, k := range Kinds() {
		if w := mix.Weights[k]; w > 0 {
			g.kinds = append(g.kinds, k)
			g.weights = append(g.weights, w)
			g.total += w
		}
	}
	for p := range g.ipID {
		g.ipID[p] = uint16(g.r.uint32())
		g.echoSeq[p] = uint16(g.r.intn(1000))
	}
	return g
}

func (g *generator) pickKind() Kind {
	x := g.r.intn(g.total)
	for i, w := range g.weights {
		if x < w {
			return g.kinds[i]
		}
		x -= w
	}
	panic("unreachable")
}

// emit appends the frames of one datagram: one frame, or two when it is
// fragmented and room allows.
func (g *generator) emit(dst []Frame, room int) []Frame {
	switch k := g.pickKind(); k {
	case MonV2, MonV1, OSD, OtherTCP:
		return append(dst, g.tcpFrame(k))
	case RoCEv2:
		return append(dst, g.roceFrame())
	case ARP:
		return append(dst, g.arpFrame())
	case ICMP:
		return g.icmpFrames(dst, room)
	case ICMPv6:
		return append(dst, g.icmpv6Frame())
	case OtherUDP:
		return g.udpFrames(dst, room)
	default:
		panic(fmt.Sprintf("trafficgen: no builder for %v", k))
	}
}

func (g *generator) nextIPID(peer int) uint16 {
	g.ipID[peer]++
	return g.ipID[peer]
}

// serialize builds a frame from layers, fixing lengths and checksums. The
// layers are built here and always serialize, so an error is a bug.
func serialize(ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		panic(fmt.Sprintf("trafficgen: serialize: %v", err))
	}
	return bytes.Clone(buf.Bytes())
}

// link returns the Ethernet (and 802.1Q) layers for a frame whose network
// layer has EtherType inner.
func link(f *Frame, src, dst net.HardwareAddr, inner layers.EthernetType) []gopacket.SerializableLayer {
	eth := &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: inner}
	if !f.VLAN {
		return []gopacket.SerializableLayer{eth}
	}
	eth.EthernetType = layers.EthernetTypeDot1Q
	return []gopacket.SerializableLayer{eth, &layers.Dot1Q{
		Priority:       f.Priority,
		VLANIdentifier: f.VLANID,
		Type:           inner,
	}}
}

func (g *generator) ipv4(peer int, proto layers.IPProtocol, df bool) *layers.IPv4 {
	ip := &layers.IPv4{
		Version:  4,
		Id:       g.nextIPID(peer),
		TTL:      64,
		Protocol: proto,
		SrcIP:    PeerIPv4(peer).AsSlice(),
		DstIP:    NodeIPv4().AsSlice(),
	}
	if df {
		ip.Flags = layers.IPv4DontFragment
	}
	return ip
}

func ipv6(src, dst netip.Addr, next layers.IPProtocol, hopLimit uint8, flowLabel uint32) *layers.IPv6 {
	return &layers.IPv6{
		Version:    6,
		FlowLabel:  flowLabel,
		NextHeader: next,
		HopLimit:   hopLimit,
		SrcIP:      src.AsSlice(),
		DstIP:      dst.AsSlice(),
	}
}

// TCP flows. Each (kind, IP version, tagging) has a small pool of flows; a
// frame picks one, and the flow's state advances so that its segments form
// a plausible stream: handshake, banner, then messages split at the MSS and
// interleaved with pure ACKs.

type tcpKey struct {
	kind     Kind
	v6, vlan bool
	slot     int
}

type tcpState uint8

const (
	tcpNew tcpState = iota
	tcpBanner
	tcpEstablished
)

type tcpFlow struct {
	peer               int
	peerPort, nodePort uint16
	peerIsClient       bool
	state              tcpState
	seq, ack           uint32 // next sequence number from the peer, and its ack
	tsval, tsecr       uint32
	window             uint16
	flowLabel          uint32
	pending            int // bytes of the current message still to send
}

func tcpPoolSize(k Kind) int {
	switch k {
	case MonV2:
		return 6
	case MonV1:
		return 2
	case OSD:
		return 24
	default:
		return 6
	}
}

func (g *generator) ephemeral() uint16 { return uint16(g.r.between(ephemeralLow, ephemeralHigh)) }

func (g *generator) newTCPFlow(k Kind) *tcpFlow {
	r := g.r
	f := &tcpFlow{
		seq:       r.uint32(),
		ack:       r.uint32(),
		tsval:     r.uint32(),
		tsecr:     r.uint32(),
		window:    uint16(r.between(249, 3000)),
		flowLabel: r.uint32() & 0xfffff,
		peer:      r.between(FirstPeer, LastPeer),
	}
	switch k {
	case MonV2:
		f.peerIsClient, f.peerPort, f.nodePort = true, g.ephemeral(), PortMonV2
	case MonV1:
		f.peerIsClient, f.peerPort, f.nodePort = true, g.ephemeral(), PortMonV1
	case OSD:
		port := uint16(r.between(PortOSDFirst, PortOSDLast))
		if r.chance(0.7) {
			f.peerIsClient, f.peerPort, f.nodePort = true, g.ephemeral(), port
		} else {
			// The node's own OSD talking to a peer OSD: replies come from
			// the peer's OSD port to a node ephemeral port.
			f.peerIsClient, f.peerPort, f.nodePort = false, port, g.ephemeral()
		}
	case OtherTCP:
		switch r.intn(3) {
		case 0: // an admin host's ssh session to the node
			f.peer, f.peerIsClient, f.peerPort, f.nodePort = LastPeer, true, g.ephemeral(), 22
		case 1: // replies from a package mirror the node fetches from
			f.peer, f.peerIsClient, f.peerPort, f.nodePort = FirstPeer, false, 443, g.ephemeral()
		default: // a Prometheus server scraping node_exporter
			f.peer, f.peerIsClient, f.peerPort, f.nodePort = LastPeer-1, true, g.ephemeral(), 9100
		}
	}
	return f
}

// banner returns what the peer sends first on a new connection, if anything.
func (g *generator) banner(k Kind, f *tcpFlow) []byte {
	switch {
	case k == MonV2 || k == OSD:
		// msgr2: "ceph v2\n", a little-endian payload length, then the
		// supported and required feature bits.
		b := []byte("ceph v2\n")
		b = binary.LittleEndian.AppendUint16(b, 16)
		b = binary.LittleEndian.AppendUint64(b, 3)
		return binary.LittleEndian.AppendUint64(b, 1)
	case k == MonV1:
		// msgr1: "ceph v027" followed by the sender's entity_addr_t.
		b := make([]byte, 9+136)
		copy(b, "ceph v027")
		g.r.fill(b[9:])
		return b
	case f.nodePort == 22:
		return []byte("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")
	}
	return nil
}

// messageSize draws the length of the next message on an established flow;
// zero means a pure ACK.
func (g *generator) messageSize(k Kind) int {
	r := g.r
	switch k {
	case MonV2, MonV1:
		switch {
		case r.chance(0.40):
			return 0
		case r.chance(0.92):
			return pick(r, 53, 84, 125, 208, 330, 567, 1011) + r.intn(16)
		default: // an OSD map
			return pick(r, 8192, 16384) + r.intn(2048)
		}
	case OSD:
		switch {
		case r.chance(0.40):
			return 0
		case r.chance(0.70):
			// Heartbeats, op replies, sub-op acks.
			return pick(r, 61, 98, 154, 203, 262, 417, 590) + r.intn(32)
		default:
			// Object data plus message header, front and footer.
			return pick(r, 4096, 4096, 8192, 16384) + r.between(64, 512)
		}
	default:
		switch {
		case r.chance(0.45):
			return 0
		case r.chance(0.90):
			return r.between(40, 700)
		default:
			return r.between(2000, 6000)
		}
	}
}

func (g *generator) tcpFrame(k Kind) Frame {
	r := g.r
	f := Frame{Kind: k, Proto: layers.IPProtocolTCP}
	if k.isCeph() {
		f.IPv6 = r.chance(g.mix.IPv6)
		if r.chance(g.mix.VLAN) {
			f.VLAN, f.VLANID = true, StorageVLAN
		}
	}
	key := tcpKey{kind: k, v6: f.IPv6, vlan: f.VLAN, slot: r.intn(tcpPoolSize(k))}
	flow, ok := g.tcp[key]
	if !ok {
		flow = g.newTCPFlow(k)
		g.tcp[key] = flow
	}

	var defect Defect
	if !f.IPv6 && !f.VLAN && flow.state == tcpEstablished && r.chance(g.mix.Malformed) {
		defect = Defect(r.between(int(TruncatedIPv4), int(BadIHL)))
		// Damaged frames are extra: build them from a copy so the flow's
		// sequence space is unaffected.
		cp := *flow
		flow = &cp
	}

	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(flow.peerPort),
		DstPort: layers.TCPPort(flow.nodePort),
		Seq:     flow.seq,
		Ack:     flow.ack,
		Window:  flow.window,
	}
	mss := mss4
	if f.IPv6 {
		mss = mss6
	}
	var payload []byte
	switch flow.state {
	case tcpNew:
		tcp.SYN = true
		tcp.ACK = !flow.peerIsClient
		tcp.Window = 64240
		if !tcp.ACK {
			tcp.Ack = 0
		}
		tcp.Options = synOptions(mss+12, flow.tsval, flow.tsecr, !tcp.ACK)
		flow.seq++
		flow.state = tcpBanner
	case tcpBanner:
		tcp.ACK = true
		flow.state = tcpEstablished
		if payload = g.banner(k, flow); payload != nil {
			tcp.PSH = true
			break
		}
		fallthrough
	default:
		tcp.ACK = true
		if flow.pending == 0 {
			flow.pending = g.messageSize(k)
		}
		if flow.pending == 0 {
			// A pure ACK for data the node sent.
			flow.ack += uint32(r.between(1, 8) * mss)
			tcp.Ack = flow.ack
		} else {
			payload = make([]byte, min(mss, flow.pending))
			r.fill(payload)
			flow.pending -= len(payload)
			tcp.PSH = flow.pending == 0
		}
	}
	if !tcp.SYN {
		tcp.Options = timestampOptions(flow.tsval, flow.tsecr)
	}
	flow.seq += uint32(len(payload))
	flow.tsval += uint32(r.intn(4))
	flow.tsecr += uint32(r.intn(4))

	f.SrcPort, f.DstPort, f.Payload = flow.peerPort, flow.nodePort, len(payload)
	var ls []gopacket.SerializableLayer
	if f.IPv6 {
		f.SrcIP, f.DstIP = PeerIPv6(flow.peer), NodeIPv6()
		ip := ipv6(f.SrcIP, f.DstIP, layers.IPProtocolTCP, 64, flow.flowLabel)
		tcp.SetNetworkLayerForChecksum(ip)
		ls = append(link(&f, PeerMAC(flow.peer), NodeMAC(), layers.EthernetTypeIPv6), ip, tcp)
	} else {
		f.SrcIP, f.DstIP = PeerIPv4(flow.peer), NodeIPv4()
		ip := g.ipv4(flow.peer, layers.IPProtocolTCP, true)
		tcp.SetNetworkLayerForChecksum(ip)
		ls = append(link(&f, PeerMAC(flow.peer), NodeMAC(), layers.EthernetTypeIPv4), ip, tcp)
	}
	f.Data = serialize(append(ls, gopacket.Payload(payload))...)
	if defect != NoDefect {
		f.Data = g.damage(f.Data, defect)
		f.Malformed, f.Defect = true, defect
	}
	return f
}

func timestampOptions(tsval, tsecr uint32) []layers.TCPOption {
	ts := make([]byte, 8)
	binary.BigEndian.PutUint32(ts, tsval)
	binary.BigEndian.PutUint32(ts[4:], tsecr)
	return []layers.TCPOption{
		{OptionType: layers.TCPOptionKindNop},
		{OptionType: layers.TCPOptionKindNop},
		{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts},
	}
}

// synOptions returns the options Linux puts on a SYN or SYN-ACK, in its
// order: MSS, SACK permitted, timestamps, NOP, window scale.
func synOptions(mss int, tsval, tsecr uint32, syn bool) []layers.TCPOption {
	ts := make([]byte, 8)
	binary.BigEndian.PutUint32(ts, tsval)
	if !syn {
		binary.BigEndian.PutUint32(ts[4:], tsecr)
	}
	return []layers.TCPOption{
		{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: binary.BigEndian.AppendUint16(nil, uint16(mss))},
		{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
		{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts},
		{OptionType: layers.TCPOptionKindNop},
		{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
	}
}

// damage applies defect to an untagged IPv4 TCP frame.
func (g *generator) damage(d []byte, defect Defect) []byte {
	const ipOff = 14
	switch defect {
	case TruncatedIPv4:
		return bytes.Clone(d[:ipOff+g.r.between(1, 19)])
	case TruncatedTCP:
		return bytes.Clone(d[:ipOff+20+g.r.between(1, 19)])
	case BadIPv4Length:
		claimed := min(0xffff, len(d)-ipOff+g.r.between(1, 1000))
		binary.BigEndian.PutUint16(d[ipOff+2:], uint16(claimed))
	case BadIHL:
		d[ipOff] = 0x40 | byte(g.r.intn(5))
	}
	// Keep the header checksum right so that the defect itself, not the
	// checksum, is what a parser has to catch.
	hdr := d[ipOff : ipOff+20]
	hdr[10], hdr[11] = 0, 0
	binary.BigEndian.PutUint16(hdr[10:], ipChecksum(hdr))
	return d
}

// ipChecksum returns the Internet checksum (RFC 1071) of b.
func ipChecksum(b []byte) uint16 {
	var sum uint32
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// ARP: requests from peers, mostly for the node, broadcast; replies from
// peers to the node's own requests.
func (g *generator) arpFrame() Frame {
	r := g.r
	peer := r.between(FirstPeer, LastPeer)
	f := Frame{Kind: ARP, SrcIP: PeerIPv4(peer), DstIP: NodeIPv4()}
	arp := &layers.ARP{
		AddrType:          layers.LinkTypeEthernet,
		Protocol:          layers.EthernetTypeIPv4,
		HwAddressSize:     6,
		ProtAddressSize:   4,
		SourceHwAddress:   PeerMAC(peer),
		SourceProtAddress: f.SrcIP.AsSlice(),
	}
	dst := NodeMAC()
	if r.chance(0.6) {
		arp.Operation = layers.ARPRequest
		arp.DstHwAddress = make(net.HardwareAddr, 6)
		dst = broadcastMAC()
		if r.chance(0.3) {
			// Someone else's neighbour: the node sees it only because it
			// is broadcast.
			other := r.between(FirstPeer, LastPeer)
			if other == peer {
				other = FirstPeer + (other-FirstPeer+1)%(LastPeer-FirstPeer+1)
			}
			f.DstIP = PeerIPv4(other)
		}
	} else {
		arp.Operation = layers.ARPReply
		arp.DstHwAddress = NodeMAC()
	}
	arp.DstProtAddress = f.DstIP.AsSlice()
	f.Data = serialize(append(link(&f, PeerMAC(peer), dst, layers.EthernetTypeARP), arp)...)
	return f
}

// pingPayload returns an echo payload the way Linux ping fills it: an
// 8-byte timestamp, then bytes counting up from 0x10.
func (g *generator) pingPayload(n int) []byte {
	p := make([]byte, n)
	g.r.fill(p[:min(8, n)])
	for i := 8; i < n; i++ {
		p[i] = byte(0x10 + i - 8)
	}
	return p
}

// ICMP: echo requests to the node and replies to its own pings; a fraction
// are jumbo pings sent as two fragments.
func (g *generator) icmpFrames(dst []Frame, room int) []Frame {
	r := g.r
	peer := r.between(FirstPeer, LastPeer)
	g.echoSeq[peer]++
	icmp := &layers.ICMPv4{
		TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0),
		Id:       uint16(0x4000 + peer*97),
		Seq:      g.echoSeq[peer],
	}
	if r.chance(0.3) {
		icmp.TypeCode = layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoReply, 0)
	}
	f := Frame{Kind: ICMP, Proto: layers.IPProtocolICMPv4, SrcIP: PeerIPv4(peer), DstIP: NodeIPv4()}
	size := 56
	frag := room >= 2 && r.chance(g.mix.Fragmented)
	if frag {
		size = r.between(maxFragPayload-8+1, 2*maxFragPayload-8)
	}
	payload := gopacket.Payload(g.pingPayload(size))
	ip := g.ipv4(peer, layers.IPProtocolICMPv4, false)
	l2 := link(&f, PeerMAC(peer), NodeMAC(), layers.EthernetTypeIPv4)
	if frag {
		return append(dst, fragment(f, l2, ip, serialize(icmp, payload))...)
	}
	f.Data = serialize(append(l2, ip, icmp, payload)...)
	return append(dst, f)
}

// fragment splits the serialized L4 datagram l4 into a first and a later
// IPv4 fragment behind the given link layers and IPv4 header template.
func fragment(f Frame, l2 []gopacket.SerializableLayer, ip *layers.IPv4, l4 []byte) []Frame {
	first, later := f, f
	ip1, ip2 := *ip, *ip
	ip1.Flags |= layers.IPv4MoreFragments
	ip2.FragOffset = maxFragPayload / 8
	first.Frag, later.Frag = FirstFragment, LaterFragment
	first.Data = serialize(append(l2, &ip1, gopacket.Payload(l4[:maxFragPayload]))...)
	later.Data = serialize(append(l2, &ip2, gopacket.Payload(l4[maxFragPayload:]))...)
	return []Frame{first, later}
}

// ICMPv6: neighbour solicitations for the node (to its solicited-node
// group), advertisements answering the node's, and echo requests.
func (g *generator) icmpv6Frame() Frame {
	r := g.r
	peer := r.between(FirstPeer, LastPeer)
	f := Frame{Kind: ICMPv6, IPv6: true, Proto: layers.IPProtocolICMPv6, SrcIP: PeerIPv6(peer), DstIP: NodeIPv6()}
	dstMAC := NodeMAC()
	icmp := &layers.ICMPv6{}
	var body []gopacket.SerializableLayer
	hop := uint8(255) // RFC 4861 requires 255 on neighbour discovery
	switch x := r.intn(10); {
	case x < 4:
		f.DstIP, dstMAC = nodeSolicitedIPv6(), nodeSolicitedMAC()
		icmp.TypeCode = layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)
		body = []gopacket.SerializableLayer{&layers.ICMPv6NeighborSolicitation{
			TargetAddress: NodeIPv6().AsSlice(),
			Options:       layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: PeerMAC(peer)}},
		}}
	case x < 7:
		icmp.TypeCode = layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)
		body = []gopacket.SerializableLayer{&layers.ICMPv6NeighborAdvertisement{
			Flags:         0x60, // solicited, override
			TargetAddress: f.SrcIP.AsSlice(),
			Options:       layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: PeerMAC(peer)}},
		}}
	default:
		hop = 64
		g.echoSeq[peer]++
		icmp.TypeCode = layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)
		body = []gopacket.SerializableLayer{
			&layers.ICMPv6Echo{Identifier: uint16(0x6000 + peer*97), SeqNumber: g.echoSeq[peer]},
			gopacket.Payload(g.pingPayload(56)),
		}
	}
	ip := ipv6(f.SrcIP, f.DstIP, layers.IPProtocolICMPv6, hop, 0)
	icmp.SetNetworkLayerForChecksum(ip)
	ls := append(link(&f, PeerMAC(peer), dstMAC, layers.EthernetTypeIPv6), ip, icmp)
	f.Data = serialize(append(ls, body...)...)
	return f
}

// OtherUDP: DNS responses (some large enough to fragment), NTP server
// replies and SNMP queries.
func (g *generator) udpFrames(dst []Frame, room int) []Frame {
	r := g.r
	f := Frame{Kind: OtherUDP, Proto: layers.IPProtocolUDP, DstIP: NodeIPv4()}
	var peer int
	var payload []byte
	frag := false
	switch r.intn(3) {
	case 0:
		peer, f.SrcPort, f.DstPort = FirstPeer, 53, g.ephemeral()
		answers := r.between(1, 24)
		if frag = room >= 2 && r.chance(g.mix.Fragmented); frag {
			// Enough records that the UDP datagram exceeds one fragment.
			answers = r.between(93, 180)
		}
		payload = g.dnsResponse(answers)
	case 1:
		peer, f.SrcPort, f.DstPort = FirstPeer, 123, 123
		payload = make([]byte, 48)
		r.fill(payload)
		payload[0], payload[1] = 0x24, 2 // NTPv4 server reply, stratum 2
	default:
		peer, f.SrcPort, f.DstPort = LastPeer-1, g.ephemeral(), 161
		payload = g.snmpGet()
	}
	f.SrcIP, f.Payload = PeerIPv4(peer), len(payload)
	udp := &layers.UDP{SrcPort: layers.UDPPort(f.SrcPort), DstPort: layers.UDPPort(f.DstPort)}
	ip := g.ipv4(peer, layers.IPProtocolUDP, !frag)
	udp.SetNetworkLayerForChecksum(ip)
	l2 := link(&f, PeerMAC(peer), NodeMAC(), layers.EthernetTypeIPv4)
	if frag {
		return append(dst, fragment(f, l2, ip, serialize(udp, gopacket.Payload(payload)))...)
	}
	f.Data = serialize(append(l2, ip, udp, gopacket.Payload(payload))...)
	return append(dst, f)
}

// dnsResponse returns a DNS response to an A query for mon.ceph.test with
// the given number of answers, all addresses in the test subnet.
func (g *generator) dnsResponse(answers int) []byte {
	const qname = "\x03mon\x04ceph\x04test\x00"
	b := binary.BigEndian.AppendUint16(nil, uint16(g.r.uint32())) // ID
	b = binary.BigEndian.AppendUint16(b, 0x8180)                  // response, RD, RA, no error
	b = binary.BigEndian.AppendUint16(b, 1)                       // questions
	b = binary.BigEndian.AppendUint16(b, uint16(answers))
	b = binary.BigEndian.AppendUint32(b, 0) // authority and additional
	b = append(b, qname...)
	b = binary.BigEndian.AppendUint32(b, 1<<16|1) // type A, class IN
	for range answers {
		b = binary.BigEndian.AppendUint16(b, 0xc00c) // pointer to the question name
		b = binary.BigEndian.AppendUint32(b, 1<<16|1)
		b = binary.BigEndian.AppendUint32(b, 300) // TTL
		b = binary.BigEndian.AppendUint16(b, 4)
		b = append(b, PeerIPv4(g.r.between(FirstPeer, LastPeer)).AsSlice()...)
	}
	return b
}

// snmpGet returns an SNMPv2c GetRequest for sysUpTime.0 with community
// "public" and a random request ID.
func (g *generator) snmpGet() []byte {
	varbind := []byte{0x30, 0x0c, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x02, 0x01, 0x01, 0x03, 0x00, 0x05, 0x00}
	pdu := []byte{0x02, 0x04}
	pdu = binary.BigEndian.AppendUint32(pdu, g.r.uint32()&0x7fffffff) // request-id
	pdu = append(pdu, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00)             // error-status, error-index
	pdu = append(pdu, 0x30, byte(len(varbind)))
	pdu = append(pdu, varbind...)
	msg := []byte{0x02, 0x01, 0x01, 0x04, 0x06, 'p', 'u', 'b', 'l', 'i', 'c', 0xa0, byte(len(pdu))}
	msg = append(msg, pdu...)
	return append([]byte{0x30, byte(len(msg))}, msg...)
}
