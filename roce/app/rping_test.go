package app_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// rpingClient follows librdmacm's rping client (rping.c
// rping_test_client) step by step. Its region holds, in order, recv_buf
// and send_buf (struct rping_rdma_info each), start_buf and rdma_buf.
type rpingClient struct {
	t    *testing.T
	n    *testNet
	p    *peerQP
	size int
}

const (
	rpRecvOff  = 0
	rpSendOff  = 16
	rpStartOff = 32
)

func newRPingClient(t *testing.T, n *testNet, size int) *rpingClient {
	// rping_create_qp: RPING_SQ_DEPTH 16 sends, 2 receives.
	c := &rpingClient{t: t, n: n, p: n.newPeer(16, 2, rpStartOff+2*size), size: size}
	c.p.postRecv(t, 0, rpRecvOff, 16)
	return c
}

func (c *rpingClient) startBuf() []byte { return c.p.mr.Bytes()[rpStartOff : rpStartOff+c.size] }
func (c *rpingClient) rdmaBuf() []byte {
	return c.p.mr.Bytes()[rpStartOff+c.size : rpStartOff+2*c.size]
}

// sendInfo sends struct rping_rdma_info for the buffer at off, in
// network byte order (rping_format_send), from send_buf.
func (c *rpingClient) sendInfo(off int) {
	b := c.p.mr.Bytes()[rpSendOff : rpSendOff+16]
	binary.BigEndian.PutUint64(b[0:], c.p.mr.Addr()+uint64(off))
	binary.BigEndian.PutUint32(b[8:], c.p.mr.RKey())
	binary.BigEndian.PutUint32(b[12:], uint32(c.size))
	c.p.postSend(c.t, roce.SendWR{Opcode: roce.WRSend, Flags: roce.SendSignaled, SGList: []roce.SGE{c.p.mr.SGE(rpSendOff, 16)}})
}

// waitGoAhead waits for the server's 16-byte SEND and reposts the
// receive, as rping's CQ handler does.
func (c *rpingClient) waitGoAhead() {
	c.t.Helper()
	c.n.Run(10_000_000, func() bool { return c.p.rcq.Len() > 0 })
	wc := roctest.PollOne(c.t, c.p.rcq)
	if wc.Status != roce.WCSuccess || wc.ByteLen != 16 {
		c.t.Fatalf("go ahead: %+v", wc)
	}
	c.p.postRecv(c.t, 0, rpRecvOff, 16)
	for c.p.scq.Len() > 0 {
		if wc := roctest.PollOne(c.t, c.p.scq); wc.Status != roce.WCSuccess {
			c.t.Fatalf("send: %+v", wc)
		}
	}
}

// ping runs one round and validates it (rping -V).
func (c *rpingClient) ping(round int, start *byte) {
	c.t.Helper()
	// Put some ascii text in the buffer.
	buf := c.startBuf()
	cc := copy(buf, fmt.Sprintf("rdma-ping-%d: ", round))
	for i, ch := cc, *start; i < len(buf); i++ {
		buf[i] = ch
		if ch++; ch > 122 {
			ch = 65
		}
	}
	if *start++; *start > 122 {
		*start = 65
	}
	buf[len(buf)-1] = 0
	clear(c.rdmaBuf())
	c.sendInfo(rpStartOff)
	c.waitGoAhead()
	c.sendInfo(rpStartOff + c.size)
	c.waitGoAhead()
	if !bytes.Equal(c.startBuf(), c.rdmaBuf()) {
		c.t.Fatalf("round %d: data mismatch:\n%q\n%q", round, c.startBuf(), c.rdmaBuf())
	}
}

// TestRPingServer runs rping -c -C 10 -V against RPingServer at rping's
// default size, its largest and its smallest, on clean and faulty links.
func TestRPingServer(t *testing.T) {
	for _, tc := range []struct {
		size, count int
		link        memlink.Config
	}{
		{64, 10, memlink.Config{}},
		{64, 10, lossy(0.1)},
		{65535, 10, memlink.Config{}},
		{65535, 10, roctest.Faulty(3, 0.01)},
		{25, 10, memlink.Config{}}, // RPING_MIN_BUFSIZE
		{3000, 200, lossy(0.02)},
	} {
		t.Run(fmt.Sprintf("S%d/C%d/loss%v", tc.size, tc.count, tc.link.Loss), func(t *testing.T) {
			n := newTestNet(t, tc.link)
			alloc := &roce.HeapAllocator{}
			srv, err := app.NewRPingServer(n.Srv, app.RPingConfig{Allocator: alloc})
			sqp, d := n.serveAccept(srv, err)
			c := newRPingClient(t, n, tc.size)
			n.connect(sqp, c.p.qp, defaultCM())
			srv.Established(sqp)
			start := byte(65)
			for round := range tc.count {
				c.ping(round, &start)
			}
			// rping_disconnect; the daemon closes on the DREQ.
			c.p.destroy(t)
			if err := srv.Close(sqp); err != nil {
				t.Fatal(err)
			}
			if d.calls != 0 {
				t.Errorf("done called: %v", d.err)
			}
			st := srv.Stats()
			rounds := uint64(tc.count)
			if st.RDMAReads != rounds || st.RDMAWrites != rounds || st.MessagesIn != 2*rounds ||
				st.RDMABytes != 2*rounds*uint64(tc.size) || st.Completed != 1 || st.Active != 0 {
				t.Errorf("stats %+v", st)
			}
			roctest.Shutdown(t, srv, alloc)
		})
	}
}

