package header

import (
	"encoding/binary"
	"errors"
)

// IP protocol numbers (IPv4 protocol, IPv6 next header).
const (
	ProtoICMP   uint8 = 1
	ProtoTCP    uint8 = 6
	ProtoUDP    uint8 = 17
	ProtoICMPv6 uint8 = 58
)

// Transport header sizes.
const (
	// TCPMinimumSize is the length of a TCP header without options (data
	// offset 5).
	TCPMinimumSize = 20
	// UDPMinimumSize is the length of a UDP header.
	UDPMinimumSize = 8
	// PortsSize is the length of the source and destination ports that
	// start both TCP and UDP headers: what a first fragment must hold for
	// its ports to be read.
	PortsSize = 4
)

// Transport parse errors; see TCP.Check and UDP.Check.
var (
	// ErrTruncatedTCP: the packet is too short for a TCP header.
	ErrTruncatedTCP = errors.New("header: truncated tcp header")
	// ErrBadTCPHeader: the data offset is below 5 or beyond the packet.
	ErrBadTCPHeader = errors.New("header: bad tcp data offset")
	// ErrTruncatedUDP: the packet is too short for a UDP header.
	ErrTruncatedUDP = errors.New("header: truncated udp header")
	// ErrBadUDPLength: the UDP length is below 8 or beyond the packet.
	ErrBadUDPLength = errors.New("header: bad udp length")
)

// TCP is a segment starting with a TCP header. Its accessors panic if the
// slice is shorter than TCPMinimumSize (SourcePort and DestinationPort:
// PortsSize).
type TCP []byte

// SourcePort returns the source port.
func (b TCP) SourcePort() uint16 { return binary.BigEndian.Uint16(b[0:2]) }

// DestinationPort returns the destination port.
func (b TCP) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[2:4]) }

// DataOffset returns the header length in bytes, options included.
func (b TCP) DataOffset() int { return int(b[12]>>4) * 4 }

// Check validates the TCP header at the start of b, the first len(b)
// bytes of a segment of size bytes (from the IP header's upper-layer
// offset to the end the IP header declares; len(b) may exceed it when
// link padding follows). It returns nil, ErrTruncatedTCP, ErrBadTCPHeader
// or, when the segment holds the header but b does not, ErrSplitHeader.
// Once it accepts b, the DataOffset bytes of the header lie in b and
// within size.
func (b TCP) Check(size int) error {
	if size < TCPMinimumSize {
		return ErrTruncatedTCP
	}
	if len(b) < TCPMinimumSize {
		return ErrSplitHeader
	}
	doff := b.DataOffset()
	if doff < TCPMinimumSize || doff > size {
		return ErrBadTCPHeader
	}
	if len(b) < doff {
		return ErrSplitHeader
	}
	return nil
}

// IsValid reports whether Check(size) would accept b, small enough to
// inline.
func (b TCP) IsValid(size int) bool {
	// One expression, fields read directly, as in IPv4.IsValid. doff <=
	// size implies size >= TCPMinimumSize; min folds for a whole
	// segment (size == len(b)).
	return len(b) >= TCPMinimumSize && int(b[12]>>4)*4 >= TCPMinimumSize && int(b[12]>>4)*4 <= min(size, len(b))
}

// UDP is a datagram starting with a UDP header. Its accessors panic if
// the slice is shorter than UDPMinimumSize (SourcePort and
// DestinationPort: PortsSize).
type UDP []byte

// SourcePort returns the source port.
func (b UDP) SourcePort() uint16 { return binary.BigEndian.Uint16(b[0:2]) }

// DestinationPort returns the destination port.
func (b UDP) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[2:4]) }

// Length returns the length field: header and payload.
func (b UDP) Length() int { return int(binary.BigEndian.Uint16(b[4:6])) }

// Checksum returns the checksum field.
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[6:8]) }

// Check validates the UDP header at the start of b, the first len(b)
// bytes of a datagram of size bytes, as TCP.Check does: it returns nil,
// ErrTruncatedUDP, ErrBadUDPLength or ErrSplitHeader. A UDP length
// below size is accepted, the rest being ignored, as Linux does; one
// beyond it is not.
func (b UDP) Check(size int) error {
	if size < UDPMinimumSize {
		return ErrTruncatedUDP
	}
	if len(b) < UDPMinimumSize {
		return ErrSplitHeader
	}
	if l := b.Length(); l < UDPMinimumSize || l > size {
		return ErrBadUDPLength
	}
	return nil
}

// IsValid reports whether Check(size) would accept b, small enough to
// inline.
func (b UDP) IsValid(size int) bool {
	// One expression, fields read directly, as in IPv4.IsValid. l <=
	// size implies size >= UDPMinimumSize.
	return len(b) >= UDPMinimumSize && int(binary.BigEndian.Uint16(b[4:6])) >= UDPMinimumSize &&
		int(binary.BigEndian.Uint16(b[4:6])) <= size
}

// UDPFields are the fields Encode writes into a UDP header.
type UDPFields struct {
	SrcPort, DstPort uint16
	Length           uint16
	Checksum         uint16
}

// Encode writes a UDP header from f into b[:UDPMinimumSize]. It panics if
// b is shorter.
func (b UDP) Encode(f *UDPFields) {
	_ = b[UDPMinimumSize-1]
	binary.BigEndian.PutUint16(b[0:2], f.SrcPort)
	binary.BigEndian.PutUint16(b[2:4], f.DstPort)
	binary.BigEndian.PutUint16(b[4:6], f.Length)
	binary.BigEndian.PutUint16(b[6:8], f.Checksum)
}
