// Package classify decides which service a received frame belongs to.
//
// Parse reads Ethernet, VLAN, ARP, IPv4, IPv6 (with its common extension
// headers), TCP and UDP headers straight from frame memory, without
// copying and without allocating, and names the reason when a frame is
// malformed. The rules are package header's (which ethertypes are VLAN
// tags, at most header.MaxVLANs of them, what makes an IPv4, IPv6, ARP,
// TCP or UDP header well formed, which IPv6 extension headers are walked),
// shared with the RoCE codec and ARP, so that what the classifier hands a
// service is what the service reads. A Classifier matches a frame against
// an ordered list of rules; the first matching rule (lowest index) wins,
// and a frame no rule claims, or one whose headers are malformed, goes to
// the default service.
//
// Rules are compiled once, at start, into lookup tables: one table per
// header field maps the field's value to the set of rules that accept it,
// held as the bits of a uint64, and the winner is the lowest bit of the
// intersection. A fast path handles well-formed IPv4, IPv6 without
// extension headers and ARP, untagged, 802.1Q- or QinQ-tagged, with a
// protocol lookup and one lookup per port (fast.go); anything else goes
// through the full parser. Either way the cost is bounded whether there
// are 4 rules or 64.
//
// A packet received into a chain of buffers (an mbuf chain: scattered RX,
// a jumbo frame in small mbufs) is classified from its first segment with
// ClassifyChain: lengths are checked against the whole packet, and only a
// packet whose headers do not fit in the first segment is refused, with
// ReasonMultiSegmentHeaders.
//
// The package is plain Go with no cgo: the poll loop in package dispatch
// calls ClassifyChain on frames it reads from mbuf memory. A compiled
// Classifier is immutable and safe for concurrent use.
package classify
