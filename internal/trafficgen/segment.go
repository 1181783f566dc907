package trafficgen

import (
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Segment describes one IPv4 TCP segment for tests that need a frame of
// a given flow rather than a generated mix.
type Segment struct {
	DstMAC, SrcMAC   net.HardwareAddr
	Src, Dst         netip.Addr // IPv4
	SrcPort, DstPort uint16
	Seq              uint32
	Payload          int
	// BadChecksum makes the receiving kernel drop the segment after it
	// has paid for it, without answering: a flood that provokes no RST
	// storm back.
	BadChecksum bool
}

// TCPSegment builds the frame of s (PSH|ACK, payload of zeros).
func TCPSegment(s Segment) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, Id: uint16(s.Seq),
		SrcIP: s.Src.AsSlice(), DstIP: s.Dst.AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(s.SrcPort), DstPort: layers.TCPPort(s.DstPort),
		Seq: s.Seq, ACK: true, PSH: true, Window: 65535}
	tcp.SetNetworkLayerForChecksum(ip)
	f := serialize(&layers.Ethernet{SrcMAC: s.SrcMAC, DstMAC: s.DstMAC, EthernetType: layers.EthernetTypeIPv4},
		ip, tcp, gopacket.Payload(make([]byte, s.Payload)))
	if s.BadChecksum {
		f[14+20+16] ^= 0xff // TCP checksum, after Ethernet and a 20-byte IPv4 header
	}
	return f
}
