package session

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// sessionPair is two sessions connected through a testNet.
type sessionPair struct {
	n      *testNet
	a, b   *Session
	allocA *roce.HeapAllocator
	allocB *roce.HeapAllocator
}

func newSessionPair(tb testing.TB, lc memlink.Config, ec roce.EndpointConfig, cfg Config) *sessionPair {
	tb.Helper()
	n := newTestNet(tb, lc, ec)
	sp := &sessionPair{n: n, allocA: &roce.HeapAllocator{}, allocB: &roce.HeapAllocator{}}
	const psnA, psnB = 0xFFFF00, 0x000100 // A's PSNs wrap
	sp.open(tb, cfg, psnA, psnB)
	return sp
}

// open makes sp's sessions, of cfg with memory from sp's allocators, on
// its endpoints, and connects them with initial PSNs psnA and psnB.
func (sp *sessionPair) open(tb testing.TB, cfg Config, psnA, psnB uint32) {
	tb.Helper()
	var qps [2]*roce.QP
	for i, side := range []struct {
		pd    *roce.PD
		alloc roce.Allocator
		s     **Session
	}{{sp.n.pa, sp.allocA, &sp.a}, {sp.n.pb, sp.allocB, &sp.b}} {
		c := cfg
		c.Allocator = side.alloc
		qp, err := NewQP(side.pd, c)
		if err != nil {
			tb.Fatal(err)
		}
		if *side.s, err = New(qp, c); err != nil {
			tb.Fatal(err)
		}
		qps[i] = qp
	}
	if err := connectPair(cfg, qps[0], qps[1], psnA, psnB); err != nil {
		tb.Fatal(err)
	}
}

// streamResult is what moving a byte stream through a session pair gave.
type streamResult struct {
	sent, received int
	sendHash       [32]byte
	recvHash       [32]byte
	rounds         int
	maxBufferSends int // the most bytes one Send call accepted
}

// stream sends size pseudo-random bytes from a to b, closes a, and
// checks every received byte against the regenerated stream.
func (sp *sessionPair) stream(tb testing.TB, size int, seed uint64, sendChunk, recvChunk int) streamResult {
	tb.Helper()
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	src, ref := rand.NewChaCha8(key), rand.NewChaCha8(key)
	hs, hr := sha256.New(), sha256.New()
	chunk := make([]byte, sendChunk)
	rbuf := make([]byte, recvChunk)
	want := make([]byte, recvChunk)
	var pending []byte
	var res streamResult
	closed, eof := false, false
	n := sp.n
	for !eof {
		res.rounds++
		if res.rounds > 50_000_000 {
			tb.Fatalf("stream stalled: sent %d, received %d of %d", res.sent, res.received, size)
		}
		if len(pending) == 0 && res.sent < size {
			k := min(len(chunk), size-res.sent)
			src.Read(chunk[:k])
			hs.Write(chunk[:k])
			pending = chunk[:k]
		}
		busy := 0
		if len(pending) > 0 {
			k, err := sp.a.Send(pending)
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				tb.Fatalf("send after %d bytes: %v", res.sent, err)
			}
			res.maxBufferSends = max(res.maxBufferSends, k)
			pending = pending[k:]
			res.sent += k
			busy += k
		}
		if res.sent == size && len(pending) == 0 && !closed {
			if err := sp.a.Close(); err == nil {
				closed = true
			} else if !errors.Is(err, roce.ErrWouldBlock) {
				tb.Fatal(err)
			}
		}
		busy += n.Poll()
		for {
			k, err := sp.b.Recv(rbuf)
			if errors.Is(err, roce.ErrWouldBlock) {
				break
			}
			if err == io.EOF {
				eof = true
				break
			}
			if err != nil {
				tb.Fatalf("recv after %d bytes: %v", res.received, err)
			}
			ref.Read(want[:k])
			if !bytes.Equal(rbuf[:k], want[:k]) {
				tb.Fatalf("stream differs in the %d bytes after offset %d", k, res.received)
			}
			hr.Write(rbuf[:k])
			res.received += k
			busy += k
		}
		if busy == 0 && !n.Advance() {
			tb.Fatalf("stream stuck: sent %d, received %d of %d, closed %v", res.sent, res.received, size, closed)
		}
		n.Now = n.Now.Add(1000) // a microsecond per round
	}
	copy(res.sendHash[:], hs.Sum(nil))
	copy(res.recvHash[:], hr.Sum(nil))
	return res
}

