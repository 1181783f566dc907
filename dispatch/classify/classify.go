package classify

import (
	"encoding/binary"
	"net/netip"
	"strconv"

	"github.com/cephdpdkd/cephdpdkd/header"
)

// Ethertypes the parser understands; the link-layer rules (which
// ethertypes are VLAN tags, how many a frame may carry) are package
// header's.
const (
	EtherTypeIPv4 = header.EtherTypeIPv4
	EtherTypeARP  = header.EtherTypeARP
	EtherTypeVLAN = header.EtherTypeVLAN // IEEE 802.1Q customer tag
	EtherTypeQinQ = header.EtherTypeQinQ // IEEE 802.1ad service tag
	EtherTypeIPv6 = header.EtherTypeIPv6
)

// IP protocol numbers used in rules.
const (
	ProtoICMP   = header.ProtoICMP
	ProtoTCP    = header.ProtoTCP
	ProtoUDP    = header.ProtoUDP
	ProtoICMPv6 = header.ProtoICMPv6
)

// The limits are package header's, shared with the RoCEv2 codec and ARP.
const (
	// MaxVLANs is the number of VLAN tags the parser accepts; a frame with
	// more is malformed.
	MaxVLANs = header.MaxVLANs
	// MaxIPv6ExtHeaders bounds the IPv6 extension header chain so the cost
	// of parsing a frame stays bounded; a longer chain is malformed.
	MaxIPv6ExtHeaders = header.MaxIPv6ExtHeaders
)

// Reason says why a frame could not be parsed. The zero value, ReasonNone,
// means the frame parsed; every other value names the first inconsistency
// found. Reasons are small consecutive integers below NumReasons, so callers
// can count them in an array.
type Reason uint8

const (
	ReasonNone                  Reason = iota
	ReasonTruncatedEthernet            // shorter than an Ethernet header
	ReasonTruncatedVLAN                // a VLAN tag is cut off
	ReasonTooManyVLANs                 // more than MaxVLANs tags
	ReasonTruncatedARP                 // shorter than the ARP header it declares
	ReasonTruncatedIPv4                // shorter than the IPv4 header or its total length
	ReasonBadIPv4Header                // version is not 4 or IHL is below 5
	ReasonBadIPv4Length                // total length below the header length
	ReasonTruncatedIPv6                // shorter than the IPv6 header or its payload length
	ReasonBadIPv6Header                // version is not 6
	ReasonBadIPv6ExtHeader             // an extension header overruns the packet or is misplaced
	ReasonTooManyIPv6ExtHeaders        // more than MaxIPv6ExtHeaders extension headers
	ReasonTruncatedTCP                 // packet too short for a TCP header
	ReasonBadTCPHeader                 // data offset below 5 or beyond the packet
	ReasonTruncatedUDP                 // packet too short for a UDP header
	ReasonBadUDPLength                 // UDP length below 8 or beyond the packet
	// ReasonMultiSegmentHeaders: the packet is a chain of segments (an
	// mbuf chain: scattered RX, a jumbo frame in small mbufs) and its
	// headers, up to the transport header, do not all lie in the first
	// segment, the one the classifier reads.
	ReasonMultiSegmentHeaders

	// NumReasons is the number of Reason values, ReasonNone included.
	NumReasons
)

// String returns the reason in snake case, suitable as a metric label.
func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonTruncatedEthernet:
		return "truncated_ethernet"
	case ReasonTruncatedVLAN:
		return "truncated_vlan"
	case ReasonTooManyVLANs:
		return "too_many_vlans"
	case ReasonTruncatedARP:
		return "truncated_arp"
	case ReasonTruncatedIPv4:
		return "truncated_ipv4"
	case ReasonBadIPv4Header:
		return "bad_ipv4_header"
	case ReasonBadIPv4Length:
		return "bad_ipv4_length"
	case ReasonTruncatedIPv6:
		return "truncated_ipv6"
	case ReasonBadIPv6Header:
		return "bad_ipv6_header"
	case ReasonBadIPv6ExtHeader:
		return "bad_ipv6_ext_header"
	case ReasonTooManyIPv6ExtHeaders:
		return "too_many_ipv6_ext_headers"
	case ReasonTruncatedTCP:
		return "truncated_tcp"
	case ReasonBadTCPHeader:
		return "bad_tcp_header"
	case ReasonTruncatedUDP:
		return "truncated_udp"
	case ReasonBadUDPLength:
		return "bad_udp_length"
	case ReasonMultiSegmentHeaders:
		return "multi_segment_headers"
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Headers is what Parse learns about a frame. Offsets index the frame passed
// to Parse and never exceed its length (for ParseChain: the packet's).
type Headers struct {
	// EtherType is the innermost ethertype, after any VLAN tags.
	EtherType uint16
	// VLANs is the number of VLAN tags; VLANTCI holds their tag control
	// information, outermost first.
	VLANs   uint8
	VLANTCI [MaxVLANs]uint16

	// IPVersion is 4 or 6 for IP packets and 0 otherwise.
	IPVersion uint8
	// Proto is the upper-layer protocol: the IPv4 protocol field, or the
	// IPv6 next header that follows the last extension header.
	Proto uint8
	// Fragment is set when the packet is part of a fragmented datagram;
	// FragOffset is its offset in 8-byte units. Only the first fragment
	// (FragOffset 0) carries the transport header.
	Fragment   bool
	FragOffset uint16

	// HasPorts is set when SrcPort and DstPort were read from a TCP or UDP
	// header. Later fragments never have ports.
	HasPorts         bool
	SrcPort, DstPort uint16

	// Src and Dst are the IP source and destination addresses; for ARP they
	// are the sender and target protocol addresses (when those are IPv4).
	// They are the zero Addr when the frame carries none.
	Src, Dst netip.Addr

	// L3Offset is where the header after the Ethernet and VLAN headers
	// starts.
	L3Offset int
	// L4Offset is where the upper-layer header starts, past IP options and
	// IPv6 extension headers; 0 for frames that are not IP.
	L4Offset int
	// PayloadOffset is where the TCP or UDP payload starts. It equals
	// L4Offset for other protocols and for fragments, whose transport
	// header is not known to be whole; 0 for frames that are not IP.
	PayloadOffset int
	// End is where the packet ends as declared by its IP total or payload
	// length, or by the ARP header; bytes from End on are link padding. For
	// other frames End is the packet length.
	End int
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }

