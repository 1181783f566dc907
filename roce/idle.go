package roce

import (
	"fmt"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// Dead-peer detection on an idle connection.
//
// The retransmit timer finds a dead peer only while requests are in
// flight. A QP with nothing to send would otherwise keep a peer that
// vanished without a DREQ (a guest killed, a cable pulled, every DREQ
// lost) for as long as its owner waits, and its owner's resources with
// it: for the bridge, the session and the TCP connection to the Ceph
// daemon until ms_tcp_read_timeout.
//
// So a QP in RTS that has nothing in flight and nothing to send, and
// has heard nothing from its peer (no valid packet of any kind, request
// or response) for EndpointConfig.IdleProbe, sends an idle probe: a
// duplicate request the peer must acknowledge and that consumes
// nothing there. It is a SEND ONLY with no payload and AckReq, at the
// PSN before the next one, which the peer's responder has already
// acknowledged (nothing is in flight), or the initial PSN - 1 when
// nothing was ever sent. The IBA's C9-105 has a responder answer a
// duplicate SEND with an ACK and not execute it again.
//
// Checked against Linux rxe (torvalds/linux, 6.x),
// drivers/infiniband/sw/rxe/rxe_resp.c: check_psn, for an RC QP, sends
// any request whose PSN is before resp.psn to RESPST_DUPLICATE_REQUEST
// (counting RXE_CNT_DUP_REQ) ahead of check_op_seq, check_op_valid and
// check_resource, so no access flag is checked and no receive WQE
// taken; duplicate_request, for RXE_SEND_MASK or RXE_WRITE_MASK ("SEND.
// Ack again and cleanup. C9-105."), calls send_ack(qp,
// AETH_ACK_UNLIMITED, resp.ack_psn - 1) and returns RESPST_CLEANUP: one
// ACK, whatever the AckReq bit, nothing executed, no completion.
// resp.ack_psn is set by executed requests (rxe_qp.c sets only resp.psn
// from the RQ PSN), so a peer that has executed nothing may answer with
// PSN 0xFFFFFF: either way an ACK at or before the last PSN we had
// acknowledged, or past anything sent, which reqInput counts as a stale
// response. A new zero-length RDMA WRITE would be acknowledged too, but
// rxe's check_op_valid fails one (NAK invalid request, QP to ERROR) on a
// QP without IB_ACCESS_REMOTE_WRITE, which Ceph's QPs need not grant;
// a SEND at an old PSN never gets that far. Our own responder answers the
// same way (respInput: a PSN before ePSN counts a Duplicate and queues
// an ACK of ePSN-1 before any opcode, length or receive check).
//
// The answer is a stale ACK, counted as such (QPStats.StaleResponses);
// what matters is that it came: any valid packet from the peer restarts
// the idle clock and ends an outstanding probe (heard). A probe without
// an answer goes again on the QP's retransmit schedule, as the oldest
// request in flight would (reqTimers): at each expiry of the adaptive
// timer, spending no retry, and at each whole transport timeout
// (QPAttr.Timeout), spending one of RetryCnt. One more timeout with none
// left fails the QP as a lost request does: ERROR, an EventQPFatal
// whose error wraps ErrRetryExceeded and ErrPeerDead, the receives
// flushed (there is no send work request to complete with
// WCRetryExcErr). A dead peer is thus found IdleProbe + Timeout ×
// (RetryCnt+1) after it last spoke; a RetryCnt of 7 (unlimited) never
// gives up, as with requests.

// heard notes a valid packet from the peer: proof of life. It ends an
// outstanding idle probe and gives back the retries it spent.
func (qp *QP) heard(now time.Time) {
	s := &qp.req
	s.heardAt = now
	if s.idleOn {
		s.idleOn, s.idleSend, s.backoff = false, false, 0
		s.retryLeft = qp.attr.RetryCnt
	}
}

// idleArmed reports whether the idle clock runs: probing is enabled,
// the QP has a transport timer, the clock started, and the requester
// has nothing in flight and nothing left to send.
func (qp *QP) idleArmed() bool {
	s := &qp.req
	return qp.ep.cfg.IdleProbe > 0 && qp.timeout > 0 && !s.heardAt.IsZero() &&
		!s.inFlight() && s.txIdx == qp.sqTail
}

// idleTimer runs the idle probe; reqTimers calls it in RTS while the
// retransmit timer is off. An outstanding probe's expiries are those of
// a request in flight (expire).
func (qp *QP) idleTimer(now time.Time) {
	s := &qp.req
	if !qp.idleArmed() {
		s.idleOn, s.idleSend = false, false
		return
	}
	if !s.idleOn {
		if now.Sub(s.heardAt) < qp.ep.cfg.IdleProbe {
			return
		}
		s.idleOn, s.idleSend, s.backoff = true, true, 0
		s.giveUpAt = now.Add(qp.timeout)
		s.rtoAt = now.Add(s.rtt.rto(0, qp.timeout))
		return
	}
	if giveUp := !now.Before(s.giveUpAt); giveUp || !now.Before(s.rtoAt) {
		s.idleSend = qp.expire(now, giveUp, "answer to the idle probe at psn", wire.PSNAdd(s.nextPSN, -1))
	}
}

// idleDeadline returns when idleTimer next has something to do.
func (qp *QP) idleDeadline() (time.Time, bool) {
	s := &qp.req
	switch {
	case qp.state != QPStateRTS || !qp.idleArmed():
		return time.Time{}, false
	case s.idleOn:
		if s.giveUpAt.Before(s.rtoAt) {
			return s.giveUpAt, true
		}
		return s.rtoAt, true
	}
	return s.heardAt.Add(qp.ep.cfg.IdleProbe), true
}

// idleProbeOutput builds the idle probe into buf: a SEND ONLY without
// payload, AckReq set, at the last PSN already sent and acknowledged.
func (qp *QP) idleProbeOutput(buf []byte) int {
	psn := wire.PSNAdd(qp.req.nextPSN, -1)
	p := &qp.ep.txPkt
	p.BTH = wire.BTH{
		Opcode: wire.OpRCSendOnly, PKey: wire.DefaultPKey, DestQP: qp.attr.DestQPN, AckReq: true, PSN: psn,
	}
	qp.hdr.IPID++
	n, err := wire.BuildFrame(buf, &qp.hdr, p, nil)
	if err != nil {
		qp.reqFail(WCLocQPOpErr, fmt.Errorf("roce: qp %d: build idle probe psn %#x: %w", qp.qpn, psn, err))
		return 0
	}
	qp.countIdleProbe()
	return n
}

// peerDead fails the QP on a peer that answered nothing for its whole
// retry budget; err wraps ErrRetryExceeded and ErrPeerDead.
func (qp *QP) peerDead(err error) {
	qp.countDeadPeer()
	qp.reqFail(WCRetryExcErr, err)
}
