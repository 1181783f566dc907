// Package header reads and writes the link-layer headers of the frames
// cephdpdkd handles: Ethernet II and the IEEE 802.1Q and 802.1ad (QinQ)
// VLAN tags stacked after it.
//
// It is the one place that decides which tag protocol identifiers start
// a VLAN tag and how many tags a frame may carry (MaxVLANs). The
// classifier (dispatch/classify), the RoCEv2 codec (roce/wire) and ARP
// (roce/neigh) parse and build link headers through it, so a frame the
// classifier hands to a service is one that service can read, and an
// answer goes back in the tags its request came in.
//
// Like gVisor's pkg/tcpip/header, it works on the caller's bytes: no
// copies, no allocations, no cgo. Parsers never read past the slice they
// are given; builders write into the caller's buffer and panic, like
// binary.BigEndian.PutUint16, if it is too short.
package header
