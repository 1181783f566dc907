package cm

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// onReq handles a REQ: the passive side of rdma_cm (Linux cm_req_handler
// and cma_ib_req_handler, then cma_accept_ib).
func (m *Manager) onReq(in *madIn, tid uint64) {
	req := &m.req
	if !m.decoded(in, req) {
		return
	}
	key := remoteKey{in.srcIP, req.LocalCommID}
	if c := m.byRemote[key]; c != nil {
		m.dupReq(c)
		return
	}
	m.cnt.req.Add(1)
	// Reject at once what cannot be accepted, so the peer fails now
	// rather than after its 15 retries.
	ps, port := wire.ServicePort(req.ServiceID)
	accept := m.listeners[port]
	if ps != wire.PSTCP || wire.ServiceID(ps, port) != req.ServiceID || accept == nil {
		m.rejectReq(in, tid, req, RejInvalidServiceID)
		return
	}
	if req.TransportType != wire.CMTransportRC {
		m.rejectReq(in, tid, req, RejInvalidTransportType)
		return
	}
	cma := &m.cma
	if err := cma.Decode(req.PrivateData[:]); err != nil || cma.IPVersion != 4 || cma.DstAddr != m.ip {
		// rdma_cm finds no listener for this address: its handler fails
		// and the CM rejects with reason consumer defined.
		m.rejectReq(in, tid, req, RejConsumerDefined)
		return
	}
	mtu, ok := wire.MTUFromEnum(req.PathMTU)
	if !ok || mtu > m.cfg.MaxPathMTU {
		m.rejectReq(in, tid, req, RejInvalidMTU)
		return
	}
	if req.LocalQPN < 2 {
		m.rejectReq(in, tid, req, RejUnsupported)
		return
	}
	m.replaceStale(in.srcIP, req.LocalQPN)
	if !m.roomForConn() {
		m.cnt.refused[LimitConns].Add(1)
		m.rejectReq(in, tid, req, RejNoResources)
		return
	}

	c := m.newConn(true)
	c.state = StateReqRcvd
	c.tid = tid
	c.remoteID = req.LocalCommID
	c.remoteQPN = req.LocalQPN
	c.remoteGUID = req.LocalCAGUID
	c.remoteMAC = in.srcMAC
	c.localAddr = netip.AddrPortFrom(m.ip, port)
	c.remoteAddr = netip.AddrPortFrom(in.srcIP, cma.SrcPort)
	c.vlans = in.vlans
	c.tos, c.ttl = req.TrafficClass, req.HopLimit
	c.privLen = copy(c.priv[:], req.PrivateData[wire.CMAHeaderLen:])
	m.byRemote[key] = c

	cr := &m.creq
	*cr = ConnRequest{
		Conn: c, Port: port, RemoteAddr: c.remoteAddr, LocalAddr: m.ip, RemoteMAC: in.srcMAC,
		RemoteQPN: req.LocalQPN, RemoteCommID: req.LocalCommID, RemoteCAGUID: req.LocalCAGUID,
		StartingPSN: req.StartingPSN, PathMTU: mtu,
		ResponderResources: req.ResponderResources, InitiatorDepth: req.InitiatorDepth,
		RetryCount: req.RetryCount, RNRRetry: req.RNRRetry, LocalACKTimeout: req.LocalACKTimeout,
		TrafficClass: req.TrafficClass, HopLimit: req.HopLimit, PrivateData: c.PrivateData(),
	}
	acc, err := accept(cr)
	m.creq = ConnRequest{}
	if errors.Is(err, ErrDeferred) {
		// Duplicate REQs find the connection in StateReqRcvd and get no
		// answer; the peer's CM retries meanwhile.
		c.deferred = &deferredReq{req: *req, mtu: mtu}
		m.setDeadline(c, m.now.Add(m.deferTimeout()))
		return
	}
	m.answerReq(c, req, mtu, acc, err)
}

// deferTimeout bounds how long a deferred REQ waits for Complete before
// the peer gets a REJ: three of our retransmission intervals, well inside
// a Linux peer's patience (it retries a REQ for about a minute) and longer
// than what an application defers for (the bridge's dial timeout).
func (m *Manager) deferTimeout() time.Duration {
	return 3 * m.cfg.RetransmitTimeout
}

// Complete answers a REQ whose AcceptFunc returned ErrDeferred, with what
// the AcceptFunc would have returned. It fails with ErrInvalidState when
// the Manager gave up waiting (and rejected the peer), or the connection
// is not a deferred one; the application then still owns acc.QP.
func (m *Manager) Complete(c *Conn, acc Accept, err error) error {
	if c == nil || c.m != m || c.deferred == nil || c.state != StateReqRcvd {
		return fmt.Errorf("cm: complete %v: no deferred request: %w", c, ErrInvalidState)
	}
	d := c.deferred
	c.deferred = nil
	c.deadline = time.Time{}
	m.answerReq(c, &d.req, d.mtu, acc, err)
	return nil
}

