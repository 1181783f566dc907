// Package neigh answers ARP for a RoCE endpoint's IPv4 address and keeps
// its neighbour table: IPv4 address to MAC address, learned from ARP
// requests and replies addressed to the endpoint and from the RoCE frames
// it receives, each entry expiring unless traffic confirms it. It also
// resolves addresses for the active side of connection setup: a who-has
// broadcast, retransmitted a bounded number of times, with a bounded
// number of callers waiting.
//
// Resolve never calls back synchronously: answers, cached ones included,
// are delivered by the next Poll, so callers never re-enter themselves.
//
// ARP frames are read untagged or behind up to header.MaxVLANs VLAN tags
// (802.1Q, QinQ), the classifier's rules, and a reply carries the tags of
// its request. Who-has probes and announcements go out untagged.
// HandleFrame reports false for anything else (another ethertype, more
// tags), for its caller to count.
//
// HandleFrame and Learn make a Table a roce.NetworkDispatcher: attached
// to an endpoint (roce/cm does it), it is handed the endpoint's non-RoCE
// frames and the senders of its RoCE frames from inside Endpoint.Poll.
//
// A Table belongs to the goroutine that polls the endpoint: HandleFrame,
// Learn, Lookup, Resolve and Poll must all run there. Stats may be read
// from any goroutine. ARP frames are parsed and answered without
// allocating.
//
// API:
//
//	func New(cfg Config) (*Table, error)
//	func (t *Table) HandleFrame(frame []byte, now time.Time) bool
//	func (t *Table) Learn(ip netip.Addr, mac [6]byte, now time.Time)
//	func (t *Table) Lookup(ip netip.Addr, now time.Time) ([6]byte, bool)
//	func (t *Table) Resolve(ip netip.Addr, now time.Time, done func(mac [6]byte, err error)) error
//	func (t *Table) Poll(now time.Time) int
//	func (t *Table) NextDeadline() (time.Time, bool)
//	func (t *Table) Ready() bool // answers wait for the next Poll
//	func (t *Table) Len() int
//	func (t *Table) IP() netip.Addr
//	func (t *Table) MAC() [6]byte
//	func (t *Table) Stats() Stats
//	type ARP; func ParseARP(frame []byte, a *ARP) error; func BuildARP(buf []byte, a *ARP) (int, error)
//	func IsARP(frame []byte) bool
//	const OpRequest, OpReply, EtherTypeARP, MinFrameLen
//	const DefaultMaxEntries (1024), DefaultReachableTime (60 s), DefaultRetransTime (1 s),
//		DefaultMaxProbes (3), DefaultMaxPending (256)
//	var ErrUnreachable, ErrPendingFull, ErrInvalidAddress, ErrNotARP, ErrTruncated, ErrUnsupported
package neigh
