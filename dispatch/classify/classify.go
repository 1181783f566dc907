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
	ProtoICMP   uint8 = 1
	ProtoTCP    uint8 = 6
	ProtoUDP    uint8 = 17
	ProtoICMPv6 uint8 = 58
)

// IPv6 extension header numbers the parser walks past.
const (
	ipv6HopByHop    = 0
	ipv6Routing     = 43
	ipv6Fragment    = 44
	ipv6AuthHeader  = 51
	ipv6DestOptions = 60
)

const (
	// MaxVLANs is the number of VLAN tags the parser accepts; a frame with
	// more is malformed.
	MaxVLANs = header.MaxVLANs
	// MaxIPv6ExtHeaders bounds the IPv6 extension header chain so the cost
	// of parsing a frame stays bounded; a longer chain is malformed.
	MaxIPv6ExtHeaders = 8
)

const (
	ethHeaderLen  = header.EthernetHeaderLen
	arpFixedLen   = 8
	ipv4MinHeader = 20
	ipv6HeaderLen = 40
	tcpMinHeader  = 20
	udpHeaderLen  = 8
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

// parse is ParseChain for pktLen >= len(seg). Every length is checked
// against pktLen first, for the reason Parse gives a whole frame, then
// against seg before any byte is read: for a single segment (pktLen ==
// len(seg)) the second check never fails, and the result is that of the
// whole-frame parser.
func parse(seg []byte, pktLen int, h *Headers) Reason {
	*h = Headers{}
	et, off, ok := header.InnerEtherType(seg)
	if !ok {
		var l header.Link
		return linkReason(header.ParseLink(seg, &l), len(seg), pktLen)
	}
	n := (off - ethHeaderLen) / header.VLANTagLen
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

// fits returns ReasonNone if the k bytes from off lie in seg, otherwise
// ReasonMultiSegmentHeaders; callers have checked that they lie in the
// packet.
func fits(seg []byte, off, k int) Reason {
	if len(seg)-off < k {
		return ReasonMultiSegmentHeaders
	}
	return ReasonNone
}

func parseARP(seg []byte, pktLen int, h *Headers) Reason {
	off := h.L3Offset
	if pktLen-off < arpFixedLen {
		return ReasonTruncatedARP
	}
	if r := fits(seg, off, arpFixedLen); r != ReasonNone {
		return r
	}
	b := seg[off:]
	hlen, plen := int(b[4]), int(b[5])
	n := arpFixedLen + 2*hlen + 2*plen
	if pktLen-off < n {
		return ReasonTruncatedARP
	}
	if r := fits(seg, off, n); r != ReasonNone {
		return r
	}
	h.End = off + n
	if be16(b[2:4]) == EtherTypeIPv4 && plen == 4 {
		spa := arpFixedLen + hlen
		tpa := spa + 4 + hlen
		h.Src = netip.AddrFrom4([4]byte(b[spa : spa+4]))
		h.Dst = netip.AddrFrom4([4]byte(b[tpa : tpa+4]))
	}
	return ReasonNone
}

func parseIPv4(seg []byte, pktLen int, h *Headers) Reason {
	off := h.L3Offset
	if pktLen-off < ipv4MinHeader {
		return ReasonTruncatedIPv4
	}
	if r := fits(seg, off, ipv4MinHeader); r != ReasonNone {
		return r
	}
	b := seg[off:]
	ihl := int(b[0]&0x0f) * 4
	if b[0]>>4 != 4 || ihl < ipv4MinHeader {
		return ReasonBadIPv4Header
	}
	total := int(be16(b[2:4]))
	if total < ihl {
		return ReasonBadIPv4Length
	}
	if total > pktLen-off {
		return ReasonTruncatedIPv4
	}
	if r := fits(seg, off, ihl); r != ReasonNone {
		return r
	}
	h.IPVersion = 4
	h.Proto = b[9]
	h.Src = netip.AddrFrom4([4]byte(b[12:16]))
	h.Dst = netip.AddrFrom4([4]byte(b[16:20]))
	ff := be16(b[6:8])
	h.FragOffset = ff & 0x1fff
	h.Fragment = ff&0x3fff != 0 // MF set or a nonzero offset
	h.End = off + total
	h.L4Offset = off + ihl
	return parseL4(seg, h)
}

func parseIPv6(seg []byte, pktLen int, h *Headers) Reason {
	off := h.L3Offset
	if pktLen-off < ipv6HeaderLen {
		return ReasonTruncatedIPv6
	}
	if r := fits(seg, off, ipv6HeaderLen); r != ReasonNone {
		return r
	}
	b := seg[off:]
	if b[0]>>4 != 6 {
		return ReasonBadIPv6Header
	}
	total := ipv6HeaderLen + int(be16(b[4:6]))
	if total > pktLen-off {
		return ReasonTruncatedIPv6
	}
	h.IPVersion = 6
	h.Src = netip.AddrFrom16([16]byte(b[8:24]))
	h.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	h.End = off + total

	next := b[6]
	p := ipv6HeaderLen
	for i := 0; ; i++ {
		switch next {
		case ipv6HopByHop, ipv6Routing, ipv6Fragment, ipv6AuthHeader, ipv6DestOptions:
		default:
			h.Proto = next
			h.L4Offset = off + p
			return parseL4(seg, h)
		}
		if i == MaxIPv6ExtHeaders {
			return ReasonTooManyIPv6ExtHeaders
		}
		// RFC 8200 section 4.3: Hop-by-Hop Options only directly after
		// the IPv6 header.
		if next == ipv6HopByHop && i != 0 {
			return ReasonBadIPv6ExtHeader
		}
		// Every extension header is at least 8 bytes long.
		if total-p < 8 {
			return ReasonBadIPv6ExtHeader
		}
		if r := fits(seg, off+p, 8); r != ReasonNone {
			return r
		}
		var n int
		switch next {
		case ipv6Fragment:
			n = 8
			ff := be16(b[p+2 : p+4])
			h.FragOffset = ff >> 3
			// An atomic fragment (offset 0, M clear) is a whole
			// datagram (RFC 6946).
			h.Fragment = h.FragOffset != 0 || ff&1 != 0
		case ipv6AuthHeader:
			n = (int(b[p+1]) + 2) * 4 // RFC 4302: length in 4-byte units, minus 2
		default:
			n = (int(b[p+1]) + 1) * 8
		}
		if n > total-p {
			return ReasonBadIPv6ExtHeader
		}
		if r := fits(seg, off+p, n); r != ReasonNone {
			return r
		}
		next = b[p]
		p += n
	}
}

// parseL4 reads the transport header at h.L4Offset of a packet that ends
// at h.End, from seg.
func parseL4(seg []byte, h *Headers) Reason {
	h.PayloadOffset = h.L4Offset
	if h.FragOffset != 0 {
		// A later fragment: what follows is the middle of a datagram.
		return ReasonNone
	}
	switch h.Proto {
	case ProtoTCP, ProtoUDP:
	default:
		return ReasonNone
	}
	off := h.L4Offset
	n := h.End - off // transport header and payload
	if h.Fragment {
		// The first fragment of several: the transport header may be
		// split across fragments, and UDP length covers the whole
		// datagram, so only the ports are read, if present.
		if n >= 4 {
			if r := fits(seg, off, 4); r != ReasonNone {
				return r
			}
			h.SrcPort, h.DstPort = be16(seg[off:off+2]), be16(seg[off+2:off+4])
			h.HasPorts = true
		}
		return ReasonNone
	}
	if h.Proto == ProtoTCP {
		if n < tcpMinHeader {
			return ReasonTruncatedTCP
		}
		if r := fits(seg, off, tcpMinHeader); r != ReasonNone {
			return r
		}
		l4 := seg[off:]
		doff := int(l4[12]>>4) * 4
		if doff < tcpMinHeader || doff > n {
			return ReasonBadTCPHeader
		}
		if r := fits(seg, off, doff); r != ReasonNone {
			return r
		}
		h.SrcPort, h.DstPort = be16(l4[0:2]), be16(l4[2:4])
		h.HasPorts = true
		h.PayloadOffset = off + doff
		return ReasonNone
	}
	if n < udpHeaderLen {
		return ReasonTruncatedUDP
	}
	if r := fits(seg, off, udpHeaderLen); r != ReasonNone {
		return r
	}
	l4 := seg[off:]
	// A UDP length below the IP payload is allowed (the rest is ignored,
	// as Linux does); one beyond it is not.
	if ulen := int(be16(l4[4:6])); ulen < udpHeaderLen || ulen > n {
		return ReasonBadUDPLength
	}
	h.SrcPort, h.DstPort = be16(l4[0:2]), be16(l4[2:4])
	h.HasPorts = true
	h.PayloadOffset = off + udpHeaderLen
	return ReasonNone
}
