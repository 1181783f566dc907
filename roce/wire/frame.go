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
	n := ethHdrLen + ipv4MinHdrLen
	if ipv6 {
		n = ethHdrLen + ipv6HdrLen
	}
	return n + udpHdrLen + BTHLen + op.ExtHeaderLen() + payloadLen + PadLen(payloadLen) + ICRCLen
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
		ip := b[ipOff : ipOff+ipv6HdrLen]
		plen := n - ipOff - ipv6HdrLen
		if plen > 0xFFFF {
			return 0, fmt.Errorf("build frame: ipv6 payload %d bytes: %w", plen, ErrBadLength)
		}
		binary.BigEndian.PutUint32(ip[0:4], 6<<28|uint32(h.TOS)<<20|h.FlowLabel&0xFFFFF)
		binary.BigEndian.PutUint16(ip[4:6], uint16(plen))
		ip[6] = ipProtoUDP
		ip[7] = h.TTL
		a16, b16 := src.As16(), dst.As16()
		copy(ip[8:24], a16[:])
		copy(ip[24:40], b16[:])
		off = ipOff + ipv6HdrLen
	} else {
		ip := b[ipOff : ipOff+ipv4MinHdrLen]
		tl := n - ipOff
		if tl > 0xFFFF {
			return 0, fmt.Errorf("build frame: ipv4 datagram %d bytes: %w", tl, ErrBadLength)
		}
		ip[0] = 0x45
		ip[1] = h.TOS
		binary.BigEndian.PutUint16(ip[2:4], uint16(tl))
		binary.BigEndian.PutUint16(ip[4:6], h.IPID)
		binary.BigEndian.PutUint16(ip[6:8], 0x4000) // DF
		ip[8] = h.TTL
		ip[9] = ipProtoUDP
		ip[10], ip[11] = 0, 0
		a4, b4 := src.As4(), dst.As4()
		copy(ip[12:16], a4[:])
		copy(ip[16:20], b4[:])
		binary.BigEndian.PutUint16(ip[10:12], ipv4Checksum(ip))
		off = ipOff + ipv4MinHdrLen
	}

	u := b[off : off+udpHdrLen]
	binary.BigEndian.PutUint16(u[0:2], h.UDPSrc)
	binary.BigEndian.PutUint16(u[2:4], UDPPort)
	binary.BigEndian.PutUint16(u[4:6], uint16(n-off))
	u[6], u[7] = 0, 0
	off += udpHdrLen

	bth := p.BTH
	bth.PadCnt = uint8(PadLen(len(payload)))
	bth.Encode(b[off:])
	off += BTHLen
	f := opTable[op].flags
	if f&fDETH != 0 {
		p.DETH.Encode(b[off:])
		off += DETHLen
	}
	if f&fRETH != 0 {
		p.RETH.Encode(b[off:])
		off += RETHLen
	}
	if f&fAtomicETH != 0 {
		p.Atomic.Encode(b[off:])
		off += AtomicETHLen
	}
	if f&fAETH != 0 {
		p.AETH.Encode(b[off:])
		off += AETHLen
	}
	if f&fAtomicAckETH != 0 {
		p.AtomicAck.Encode(b[off:])
		off += AtomicAckETHLen
	}
	if f&fImm != 0 {
		binary.BigEndian.PutUint32(b[off:], p.Imm)
		off += ImmLen
	}
	if f&fIETH != 0 {
		binary.BigEndian.PutUint32(b[off:], p.IETH)
		off += IETHLen
	}
	off += copy(b[off:], payload)
	icrcOff := n - ICRCLen
	clear(b[off:icrcOff])
	binary.LittleEndian.PutUint32(b[icrcOff:], ICRC(b[ipOff:icrcOff]))
	return n, nil
}
