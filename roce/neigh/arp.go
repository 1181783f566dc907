package neigh

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"github.com/cephdpdkd/cephdpdkd/header"
)

// ARP operations.
const (
	OpRequest = 1
	OpReply   = 2
)

// Frame layout.
const (
	EtherTypeARP  = header.EtherTypeARP
	etherTypeIPv4 = header.EtherTypeIPv4
	arpLen        = 28 // Ethernet/IPv4 ARP body
	// MinFrameLen is the Ethernet minimum without FCS; BuildARP pads to it
	// as the kernel's NIC drivers do. Tagged or not, an ARP frame fits.
	MinFrameLen = header.EthernetMinFrameLen
)

// An ARP frame behind the most tags still fits in MinFrameLen.
var _ [MinFrameLen - header.MaxLinkHeaderLen - arpLen]struct{}

// Parse errors.
var (
	// ErrNotARP: the frame is not an ARP frame (another EtherType).
	ErrNotARP = errors.New("neigh: not an arp frame")
	// ErrTruncated: the frame ends inside the Ethernet, VLAN or ARP
	// header.
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
	// VLANs are the frame's VLAN tags (802.1Q, QinQ), outermost first; a
	// reply carries those of its request.
	VLANs header.VLANs

	Op        uint16 // OpRequest or OpReply
	SenderMAC [6]byte
	SenderIP  netip.Addr // IPv4
	TargetMAC [6]byte
	TargetIP  netip.Addr // IPv4
}

// IsARP reports whether frame is an Ethernet frame of EtherType ARP,
// untagged or behind up to header.MaxVLANs VLAN tags.
func IsARP(frame []byte) bool {
	et, _, ok := header.InnerEtherType(frame)
	return ok && et == EtherTypeARP
}

// ParseARP decodes an Ethernet/IPv4 ARP request or reply, untagged or
// behind up to header.MaxVLANs VLAN tags (802.1Q, QinQ); bytes after the
// ARP body (Ethernet padding) are ignored. A frame with more tags fails
// with header.ErrTooManyVLANs. It reads nothing beyond frame and
// allocates nothing.
func ParseARP(frame []byte, a *ARP) error {
	*a = ARP{}
	var l header.Link
	switch err := header.ParseLink(frame, &l); {
	case err == header.ErrTooManyVLANs:
		return err
	case err != nil:
		return ErrTruncated
	case l.EtherType != EtherTypeARP:
		return ErrNotARP
	case len(frame)-l.Len < arpLen:
		return ErrTruncated
	}
	e := header.Ethernet(frame)
	a.DstMAC, a.SrcMAC = e.Destination(), e.Source()
	a.VLANs = l.VLANs
	b := frame[l.Len : l.Len+arpLen]
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

// BuildARP writes a as an Ethernet frame with a.VLANs' tags into buf,
// zero-padded to MinFrameLen, and returns its length. SenderIP and
// TargetIP must be IPv4 (or IPv4-mapped) addresses.
func BuildARP(buf []byte, a *ARP) (int, error) {
	if !a.SenderIP.Unmap().Is4() || !a.TargetIP.Unmap().Is4() || a.VLANs.N > header.MaxVLANs {
		return 0, ErrUnsupported
	}
	if len(buf) < MinFrameLen {
		return 0, ErrTruncated
	}
	clear(buf[:MinFrameLen])
	off := header.PutLink(buf, a.DstMAC, a.SrcMAC, &a.VLANs, EtherTypeARP)
	b := buf[off : off+arpLen]
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
