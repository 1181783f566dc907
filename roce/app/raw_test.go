package app_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// TestRawEchoRDMAClient does what librdmacm's rdma_client does against
// the echo: one send and one receive queue slot, a 16-byte receive
// posted before connecting, a 16-byte SEND, both completions awaited,
// then disconnect. The echo must answer with exactly the 16 bytes.
func TestRawEchoRDMAClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		link memlink.Config
	}{
		{"clean", memlink.Config{}},
		{"loss", lossy(0.2)},
		{"faults", roctest.Faulty(3, 0.1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, tc.link)
			alloc := &roce.HeapAllocator{}
			echo, err := app.NewRawEcho(n.Srv, app.RawConfig{MessageSize: 4096, Depth: 4, Allocator: alloc})
			sqp, d := n.serveAccept(echo, err)
			if sqp.State() != roce.QPStateInit || sqp.RecvQueueLen() != 4 {
				t.Fatalf("accepted qp in %v with %d receives posted", sqp.State(), sqp.RecvQueueLen())
			}
			p := n.newPeer(1, 1, 32)
			p.postRecv(t, 1, 16, 16)
			n.connect(sqp, p.qp, defaultCM())
			if err := echo.Established(sqp); err != nil {
				t.Fatal(err)
			}
			msg := p.mr.Bytes()
			fill(msg[:16], 0x41)
			p.postSend(t, roce.SendWR{ID: 2, Opcode: roce.WRSend, SGList: []roce.SGE{p.mr.SGE(0, 16)}})
			n.Run(1_000_000, func() bool { return p.scq.Len() == 1 && p.rcq.Len() == 1 })
			if wc := roctest.PollOne(t, p.scq); wc.Status != roce.WCSuccess || wc.WRID != 2 {
				t.Errorf("send completion %+v", wc)
			}
			if wc := roctest.PollOne(t, p.rcq); wc.Status != roce.WCSuccess || wc.Opcode != roce.WCRecv || wc.ByteLen != 16 || wc.WRID != 1 {
				t.Errorf("receive completion %+v", wc)
			}
			if !bytes.Equal(msg[16:32], msg[:16]) {
				t.Errorf("echo %x, sent %x", msg[16:32], msg[:16])
			}
			// rdma_client disconnects; the connection manager tells the
			// daemon, which closes the connection.
			p.destroy(t)
			n.Run(1000, func() bool { return n.Poll() == 0 })
			if err := echo.Close(sqp); err != nil {
				t.Fatal(err)
			}
			if err := echo.Close(sqp); !errors.Is(err, app.ErrUnknown) {
				t.Errorf("second close: %v", err)
			}
			st := echo.Stats()
			want := app.Stats{Accepted: 1, Completed: 1, MessagesIn: 1, MessagesOut: 1, BytesIn: 16, BytesOut: 16}
			if st != want {
				t.Errorf("stats %+v, want %+v", st, want)
			}
			if d.calls != 0 {
				t.Errorf("done called %d times (%v) for a connection the peer ended", d.calls, d.err)
			}
			roctest.Shutdown(t, echo, alloc)
		})
	}
}

