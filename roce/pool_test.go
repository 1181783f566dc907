package roce

import (
	"bytes"
	"errors"
	"io"
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

// poolNet is sessions on endpoint a, each connected to a session of a
// pool on endpoint b.
type poolNet struct {
	n     *testNet
	pool  *SessionPool
	alloc *HeapAllocator
	cfg   SessionConfig
	a, b  []*Session
}

func newPoolNet(t *testing.T, pc PoolConfig, cfg SessionConfig, sessions int) *poolNet {
	t.Helper()
	pn := &poolNet{n: newTestNet(t, memlink.Config{}, EndpointConfig{}), alloc: &HeapAllocator{}, cfg: cfg}
	pc.Allocator = pn.alloc
	var err error
	if pn.pool, err = NewSessionPool(pn.n.pb, pc); err != nil {
		t.Fatal(err)
	}
	for range sessions {
		if err := pn.add(); err != nil {
			t.Fatal(err)
		}
	}
	return pn
}

func (pn *poolNet) add() error {
	ca := pn.cfg
	ca.Allocator = pn.alloc
	qa, err := NewSessionQP(pn.n.pa, ca)
	if err != nil {
		return err
	}
	b, err := pn.pool.NewSession(pn.cfg)
	if err != nil {
		qa.Destroy()
		return err
	}
	a, err := NewSession(qa, ca)
	if err != nil {
		return err
	}
	qb := b.QP()
	for _, m := range []struct {
		qp *QP
		f  func() (*QPAttr, QPAttrMask)
	}{
		{qa, func() (*QPAttr, QPAttrMask) {
			return pn.cfg.RTRAttr(AddressVector{DstMAC: macB, DstIP: ipB}, qb.QPN(), 100)
		}},
		{qb, func() (*QPAttr, QPAttrMask) {
			return pn.cfg.RTRAttr(AddressVector{DstMAC: macA, DstIP: ipA}, qa.QPN(), 200)
		}},
		{qa, func() (*QPAttr, QPAttrMask) { return pn.cfg.RTSAttr(200) }},
		{qb, func() (*QPAttr, QPAttrMask) { return pn.cfg.RTSAttr(100) }},
	} {
		if err := m.qp.Modify(m.f()); err != nil {
			return err
		}
	}
	pn.a, pn.b = append(pn.a, a), append(pn.b, b)
	return nil
}

// TestSessionPool: sessions on a pool stream both ways; one whose reader
// stalls holds no more than its cap of receive buffers while the others
// go on; a session beyond what the free receive buffers allow is
// refused; an empty send pool is ErrWouldBlock; releasing the sessions
// returns every buffer.
func TestSessionPool(t *testing.T) {
	cfg := smallSessionConfig() // 16 KiB buffers, caps: 4 send, 8 receive
	cfg.NoRNR = true
	pn := newPoolNet(t, PoolConfig{BufferSize: cfg.BufferSize, RecvBuffers: 20, SendBuffers: 6, MaxSessions: 4}, cfg, 3)
	n, pool := pn.n, pn.pool
	if st := pool.Stats(); st.RegisteredBytes != 26*cfg.BufferSize || st.RecvPosted != 20 || st.SendFree != 6 {
		t.Fatalf("pool %+v", st)
	}

	// Session 0's reader stalls; its peer sends far more than its cap.
	stalled := make([]byte, 40*cfg.BufferSize)
	sent0 := 0
	for range 200 {
		k, err := pn.a[0].Send(stalled[sent0:])
		if err != nil && !errors.Is(err, ErrWouldBlock) {
			t.Fatal(err)
		}
		sent0 += k
		n.poll()
	}
	if held := pn.b[0].QP().SRQHeld(); held != cfg.RecvBuffers {
		t.Errorf("the stalled session holds %d receive buffers, want its cap %d", held, cfg.RecvBuffers)
	}
	if st := pool.Stats(); st.RecvPosted != 20-cfg.RecvBuffers {
		t.Errorf("pool %+v with one stalled session", st)
	}
	// 12 buffers free, at the cap of 8: one more session is admitted...
	if err := pn.add(); err != nil {
		t.Fatalf("a session with %d buffers free: %v", pool.Stats().RecvPosted, err)
	}
	// ... and with the 4-session pool full, the next is refused.
	if err := pn.add(); !errors.Is(err, ErrBusy) {
		t.Errorf("a fifth session: %v, want ErrBusy", err)
	}

	// Sessions 1 and 2 stream to b while 0 stalls, and b streams back.
	msg := make([]byte, 300<<10)
	for i := range msg {
		msg[i] = byte(i*7 + i>>11)
	}
	var got [3]bytes.Buffer
	var back [3]bytes.Buffer
	var sent, sentBack [3]int
	buf := make([]byte, 50000)
	starved := false
	n.run(1_000_000, func() bool {
		done := true
		for i := 1; i < 3; i++ {
			if sent[i] < len(msg) {
				k, err := pn.a[i].Send(msg[sent[i]:])
				if err != nil && !errors.Is(err, ErrWouldBlock) {
					t.Fatal(err)
				}
				sent[i] += k
			}
			k, err := pn.b[i].Recv(buf)
			if err != nil && !errors.Is(err, ErrWouldBlock) {
				t.Fatal(err)
			}
			got[i].Write(buf[:k])
			if sentBack[i] < len(msg) {
				k, err := pn.b[i].Send(msg[sentBack[i]:])
				if err != nil && !errors.Is(err, ErrWouldBlock) {
					t.Fatal(err)
				}
				if errors.Is(err, ErrWouldBlock) && pool.Stats().SendFree == 0 {
					starved = true
				}
				if pn.b[i].SendBuffersInUse() > cfg.SendBuffers {
					t.Fatalf("session %d holds %d send buffers, cap %d", i, pn.b[i].SendBuffersInUse(), cfg.SendBuffers)
				}
				sentBack[i] += k
			}
			k, err = pn.a[i].Recv(buf)
			if err != nil && !errors.Is(err, ErrWouldBlock) {
				t.Fatal(err)
			}
			back[i].Write(buf[:k])
			done = done && got[i].Len() == len(msg) && back[i].Len() == len(msg)
		}
		return done
	})
	for i := 1; i < 3; i++ {
		if !bytes.Equal(got[i].Bytes(), msg) || !bytes.Equal(back[i].Bytes(), msg) {
			t.Errorf("session %d: the streams differ", i)
		}
	}
	if !starved || pool.Stats().SendStarved == 0 {
		t.Errorf("two sessions with caps of 4 never found the 6-buffer send pool empty: %+v", pool.Stats())
	}

	// The stalled reader reads now and gets everything, in order.
	var rest bytes.Buffer
	n.run(1_000_000, func() bool {
		if sent0 < len(stalled) {
			k, _ := pn.a[0].Send(stalled[sent0:])
			sent0 += k
		}
		k, err := pn.b[0].Recv(buf)
		if err != nil && !errors.Is(err, ErrWouldBlock) {
			t.Fatal(err)
		}
		rest.Write(buf[:k])
		return rest.Len() == len(stalled)
	})

	// Closes arrive as EOF; a QP's failure returns its buffers.
	if err := pn.a[1].Close(); err != nil {
		t.Fatal(err)
	}
	n.run(10000, func() bool {
		_, err := pn.b[1].Recv(buf)
		return errors.Is(err, io.EOF)
	})
	for i, s := range pn.b {
		s.QP().Modify(&QPAttr{State: QPStateError}, QPAttrState)
		if err := s.Release(); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		s.QP().Destroy()
	}
	if st := pool.Stats(); st.Sessions != 0 || st.RecvPosted != 20 || st.SendFree != 6 {
		t.Errorf("after release: %+v", st)
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range pn.a {
		s.QP().Modify(&QPAttr{State: QPStateError}, QPAttrState)
		s.Release()
	}
	if pn.alloc.InUse() != 0 {
		t.Errorf("%d bytes left allocated", pn.alloc.InUse())
	}
}

// TestSessionPoolRefusesWhenDrained: with the receive buffers held by
// stalled sessions, a new one is refused with ErrNoMemory.
func TestSessionPoolRefusesWhenDrained(t *testing.T) {
	cfg := smallSessionConfig()
	cfg.NoRNR = true
	pn := newPoolNet(t, PoolConfig{BufferSize: cfg.BufferSize, RecvBuffers: 12, SendBuffers: 4}, cfg, 1)
	data := make([]byte, 20*cfg.BufferSize)
	sent := 0
	for range 200 {
		k, _ := pn.a[0].Send(data[sent:])
		sent += k
		pn.n.poll()
	}
	if err := pn.add(); !errors.Is(err, ErrNoMemory) {
		t.Errorf("a session with %d receive buffers free: %v, want ErrNoMemory", pn.pool.Stats().RecvPosted, err)
	}
	if pn.pool.Stats().RefusedNoBuffers != 1 {
		t.Errorf("pool %+v", pn.pool.Stats())
	}
}

// TestNoAllocsPerMessageShared: once warm, messages into a pool session
// (SRQ receives, dispatch by QPN) and out of it (shared send buffers)
// allocate nothing.
func TestNoAllocsPerMessageShared(t *testing.T) {
	cfg := DefaultSessionConfig()
	cfg.Timeout = 14
	pn := newPoolNet(t, PoolConfig{BufferSize: cfg.BufferSize, RecvBuffers: 64, SendBuffers: 64, MaxSessions: 4}, cfg, 2)
	in := &sessionPair{n: pn.n, a: pn.a[0], b: pn.b[0]}
	out := &sessionPair{n: pn.n, a: pn.b[1], b: pn.a[1]}
	msg := make([]byte, 200_000)
	rbuf := make([]byte, 64<<10)
	for range 20 {
		in.pump(t, msg, rbuf)
		out.pump(t, msg, rbuf)
	}
	if a := testing.AllocsPerRun(50, func() { in.pump(t, msg, rbuf); out.pump(t, msg, rbuf) }); a != 0 {
		t.Errorf("%v allocations per 200 kB message each way", a)
	}
}