// TestSessionStreamFaults moves a checksummed stream through two
// sessions over a link that loses, reorders, duplicates and corrupts 1%
// of frames each: it must arrive whole and in order, with memory bounded.
// 256 MiB normally, 16 MiB with -short (for -race).
func TestSessionStreamFaults(t *testing.T) {
	size := 256 << 20
	if testing.Short() {
		size = 16 << 20
	}
	for _, mtu := range []int{1024, 4096} {
		t.Run(map[int]string{1024: "mtu1024", 4096: "mtu4096"}[mtu], func(t *testing.T) {
			sz := size
			if mtu == 1024 {
				sz /= 4 // four times the packets per byte
			}
			cfg := DefaultConfig()
			cfg.PathMTU = mtu
			cfg.Timeout = 14 // 67 ms of virtual time
			sp := newSessionPair(t, roctest.Faulty(1, 0.01), roce.EndpointConfig{}, cfg)
			inUse := sp.allocA.InUse() + sp.allocB.InUse()
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			res := sp.stream(t, sz, 7, 200_003, 150_001)
			runtime.ReadMemStats(&m1)
			if res.received != sz || res.sendHash != res.recvHash {
				t.Fatalf("received %d of %d bytes, hashes %x / %x", res.received, sz, res.sendHash[:8], res.recvHash[:8])
			}
			if got := sp.allocA.InUse() + sp.allocB.InUse(); got != inUse {
				t.Errorf("registered memory went from %d to %d bytes", inUse, got)
			}
			// The stream is far larger than anything allowed to accumulate.
			if grown := m1.TotalAlloc - m0.TotalAlloc; grown > 4<<20 {
				t.Errorf("allocated %d bytes moving %d", grown, sz)
			}
			ls, lb := sp.n.A.Link.Stats(), sp.n.B.Link.Stats()
			if ls.Lost == 0 || ls.Reordered == 0 || ls.Duplicated == 0 || ls.Corrupted == 0 || lb.Lost == 0 {
				t.Errorf("faults not injected: %+v / %+v", ls, lb)
			}
			qa, qb := sp.a.QP().Stats(), sp.b.QP().Stats()
			es := sp.n.b.Stats()
			if qa.Retransmits == 0 || qb.NaksSent[roce.NakSequence] == 0 || qb.Duplicates == 0 || es.ICRCErrors == 0 {
				t.Errorf("recovery paths not exercised: a %+v b %+v endpoint b %+v", qa, qb, es)
			}
			t.Logf("%d MiB, %d rounds, %d bytes allocated; link a→b %+v; qp a: tx %d retransmits %d timeouts %d; qp b: naks %v dups %d; icrc drops %d",
				sz>>20, res.rounds, m1.TotalAlloc-m0.TotalAlloc, ls, qa.TxPackets, qa.Retransmits, qa.Timeouts, qb.NaksSent, qb.Duplicates, es.ICRCErrors)
		})
	}
}

// smallSessionConfig has few small buffers so tests reach the limits.
func smallSessionConfig() Config {
	cfg := DefaultConfig()
	cfg.BufferSize = 16 << 10
	cfg.SendBuffers = 4
	cfg.RecvBuffers = 8
	cfg.Timeout = 14
	cfg.MinRNRTimer = 1 // 10 µs
	return cfg
}

// drain reads everything b has into out until want bytes or EOF.
func (sp *sessionPair) drain(tb testing.TB, out *bytes.Buffer) error {
	var buf [40000]byte
	for {
		k, err := sp.b.Recv(buf[:])
		out.Write(buf[:k])
		if err != nil {
			return err
		}
	}
}

