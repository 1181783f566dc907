package header

import (
	"encoding/binary"
	"errors"
)

// Ethertypes.
const (
	EtherTypeIPv4 uint16 = 0x0800
	EtherTypeARP  uint16 = 0x0806
	EtherTypeVLAN uint16 = 0x8100 // IEEE 802.1Q customer tag (C-tag)
	EtherTypeQinQ uint16 = 0x88a8 // IEEE 802.1ad service tag (S-tag)
	EtherTypeIPv6 uint16 = 0x86dd
)

// Sizes.
const (
	EthernetHeaderLen = 14 // destination, source, ethertype
	// EthernetMinFrameLen is the shortest Ethernet frame without FCS;
	// shorter frames are padded to it on the wire.
	EthernetMinFrameLen = 60
	VLANTagLen          = 4 // TPID and TCI
	// MaxVLANs is the number of VLAN tags a frame may carry: an 802.1Q
	// tag, or QinQ (an 802.1ad or 802.1Q tag over an 802.1Q tag). A frame
	// with more is refused everywhere (classify.ReasonTooManyVLANs,
	// wire.ErrTooManyVLANs).
	MaxVLANs = 2
	// MaxLinkHeaderLen is the longest link header: Ethernet and MaxVLANs
	// tags.
	MaxLinkHeaderLen = EthernetHeaderLen + MaxVLANs*VLANTagLen
)

// Link-layer parse errors. ParseLink returns them as they are, so that
// comparing with == is enough and reporting one allocates nothing.
var (
	// ErrTruncatedEthernet: shorter than an Ethernet header.
	ErrTruncatedEthernet = errors.New("header: truncated ethernet header")
	// ErrTruncatedVLAN: a VLAN tag is cut off.
	ErrTruncatedVLAN = errors.New("header: truncated vlan tag")
	// ErrTooManyVLANs: more than MaxVLANs VLAN tags.
	ErrTooManyVLANs = errors.New("header: too many vlan tags")
)

// ErrSplitHeader: the packet holds the header, but the bytes given do
// not. The Check methods take the first segment of a packet received into
// a chain of buffers (an mbuf chain: scattered RX, a jumbo frame in small
// mbufs) and the packet's length; a header that straddles two segments
// is refused with this error, never with a truncation error, since
// nothing is wrong with the packet. For a packet in one piece it never
// occurs.
var ErrSplitHeader = errors.New("header: header continues past the first segment")

// IsVLAN reports whether a frame's ethertype field et is the tag protocol
// identifier of a VLAN tag, that is whether a tag and another ethertype
// follow it.
func IsVLAN(et uint16) bool { return et == EtherTypeVLAN || et == EtherTypeQinQ }

// VLANTag is one VLAN tag.
type VLANTag struct {
	TPID uint16 // EtherTypeVLAN or EtherTypeQinQ
	TCI  uint16 // priority (3 bits), drop eligible (1), VLAN ID (12)
}

// VID returns the tag's VLAN ID.
func (t VLANTag) VID() uint16 { return t.TCI & 0x0fff }

// PCP returns the tag's priority code point.
func (t VLANTag) PCP() uint8 { return uint8(t.TCI >> 13) }

// VLANs is a stack of VLAN tags, outermost first; the zero value means an
// untagged frame. It is comparable, and copying it allocates nothing, so
// a reply can carry the tags of its request by value.
type VLANs struct {
	N    uint8 // tags in use, at most MaxVLANs
	Tags [MaxVLANs]VLANTag
}

// Dot1Q returns a single 802.1Q tag with tag control information tci.
func Dot1Q(tci uint16) VLANs {
	return VLANs{N: 1, Tags: [MaxVLANs]VLANTag{{TPID: EtherTypeVLAN, TCI: tci}}}
}

// QinQ returns an 802.1ad service tag with outer over an 802.1Q customer
// tag with inner.
func QinQ(outer, inner uint16) VLANs {
	return VLANs{N: 2, Tags: [MaxVLANs]VLANTag{{EtherTypeQinQ, outer}, {EtherTypeVLAN, inner}}}
}

// Len returns the bytes the tags take in a frame.
func (v *VLANs) Len() int { return int(v.N) * VLANTagLen }

