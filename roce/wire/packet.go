package wire

import (
	"encoding/binary"
	"net/netip"

	"github.com/cephdpdkd/cephdpdkd/header"
)

const (
	ethHdrLen  = header.EthernetHeaderLen
	ipProtoUDP = 17
)

// Packet is a decoded RoCEv2 frame. ParsePacket fills it in one pass
// without allocating; Payload aliases the frame, so a Packet is valid only
// as long as the frame bytes are.
type Packet struct {
	DstMAC, SrcMAC [6]byte
	// VLANs are the frame's VLAN tags (802.1Q, QinQ), outermost first;
	// an answer carries the same (FrameHeader.VLANs).
	VLANs header.VLANs

	SrcIP, DstIP netip.Addr // 4-byte addresses for IPv4 frames
	TOS          uint8      // IPv4 TOS or IPv6 traffic class, ECN bits included
	TTL          uint8      // IPv4 TTL or IPv6 hop limit
	IPID         uint16     // IPv4 identification (0 for IPv6)
	FlowLabel    uint32     // IPv6 flow label (0 for IPv4)
	UDPSrc       uint16

	BTH BTH
	// Extension headers; each is meaningful only when BTH.Opcode has it
	// (HasRETH, HasAETH, ...), and zero otherwise.
	RETH      RETH
	AETH      AETH
	DETH      DETH
	Atomic    AtomicETH
	AtomicAck AtomicAckETH
	Imm       uint32 // immediate data, host order of the big-endian wire value
	IETH      uint32 // R_Key to invalidate

	// Payload is the data after the extension headers, pad excluded. Its
	// capacity ends with it, so appending never overwrites the frame.
	Payload []byte
	ICRC    uint32 // the trailer as received
}