// Parse reads the headers of an Ethernet frame into h. It never reads past
// frame, never retains it and never allocates. It returns ReasonNone if the
// headers are consistent; otherwise the reason, with h describing the
// headers parsed up to that point. An ethertype the parser does not know is
// not an error: h then has only the link-layer fields set. The offsets in
// h index frame and never exceed its length.
func Parse(frame []byte, h *Headers) Reason {
	return parse(frame, len(frame), h)
}

// ParseChain is Parse for a packet of pktLen bytes held in a chain of
// segments (an mbuf chain) of which first is the first. It reads only
// first: the headers, up to and including the transport header, must lie
// in it, or the result is ReasonMultiSegmentHeaders; lengths the headers
// declare (IP total length, UDP length...) are checked against pktLen.
// The header offsets in h index first; End may lie beyond it, up to
// pktLen. If pktLen is below len(first), only its first pktLen bytes
// are read: Parse(first[:pktLen], h).
func ParseChain(first []byte, pktLen int, h *Headers) Reason {
	if pktLen <= len(first) {
		return Parse(first[:max(pktLen, 0)], h)
	}
	return parse(first, pktLen, h)
}

// parse is ParseChain for pktLen >= len(seg). The rules are package
// header's: every length is checked against pktLen first, for the reason
// Parse gives a whole frame, then against seg (header.ErrSplitHeader)
// before any byte is read, so for a single segment (pktLen == len(seg))
// the result is that of the whole-frame parser. Each header is tested
// with its inlined IsValid; only a header that fails is run through
// Check, to name the reason.
func parse(seg []byte, pktLen int, h *Headers) Reason {
	*h = Headers{}
	et, off, ok := header.InnerEtherType(seg)
	if !ok {
		var l header.Link
		return linkReason(header.ParseLink(seg, &l), len(seg), pktLen)
	}
	n := (off - header.EthernetHeaderLen) / header.VLANTagLen
	for i := range n {
		h.VLANTCI[i] = header.Ethernet(seg).Tag(i).TCI
	}
	h.VLANs = uint8(n)
	h.EtherType = et
	h.L3Offset = off
	h.End = pktLen
	switch et {
	case EtherTypeIPv4:
		return parseIPv4(seg, pktLen, h)
	case EtherTypeIPv6:
		return parseIPv6(seg, pktLen, h)
	case EtherTypeARP:
		return parseARP(seg, pktLen, h)
	}
	return ReasonNone
}

// linkReason names a link-layer error of header.ParseLink on a segment of
// segLen bytes of a pktLen-byte packet.
func linkReason(err error, segLen, pktLen int) Reason {
	switch {
	case err == header.ErrTooManyVLANs:
		return ReasonTooManyVLANs
	case pktLen > segLen:
		// Cut off at the end of the segment, not of the packet.
		return ReasonMultiSegmentHeaders
	case err == header.ErrTruncatedEthernet:
		return ReasonTruncatedEthernet
	}
	return ReasonTruncatedVLAN
}