// Link is a frame's link-layer header as ParseLink reads it.
type Link struct {
	// EtherType is the innermost ethertype, after the VLAN tags.
	EtherType uint16
	VLANs     VLANs
	// Len is the length of the link header, tags included: the offset of
	// the network-layer header.
	Len int
}

// ParseLink reads the Ethernet header of frame and the VLAN tags after it
// into l. It returns nil, ErrTruncatedEthernet, ErrTruncatedVLAN or
// ErrTooManyVLANs; on error l holds what was read up to that point. It
// reads only frame's link header and does not allocate.
func ParseLink(frame []byte, l *Link) error {
	*l = Link{}
	if len(frame) < EthernetHeaderLen {
		return ErrTruncatedEthernet
	}
	et := binary.BigEndian.Uint16(frame[12:14])
	off := EthernetHeaderLen
	for IsVLAN(et) {
		if l.VLANs.N == MaxVLANs {
			return ErrTooManyVLANs
		}
		if len(frame)-off < VLANTagLen {
			return ErrTruncatedVLAN
		}
		l.VLANs.Tags[l.VLANs.N] = VLANTag{TPID: et, TCI: binary.BigEndian.Uint16(frame[off:])}
		l.VLANs.N++
		et = binary.BigEndian.Uint16(frame[off+2:])
		off += VLANTagLen
	}
	l.EtherType = et
	l.Len = off
	return nil
}

// InnerEtherType returns the ethertype of frame after its VLAN tags and
// the length of its link header. ok is false when ParseLink would fail:
// the frame is too short for its link header or carries more than
// MaxVLANs tags; et and off mean nothing then. It is ParseLink for callers
// that need neither the tags nor the reason, small enough to inline into
// a packet-path switch.
func InnerEtherType(frame []byte) (et uint16, off int, ok bool) {
	// off is where the ethertype field read last ends.
	for off = EthernetHeaderLen; off <= len(frame); off += VLANTagLen {
		et = binary.BigEndian.Uint16(frame[off-2 : off])
		if !IsVLAN(et) {
			return et, off, true
		}
		if off == MaxLinkHeaderLen {
			break
		}
	}
	return et, off, false
}

// Ethernet is a frame starting with an Ethernet header, as in gVisor: its
// accessors read the header in place and panic if the frame is shorter
// than EthernetHeaderLen.
type Ethernet []byte

// Destination returns the destination MAC address.
func (b Ethernet) Destination() [6]byte { return [6]byte(b[0:6]) }

// Source returns the source MAC address.
func (b Ethernet) Source() [6]byte { return [6]byte(b[6:12]) }

// Type returns the outer ethertype field (a TPID if the frame is tagged).
func (b Ethernet) Type() uint16 { return binary.BigEndian.Uint16(b[12:14]) }

// Tag returns the frame's VLAN tag i, counting from the outermost (0): the
// four bytes at 12+4i. It reads whatever is there: call it for the tags
// ParseLink or InnerEtherType found.
func (b Ethernet) Tag(i int) VLANTag {
	off := 12 + i*VLANTagLen
	return VLANTag{TPID: binary.BigEndian.Uint16(b[off:]), TCI: binary.BigEndian.Uint16(b[off+2:])}
}

// LinkHeaderLen returns the length of a link header carrying v.
func LinkHeaderLen(v *VLANs) int { return EthernetHeaderLen + v.Len() }

// PutLink writes an Ethernet header from src to dst with the tags v and
// then ethertype et at the start of b, and returns its length,
// LinkHeaderLen(v). It panics if b is shorter, or if v holds more than
// MaxVLANs tags. A tag with TPID 0 is written as 802.1Q.
func PutLink(b []byte, dst, src [6]byte, v *VLANs, et uint16) int {
	n := LinkHeaderLen(v)
	_ = b[n-1] // one bounds check
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	off := 12
	for _, t := range v.Tags[:v.N] {
		tpid := t.TPID
		if tpid == 0 {
			tpid = EtherTypeVLAN
		}
		binary.BigEndian.PutUint16(b[off:], tpid)
		binary.BigEndian.PutUint16(b[off+2:], t.TCI)
		off += VLANTagLen
	}
	binary.BigEndian.PutUint16(b[off:], et)
	return n
}
