package neigh

import (
	"errors"
	"net/netip"

	"github.com/cephdpdkd/cephdpdkd/header"
)

// ARP operations.
const (
	OpRequest = header.ARPRequest
	OpReply   = header.ARPReply
)

// Frame layout.
const (
	EtherTypeARP = header.EtherTypeARP
	// MinFrameLen is the Ethernet minimum without FCS; BuildARP pads to it
	// as the kernel's NIC drivers do. Tagged or not, an ARP frame fits.
	MinFrameLen = header.EthernetMinFrameLen
)

// An ARP frame behind the most tags still fits in MinFrameLen.
var _ [MinFrameLen - header.MaxLinkHeaderLen - header.ARPSize]struct{}

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
// ARP body (Ethernet padding) are ignored. The link and ARP headers are
// read by package header's rules, the classifier's: a frame the
// classifier calls a truncated ARP packet is ErrTruncated here, and a
// frame with more tags fails with header.ErrTooManyVLANs. It reads
// nothing beyond frame and allocates nothing.
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
	}
	b := header.ARP(frame[l.Len:])
	if b.Check(len(b)) != nil {
		return ErrTruncated
	}
	e := header.Ethernet(frame)
	a.DstMAC, a.SrcMAC = e.Destination(), e.Source()
	a.VLANs = l.VLANs
	if !b.IsEthernetIPv4() {
		return ErrUnsupported
	}
	a.Op = b.Op()
	if a.Op != OpRequest && a.Op != OpReply {
		return ErrUnsupported
	}
	a.SenderMAC = [6]byte(b.SenderHardwareAddress())
	a.SenderIP = netip.AddrFrom4([4]byte(b.SenderProtocolAddress()))
	a.TargetMAC = [6]byte(b.TargetHardwareAddress())
	a.TargetIP = netip.AddrFrom4([4]byte(b.TargetProtocolAddress()))
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
	header.ARP(buf[off:]).Encode(&header.ARPFields{
		Op:                 a.Op,
		SenderHardwareAddr: a.SenderMAC,
		SenderProtocolAddr: a.SenderIP.Unmap().As4(),
		TargetHardwareAddr: a.TargetMAC,
		TargetProtocolAddr: a.TargetIP.Unmap().As4(),
	})
	return MinFrameLen, nil
}