// TestRPingServerErrors: a client that breaks the protocol fails its
// connection with a clear error, reported through done.
func TestRPingServerErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cm   func(*cmParams)
		act  func(c *rpingClient)
		want error
	}{
		{"short advertisement", nil, func(c *rpingClient) {
			c.p.postSend(c.t, roce.SendWR{Opcode: roce.WRSend, SGList: []roce.SGE{c.p.mr.SGE(rpSendOff, 12)}})
		}, app.ErrProtocol},
		{"buffer too large", nil, func(c *rpingClient) {
			c.size = 1 << 20
			c.sendInfo(rpStartOff)
		}, app.ErrProtocol},
		{"wrong rkey", nil, func(c *rpingClient) {
			c.sendInfo(rpStartOff)
			b := c.p.mr.Bytes()
			b[rpSendOff+8] ^= 0xFF
		}, roce.ErrRemoteAccess},
		{"no initiator depth", func(p *cmParams) { p.srvRdAtom = 0 }, func(c *rpingClient) {
			c.sendInfo(rpStartOff)
		}, roce.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, memlink.Config{})
			srv, err := app.NewRPingServer(n.Srv, app.RPingConfig{})
			sqp, d := n.serveAccept(srv, err)
			c := newRPingClient(t, n, 64)
			cm := defaultCM()
			if tc.cm != nil {
				tc.cm(&cm)
			}
			n.connect(sqp, c.p.qp, cm)
			srv.Established(sqp)
			// The rkey corruption must happen before the SEND leaves.
			tc.act(c)
			n.Run(1_000_000, func() bool { return d.calls > 0 })
			if !errors.Is(d.err, tc.want) {
				t.Errorf("done with %v, want %v", d.err, tc.want)
			}
			srv.Close(sqp)
			c.p.destroy(t)
			if err := srv.Shutdown(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRPingClientVanishes: a client gone mid-round leaves the READ
// retrying; with a stall timeout the server gives up, and Close frees
// everything.
func TestRPingClientVanishes(t *testing.T) {
	n := newTestNet(t, memlink.Config{})
	alloc := &roce.HeapAllocator{}
	srv, err := app.NewRPingServer(n.Srv, app.RPingConfig{Allocator: alloc, StallTimeout: 5e9})
	sqp, d := n.serveAccept(srv, err)
	c := newRPingClient(t, n, 64)
	n.connect(sqp, c.p.qp, defaultCM())
	srv.Established(sqp)
	c.sendInfo(rpStartOff)
	n.Run(1000, func() bool { return c.p.scq.Len() > 0 })
	c.p.destroy(t)
	n.Run(1_000_000, func() bool { return d.calls > 0 })
	if !errors.Is(d.err, app.ErrStalled) {
		t.Errorf("done with %v", d.err)
	}
	if err := srv.Close(sqp); err != nil {
		t.Fatal(err)
	}
	roctest.Shutdown(t, srv, alloc)
}

func TestRPingInfo(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want app.RPingInfo
		err  bool
	}{
		{[]byte{0, 0, 0x7f, 0xff, 0x12, 0x34, 0x56, 0x78, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 64},
			app.RPingInfo{Addr: 0x7fff12345678, RKey: 0xdeadbeef, Size: 64}, false},
		{make([]byte, 15), app.RPingInfo{}, true},
		{make([]byte, 17), app.RPingInfo{}, true},
		{nil, app.RPingInfo{}, true},
	} {
		var got app.RPingInfo
		err := got.Decode(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Decode(%x) = %+v, %v", tc.in, got, err)
		}
		if err != nil {
			if !errors.Is(err, app.ErrProtocol) {
				t.Errorf("Decode(%x): %v is not ErrProtocol", tc.in, err)
			}
			continue
		}
		out := make([]byte, app.RPingInfoLen)
		if err := got.Encode(out); err != nil || !bytes.Equal(out, tc.in) {
			t.Errorf("Encode(%+v) = %x, %v", got, out, err)
		}
	}
	if err := (&app.RPingInfo{}).Encode(make([]byte, 15)); err == nil {
		t.Error("Encode into 15 bytes succeeded")
	}
}

// TestQuietPeerVanishes: a client that vanishes while the server waits
// for it (nothing in flight, no stall timeout) is found by the liveness
// probe: the probe is not acknowledged, the QP fails after its retries,
// and the connection ends instead of holding its QP and buffers forever.
func TestQuietPeerVanishes(t *testing.T) {
	n := newTestNet(t, memlink.Config{})
	alloc := &roce.HeapAllocator{}
	srv, err := app.NewRPingServer(n.Srv, app.RPingConfig{Allocator: alloc})
	sqp, d := n.serveAccept(srv, err)
	c := newRPingClient(t, n, 64)
	cp := defaultCM()
	cp.retry = 6 // what roce/cm gives our QPs: 7 would retry forever
	n.connect(sqp, c.p.qp, cp)
	srv.Established(sqp)
	c.p.destroy(t) // gone before sending anything: the server just waits
	// Services keep no timers of their own: the daemon polls them
	// continuously, so step the clock as its loop would.
	start := n.Now
	for i := 0; i < 100_000 && d.calls == 0; i++ {
		n.Poll()
		n.Now = n.Now.Add(time.Millisecond)
	}
	if d.err == nil || !errors.Is(sqp.Err(), roce.ErrRetryExceeded) {
		t.Errorf("done with %v, qp error %v; want the retry limit", d.err, sqp.Err())
	}
	if took := n.Now.Sub(start); took > time.Minute {
		t.Errorf("vanished peer found after %v", took)
	}
	if err := srv.Close(sqp); err != nil {
		t.Fatal(err)
	}
	roctest.Shutdown(t, srv, alloc)
}
