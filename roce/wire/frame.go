package wire

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/cephdpdkd/cephdpdkd/header"
)

// FrameHeader is the per-flow part of a frame that BuildFrame writes:
// everything below the BTH.
type FrameHeader struct {
	SrcMAC, DstMAC [6]byte
	// VLANs are the VLAN tags to write, outermost first: those of the
	// frame being answered (Packet.VLANs), or none.
	VLANs header.VLANs

	// SrcIP and DstIP select the IP version: IPv4 when both are IPv4 or
	// IPv4-mapped IPv6 (GID form), IPv6 otherwise.
	SrcIP, DstIP netip.Addr
	TOS          uint8  // IPv4 TOS or IPv6 traffic class
	TTL          uint8  // IPv4 TTL or IPv6 hop limit
	IPID         uint16 // IPv4 identification
	FlowLabel    uint32 // IPv6 flow label (20 bits)
	UDPSrc       uint16
}

// PadLen returns the pad bytes that follow a payload of n bytes.
func PadLen(n int) int { return -n & 3 }

// FrameLen returns the length of an untagged frame carrying op with
// payloadLen bytes of payload, pad and ICRC included; add
// header.VLANTagLen per VLAN tag. Unknown opcodes count no extension
// headers.
func FrameLen(op Opcode, payloadLen int, ipv6 bool) int {
	n := header.EthernetHeaderLen + header.IPv4MinimumSize
	if ipv6 {
		n = header.EthernetHeaderLen + header.IPv6MinimumSize
	}
	return n + header.UDPMinimumSize + BTHLen + op.ExtHeaderLen() + payloadLen + PadLen(payloadLen) + ICRCLen
}

// BuildFrame writes a complete RoCEv2 frame into buf and returns its
// length: Ethernet with h.VLANs' tags, IPv4 (DF set, header checksum
// computed, no options) or IPv6, UDP to port 4791 with checksum 0, the
// BTH from p.BTH, the extension headers p.BTH.Opcode calls for taken from
// p (RETH, AETH, DETH, Atomic, AtomicAck, Imm, IETH), payload, zero pad
// and the ICRC. p.BTH.PadCnt is ignored and set from len(payload);
// p.Payload is ignored. BuildFrame allocates nothing.
func BuildFrame(buf []byte, h *FrameHeader, p *Packet, payload []byte) (int, error) {
	op := p.BTH.Opcode
	if !op.Valid() {
		return 0, fmt.Errorf("build frame: opcode %v: %w", op, ErrUnknownOpcode)
	}
	if !op.HasPayload() && len(payload) > 0 {
		return 0, errNoPayload
	}
	src, dst := h.SrcIP.Unmap(), h.DstIP.Unmap()
	if !src.IsValid() || !dst.IsValid() {
		return 0, errAddrInvalid
	}
	if src.Is4() != dst.Is4() {
		return 0, errAddrFamily
	}
	ipv6 := !src.Is4()
	if h.VLANs.N > header.MaxVLANs {
		return 0, fmt.Errorf("build frame: %d vlan tags: %w", h.VLANs.N, ErrTooManyVLANs)
	}
	n := FrameLen(op, len(payload), ipv6) + h.VLANs.Len()
	if len(buf) < n {
		return 0, ErrShortBuffer
	}
	b := buf[:n]

	et := header.EtherTypeIPv4
	if ipv6 {
		et = header.EtherTypeIPv6
	}
	ipOff := header.PutLink(b, h.DstMAC, h.SrcMAC, &h.VLANs, et)
	var off int
	if ipv6 {
		plen := n - ipOff - header.IPv6MinimumSize
		if plen > 0xFFFF {
			return 0, fmt.Errorf("build frame: ipv6 payload %d bytes: %w", plen, ErrBadLength)
		}
		header.IPv6(b[ipOff:]).Encode(&header.IPv6Fields{
			TrafficClass:  h.TOS,
			FlowLabel:     h.FlowLabel,
			PayloadLength: uint16(plen),
			NextHeader:    header.ProtoUDP,
			HopLimit:      h.TTL,
			Src:           src.As16(),
			Dst:           dst.As16(),
		})
		off = ipOff + header.IPv6MinimumSize
	} else {
		tl := n - ipOff
		if tl > 0xFFFF {
			return 0, fmt.Errorf("build frame: ipv4 datagram %d bytes: %w", tl, ErrBadLength)
		}
		header.IPv4(b[ipOff:]).Encode(&header.IPv4Fields{
			TOS:                 h.TOS,
			TotalLength:         uint16(tl),
			ID:                  h.IPID,
			FlagsFragmentOffset: header.IPv4FlagDontFragment,
			TTL:                 h.TTL,
			Protocol:            header.ProtoUDP,
			Src:                 src.As4(),
			Dst:                 dst.As4(),
		})
		off = ipOff + header.IPv4MinimumSize
	}

	// UDP checksum 0, as rxe sends it: the ICRC covers the packet.
	header.UDP(b[off:]).Encode(&header.UDPFields{SrcPort: h.UDPSrc, DstPort: UDPPort, Length: uint16(n - off)})
	off += header.UDPMinimumSize

	bth := p.BTH
	bth.PadCnt = uint8(PadLen(len(payload)))
	bth.Encode(b[off:])
	off += BTHLen
	off += p.encodeExt(op, b[off:])
	off += copy(b[off:], payload)
	icrcOff := n - ICRCLen
	clear(b[off:icrcOff])
	binary.LittleEndian.PutUint32(b[icrcOff:], ICRC(b[ipOff:icrcOff]))
	return n, nil
}
