package roce

import (
	"errors"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// srqNet is senders on endpoint a connected to QPs on endpoint b that
// share one SRQ of 8 receives of 64 bytes, with shared CQs.
type srqNet struct {
	t        *testing.T
	n        *testNet
	o        qpOpts
	srq      *SRQ
	scq, rcq *CQ
	mrA, mrB *MR
}

// newSRQNet returns an srqNet whose QPs have the default options, and
// NoRNR set when noRNR is.
func newSRQNet(t *testing.T, noRNR bool) *srqNet {
	n := newTestNet(t, memlink.Config{}, EndpointConfig{})
	s := &srqNet{t: t, n: n, o: defaultQPOpts()}
	s.o.noRNR = noRNR
	var err error
	if s.srq, err = n.pb.CreateSRQ(&SRQInitAttr{MaxWR: 8}); err != nil {
		t.Fatal(err)
	}
	s.rcq, _ = n.b.NewCQ(CQConfig{Depth: 16})
	s.scq, _ = n.b.NewCQ(CQConfig{Depth: 16})
	s.mrB = roctest.Region(t, n.pb, 8*64, AccessLocalWrite)
	s.mrA = roctest.Region(t, n.pa, 64, 0)
	return s
}

// post puts receive buffers from to to-1 on the SRQ, with their
// indexes as IDs.
func (s *srqNet) post(from, to int) {
	s.t.Helper()
	for i := from; i < to; i++ {
		if err := s.srq.PostRecv(&RecvWR{ID: uint64(i), SGList: []SGE{s.mrB.SGE(i*64, 64)}}); err != nil {
			s.t.Fatal(err)
		}
	}
}

// send posts on qp a signaled 10-byte SEND with each of ids.
func (s *srqNet) send(qp *QP, ids ...uint64) {
	s.t.Helper()
	for _, id := range ids {
		if err := qp.PostSend(&SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{s.mrA.SGE(0, 10)}}); err != nil {
			s.t.Fatal(err)
		}
	}
}

// pair connects a new sender to a new QP on the SRQ; it returns both and
// the sender's CQs.
func (s *srqNet) pair() (sender, recver *QP, scqs [2]*CQ) {
	s.t.Helper()
	var evs []Event
	sender, scqs = s.n.newQP(s.n.pa, s.o, &evs)
	recver, err := s.n.pb.CreateQP(&QPInitAttr{SendCQ: s.scq, RecvCQ: s.rcq, SRQ: s.srq, Cap: QPCap{MaxSendWR: 4}, NoRNR: s.o.noRNR})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := recver.Modify(&QPAttr{State: QPStateInit}, QPAttrState); err != nil {
		s.t.Fatal(err)
	}
	connectQP(s.t, sender, s.o, macB, ipB, recver.QPN(), s.o.psnB, s.o.psnA)
	connectQP(s.t, recver, s.o, macA, ipA, sender.QPN(), s.o.psnA, s.o.psnB)
	return sender, recver, scqs
}

// TestSRQ: two QPs share an SRQ; completions carry each QP's number; a
// QP in ERROR flushes only the receive it took, not the SRQ's; PostRecv
// on such a QP fails; a SEND finding the SRQ empty is NAKed RNR.
func TestSRQ(t *testing.T) {
	s := newSRQNet(t, false)
	n, srq, rcq := s.n, s.srq, s.rcq
	var senders [2]*QP
	var recvers [2]*QP
	for i := range senders {
		senders[i], recvers[i], _ = s.pair()
	}
	if err := recvers[0].PostRecv(&RecvWR{}); !errors.Is(err, ErrInvalidState) {
		t.Errorf("PostRecv on a QP with an SRQ: %v", err)
	}
	s.post(0, 3)
	s.send(senders[0], 1)
	s.send(senders[1], 2)
	n.Settle()
	got := map[uint32]uint64{}
	var wc [4]WorkCompletion
	for _, w := range wc[:rcq.Poll(wc[:])] {
		if w.Status != WCSuccess || w.ByteLen != 10 {
			t.Errorf("completion %+v", w)
		}
		got[w.QPN] = w.WRID
	}
	if len(got) != 2 || got[recvers[0].QPN()]+got[recvers[1].QPN()] != 1 || srq.Len() != 1 {
		t.Errorf("completions by qp %v, srq holds %d", got, srq.Len())
	}
	recvers[0].Modify(&QPAttr{State: QPStateError}, QPAttrState)
	if rcq.Len() != 0 || srq.Len() != 1 {
		t.Errorf("a QP in ERROR flushed the SRQ: %d completions, %d left", rcq.Len(), srq.Len())
	}
	// The SRQ's last receive, then an RNR NAK for the next SEND.
	s.send(senders[1], 3, 4)
	n.Run(1000, func() bool { return senders[1].Stats().RNRNaksReceived > 0 })
	if k := rcq.Poll(wc[:]); k != 1 || wc[0].WRID != 2 || wc[0].QPN != recvers[1].QPN() {
		t.Errorf("%d completions %+v", k, wc[:k])
	}
	s.post(3, 4)
	n.Settle()
	if k := rcq.Poll(wc[:]); k != 1 || wc[0].WRID != 3 {
		t.Errorf("after the repost: %d completions %+v", k, wc[:k])
	}
	if err := srq.Destroy(); !errors.Is(err, ErrBusy) {
		t.Errorf("destroy an SRQ in use: %v", err)
	}
	for _, qp := range recvers {
		qp.Destroy()
	}
	if err := srq.Destroy(); err != nil {
		t.Error(err)
	}
}