// echoStream has the peer keep window messages of varying sizes (some
// with immediate data, some empty) in flight against a RawEcho and
// checks that every echo comes back whole, in order, with its immediate.
func echoStream(t *testing.T, n *testNet, echo *app.RawEcho, msgs, window, maxSize int) roce.QPStats {
	t.Helper()
	sqp, d := accept(t, echo)
	p := n.newPeer(window, window, 2*window*maxSize)
	n.connect(sqp, p.qp, defaultCM())
	echo.Established(sqp)
	mem := p.mr.Bytes()
	size := func(k int) int {
		switch k % 5 {
		case 0:
			return maxSize
		case 1:
			return 0
		}
		return (k * 7919) % (maxSize + 1)
	}
	slot := func(k int) int { return k % window * 2 * maxSize }
	sent, got := 0, 0
	var wcs [8]roce.WorkCompletion
	n.Run(50_000_000, func() bool {
		for sent < msgs && sent-got < window && p.qp.SendQueueFree() > 0 {
			off, sz := slot(sent), size(sent)
			fill(mem[off:off+sz], sent)
			p.postRecv(t, uint64(sent), off+maxSize, maxSize)
			wr := roce.SendWR{ID: uint64(sent), Opcode: roce.WRSend, SGList: []roce.SGE{p.mr.SGE(off, sz)}}
			if sent%3 == 0 {
				wr.Opcode, wr.Imm = roce.WRSendWithImm, uint32(sent)*0x01010101
			}
			p.postSend(t, wr)
			sent++
		}
		p.scq.Poll(wcs[:]) // SigAll: drain; errors show up on the receive side
		k := p.rcq.Poll(wcs[:])
		for i := range k {
			wc := &wcs[i]
			off, sz := slot(got), size(got)
			withImm := wc.Flags&roce.WCWithImm != 0
			switch {
			case wc.Status != roce.WCSuccess || wc.WRID != uint64(got) || int(wc.ByteLen) != sz:
				t.Fatalf("message %d (%d bytes): receive completion %+v", got, sz, wc)
			case withImm != (got%3 == 0) || withImm && wc.Imm != uint32(got)*0x01010101:
				t.Fatalf("message %d: immediate %v %#x", got, withImm, wc.Imm)
			case !bytes.Equal(mem[off+maxSize:off+maxSize+sz], mem[off:off+sz]):
				t.Fatalf("message %d: echo differs", got)
			}
			got++
		}
		return got == msgs
	})
	st := echo.Stats()
	if st.MessagesIn != uint64(msgs) || d.calls != 0 {
		t.Errorf("stats %+v, done %d (%v)", st, d.calls, d.err)
	}
	qs := sqp.Stats()
	p.destroy(t)
	if err := echo.Close(sqp); err != nil {
		t.Fatal(err)
	}
	return qs
}

func TestRawEchoStream(t *testing.T) {
	for _, tc := range []struct {
		name          string
		link          memlink.Config
		msgs, maxSize int
		window, depth int
	}{
		{"clean/small", memlink.Config{}, 2000, 100, 8, 8},
		{"clean/64k", memlink.Config{}, 200, 64 << 10, 4, 4},
		{"more in flight than buffers", memlink.Config{}, 500, 3000, 16, 4}, // RNR NAKs
		{"loss", lossy(0.05), 500, 5000, 8, 8},
		{"faults", roctest.Faulty(3, 0.02), 500, 5000, 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, tc.link)
			alloc := &roce.HeapAllocator{}
			echo, err := app.NewRawEcho(n.Srv, app.RawConfig{MessageSize: tc.maxSize, Depth: tc.depth, Allocator: alloc})
			n.Serve(echo, err)
			qs := echoStream(t, n, echo, tc.msgs, tc.window, tc.maxSize)
			if tc.window > tc.depth && qs.RNRNaksSent == 0 {
				t.Error("more messages in flight than buffers, but no RNR NAK")
			}
			if tc.link.Loss > 0 && (n.A.Link.Stats().Lost == 0 || n.B.Link.Stats().Lost == 0 || qs.Retransmits == 0) {
				t.Errorf("no loss recovered from: links %+v %+v, qp %+v", n.A.Link.Stats(), n.B.Link.Stats(), qs)
			}
			roctest.Shutdown(t, echo, alloc)
		})
	}
}

// TestRawDiscard: messages are counted and dropped, receives reposted.
func TestRawDiscard(t *testing.T) {
	n := newTestNet(t, lossy(0.05))
	svc, err := app.NewRawEcho(n.Srv, app.RawConfig{MessageSize: 2048, Depth: 4, Discard: true})
	n.Serve(svc, err)
	sqp, err := svc.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := n.newPeer(8, 1, 2048)
	n.connect(sqp, p.qp, defaultCM())
	const msgs = 300
	posted, done := 0, 0
	n.Run(10_000_000, func() bool {
		for posted < msgs && p.qp.SendQueueFree() > 0 {
			p.postSend(t, roce.SendWR{ID: uint64(posted), Opcode: roce.WRSend, SGList: []roce.SGE{p.mr.SGE(0, 1+posted%2048)}})
			posted++
		}
		for p.scq.Len() > 0 {
			if wc := roctest.PollOne(t, p.scq); wc.Status != roce.WCSuccess {
				t.Fatalf("send %+v", wc)
			}
			done++
		}
		return done == msgs
	})
	want := uint64(0)
	for i := range msgs {
		want += uint64(1 + i%2048)
	}
	if st := svc.Stats(); st.MessagesIn != msgs || st.BytesIn != want || st.MessagesOut != 0 || p.rcq.Len() != 0 {
		t.Errorf("stats %+v (want %d bytes in), peer got %d messages", st, want, p.rcq.Len())
	}
}

