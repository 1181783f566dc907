package header

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// IPv4 sizes and field values.
const (
	// IPv4MinimumSize is the length of an IPv4 header without options
	// (IHL 5).
	IPv4MinimumSize = 20
	// IPv4MaximumHeaderSize is the longest IPv4 header (IHL 15).
	IPv4MaximumHeaderSize = 60
	// IPv4Version is the version field of an IPv4 header.
	IPv4Version = 4

	// IPv4FlagDontFragment and IPv4FlagMoreFragments are the DF and MF
	// bits of the flags-and-fragment-offset field (FlagsFragmentOffset).
	IPv4FlagDontFragment  uint16 = 0x4000
	IPv4FlagMoreFragments uint16 = 0x2000
	// ipv4FragmentOffsetMask selects the fragment offset, in 8-byte
	// units, in the same field.
	ipv4FragmentOffsetMask uint16 = 0x1fff
)

// IPv4 parse errors; see IPv4.Check.
var (
	// ErrTruncatedIPv4: the packet is shorter than an IPv4 header or than
	// its total length.
	ErrTruncatedIPv4 = errors.New("header: truncated ipv4 packet")
	// ErrBadIPv4Header: the version is not 4 or the IHL is below 5.
	ErrBadIPv4Header = errors.New("header: bad ipv4 version or header length")
	// ErrBadIPv4Length: the total length is below the header length.
	ErrBadIPv4Length = errors.New("header: ipv4 total length below its header length")
)

// IPv4 is a packet starting with an IPv4 header. Its accessors read the
// header in place; like gVisor's, they panic if the slice is shorter than
// IPv4MinimumSize, so call them once Check or IsValid has accepted it.
type IPv4 []byte

// Version returns the version field, the first nibble.
func (b IPv4) Version() uint8 { return b[0] >> 4 }

// HeaderLength returns the header length in bytes, from the IHL field.
func (b IPv4) HeaderLength() int { return int(b[0]&0x0f) * 4 }

// TOS returns the type-of-service byte, ECN bits included.
func (b IPv4) TOS() uint8 { return b[1] }

// TotalLength returns the total length field: header and payload.
func (b IPv4) TotalLength() int { return int(binary.BigEndian.Uint16(b[2:4])) }

// ID returns the identification field.
func (b IPv4) ID() uint16 { return binary.BigEndian.Uint16(b[4:6]) }

// FlagsFragmentOffset returns the flags (IPv4FlagDontFragment,
// IPv4FlagMoreFragments) and the fragment offset as one 16-bit field.
func (b IPv4) FlagsFragmentOffset() uint16 { return binary.BigEndian.Uint16(b[6:8]) }

// FragmentOffset returns the fragment offset in 8-byte units.
func (b IPv4) FragmentOffset() uint16 { return IPv4FragmentOffset(b.FlagsFragmentOffset()) }

// IPv4FragmentOffset is IPv4.FragmentOffset on a flags-and-fragment-offset
// field already read.
func IPv4FragmentOffset(ff uint16) uint16 { return ff & ipv4FragmentOffsetMask }

// IsFragment reports whether the packet is a fragment of a larger
// datagram: More Fragments set or a nonzero offset. Only the first
// fragment (offset 0) carries the transport header.
func (b IPv4) IsFragment() bool { return IPv4IsFragment(b.FlagsFragmentOffset()) }

// IPv4IsFragment is IPv4.IsFragment on a flags-and-fragment-offset field
// already read.
func IPv4IsFragment(ff uint16) bool {
	return ff&(IPv4FlagMoreFragments|ipv4FragmentOffsetMask) != 0
}

// TTL returns the time-to-live field.
func (b IPv4) TTL() uint8 { return b[8] }

// Protocol returns the protocol field: the upper-layer protocol.
func (b IPv4) Protocol() uint8 { return b[9] }

// Checksum returns the header checksum field.
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[10:12]) }

// SourceAddress returns the source address.
func (b IPv4) SourceAddress() netip.Addr { return netip.AddrFrom4([4]byte(b[12:16])) }