// TestSessionSendLargerThanBuffers sends a message eight times all send
// buffers together: Send takes what fits, reports roce.ErrWouldBlock when
// nothing does, and later calls reap the send CQ to continue.
func TestSessionSendLargerThanBuffers(t *testing.T) {
	cfg := smallSessionConfig()
	sp := newSessionPair(t, roctest.Faulty(1, 0), roce.EndpointConfig{}, cfg)
	msg := make([]byte, 8*cfg.SendBuffers*cfg.BufferSize)
	roctest.Pattern(msg, 11)
	k, err := sp.a.Send(msg)
	if err != nil || k != cfg.SendBuffers*cfg.BufferSize {
		t.Fatalf("first send: %d, %v; want all %d buffers", k, err, cfg.SendBuffers)
	}
	if k, err := sp.a.Send(msg[k:]); k != 0 || !errors.Is(err, roce.ErrWouldBlock) {
		t.Fatalf("send with all buffers posted: %d, %v", k, err)
	}
	if got := sp.a.Stats(); got.SendBuffersInUse != 4 || got.SendBuffers != 4 {
		t.Errorf("occupancy %d/%d", got.SendBuffersInUse, got.SendBuffers)
	}
	var got bytes.Buffer
	sent, reaped := k, 0
	for sent < len(msg) {
		sp.n.Poll()
		sp.n.Now = sp.n.Now.Add(1000)
		if err := sp.drain(t, &got); !errors.Is(err, roce.ErrWouldBlock) {
			t.Fatal(err)
		}
		waiting := sp.a.QP().SendCQ().Len()
		k, err := sp.a.Send(msg[sent:])
		if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
			t.Fatal(err)
		}
		if k > 0 && waiting > 0 && sp.a.QP().SendCQ().Len() == 0 {
			reaped++
		}
		sent += k
	}
	sp.n.Run(100_000, func() bool {
		sp.drain(t, &got)
		return got.Len() == len(msg)
	})
	if !bytes.Equal(got.Bytes(), msg) {
		t.Error("data differs")
	}
	if reaped == 0 {
		t.Error("no Send call reaped completions to continue")
	}
}