// TestRawEchoTooLong: a message longer than the buffers fails the
// connection with a length error, reported through done.
func TestRawEchoTooLong(t *testing.T) {
	n := newTestNet(t, memlink.Config{})
	echo, err := app.NewRawEcho(n.Srv, app.RawConfig{MessageSize: 512, Depth: 2})
	sqp, d := n.serveAccept(echo, err)
	p := n.newPeer(1, 1, 4096)
	n.connect(sqp, p.qp, defaultCM())
	echo.Established(sqp)
	p.postSend(t, roce.SendWR{ID: 1, Opcode: roce.WRSend, SGList: []roce.SGE{p.mr.SGE(0, 513)}})
	n.Run(100_000, func() bool { return d.calls > 0 && p.scq.Len() > 0 })
	if d.calls != 1 || !errors.Is(d.err, roce.ErrLocalLength) {
		t.Errorf("done %d times with %v, want a local length error", d.calls, d.err)
	}
	if wc := roctest.PollOne(t, p.scq); !errors.Is(wc.Status.Err(), roce.ErrRemoteInvalidRequest) {
		t.Errorf("peer's send completion %+v", wc)
	}
	if st := echo.Stats(); st.Failed != 1 || st.Active != 1 {
		t.Errorf("stats %+v", st)
	}
	if err := echo.Close(sqp); err != nil {
		t.Fatal(err)
	}
	if st := echo.Stats(); st.Failed != 1 || st.Completed != 0 || st.Active != 0 {
		t.Errorf("stats after close %+v", st)
	}
}

// TestRawEchoStall: a peer that vanishes while an echo is unacknowledged
// is given up after the stall timeout even with unlimited retries.
func TestRawEchoStall(t *testing.T) {
	n := newTestNet(t, memlink.Config{})
	echo, err := app.NewRawEcho(n.Srv, app.RawConfig{MessageSize: 64, Depth: 2, StallTimeout: 3e9})
	sqp, d := n.serveAccept(echo, err)
	p := n.newPeer(1, 1, 64)
	n.connect(sqp, p.qp, defaultCM())
	p.postSend(t, roce.SendWR{ID: 1, Opcode: roce.WRSend, SGList: []roce.SGE{p.mr.SGE(0, 8)}})
	n.Run(100_000, func() bool { return p.scq.Len() == 1 })
	// The echo gets no receive (RNR NAK), and then the peer is gone.
	n.B.Link.SetFaults(1, 0, 0, 0)
	start := n.Now
	n.Run(1_000_000, func() bool { return d.calls > 0 })
	if !errors.Is(d.err, app.ErrStalled) || n.Now.Sub(start) < 3e9 {
		t.Errorf("done with %v after %v", d.err, n.Now.Sub(start))
	}
	echo.Close(sqp)
	p.destroy(t)
}

func TestRawEchoLimits(t *testing.T) {
	n := newTestNet(t, memlink.Config{})
	if _, err := app.NewRawEcho(n.Srv, app.RawConfig{Depth: roce.MaxQueueDepth + 1}); !errors.Is(err, roce.ErrInvalidArgument) {
		t.Errorf("depth too large: %v", err)
	}
	if _, err := app.NewRawEcho(nil, app.RawConfig{}); !errors.Is(err, roce.ErrInvalidArgument) {
		t.Errorf("no endpoint: %v", err)
	}
	alloc := &roce.HeapAllocator{Limit: 3000}
	echo, err := app.NewRawEcho(n.Srv, app.RawConfig{MessageSize: 1000, Depth: 2, MaxConns: 2, Allocator: alloc})
	if err != nil {
		t.Fatal(err)
	}
	q1, err := echo.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := echo.Accept(nil); !errors.Is(err, roce.ErrNoMemory) {
		t.Errorf("accept beyond the allocator: %v", err)
	}
	if alloc.InUse() != 2000 {
		t.Errorf("failed accept leaked: %d bytes in use", alloc.InUse())
	}
	alloc.Limit = 0
	if _, err := echo.Accept(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := echo.Accept(nil); !errors.Is(err, roce.ErrBusy) {
		t.Errorf("accept beyond MaxConns: %v", err)
	}
	if err := echo.Established(q1); err != nil {
		t.Error(err)
	}
	if err := echo.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := echo.Accept(nil); !errors.Is(err, roce.ErrInvalidState) {
		t.Errorf("accept after shutdown: %v", err)
	}
	if alloc.InUse() != 0 || echo.Stats().Active != 0 {
		t.Errorf("after shutdown: %d bytes, stats %+v", alloc.InUse(), echo.Stats())
	}
}
