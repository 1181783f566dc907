// Package cephrdma is Ceph async+rdma's way into the userspace RoCE
// transport: the TCP side channel on which two messengers exchange
// 65-byte ASCII QP records (wire.CephQPRecord) before they talk over an
// RC QP, and the session.Session that runs on that QP afterwards.
//
// The exchange, as Ceph's RDMAConnectedSocketImpl does it:
//
//  1. The client connects over TCP and sends its record, peer_qpn 0.
//  2. The server moves its QP to RTR and RTS toward the client's QPN and
//     PSN and answers with its own record. (This package's server puts
//     the client's QPN in peer_qpn; Ceph's leaves 0. The client accepts
//     both.)
//  3. The client moves its QP to RTR and RTS and sends its record again,
//     peer_qpn set to the server's QPN. The connection is up.
//
// The TCP connection stays open for the session's life: Ceph watches it,
// and either side closing it ends the session. Data on it after the
// exchange is a protocol error, as it is to Ceph.
//
// QPs use Ceph's settings (session.DefaultConfig: path MTU 1024,
// RNR timer, timeout, unlimited retries) with a random 24-bit send PSN.
// The peer's GID in its record must be the IPv4-mapped (or IPv6) form of
// its TCP address: a Ceph node whose ms_async_rdma_gid_idx selects the
// link-local GID is refused with ErrGIDMismatch rather than reached at
// an address nobody answers.
//
// Threading: a Stack, its QPs and sessions belong to the goroutine that
// polls the endpoint (the DPDK poll loop). TCP I/O runs on goroutines of
// its own, one per connection, which talk to the poll goroutine only
// through a bounded command queue that Poll drains and a one-slot reply
// channel per connection, so the poll goroutine never blocks on the
// network. Every TCP read and write of the exchange has a deadline.
//
// API summary:
//
//	func DefaultConfig() Config // Ceph's session settings, TOS 0x60, TTL 6
//	func New(ep *roce.Endpoint, cfg Config) (*Stack, error)
//	func (st *Stack) Serve(ln net.Listener, svc app.SessionService) error // any goroutine, blocks
//	func (st *Stack) Dial(addr string, done func(*Conn, error)) error     // poll goroutine
//	func (st *Stack) Poll(now time.Time) int                               // poll goroutine
//	func (st *Stack) Close() error                                         // poll goroutine
//	func (st *Stack) Stats() Stats                                         // any goroutine
//	type Resolver interface{ Resolve(ip netip.Addr, done func(mac [6]byte, err error)) } // *cm.Manager
//	(*Conn) Session, RemoteAddr, Records, Closed, Err, Close
//	var ErrBadRecord, ErrGIDMismatch, ErrUnexpectedData, ErrTooManyConns, ErrClosed, ErrTimeout
package cephrdma
