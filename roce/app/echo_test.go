package app_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// sessionPair connects a session on the server endpoint (handed to a
// service) with one on the client endpoint (driven by the test), as
// roce/cephrdma would.
type sessionPair struct {
	srv, cli *session.Session
	alloc    *roce.HeapAllocator
}

func smallSessions() session.Config {
	cfg := session.DefaultConfig()
	cfg.BufferSize = 16 << 10
	cfg.SendBuffers, cfg.RecvBuffers = 8, 8
	cfg.Timeout = 12
	return cfg
}

func (n *testNet) newSessionPair(cfg session.Config) *sessionPair {
	n.TB.Helper()
	sp := &sessionPair{alloc: &roce.HeapAllocator{}}
	cfg.Allocator = sp.alloc
	qs, err := session.NewQP(n.Srv.NewPD(), cfg)
	if err != nil {
		n.TB.Fatal(err)
	}
	qc, err := session.NewQP(n.cliPD, cfg)
	if err != nil {
		n.TB.Fatal(err)
	}
	if sp.srv, err = session.New(qs, cfg); err != nil {
		n.TB.Fatal(err)
	}
	if sp.cli, err = session.New(qc, cfg); err != nil {
		n.TB.Fatal(err)
	}
	const psnS, psnC = 0x00FFF0, 0xFFFFF0
	for _, m := range []func() (*roce.QPAttr, roce.QPAttrMask){
		func() (*roce.QPAttr, roce.QPAttrMask) {
			return cfg.RTRAttr(roce.AddressVector{DstMAC: macCli, DstIP: ipCli}, qc.QPN(), psnC)
		},
		func() (*roce.QPAttr, roce.QPAttrMask) {
			return cfg.RTRAttr(roce.AddressVector{DstMAC: macSrv, DstIP: ipSrv}, qs.QPN(), psnS)
		},
	} {
		a, mask := m()
		qp := qs
		if a.AV.DstIP == ipSrv {
			qp = qc
		}
		if err := qp.Modify(a, mask); err != nil {
			n.TB.Fatal(err)
		}
	}
	for _, x := range []struct {
		qp  *roce.QP
		psn uint32
	}{{qs, psnS}, {qc, psnC}} {
		if err := x.qp.Modify(cfg.RTSAttr(x.psn)); err != nil {
			n.TB.Fatal(err)
		}
	}
	return sp
}

