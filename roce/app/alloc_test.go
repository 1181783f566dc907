package app_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// spin polls until cond holds, without testing helpers (they may
// allocate); it reports false if nothing can happen any more.
func (n *testNet) spin(cond func() bool) bool {
	for i := 0; i < 10_000_000; i++ {
		if cond() {
			return true
		}
		if n.Poll() == 0 && !n.Advance() {
			return cond()
		}
		n.Now = n.Now.Add(time.Microsecond)
	}
	return false
}

// rawPingPong is a peer that sends one message to a RawEcho and waits
// for its echo, with work requests built once.
type rawPingPong struct {
	n     *testNet
	p     *peerQP
	sqp   *roce.QP
	swr   roce.SendWR
	rwr   roce.RecvWR
	wcs   [4]roce.WorkCompletion
	ssge  [1]roce.SGE
	rsge  [1]roce.SGE
	cond  func() bool
	fails int
}

func newRawPingPong(tb testing.TB, link memlink.Config, size int) (*rawPingPong, *app.RawEcho) {
	n := newTestNet(tb, link)
	echo, err := app.NewRawEcho(n.Srv, app.RawConfig{MessageSize: size, Depth: 4})
	n.Serve(echo, err)
	r := &rawPingPong{n: n}
	if r.sqp, err = echo.Accept(nil); err != nil {
		tb.Fatal(err)
	}
	r.p = n.newPeer(2, 2, 2*size)
	n.connect(r.sqp, r.p.qp, defaultCM())
	echo.Established(r.sqp)
	r.ssge[0], r.rsge[0] = r.p.mr.SGE(0, size), r.p.mr.SGE(size, size)
	r.swr = roce.SendWR{Opcode: roce.WRSendWithImm, Imm: 7, SGList: r.ssge[:]}
	r.rwr = roce.RecvWR{SGList: r.rsge[:]}
	r.cond = func() bool { return r.p.rcq.Len() > 0 }
	return r, echo
}

func (r *rawPingPong) round() {
	if r.p.qp.PostRecv(&r.rwr) != nil || r.p.qp.PostSend(&r.swr) != nil || !r.n.spin(r.cond) {
		r.fails++
		return
	}
	if r.p.rcq.Poll(r.wcs[:]) != 1 || r.wcs[0].Status != roce.WCSuccess {
		r.fails++
	}
	r.p.scq.Poll(r.wcs[:])
}

// TestNoAllocsPerMessage: once warm, echoing a message allocates
// nothing, on a clean link and on one that loses frames.
func TestNoAllocsPerMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		link memlink.Config
	}{{"clean", memlink.Config{}}, {"loss", lossy(0.02)}} {
		t.Run("raw/"+tc.name, func(t *testing.T) {
			r, _ := newRawPingPong(t, tc.link, 3000)
			for range 50 {
				r.round()
			}
			if a := testing.AllocsPerRun(200, r.round); a != 0 {
				t.Errorf("%v allocations per echoed message", a)
			}
			if r.fails != 0 {
				t.Errorf("%d rounds failed", r.fails)
			}
		})
		t.Run("session/"+tc.name, func(t *testing.T) {
			sp, n := sessionEcho(t, tc.link)
			msg, back := make([]byte, 20_000), make([]byte, 20_000)
			fails := 0
			round := func() {
				if !sessionRound(n, sp.cli, msg, back) {
					fails++
				}
			}
			for range 50 {
				round()
			}
			if a := testing.AllocsPerRun(200, round); a != 0 {
				t.Errorf("%v allocations per echoed 20 kB", a)
			}
			if fails != 0 {
				t.Errorf("%d rounds failed", fails)
			}
		})
	}
}

func sessionEcho(tb testing.TB, link memlink.Config) (*sessionPair, *testNet) {
	n := newTestNet(tb, link)
	sp := n.newSessionPair(smallSessions())
	echo := app.NewEcho(app.EchoConfig{})
	n.AddFunc(echo.Poll)
	if err := echo.Attach(sp.srv, nil); err != nil {
		tb.Fatal(err)
	}
	return sp, n
}

// sessionRound sends msg through the echo and reads it back into back.
func sessionRound(n *testNet, s *session.Session, msg, back []byte) bool {
	sent, got := 0, 0
	for i := 0; got < len(msg); i++ {
		if i > 1_000_000 {
			return false
		}
		if sent < len(msg) {
			k, err := s.Send(msg[sent:])
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				return false
			}
			sent += k
		}
		if n.Poll() == 0 {
			n.Advance()
		}
		n.Now = n.Now.Add(time.Microsecond)
		k, err := s.Recv(back[got:])
		if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
			return false
		}
		got += k
	}
	return true
}

func BenchmarkRawEcho(b *testing.B) {
	for _, size := range []int{16, 4096, 65536} {
		b.Run(byteSize(size), func(b *testing.B) {
			r, _ := newRawPingPong(b, memlink.Config{}, size)
			b.SetBytes(int64(2 * size))
			b.ReportAllocs()
			for b.Loop() {
				r.round()
			}
			if r.fails != 0 {
				b.Fatalf("%d rounds failed", r.fails)
			}
		})
	}
}

func BenchmarkEchoSession(b *testing.B) {
	sp, n := sessionEcho(b, memlink.Config{})
	msg, back := make([]byte, 128<<10), make([]byte, 128<<10)
	b.SetBytes(int64(2 * len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if !sessionRound(n, sp.cli, msg, back) {
			b.Fatal("round failed")
		}
	}
}

func byteSize(n int) string {
	switch {
	case n >= 1<<10 && n%(1<<10) == 0:
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
