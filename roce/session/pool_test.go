package session

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
)

// poolNet is sessions on endpoint a, each connected to a session of a
// pool on endpoint b.
type poolNet struct {
	n     *testNet
	pool  *Pool
	alloc *roce.HeapAllocator
	cfg   Config
	a, b  []*Session
}

func newPoolNet(t *testing.T, pc PoolConfig, cfg Config, sessions int) *poolNet {
	t.Helper()
	pn := &poolNet{n: newTestNet(t, memlink.Config{}, roce.EndpointConfig{}), alloc: &roce.HeapAllocator{}, cfg: cfg}
	pc.Allocator = pn.alloc
	var err error
	if pn.pool, err = NewPool(pn.n.pb, pc); err != nil {
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
	qa, err := NewQP(pn.n.pa, ca)
	if err != nil {
		return err
	}
	b, err := pn.pool.NewSession(pn.cfg)
	if err != nil {
		qa.Destroy()
		return err
	}
	a, err := New(qa, ca)
	if err != nil {
		return err
	}
	if err := connectPair(pn.cfg, qa, b.QP(), 200, 100); err != nil {
		return err
	}
	pn.a, pn.b = append(pn.a, a), append(pn.b, b)
	return nil
}

// TestSessionPool: sessions on a pool stream both ways; one whose reader
// stalls holds its cap of receive buffers, and beyond it only what the
// pool lends while more than half its buffers are free, while the
// others go on; a session beyond what the free receive buffers allow is
// refused; an empty send pool is roce.ErrWouldBlock; releasing the sessions
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
		if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
			t.Fatal(err)
		}
		sent0 += k
		n.Poll()
	}
	// Its cap of 8, then 2 lent until 10 of the 20 are left.
	const stalledHolds = 10
	if held := pn.b[0].QP().SRQHeld(); held != stalledHolds {
		t.Errorf("the stalled session holds %d receive buffers, want %d", held, stalledHolds)
	}
	if st := pool.Stats(); st.RecvPosted != 20-stalledHolds {
		t.Errorf("pool %+v with one stalled session", st)
	}
	// The pool's Poll hands the completions to their sessions: the
	// stalled one has its full buffers to read, the others none.
	if pn.b[0].Readable() || pn.b[0].Buffered() != 0 {
		t.Errorf("data counted before the pool was polled: %d bytes", pn.b[0].Buffered())
	}
	pool.Poll()
	if !pn.b[0].Readable() || pn.b[0].Buffered() != stalledHolds*cfg.BufferSize {
		t.Errorf("after the pool's Poll: readable %v, %d bytes buffered", pn.b[0].Readable(), pn.b[0].Buffered())
	}
	if pn.b[1].Readable() || pool.Sessions() != 3 {
		t.Errorf("an idle session is readable, or the pool holds %d sessions", pool.Sessions())
	}
	// 10 buffers free, at the cap of 8: one more session is admitted...
	if err := pn.add(); err != nil {
		t.Fatalf("a session with %d buffers free: %v", pool.Stats().RecvPosted, err)
	}
	// ... and with the 4-session pool full, the next is refused.
	if err := pn.add(); !errors.Is(err, roce.ErrBusy) {
		t.Errorf("a fifth session: %v, want roce.ErrBusy", err)
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
	n.Run(1_000_000, func() bool {
		done := true
		for i := 1; i < 3; i++ {
			if sent[i] < len(msg) {
				k, err := pn.a[i].Send(msg[sent[i]:])
				if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
					t.Fatal(err)
				}
				sent[i] += k
			}
			k, err := pn.b[i].Recv(buf)
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatal(err)
			}
			got[i].Write(buf[:k])
			if sentBack[i] < len(msg) {
				k, err := pn.b[i].Send(msg[sentBack[i]:])
				if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
					t.Fatal(err)
				}
				if errors.Is(err, roce.ErrWouldBlock) && pool.Stats().SendFree == 0 {
					starved = true
				}
				if pn.b[i].SendBuffersInUse() > cfg.SendBuffers {
					t.Fatalf("session %d holds %d send buffers, cap %d", i, pn.b[i].SendBuffersInUse(), cfg.SendBuffers)
				}
				sentBack[i] += k
			}
			k, err = pn.a[i].Recv(buf)
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
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
	n.Run(1_000_000, func() bool {
		if sent0 < len(stalled) {
			k, _ := pn.a[0].Send(stalled[sent0:])
			sent0 += k
		}
		k, err := pn.b[0].Recv(buf)
		if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
			t.Fatal(err)
		}
		rest.Write(buf[:k])
		return rest.Len() == len(stalled)
	})

	// Closes arrive as EOF; a QP's failure returns its buffers.
	if err := pn.a[1].Close(); err != nil {
		t.Fatal(err)
	}
	n.Run(10000, func() bool {
		_, err := pn.b[1].Recv(buf)
		return errors.Is(err, io.EOF)
	})
	if err := pool.Close(); !errors.Is(err, roce.ErrBusy) {
		t.Errorf("close with live sessions: %v", err)
	}
	for i, s := range pn.b {
		s.QP().Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		if err := s.Release(); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	// Released, but their QPs still use the SRQ.
	if err := pool.Close(); !errors.Is(err, roce.ErrBusy) {
		t.Errorf("close with live QPs: %v", err)
	}
	for _, s := range pn.b {
		s.QP().Destroy()
	}
	if st := pool.Stats(); st.Sessions != 0 || st.RecvPosted != 20 || st.SendFree != 6 {
		t.Errorf("after release: %+v", st)
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	if st := pool.Stats(); st.RecvPosted != 0 {
		t.Errorf("closed pool: %+v", st)
	}
	for _, s := range pn.a {
		s.QP().Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		s.Release()
	}
	if pn.alloc.InUse() != 0 {
		t.Errorf("%d bytes left allocated", pn.alloc.InUse())
	}
}

// TestSessionPoolRefusesWhenDrained: with the receive buffers held by
// stalled sessions, a new one is refused with roce.ErrNoMemory.
func TestSessionPoolRefusesWhenDrained(t *testing.T) {
	cfg := smallSessionConfig()
	cfg.NoRNR = true
	pn := newPoolNet(t, PoolConfig{BufferSize: cfg.BufferSize, RecvBuffers: 12, SendBuffers: 4}, cfg, 1)
	data := make([]byte, 20*cfg.BufferSize)
	sent := 0
	for range 200 {
		k, _ := pn.a[0].Send(data[sent:])
		sent += k
		pn.n.Poll()
	}
	if err := pn.add(); !errors.Is(err, roce.ErrNoMemory) {
		t.Errorf("a session with %d receive buffers free: %v, want roce.ErrNoMemory", pn.pool.Stats().RecvPosted, err)
	}
	if pn.pool.Stats().RefusedNoBuffers != 1 {
		t.Errorf("pool %+v", pn.pool.Stats())
	}
}

// TestNoAllocsPerMessageShared: once warm, messages into a pool session
// (SRQ receives, dispatch by QPN) and out of it (shared send buffers)
// allocate nothing.
func TestNoAllocsPerMessageShared(t *testing.T) {
	cfg := DefaultConfig()
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
