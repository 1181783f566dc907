package roce

import "fmt"

// SRQInitAttr describes a shared receive queue to create.
type SRQInitAttr struct {
	MaxWR  int // receive work requests the queue holds (1..MaxQueueDepth)
	MaxSGE int // SGEs per receive work request (1 if 0)
}

// SRQ is a shared receive queue: the QPs created with it take their
// receive work requests from it, in the order posted, each when a
// message that needs one starts. As in verbs, completions still go to
// each QP's receive CQ and carry that QP's number, and the work requests
// still on the SRQ are not flushed when a QP using it fails: only the one
// a failing QP has taken completes as flushed. Like everything an
// Endpoint owns, an SRQ belongs to the goroutine that polls it.
type SRQ struct {
	pd         *PD
	maxSGE     int
	ring       []recvWQE
	head, tail uint64
	users      int
	destroyed  bool
	// reserve: a QP at its SetSRQLimit may take more receives while
	// more than reserve stay posted (0: never).
	reserve int
}

// CreateSRQ creates a shared receive queue on pd.
func (pd *PD) CreateSRQ(attr *SRQInitAttr) (*SRQ, error) {
	sge := attr.MaxSGE
	if sge == 0 {
		sge = 1
	}
	switch {
	case pd.dead:
		return nil, fmt.Errorf("roce: create srq: pd deallocated: %w", ErrInvalidState)
	case attr.MaxWR < 1 || attr.MaxWR > MaxQueueDepth:
		return nil, fmt.Errorf("roce: create srq: depth %d not in 1..%d: %w", attr.MaxWR, MaxQueueDepth, ErrInvalidArgument)
	case sge < 1 || sge > MaxSGE:
		return nil, fmt.Errorf("roce: create srq: sge limit %d not in 1..%d: %w", sge, MaxSGE, ErrInvalidArgument)
	}
	s := &SRQ{pd: pd, maxSGE: sge, ring: make([]recvWQE, attr.MaxWR)}
	for i := range s.ring {
		s.ring[i].sg = make([][]byte, 0, sge)
	}
	pd.qps++ // the PD cannot go while the SRQ exists
	return s, nil
}

// Cap returns the queue's depth.
func (s *SRQ) Cap() int { return len(s.ring) }

// Len returns the receive work requests posted and not yet taken by a QP.
func (s *SRQ) Len() int { return int(s.tail - s.head) }

// PostRecv queues a receive work request for any of the QPs using s.
// SGEs are checked when posted.
func (s *SRQ) PostRecv(wr *RecvWR) error {
	switch {
	case s.destroyed:
		return fmt.Errorf("roce: post srq recv: destroyed: %w", ErrInvalidState)
	case s.Len() == len(s.ring):
		return fmt.Errorf("roce: post srq recv: %w", ErrQueueFull)
	case len(wr.SGList) > s.maxSGE:
		return fmt.Errorf("roce: post srq recv: %d sges, max %d: %w", len(wr.SGList), s.maxSGE, ErrInvalidArgument)
	}
	w := &s.ring[s.tail%uint64(len(s.ring))]
	n, err := resolveSGL(s.pd, w.sg[:0], wr.SGList, AccessLocalWrite)
	if err != nil {
		return fmt.Errorf("roce: post srq recv: %w", err)
	}
	w.id, w.sg, w.length = wr.ID, w.sg[:len(wr.SGList)], n
	s.tail++
	return nil
}

// SetLendingReserve lets a QP at its SetSRQLimit take more receives
// while more than n stay posted, so that one connection's burst uses the
// slack of a mostly idle queue instead of being dropped, while the
// others keep n to take up to their own limits from. 0, the default,
// lends nothing. Not a verbs attribute, like SetSRQLimit.
func (s *SRQ) SetLendingReserve(n int) { s.reserve = max(n, 0) }

// Destroy releases the queue; no QP may still use it. Receive work
// requests still posted are discarded without completions.
func (s *SRQ) Destroy() error {
	switch {
	case s.destroyed:
		return fmt.Errorf("roce: destroy srq: %w", ErrInvalidState)
	case s.users > 0:
		return fmt.Errorf("roce: destroy srq used by %d qps: %w", s.users, ErrBusy)
	}
	s.destroyed = true
	s.head, s.tail = 0, 0
	s.pd.qps--
	return nil
}

// take moves the oldest posted work request into w (whose sg has the
// capacity) and reports whether there was one.
func (s *SRQ) take(w *recvWQE) bool {
	if s.head == s.tail {
		return false
	}
	src := &s.ring[s.head%uint64(len(s.ring))]
	s.head++
	w.id, w.length = src.id, src.length
	w.sg = append(w.sg[:0], src.sg...)
	return true
}

// putBack returns w to the SRQ, for a QP reset while holding it.
func (s *SRQ) putBack(w *recvWQE) {
	if s.destroyed || s.Len() == len(s.ring) {
		return
	}
	d := &s.ring[s.tail%uint64(len(s.ring))]
	d.id, d.length = w.id, w.length
	d.sg = append(d.sg[:0], w.sg...)
	s.tail++
}

// SRQ returns the shared receive queue the QP takes its receives from,
// or nil.
func (qp *QP) SRQ() *SRQ { return qp.srq }

// SetSRQLimit bounds the receive work requests the QP may hold from its
// SRQ: taken for a message and not yet given back with ReleaseSRQ. At
// the limit a request that needs one finds none, as with an empty
// receive queue (an RNR NAK, or with NoRNR a silent drop), so one
// connection whose data is not read cannot take the whole SRQ (beyond
// what SRQ.SetLendingReserve lends). 0 means no limit. This is not a verbs attribute: the SRQ's consumer, which
// knows when a buffer is free again, enforces fairness with it.
func (qp *QP) SetSRQLimit(n int) { qp.srqLimit = max(n, 0) }

// ReleaseSRQ tells the QP that n of the receives it took from its SRQ
// have completed and been consumed (see SetSRQLimit).
func (qp *QP) ReleaseSRQ(n int) { qp.srqHeld = max(qp.srqHeld-n, 0) }

// SRQHeld returns the receives the QP took from its SRQ and that were
// not yet released.
func (qp *QP) SRQHeld() int { return qp.srqHeld }

// recvReady reports whether a request needing a receive WQE finds one
// (with an SRQ: one in progress, or one it may take).
func (qp *QP) recvReady() bool {
	if qp.srq == nil {
		return qp.rqHead != qp.rqTail
	}
	s := qp.srq
	return qp.srqCur || s.Len() > 0 && (qp.srqLimit == 0 || qp.srqHeld < qp.srqLimit || s.reserve > 0 && s.Len() > s.reserve)
}

// hasRecvHead reports whether a receive WQE is at the head, taken.
func (qp *QP) hasRecvHead() bool {
	if qp.srq == nil {
		return qp.rqHead < qp.rqTail
	}
	return qp.srqCur
}

// recvHead returns the receive WQE the next message goes to, taking one
// from the SRQ if needed. The caller has checked recvReady.
func (qp *QP) recvHead() *recvWQE {
	if qp.srq == nil {
		return &qp.rq[qp.rqHead%uint64(len(qp.rq))]
	}
	if !qp.srqCur && qp.srq.take(&qp.srqWQE) {
		qp.srqCur = true
		qp.srqHeld++
	}
	return &qp.srqWQE
}
