package cm

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/cephdpdkd/cephdpdkd/header"
	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/neigh"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

const (
	// inboxLen bounds the MADs kept from one endpoint poll; a poll reads
	// at most one receive burst (32 frames by default).
	inboxLen = 64
	// eventLen bounds the QP events kept from one endpoint poll, like
	// the endpoint's own event queue.
	eventLen = 64
	// sweepInterval is how often established connections' QPs are
	// checked for having failed without an event (the endpoint's event
	// queue is bounded and may drop).
	sweepInterval = 100 * time.Millisecond
	// maxMRAWait bounds how far an MRA may push a retransmission back.
	maxMRAWait = time.Minute
)

// remoteKey names a connection by the peer's address and comm ID.
type remoteKey struct {
	ip netip.Addr
	id uint32
}

// madIn is a received CM MAD with what the Manager needs of its frame.
type madIn struct {
	srcMAC       [6]byte
	srcIP, dstIP netip.Addr
	tos          uint8
	vlans        header.VLANs // answers go back in the same tags
	mad          [wire.MADLen]byte
}

// Manager is the connection manager of one Endpoint. See the package
// comment for the goroutine rules.
type Manager struct {
	ep    *roce.Endpoint
	cfg   Config
	nt    *neigh.Table
	ip    netip.Addr
	mac   [6]byte
	guid  uint64
	rng   *rand.Rand
	tidHi uint64
	now   time.Time
	// rejLog rate-limits the REJ log lines, per reason.
	rejLog [NumRejReasons]struct {
		last    time.Time
		skipped int
	}

	listeners map[uint16]AcceptFunc
	conns     map[uint32]*Conn    // by our comm ID
	byRemote  map[remoteKey]*Conn // by the peer's address and comm ID
	byQPN     map[uint32]*Conn    // by our QPN, while the Manager drives the QP

	inbox   [inboxLen]madIn
	inN     int
	events  [eventLen]roce.Event
	evN     int
	cmds    chan func()
	scratch []*Conn

	next      time.Time // earliest connection deadline, zero if none
	nextSweep time.Time

	// Decoding and encoding scratch, so steady-state MAD handling does
	// not allocate.
	hdr  wire.MADHeader
	req  wire.CMReq
	rep  wire.CMRep
	rtu  wire.CMRtu
	rej  wire.CMRej
	mra  wire.CMMra
	dreq wire.CMDreq
	drep wire.CMDrep
	cma  wire.CMAHeader
	creq ConnRequest
	out  [wire.MADLen]byte

	cnt counters
}

var (
	_ roce.TransportDispatcher = (*Manager)(nil)
	_ roce.NetworkDispatcher   = (*neigh.Table)(nil)
)

