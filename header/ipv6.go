package header

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// IPv6 sizes and field values.
const (
	// IPv6MinimumSize is the length of the fixed IPv6 header.
	IPv6MinimumSize = 40
	// IPv6Version is the version field of an IPv6 header.
	IPv6Version = 6
	// MaxIPv6ExtHeaders bounds the extension header chain, so that the
	// cost of parsing a packet stays bounded; a longer chain is refused
	// (ErrTooManyIPv6ExtHeaders).
	MaxIPv6ExtHeaders = 8
	// ipv6ExtMinimumSize is the shortest extension header: every one is
	// a multiple of 8 bytes (the Authentication Header of 4, at least 8
	// too: RFC 4302 section 2.2).
	ipv6ExtMinimumSize  = 8
	ipv6FragmentExtSize = 8
)

// IPv6 extension header numbers: the next-header values ParseExtensions
// walks past (RFC 8200 section 4, RFC 4302).
const (
	IPv6ExtHopByHop    uint8 = 0
	IPv6ExtRouting     uint8 = 43
	IPv6ExtFragment    uint8 = 44
	IPv6ExtAuth        uint8 = 51
	IPv6ExtDestOptions uint8 = 60
)

// IPv6 parse errors; see IPv6.Check and IPv6.ParseExtensions.
var (
	// ErrTruncatedIPv6: the packet is shorter than an IPv6 header or than
	// its payload length.
	ErrTruncatedIPv6 = errors.New("header: truncated ipv6 packet")
	// ErrBadIPv6Header: the version is not 6.
	ErrBadIPv6Header = errors.New("header: bad ipv6 version")
	// ErrBadIPv6ExtHeader: an extension header overruns the packet or is
	// misplaced (Hop-by-Hop Options after the first).
	ErrBadIPv6ExtHeader = errors.New("header: bad ipv6 extension header")
	// ErrTooManyIPv6ExtHeaders: more than MaxIPv6ExtHeaders extension
	// headers.
	ErrTooManyIPv6ExtHeaders = errors.New("header: too many ipv6 extension headers")
)

// IsIPv6ExtHeader reports whether next is an extension header that
// ParseExtensions walks past.
func IsIPv6ExtHeader(next uint8) bool {
	const ext = 1<<IPv6ExtHopByHop | 1<<IPv6ExtRouting | 1<<IPv6ExtFragment | 1<<IPv6ExtAuth | 1<<IPv6ExtDestOptions
	return next < 64 && ext&(uint64(1)<<next) != 0
}

// IPv6 is a packet starting with an IPv6 header. Its accessors read the
// header in place and panic if the slice is shorter than
// IPv6MinimumSize: call them once Check or IsValid has accepted it.
type IPv6 []byte

// Version returns the version field, the first nibble.
func (b IPv6) Version() uint8 { return b[0] >> 4 }

// TrafficClass returns the traffic class, ECN bits included.
func (b IPv6) TrafficClass() uint8 { return uint8(binary.BigEndian.Uint16(b[0:2]) >> 4) }

// FlowLabel returns the 20-bit flow label.
func (b IPv6) FlowLabel() uint32 { return binary.BigEndian.Uint32(b[0:4]) & 0xfffff }

// PayloadLength returns the payload length field: the bytes after the
// fixed header, extension headers included.
func (b IPv6) PayloadLength() int { return int(binary.BigEndian.Uint16(b[4:6])) }

// NextHeader returns the next header field of the fixed header.
func (b IPv6) NextHeader() uint8 { return b[6] }

// HopLimit returns the hop limit.
func (b IPv6) HopLimit() uint8 { return b[7] }

// SourceAddress returns the source address.
func (b IPv6) SourceAddress() netip.Addr { return netip.AddrFrom16([16]byte(b[8:24])) }

// DestinationAddress returns the destination address.
func (b IPv6) DestinationAddress() netip.Addr { return netip.AddrFrom16([16]byte(b[24:40])) }

// Check validates the fixed IPv6 header at the start of b, the first
// len(b) bytes of a packet of size bytes, as IPv4.Check does: it returns
// nil, ErrTruncatedIPv6, ErrBadIPv6Header or ErrSplitHeader. Once it
// accepts b, the fixed header lies in b and IPv6MinimumSize plus
// PayloadLength is within size.
func (b IPv6) Check(size int) error {
	if size < IPv6MinimumSize {
		return ErrTruncatedIPv6
	}
	if len(b) < IPv6MinimumSize {
		return ErrSplitHeader
	}
	if b.Version() != IPv6Version {
		return ErrBadIPv6Header
	}
	if IPv6MinimumSize+b.PayloadLength() > size {
		return ErrTruncatedIPv6
	}
	return nil
}