// ParsePacket decodes an Ethernet frame, untagged or behind up to
// header.MaxVLANs VLAN tags (802.1Q, QinQ: the classifier's rules),
// carrying IPv4 or IPv6, UDP to port 4791, a BTH with extension headers,
// payload, pad and ICRC. Bytes after the IP datagram (Ethernet padding)
// are ignored.
//
// It checks every length, the IPv4 header checksum, TVer, that the
// opcode is known, PadCnt against the bytes left, and the ICRC. Errors
// wrap ErrTruncated, ErrTooManyVLANs, ErrNotRoCE, ErrBadLength,
// ErrBadChecksum, ErrBadTVer, ErrUnknownOpcode, ErrBadPad or ErrBadICRC.
// When only the ICRC is wrong, p is fully decoded before ErrBadICRC is
// returned, so callers can log what they drop.
func ParsePacket(frame []byte, p *Packet) error {
	*p = Packet{}
	var l header.Link
	if err := header.ParseLink(frame, &l); err != nil {
		return linkError(err)
	}
	e := header.Ethernet(frame)
	p.DstMAC, p.SrcMAC = e.Destination(), e.Source()
	p.VLANs = l.VLANs
	off, et := l.Len, l.EtherType

	ipOff := off
	var end int // end of the IP datagram
	switch et {
	case header.EtherTypeIPv4:
		h := frame[off:]
		if len(h) < ipv4MinHdrLen {
			return errShortIPv4
		}
		if h[0]>>4 != 4 {
			return errIPVersion
		}
		// What is not RoCE is reported as such before any length check,
		// so callers can skip foreign traffic even in snapped captures.
		if h[9] != ipProtoUDP {
			return errIPProto
		}
		if binary.BigEndian.Uint16(h[6:8])&0x3FFF != 0 {
			return errFragment
		}
		ihl := int(h[0]&0x0F) * 4
		if ihl < ipv4MinHdrLen {
			return errIPv4IHL
		}
		if len(h) >= ihl+4 && binary.BigEndian.Uint16(h[ihl+2:ihl+4]) != UDPPort {
			return errUDPPort
		}
		if len(h) < ihl {
			return errShortIPv4
		}
		tl := int(binary.BigEndian.Uint16(h[2:4]))
		if tl < ihl {
			return errIPv4Len
		}
		if tl > len(h) {
			return errShortIP
		}
		if ipv4Checksum(h[:ihl]) != 0 {
			return ErrBadChecksum
		}
		p.TOS = h[1]
		p.TTL = h[8]
		p.IPID = binary.BigEndian.Uint16(h[4:6])
		p.SrcIP = netip.AddrFrom4([4]byte(h[12:16]))
		p.DstIP = netip.AddrFrom4([4]byte(h[16:20]))
		off += ihl
		end = ipOff + tl
	case header.EtherTypeIPv6:
		h := frame[off:]
		if len(h) < ipv6HdrLen {
			return errShortIPv6
		}
		if h[0]>>4 != 6 {
			return errIPVersion
		}
		// Extension headers are not supported: rxe never sends them.
		if h[6] != ipProtoUDP {
			return errIPProto
		}
		if len(h) >= ipv6HdrLen+4 && binary.BigEndian.Uint16(h[ipv6HdrLen+2:ipv6HdrLen+4]) != UDPPort {
			return errUDPPort
		}
		end = off + ipv6HdrLen + int(binary.BigEndian.Uint16(h[4:6]))
		if end > len(frame) {
			return errShortIP
		}
		vtf := binary.BigEndian.Uint32(h[0:4])
		p.TOS = uint8(vtf >> 20)
		p.FlowLabel = vtf & 0xFFFFF
		p.TTL = h[7]
		p.SrcIP = netip.AddrFrom16([16]byte(h[8:24]))
		p.DstIP = netip.AddrFrom16([16]byte(h[24:40]))
		off += ipv6HdrLen
	default:
		return errEtherType
	}

	if end-off < udpHdrLen {
		return errShortUDP
	}
	u := frame[off:end]
	if binary.BigEndian.Uint16(u[2:4]) != UDPPort {
		return errUDPPort
	}
	if int(binary.BigEndian.Uint16(u[4:6])) != len(u) {
		return errUDPLen
	}
	p.UDPSrc = binary.BigEndian.Uint16(u[0:2])
	off += udpHdrLen

	if end-off < BTHLen+ICRCLen {
		return errShortBTH
	}
	p.BTH.Decode(frame[off:])
	if p.BTH.TVer != 0 {
		return ErrBadTVer
	}
	op := p.BTH.Opcode
	if !op.Valid() {
		return ErrUnknownOpcode
	}
	off += BTHLen
	icrcOff := end - ICRCLen
	if icrcOff-off < op.ExtHeaderLen() {
		return errShortExt
	}
	// Lengths were checked above, so the decoders cannot fail; the order
	// is the IBA header order.
	f := opTable[op].flags
	if f&fDETH != 0 {
		p.DETH.Decode(frame[off:])
		off += DETHLen
	}
	if f&fRETH != 0 {
		p.RETH.Decode(frame[off:])
		off += RETHLen
	}
	if f&fAtomicETH != 0 {
		p.Atomic.Decode(frame[off:])
		off += AtomicETHLen
	}
	if f&fAETH != 0 {
		p.AETH.Decode(frame[off:])
		off += AETHLen
	}
	if f&fAtomicAckETH != 0 {
		p.AtomicAck.Decode(frame[off:])
		off += AtomicAckETHLen
	}
	if f&fImm != 0 {
		p.Imm = binary.BigEndian.Uint32(frame[off:])
		off += ImmLen
	}
	if f&fIETH != 0 {
		p.IETH = binary.BigEndian.Uint32(frame[off:])
		off += IETHLen
	}

	rest := icrcOff - off
	pad := int(p.BTH.PadCnt)
	if rest < pad {
		return ErrBadPad
	}
	if f&fPayload == 0 && rest != 0 {
		return errNoPayload
	}
	pe := icrcOff - pad
	p.Payload = frame[off:pe:pe]
	p.ICRC = binary.LittleEndian.Uint32(frame[icrcOff:end])
	if ICRC(frame[ipOff:icrcOff]) != p.ICRC {
		return ErrBadICRC
	}
	return nil
}

// linkError maps an error of header.ParseLink to this package's.
func linkError(err error) error {
	switch err {
	case header.ErrTruncatedEthernet:
		return errShortEth
	case header.ErrTruncatedVLAN:
		return errShortVLAN
	}
	return ErrTooManyVLANs
}

// ipv4Checksum returns the one's complement of the one's complement sum
// of h: 0 for a header whose checksum field is right, the value to store
// for a header whose checksum field is zero.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	if len(h)%2 == 1 {
		sum += uint32(h[len(h)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xFFFF + sum>>16
	}
	return ^uint16(sum)
}