// New returns the connection manager of ep, which must have an IPv4
// address. It attaches itself to ep as the transport dispatcher (MADs,
// QP events) and its neighbour table as the network dispatcher (ARP,
// senders' addresses); it fails if ep already has dispatchers. The
// caller polls both: Endpoint.Poll, then Manager.Poll.
func New(ep *roce.Endpoint, cfg Config) (*Manager, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ip := ep.IP().Unmap()
	if !ip.Is4() {
		return nil, fmt.Errorf("cm: new manager: endpoint address %v is not ipv4: %w", ip, ErrInvalidArgument)
	}
	nt := cfg.Neigh
	if nt == nil {
		nt, err = neigh.New(neigh.Config{MAC: ep.MAC(), IP: ip, Send: ep.SendFrame})
		if err != nil {
			return nil, fmt.Errorf("cm: new manager: %w", err)
		}
	} else if nt.IP() != ip || nt.MAC() != ep.MAC() {
		return nil, fmt.Errorf("cm: new manager: neighbour table for %v, endpoint %v: %w", nt.IP(), ip, ErrInvalidArgument)
	}
	seed := cfg.Seed
	if seed == 0 {
		var b [8]byte
		crand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	m := &Manager{
		ep:        ep,
		cfg:       cfg,
		nt:        nt,
		ip:        ip,
		mac:       ep.MAC(),
		guid:      CAGUID(ep.MAC()),
		rng:       rand.New(rand.NewPCG(seed, seed^0x5DEECE66D)),
		listeners: make(map[uint16]AcceptFunc),
		conns:     make(map[uint32]*Conn),
		byRemote:  make(map[remoteKey]*Conn),
		byQPN:     make(map[uint32]*Conn),
		cmds:      make(chan func(), cfg.CommandQueue),
	}
	m.tidHi = uint64(m.rng.Uint32()) << 32
	// What the table does not take (not ARP) the endpoint counts as
	// dropped.
	if err := ep.Attach(nt, m); err != nil {
		return nil, fmt.Errorf("cm: new manager: endpoint %v already has a manager: %w", ip, err)
	}
	return m, nil
}

// CAGUID returns the CA GUID rxe derives from a MAC address (modified
// EUI-64), which REQs and REPs carry.
func CAGUID(mac [6]byte) uint64 {
	return uint64(mac[0]^0x02)<<56 | uint64(mac[1])<<48 | uint64(mac[2])<<40 | 0xFF<<32 | 0xFE<<24 |
		uint64(mac[3])<<16 | uint64(mac[4])<<8 | uint64(mac[5])
}

// Endpoint returns the Manager's endpoint.
func (m *Manager) Endpoint() *roce.Endpoint { return m.ep }

// Neigh returns the Manager's neighbour table.
func (m *Manager) Neigh() *neigh.Table { return m.nt }

// NumConns returns the number of connections in any state.
func (m *Manager) NumConns() int { return len(m.conns) }

// Do queues f to run on the polling goroutine at the start of the next
// Poll. It is the one Manager method other goroutines may call; it fails
// with ErrQueueFull when Config.CommandQueue functions are waiting.
func (m *Manager) Do(f func()) error {
	select {
	case m.cmds <- f:
		return nil
	default:
		return ErrQueueFull
	}
}

// Poll does one round of work at now: the queued Do functions, the MADs
// and QP events the endpoint handed over in its last Poll, the neighbour
// table's timers and answers, and the connections' timers. It does not
// poll the endpoint: call Endpoint.Poll first, in the same round, so
// the MADs it received are handled at once (the inbox holds one poll's
// worth). It returns a count of the work done, 0 when idle.
func (m *Manager) Poll(now time.Time) int {
	m.now = now
	work := 0
	for n := len(m.cmds); n > 0; n-- {
		(<-m.cmds)()
		work++
	}
	work += m.processInbox()
	work += m.processEvents()
	work += m.nt.Poll(now)
	work += m.runTimers(now)
	if !now.Before(m.nextSweep) {
		m.sweep()
		m.nextSweep = now.Add(sweepInterval)
	}
	m.cnt.conns.Store(int64(len(m.conns)))
	return work
}

// NextDeadline returns when Poll next has timed work: an ARP probe or a
// CM retransmission, time-wait expiry included. The endpoint's QP timers
// are Endpoint.NextDeadline's; the periodic check of established
// connections' QPs does not count.
func (m *Manager) NextDeadline() (time.Time, bool) {
	if len(m.cmds) > 0 || m.nt.Ready() {
		return m.now, true
	}
	t, ok := m.nt.NextDeadline()
	if !m.next.IsZero() && (!ok || m.next.Before(t)) {
		t, ok = m.next, true
	}
	return t, ok
}

// Listen accepts connections to port (service ID RDMA_PS_TCP<<16|port)
// with accept.
func (m *Manager) Listen(port uint16, accept AcceptFunc) error {
	switch {
	case port == 0 || accept == nil:
		return fmt.Errorf("cm: listen on port %d: %w", port, ErrInvalidArgument)
	case m.listeners[port] != nil:
		return fmt.Errorf("cm: listen on port %d: %w", port, ErrPortInUse)
	}
	m.listeners[port] = accept
	m.cnt.listeners.Store(int64(len(m.listeners)))
	return nil
}

// Unlisten stops accepting connections to port; existing connections are
// not affected.
func (m *Manager) Unlisten(port uint16) error {
	if m.listeners[port] == nil {
		return fmt.Errorf("cm: unlisten port %d: %w", port, ErrNotListening)
	}
	delete(m.listeners, port)
	m.cnt.listeners.Store(int64(len(m.listeners)))
	return nil
}

// DeliverGSI keeps a MAD the endpoint received for processing in the
// next Poll, so that applications' callbacks never run in the middle of
// packet processing. It implements roce.TransportDispatcher; only the
// endpoint calls it.
func (m *Manager) DeliverGSI(p *wire.Packet) {
	if len(p.Payload) < wire.MADLen || p.SrcIP == m.ip {
		m.cnt.drop(DropMalformed)
		return
	}
	if m.inN == len(m.inbox) {
		m.cnt.drop(DropInboxFull)
		return
	}
	in := &m.inbox[m.inN]
	m.inN++
	in.srcMAC, in.srcIP, in.dstIP = p.SrcMAC, p.SrcIP, p.DstIP
	in.tos, in.vlans = p.TOS, p.VLANs
	copy(in.mad[:], p.Payload[:wire.MADLen])
}

// DeliverEvent learns of QP events at the end of the endpoint's poll. A
// first packet on a QP in RTR (the RTU was lost or is late: the CM's
// COMM_EST) establishes the connection at once, before the completion
// handlers run, so the application hears of the connection before its
// data. Failures are kept for the next Poll. It implements
// roce.TransportDispatcher; only the endpoint calls it.
func (m *Manager) DeliverEvent(ev roce.Event, now time.Time) {
	m.now = now
	switch ev.Type {
	case roce.EventCommEstablished:
		if c := m.byQPN[ev.QPN]; c != nil && c.owned && c.state == StateRepSent {
			m.establishPassive(c)
		}
	case roce.EventQPFatal:
		if m.evN == len(m.events) {
			m.cnt.eventsDrop.Add(1) // the sweep notices the QP's state
			return
		}
		m.events[m.evN] = ev
		m.evN++
	}
}

func (m *Manager) processInbox() int {
	n := m.inN
	for i := 0; i < n; i++ {
		m.handleMAD(&m.inbox[i])
	}
	m.inN = 0
	return n
}

func (m *Manager) processEvents() int {
	n := m.evN
	for i := 0; i < n; i++ {
		ev := m.events[i]
		m.events[i] = roce.Event{}
		c := m.byQPN[ev.QPN]
		if c == nil || !c.owned {
			continue
		}
		if ev.Type == roce.EventQPFatal {
			m.qpFailed(c, ev.Err)
		}
	}
	m.evN = 0
	return n
}

// handleMAD validates a MAD's header and dispatches on its attribute.
func (m *Manager) handleMAD(in *madIn) {
	m.cnt.madRx.Add(1)
	h := &m.hdr
	if err := h.Decode(in.mad[:]); err != nil || !h.IsCM() || h.Method != wire.MADMethodSend {
		m.cnt.drop(DropMalformed)
		return
	}
	if msg, ok := messageOf(h.AttrID); ok {
		m.cnt.rx[msg].Add(1)
	}
	switch h.AttrID {
	case wire.AttrReq:
		m.onReq(in, h.TID)
	case wire.AttrRep:
		m.onRep(in)
	case wire.AttrRTU:
		m.onRtu(in)
	case wire.AttrRej:
		m.onRej(in)
	case wire.AttrMRA:
		m.onMra(in)
	case wire.AttrDREQ:
		m.onDreq(in, h.TID)
	case wire.AttrDREP:
		m.onDrep(in)
	default:
		m.cnt.drop(DropMalformed)
	}
}

// newConn creates a connection with a fresh, non-zero comm ID.
func (m *Manager) newConn(passive bool) *Conn {
	c := &Conn{m: m, passive: passive}
	for {
		id := m.rng.Uint32()
		if id != 0 && m.conns[id] == nil {
			c.localID = id
			break
		}
	}
	c.tid = m.tidHi | uint64(c.localID)
	m.conns[c.localID] = c
	return c
}

// roomForConn reports whether another connection may be created, ending
// the time-wait of the oldest closed connection if that makes room.
func (m *Manager) roomForConn() bool {
	if len(m.conns) < m.cfg.MaxConns {
		return true
	}
	var victim *Conn
	for _, c := range m.conns {
		if c.state == StateTimeWait && (victim == nil || c.deadline.Before(victim.deadline)) {
			victim = c
		}
	}
	if victim == nil {
		return false
	}
	m.free(victim)
	return true
}

// free forgets a connection.
func (m *Manager) free(c *Conn) {
	delete(m.conns, c.localID)
	if k := (remoteKey{c.remoteAddr.Addr(), c.remoteID}); m.byRemote[k] == c {
		delete(m.byRemote, k)
	}
	if m.byQPN[c.qpn] == c {
		delete(m.byQPN, c.qpn)
	}
	c.owned = false
	c.state = StateClosed
	c.deadline = time.Time{}
}

func (m *Manager) setDeadline(c *Conn, t time.Time) {
	c.deadline = t
	if m.next.IsZero() || t.Before(m.next) {
		m.next = t
	}
}

func (m *Manager) randPSN() uint32 { return m.rng.Uint32() & wire.PSNMask }

// runTimers handles the connections whose deadline passed.
func (m *Manager) runTimers(now time.Time) int {
	if m.next.IsZero() || now.Before(m.next) {
		return 0
	}
	m.scratch = m.scratch[:0]
	var next time.Time
	for _, c := range m.conns {
		switch {
		case c.deadline.IsZero():
		case !now.Before(c.deadline):
			m.scratch = append(m.scratch, c)
		case next.IsZero() || c.deadline.Before(next):
			next = c.deadline
		}
	}
	m.next = next
	n := 0
	for i, c := range m.scratch {
		m.scratch[i] = nil
		if c.state != StateClosed && !c.deadline.IsZero() && !now.Before(c.deadline) {
			m.expire(c, now)
			n++
		}
	}
	return n
}

// expire handles a connection's timer: retransmit, give up or forget.
func (m *Manager) expire(c *Conn, now time.Time) {
	c.deadline = time.Time{}
	switch c.state {
	case StateReqSent, StateRepSent, StateDisconnecting:
		if c.retries < c.maxRetries {
			c.retries++
			m.cnt.retrans[c.pending()].Add(1)
			m.sendMAD(c, c.mad[:])
			m.setDeadline(c, now.Add(m.cfg.RetransmitTimeout))
			return
		}
		err := fmt.Errorf("cm: %v: no answer after %d retransmissions: %w", c, c.retries, ErrTimeout)
		switch c.state {
		case StateDisconnecting:
			m.cnt.dreqTimeouts.Add(1)
			m.enterTimeWait(c)
			m.notifyDisconnected(c, err)
		default:
			// Tell the peer, as Linux does when it gives up: a REJ with
			// reason timeout and our CA GUID as the ARI.
			m.sendRejTimeout(c)
			m.fail(c, err)
		}
	case StateReqRcvd:
		// The application never answered a deferred REQ (see Complete).
		if c.deferred != nil {
			c.deferred = nil
			m.cnt.failed.Add(1)
			m.sendRej(c, RejConsumerDefined, wire.CMMsgReq, nil, nil)
			m.free(c)
		}
	case StateTimeWait:
		m.free(c)
	}
}

// sweep checks that the QPs of connections the Manager drives are in the
// state it left them in; an application that moved a QP to ERROR or
// destroyed it, or a QPFatal event the endpoint had to drop, ends the
// connection here.
func (m *Manager) sweep() {
	m.scratch = m.scratch[:0]
	for _, c := range m.byQPN {
		if !c.owned {
			continue
		}
		want := roce.QPStateInit
		switch c.state {
		case StateRepSent:
			want = roce.QPStateRTR
		case StateEstablished:
			want = roce.QPStateRTS
		case StateDisconnecting:
			continue
		}
		if c.qp.State() != want {
			m.scratch = append(m.scratch, c)
		}
	}
	for i, c := range m.scratch {
		m.scratch[i] = nil
		if c.owned {
			m.qpFailed(c, c.qp.Err())
		}
	}
}

// qpFailed ends a connection whose QP failed.
func (m *Manager) qpFailed(c *Conn, cause error) {
	err := fmt.Errorf("cm: %v: qp in %v: %w", c, c.qp.State(), ErrQPFailed)
	if cause != nil {
		err = fmt.Errorf("cm: %v: %w: %w", c, ErrQPFailed, cause)
	}
	switch c.state {
	case StateEstablished:
		m.startDisconnect(c)
		m.notifyDisconnected(c, err)
	case StateRepSent:
		m.sendRej(c, RejConsumerDefined, wire.CMMsgOther, nil, nil)
		m.fail(c, err)
	case StateReqSent:
		m.sendRejTimeout(c)
		m.fail(c, err)
	case StateResolving:
		m.fail(c, err)
	}
}

// qpToError moves the connection's QP to ERROR, if the Manager still
// drives it and it is not there yet. A destroyed QP refuses, which is
// fine: it moves no data either.
func (m *Manager) qpToError(c *Conn) {
	if c.owned && c.qp.State() != roce.QPStateError {
		c.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	}
}

// release hands the QP back to the application, in ERROR.
func (m *Manager) release(c *Conn) {
	m.qpToError(c)
	c.owned = false
	if m.byQPN[c.qpn] == c {
		delete(m.byQPN, c.qpn)
	}
}

// fail ends a connection attempt with err.
func (m *Manager) fail(c *Conn, err error) {
	if !c.owned && c.state == StateTimeWait {
		return
	}
	m.release(c)
	m.enterTimeWait(c)
	m.cnt.failed.Add(1)
	if c.ev.Connected != nil {
		c.ev.Connected(c, err)
	}
}

// notifyDisconnected reports the end of an established connection, once.
func (m *Manager) notifyDisconnected(c *Conn, err error) {
	if !c.owned {
		return
	}
	m.release(c)
	m.cnt.disconnected.Add(1)
	if c.ev.Disconnected != nil {
		c.ev.Disconnected(c, err)
	}
}

func (m *Manager) enterTimeWait(c *Conn) {
	c.state = StateTimeWait
	c.retries = 0
	m.setDeadline(c, m.now.Add(m.cfg.TimeWait))
}

// sendMAD sends a connection's MAD to the peer's QP1 and reports whether
// the link took it.
func (m *Manager) sendMAD(c *Conn, mad []byte) bool {
	av := c.gsiAV()
	return m.sendTo(&av, mad)
}

// sendTo sends mad, an encoded CM MAD, and reports whether the link took
// it.
func (m *Manager) sendTo(av *roce.AddressVector, mad []byte) bool {
	if err := m.ep.SendGSI(av, mad); err != nil {
		m.cnt.drop(DropSendFailed)
		return false
	}
	m.cnt.madTx.Add(1)
	if msg, ok := messageOf(binary.BigEndian.Uint16(mad[16:18])); ok { // the attribute ID
		m.cnt.tx[msg].Add(1)
	}
	return true
}

// replyAV returns the address vector that answers the sender of in.
func (m *Manager) replyAV(in *madIn) roce.AddressVector {
	return roce.AddressVector{
		DstMAC: in.srcMAC, DstIP: in.srcIP, SrcIP: m.ip, TOS: in.tos, VLANs: in.vlans,
	}
}

// encode writes m's MAD for msg into the scratch buffer.
func (m *Manager) encode(tid uint64, msg wire.CMMessage) []byte {
	// EncodeCM only fails for a short buffer, and m.out is a whole MAD.
	wire.EncodeCM(m.out[:], tid, msg)
	return m.out[:]
}

// sendRej sends a REJ for c.
func (m *Manager) sendRej(c *Conn, reason uint16, msgRejected uint8, ari, priv []byte) {
	rej := &m.rej
	*rej = wire.CMRej{
		LocalCommID: c.localID, RemoteCommID: c.remoteID, MsgRejected: msgRejected,
		ARILen: uint8(min(len(ari), len(rej.ARI))), Reason: reason,
	}
	if msgRejected == wire.CMMsgReq {
		// What Linux sends for a REQ it rejects: no local comm ID yet.
		rej.LocalCommID = 0
	}
	copy(rej.ARI[:], ari)
	copy(rej.PrivateData[:], priv)
	if m.sendMAD(c, m.encode(c.tid, rej)) {
		m.cnt.rejTx[rejIndex(reason)].Add(1)
		m.logRej(c.remoteAddr, c.localAddr.Port(), reason, c.state)
	}
}

// logRej logs a REJ sent, at most once a second per reason.
func (m *Manager) logRej(peer netip.AddrPort, port uint16, reason uint16, st ConnState) {
	if m.cfg.Log == nil {
		return
	}
	l := &m.rejLog[rejIndex(reason)]
	if !l.last.IsZero() && m.now.Sub(l.last) < time.Second {
		l.skipped++
		return
	}
	m.cfg.Log.Info("cm: REJ sent", "peer", peer, "port", port, "reason", RejectReasonName(reason),
		"state", st, "rejects_not_logged", l.skipped)
	l.last, l.skipped = m.now, 0
}

// sendRejTimeout sends the REJ with which Linux gives up on a connection:
// reason timeout, our CA GUID as ARI, so the peer finds its side by our
// GUID and comm ID even if it never learned our comm ID.
func (m *Manager) sendRejTimeout(c *Conn) {
	var ari [8]byte
	binary.BigEndian.PutUint64(ari[:], m.guid)
	m.sendRej(c, RejTimeout, wire.CMMsgOther, ari[:], nil)
}

// Disconnect ends c. An established connection's QP moves to ERROR and a
// DREQ goes out; Events.Disconnected(c, nil) runs when the DREP arrives
// (or, after the retries, with an error wrapping ErrTimeout). An attempt
// not yet established is abandoned with a REJ, and Events.Connected runs
// with ErrCanceled. Disconnecting a connection already disconnecting or
// closed does nothing.
func (m *Manager) Disconnect(c *Conn) error {
	if c == nil || c.m != m {
		return fmt.Errorf("cm: disconnect: connection of another manager: %w", ErrInvalidArgument)
	}
	switch c.state {
	case StateEstablished:
		m.startDisconnect(c)
	case StateResolving:
		m.fail(c, fmt.Errorf("cm: %v: %w", c, ErrCanceled))
	case StateReqSent:
		m.sendRejTimeout(c)
		m.fail(c, fmt.Errorf("cm: %v: %w", c, ErrCanceled))
	case StateRepSent:
		m.sendRej(c, RejConsumerDefined, wire.CMMsgOther, nil, nil)
		m.fail(c, fmt.Errorf("cm: %v: %w", c, ErrCanceled))
	case StateReqRcvd:
		return fmt.Errorf("cm: disconnect %v: still being accepted: %w", c, ErrInvalidState)
	}
	return nil
}

// startDisconnect moves an established connection's QP to ERROR and
// sends the DREQ (remote QPN = the peer's, or Linux ignores it).
func (m *Manager) startDisconnect(c *Conn) {
	m.qpToError(c)
	dreq := &m.dreq
	*dreq = wire.CMDreq{LocalCommID: c.localID, RemoteCommID: c.remoteID, RemoteQPN: c.remoteQPN}
	c.dreqTID = m.tidHi | uint64(c.localID)
	wire.EncodeCM(c.mad[:], c.dreqTID, dreq)
	c.state = StateDisconnecting
	c.retries = 0
	c.maxRetries = m.cfg.MaxRetries
	m.sendMAD(c, c.mad[:])
	m.setDeadline(c, m.now.Add(m.cfg.RetransmitTimeout))
}

// decoded decodes the attribute of the MAD in into msg; a MAD that does
// not decode is dropped as malformed.
func (m *Manager) decoded(in *madIn, msg interface{ Decode(mad []byte) error }) bool {
	if err := msg.Decode(in.mad[:]); err != nil {
		m.cnt.drop(DropMalformed)
		return false
	}
	return true
}

// connFrom returns the connection whose local comm ID is id if the MAD
// in comes from its peer's address, or nil.
func (m *Manager) connFrom(in *madIn, id uint32) *Conn {
	if c := m.conns[id]; c != nil && c.remoteAddr.Addr() == in.srcIP {
		return c
	}
	return nil
}

// establish moves c to established, counts it by side and tells its
// Connected callback.
func (m *Manager) establish(c *Conn) {
	c.state = StateEstablished
	c.deadline = time.Time{}
	c.retries = 0
	side := 1 // Stats.EstablishedActive
	if c.passive {
		side = 0
	}
	m.cnt.established[side].Add(1)
	if c.ev.Connected != nil {
		c.ev.Connected(c, nil)
	}
}