// answerReq rejects the REQ, or accepts it with acc's QP and sends the
// REP.
func (m *Manager) answerReq(c *Conn, req *wire.CMReq, mtu int, acc Accept, err error) {
	if err != nil {
		var rerr *RejectError
		reason, priv := uint16(RejConsumerDefined), []byte(nil)
		if errors.As(err, &rerr) {
			reason, priv = rerr.Reason, rerr.PrivateData
		}
		if errors.Is(err, roce.ErrBusy) || errors.Is(err, ErrTooManyConns) {
			// The service is at its session limit (app's servers
			// refuse with roce.ErrBusy).
			m.cnt.refused[LimitSessions].Add(1)
		}
		m.sendRej(c, reason, wire.CMMsgReq, nil, priv)
		m.free(c)
		return
	}
	c.ev = acc.Events
	if err := m.adoptQP(c, acc.QP); err != nil {
		m.sendRej(c, RejNoResources, wire.CMMsgReq, nil, nil)
		m.enterTimeWait(c)
		m.cnt.failed.Add(1)
		if c.ev.Connected != nil {
			c.ev.Connected(c, err)
		}
		return
	}
	if len(acc.PrivateData) > MaxRepPrivateData {
		m.sendRej(c, RejConsumerDefined, wire.CMMsgReq, nil, nil)
		m.fail(c, fmt.Errorf("cm: %v: %d bytes of rep private data, max %d: %w", c, len(acc.PrivateData), MaxRepPrivateData, ErrInvalidArgument))
		return
	}

	// rdma_cm's rules (Linux cm_req_handler, cm_init_qp_rtr_attr,
	// cm_init_qp_rts_attr): we send from the REQ's PSN and receive from
	// ours; depths swap; the path MTU, retry and RNR-retry counts and ACK
	// timeout are the REQ's.
	c.sendPSN = req.StartingPSN
	c.recvPSN = m.randPSN()
	c.pathMTU = mtu
	c.destRdAtomic = min(int(req.InitiatorDepth), m.cfg.ResponderResources)
	c.rdAtomic = min(int(req.ResponderResources), m.cfg.InitiatorDepth)
	c.timeout = req.LocalACKTimeout
	if c.timeout == 0 {
		// No transport timer would never notice a vanished peer.
		c.timeout = m.cfg.Timeout
	}
	c.retryCnt = min(req.RetryCount, m.cfg.MaxRetryCount)
	c.rnrRetry = req.RNRRetry
	c.maxRetries = min(int(req.MaxCMRetries), m.cfg.MaxRetries)

	// Linux's passive side goes to RTS before its REP; we stop at RTR, so
	// the first packet received raises EventCommEstablished when the RTU
	// is lost (the CM's COMM_EST), and go to RTS on the RTU or that event.
	// Nothing is lost: the application sends only once Connected ran.
	attr := roce.QPAttr{
		State: roce.QPStateRTR,
		AV: roce.AddressVector{
			DstMAC: c.remoteMAC, DstIP: c.remoteAddr.Addr(), SrcIP: m.ip, TOS: req.TrafficClass, TTL: req.HopLimit,
			VLANs: c.vlans,
		},
		PathMTU: mtu, DestQPN: req.LocalQPN, RQPSN: c.recvPSN,
		MaxDestRdAtomic: c.destRdAtomic, MinRNRTimer: m.cfg.MinRNRTimer,
	}
	if err := c.qp.Modify(&attr, roce.QPAttrState|roce.QPAttrAV|roce.QPAttrPathMTU|roce.QPAttrDestQPN|
		roce.QPAttrRQPSN|roce.QPAttrMaxDestRdAtomic|roce.QPAttrMinRNRTimer); err != nil {
		m.sendRej(c, RejConsumerDefined, wire.CMMsgReq, nil, nil)
		m.fail(c, fmt.Errorf("cm: %v: %w", c, err))
		return
	}

	rep := &m.rep
	*rep = wire.CMRep{
		LocalCommID: c.localID, RemoteCommID: c.remoteID, LocalQPN: c.qpn, StartingPSN: c.recvPSN,
		ResponderResources: uint8(c.destRdAtomic), InitiatorDepth: uint8(c.rdAtomic),
		TargetACKDelay: targetACKDelay, RNRRetry: m.cfg.RNRRetry, LocalCAGUID: m.guid,
	}
	copy(rep.PrivateData[:], acc.PrivateData)
	wire.EncodeCM(c.mad[:], c.tid, rep)
	c.state = StateRepSent
	c.retries = 0
	m.sendMAD(c, c.mad[:])
	m.setDeadline(c, m.now.Add(m.cfg.RetransmitTimeout))
}

