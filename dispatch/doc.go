// Package dispatch classifies received frames and hands each to the ring of
// the service that claims it, in poll loops that run on dedicated lcores.
//
// The classifier reads Ethernet, VLAN, ARP, IPv4, IPv6 (with its common
// extension headers), TCP and UDP headers straight from frame memory, without
// copying and without allocating. A frame is matched against an ordered list
// of rules; the first matching rule (lowest index) wins, and a frame no rule
// claims, or one whose headers are malformed, goes to the default service.
//
// Rules are compiled once, at start, into lookup tables: one table per header
// field maps the field's value to the set of rules that accept it, held as the
// bits of a uint64, and the winner is the lowest bit of the intersection. A
// fast path handles well-formed untagged or singly tagged IPv4, IPv6 without
// extension headers and ARP with a protocol lookup and one lookup per port
// (fast.go); anything else goes through the full parser. Either way the cost
// is bounded whether there are 4 rules or 64.
//
// A Poller is one poll loop. Per RX queue and iteration it classifies the
// burst it received last time, in Go, then makes one cgo call that enqueues
// the burst into the service rings (one enqueue per service present), runs
// the consumers implemented in C (NativeConsumer: counting sink, forwarder)
// and receives the next burst. Consumers written in Go (the RoCE endpoint)
// implement Consumer and are polled after. Counters are kept in plain fields
// and published to atomics when the loop is idle or every 64 iterations.
//
// cgo and unsafe live in loop_cgo.go (with native.h, shared with package
// consumer); the classifier and the loop logic are plain Go. A compiled
// Classifier is immutable and safe for concurrent use.
package dispatch
