// Package dispatch classifies received frames and hands each to the ring of
// the service that claims it.
//
// The classifier reads Ethernet, VLAN, ARP, IPv4, IPv6 (with its common
// extension headers), TCP and UDP headers straight from frame memory, without
// copying and without allocating. A frame is matched against an ordered list
// of rules; the first matching rule (lowest index) wins, and a frame no rule
// claims, or one whose headers are malformed, goes to the default service.
//
// Rules are compiled once, at start, into lookup tables: one table per header
// field maps the field's value to the set of rules that accept it, held as the
// bits of a uint64, and the winner is the lowest bit of the intersection. The
// cost of classifying a frame is therefore header parsing plus a fixed number
// of table lookups, whether there are 4 rules or 64.
//
// This package owns parsing and classification only. Receiving frames from a
// port and enqueueing them on per-service rings live in the files built with
// cgo; everything else here is plain Go and safe for concurrent use: a
// compiled Classifier is immutable.
package dispatch
