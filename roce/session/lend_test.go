package session

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// TestLendReturn: a stream read through Lend and Return, on a clean and
// a faulty link, arrives byte for byte, returned one buffer or several
// at a time, ends with io.EOF once everything lent came back, and the
// views of buffers not returned stay intact while the sender goes on.
func TestLendReturn(t *testing.T) {
	roctest.CleanAndFaulty(t, func(t *testing.T, lc memlink.Config) {
		cfg := DefaultConfig()
		cfg.Timeout = 14
		cfg.BufferSize, cfg.SendBuffers, cfg.RecvBuffers = 4096, 8, 8
		sp := newSessionPair(t, lc, roce.EndpointConfig{}, cfg)
		rng := rand.New(rand.NewPCG(1, 2))
		msg := make([]byte, 3<<20)
		for i := range msg {
			msg[i] = byte(rng.Uint32())
		}
		var got []byte
		var views [][]byte
		sent, closed := 0, false
		for rounds := 0; ; rounds++ {
			if rounds > 5_000_000 {
				t.Fatalf("stalled: sent %d, received %d", sent, len(got))
			}
			if sent < len(msg) {
				k, err := sp.a.Send(msg[sent:])
				if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
					t.Fatal(err)
				}
				sent += k
			} else if !closed {
				closed = sp.a.Close() == nil
			}
			if sp.n.Poll() == 0 {
				sp.n.Advance()
			}
			sp.n.Now = sp.n.Now.Add(1000)
			var err error
			views, err = sp.b.Lend(views)
			if err == io.EOF {
				break
			}
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatalf("lend after %d bytes: %v", len(got), err)
			}
			// Return the oldest one or all, by turns: what stays lent
			// must not change while more arrives.
			k := len(views)
			if rounds%2 == 0 {
				k = min(k, 1)
			}
			for _, v := range views[:k] {
				got = append(got, v...)
			}
			if err := sp.b.Return(k); err != nil {
				t.Fatal(err)
			}
			views = append(views[:0], views[k:]...)
			if sp.b.Lent() != len(views) {
				t.Fatalf("%d lent, %d views held", sp.b.Lent(), len(views))
			}
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("received %d bytes, want the %d sent, in order", len(got), len(msg))
		}
		if err := sp.b.Return(1); !errors.Is(err, roce.ErrInvalidArgument) {
			t.Errorf("a return of more than lent: %v", err)
		}
	})
}

// TestLendNoAllocs: once warm, moving messages through Lend and Return
// with a reused views slice allocates nothing.
func TestLendNoAllocs(t *testing.T) {
	cfg := DefaultConfig()
	sp := newSessionPair(t, memlink.Config{}, roce.EndpointConfig{}, cfg)
	msg := make([]byte, 200_000)
	views := make([][]byte, 0, cfg.RecvBuffers)
	// Lend all that is there, at most once per poll (the Lend after a
	// Return would find none).
	lend := func() (int, error) {
		var err error
		views, err = sp.b.Lend(views[:0])
		got := 0
		for _, v := range views {
			got += len(v)
		}
		if rerr := sp.b.Return(len(views)); rerr != nil {
			t.Fatal(rerr)
		}
		if err == nil {
			err = roce.ErrWouldBlock
		}
		return got, err
	}
	pump := func() { sp.pumpWith(t, msg, lend) }
	for range 20 {
		pump()
	}
	if a := testing.AllocsPerRun(50, pump); a != 0 {
		t.Errorf("%v allocations per 200 kB message", a)
	}
}