// release tears both sessions down as their owner would.
func (sp *sessionPair) release(tb testing.TB) {
	tb.Helper()
	for _, s := range []*session.Session{sp.srv, sp.cli} {
		qp := s.QP()
		qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		if err := s.Release(); err != nil {
			tb.Fatal(err)
		}
		scq, rcq := qp.SendCQ(), qp.RecvCQ()
		for _, err := range []error{qp.Destroy(), scq.Destroy(), rcq.Destroy(), qp.PD().Dealloc()} {
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
	if sp.alloc.InUse() != 0 {
		tb.Errorf("%d bytes of session buffers still allocated", sp.alloc.InUse())
	}
}

// streamClient sends size pseudo-random bytes on s in chunks, closes,
// and reads until EOF, checking that what comes back is the stream
// (echo) or nothing (discard). pause, if set, says when not to read.
type streamClient struct {
	s             *session.Session
	size          int
	src, ref      *rand.ChaCha8
	chunk, pend   []byte
	rbuf, want    []byte
	sent, got     int
	closed, eof   bool
	expectNothing bool
	pause         func() bool
	err           error
}

func newStreamClient(s *session.Session, size int, seed byte) *streamClient {
	key := [32]byte{seed}
	return &streamClient{
		s: s, size: size, src: rand.NewChaCha8(key), ref: rand.NewChaCha8(key),
		chunk: make([]byte, 40_000), rbuf: make([]byte, 30_000), want: make([]byte, 30_000),
	}
}

// step does what it can without blocking and reports whether the
// stream is over (EOF seen).
func (c *streamClient) step() bool {
	if c.err != nil {
		return true
	}
	for c.sent < c.size || len(c.pend) > 0 {
		if len(c.pend) == 0 {
			k := min(len(c.chunk), c.size-c.sent)
			c.src.Read(c.chunk[:k])
			c.pend = c.chunk[:k]
		}
		k, err := c.s.Send(c.pend)
		c.pend, c.sent = c.pend[k:], c.sent+k
		if errors.Is(err, roce.ErrWouldBlock) {
			break
		}
		if err != nil {
			c.err = err
			return true
		}
	}
	if c.sent == c.size && len(c.pend) == 0 && !c.closed {
		if err := c.s.Close(); err == nil {
			c.closed = true
		} else if !errors.Is(err, roce.ErrWouldBlock) {
			c.err = err
			return true
		}
	}
	for c.pause == nil || !c.pause() {
		k, err := c.s.Recv(c.rbuf)
		if k > 0 {
			c.ref.Read(c.want[:k])
			if c.expectNothing || !bytes.Equal(c.rbuf[:k], c.want[:k]) {
				c.err = errors.New("echo differs from the stream")
				return true
			}
			c.got += k
		}
		if err == io.EOF {
			c.eof = true
			return true
		}
		if err != nil {
			if !errors.Is(err, roce.ErrWouldBlock) {
				c.err = err
				return true
			}
			break
		}
	}
	return false
}

func TestEchoSession(t *testing.T) {
	for _, tc := range []struct {
		name    string
		link    memlink.Config
		size    int
		echoBuf int
		discard bool
	}{
		{"echo/clean", memlink.Config{}, 3 << 20, 0, false},
		{"echo/small buffer", memlink.Config{}, 1 << 20, 1000, false},
		{"echo/faults", roctest.Faulty(3, 0.01), 1 << 20, 0, false},
		{"echo/loss", lossy(0.05), 512 << 10, 0, false},
		{"echo/empty", memlink.Config{}, 0, 0, false},
		{"discard/clean", memlink.Config{}, 2 << 20, 0, true},
		{"discard/loss", lossy(0.05), 512 << 10, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, tc.link)
			sp := n.newSessionPair(smallSessions())
			cfg := app.EchoConfig{BufferSize: tc.echoBuf}
			var svc app.SessionService = app.NewEcho(cfg)
			if tc.discard {
				svc = app.NewDiscard(cfg)
			}
			n.AddFunc(svc.Poll)
			var d doneRecorder
			if err := svc.Attach(sp.srv, d.done); err != nil {
				t.Fatal(err)
			}
			if err := svc.Attach(sp.srv, d.done); !errors.Is(err, roce.ErrInvalidState) {
				t.Errorf("second attach: %v", err)
			}
			c := newStreamClient(sp.cli, tc.size, 1)
			c.expectNothing = tc.discard
			n.Run(50_000_000, func() bool { return c.step() && d.calls > 0 })
			if c.err != nil {
				t.Fatalf("client after %d sent, %d received: %v", c.sent, c.got, c.err)
			}
			if d.calls != 1 || d.err != nil {
				t.Errorf("done %d times: %v", d.calls, d.err)
			}
			wantBack := tc.size
			if tc.discard {
				wantBack = 0
			}
			if c.got != wantBack {
				t.Errorf("got back %d bytes of %d", c.got, tc.size)
			}
			st := svc.Stats()
			if st.BytesIn != uint64(tc.size) || st.BytesOut != uint64(wantBack) || st.Completed != 1 || st.Active != 0 {
				t.Errorf("stats %+v", st)
			}
			sp.release(t)
		})
	}
}

