package pcapcheck

import (
	"encoding/binary"
	"fmt"

	"github.com/google/gopacket/layers"
)

// supported reports whether frames of link type lt can be checked.
func supported(lt layers.LinkType) bool {
	switch lt {
	case layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL,
		layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		return true
	}
	return false
}

// toEthernet returns data as an Ethernet frame, using scratch to rebuild
// one for link types without an Ethernet header. ok is false when the
// frame cannot carry IP (too short for its link header, or another
// protocol).
func toEthernet(lt layers.LinkType, data, scratch []byte) (frame []byte, ok bool) {
	var etherType uint16
	var ip []byte
	switch lt {
	case layers.LinkTypeEthernet:
		return data, true
	case layers.LinkTypeLinuxSLL:
		if len(data) < 16 {
			return nil, false
		}
		etherType, ip = binary.BigEndian.Uint16(data[14:16]), data[16:]
	case layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		if len(data) == 0 {
			return nil, false
		}
		switch data[0] >> 4 {
		case 4:
			etherType = uint16(layers.EthernetTypeIPv4)
		case 6:
			etherType = uint16(layers.EthernetTypeIPv6)
		}
		ip = data
	}
	if etherType != uint16(layers.EthernetTypeIPv4) && etherType != uint16(layers.EthernetTypeIPv6) {
		return nil, false
	}
	frame = append(scratch[:0], make([]byte, 12)...)
	frame = binary.BigEndian.AppendUint16(frame, etherType)
	return append(frame, ip...), true
}

func linkTypeError(lt layers.LinkType) error {
	return fmt.Errorf("pcapcheck: link type %v (%d) not supported", lt, int(lt))
}