// IsValid reports whether Check(size) would accept b, small enough to
// inline.
func (b IPv6) IsValid(size int) bool {
	// Fields read directly, as in IPv4.IsValid.
	return len(b) >= IPv6MinimumSize && b[0]>>4 == IPv6Version && IPv6MinimumSize+int(binary.BigEndian.Uint16(b[4:6])) <= size
}

// IPv6Payload is where ParseExtensions found the upper-layer header of an
// IPv6 packet.
type IPv6Payload struct {
	// Protocol is the upper-layer protocol: the next header after the
	// last extension header.
	Protocol uint8
	// Offset is where the upper-layer header starts, counted from the
	// start of the IPv6 header.
	Offset int
	// Fragment is set when the packet is part of a fragmented datagram;
	// FragmentOffset is its offset in 8-byte units. An atomic fragment
	// (offset 0, M clear) is a whole datagram (RFC 6946), not a
	// fragment.
	Fragment       bool
	FragmentOffset uint16
}

// ParseExtensions walks the extension headers of b, which Check has
// accepted, into p. The packet ends IPv6MinimumSize+PayloadLength bytes
// from its start; the headers must lie in b, or the result is
// ErrSplitHeader. It returns nil, ErrBadIPv6ExtHeader,
// ErrTooManyIPv6ExtHeaders or ErrSplitHeader; on error p holds what was
// read up to that point (the fragment fields of a fragment header already
// walked). Walking stops at the first next header that is not one
// IsIPv6ExtHeader names, at most MaxIPv6ExtHeaders headers in.
func (b IPv6) ParseExtensions(p *IPv6Payload) error {
	*p = IPv6Payload{}
	total := IPv6MinimumSize + b.PayloadLength()
	next := b.NextHeader()
	off := IPv6MinimumSize
	for i := 0; ; i++ {
		if !IsIPv6ExtHeader(next) {
			p.Protocol, p.Offset = next, off
			return nil
		}
		if i == MaxIPv6ExtHeaders {
			return ErrTooManyIPv6ExtHeaders
		}
		// RFC 8200 section 4.3: Hop-by-Hop Options only directly after
		// the IPv6 header.
		if next == IPv6ExtHopByHop && i != 0 {
			return ErrBadIPv6ExtHeader
		}
		if total-off < ipv6ExtMinimumSize {
			return ErrBadIPv6ExtHeader
		}
		if len(b)-off < ipv6ExtMinimumSize {
			return ErrSplitHeader
		}
		var n int
		switch next {
		case IPv6ExtFragment:
			n = ipv6FragmentExtSize
			ff := binary.BigEndian.Uint16(b[off+2 : off+4])
			p.FragmentOffset = ff >> 3
			p.Fragment = p.FragmentOffset != 0 || ff&1 != 0 // M flag
		case IPv6ExtAuth:
			n = (int(b[off+1]) + 2) * 4 // RFC 4302: 4-byte units, minus 2
		default:
			n = (int(b[off+1]) + 1) * 8 // 8-byte units, minus 1
		}
		if n > total-off {
			return ErrBadIPv6ExtHeader
		}
		if len(b)-off < n {
			return ErrSplitHeader
		}
		next = b[off]
		off += n
	}
}

// IPv6Fields are the fields Encode writes into a fixed IPv6 header.
type IPv6Fields struct {
	TrafficClass  uint8
	FlowLabel     uint32 // 20 bits
	PayloadLength uint16
	NextHeader    uint8
	HopLimit      uint8
	Src, Dst      [16]byte
}

// Encode writes a fixed IPv6 header from f into b[:IPv6MinimumSize]. It
// panics if b is shorter.
func (b IPv6) Encode(f *IPv6Fields) {
	_ = b[IPv6MinimumSize-1]
	binary.BigEndian.PutUint32(b[0:4], IPv6Version<<28|uint32(f.TrafficClass)<<20|f.FlowLabel&0xfffff)
	binary.BigEndian.PutUint16(b[4:6], f.PayloadLength)
	b[6] = f.NextHeader
	b[7] = f.HopLimit
	copy(b[8:24], f.Src[:])
	copy(b[24:40], f.Dst[:])
}
