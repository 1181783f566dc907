package roce

import (
	"fmt"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// ctlKind is the kind of acknowledgement the responder has pending, in
// increasing precedence: a later one replaces an earlier one unless it
// acknowledges less or carries less information.
type ctlKind uint8

const (
	ctlNone ctlKind = iota
	ctlAck
	ctlNakSeq
	ctlRNR
	ctlFatal // invalid request, remote access or operational error
)

// readJob is a READ being answered. Responses are generated from the
// region's memory as they are sent, so a READ costs no buffering.
type readJob struct {
	data   []byte
	psn    uint32 // PSN of the first response
	npkts  int
	sent   int
	replay bool // answers a duplicate request
}

// responder is the receive side of a QP.
type responder struct {
	ePSN    uint32 // next PSN expected
	msn     uint32 // messages completed (24 bits)
	nakSent bool   // a sequence NAK went out for ePSN; drop until it arrives
	// starved: the request at ePSN was dropped for want of a receive
	// (QPInitAttr.NoRNR); a sequence NAK goes out once one is ready.
	starved bool

	inSend  bool // a multi-packet SEND fills the head receive WQE
	sendOff int
	inWrite bool // a multi-packet WRITE is in progress
	wbuf    []byte
	woff    int

	// One pending acknowledgement, coalescing all the ACKs and NAKs a
	// burst of requests calls for. ackFirst: a sequence NAK goes out
	// after an ACK of the PSN before it (see queueNakSeq).
	ctl      ctlKind
	ctlSyn   uint8
	ctlPSN   uint32
	ackFirst bool

	gotAny   bool // a request was accepted: ePSN-1 is a PSN the peer sent
	readLast bool // the last request accepted was a READ

	// shortAt: a multi-packet message is in progress and, unless more of
	// it arrives first, a sequence NAK for ePSN goes out then (see
	// respArm).
	shortAt time.Time
	shortOn bool
	// nakAt: the sequence NAK for ePSN went out and ePSN has not come;
	// unless it comes first, the NAK goes again then (nakTimer), for
	// the nakResends-th time.
	nakAt      time.Time
	nakOn      bool
	nakResends int
	// nakTop is the highest PSN received past the gap since the NAK;
	// nakShort: the NAK asked for the rest of a message that had stopped
	// coming (shortTimer). nakAnswered: the requester has gone back N
	// since, and no NAK goes again (nakTimer).
	nakTop      uint32
	nakShort    bool
	nakAnswered bool

	reads    [2 * MaxRdAtomic]readJob // new READs up to MaxDestRdAtomic, replays in the rest
	rHead    int
	rN       int
	newReads int
}

func (r *responder) start(epsn uint32) {
	r.stop()
	r.ctl = ctlNone
	r.ePSN, r.msn = epsn, 0
	r.gotAny, r.readLast = false, false
}

// stop abandons work in progress; a pending fatal NAK survives so that the
// peer learns why the QP went to ERROR.
func (r *responder) stop() {
	r.endNak()
	r.inSend, r.inWrite, r.wbuf = false, false, nil
	r.shortOn = false
	r.reads = [len(r.reads)]readJob{}
	r.rHead, r.rN, r.newReads = 0, 0, 0
	if r.ctl != ctlFatal {
		r.ctl = ctlNone
	}
}

// ackPoint returns the last PSN an acknowledgement of kind k for psn
// acknowledges.
func ackPoint(k ctlKind, psn uint32) uint32 {
	if k == ctlAck {
		return psn
	}
	return wire.PSNAdd(psn, -1)
}

func (r *responder) queueCtl(k ctlKind, syn uint8, psn uint32) {
	if r.ctl == ctlFatal {
		return
	}
	if r.ctl != ctlNone && k != ctlFatal {
		d := wire.PSNDiff(ackPoint(k, psn), ackPoint(r.ctl, r.ctlPSN))
		if d < 0 || d == 0 && k < r.ctl {
			return
		}
	}
	r.ctl, r.ctlSyn, r.ctlPSN, r.ackFirst = k, syn, psn, false
}

// queueNakSeq queues a sequence NAK for ePSN, the first sign of a gap
// (or of a request dropped for want of a receive), preceded by an ACK of
// ePSN-1. The ACK is a coalesced acknowledgement like any other, but it
// matters to a Linux rxe requester (checked against rxe_comp.c, kernel
// 6.1): its completer takes a NAK_PSN_SEQ as an implicit ACK below the
// PSN (check_ack sets comp.psn) and goes back N from it (req_retry
// restarts at comp.psn), but spends a retry_cnt on each, and while
// comp.started_retry is set it ignores every further NAK (only a timer
// expiry gets past it), so a second loss during a go-back-N would wait
// for its transport timeout. An ACK that advances comp.psn passes
// check_psn to check_ack, whose AETH_ACK case calls
// reset_retry_counters: retry_cnt and rnr_retry refilled,
// started_retry cleared, and the NAK that follows is acted on. rxe's own
// responder NAKs once per gap (resp.sent_psn_nak), as this one does.
//
// No ACK goes first when nothing was accepted yet (ePSN-1 was never
// sent), nor after a READ: an ACK for a PSN within a READ's responses
// makes rxe's check_ack fail the QP when it is waiting for the last of
// them, and the READ responses reset its retry state anyway.
func (r *responder) queueNakSeq() {
	r.queueCtl(ctlNakSeq, wire.NakPSNSeq, r.ePSN)
	if r.ctl == ctlNakSeq && r.ctlPSN == r.ePSN {
		r.ackFirst = r.gotAny && !r.readLast
	}
}

// beginNak starts a sequence NAK's episode, which lasts until ePSN
// comes (endNak): top is the highest PSN seen past the gap, short tells
// a NAK for the rest of a message that had stopped coming.
func (r *responder) beginNak(top uint32, short bool) {
	r.nakSent, r.nakTop, r.nakShort, r.nakAnswered = true, top, short, false
	r.nakOn, r.nakResends = false, 0
}

// endNak ends the episode: ePSN came (or the QP stopped).
func (r *responder) endNak() {
	r.nakSent, r.starved, r.nakOn = false, false, false
}

// Waits before a message that stopped short is NAKed (respArm), and
// before an unanswered sequence NAK goes again (nakTimer).
const (
	// shortWaitMin floors the wait: a guest's requester can pause that
	// long between the packets of one message (a descheduled vCPU), and a
	// needless NAK costs a go-back-N round of the whole window.
	shortWaitMin = 20 * time.Millisecond
	// shortWaitNoRTT is the wait before this QP has measured a round trip.
	shortWaitNoRTT = 50 * time.Millisecond
	// maxNakResends bounds how often one sequence NAK goes again, its
	// wait doubling each time: 6 from shortWaitMin span 1.26 s, past
	// which the requester's own transport timer has acted.
	maxNakResends = 6
)

// respWait is the responder's wait for the rest of a message, or for the
// PSN its NAK asked for: four round trips as this QP's requester
// measures them, floored at shortWaitMin, and shortWaitNoRTT before the
// first measurement.
func (qp *QP) respWait() time.Duration {
	if e := &qp.req.rtt; e.srtt > 0 {
		return max(shortWaitMin, 4*e.srtt)
	}
	return shortWaitNoRTT
}

// respArm runs after a request packet: while a multi-packet SEND or
// WRITE is in progress, the rest of it is due, and if it stops coming
// (its next packets, or its last, lost with nothing behind them to show
// a gap) respTimers sends a sequence NAK for ePSN: the peer resends from
// there at once instead of waiting for its transport timer (rxe's is
// the QP's timeout, 1 s and more for Ceph's connections), with the ACK
// of ePSN-1 ahead of it as for any gap (queueNakSeq). The wait is four
// round trips as this QP's requester measures them, floored at
// shortWaitMin.
func (qp *QP) respArm(now time.Time) {
	r := &qp.resp
	r.shortOn = (r.inSend || r.inWrite) && !r.nakSent
	if r.shortOn {
		r.shortAt = now.Add(qp.respWait())
	}
}

// respTimers sends the NAKs respArm and nakTimer armed, when they are
// due.
func (qp *QP) respTimers(now time.Time) {
	qp.shortTimer(now)
	qp.nakTimer(now)
}

// shortTimer sends the NAK respArm armed, when it is due.
func (qp *QP) shortTimer(now time.Time) {
	r := &qp.resp
	if !r.shortOn || now.Before(r.shortAt) {
		return
	}
	r.shortOn = false
	if qp.state != QPStateRTR && qp.state != QPStateRTS || r.nakSent || !(r.inSend || r.inWrite) {
		return
	}
	r.beginNak(wire.PSNAdd(r.ePSN, -1), true)
	r.queueNakSeq()
	qp.cnt.shortNaks.Add(1)
}

// nakTimer sends a sequence NAK again when what it asked for has not
// come within respWait of it, doubling the wait each time, up to
// maxNakResends times. A NAK is one frame, and a lost one costs the
// most of any loss: the responder drops everything past ePSN until ePSN
// comes, while the requester, not knowing, sends to the end of its
// window and then waits for its transport timer, which for Linux
// rdma_cm clients is 0.5 s and more (2.2 s for Ceph's over Soft-RoCE,
// measured; issue 21). rxe's own responder NAKs once per gap. The resend
// carries the ACK of ePSN-1 ahead of it, as the first did (queueNakSeq),
// in case that was lost too.
//
// Once the requester has gone back N (nakAnswered: a PSN past the gap
// came again), no NAK goes again: it had the NAK, so ePSN was lost again
// in its resend, and rxe ignores every NAK until an ACK advances it or
// its timer fires (comp.started_retry), while each response it takes
// restarts that timer (rxe_comp.c, COMPST_EXIT): resent NAKs would only
// put its recovery off. While the responder is starved (NoRNR),
// respOutput sends the NAK once a receive is posted, and the timer
// starts then.
func (qp *QP) nakTimer(now time.Time) {
	r := &qp.resp
	switch {
	case !r.nakSent || r.starved || r.nakAnswered || qp.state != QPStateRTR && qp.state != QPStateRTS:
		r.nakOn = false
	case r.ctl == ctlNakSeq && r.ctlPSN == r.ePSN:
		// Queued, not sent yet: the wait starts when it leaves.
	case !r.nakOn:
		if r.nakResends < maxNakResends {
			r.nakAt, r.nakOn = now.Add(qp.respWait()<<r.nakResends), true
		}
	case !now.Before(r.nakAt):
		r.nakOn = false
		r.nakResends++
		r.queueNakSeq()
		countBoth(&qp.cnt.nakResends, &qp.ep.cnt.seqNakResends)
	}
}

// respDeadline returns when respTimers next has something to do.
func (qp *QP) respDeadline() (time.Time, bool) {
	var d deadline
	d.add(qp.resp.shortAt, qp.resp.shortOn)
	d.add(qp.resp.nakAt, qp.resp.nakOn)
	return d.at, d.set
}

// respInput handles a request packet.
func (qp *QP) respInput(p *wire.Packet) {
	if qp.state != QPStateRTR && qp.state != QPStateRTS {
		return
	}
	if !qp.commEst && qp.state == QPStateRTR {
		qp.commEst = true
		qp.ep.queueEvent(qp.onEvent, Event{Type: EventCommEstablished, QPN: qp.qpn})
	}
	r := &qp.resp
	op, psn := p.BTH.Opcode, p.BTH.PSN
	switch d := wire.PSNDiff(psn, r.ePSN); {
	case d > 0:
		qp.cnt.outOfSequence.Add(1)
		switch {
		case !r.nakSent:
			r.beginNak(psn, false)
			r.queueNakSeq()
		case r.nakAnswered:
		case r.nakShort || wire.PSNDiff(psn, r.nakTop) <= 0:
			// A PSN past the gap again, or anything after a NAK for
			// a message that had stopped: the requester went back N,
			// so it has the NAK, and lost what it resent at ePSN.
			r.nakAnswered = true
		default:
			r.nakTop = psn
		}
		return
	case d < 0:
		qp.cnt.duplicates.Add(1)
		if op == wire.OpRCReadRequest {
			qp.replayRead(p)
			return
		}
		r.queueCtl(ctlAck, wire.AETHAck, wire.PSNAdd(r.ePSN, -1))
		return
	}
	r.endNak()
	if r.ctl == ctlNakSeq && r.ctlPSN == psn {
		r.ctl = ctlNone // what the NAK asks for arrived in the same burst
	}

	mtu, n := qp.attr.PathMTU, len(p.Payload)
	var inSeq bool
	switch {
	case r.inSend:
		inSeq = op.IsSend() && (op.IsMiddle() || op.IsLast())
	case r.inWrite:
		inSeq = op.IsWrite() && (op.IsMiddle() || op.IsLast())
	default:
		inSeq = op.StartsMessage()
	}
	lenOK := n <= mtu
	switch {
	case op.IsFirst() || op.IsMiddle():
		lenOK = n == mtu
	case op.IsLast():
		lenOK = n >= 1 && n <= mtu
	}
	supported := op.IsSend() && !op.HasIETH() || op.IsWrite() || op == wire.OpRCReadRequest
	if !inSeq || !lenOK || !supported {
		qp.respFail(wire.NakInvalidRequest, psn, WCRemInvReqErr, r.inSend,
			fmt.Errorf("roce: qp %d: %v psn %#x with %d bytes out of order, of bad length or unsupported: %w",
				qp.qpn, op, psn, n, ErrRemoteInvalidRequest))
		return
	}
	if op.ConsumesRecvWQE() && !qp.recvReady() {
		// Receiver not ready: drop, keep ePSN, and tell the requester
		// when to try again, or let its retransmit timer tell it.
		if qp.noRNR {
			// No NAK for the rest of the burst either: a sequence NAK
			// now would have the requester resend at once, into the
			// same empty queue, spending its retries in microseconds.
			// respOutput sends it once a receive is ready.
			qp.countRNRSilent()
			r.beginNak(psn, false)
			r.starved = true
			return
		}
		r.queueCtl(ctlRNR, wire.RNRNakSyndrome(qp.attr.MinRNRTimer), psn)
		return
	}
	var ok bool
	switch {
	case op.IsSend():
		ok = qp.recvSend(p)
	case op.IsWrite():
		ok = qp.recvWrite(p)
	default:
		qp.recvRead(p)
		return
	}
	if !ok || qp.state == QPStateError {
		return
	}
	r.ePSN = wire.PSNAdd(psn, 1)
	r.gotAny, r.readLast = true, false
	if p.BTH.AckReq {
		r.queueCtl(ctlAck, wire.AETHAck, psn)
	}
}

// recvSend places SEND data into the head receive WQE.
func (qp *QP) recvSend(p *wire.Packet) bool {
	r := &qp.resp
	op := p.BTH.Opcode
	w := qp.recvHead()
	if op.StartsMessage() {
		r.sendOff = 0
	}
	if !scatter(w.sg, r.sendOff, p.Payload) {
		qp.respFail(wire.NakInvalidRequest, p.BTH.PSN, WCLocLenErr, true,
			fmt.Errorf("roce: qp %d: message longer than the %d-byte receive buffer: %w", qp.qpn, w.length, ErrLocalLength))
		return false
	}
	r.sendOff += len(p.Payload)
	if !op.EndsMessage() {
		r.inSend = true
		return true
	}
	r.inSend = false
	r.msn = wire.PSNAdd(r.msn, 1)
	qp.completeRecv(WCSuccess, WCRecv, r.sendOff, p.Imm, op.HasImm())
	return true
}

// recvWrite checks a WRITE against the region its R_Key names and
// writes its data. Nothing is written before the checks pass.
func (qp *QP) recvWrite(p *wire.Packet) bool {
	r := &qp.resp
	op, psn := p.BTH.Opcode, p.BTH.PSN
	if op.HasRETH() {
		dl := uint64(p.RETH.DMALen)
		r.wbuf, r.woff = nil, 0
		if qp.attr.Access&AccessRemoteWrite == 0 {
			qp.respFail(wire.NakRemoteAccess, psn, WCRemAccessErr, false,
				fmt.Errorf("roce: qp %d: remote write not enabled on the qp: %w", qp.qpn, ErrRemoteAccess))
			return false
		}
		if dl > 0 {
			b, ok := qp.pd.span(p.RETH.RKey, p.RETH.VA, dl, AccessRemoteWrite)
			if !ok {
				qp.respFail(wire.NakRemoteAccess, psn, WCRemAccessErr, false,
					fmt.Errorf("roce: qp %d: write of %d bytes at %#x with rkey %#x: %w", qp.qpn, dl, p.RETH.VA, p.RETH.RKey, ErrRemoteAccess))
				return false
			}
			r.wbuf = b
		}
	}
	if len(p.Payload) > len(r.wbuf)-r.woff {
		qp.respFail(wire.NakInvalidRequest, psn, WCRemInvReqErr, false,
			fmt.Errorf("roce: qp %d: write data beyond its dma length %d: %w", qp.qpn, len(r.wbuf), ErrRemoteInvalidRequest))
		return false
	}
	r.woff += copy(r.wbuf[r.woff:], p.Payload)
	if !op.EndsMessage() {
		r.inWrite = true
		return true
	}
	if r.woff != len(r.wbuf) {
		qp.respFail(wire.NakInvalidRequest, psn, WCRemInvReqErr, false,
			fmt.Errorf("roce: qp %d: write of %d bytes ended after %d: %w", qp.qpn, len(r.wbuf), r.woff, ErrRemoteInvalidRequest))
		return false
	}
	total := r.woff
	r.inWrite, r.wbuf = false, nil
	r.msn = wire.PSNAdd(r.msn, 1)
	if op.HasImm() {
		qp.completeRecv(WCSuccess, WCRecvRDMAWithImm, total, p.Imm, true)
	}
	return true
}

// readSpan checks a READ request and returns the memory it reads.
func (qp *QP) readSpan(p *wire.Packet) ([]byte, error) {
	if qp.attr.Access&AccessRemoteRead == 0 {
		return nil, fmt.Errorf("roce: qp %d: remote read not enabled on the qp: %w", qp.qpn, ErrRemoteAccess)
	}
	dl := uint64(p.RETH.DMALen)
	if dl == 0 {
		return nil, nil
	}
	b, ok := qp.pd.span(p.RETH.RKey, p.RETH.VA, dl, AccessRemoteRead)
	if !ok {
		return nil, fmt.Errorf("roce: qp %d: read of %d bytes at %#x with rkey %#x: %w", qp.qpn, dl, p.RETH.VA, p.RETH.RKey, ErrRemoteAccess)
	}
	return b, nil
}

func (qp *QP) pushRead(data []byte, psn uint32, replay bool) int {
	r := &qp.resp
	npkts := max(1, (len(data)+qp.attr.PathMTU-1)/qp.attr.PathMTU)
	r.reads[(r.rHead+r.rN)%len(r.reads)] = readJob{data: data, psn: psn, npkts: npkts, replay: replay}
	r.rN++
	if !replay {
		r.newReads++
	}
	return npkts
}

// recvRead queues the responses to a new READ request.
func (qp *QP) recvRead(p *wire.Packet) {
	r := &qp.resp
	psn := p.BTH.PSN
	if r.newReads >= qp.attr.MaxDestRdAtomic {
		qp.respFail(wire.NakInvalidRequest, psn, WCRemInvReqErr, false,
			fmt.Errorf("roce: qp %d: more than %d outstanding reads: %w", qp.qpn, qp.attr.MaxDestRdAtomic, ErrRemoteInvalidRequest))
		return
	}
	data, err := qp.readSpan(p)
	if err != nil {
		qp.respFail(wire.NakRemoteAccess, psn, WCRemAccessErr, false, err)
		return
	}
	r.ePSN = wire.PSNAdd(psn, qp.pushRead(data, psn, false))
	r.msn = wire.PSNAdd(r.msn, 1)
	r.gotAny, r.readLast = true, true
}

// replayRead answers a duplicate READ request (the requester lost
// responses) by reading the memory again, if it still may.
func (qp *QP) replayRead(p *wire.Packet) {
	r := &qp.resp
	psn := p.BTH.PSN
	if r.rN-r.newReads >= MaxRdAtomic {
		return
	}
	for i := 0; i < r.rN; i++ {
		if r.reads[(r.rHead+i)%len(r.reads)].psn == psn {
			return // already being answered
		}
	}
	data, err := qp.readSpan(p)
	if err != nil {
		return
	}
	npkts := max(1, (len(data)+qp.attr.PathMTU-1)/qp.attr.PathMTU)
	if wire.PSNDiff(wire.PSNAdd(psn, npkts), r.ePSN) > 0 {
		return // claims PSNs never assigned to a READ
	}
	qp.pushRead(data, psn, true)
}

// respFail NAKs the packet at psn with code and moves the QP to ERROR;
// with wqe, the head receive WQE completes with st first.
func (qp *QP) respFail(code uint8, psn uint32, st WCStatus, wqe bool, err error) {
	qp.resp.queueCtl(ctlFatal, code, psn)
	if wqe && qp.hasRecvHead() {
		qp.completeRecv(st, WCRecv, 0, 0, false)
	}
	qp.enterError(err)
}

// respOutput builds the next response packet (READ response, then the
// pending acknowledgement) into buf and returns its length, or 0. READ
// responses go first because the acknowledgement may cover their PSNs.
func (qp *QP) respOutput(buf []byte) int {
	r := &qp.resp
	// starved is set only in RTR or RTS, and stop clears it on leaving.
	if r.starved && qp.recvReady() {
		r.starved = false
		r.queueNakSeq()
	}
	p := &qp.ep.txPkt
	var payload []byte
	switch {
	case r.rN > 0 && qp.state != QPStateError:
		j := &r.reads[r.rHead]
		k, mtu := j.sent, qp.attr.PathMTU
		off := k * mtu
		payload = j.data[off : off+min(mtu, len(j.data)-off)]
		op := wire.OpRCReadRespMiddle
		switch {
		case j.npkts == 1:
			op = wire.OpRCReadRespOnly
		case k == 0:
			op = wire.OpRCReadRespFirst
		case k == j.npkts-1:
			op = wire.OpRCReadRespLast
		}
		p.BTH = wire.BTH{Opcode: op, PKey: wire.DefaultPKey, DestQP: qp.attr.DestQPN, PSN: wire.PSNAdd(j.psn, k)}
		p.AETH = wire.AETH{Syndrome: wire.AETHAck, MSN: r.msn}
		j.sent++
		if j.sent == j.npkts {
			if !j.replay {
				r.newReads--
			}
			*j = readJob{}
			r.rHead = (r.rHead + 1) % len(r.reads)
			r.rN--
		}
	case r.ctl == ctlNakSeq && r.ackFirst && qp.state != QPStateError:
		// The ACK ahead of the sequence NAK (queueNakSeq), which stays
		// pending for the next frame.
		r.ackFirst = false
		p.BTH = wire.BTH{Opcode: wire.OpRCAck, PKey: wire.DefaultPKey, DestQP: qp.attr.DestQPN, PSN: wire.PSNAdd(r.ctlPSN, -1)}
		p.AETH = wire.AETH{Syndrome: wire.AETHAck, MSN: r.msn}
	case r.ctl != ctlNone && (qp.state != QPStateError || r.ctl == ctlFatal):
		p.BTH = wire.BTH{Opcode: wire.OpRCAck, PKey: wire.DefaultPKey, DestQP: qp.attr.DestQPN, PSN: r.ctlPSN}
		p.AETH = wire.AETH{Syndrome: r.ctlSyn, MSN: r.msn}
		switch r.ctl {
		case ctlRNR:
			qp.countRNRNakSent()
		case ctlNakSeq, ctlFatal:
			qp.countNakSent(nakIndex(r.ctlSyn))
		}
		r.ctl = ctlNone
	default:
		return 0
	}
	qp.hdr.IPID++
	n, err := wire.BuildFrame(buf, &qp.hdr, p, payload)
	if err != nil {
		// Only a broken address vector gets here; nothing can be sent.
		qp.lastErr = fmt.Errorf("roce: qp %d: build %v: %w", qp.qpn, p.BTH.Opcode, err)
		return 0
	}
	return n
}
