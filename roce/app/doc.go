// Package app holds the daemon's built-in RoCE services: servers that
// let unmodified RDMA tools, and operators, exercise the userspace
// transport of package roce.
//
// Two kinds of service exist, because peers frame data in two ways:
//
//   - A SessionService serves session.Session byte streams (Ceph async+rdma
//     framing: SENDs of up to one 128 KiB chunk, a zero-length SEND
//     closes). Echo sends every byte back; Discard counts and drops.
//     roce/cephrdma hands them the sessions it accepts.
//   - A Service serves connections at the QP level, for peers that use
//     plain SEND/RECV of their own message sizes: librdmacm's tools.
//     RawEcho answers each message with one SEND of the same length and
//     immediate (rdma_client, roce-ping), or discards it; CMATose plays
//     the server half of ucmatose; RPingServer plays rping's server
//     (RDMA READ and WRITE as requester). Listen wires a Service to a
//     port of the connection manager (roce/cm).
//
// A Session's assumptions do not fit librdmacm's tools: rdma_client
// posts a single 16-byte receive, so an echo must answer with exactly
// the message it got, and a zero-length SEND is an ordinary message to
// them, not a close. Hence the QP-level services. No single service
// serves every tool on one port, since the tools' protocols conflict:
// rdma_client sends first and wants its message back, a ucmatose client
// sends nothing until the server has sent Count messages. rdma_client,
// ucmatose and rping default to ports 7471, 7471 and 7174; give RawEcho
// and CMATose different ports and pass -p to one of the tools.
//
// Threading: every service, like the roce.Endpoint it runs on, belongs
// to the goroutine that polls the endpoint. Its methods must be called
// from that goroutine, which needs no locks; only Stats may be used from
// any goroutine. Services never block: Poll does what can be done now and
// returns. Callbacks (done) run inside Poll.
//
// Buffers come from a roce.Allocator (DPDK memory in the daemon) and are
// allocated when a connection is accepted; moving a message allocates
// nothing.
//
// API summary:
//
//	type Service interface {
//		Accept(done func(err error)) (*roce.QP, error) // QP in INIT, receives posted
//		Established(qp *roce.QP) error
//		Close(qp *roce.QP) error   // QP to ERROR, destroyed with its CQs, buffers freed
//		Poll(now time.Time) int
//		Stats() Stats
//		Shutdown() error
//	}
//	type SessionService interface {
//		Attach(s *session.Session, done func(err error)) error
//		Detach(s *session.Session)
//		Poll(now time.Time) int
//		Stats() Stats
//	}
//	func NewRawEcho(ep *roce.Endpoint, cfg RawConfig) (*RawEcho, error)
//	func NewCMATose(ep *roce.Endpoint, cfg CMAToseConfig) (*CMATose, error)
//	func NewRPingServer(ep *roce.Endpoint, cfg RPingConfig) (*RPingServer, error)
//	func NewEcho(cfg EchoConfig) *Echo
//	func NewDiscard(cfg EchoConfig) *Discard
//	func Listen(m *cm.Manager, port uint16, svc Service) error
//	type RPingInfo struct{ Addr uint64; RKey, Size uint32 } // Decode, Encode
//	var ErrProtocol, ErrStalled, ErrUnknown
package app
