package bridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest/cmtest"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// The bridge's endpoint is side A of the network, the client side B.
var ipS = roctest.IPA

// testNet is a client endpoint and a bridging endpoint on a roctest
// network; the bridge dials real loopback TCP, so everything runs on the
// wall clock.
type testNet struct {
	*cmtest.Net
	t       *testing.T
	cliPD   *roce.PD
	b       *Bridge
	alloc   *roce.HeapAllocator
	cliCfg  session.Config
	tcpPort uint16 // where the test's TCP server listens on 127.0.0.1
}

func newTestNet(t *testing.T, cfg Config) *testNet {
	// Code 11 (about 8 ms): a SEND the bridge drops unanswered is sent
	// again soon, and six of them outlast a poll loop slowed by a
	// loaded machine or the race detector.
	return newTestNetTimeout(t, cfg, 11)
}

// newTestNetTimeout sets the client's transport timeout code: the time
// it waits before sending again a SEND the bridge dropped unanswered.
func newTestNetTimeout(t *testing.T, cfg Config, timeout uint8) *testNet {
	return newTestNetIdle(t, cfg, timeout, 0)
}

// newTestNetIdle also sets the bridging endpoint's idle probe interval
// (roce.EndpointConfig.IdleProbe; 0: none).
func newTestNetIdle(t *testing.T, cfg Config, timeout uint8, idle time.Duration) *testNet {
	t.Helper()
	n := &testNet{t: t, alloc: &roce.HeapAllocator{}}
	n.Net = cmtest.New(t, cmtest.Config{
		Link: memlink.Config{Seed: 3},
		Srv:  roce.EndpointConfig{IdleProbe: idle},
		CM: &cm.Config{Seed: 1, RetransmitTimeout: 200 * time.Millisecond, MaxRetries: 4, TimeWait: 10 * time.Millisecond,
			Timeout: timeout, RetryCount: 7},
	})
	n.Wall = true
	n.cliPD = n.Cli.NewPD()
	n.cliCfg = session.DefaultConfig()
	n.cliCfg.BufferSize, n.cliCfg.SendBuffers, n.cliCfg.RecvBuffers = 16<<10, 16, 16
	n.cliCfg.RNRRetry = 0
	n.cliCfg.Allocator = n.alloc
	// The bridge reaches "the node's address" on loopback: the test's
	// TCP server stands in for a Ceph daemon.
	if cfg.Dial == nil {
		cfg.Dial = loopbackDialer(nil)
	}
	cfg.Session = session.DefaultConfig()
	// More receives posted than the client has SENDs in flight: a
	// bridge that keeps up never drops one.
	cfg.Session.BufferSize, cfg.Session.SendBuffers, cfg.Session.RecvBuffers = 16<<10, 8, 32
	cfg.Session.Allocator = n.alloc
	var err error
	if n.b, err = New(n.SrvM, cfg); err != nil {
		t.Fatal(err)
	}
	// After the endpoints and their managers, as internal/roced's Node
	// polls.
	n.Add(n.b)
	return n
}

// loopbackDialer dials the port on 127.0.0.1, applying set to the
// connection.
func loopbackDialer(set func(*net.TCPConn)) Dialer {
	return func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addr.Port()).String())
		if err == nil && set != nil {
			set(c.(*net.TCPConn))
		}
		return c, err
	}
}

// sendSome sends on s what is left of msg after *sent, as much as s
// takes, and counts it in *sent; an error other than ErrWouldBlock fails
// the test.
func sendSome(t testing.TB, s *session.Session, msg []byte, sent *int) {
	t.Helper()
	if *sent == len(msg) {
		return
	}
	k, err := s.Send(msg[*sent:])
	if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
		t.Fatalf("send: %v", err)
	}
	*sent += k
}

// echo sends msg on s and takes what comes back until as much has, for
// at most limit, and returns it.
func (n *testNet) echo(t testing.TB, s *session.Session, msg []byte, limit time.Duration) []byte {
	t.Helper()
	var got []byte
	sent := 0
	buf := make([]byte, 64<<10)
	n.run(limit, func() bool {
		sendSome(t, s, msg, &sent)
		k, err := s.Recv(buf)
		if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
			t.Fatal(err)
		}
		got = append(got, buf[:k]...)
		return len(got) >= len(msg)
	})
	return got
}

// run polls until done or the wall-clock limit.
func (n *testNet) run(limit time.Duration, done func() bool) {
	n.t.Helper()
	if !n.RunWall(limit, nil, done) {
		n.t.Fatalf("not done within %v; bridge %+v", limit, n.b.Stats())
	}
}

// server listens on loopback and hands each accepted connection to serve.
func (n *testNet) server(serve func(net.Conn)) {
	n.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { ln.Close() })
	n.tcpPort = uint16(ln.Addr().(*net.TCPAddr).Port)
	if err := n.b.Listen(n.tcpPort); err != nil {
		n.t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
}

