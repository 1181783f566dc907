package session

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
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
		sp, _, msg := newSmallPair(t, lc, 1)
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
	pump := func() { sp.pumpWith(t, msg, sp.a.Send, lend) }
	for range 20 {
		pump()
	}
	if a := testing.AllocsPerRun(50, pump); a != 0 {
		t.Errorf("%v allocations per 200 kB message", a)
	}
}

// TestReservePost: a stream sent by filling reserved send buffers in
// place arrives byte for byte, on a clean and a faulty link, with some
// reserved buffers given back unsent; the reservations are bounded by
// the free send buffers, and once warm the path allocates nothing.
func TestReservePost(t *testing.T) {
	roctest.CleanAndFaulty(t, func(t *testing.T, lc memlink.Config) {
		sp, cfg, msg := newSmallPair(t, lc, 3)
		views := make([][]byte, 0, cfg.SendBuffers)
		rbuf := make([]byte, 64<<10)
		var got []byte
		// send fills reserved buffers from p and returns the bytes sent.
		send := func(p []byte, round int) int {
			sent := 0
			var err error
			views, err = sp.a.Reserve(views[:0], cfg.SendBuffers+1)
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatal(err)
			}
			if len(views) > cfg.SendBuffers {
				t.Fatalf("%d buffers reserved, %d exist", len(views), cfg.SendBuffers)
			}
			for i, v := range views {
				// Uneven fills, and by turns the last one given back.
				n := min(len(v)-round%7, len(p)-sent)
				if i == len(views)-1 && round%3 == 0 {
					n = 0
				}
				copy(v, p[sent:sent+n])
				if err := sp.a.PostReserved(n); err != nil {
					t.Fatal(err)
				}
				sent += n
			}
			if sp.a.Reserved() != 0 {
				t.Fatalf("%d still reserved", sp.a.Reserved())
			}
			return sent
		}
		sent := 0
		for round := 0; len(got) < len(msg); round++ {
			if round > 5_000_000 {
				t.Fatalf("stalled: sent %d, received %d", sent, len(got))
			}
			if sent < len(msg) {
				sent += send(msg[sent:], round)
			}
			if sp.n.Poll() == 0 {
				sp.n.Advance()
			}
			sp.n.Now = sp.n.Now.Add(1000)
			for {
				k, err := sp.b.Recv(rbuf)
				got = append(got, rbuf[:k]...)
				if err != nil {
					if !errors.Is(err, roce.ErrWouldBlock) {
						t.Fatal(err)
					}
					break
				}
			}
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("received %d bytes, want the %d sent, in order", len(got), len(msg))
		}
		if err := sp.a.PostReserved(1); !errors.Is(err, roce.ErrInvalidArgument) {
			t.Errorf("a post with nothing reserved: %v", err)
		}
		if !strings.HasSuffix(t.Name(), "/clean") {
			return // the allocation count once, on the clean link
		}
		small := make([]byte, 200_000)
		pump := func() {
			sp.pumpWith(t, small, func(p []byte) (int, error) { return send(p, 1), nil },
				func() (int, error) { return sp.b.Recv(rbuf) })
		}
		for range 20 {
			pump()
		}
		if a := testing.AllocsPerRun(50, pump); a != 0 {
			t.Errorf("%v allocations per 200 kB message", a)
		}
	})
}

// newSmallPair connects a session pair of eight 4 KiB buffers each way
// on lc and returns it, its config and 3 MiB of random bytes to stream.
func newSmallPair(t *testing.T, lc memlink.Config, seed uint64) (*sessionPair, Config, []byte) {
	cfg := DefaultConfig()
	cfg.Timeout = 14
	cfg.BufferSize, cfg.SendBuffers, cfg.RecvBuffers = 4096, 8, 8
	sp := newSessionPair(t, lc, roce.EndpointConfig{}, cfg)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	msg := make([]byte, 3<<20)
	for i := range msg {
		msg[i] = byte(rng.Uint32())
	}
	return sp, cfg, msg
}
