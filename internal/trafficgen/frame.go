package trafficgen

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/gopacket/layers"
)

// Frame is one generated Ethernet frame (without FCS) and what it carries.
// Tests compute the expected result of classifying a frame from these fields
// instead of re-parsing Data.
//
// For a Malformed frame the fields other than Data and Defect describe the
// frame as it was before it was damaged; its Data may end before the fields
// they describe.
type Frame struct {
	Kind Kind
	Data []byte

	// VLAN is set when the frame carries an 802.1Q tag with VLANID and
	// Priority; the EtherType after the tag is IPv4, IPv6 or ARP.
	VLAN     bool
	VLANID   uint16
	Priority uint8

	// IPv6 is set when the network layer is IPv6 (including every
	// ICMPv6 frame).
	IPv6 bool

	// Frag is the frame's place in a fragmented IPv4 datagram. SrcPort and
	// DstPort of a LaterFragment are those of its datagram, though they are
	// not in Data.
	Frag Frag

	// Malformed is set when the frame was deliberately damaged; Defect says
	// how.
	Malformed bool
	Defect    Defect

	// Proto is the IP protocol (TCP, UDP, ICMPv4, ICMPv6); zero for ARP.
	Proto layers.IPProtocol
	// SrcIP and DstIP are the IP source and destination; for ARP they are
	// the sender and target protocol addresses.
	SrcIP, DstIP netip.Addr
	// SrcPort and DstPort are the TCP or UDP ports; zero for other
	// protocols.
	SrcPort, DstPort uint16
	// Payload is the number of TCP or UDP payload bytes in the datagram
	// (for fragments: in the whole datagram).
	Payload int

	// BTH describes the InfiniBand transport header of a RoCEv2 frame.
	BTH BTH
}

// BTH is what a RoCEv2 frame carries after its UDP header: Base Transport
// Header fields, the RDMA payload length and the ICRC.
type BTH struct {
	Opcode  uint8
	DestQP  uint32
	PSN     uint32
	AckReq  bool
	PadCnt  uint8
	Payload int    // RDMA payload bytes, excluding extension headers and pad
	ICRC    uint32 // as a CRC value; it is sent least significant byte first
}

// Summary counts a set of frames by kind and variant.
type Summary struct {
	Frames int
	Bytes  int
	ByKind map[Kind]int

	VLAN           int
	IPv6           int
	FirstFragments int
	LaterFragments int
	Malformed      int
}

// Summarize counts frames by kind and variant.
func Summarize(frames []Frame) Summary {
	s := Summary{ByKind: make(map[Kind]int)}
	for _, f := range frames {
		s.Frames++
		s.Bytes += len(f.Data)
		s.ByKind[f.Kind]++
		if f.VLAN {
			s.VLAN++
		}
		if f.IPv6 {
			s.IPv6++
		}
		switch f.Frag {
		case FirstFragment:
			s.FirstFragments++
		case LaterFragment:
			s.LaterFragments++
		}
		if f.Malformed {
			s.Malformed++
		}
	}
	return s
}

// String formats the summary as two Markdown tables, by kind and by
// variant.
func (s Summary) String() string {
	var b strings.Builder
	b.WriteString("| kind | frames |\n|---|---:|\n")
	for _, k := range Kinds() {
		fmt.Fprintf(&b, "| %v | %d |\n", k, s.ByKind[k])
	}
	fmt.Fprintf(&b, "| total | %d (%d bytes) |\n\n", s.Frames, s.Bytes)
	b.WriteString("| variant | frames |\n|---|---:|\n")
	fmt.Fprintf(&b, "| 802.1Q VLAN %d | %d |\n", StorageVLAN, s.VLAN)
	fmt.Fprintf(&b, "| IPv6 | %d |\n", s.IPv6)
	fmt.Fprintf(&b, "| IPv4 first fragment | %d |\n", s.FirstFragments)
	fmt.Fprintf(&b, "| IPv4 later fragment | %d |\n", s.LaterFragments)
	fmt.Fprintf(&b, "| malformed | %d |\n", s.Malformed)
	return b.String()
}