// client is the active side: a session over a connection to the bridge.
type client struct {
	qp           *roce.QP
	sess         *session.Session
	conn         *cm.Conn
	connErr      error
	connected    bool
	disconnected bool
	discErr      error
	released     bool
}

func (n *testNet) dial(port uint16) *client {
	n.t.Helper()
	c := &client{}
	var err error
	if c.qp, err = session.NewQP(n.cliPD, n.cliCfg); err != nil {
		n.t.Fatal(err)
	}
	if c.sess, err = session.New(c.qp, n.cliCfg); err != nil {
		n.t.Fatal(err)
	}
	c.conn, err = n.CliM.Dial(ipS, port, c.qp, nil, cm.Events{
		Connected: func(_ *cm.Conn, err error) {
			c.connected, c.connErr = true, err
			if err != nil {
				c.release()
			}
		},
		Disconnected: func(_ *cm.Conn, err error) { c.disconnected = true; c.discErr = err; c.release() },
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return c
}

func (c *client) release() {
	if c.released {
		return
	}
	c.released = true
	scq, rcq := c.qp.SendCQ(), c.qp.RecvCQ()
	c.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	c.sess.Release()
	c.qp.Destroy()
	scq.Destroy()
	rcq.Destroy()
}

// TestBridgeStream: a 4 MiB stream crosses the bridge to a TCP echo
// server and back intact; the client's DREQ closes the TCP connection;
// nothing is left registered.
func TestBridgeStream(t *testing.T) {
	n := newTestNet(t, Config{Chunks: 4})
	closed := make(chan struct{})
	n.server(func(c net.Conn) {
		io.Copy(c, c) // until the bridge closes its side
		c.Close()
		close(closed)
	})
	c := n.dial(n.tcpPort)
	n.run(5*time.Second, func() bool { return c.connected })
	if c.connErr != nil {
		t.Fatal(c.connErr)
	}
	msg := make([]byte, 4<<20)
	rand.Read(msg)
	if got := n.echo(t, c.sess, msg, 30*time.Second); !bytes.Equal(got, msg) {
		t.Fatal("the echo differs from what was sent")
	}
	if err := n.CliM.Disconnect(c.conn); err != nil {
		t.Fatal(err)
	}
	// The bridge hands the last bytes over and closes the TCP side from
	// its Poll: keep polling until the server sees the close.
	n.run(5*time.Second, func() bool { return c.disconnected && n.b.Conns() == 0 && isClosed(closed) })
	st := n.b.Stats()
	if st.BytesToTCP != uint64(len(msg)) || st.BytesToRoCE != uint64(len(msg)) || st.Active != 0 || st.Closed != 1 {
		t.Errorf("stats %+v", st)
	}
	// Both ways without a copy of the bridge's own. Back to the client,
	// each batch is a readiness probe and at least one read, with three
	// hand-offs: the reader's request, the buffers, the filled ones.
	if st.Copied["to_tcp"] != 0 || st.Copied["to_roce"] != 0 {
		t.Errorf("bytes copied: %v; want none", st.Copied)
	}
	if w, k := st.Syscalls["to_roce"], st.Wakeups["to_roce"]; w < 2 || 2*k > 3*w {
		t.Errorf("to_roce: %d system calls, %d wake-ups; want at most 3 wake-ups per 2 system calls", w, k)
	}
	if err := n.b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if n.alloc.InUse() != 0 {
		t.Errorf("%d bytes of buffers left", n.alloc.InUse())
	}
}

// TestBridgeNoListener: a request for a port where nothing listens is
// rejected at once.
func TestBridgeNoListener(t *testing.T) {
	n := newTestNet(t, Config{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing listens there now
	if err := n.b.Listen(port); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c := n.dial(port)
	n.run(5*time.Second, func() bool { return c.connected })
	if !errors.Is(c.connErr, cm.ErrRejected) {
		t.Fatalf("connection attempt: %v; want a REJ", c.connErr)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("rejected after %v", d)
	}
	if st := n.b.Stats(); st.Refused["no_listener"] != 1 || st.Active != 0 {
		t.Errorf("stats %+v", st)
	}
	n.b.Shutdown()
}

// TestBridgeDaemonCloses: the daemon sends a banner and closes; the
// client gets the banner, then the bridge's DREQ.
func TestBridgeDaemonCloses(t *testing.T) {
	n := newTestNet(t, Config{})
	banner := []byte("ceph v2\n\x10\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	n.server(func(c net.Conn) {
		c.Write(banner)
		c.Close()
	})
	c := n.dial(n.tcpPort)
	var got []byte
	buf := make([]byte, 1024)
	n.run(5*time.Second, func() bool {
		if c.connected && !c.released {
			k, _ := c.sess.Recv(buf)
			got = append(got, buf[:k]...)
		}
		return c.disconnected
	})
	if !bytes.Equal(got, banner) {
		t.Errorf("got %q before the disconnect; want the banner", got)
	}
	n.run(5*time.Second, func() bool { return n.b.Conns() == 0 })
	n.b.Shutdown()
	if n.alloc.InUse() != 0 {
		t.Errorf("%d bytes of buffers left", n.alloc.InUse())
	}
}

// TestBridgeBackpressure: the daemon reads nothing for 150 ms; the
// client's stream stalls without a single RNR NAK (its SENDs are dropped
// unanswered and sent again on its 67 ms timer, within its 7 retries, or
// on a sequence NAK once a buffer is free), the bridge holds no more
// than its chunks and receive buffers, and every byte arrives once the
// daemon reads. A daemon that stalls longer than the client's retry
// budget fails the client's connection.
func TestBridgeBackpressure(t *testing.T) {
	// 64 receive buffers of 16 KiB: the connection holds at most 32 of
	// them (its cap and the pool's loan), far less than the stream.
	n := newTestNetTimeout(t, Config{Chunks: 2, RecvPool: 64}, 14)
	release := make(chan struct{})
	var received bytes.Buffer
	done := make(chan struct{})
	n.server(func(c net.Conn) {
		<-release
		io.Copy(&received, c)
		close(done)
	})
	c := n.dial(n.tcpPort)
	n.run(5*time.Second, func() bool { return c.connected })
	msg := make([]byte, 8<<20)
	rand.Read(msg)
	sent := 0
	silentDrops := func() (k uint64) {
		for _, bc := range n.b.conns {
			k += bc.qp.Stats().RNRSilentDrops
		}
		return k
	}
	// The daemon stalls at least 150 ms, and until the bridge has
	// dropped a SEND unanswered (the run fails if it never does): a slow
	// machine fills the cap later.
	stallEnd := time.Now().Add(150 * time.Millisecond)
	n.run(20*time.Second, func() bool {
		sendSome(t, c.sess, msg, &sent)
		return time.Now().After(stallEnd) && silentDrops() > 0
	})
	stalled := sent
	st := n.b.Stats()
	t.Logf("with the daemon not reading: %d of %d bytes left the client, stalls %v", stalled, len(msg), st.Stalls)
	if stalled >= len(msg) || st.Stalls["tcp_write"] == 0 {
		t.Errorf("no backpressure: %d bytes sent, stalls %v", stalled, st.Stalls)
	}
	silent := silentDrops()
	close(release)
	n.run(30*time.Second, func() bool {
		if sent < len(msg) {
			k, err := c.sess.Send(msg[sent:])
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatalf("client send: %v (qp %v; disconnected %v (%v) connErr %v; bridge %+v)", err, c.qp.Err(), c.disconnected, c.discErr, c.connErr, n.b.Stats())
			}
			sent += k
		}
		return sent == len(msg) && n.b.Stats().BytesToTCP == uint64(len(msg))
	})
	n.CliM.Disconnect(c.conn)
	n.run(5*time.Second, func() bool { return c.disconnected && n.b.Conns() == 0 && isClosed(done) })
	if !bytes.Equal(received.Bytes(), msg) {
		t.Errorf("the daemon got %d bytes, differing from the %d sent", received.Len(), len(msg))
	}
	if qs := c.qp.Stats(); qs.RNRNaksReceived != 0 {
		t.Errorf("the client got %d RNR NAKs", qs.RNRNaksReceived)
	}
	t.Logf("SENDs dropped unanswered during the stall: %d", silent)
	n.b.Shutdown()
}

// TestBridgeReapsDeadPeer: a client that vanishes without a DREQ (every
// frame it sends is lost from then on), or whose DREQ and its retries
// are all lost, is found by the bridge's idle probe within about a
// second (the probe interval, then 7 transport timeouts of 8 ms): the
// daemon's TCP connection is reset, the QP destroyed, the buffers
// returned, the dead peer counted, and its place under MaxConns goes to
// the next client.
func TestBridgeReapsDeadPeer(t *testing.T) {
	for _, tc := range []struct {
		name string
		dreq bool // the client disconnects, but its DREQs are lost
	}{{"client vanishes", false}, {"DREQs lost", true}} {
		t.Run(tc.name, func(t *testing.T) { testReapsDeadPeer(t, tc.dreq) })
	}
}

func testReapsDeadPeer(t *testing.T, dreq bool) {
	n := newTestNetIdle(t, Config{MaxConns: 1}, 11, roce.MinIdleProbe)
	var ended atomic.Int32 // daemon-side connections the bridge closed
	n.server(func(c net.Conn) {
		io.Copy(c, c) // until the bridge resets or closes its side
		c.Close()
		ended.Add(1)
	})
	c := n.dial(n.tcpPort)
	n.run(5*time.Second, func() bool { return c.connected })
	if c.connErr != nil {
		t.Fatal(c.connErr)
	}
	// One echo: the connection carries data, then goes idle.
	msg, buf := []byte("hello, osd"), make([]byte, 64)
	if _, err := c.sess.Send(msg); err != nil {
		t.Fatal(err)
	}
	var got []byte
	n.run(5*time.Second, func() bool {
		k, _ := c.sess.Recv(buf)
		got = append(got, buf[:k]...)
		return len(got) == len(msg)
	})
	srvEP := n.SrvM.Endpoint()
	pool := n.b.Pool().Stats()
	n.B.Link.SetFilter(func([]byte) bool { return false }) // nothing from the client arrives
	if dreq {
		if err := n.CliM.Disconnect(c.conn); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	n.run(20*time.Second, func() bool { return n.b.Conns() == 0 && ended.Load() == 1 })
	took := time.Since(start)
	t.Logf("reaped %v after the client went silent", took)
	if took < roce.MinIdleProbe {
		t.Errorf("reaped after %v, before the idle interval %v", took, roce.MinIdleProbe)
	}
	st := n.b.Stats()
	if st.DeadPeers != 1 || st.Active != 0 || st.Closed != 1 || st.Errors["roce"] != 1 {
		t.Errorf("bridge stats %+v", st)
	}
	if es := srvEP.Stats(); es.DeadPeers != 1 || es.IdleProbes == 0 {
		t.Errorf("endpoint: %d dead peers, %d idle probes", es.DeadPeers, es.IdleProbes)
	}
	if k := srvEP.NumQPs(); k != 0 {
		t.Errorf("%d QPs left on the bridge's endpoint", k)
	}
	if ps := n.b.Pool().Stats(); ps.Sessions != 0 || ps.RecvPosted != pool.RecvBuffers || ps.SendFree != pool.SendBuffers {
		t.Errorf("pool after the reaping %+v (before %+v)", ps, pool)
	}
	// The client let go too: on the bridge's DREQ, or its own DREQ's
	// retries spent.
	n.run(5*time.Second, func() bool { return c.disconnected })

	// MaxConns is 1: the reaped connection no longer counts.
	n.B.Link.SetFilter(nil)
	c2 := n.dial(n.tcpPort)
	n.run(5*time.Second, func() bool { return c2.connected })
	if c2.connErr != nil {
		t.Fatalf("a new client after the reaping: %v", c2.connErr)
	}
	n.CliM.Disconnect(c2.conn)
	n.run(5*time.Second, func() bool { return c2.disconnected && n.b.Conns() == 0 })
	if err := n.b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if n.alloc.InUse() != 0 {
		t.Errorf("%d bytes of buffers left", n.alloc.InUse())
	}
}

// isClosed reports whether ch is closed, without blocking.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestDialOffThePollLoop: a daemon that does not answer its TCP connect
// (a full accept backlog) delays only its own client: another client
// connects and streams meanwhile; the slow one gets its REJ once the
// dial times out.
func TestDialOffThePollLoop(t *testing.T) {
	const slowPort = 6999
	release := make(chan struct{})
	defer close(release)
	slow := func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
		if addr.Port() == slowPort {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return nil, errors.New("released")
			}
		}
		return loopbackDialer(nil)(ctx, addr)
	}
	n := newTestNet(t, Config{Dial: slow, DialTimeout: 400 * time.Millisecond})
	if err := n.b.Listen(slowPort); err != nil {
		t.Fatal(err)
	}
	n.server(func(c net.Conn) { io.Copy(io.Discard, c); c.Close() })
	stuck := n.dial(slowPort)
	n.run(5*time.Second, func() bool { return n.b.dialing == 1 })
	fast := n.dial(n.tcpPort)
	n.run(5*time.Second, func() bool { return fast.connected })
	if fast.connErr != nil {
		t.Fatal(fast.connErr)
	}
	if stuck.connected {
		t.Fatalf("the slow dial's client was answered (%v) before the fast one connected", stuck.connErr)
	}
	msg := make([]byte, 256<<10)
	sent := 0
	n.run(10*time.Second, func() bool {
		sendSome(t, fast.sess, msg, &sent)
		return sent == len(msg)
	})
	n.run(5*time.Second, func() bool { return stuck.connected })
	if !errors.Is(stuck.connErr, cm.ErrRejected) {
		t.Errorf("the slow daemon's client: %v, want a REJ", stuck.connErr)
	}
	if st := n.b.Stats(); st.Refused["dial_failed"] != 1 {
		t.Errorf("refused %v, want one dial_failed", st.Refused)
	}
}