// TestEchoBackPressure: a client that stops reading stops the echo,
// which stops receiving, which stops the client's sends; nothing
// accumulates, and the stream completes once the client reads again.
func TestEchoBackPressure(t *testing.T) {
	n, sp, echo, d := newEchoSession(t, app.EchoConfig{BufferSize: 4096})
	const size = 8 << 20
	c := newStreamClient(sp.cli, size, 2)
	reading := false
	c.pause = func() bool { return !reading }
	stuck := 0
	for i := 0; stuck < 100; i++ {
		if i > 1_000_000 {
			t.Fatal("the client never blocked")
		}
		before := c.sent
		c.step()
		if n.Poll() == 0 {
			n.Advance()
		}
		n.Now = n.Now.Add(time.Microsecond)
		if c.sent == before {
			stuck++
		} else {
			stuck = 0
		}
	}
	// Bounded by the buffers on the way: the client's session sends,
	// the echo's receive buffers and its own buffer, the client's
	// receive buffers.
	cfg := smallSessions()
	limit := 2*(cfg.SendBuffers+cfg.RecvBuffers)*cfg.BufferSize + 4096
	if c.sent >= size || c.sent > limit {
		t.Fatalf("client sent %d bytes without reading any (limit %d)", c.sent, limit)
	}
	t.Logf("blocked after %d bytes sent, echo moved %+v", c.sent, echo.Stats())
	reading = true
	n.Run(50_000_000, func() bool { return c.step() && d.calls > 0 })
	if c.err != nil || c.got != size || d.err != nil {
		t.Fatalf("got %d of %d: %v / %v", c.got, size, c.err, d.err)
	}
	sp.release(t)
}

// TestEchoDetach: the owner detaches a session (its peer went away);
// done is not called and the session is no longer touched.
func TestEchoDetach(t *testing.T) {
	n, sp, echo, d := newEchoSession(t, app.EchoConfig{})
	c := newStreamClient(sp.cli, 100_000, 3)
	c.pause = func() bool { return true }
	for range 1000 {
		c.step()
		n.Poll()
		n.Now = n.Now.Add(time.Microsecond)
	}
	echo.Detach(sp.srv)
	echo.Detach(sp.srv) // a second time does nothing
	sp.release(t)
	for range 100 {
		n.Poll()
	}
	if st := echo.Stats(); d.calls != 0 || st.Active != 0 || st.Accepted != 1 {
		t.Errorf("done %d, stats %+v", d.calls, st)
	}
}

// newEchoSession returns a clean network with a session pair whose
// server session an Echo of cfg serves, and the recorder of its done.
func newEchoSession(t *testing.T, cfg app.EchoConfig) (*testNet, *sessionPair, *app.Echo, *doneRecorder) {
	t.Helper()
	n := newTestNet(t, memlink.Config{})
	sp := n.newSessionPair(smallSessions())
	echo := app.NewEcho(cfg)
	n.AddFunc(echo.Poll)
	d := &doneRecorder{}
	if err := echo.Attach(sp.srv, d.done); err != nil {
		t.Fatal(err)
	}
	return n, sp, echo, d
}

// TestEchoLinger: when the peer closes and at once destroys its QP, as
// Ceph does, the echo's close is never acknowledged: the session is done
// after the linger time all the same.
func TestEchoLinger(t *testing.T) {
	n, sp, _, d := newEchoSession(t, app.EchoConfig{Linger: 2 * time.Second})
	if err := sp.cli.Close(); err != nil {
		t.Fatal(err)
	}
	n.Run(100_000, func() bool { return sp.cli.QP().SendQueueFree() == sp.cli.QP().Cap().MaxSendWR })
	sp.cli.QP().Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	start := n.Now
	n.Run(10_000_000, func() bool { return d.calls > 0 })
	if d.err != nil || n.Now.Sub(start) < 2*time.Second {
		t.Errorf("done after %v: %v", n.Now.Sub(start), d.err)
	}
	sp.release(t)
}

// TestEchoStall: with data to send back and a peer that no longer
// acknowledges, the echo gives the session up after the stall timeout.
func TestEchoStall(t *testing.T) {
	n, sp, echo, d := newEchoSession(t, app.EchoConfig{StallTimeout: 10 * time.Second})
	if _, err := sp.cli.Send(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	n.Run(100_000, func() bool { return echo.Stats().BytesIn == 1000 })
	n.A.Link.SetFaults(1, 0, 0, 0) // the echo never arrives
	n.Run(10_000_000, func() bool { return d.calls > 0 })
	if !errors.Is(d.err, app.ErrStalled) {
		t.Errorf("done with %v", d.err)
	}
	if st := echo.Stats(); st.Failed != 1 || st.Active != 0 {
		t.Errorf("stats %+v", st)
	}
	sp.release(t)
}
