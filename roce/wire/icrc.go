package wire

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/cephdpdkd/cephdpdkd/header"
)

// ICRC is the RoCEv2 invariant CRC: the Ethernet CRC-32 (crc32.IEEE) over
// 8 bytes of 0xFF standing in for the InfiniBand LRH, then the IP header,
// UDP header, BTH, extension headers, payload and pad, with the fields
// routers may rewrite replaced by ones:
//
//	IPv4: TOS (with ECN), TTL, header checksum
//	IPv6: traffic class (with ECN), flow label, hop limit
//	UDP:  checksum
//	BTH:  byte 4 (FECN, BECN, resv6)
//
// The 32-bit result travels least-significant byte first.

// icrcPrefix is crc32.Update(0, IEEE, 8×0xFF): the CRC after the
// pseudo-LRH. rxe starts from the equivalent raw state 0xDEBB20E3.
const icrcPrefix = ^uint32(0xDEBB20E3)

// ICRC computes the invariant CRC of p, which starts at the IP header and
// ends at the last pad byte (the frame without its Ethernet header and
// without the 4-byte ICRC trailer). p is neither modified nor copied. The IP
// version comes from p's first nibble; anything but 6 is taken as IPv4,
// whose header length comes from IHL. Masks that would fall beyond the
// end of a short p are skipped rather than read.
func ICRC(p []byte) uint32 {
	ipv6 := len(p) > 0 && header.IPv6(p).Version() == header.IPv6Version
	ipLen := header.IPv4MinimumSize
	if ipv6 {
		ipLen = header.IPv6MinimumSize
	} else if len(p) > 0 && header.IPv4(p).HeaderLength() > ipLen {
		ipLen = header.IPv4(p).HeaderLength()
	}
	udpCsum := ipLen + 6
	bth4 := ipLen + header.UDPMinimumSize + 4
	hdrEnd := min(bth4+1, len(p))

	// The header bytes go through the CRC tables eight at a time, ORed
	// with their mask, so the packet is neither modified nor copied (a
	// copy on the stack would escape through hash/crc32). The payload is
	// then hashed in place, with PCLMULQDQ where the CPU has it.
	var mask []byte
	switch {
	case ipv6:
		mask = icrcMaskIPv6[:]
	case ipLen == header.IPv4MinimumSize:
		mask = icrcMaskIPv4[:]
	}
	tab := crc32.IEEETable
	s := ^uint32(icrcPrefix)
	if mask != nil {
		h := p[:hdrEnd]
		i := 0
		t := &icrcSlicing8
		for ; i+8 <= len(h); i += 8 {
			v := binary.LittleEndian.Uint64(h[i:]) | binary.LittleEndian.Uint64(mask[i:])
			s ^= uint32(v)
			hi := uint32(v >> 32)
			s = t[7][byte(s)] ^ t[6][byte(s>>8)] ^ t[5][byte(s>>16)] ^ t[4][s>>24] ^
				t[3][byte(hi)] ^ t[2][byte(hi>>8)] ^ t[1][byte(hi>>16)] ^ t[0][hi>>24]
		}
		for ; i < len(h); i++ {
			s = tab[byte(s)^(h[i]|mask[i])] ^ s>>8
		}
	} else {
		// IPv4 with options, which rxe never sends.
		for i, b := range p[:hdrEnd] {
			switch i {
			case 1, 8, 10, 11, udpCsum, udpCsum + 1, bth4:
				b = 0xFF
			}
			s = tab[byte(s)^b] ^ s>>8
		}
	}
	return crc32.Update(^s, tab, p[hdrEnd:])
}

// icrcSlicing8 holds the slicing-by-8 tables of crc32.IEEE: entry k of
// a byte is its CRC followed by k zero bytes. Computed once, never
// written again.
var icrcSlicing8 = func() (t [8][256]uint32) {
	t[0] = *crc32.IEEETable
	for i := range 256 {
		for k := 1; k < 8; k++ {
			c := t[k-1][i]
			t[k][i] = c>>8 ^ t[0][byte(c)]
		}
	}
	return t
}()