// adoptQP checks the QP an application gave for a connection and starts
// driving it.
func (m *Manager) adoptQP(c *Conn, qp *roce.QP) error {
	switch {
	case qp == nil:
		return fmt.Errorf("cm: %v: no qp: %w", c, ErrInvalidArgument)
	case qp.Endpoint() != m.ep:
		return fmt.Errorf("cm: %v: qp %d of another endpoint: %w", c, qp.QPN(), ErrInvalidArgument)
	case qp.State() != roce.QPStateInit:
		return fmt.Errorf("cm: %v: qp %d in %v, want INIT: %w", c, qp.QPN(), qp.State(), ErrInvalidState)
	case m.byQPN[qp.QPN()] != nil:
		return fmt.Errorf("cm: %v: qp %d already connecting: %w", c, qp.QPN(), ErrInvalidState)
	}
	c.qp, c.qpn, c.owned = qp, qp.QPN(), true
	m.byQPN[c.qpn] = c
	return nil
}

// dupReq answers a REQ seen before: the same REP again while the
// connection lives, a stale-connection REJ once it is closed.
func (m *Manager) dupReq(c *Conn) {
	m.cnt.dupReq.Add(1)
	if !c.passive {
		m.cnt.drop(DropUnmatched)
		return
	}
	switch c.state {
	case StateRepSent, StateEstablished:
		m.sendMAD(c, c.mad[:])
	case StateDisconnecting, StateTimeWait:
		m.sendRej(c, RejStaleConn, wire.CMMsgReq, nil, nil)
	}
}

// rejectReq rejects a REQ for which no connection was created.
func (m *Manager) rejectReq(in *madIn, tid uint64, req *wire.CMReq, reason uint16) {
	rej := &m.rej
	*rej = wire.CMRej{RemoteCommID: req.LocalCommID, MsgRejected: wire.CMMsgReq, Reason: reason}
	av := m.replyAV(in)
	av.TTL = req.HopLimit
	if m.sendTo(&av, m.encode(tid, rej)) {
		m.cnt.rejTx[rejIndex(reason)].Add(1)
		_, port := wire.ServicePort(req.ServiceID)
		m.logRej(netip.AddrPortFrom(in.srcIP, 0), port, reason, StateReqRcvd)
	}
}

// replaceStale ends the connection the peer at ip had on QP qpn: a new
// REQ from that QP proves the peer forgot it (it restarted and reused its
// QP number). Linux rejects the new REQ as stale instead, which fails the
// peer's next connection too; accepting it recovers at once.
func (m *Manager) replaceStale(ip netip.Addr, qpn uint32) {
	for _, c := range m.byQPN {
		if c.owned && c.remoteQPN == qpn && c.remoteAddr.Addr() == ip &&
			(c.state == StateEstablished || c.state == StateRepSent) {
			err := fmt.Errorf("cm: %v: %w", c, ErrStale)
			if c.state == StateEstablished {
				m.startDisconnect(c)
				m.notifyDisconnected(c, err)
			} else {
				m.fail(c, err)
			}
			return
		}
	}
}

// establishPassive completes a passive connection on the RTU or the
// first packet: RTS, then Connected.
func (m *Manager) establishPassive(c *Conn) {
	attr := roce.QPAttr{
		State: roce.QPStateRTS, SQPSN: c.sendPSN, Timeout: c.timeout,
		RetryCnt: c.retryCnt, RNRRetry: c.rnrRetry, MaxRdAtomic: c.rdAtomic,
	}
	if err := c.qp.Modify(&attr, roce.QPAttrState|roce.QPAttrSQPSN|roce.QPAttrTimeout|
		roce.QPAttrRetryCnt|roce.QPAttrRNRRetry|roce.QPAttrMaxRdAtomic); err != nil {
		m.sendRej(c, RejConsumerDefined, wire.CMMsgOther, nil, nil)
		m.fail(c, fmt.Errorf("cm: %v: %w", c, err))
		return
	}
	m.establish(c)
}

// onRtu handles an RTU: the passive connection is established.
func (m *Manager) onRtu(in *madIn) {
	rtu := &m.rtu
	if !m.decoded(in, rtu) {
		return
	}
	c := m.connFrom(in, rtu.RemoteCommID)
	if c == nil || !c.passive || c.remoteID != rtu.LocalCommID {
		m.cnt.drop(DropUnmatched)
		return
	}
	if c.state == StateRepSent {
		m.establishPassive(c)
	}
}