func TestSessionClose(t *testing.T) {
	sp := newSessionPair(t, roctest.Faulty(1, 0.01), roce.EndpointConfig{}, smallSessionConfig())
	msg := []byte("the last words")
	if k, err := sp.a.Send(msg); k != len(msg) || err != nil {
		t.Fatal(k, err)
	}
	if err := sp.a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.a.Send(msg); !errors.Is(err, ErrClosed) {
		t.Errorf("send after close: %v", err)
	}
	var got bytes.Buffer
	var last error
	sp.n.Run(100_000, func() bool {
		last = sp.drain(t, &got)
		return last == io.EOF
	})
	if got.String() != string(msg) {
		t.Errorf("received %q", got.String())
	}
	if _, err := sp.b.Recv(make([]byte, 10)); err != io.EOF {
		t.Errorf("recv after EOF: %v", err)
	}
	// The other direction still works until b closes too.
	if _, err := sp.b.Send([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	sp.b.Close()
	var back bytes.Buffer
	sp.n.Run(100_000, func() bool {
		var buf [10]byte
		k, err := sp.a.Recv(buf[:])
		back.Write(buf[:k])
		return err == io.EOF
	})
	if back.String() != "bye" {
		t.Errorf("a received %q", back.String())
	}
}

// TestSessionFlowControl: a receiver that stops reading runs out of
// posted buffers; the sender is RNR-NAKed and backs off, and everything
// arrives once the receiver reads again.
func TestSessionFlowControl(t *testing.T) {
	cfg := smallSessionConfig()
	sp := newSessionPair(t, roctest.Faulty(1, 0), roce.EndpointConfig{}, cfg)
	msg := make([]byte, 4*cfg.RecvBuffers*cfg.BufferSize)
	roctest.Pattern(msg, 12)
	sent := 0
	sp.n.Run(1_000_000, func() bool {
		k, _ := sp.a.Send(msg[sent:])
		sent += k
		return sp.a.QP().Stats().RNRNaksReceived >= 3
	})
	if sp.b.Buffered() != 0 {
		t.Fatal("data counted before Recv polled it")
	}
	var got bytes.Buffer
	sp.n.Run(1_000_000, func() bool {
		k, _ := sp.a.Send(msg[sent:])
		sent += k
		sp.drain(t, &got)
		return got.Len() == len(msg)
	})
	if !bytes.Equal(got.Bytes(), msg) {
		t.Error("data differs")
	}
}

// TestSessionRecvErrors: a receive completion that is not a successful
// SEND on the session's QP within its buffer size fails the session with
// an error that says what was wrong.
func TestSessionRecvErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		act    func(t *testing.T, n *testNet, raw *roce.QP, s *Session, other *roce.QP)
		is     []error
		reason string
	}{
		{"write with immediate", func(t *testing.T, n *testNet, raw *roce.QP, s *Session, _ *roce.QP) {
			raw.PostSend(&roce.SendWR{Opcode: roce.WRRDMAWriteWithImm, Imm: 1})
		}, []error{ErrBadCompletion}, "opcode recv-rdma-with-imm, want recv"},
		{"flushed", func(t *testing.T, n *testNet, raw *roce.QP, s *Session, _ *roce.QP) {
			s.QP().Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		}, []error{ErrBadCompletion, roce.ErrFlushed}, "status work request flushed"},
		{"longer than a buffer", func(t *testing.T, n *testNet, raw *roce.QP, s *Session, _ *roce.QP) {
			big := roctest.Region(t, n.pa, DefaultBufferSize+1, 0)
			raw.PostSend(&roce.SendWR{Opcode: roce.WRSend, SGList: []roce.SGE{big.SGE(0, big.Len())}})
		}, []error{ErrBadCompletion, roce.ErrLocalLength}, "status local length error"},
		{"another qp", func(t *testing.T, n *testNet, raw *roce.QP, s *Session, other *roce.QP) {
			other.PostRecv(&roce.RecvWR{ID: 5})
			other.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		}, []error{ErrBadCompletion}, "for qp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, roctest.Faulty(1, 0), roce.EndpointConfig{})
			cfg := DefaultConfig()
			cfg.RecvBuffers = 4
			cfg.SendBuffers = 2
			raw := n.newRawQP(n.pa)
			qp, err := NewQP(n.pb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			// A second QP sharing the session's receive CQ.
			other, err := n.pb.CreateQP(&roce.QPInitAttr{SendCQ: qp.SendCQ(), RecvCQ: qp.RecvCQ(), Cap: roce.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
			if err != nil {
				t.Fatal(err)
			}
			other.Modify(&roce.QPAttr{State: roce.QPStateInit}, roce.QPAttrState)
			s, err := New(qp, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := connectPair(DefaultConfig(), raw, qp, 0x200, 0x100); err != nil {
				t.Fatal(err)
			}
			tc.act(t, n, raw, s, other)
			var rerr error
			n.Run(100_000, func() bool {
				_, rerr = s.Recv(make([]byte, 100))
				return !errors.Is(rerr, roce.ErrWouldBlock)
			})
			for _, want := range tc.is {
				if !errors.Is(rerr, want) {
					t.Errorf("error %v is not %v", rerr, want)
				}
			}
			var ce *CompletionError
			if !errors.As(rerr, &ce) || !strings.Contains(rerr.Error(), tc.reason) {
				t.Errorf("error %q does not say %q", rerr, tc.reason)
			}
			if _, err := s.Recv(make([]byte, 1)); err != rerr {
				t.Errorf("second recv: %v", err)
			}
			if _, err := s.Send([]byte{1}); err != rerr {
				t.Errorf("send after failure: %v", err)
			}
		})
	}
}

func TestSessionLifecycle(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), roce.EndpointConfig{})
	alloc := &roce.HeapAllocator{}
	cfg := smallSessionConfig()
	cfg.Allocator = alloc
	qp, err := NewQP(n.pa, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(qp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(qp, cfg); !errors.Is(err, roce.ErrInvalidState) {
		t.Errorf("second session on a qp: %v", err)
	}
	if want := int64((cfg.SendBuffers + cfg.RecvBuffers) * cfg.BufferSize); alloc.InUse() != want {
		t.Errorf("allocated %d, want %d", alloc.InUse(), want)
	}
	if err := s.Release(); !errors.Is(err, roce.ErrInvalidState) {
		t.Errorf("release of a live session: %v", err)
	}
	qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	if _, err := s.Send([]byte{1}); !errors.Is(err, roce.ErrFlushed) {
		t.Errorf("send on a qp in ERROR: %v", err)
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if alloc.InUse() != 0 || s.Stats() != (Stats{}) {
		t.Errorf("after release: %d bytes in use, stats %+v", alloc.InUse(), s.Stats())
	}
	if _, err := s.Recv(make([]byte, 1)); err == nil {
		t.Error("recv after release succeeded")
	}
	limited := smallSessionConfig()
	limited.Allocator = &roce.HeapAllocator{Limit: 100 << 10}
	qp2, _ := NewQP(n.pa, limited)
	if _, err := New(qp2, limited); !errors.Is(err, roce.ErrNoMemory) || limited.Allocator.(*roce.HeapAllocator).InUse() != 0 {
		t.Errorf("session beyond the allocator's limit: %v", err)
	}
	bad := cfg
	bad.RecvQueueDepth = 2
	if _, err := NewQP(n.pa, bad); !errors.Is(err, roce.ErrInvalidArgument) {
		t.Errorf("receive queue smaller than the buffers: %v", err)
	}
}
