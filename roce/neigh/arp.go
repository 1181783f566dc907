package neigh

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// ARP operations.
const (
	OpRequest = 1
	OpReply   = 2
)

// Frame layout.
const (
	EtherTypeARP  = 0x0806
	etherTypeIPv4 = 0x0800
	etherTypeVLAN = 0x8100
	ethHdrLen     = 14
	vlanTagLen    = 4
	arpLen        = 28 // Ethernet/IPv4 ARP body
	// MinFrameLen is the Ethernet minimum without FCS; BuildARP pads to it
	// as the kernel's NIC drivers do.
	MinFrameLen = 60
)

// Parse errors.
var (
	// ErrNotARP: the frame is not an ARP frame (another EtherType).
	ErrNotARP = errors.New("neigh: not an arp frame")
	// ErrTruncated: the frame ends inside the Ethernet or ARP header.
	ErrTruncated = errors.New("neigh: truncated arp frame")
	// ErrUnsupported: ARP for something other than Ethernet and IPv4, or
	// an operation other than request and reply.
	ErrUnsupported = errors.New("neigh: unsupported arp frame")
)

var broadcastMAC = [6]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// ARP is an Ethernet/IPv4 ARP packet with the Ethernet header it came in
// (or goes out) with.
type ARP struct {
	DstMAC, SrcMAC [6]byte // Ethernet header
	VLAN           bool    // an 802.1Q tag is present
	VLANTCI        uint16

	Op        uint16 // OpRequest or OpReply
	SenderMAC [6]byte
	SenderIP  netip.Addr // IPv4
	TargetMAC [6]byte
	TargetIP  netip.Addr // IPv4
}

// etherType returns the EtherType of frame after at most one 802.1Q tag
// and the offset of what follows, or ok false if the frame is too short.
func etherType(frame []byte) (et uint16, off int, ok bool) {
	if len(frame) < ethHdrLen {
		return 0, 0, false
	}
	et = binary.BigEndian.Uint16(frame[12:14])
	off = ethHdrLen
	if et == etherTypeVLAN {
		if len(frame) < ethHdrLen+vlanTagLen {
			return 0, 0, false
		}
		et = binary.BigEndian.Uint16(frame[16:18])
		off += vlanTagLen
	}
	return et, off, true
}

// IsARP reports whether frame is an Ethernet frame of EtherType ARP,
// optionally behind one 802.1Q tag.
func IsARP(frame []byte) bool {
	et, _, ok := etherType(frame)
	return ok && et == EtherTypeARP
}

// ParseARP decodes an Ethernet/IPv4 ARP request or reply, optionally
// behind one 802.1Q tag; bytes after the ARP body (Ethernet padding) are
// ignored. It reads nothing beyond frame and allocates nothing.
func ParseARP(frame []byte, a *ARP) error {
	*a = ARP{}
	et, off, ok := etherType(frame)
	switch {
	case !ok:
		return ErrTruncated
	case et != EtherTypeARP:
		return ErrNotARP
	case len(frame)-off < arpLen:
		return ErrTruncated
	}
	copy(a.DstMAC[:], frame[0:6])
	copy(a.SrcMAC[:], frame[6:12])
	if off > ethHdrLen {
		a.VLAN = true
		a.VLANTCI = binary.BigEndian.Uint16(frame[14:16])
	}
	b := frame[off : off+arpLen]
	// Hardware type Ethernet (1), protocol IPv4, address lengths 6 and 4.
	if binary.BigEndian.Uint16(b[0:2]) != 1 || binary.BigEndian.Uint16(b[2:4]) != etherTypeIPv4 || b[4] != 6 || b[5] != 4 {
		return ErrUnsupported
	}
	a.Op = binary.BigEndian.Uint16(b[6:8])
	if a.Op != OpRequest && a.Op != OpReply {
		return ErrUnsupported
	}
	copy(a.SenderMAC[:], b[8:14])
	a.SenderIP = netip.AddrFrom4([4]byte(b[14:18]))
	copy(a.TargetMAC[:], b[18:24])
	a.TargetIP = netip.AddrFrom4([4]byte(b[24:28]))
	return nil
}

// BuildARP writes a as an Ethernet frame into buf, zero-padded to
// MinFrameLen, and returns its length. SenderIP and TargetIP must be IPv4
// (or IPv4-mapped) addresses.
func BuildARP(buf []byte, a *ARP) (int, error) {
	if !a.SenderIP.Unmap().Is4() || !a.TargetIP.Unmap().Is4() {
		return 0, ErrUnsupported
	}
	if len(buf) < MinFrameLen {
		return 0, ErrTruncated
	}
	clear(buf[:MinFrameLen])
	copy(buf[0:6], a.DstMAC[:])
	copy(buf[6:12], a.SrcMAC[:])
	off := 12
	if a.VLAN {
		binary.BigEndian.PutUint16(buf[12:14], etherTypeVLAN)
		binary.BigEndian.PutUint16(buf[14:16], a.VLANTCI)
		off += vlanTagLen
	}
	binary.BigEndian.PutUint16(buf[off:off+2], EtherTypeARP)
	b := buf[off+2 : off+2+arpLen]
	binary.BigEndian.PutUint16(b[0:2], 1)
	binary.BigEndian.PutUint16(b[2:4], etherTypeIPv4)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:8], a.Op)
	copy(b[8:14], a.SenderMAC[:])
	s4 := a.SenderIP.Unmap().As4()
	copy(b[14:18], s4[:])
	copy(b[18:24], a.TargetMAC[:])
	t4 := a.TargetIP.Unmap().As4()
	copy(b[24:28], t4[:])
	return MinFrameLen, nil
}
