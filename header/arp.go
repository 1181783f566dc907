package header

import (
	"encoding/binary"
	"errors"
)

// ARP sizes and field values.
const (
	// ARPFixedSize is the length of the part of an ARP header before the
	// addresses: hardware and protocol types, address lengths, operation.
	ARPFixedSize = 8
	// ARPSize is the length of an Ethernet/IPv4 ARP packet.
	ARPSize = ARPFixedSize + 2*6 + 2*4
	// ARPHardwareEthernet is the hardware type of Ethernet.
	ARPHardwareEthernet uint16 = 1
	// ARPRequest and ARPReply are the operations of RFC 826.
	ARPRequest uint16 = 1
	ARPReply   uint16 = 2
)

// ErrTruncatedARP: the packet is shorter than the ARP header, or than the
// addresses it declares.
var ErrTruncatedARP = errors.New("header: truncated arp packet")

// ARP is a packet starting with an ARP header. The fixed-part accessors
// panic if the slice is shorter than ARPFixedSize, the address accessors
// if it is shorter than Len: call them once Check has accepted it.
type ARP []byte

// HardwareType returns the hardware address space (ARPHardwareEthernet).
func (b ARP) HardwareType() uint16 { return binary.BigEndian.Uint16(b[0:2]) }

// ProtocolType returns the protocol address space, an ethertype
// (EtherTypeIPv4).
func (b ARP) ProtocolType() uint16 { return binary.BigEndian.Uint16(b[2:4]) }

// HardwareAddressLength returns the length of a hardware address.
func (b ARP) HardwareAddressLength() int { return int(b[4]) }

// ProtocolAddressLength returns the length of a protocol address.
func (b ARP) ProtocolAddressLength() int { return int(b[5]) }

// Op returns the operation (ARPRequest, ARPReply).
func (b ARP) Op() uint16 { return binary.BigEndian.Uint16(b[6:8]) }

// Len returns the length of the packet as its header declares it: the
// fixed part and the four addresses.
func (b ARP) Len() int {
	return ARPFixedSize + 2*b.HardwareAddressLength() + 2*b.ProtocolAddressLength()
}

// IsEthernetIPv4 reports whether the packet maps IPv4 addresses to
// Ethernet ones, the only kind an Ethernet host answers.
func (b ARP) IsEthernetIPv4() bool {
	return b.HardwareType() == ARPHardwareEthernet && b.ProtocolType() == EtherTypeIPv4 &&
		b.HardwareAddressLength() == 6 && b.ProtocolAddressLength() == 4
}

// SenderHardwareAddress returns the sender hardware address, in place.
func (b ARP) SenderHardwareAddress() []byte {
	h := b.HardwareAddressLength()
	return b[ARPFixedSize : ARPFixedSize+h]
}

// SenderProtocolAddress returns the sender protocol address, in place.
func (b ARP) SenderProtocolAddress() []byte {
	h, p := b.HardwareAddressLength(), b.ProtocolAddressLength()
	return b[ARPFixedSize+h : ARPFixedSize+h+p]
}

// TargetHardwareAddress returns the target hardware address, in place.
func (b ARP) TargetHardwareAddress() []byte {
	h, p := b.HardwareAddressLength(), b.ProtocolAddressLength()
	return b[ARPFixedSize+h+p : ARPFixedSize+2*h+p]
}

// TargetProtocolAddress returns the target protocol address, in place.
func (b ARP) TargetProtocolAddress() []byte {
	h, p := b.HardwareAddressLength(), b.ProtocolAddressLength()
	off := ARPFixedSize + 2*h + p
	return b[off : off+p]
}

// Check validates the ARP header at the start of b, the first len(b)
// bytes of a packet of size bytes, as IPv4.Check does: it returns nil,
// ErrTruncatedARP or ErrSplitHeader. Once it accepts b, the Len bytes of
// the packet lie in b. It checks lengths only: whether the packet is one
// a host answers is IsEthernetIPv4's and Op's to say.
func (b ARP) Check(size int) error {
	if size < ARPFixedSize {
		return ErrTruncatedARP
	}
	if len(b) < ARPFixedSize {
		return ErrSplitHeader
	}
	n := b.Len()
	if size < n {
		return ErrTruncatedARP
	}
	if len(b) < n {
		return ErrSplitHeader
	}
	return nil
}

// IsValid reports whether Check(size) would accept b, small enough to
// inline.
func (b ARP) IsValid(size int) bool {
	if len(b) < ARPFixedSize {
		return false
	}
	// n is at least ARPFixedSize: n <= size implies size is too. Fields
	// read directly, as in IPv4.IsValid.
	n := ARPFixedSize + 2*int(b[4]) + 2*int(b[5])
	return n <= size && n <= len(b)
}

// ARPFields are the fields Encode writes into an Ethernet/IPv4 ARP
// packet.
type ARPFields struct {
	Op                 uint16
	SenderHardwareAddr [6]byte
	SenderProtocolAddr [4]byte
	TargetHardwareAddr [6]byte
	TargetProtocolAddr [4]byte
}

// Encode writes an Ethernet/IPv4 ARP packet from f into b[:ARPSize]. It
// panics if b is shorter.
func (b ARP) Encode(f *ARPFields) {
	_ = b[ARPSize-1]
	binary.BigEndian.PutUint16(b[0:2], ARPHardwareEthernet)
	binary.BigEndian.PutUint16(b[2:4], EtherTypeIPv4)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:8], f.Op)
	copy(b[8:14], f.SenderHardwareAddr[:])
	copy(b[14:18], f.SenderProtocolAddr[:])
	copy(b[18:24], f.TargetHardwareAddr[:])
	copy(b[24:28], f.TargetProtocolAddr[:])
}
