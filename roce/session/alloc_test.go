package session

import (
	"errors"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// pump moves msg through the session pair once: send it all, poll, read
// it all.
func (sp *sessionPair) pump(tb testing.TB, msg, rbuf []byte) {
	sp.pumpWith(tb, msg, sp.a.Send, func() (int, error) { return sp.b.Recv(rbuf) })
}

// pumpWith is pump with send sending what it can of the rest of msg and
// recv reading what arrived: the bytes it took and roce.ErrWouldBlock
// once there is no more.
func (sp *sessionPair) pumpWith(tb testing.TB, msg []byte, send func([]byte) (int, error), recv func() (int, error)) {
	sent, got := 0, 0
	for i := 0; got < len(msg); i++ {
		if i > 1_000_000 {
			tb.Fatalf("pump stuck: sent %d, received %d", sent, got)
		}
		if sent < len(msg) {
			k, err := send(msg[sent:])
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				tb.Fatal(err)
			}
			sent += k
		}
		if sp.n.Poll() == 0 {
			sp.n.Advance()
		}
		sp.n.Now = sp.n.Now.Add(1000)
		for {
			k, err := recv()
			got += k
			if err != nil {
				if !errors.Is(err, roce.ErrWouldBlock) {
					tb.Fatal(err)
				}
				break
			}
		}
	}
}

// TestNoAllocsPerMessage: once warm, moving messages through sessions,
// including go-back-N and duplicate handling on a faulty link, allocates
// nothing.
func TestNoAllocsPerMessage(t *testing.T) {
	roctest.CleanAndFaulty(t, func(t *testing.T, lc memlink.Config) {
		cfg := DefaultConfig()
		cfg.Timeout = 14
		sp := newSessionPair(t, lc, roce.EndpointConfig{}, cfg)
		msg := make([]byte, 200_000)
		rbuf := make([]byte, 64<<10)
		for range 20 {
			sp.pump(t, msg, rbuf)
		}
		if a := testing.AllocsPerRun(50, func() { sp.pump(t, msg, rbuf) }); a != 0 {
			t.Errorf("%v allocations per 200 kB message", a)
		}
	})
}
