package trafficgen

import "strconv"

// Kind is the kind of traffic a frame belongs to, from the point of view of
// the node receiving it. Variants (802.1Q tag, IPv6, fragmentation, damage)
// are recorded separately in Frame and do not change the Kind.
type Kind uint8

// The kinds of traffic in a mix. The zero Kind is not a valid kind.
const (
	// MonV2 is msgr2 monitor traffic: TCP to the node's port 3300.
	MonV2 Kind = iota + 1
	// MonV1 is legacy msgr1 monitor traffic: TCP to the node's port 6789.
	MonV1
	// OSD is OSD messenger traffic: TCP to a node port in 6800-7568, or
	// replies from a peer OSD port in 6800-7568 to a node ephemeral port.
	OSD
	// RoCEv2 is RDMA over Converged Ethernet v2: UDP to port 4791 carrying
	// a BTH, optional extension headers, payload and a valid ICRC.
	RoCEv2
	// ARP is ARP requests (broadcast) and replies (unicast to the node).
	ARP
	// ICMP is ICMPv4 echo requests and replies.
	ICMP
	// ICMPv6 is IPv6 neighbour solicitations, advertisements and echo
	// requests.
	ICMPv6
	// OtherTCP is TCP to or from non-Ceph services: ssh (22), https (443)
	// and node_exporter (9100).
	OtherTCP
	// OtherUDP is UDP from non-Ceph services: DNS (53), NTP (123) and SNMP
	// (161).
	OtherUDP

	numKinds = iota
)

// Kinds returns every valid Kind in ascending order.
func Kinds() []Kind {
	ks := make([]Kind, 0, numKinds)
	for k := MonV2; k <= OtherUDP; k++ {
		ks = append(ks, k)
	}
	return ks
}

var kindNames = [...]string{
	MonV2:    "mon-v2",
	MonV1:    "mon-v1",
	OSD:      "osd",
	RoCEv2:   "rocev2",
	ARP:      "arp",
	ICMP:     "icmp",
	ICMPv6:   "icmpv6",
	OtherTCP: "other-tcp",
	OtherUDP: "other-udp",
}

// String returns the kind's short lower-case name, such as "osd".
func (k Kind) String() string { return name(kindNames[:], uint8(k), "Kind") }

// name returns names[v], or typ(v) for a value names has no name for.
func name(names []string, v uint8, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}

func (k Kind) valid() bool { return k >= MonV2 && k <= OtherUDP }

// isCeph reports whether k is traffic the Ceph daemons themselves terminate;
// only these kinds are sent with an 802.1Q tag.
func (k Kind) isCeph() bool { return k == MonV2 || k == MonV1 || k == OSD || k == RoCEv2 }

// Frag says where an IPv4 fragment sits in its datagram.
type Frag uint8

const (
	// NotFragment is a complete, unfragmented datagram (or not IP at all).
	NotFragment Frag = iota
	// FirstFragment has offset 0 and MF set: it carries the L4 header.
	FirstFragment
	// LaterFragment has a non-zero offset: it carries no L4 header, so
	// its ports are visible only by reassembly.
	LaterFragment
)

var fragNames = [...]string{NotFragment: "none", FirstFragment: "first", LaterFragment: "later"}

// String returns "none", "first" or "later".
func (f Frag) String() string { return name(fragNames[:], uint8(f), "Frag") }

// Defect is the damage done to a deliberately malformed frame.
type Defect uint8

const (
	// NoDefect marks a well-formed frame.
	NoDefect Defect = iota
	// TruncatedIPv4 ends inside the 20-byte IPv4 header.
	TruncatedIPv4
	// TruncatedTCP has a complete IPv4 header but ends inside the 20-byte
	// TCP header.
	TruncatedTCP
	// BadIPv4Length claims an IPv4 total length longer than the frame.
	BadIPv4Length
	// BadIHL has an IPv4 header length field below the minimum of 5 words.
	BadIHL
)

var defectNames = [...]string{
	NoDefect:      "none",
	TruncatedIPv4: "truncated-ipv4",
	TruncatedTCP:  "truncated-tcp",
	BadIPv4Length: "bad-ipv4-length",
	BadIHL:        "bad-ihl",
}

// String returns a short name for the defect.
func (d Defect) String() string { return name(defectNames[:], uint8(d), "Defect") }
