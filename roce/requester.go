package roce

import (
	"fmt"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// requester is the send side of a QP: it segments send WQEs into request
// packets, matches acknowledgements and read responses, and retransmits
// go-back-N from the WQEs themselves, so the only memory it holds is the
// send queue.
type requester struct {
	started     uint64 // WQEs in [sqHead, started) have PSNs assigned
	txIdx       uint64 // WQE being transmitted (sqHead <= txIdx <= started)
	txPkt       int    // its next packet
	nextPSN     uint32 // first PSN of the next WQE to start
	unacked     uint32 // oldest PSN not acknowledged
	hiPSN       uint32 // one past the highest PSN covered by a sent packet
	sinceAckReq int    // packets sent since the last AckReq
	readsOut    int    // READs started whose data is not all in
	retryLeft   uint8  // 7: unlimited
	rnrLeft     uint8  // 7: unlimited

	// The retransmit timer runs while PSNs are in flight (see
	// reqTimers): rtoAt is the adaptive timeout's expiry, giveUpAt the
	// transport timeout's, backoff the adaptive expiries since progress.
	timerOn  bool
	rtoAt    time.Time
	giveUpAt time.Time
	backoff  uint8

	// The tail-loss probe: armed at probeAt once per silence (probeSent
	// until the next progress); probing makes reqOutput send it.
	probeAt   time.Time
	probeSent bool
	probing   bool

	// One packet at a time is timed, from its first transmission to the
	// acknowledgement that covers it; any retransmission of it cancels
	// the sample (Karn's rule).
	rtt      rttEstimator
	rttOn    bool
	rttPSN   uint32
	rttStart time.Time

	rnrWait  bool
	rnrUntil time.Time
	rnrPSN   uint32

	// A go-back-N to rewindPSN is under way: another sequence NAK or
	// response gap for the same PSN is a duplicate and is ignored.
	rewound   bool
	rewindPSN uint32

	// After an adaptive timeout only the oldest unacknowledged packet
	// goes again (held; heldSent once it has), and nothing after it
	// until an answer: an acknowledgement past it shows the expiry was
	// spurious, and sending resumes at resumePSN, where it was.
	held, heldSent bool
	resumePSN      uint32

	// The idle probe (idle.go): heardAt is when the last valid packet
	// came from the peer (zero until the first poll in RTS); idleOn: a
	// probe is outstanding, timed by rtoAt, giveUpAt and backoff as a
	// request in flight would be (timerOn is then false); idleSend:
	// reqOutput sends the probe next.
	heardAt  time.Time
	idleOn   bool
	idleSend bool
}

func (s *requester) start(a *QPAttr, head uint64) {
	*s = requester{
		started: head, txIdx: head,
		nextPSN: a.SQPSN, unacked: a.SQPSN, hiPSN: a.SQPSN,
		retryLeft: a.RetryCnt, rnrLeft: a.RNRRetry,
	}
}

func (s *requester) stop() {
	s.timerOn, s.rnrWait, s.readsOut, s.probing, s.rttOn = false, false, 0, false, false
	s.held, s.idleOn, s.idleSend = false, false, false
}

// spendRetry spends one retry of the counter *left, where 7 means
// unlimited (IBA); it reports false, spending nothing, when none is left.
func spendRetry(left *uint8) bool {
	if *left == 0 {
		return false
	}
	if *left != 7 {
		*left--
	}
	return true
}

// inFlight reports whether sent PSNs await acknowledgement.
func (s *requester) inFlight() bool { return wire.PSNCompare(s.hiPSN, s.unacked) > 0 }

func (qp *QP) wqe(i uint64) *sendWQE { return &qp.sq[i%uint64(len(qp.sq))] }

// findWQE returns the started WQE whose PSN range contains psn.
func (qp *QP) findWQE(psn uint32) (uint64, bool) {
	for i := qp.sqHead; i < qp.req.started; i++ {
		w := qp.wqe(i)
		if d := wire.PSNDiff(psn, w.first); d >= 0 && d < w.npkts {
			return i, true
		}
	}
	return 0, false
}

// cursorPSN returns the PSN of the next request packet.
func (qp *QP) cursorPSN() uint32 {
	s := &qp.req
	if s.txIdx < s.started {
		return wire.PSNAdd(qp.wqe(s.txIdx).first, s.txPkt)
	}
	return s.nextPSN
}

// setCursor makes psn the next request packet; it reports false when psn
// is not a PSN of a started WQE or the next one.
func (qp *QP) setCursor(psn uint32) bool {
	s := &qp.req
	if i, ok := qp.findWQE(psn); ok {
		s.txIdx, s.txPkt = i, wire.PSNDiff(psn, qp.wqe(i).first)
		return true
	}
	if psn == s.nextPSN {
		s.txIdx, s.txPkt = s.started, 0
		return true
	}
	return false
}

// rewind starts a go-back-N retransmission from psn. Unless forced (a
// timeout or RNR), a repeated rewind to the PSN already being resent is
// ignored: it comes from a duplicated NAK or the same loss seen twice.
func (qp *QP) rewind(psn uint32, force bool) bool {
	s := &qp.req
	if !force && s.rewound && s.rewindPSN == psn {
		return false
	}
	if !qp.setCursor(psn) {
		return false
	}
	s.rewound, s.rewindPSN = true, psn
	s.sinceAckReq = 0
	s.held = false
	if s.rttOn && wire.PSNCompare(psn, s.rttPSN) <= 0 {
		s.rttOn = false // the timed packet goes again: Karn's rule
	}
	return true
}

// sendOpcode returns the opcode of a SEND or WRITE packet. The IBA
// numbers both families alike: FIRST, MIDDLE, LAST, LAST WITH IMMEDIATE,
// ONLY, ONLY WITH IMMEDIATE, the WRITEs after the SENDs.
func sendOpcode(op WROpcode, first, last bool) wire.Opcode {
	code := wire.OpRCSendFirst
	if op == WRRDMAWrite || op == WRRDMAWriteWithImm {
		code = wire.OpRCWriteFirst
	}
	switch {
	case first && last:
		code += wire.OpRCSendOnly - wire.OpRCSendFirst
	case last:
		code += wire.OpRCSendLast - wire.OpRCSendFirst
	case !first:
		code += wire.OpRCSendMiddle - wire.OpRCSendFirst
	}
	if last && (op == WRSendWithImm || op == WRRDMAWriteWithImm) {
		code++ // the WITH IMMEDIATE variant
	}
	return code
}

// reqOutput builds the next request packet into buf and returns its
// length, or 0 when the requester has nothing it may send now.
func (qp *QP) reqOutput(buf []byte, now time.Time) int {
	s := &qp.req
	if qp.state != QPStateRTS {
		return 0
	}
	if s.rnrWait {
		if now.Before(s.rnrUntil) {
			return 0
		}
		s.rnrWait = false
	}
	if s.idleSend {
		s.idleSend = false
		if s.txIdx == qp.sqTail && !s.inFlight() {
			return qp.idleProbeOutput(buf)
		}
	}
	if s.held && s.heldSent {
		return 0 // the timed-out packet's answer comes first
	}
	mtu := qp.attr.PathMTU
	var w *sendWQE
	for {
		if s.txIdx == qp.sqTail {
			return 0
		}
		w = qp.wqe(s.txIdx)
		if s.txIdx == s.started || w.opcode != WRRDMARead {
			break
		}
		// Going back over a READ: ask only for data still missing.
		if !w.readAll {
			s.txPkt = max(s.txPkt, w.readGot/mtu)
			break
		}
		s.txIdx++
		s.txPkt = 0
	}
	// A tail-loss probe resends a packet already sent, window or not.
	probe := s.probing && s.txIdx < s.started
	s.probing = false
	window := qp.ep.cfg.MaxUnackedPSNs
	if s.txIdx == s.started {
		if w.opcode == WRRDMARead && s.readsOut >= qp.attr.MaxRdAtomic {
			return 0
		}
		if wire.PSNDiff(s.nextPSN, s.unacked) >= window {
			return 0
		}
		w.first, w.readGot = s.nextPSN, 0
		s.nextPSN = wire.PSNAdd(s.nextPSN, w.npkts)
		s.started++
		if w.opcode == WRRDMARead {
			s.readsOut++
		}
	}
	k := s.txPkt
	psn := wire.PSNAdd(w.first, k)
	if !probe && wire.PSNDiff(psn, s.unacked) >= window {
		return 0
	}
	off := k * mtu
	p := &qp.ep.txPkt
	var payload []byte
	var op wire.Opcode
	var last bool
	end := wire.PSNAdd(psn, 1)
	if w.opcode == WRRDMARead {
		// A retried READ asks only for what is still missing.
		op, last = wire.OpRCReadRequest, true
		p.RETH = wire.RETH{VA: w.raddr + uint64(off), RKey: w.rkey, DMALen: uint32(w.length - off)}
		end = wire.PSNAdd(w.first, w.npkts)
	} else {
		last = k == w.npkts-1
		op = sendOpcode(w.opcode, k == 0, last)
		payload = qp.gather(w.sg, off, min(mtu, w.length-off))
		if op.HasRETH() {
			p.RETH = wire.RETH{VA: w.raddr, RKey: w.rkey, DMALen: uint32(w.length)}
		}
		p.Imm = w.imm
	}
	// Ask for an ACK at the end of each message, every AckReqEvery
	// packets, when this packet fills the window, and on a probe: the
	// responder acknowledges nothing else. The first packet sent with
	// nothing in flight asks too: timed, it measures the path with no
	// queue of ours on it, and early.
	fromIdle := !s.inFlight()
	ackReq := probe || s.held || last || fromIdle || s.sinceAckReq+1 >= qp.ep.cfg.AckReqEvery || wire.PSNDiff(end, s.unacked) >= window
	p.BTH = wire.BTH{
		Opcode: op, SE: last && w.flags&SendSolicited != 0, PKey: wire.DefaultPKey,
		DestQP: qp.attr.DestQPN, AckReq: ackReq, PSN: psn,
	}
	qp.hdr.IPID++
	n, err := wire.BuildFrame(buf, &qp.hdr, p, payload)
	if err != nil {
		qp.reqFail(WCLocQPOpErr, fmt.Errorf("roce: qp %d: build %v psn %#x: %w", qp.qpn, op, psn, err))
		return 0
	}
	if s.held {
		s.heldSent = true
	}
	if ackReq {
		s.sinceAckReq = 0
	} else {
		s.sinceAckReq++
	}
	if wire.PSNCompare(psn, s.hiPSN) < 0 {
		qp.cnt.retransmits.Add(1)
		if s.rttOn && wire.PSNCompare(psn, s.rttPSN) <= 0 && wire.PSNCompare(s.rttPSN, end) < 0 {
			s.rttOn = false // Karn's rule
		}
	} else {
		if ackReq && !s.rttOn {
			s.rttOn, s.rttPSN, s.rttStart = true, psn, now
		}
		if !s.probeSent {
			s.probeAt = now.Add(s.rtt.pto())
		}
	}
	if wire.PSNCompare(end, s.hiPSN) > 0 {
		s.hiPSN = end
	}
	if last {
		s.txIdx++
		s.txPkt = 0
	} else {
		s.txPkt++
	}
	if !s.timerOn && qp.timeout > 0 {
		// A request now asks for the acknowledgement an outstanding
		// idle probe would have: the probe ends, and the retries it
		// spent stay spent (the peer has not answered since).
		s.idleOn = false
		s.timerOn, s.backoff = true, 0
		s.giveUpAt = now.Add(qp.timeout)
		s.rtoAt = now.Add(s.rtt.rto(0, qp.timeout))
		s.probeAt, s.probeSent = now.Add(s.rtt.pto()), false
	}
	return n
}

// reqInput handles a response packet: ACK, NAK or READ response.
func (qp *QP) reqInput(p *wire.Packet, now time.Time) {
	s := &qp.req
	if qp.state != QPStateRTS {
		return
	}
	psn := p.BTH.PSN
	if wire.PSNCompare(psn, s.unacked) < 0 || wire.PSNCompare(psn, s.hiPSN) >= 0 {
		// Stale (a duplicate, or overtaken by a later acknowledgement) or
		// for a PSN never sent.
		qp.cnt.staleResponses.Add(1)
		return
	}
	op := p.BTH.Opcode
	if op.IsReadResp() {
		qp.readResponse(p, now)
		return
	}
	if op != wire.OpRCAck {
		return // no atomics are ever posted
	}
	a := &p.AETH
	switch {
	case a.IsAck():
		qp.ackUpTo(psn, now)
	case a.IsRNRNak():
		qp.cnt.rnrNakRecv.Add(1)
		qp.ackUpTo(wire.PSNAdd(psn, -1), now)
		if qp.state != QPStateRTS || s.rnrWait && s.rnrPSN == psn {
			return
		}
		if !spendRetry(&s.rnrLeft) {
			qp.reqFail(WCRNRRetryExcErr, fmt.Errorf("roce: qp %d: receiver not ready for psn %#x after %d retries: %w",
				qp.qpn, psn, qp.attr.RNRRetry, ErrRNRRetryExceeded))
			return
		}
		wait := wire.RNRDelay(a.RNRTimer())
		if max := qp.ep.cfg.MaxRNRWait; max > 0 && wait > max {
			wait = max
		}
		s.rnrWait, s.rnrUntil, s.rnrPSN = true, now.Add(wait), psn
		s.timerOn = false
		qp.rewind(s.unacked, true)
	case a.IsNak():
		code := a.NakCode()
		qp.cnt.nakRecv[nakIndex(code)].Add(1)
		qp.ackUpTo(wire.PSNAdd(psn, -1), now)
		if qp.state != QPStateRTS {
			return
		}
		if code == wire.NakPSNSeq {
			if s.rnrWait || s.rewound && s.rewindPSN == s.unacked {
				return
			}
			if !spendRetry(&s.retryLeft) {
				qp.reqFail(WCRetryExcErr, fmt.Errorf("roce: qp %d: sequence error at psn %#x after %d retries: %w",
					qp.qpn, psn, qp.attr.RetryCnt, ErrRetryExceeded))
				return
			}
			// The NAK acknowledged everything before psn, so unacked is
			// psn unless a READ before it is missing data: go back N
			// from there, not from where the timer would.
			if qp.rewind(s.unacked, false) {
				qp.cnt.nakRetransmits.Add(1)
			}
			return
		}
		st := WCBadRespErr
		switch code {
		case wire.NakInvalidRequest:
			st = WCRemInvReqErr
		case wire.NakRemoteAccess:
			st = WCRemAccessErr
		case wire.NakRemoteOp:
			st = WCRemOpErr
		}
		qp.reqFail(st, fmt.Errorf("roce: qp %d: nak %#x for psn %#x: %w", qp.qpn, code, psn, st.Err()))
	}
}

// ackUpTo handles the acknowledgement of every PSN up to psn: it retires
// the WQEs it covers, in order. An acknowledgement past a READ whose data
// has not all arrived means READ responses were lost: the READ is
// re-requested from its first missing PSN.
func (qp *QP) ackUpTo(psn uint32, now time.Time) {
	s := &qp.req
	if wire.PSNCompare(psn, s.unacked) < 0 {
		return
	}
	s.unacked = wire.PSNAdd(psn, 1)
	qp.retire(psn)
	qp.progress(now)
}

// retire completes the started WQEs at the head of the send queue that
// are acknowledged up to psn.
func (qp *QP) retire(psn uint32) {
	s := &qp.req
	for qp.sqHead < s.started && qp.state == QPStateRTS {
		w := qp.wqe(qp.sqHead)
		if w.opcode == WRRDMARead {
			// Responses that arrived while an earlier READ was missing
			// data did not move unacked; they count now.
			got := wire.PSNAdd(w.first, w.readGot/qp.attr.PathMTU)
			if w.readAll {
				got = wire.PSNAdd(w.first, w.npkts)
			}
			if wire.PSNCompare(got, s.unacked) > 0 {
				s.unacked = got
			}
			if !w.readAll {
				// An acknowledgement past the READ request means the
				// responder answered it and responses were lost.
				if wire.PSNCompare(psn, w.first) >= 0 {
					s.unacked = got
					if qp.rewind(got, false) {
						qp.cnt.nakRetransmits.Add(1)
					}
				}
				return
			}
		} else if wire.PSNCompare(wire.PSNAdd(w.first, w.npkts-1), psn) > 0 {
			return
		}
		qp.completeSend(WCSuccess)
	}
}

// progress runs after acknowledgements moved unacked forward: it refills
// the retry counters, ends a finished go-back-N, skips the cursor past
// what is now acknowledged, takes the RTT sample if the timed packet is
// covered, and restarts or stops the retransmit timer.
func (qp *QP) progress(now time.Time) {
	s := &qp.req
	s.retryLeft, s.rnrLeft = qp.attr.RetryCnt, qp.attr.RNRRetry
	if s.rewound && wire.PSNCompare(s.unacked, s.rewindPSN) > 0 {
		s.rewound = false
	}
	if s.held {
		// The peer answers a duplicate with an acknowledgement of all it
		// has: one past the packet resent (rewindPSN) shows that the
		// packets after it arrived and the timeout was spurious.
		s.held = false
		if s.heldSent && wire.PSNDiff(s.unacked, s.rewindPSN) > 1 {
			qp.countSpuriousTimeout()
			if wire.PSNCompare(s.resumePSN, s.unacked) > 0 {
				qp.setCursor(s.resumePSN)
			}
		}
	}
	if wire.PSNCompare(qp.cursorPSN(), s.unacked) < 0 {
		qp.setCursor(s.unacked)
	}
	if s.rttOn && wire.PSNCompare(s.unacked, s.rttPSN) > 0 {
		s.rttOn = false
		s.rtt.sample(now.Sub(s.rttStart))
	}
	s.backoff, s.probeSent = 0, false
	if s.inFlight() && qp.timeout > 0 && !s.rnrWait {
		s.timerOn = true
		s.giveUpAt = now.Add(qp.timeout)
		s.rtoAt = now.Add(s.rtt.rto(0, qp.timeout))
		s.probeAt = now.Add(s.rtt.pto())
	} else {
		s.timerOn = false
	}
}

// readResponse places the data of a READ response.
func (qp *QP) readResponse(p *wire.Packet, now time.Time) {
	s := &qp.req
	psn := p.BTH.PSN
	idx, ok := qp.findWQE(psn)
	if !ok {
		return
	}
	w := qp.wqe(idx)
	if w.opcode != WRRDMARead {
		return
	}
	// A response implies the responder executed every request before it.
	if idx != qp.sqHead {
		qp.ackUpTo(wire.PSNAdd(w.first, -1), now)
		if qp.state != QPStateRTS {
			return
		}
	}
	mtu := qp.attr.PathMTU
	expect := wire.PSNAdd(w.first, w.readGot/mtu)
	switch d := wire.PSNDiff(psn, expect); {
	case w.readAll || d < 0:
		qp.cnt.staleResponses.Add(1)
		return
	case d > 0:
		// Responses were lost: ask again for the rest.
		if qp.rewind(expect, false) {
			qp.cnt.nakRetransmits.Add(1)
		}
		return
	}
	op := p.BTH.Opcode
	n, left := len(p.Payload), w.length-w.readGot
	var bad bool
	if op.IsLast() || op.IsOnly() {
		bad = n != left
	} else {
		bad = n != mtu || left <= mtu
	}
	if bad || !scatter(w.sg, w.readGot, p.Payload) {
		qp.reqFail(WCBadRespErr, fmt.Errorf("roce: qp %d: %v psn %#x with %d bytes, %d expected: %w",
			qp.qpn, op, psn, n, left, ErrBadResponse))
		return
	}
	w.readGot += n
	if op.IsLast() || op.IsOnly() {
		w.readAll = true
		s.readsOut--
	}
	if idx != qp.sqHead {
		return // an earlier READ is still missing data
	}
	s.unacked = wire.PSNAdd(psn, 1)
	if w.readAll {
		qp.retire(psn)
	}
	qp.progress(now)
}

// reqTimers runs the RNR wait, the retransmit timer, the tail-loss
// probe and, with nothing in flight, the idle probe (idleTimer).
//
// Two clocks run while PSNs are in flight. The adaptive one (rtoAt)
// expires after the RTO that the measured RTT gives (RFC 6298: SRTT +
// 4·RTTVAR, at least minRTO, doubled on each consecutive expiry, at
// most the transport timeout) and resends the oldest unacknowledged
// packet alone, asking for an ACK; it spends no retry. The peer answers
// that duplicate with an ACK of everything it has, so the first ACK
// after it tells a spurious expiry (past the packet: sending resumes
// where it was, as F-RTO does for TCP) from a loss (the packet alone:
// go-back-N goes on from the next). The transport one (giveUpAt)
// is the negotiated timeout (4.096 µs · 2^Timeout) since the last
// progress, as before: each of its expiries goes back N too and spends
// one of RetryCnt retries, and one with none left fails the QP. A
// requester that hears nothing thus still gives up only after (RetryCnt
// + 1) transport timeouts, however short its RTT made the adaptive
// timer: a guest that stalls for hundreds of milliseconds under TCG
// costs some early retransmissions, never its QP. Before the first RTT
// sample the adaptive timer is the transport timeout.
//
// The probe: after pto (2·SRTT, at least minPTO) without progress or a
// new packet, with everything sent, the last packet sent goes again,
// once, with AckReq, if that comes before the adaptive timeout. A lost
// tail is then delivered, a lost acknowledgement repeated (the responder
// acknowledges a duplicate), and a longer lost tail NAKed, in about a
// round trip rather than a timeout.
func (qp *QP) reqTimers(now time.Time) {
	s := &qp.req
	if qp.state != QPStateRTS {
		return
	}
	if s.heardAt.IsZero() {
		s.heardAt = now // the first poll in RTS starts the idle clock
	}
	if s.rnrWait {
		if !now.Before(s.rnrUntil) {
			s.rnrWait = false
		}
		return
	}
	if !s.timerOn {
		qp.idleTimer(now)
		return
	}
	if !s.inFlight() {
		s.timerOn = false
		return
	}
	if giveUp := !now.Before(s.giveUpAt); giveUp || !now.Before(s.rtoAt) {
		if !qp.expire(now, giveUp, "acknowledgement for psn", s.unacked) {
			return
		}
		resume := qp.cursorPSN()
		if s.held {
			resume = s.resumePSN // an earlier expiry's packet went unanswered
		}
		qp.rewind(s.unacked, true)
		if !giveUp {
			s.held, s.heldSent, s.resumePSN = true, false, resume
		}
		return
	}
	if !qp.probeArmed() || now.Before(s.probeAt) {
		return
	}
	if qp.cursorPSN() != s.hiPSN {
		// Still sending: not a silence.
		s.probeAt = now.Add(s.rtt.pto())
		return
	}
	s.probeSent = true
	psn := wire.PSNAdd(s.hiPSN, -1)
	i, ok := qp.findWQE(psn)
	if !ok {
		return
	}
	if w := qp.wqe(i); w.opcode == WRRDMARead {
		if w.readAll {
			return
		}
		psn = wire.PSNAdd(w.first, w.readGot/qp.attr.PathMTU)
	}
	if qp.setCursor(psn) {
		s.probing = true
		s.sinceAckReq = 0
		qp.cnt.tailProbes.Add(1)
		if s.rttOn && wire.PSNCompare(psn, s.rttPSN) <= 0 {
			s.rttOn = false
		}
		// Give the probe's answer a whole RTO before going back N (the
		// transport clock is left as it is).
		if t := now.Add(s.rtt.rto(s.backoff, qp.timeout)); t.After(s.rtoAt) {
			s.rtoAt = t
		}
	}
}

// expire handles an expiry of the retransmit timer, the adaptive one's
// or (giveUp) the transport timeout's, for what awaits an answer: psn,
// named by what in the error. It counts the timeout; a transport timeout
// spends a retry, or with none left declares the peer dead and reports
// false. Otherwise the adaptive timer backs off and restarts, and the
// caller sends again.
func (qp *QP) expire(now time.Time, giveUp bool, what string, psn uint32) bool {
	s := &qp.req
	qp.cnt.timeouts.Add(1)
	if giveUp {
		qp.cnt.retryTimeouts.Add(1)
		if !spendRetry(&s.retryLeft) {
			qp.peerDead(fmt.Errorf("roce: qp %d: no %s %#x after %d retries: %w: %w",
				qp.qpn, what, psn, qp.attr.RetryCnt, ErrRetryExceeded, ErrPeerDead))
			return false
		}
		s.giveUpAt = now.Add(qp.timeout)
	}
	s.backoff = min(s.backoff+1, maxBackoff)
	s.rtoAt = now.Add(s.rtt.rto(s.backoff, qp.timeout))
	return true
}

// probeArmed reports whether a tail-loss probe is due at probeAt: there
// is an RTT sample, no packet resent after a timeout awaits its answer,
// and the probe would come before the adaptive timeout.
func (qp *QP) probeArmed() bool {
	s := &qp.req
	return !s.held && !s.probeSent && s.rtt.pto() > 0 && s.probeAt.Before(s.rtoAt)
}

// reqDeadline returns when reqTimers next has something to do.
func (qp *QP) reqDeadline() (time.Time, bool) {
	s := &qp.req
	switch {
	case qp.state != QPStateRTS:
		return time.Time{}, false
	case s.rnrWait:
		return s.rnrUntil, true
	case s.timerOn:
		t := s.rtoAt
		if s.giveUpAt.Before(t) {
			t = s.giveUpAt
		}
		if qp.probeArmed() && s.probeAt.Before(t) {
			t = s.probeAt
		}
		return t, true
	}
	return qp.idleDeadline()
}

// reqFail completes the oldest send WQE with st and moves the QP to ERROR.
func (qp *QP) reqFail(st WCStatus, err error) {
	if qp.sqHead < qp.sqTail {
		qp.completeSend(st)
	}
	qp.enterError(err)
}