// reason names an error of package header's parsers past the link layer.
// An error it does not know, which TestReasons rules out, is named
// fallback: the frame is refused all the same. It is kept out of line:
// it runs only for malformed frames, and inlined into every parser it
// would crowd the code that runs for every frame.
//
//go:noinline
func reason(err error, fallback Reason) Reason {
	switch err {
	case nil:
		return ReasonNone
	case header.ErrSplitHeader:
		return ReasonMultiSegmentHeaders
	case header.ErrTruncatedARP:
		return ReasonTruncatedARP
	case header.ErrTruncatedIPv4:
		return ReasonTruncatedIPv4
	case header.ErrBadIPv4Header:
		return ReasonBadIPv4Header
	case header.ErrBadIPv4Length:
		return ReasonBadIPv4Length
	case header.ErrTruncatedIPv6:
		return ReasonTruncatedIPv6
	case header.ErrBadIPv6Header:
		return ReasonBadIPv6Header
	case header.ErrBadIPv6ExtHeader:
		return ReasonBadIPv6ExtHeader
	case header.ErrTooManyIPv6ExtHeaders:
		return ReasonTooManyIPv6ExtHeaders
	case header.ErrTruncatedTCP:
		return ReasonTruncatedTCP
	case header.ErrBadTCPHeader:
		return ReasonBadTCPHeader
	case header.ErrTruncatedUDP:
		return ReasonTruncatedUDP
	case header.ErrBadUDPLength:
		return ReasonBadUDPLength
	}
	return fallback
}

func parseARP(seg []byte, pktLen int, h *Headers) Reason {
	off := h.L3Offset
	a := header.ARP(seg[off:])
	if !a.IsValid(pktLen - off) {
		return reason(a.Check(pktLen-off), ReasonTruncatedARP)
	}
	h.End = off + a.Len()
	if a.ProtocolType() == EtherTypeIPv4 && a.ProtocolAddressLength() == 4 {
		h.Src = netip.AddrFrom4([4]byte(a.SenderProtocolAddress()))
		h.Dst = netip.AddrFrom4([4]byte(a.TargetProtocolAddress()))
	}
	return ReasonNone
}

func parseIPv4(seg []byte, pktLen int, h *Headers) Reason {
	off := h.L3Offset
	ip := header.IPv4(seg[off:])
	if !ip.IsValid(pktLen - off) {
		return reason(ip.Check(pktLen-off), ReasonBadIPv4Header)
	}
	h.IPVersion = 4
	h.Proto = ip.Protocol()
	h.Src = ip.SourceAddress()
	h.Dst = ip.DestinationAddress()
	h.FragOffset = ip.FragmentOffset()
	h.Fragment = ip.IsFragment()
	h.End = off + ip.TotalLength()
	h.L4Offset = off + ip.HeaderLength()
	return parseL4(seg, h)
}

func parseIPv6(seg []byte, pktLen int, h *Headers) Reason {
	off := h.L3Offset
	ip := header.IPv6(seg[off:])
	if !ip.IsValid(pktLen - off) {
		return reason(ip.Check(pktLen-off), ReasonBadIPv6Header)
	}
	h.IPVersion = 6
	h.Src = ip.SourceAddress()
	h.Dst = ip.DestinationAddress()
	h.End = off + header.IPv6MinimumSize + ip.PayloadLength()
	// No extension headers, the most common case, needs no walk (and no
	// call: ParseExtensions is too large to inline).
	p := header.IPv6Payload{Protocol: ip.NextHeader(), Offset: header.IPv6MinimumSize}
	var err error
	if header.IsIPv6ExtHeader(p.Protocol) {
		err = ip.ParseExtensions(&p)
	}
	h.Fragment, h.FragOffset = p.Fragment, p.FragmentOffset
	if err != nil {
		return reason(err, ReasonBadIPv6ExtHeader)
	}
	h.Proto = p.Protocol
	h.L4Offset = off + p.Offset
	return parseL4(seg, h)
}

// parseL4 reads the transport header at h.L4Offset of a packet that ends
// at h.End, from seg.
func parseL4(seg []byte, h *Headers) Reason {
	h.PayloadOffset = h.L4Offset
	if h.FragOffset != 0 {
		// A later fragment: what follows is the middle of a datagram.
		return ReasonNone
	}
	off := h.L4Offset
	size := h.End - off // transport header and payload
	l4 := seg[off:]
	switch {
	case h.Proto != ProtoTCP && h.Proto != ProtoUDP:
		return ReasonNone
	case h.Fragment:
		// The first fragment of several: the transport header may be
		// split across fragments, and UDP length covers the whole
		// datagram, so only the ports are read, if present.
		if size >= header.PortsSize {
			if len(l4) < header.PortsSize {
				return ReasonMultiSegmentHeaders
			}
			h.SrcPort, h.DstPort = header.UDP(l4).SourcePort(), header.UDP(l4).DestinationPort()
			h.HasPorts = true
		}
		return ReasonNone
	case h.Proto == ProtoTCP:
		t := header.TCP(l4)
		if !t.IsValid(size) {
			return reason(t.Check(size), ReasonBadTCPHeader)
		}
		h.SrcPort, h.DstPort = t.SourcePort(), t.DestinationPort()
		h.PayloadOffset = off + t.DataOffset()
	default:
		u := header.UDP(l4)
		if !u.IsValid(size) {
			return reason(u.Check(size), ReasonBadUDPLength)
		}
		h.SrcPort, h.DstPort = u.SourcePort(), u.DestinationPort()
		h.PayloadOffset = off + header.UDPMinimumSize
	}
	h.HasPorts = true
	return ReasonNone
}