// DestinationAddress returns the destination address.
func (b IPv4) DestinationAddress() netip.Addr { return netip.AddrFrom4([4]byte(b[16:20])) }

// IsChecksumValid reports whether the header checksum verifies: the one's
// complement sum of the HeaderLength bytes of the header is all ones.
func (b IPv4) IsChecksumValid() bool { return Checksum(b[:b.HeaderLength()]) == 0xffff }

// Check validates the IPv4 header at the start of b, the first len(b)
// bytes of a packet of size bytes (size is len(b) unless the packet
// continues in another segment of a chain). It returns nil,
// ErrTruncatedIPv4, ErrBadIPv4Header, ErrBadIPv4Length or, when the
// packet holds the header but b does not, ErrSplitHeader; the first
// failing check wins, and lengths are checked against size before b. It
// does not verify the header checksum (IsChecksumValid), which only a
// consumer that owns the packet pays for. Once Check accepts b, the
// HeaderLength bytes of the header lie in b and TotalLength is within
// size.
func (b IPv4) Check(size int) error {
	if size < IPv4MinimumSize {
		return ErrTruncatedIPv4
	}
	if len(b) < IPv4MinimumSize {
		return ErrSplitHeader
	}
	ihl := b.HeaderLength()
	if b.Version() != IPv4Version || ihl < IPv4MinimumSize {
		return ErrBadIPv4Header
	}
	total := b.TotalLength()
	if total < ihl {
		return ErrBadIPv4Length
	}
	if total > size {
		return ErrTruncatedIPv4
	}
	if len(b) < ihl {
		return ErrSplitHeader
	}
	return nil
}

// IsValid reports whether Check(size) would accept b, as gVisor's
// IPv4.IsValid(pktSize) does: the same rules, small enough to inline, for
// the packet path, which calls Check only to name what is wrong.
func (b IPv4) IsValid(size int) bool {
	if len(b) < IPv4MinimumSize {
		return false
	}
	// total <= size below implies size >= IPv4MinimumSize. The fields
	// are read directly, not through the accessors: each inlined call
	// can leave a marker instruction in the caller's packet path.
	ihl, total := int(b[0]&0x0f)*4, int(binary.BigEndian.Uint16(b[2:4]))
	return b[0]>>4 == IPv4Version && ihl >= IPv4MinimumSize && total >= ihl && total <= size && ihl <= len(b)
}

// IPv4Fields are the fields Encode writes into an IPv4 header without
// options.
type IPv4Fields struct {
	TOS         uint8
	TotalLength uint16
	ID          uint16
	// FlagsFragmentOffset is the flags (IPv4FlagDontFragment...) and the
	// fragment offset, as FlagsFragmentOffset returns them.
	FlagsFragmentOffset uint16
	TTL                 uint8
	Protocol            uint8
	Src, Dst            [4]byte
}

// Encode writes an IPv4 header without options (IHL 5) from f into
// b[:IPv4MinimumSize], checksum included. It panics if b is shorter.
func (b IPv4) Encode(f *IPv4Fields) {
	_ = b[IPv4MinimumSize-1]
	b[0] = IPv4Version<<4 | IPv4MinimumSize/4
	b[1] = f.TOS
	binary.BigEndian.PutUint16(b[2:4], f.TotalLength)
	binary.BigEndian.PutUint16(b[4:6], f.ID)
	binary.BigEndian.PutUint16(b[6:8], f.FlagsFragmentOffset)
	b[8] = f.TTL
	b[9] = f.Protocol
	b[10], b[11] = 0, 0
	copy(b[12:16], f.Src[:])
	copy(b[16:20], f.Dst[:])
	binary.BigEndian.PutUint16(b[10:12], ^Checksum(b[:IPv4MinimumSize]))
}

// Checksum returns the 16-bit one's complement sum of b (RFC 1071), an
// odd last byte padded with zero. A header with a correct checksum field
// sums to 0xffff; the field to store is the complement of the sum taken
// with the field zero.
func Checksum(b []byte) uint16 {
	var sum uint32
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
