package roce

import (
	"errors"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
)

// TestSRQ: two QPs share an SRQ; completions carry each QP's number; a
// QP in ERROR flushes only the receive it took, not the SRQ's; PostRecv
// on such a QP fails; a SEND finding the SRQ empty is NAKed RNR.
func TestSRQ(t *testing.T) {
	n := newTestNet(t, memlink.Config{}, EndpointConfig{})
	o := defaultQPOpts()
	srq, err := n.pb.CreateSRQ(&SRQInitAttr{MaxWR: 8})
	if err != nil {
		t.Fatal(err)
	}
	rcq, _ := n.b.NewCQ(CQConfig{Depth: 16})
	scq, _ := n.b.NewCQ(CQConfig{Depth: 16})
	mrB := region(t, n.pb, 8*64, AccessLocalWrite)
	mrA := region(t, n.pa, 64, 0)
	post := func(i int) {
		t.Helper()
		if err := srq.PostRecv(&RecvWR{ID: uint64(i), SGList: []SGE{mrB.SGE(i*64, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	var senders [2]*QP
	var recvers [2]*QP
	var evs []Event
	for i := range senders {
		senders[i], _ = n.newQP(n.pa, o, &evs)
		if recvers[i], err = n.pb.CreateQP(&QPInitAttr{SendCQ: scq, RecvCQ: rcq, SRQ: srq, Cap: QPCap{MaxSendWR: 4}}); err != nil {
			t.Fatal(err)
		}
		if err := recvers[i].Modify(&QPAttr{State: QPStateInit}, QPAttrState); err != nil {
			t.Fatal(err)
		}
		connectQP(t, senders[i], o, macB, ipB, recvers[i].QPN(), o.psnB, o.psnA)
		connectQP(t, recvers[i], o, macA, ipA, senders[i].QPN(), o.psnA, o.psnB)
	}
	if err := recvers[0].PostRecv(&RecvWR{}); !errors.Is(err, ErrInvalidState) {
		t.Errorf("PostRecv on a QP with an SRQ: %v", err)
	}
	for i := range 3 {
		post(i)
	}
	send := func(qp *QP, id uint64) {
		t.Helper()
		if err := qp.PostSend(&SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{mrA.SGE(0, 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	send(senders[0], 1)
	send(senders[1], 2)
	n.settle()
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
	send(senders[1], 3)
	send(senders[1], 4)
	n.run(1000, func() bool { return senders[1].Stats().RNRNaksReceived > 0 })
	if k := rcq.Poll(wc[:]); k != 1 || wc[0].WRID != 2 || wc[0].QPN != recvers[1].QPN() {
		t.Errorf("%d completions %+v", k, wc[:k])
	}
	post(3)
	n.settle()
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

// TestSRQLimit: a QP at its SRQ limit takes no more receives, as with
// an empty receive queue (with NoRNR the request is dropped unanswered
// and sent again on the requester's timer), though the SRQ has more;
// ReleaseSRQ lets it take the next one.
func TestSRQLimit(t *testing.T) {
	n := newTestNet(t, memlink.Config{}, EndpointConfig{})
	o := defaultQPOpts()
	o.noRNR = true
	srq, err := n.pb.CreateSRQ(&SRQInitAttr{MaxWR: 8})
	if err != nil {
		t.Fatal(err)
	}
	rcq, _ := n.b.NewCQ(CQConfig{Depth: 16})
	scq, _ := n.b.NewCQ(CQConfig{Depth: 16})
	mrB := region(t, n.pb, 8*64, AccessLocalWrite)
	mrA := region(t, n.pa, 64, 0)
	for i := range 4 {
		if err := srq.PostRecv(&RecvWR{ID: uint64(i), SGList: []SGE{mrB.SGE(i*64, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	var evs []Event
	sender, scqs := n.newQP(n.pa, o, &evs)
	recver, err := n.pb.CreateQP(&QPInitAttr{SendCQ: scq, RecvCQ: rcq, SRQ: srq, Cap: QPCap{MaxSendWR: 4}, NoRNR: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := recver.Modify(&QPAttr{State: QPStateInit}, QPAttrState); err != nil {
		t.Fatal(err)
	}
	connectQP(t, sender, o, macB, ipB, recver.QPN(), o.psnB, o.psnA)
	connectQP(t, recver, o, macA, ipA, sender.QPN(), o.psnA, o.psnB)
	recver.SetSRQLimit(2)
	for id := range uint64(3) {
		if err := sender.PostSend(&SendWR{ID: id, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{mrA.SGE(0, 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	n.run(100_000, func() bool { return recver.Stats().RNRSilentDrops > 0 && rcq.Len() == 2 })
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
	n.run(100_000, func() bool { return rcq.Len() == 1 && scqs[0].Len() == 3 })
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