// TestSRQLending: a QP at its SRQ limit takes more while more than the
// SRQ's lending reserve stay posted, and no more once it is reached.
func TestSRQLending(t *testing.T) {
	s := newSRQNet(t, true)
	n, srq, rcq := s.n, s.srq, s.rcq
	s.post(0, 6)
	srq.SetLendingReserve(2)
	sender, recver, _ := s.pair()
	recver.SetSRQLimit(2)
	s.send(sender, 0, 1, 2, 3, 4, 5)
	n.Run(100_000, func() bool { return recver.Stats().RNRSilentDrops > 0 && rcq.Len() == 4 })
	if recver.SRQHeld() != 4 || srq.Len() != 2 {
		t.Errorf("held %d, %d left on the SRQ; want 4 (2 lent), 2", recver.SRQHeld(), srq.Len())
	}
}

// TestSRQLimit: a QP at its SRQ limit takes no more receives, as with
// an empty receive queue (with NoRNR the request is dropped unanswered
// and sent again on the requester's timer), though the SRQ has more;
// ReleaseSRQ lets it take the next one.
func TestSRQLimit(t *testing.T) {
	s := newSRQNet(t, true)
	n, srq, rcq := s.n, s.srq, s.rcq
	s.post(0, 4)
	sender, recver, scqs := s.pair()
	recver.SetSRQLimit(2)
	s.send(sender, 0, 1, 2)
	n.Run(100_000, func() bool { return recver.Stats().RNRSilentDrops > 0 && rcq.Len() == 2 })
	if recver.SRQHeld() != 2 || srq.Len() != 2 {
		t.Errorf("at the limit: held %d, %d left on the SRQ", recver.SRQHeld(), srq.Len())
	}
	if st := recver.Stats(); st.RNRNaksSent != 0 {
		t.Errorf("RNR NAKs sent with NoRNR: %+v", st)
	}
	var wc [4]WorkCompletion
	if k := rcq.Poll(wc[:]); k != 2 || wc[0].WRID != 0 || wc[1].WRID != 1 {
		t.Fatalf("%d completions %+v", k, wc[:k])
	}
	recver.ReleaseSRQ(1)
	n.Run(100_000, func() bool { return rcq.Len() == 1 && scqs[0].Len() == 3 })
	if k := rcq.Poll(wc[:]); k != 1 || wc[0].WRID != 2 || wc[0].Status != WCSuccess {
		t.Fatalf("after the release: %d completions %+v", k, wc[:k])
	}
	if recver.SRQHeld() != 2 || srq.Len() != 1 {
		t.Errorf("after the release: held %d, %d left on the SRQ", recver.SRQHeld(), srq.Len())
	}
	// Releasing more than held stops at zero; 0 lifts the limit.
	recver.ReleaseSRQ(10)
	recver.SetSRQLimit(0)
	if recver.SRQHeld() != 0 {
		t.Errorf("held %d after releasing everything", recver.SRQHeld())
	}
	recver.Modify(&QPAttr{State: QPStateReset}, QPAttrState)
	if recver.SRQHeld() != 0 || srq.Len() != 1 {
		t.Errorf("after a reset: held %d, %d on the SRQ", recver.SRQHeld(), srq.Len())
	}
}
