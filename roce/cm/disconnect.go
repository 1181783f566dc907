package cm

import (
	"fmt"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// onDreq handles a DREQ (Linux cm_dreq_handler): QP to ERROR, DREP,
// Disconnected. A DREQ for no connection gets a DREP all the same
// (cm_issue_drep); one naming another QP than ours is ignored, as Linux
// does.
func (m *Manager) onDreq(in *madIn, tid uint64) {
	dreq := &m.dreq
	if !m.decoded(in, dreq) {
		return
	}
	c := m.connFrom(in, dreq.RemoteCommID)
	if c == nil || c.remoteID != dreq.LocalCommID {
		m.cnt.drop(DropUnmatched)
		drep := &m.drep
		*drep = wire.CMDrep{LocalCommID: dreq.RemoteCommID, RemoteCommID: dreq.LocalCommID}
		av := m.replyAV(in)
		m.sendTo(&av, m.encode(tid, drep))
		return
	}
	if dreq.RemoteQPN != c.qpn {
		m.cnt.drop(DropUnmatched)
		return
	}
	switch c.state {
	case StateEstablished, StateDisconnecting:
		m.qpToError(c)
		m.sendDrep(c, tid)
		m.enterTimeWait(c)
		m.notifyDisconnected(c, nil)
	case StateRepSent:
		// The peer got our REP and its RTU was lost, then it closed.
		m.sendDrep(c, tid)
		m.fail(c, fmt.Errorf("cm: %v: %w", c, ErrDisconnected))
	default:
		m.sendDrep(c, tid)
	}
}

func (m *Manager) sendDrep(c *Conn, tid uint64) {
	drep := &m.drep
	*drep = wire.CMDrep{LocalCommID: c.localID, RemoteCommID: c.remoteID}
	m.sendMAD(c, m.encode(tid, drep))
}

// onDrep completes our disconnect.
func (m *Manager) onDrep(in *madIn) {
	drep := &m.drep
	if !m.decoded(in, drep) {
		return
	}
	c := m.connFrom(in, drep.RemoteCommID)
	if c == nil || c.remoteID != drep.LocalCommID || c.state != StateDisconnecting {
		m.cnt.drop(DropUnmatched)
		return
	}
	m.enterTimeWait(c)
	m.notifyDisconnected(c, nil)
}

// onRej handles a REJ (Linux cm_rej_handler). A REJ for a REQ names only
// our comm ID; a timeout REJ from a peer that never saw our REP names
// only its own, which is how it is found then.
func (m *Manager) onRej(in *madIn) {
	rej := &m.rej
	if !m.decoded(in, rej) {
		return
	}
	var c *Conn
	if rej.RemoteCommID != 0 {
		c = m.conns[rej.RemoteCommID]
	}
	if c == nil && rej.LocalCommID != 0 {
		c = m.byRemote[remoteKey{in.srcIP, rej.LocalCommID}]
	}
	if c == nil || c.remoteAddr.Addr() != in.srcIP ||
		c.remoteID != 0 && rej.LocalCommID != 0 && rej.LocalCommID != c.remoteID {
		m.cnt.drop(DropUnmatched)
		return
	}
	m.cnt.rejRx[rejIndex(rej.Reason)].Add(1)
	rerr := &RejectError{
		Reason:      rej.Reason,
		ARI:         append([]byte(nil), rej.ARI[:rej.ARILen]...),
		PrivateData: append([]byte(nil), rej.PrivateData[:]...),
	}
	switch c.state {
	case StateResolving, StateReqSent, StateRepSent:
		m.fail(c, fmt.Errorf("cm: %v: %w", c, rerr))
	case StateEstablished, StateDisconnecting:
		m.enterTimeWait(c)
		m.notifyDisconnected(c, fmt.Errorf("cm: %v: %w", c, rerr))
	}
}

// onMra handles an MRA: the peer needs more time, so the retransmission
// of the REQ or REP it acknowledges waits for its service timeout.
func (m *Manager) onMra(in *madIn) {
	mra := &m.mra
	if !m.decoded(in, mra) {
		return
	}
	c := m.connFrom(in, mra.RemoteCommID)
	if c == nil {
		m.cnt.drop(DropUnmatched)
		return
	}
	if c.state == StateReqSent && mra.MsgMRAed == wire.CMMsgReq || c.state == StateRepSent && mra.MsgMRAed == wire.CMMsgRep {
		wait := min(4096*time.Nanosecond<<mra.ServiceTimeout, maxMRAWait) + m.cfg.RetransmitTimeout
		m.setDeadline(c, m.now.Add(wait))
	}
}
