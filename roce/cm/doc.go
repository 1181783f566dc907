// Package cm sets up reliable connections the way Linux rdma_cm does over
// RoCEv2: REQ/REP/RTU to connect, DREQ/DREP to disconnect, REJ and MRA,
// exchanged as communication-management MADs on QP1 of a roce.Endpoint.
// Both roles work against unmodified Linux Soft-RoCE (rxe) peers and
// librdmacm applications: the passive side accepts rdma_client, ucmatose,
// rping -c and ib_send_bw -R; the active side connects to rdma_server or
// ucmatose servers. Addresses are resolved with roce/neigh (ARP).
//
// One Manager serves one Endpoint. It installs the endpoint's GSI
// handler, frame handler (ARP goes to the neighbour table), neighbour
// handler (every received RoCE frame refreshes the table) and event
// handler, and its Poll drives the endpoint and the table: call
// Manager.Poll instead of Endpoint.Poll. Everything runs on the goroutine
// that calls Poll and needs no locks; Do is the one method other
// goroutines may call, to queue work for that goroutine, and Stats may be
// read from anywhere.
//
// API:
//
//	func New(ep *roce.Endpoint, cfg Config) (*Manager, error)
//	func (m *Manager) Poll(now time.Time) int
//	func (m *Manager) NextDeadline() (time.Time, bool)
//	func (m *Manager) Do(f func()) error // any goroutine; ErrQueueFull
//	func (m *Manager) Listen(port uint16, accept AcceptFunc) error
//	func (m *Manager) Unlisten(port uint16) error
//	func (m *Manager) Dial(raddr netip.Addr, port uint16, qp *roce.QP, privateData []byte, ev Events) (*Conn, error)
//	func (m *Manager) Disconnect(c *Conn) error
//	func (m *Manager) Endpoint() *roce.Endpoint
//	func (m *Manager) Neigh() *neigh.Table
//	func (m *Manager) Resolve(ip netip.Addr, done func(mac [6]byte, err error)) // cephrdma.Resolver
//	func (m *Manager) NumConns() int
//	func (m *Manager) Stats() Stats // any goroutine
//	type Message (MsgREQ..MsgDREP), DropReason (DropMalformed, DropUnmatched,
//		DropInboxFull, DropSendFailed), Limit (LimitSessions, LimitConns)
//	func RejectReasonName(r uint16) string // metric label: "no_resources", ...
//	func IsOwnRejectReason(r uint16) bool  // a reason the Manager sends itself
//	func CAGUID(mac [6]byte) uint64
//
//	type AcceptFunc func(req *ConnRequest) (Accept, error)
//	type Accept struct { QP *roce.QP; PrivateData []byte; Events Events }
//	type Events struct {
//		Connected    func(c *Conn, err error) // the attempt ended; err nil: established
//		Disconnected func(c *Conn, err error) // an established connection ended
//	}
//	type ConnRequest struct {
//		Conn *Conn; Port uint16; RemoteAddr netip.AddrPort; LocalAddr netip.Addr
//		RemoteMAC [6]byte; RemoteQPN, RemoteCommID uint32; RemoteCAGUID uint64
//		StartingPSN uint32; PathMTU int
//		ResponderResources, InitiatorDepth, RetryCount, RNRRetry uint8
//		LocalACKTimeout, TrafficClass, HopLimit uint8; PrivateData []byte
//	}
//	(*Conn) QP, State, Passive, LocalAddr, RemoteAddr, RemoteMAC, RemoteQPN,
//		RemoteCAGUID, LocalCommID, RemoteCommID, PrivateData, Context, SetContext
//	type ConnState: StateResolving, StateReqSent, StateReqRcvd, StateRepSent,
//		StateEstablished, StateDisconnecting, StateTimeWait, StateClosed
//	type RejectError struct { Reason uint16; ARI, PrivateData []byte } // errors.Is(err, ErrRejected)
//	func Reject(reason uint16, privateData []byte) error // for an AcceptFunc
//	const Rej* (reasons), MaxReqPrivateData (56), MaxRepPrivateData (196), MaxRejPrivateData (148)
//	var ErrRejected, ErrTimeout, ErrDisconnected, ErrCanceled, ErrQPFailed, ErrStale,
//		ErrTooManyConns, ErrPortInUse, ErrNotListening, ErrQueueFull,
//		ErrInvalidArgument, ErrInvalidState
//
// Connection life cycle. Passive: a REQ for a port given to Listen calls
// its AcceptFunc from Poll. The function returns a QP it created on a PD
// of the Manager's endpoint, moved to INIT (with the access flags it
// wants and its receives already posted), or an error to reject: a
// RejectError from Reject chooses the reason, any other error rejects
// with RejConsumerDefined. A REQ for a port nobody listens on is rejected
// at once with RejInvalidServiceID, so the peer fails immediately instead
// of after its retries. The Manager moves the accepted QP to RTR, sends
// the REP and, on the RTU or on the first packet the QP receives, moves it
// to RTS and calls Events.Connected(c, nil). Active: Dial resolves the
// peer's MAC address, sends the REQ and, on the REP, moves the QP (in
// INIT) through RTR to RTS, sends the RTU and calls Events.Connected(c,
// nil). A failed attempt (REJ, no answer after the retries, address not
// resolved, the QP refused its attributes, Disconnect) calls
// Events.Connected(c, err) instead, with the QP in ERROR.
//
// Send nothing on a QP before Connected(c, nil): until then it may still
// be in RTR, where posting a send fails (and fails a session.Session).
//
// Once established, Disconnect, the peer's DREQ or the QP failing (a
// transport error, the retry limit: EventQPFatal) moves the QP to ERROR,
// exchanges DREQ/DREP and calls Events.Disconnected(c, err) once; err is
// nil for an orderly disconnect. After Connected with an error, or after
// Disconnected, the Manager no longer touches the QP: the application
// releases its session and destroys the QP and its CQs. The Manager never
// destroys QPs. It keeps a closed connection's identifiers for
// Config.TimeWait to answer late duplicates, and bounds connections in
// every state by Config.MaxConns.
//
// QP attributes follow rdma_cm (Linux cm.c cm_req_handler,
// cm_init_qp_rtr_attr, cm_init_qp_rts_attr; cma.c): each side advertises
// the PSN it expects to receive, so the passive side sends from the REQ's
// starting PSN and receives from the random PSN it puts in the REP, and
// the active side the other way round. Responder resources and initiator
// depth swap and are capped by Config. The path MTU is the REQ's (at most
// Config.MaxPathMTU). The passive side takes the REQ's retry and RNR
// retry counts and local ACK timeout, the active side the REP's RNR retry
// count; both cap the transport retry count at Config.MaxRetryCount (6),
// because rxe and package roce treat 7 as unlimited and a QP whose peer
// vanished must fail so that its buffers are freed. The address vector is
// the REQ frame's source MAC and IP, with the REQ's traffic class and hop
// limit as TOS and TTL, and the UDP source port is per QP, as rxe's.
//
// VLANs. The endpoint has no VLAN of its own: the passive side answers a
// REQ in the VLAN tags it came in (802.1Q or QinQ, up to
// header.MaxVLANs), and the connection's QP and MADs keep them, as the
// neighbour table answers a who-has in the request's tags. The active
// side (Dial) resolves and connects untagged.
//
// Counters. Stats (which internal/metrics exports) counts CM MADs by
// message and direction, REJs by reason, MADs dropped by reason,
// retransmissions, requests refused for lack of room (LimitSessions: the
// AcceptFunc returned an error wrapping roce.ErrBusy or ErrTooManyConns,
// as roce/app's servers do at their session limit; LimitConns:
// Config.MaxConns), and connections established, failed and ended.
//
// Unlike Linux, the passive side stays in RTR until the RTU (or the first
// packet, the CM's COMM_EST), which is how it learns of an RTU that was
// lost; nothing is lost by it, since the application sends only after
// Connected.
//
// RNR timer. rdma_cm gives the peer's QP min_rnr_timer 0 (655.36 ms) and
// librdmacm applications cannot change it, so what the peer advertises is
// out of our hands; what we advertise is ours: every QP the Manager
// connects gets MinRNRTimer Config.MinRNRTimer, default 0x0E (1.28 ms),
// which goes into the RNR NAKs it sends, so an rxe sender that found no
// receive buffer here retries after 1.28 ms rather than 655 ms. 1.28 ms is
// a few round trips on a software path: short enough that a momentary
// buffer shortage costs little, long enough not to turn it into a NAK
// storm (Ceph uses 0x12, 5.12 ms). Sessions keep every receive buffer
// posted, so RNR NAKs are rare to begin with.
package cm
