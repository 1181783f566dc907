// Package header reads and writes the headers of the frames cephdpdkd
// handles: Ethernet II with up to MaxVLANs IEEE 802.1Q / 802.1ad (QinQ)
// VLAN tags, ARP, IPv4 with options and fragments, IPv6 with its
// extension headers, TCP and UDP.
//
// It is the one place that decides what a well-formed header is: which
// tag protocol identifiers start a VLAN tag and how many tags a frame may
// carry, which lengths an IPv4, IPv6, ARP, TCP or UDP header must agree
// with, which IPv6 extension headers are walked and how far, what makes a
// packet a fragment. The classifier (dispatch/classify), the RoCEv2 codec
// (roce/wire) and ARP (roce/neigh) parse and build headers through it,
// so a frame the classifier hands to a service is one that service can
// read, and what a service refuses beyond that (a RoCEv2 endpoint takes
// no fragments and no IPv6 extension headers) is its own counted policy,
// not a different reading of the same bytes.
//
// Like gVisor's pkg/tcpip/header, it works on the caller's bytes: no
// copies, no allocations, no cgo. A header is a typed view of a byte
// slice (IPv4(b), UDP(b), ...) whose accessors read fields in place and,
// like gVisor's, panic if the slice is too short for them; the Check
// methods (and ParseLink, ParseExtensions) are the validating parsers:
// they read only the slice they are given, return one of the package's
// sentinel errors, compared with ==, and allocate nothing. IsValid (as
// in gVisor) and InnerEtherType are the same rules, small enough to
// inline: the packet path asks them, and calls Check only to name what
// is wrong; the tests and fuzz targets hold them to the validating
// parsers. Builders (PutLink, Encode) write into the caller's
// buffer and panic, like binary.BigEndian.PutUint16, if it is too short.
//
// A packet received into a chain of buffers is parsed from its first
// segment: Check takes that segment and the packet's length, checks
// every length against the packet first and reports a header that does
// not fit in the segment with ErrSplitHeader.
package header