// ICRC masks: bits forced to one in the IP, UDP and BTH headers.
var (
	icrcMaskIPv4 = [header.IPv4MinimumSize + header.UDPMinimumSize + 5]byte{
		1: 0xFF, 8: 0xFF, 10: 0xFF, 11: 0xFF, // TOS, TTL, header checksum
		header.IPv4MinimumSize + 6: 0xFF, header.IPv4MinimumSize + 7: 0xFF, // UDP checksum
		header.IPv4MinimumSize + header.UDPMinimumSize + 4: 0xFF, // FECN, BECN, resv6
	}
	icrcMaskIPv6 = [header.IPv6MinimumSize + header.UDPMinimumSize + 5]byte{
		0: 0x0F, 1: 0xFF, 2: 0xFF, 3: 0xFF, // traffic class, flow label
		7:                          0xFF, // hop limit
		header.IPv6MinimumSize + 6: 0xFF, header.IPv6MinimumSize + 7: 0xFF,
		header.IPv6MinimumSize + header.UDPMinimumSize + 4: 0xFF,
	}
)

// icrcRegion returns the offsets of the IP header and of the ICRC trailer
// in an Ethernet frame carrying IPv4 or IPv6 (untagged or behind up to
// header.MaxVLANs VLAN tags). The trailer ends where the IP length field
// says, so Ethernet padding of short frames is excluded.
func icrcRegion(frame []byte) (ipOff, icrcOff int, err error) {
	var l header.Link
	if err := header.ParseLink(frame, &l); err != nil {
		return 0, 0, linkError(err)
	}
	ipOff, et := l.Len, l.EtherType
	var end int
	switch et {
	case header.EtherTypeIPv4:
		if len(frame) < ipOff+header.IPv4MinimumSize {
			return 0, 0, errShortIPv4
		}
		end = ipOff + header.IPv4(frame[ipOff:]).TotalLength()
	case header.EtherTypeIPv6:
		if len(frame) < ipOff+header.IPv6MinimumSize {
			return 0, 0, errShortIPv6
		}
		end = ipOff + header.IPv6MinimumSize + header.IPv6(frame[ipOff:]).PayloadLength()
	default:
		return 0, 0, errEtherType
	}
	if end > len(frame) {
		return 0, 0, errShortIP
	}
	if end-ICRCLen < ipOff+header.IPv4MinimumSize {
		return 0, 0, errShortICRC
	}
	return ipOff, end - ICRCLen, nil
}

// VerifyICRC reports whether the ICRC trailer of an Ethernet frame
// (IPv4 or IPv6, trailer included) matches its contents.
func VerifyICRC(frame []byte) bool {
	ipOff, icrcOff, err := icrcRegion(frame)
	if err != nil {
		return false
	}
	return ICRC(frame[ipOff:icrcOff]) == binary.LittleEndian.Uint32(frame[icrcOff:])
}

// PutICRC computes the ICRC of an Ethernet frame whose IP length fields
// already count the trailer, and stores it in the frame's last 4
// ICRC-covered bytes.
func PutICRC(frame []byte) error {
	ipOff, icrcOff, err := icrcRegion(frame)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(frame[icrcOff:], ICRC(frame[ipOff:icrcOff]))
	return nil
}

// AppendICRC appends the ICRC trailer to a frame whose IP length fields
// already count the 4 trailer bytes that are not yet there.
func AppendICRC(frame []byte) ([]byte, error) {
	frame = append(frame, 0, 0, 0, 0)
	if err := PutICRC(frame); err != nil {
		return frame[:len(frame)-ICRCLen], err
	}
	return frame, nil
}

// FrameICRC computes the ICRC an Ethernet frame (trailer included, as
// for VerifyICRC) should carry.
func FrameICRC(frame []byte) (uint32, error) {
	ipOff, icrcOff, err := icrcRegion(frame)
	if err != nil {
		return 0, err
	}
	return ICRC(frame[ipOff:icrcOff]), nil
}
