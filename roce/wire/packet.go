package wire

import (
	"encoding/binary"
	"net/netip"

	"github.com/cephdpdkd/cephdpdkd/header"
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
// carrying IPv4 (options skipped) or IPv6, UDP to port 4791, a BTH with
// extension headers, payload, pad and ICRC. Bytes after the IP datagram
// (Ethernet padding) are ignored.
//
// The Ethernet, IP and UDP headers are checked by package header, the
// classifier's rules; on top of those a RoCEv2 packet must not be an IPv4
// fragment or carry IPv6 extension headers (RoCEv2 datagrams are sent
// whole, with DF set, and rxe neither sends nor accepts extension
// headers: such frames are ErrNotRoCE), its UDP length must be its IP
// payload's, and its IPv4 header checksum must verify. Then it checks
// TVer, that the opcode is known, PadCnt against the bytes left, and the
// ICRC. Errors wrap ErrTruncated, ErrTooManyVLANs, ErrNotRoCE,
// ErrBadLength, ErrBadChecksum, ErrBadTVer, ErrUnknownOpcode, ErrBadPad or
// ErrBadICRC. When only the ICRC is wrong, p is fully decoded before
// ErrBadICRC is returned, so callers can log what they drop.
func ParsePacket(frame []byte, p *Packet) error {
	*p = Packet{}
	var l header.Link
	if err := header.ParseLink(frame, &l); err != nil {
		return linkError(err)
	}
	e := header.Ethernet(frame)
	p.DstMAC, p.SrcMAC = e.Destination(), e.Source()
	p.VLANs = l.VLANs
	ipOff := l.Len
	var off, end int // the UDP header, the end of the IP datagram
	switch l.EtherType {
	case header.EtherTypeIPv4:
		ip := header.IPv4(frame[ipOff:])
		// What is not RoCE is reported as such before any length check,
		// so callers can skip foreign traffic even in snapped captures.
		if err := notRoCEv4(ip); err != nil {
			return err
		}
		if err := ip.Check(len(ip)); err != nil {
			return ipError(err)
		}
		if !ip.IsChecksumValid() {
			return ErrBadChecksum
		}
		p.TOS = ip.TOS()
		p.TTL = ip.TTL()
		p.IPID = ip.ID()
		p.SrcIP = ip.SourceAddress()
		p.DstIP = ip.DestinationAddress()
		off = ipOff + ip.HeaderLength()
		end = ipOff + ip.TotalLength()
	case header.EtherTypeIPv6:
		ip := header.IPv6(frame[ipOff:])
		if err := notRoCEv6(ip); err != nil {
			return err
		}
		if err := ip.Check(len(ip)); err != nil {
			return ipError(err)
		}
		p.TOS = ip.TrafficClass()
		p.FlowLabel = ip.FlowLabel()
		p.TTL = ip.HopLimit()
		p.SrcIP = ip.SourceAddress()
		p.DstIP = ip.DestinationAddress()
		off = ipOff + header.IPv6MinimumSize
		end = off + ip.PayloadLength()
	default:
		return errEtherType
	}

	u := header.UDP(frame[off:end])
	if err := u.Check(len(u)); err != nil {
		return ipError(err)
	}
	if u.DestinationPort() != UDPPort {
		return errUDPPort
	}
	// The ICRC covers the IP datagram to its end: UDP must fill it.
	if u.Length() != len(u) {
		return errUDPLen
	}
	p.UDPSrc = u.SourcePort()
	off += header.UDPMinimumSize

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
	// Lengths were checked above, so the decoders cannot fail.
	off += p.decodeExt(op, frame[off:])

	rest := icrcOff - off
	pad := int(p.BTH.PadCnt)
	if rest < pad {
		return ErrBadPad
	}
	if !op.HasPayload() && rest != 0 {
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

// notRoCEv4 returns the ErrNotRoCE error for an IPv4 packet that is not
// RoCEv2, judged from the fields it has: the version, protocol, fragment
// fields and, when the header is there, the UDP destination port.
func notRoCEv4(ip header.IPv4) error {
	switch {
	case len(ip) < header.IPv4MinimumSize:
		return errShortIPv4
	case ip.Version() != header.IPv4Version:
		return errIPVersion
	case ip.Protocol() != header.ProtoUDP:
		return errIPProto
	case ip.IsFragment():
		return errFragment
	}
	if ihl := ip.HeaderLength(); ihl >= header.IPv4MinimumSize && len(ip) >= ihl+header.PortsSize &&
		header.UDP(ip[ihl:]).DestinationPort() != UDPPort {
		return errUDPPort
	}
	return nil
}

// notRoCEv6 is notRoCEv4 for IPv6.
func notRoCEv6(ip header.IPv6) error {
	switch {
	case len(ip) < header.IPv6MinimumSize:
		return errShortIPv6
	case ip.Version() != header.IPv6Version:
		return errIPVersion
	case header.IsIPv6ExtHeader(ip.NextHeader()):
		return errIPv6ExtHeader
	case ip.NextHeader() != header.ProtoUDP:
		return errIPProto
	}
	if len(ip) >= header.IPv6MinimumSize+header.PortsSize &&
		header.UDP(ip[header.IPv6MinimumSize:]).DestinationPort() != UDPPort {
		return errUDPPort
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

// ipError maps an error of package header's IP and UDP checks to this
// package's.
func ipError(err error) error {
	switch err {
	case header.ErrTruncatedIPv4, header.ErrTruncatedIPv6:
		return errShortIP
	case header.ErrBadIPv4Header:
		return errIPv4IHL
	case header.ErrBadIPv4Length:
		return errIPv4Len
	case header.ErrTruncatedUDP:
		return errShortUDP
	case header.ErrBadUDPLength:
		return errUDPLen
	}
	// The version was checked before (notRoCEv4, notRoCEv6) and a whole
	// frame has no split header: no other error comes here, but if one
	// did the frame would still be refused.
	return errBadIP
}
