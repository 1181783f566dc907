package bridge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
)

// TestBridgeManyConns: 200 connections at once, each echoing a message
// through the bridge, share the pools' registered memory, which does not
// grow with them; all of it is free again at the end.
func TestBridgeManyConns(t *testing.T) {
	const conns = 200
	// Transport timeout code 14 (67 ms): 200 SENDs at once take the
	// bridge's endpoint several polls, more than 1 ms under -race.
	n := newTestNetTimeout(t, Config{MaxConns: conns, Chunks: 2}, 14)
	// Small client sessions: the test's side is not what is measured.
	n.cliCfg.SendBuffers, n.cliCfg.RecvBuffers = 2, 4
	n.server(func(c net.Conn) { io.Copy(c, c); c.Close() })
	registered := n.b.Stats().RegisteredBytes
	if registered != int64((DefaultRecvPool+DefaultSendPool)*16<<10) || n.alloc.InUse() != registered {
		t.Fatalf("registered %d, allocated %d", registered, n.alloc.InUse())
	}
	start := time.Now()
	cs := make([]*client, conns)
	for i := range cs {
		cs[i] = n.dial(n.tcpPort)
	}
	n.run(20*time.Second, func() bool {
		for _, c := range cs {
			if !c.connected {
				return false
			}
		}
		return true
	})
	setup := time.Since(start)
	for i, c := range cs {
		if c.connErr != nil {
			t.Fatalf("connection %d: %v", i, c.connErr)
		}
	}
	if n.b.Conns() != conns || n.alloc.InUse() != registered+int64(conns)*int64(2+4)*16<<10 {
		t.Errorf("%d connections, %d bytes allocated (the pools: %d)", n.b.Conns(), n.alloc.InUse(), registered)
	}
	msg := []byte("ceph v2\n hello through a shared pool")
	got := make([][]byte, conns)
	buf := make([]byte, 256)
	for _, c := range cs {
		if _, err := c.sess.Send(msg); err != nil {
			t.Fatal(err)
		}
	}
	n.run(20*time.Second, func() bool {
		done := true
		for i, c := range cs {
			k, err := c.sess.Recv(buf)
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatalf("connection %d: %v (disconnected %v: %v; bridge %+v)", i, err, c.disconnected, c.discErr, n.b.Stats())
			}
			got[i] = append(got[i], buf[:k]...)
			done = done && len(got[i]) >= len(msg)
		}
		return done
	})
	for i := range got {
		if !bytes.Equal(got[i], msg) {
			t.Fatalf("connection %d echoed %q", i, got[i])
		}
	}
	start = time.Now()
	for _, c := range cs {
		n.CliM.Disconnect(c.conn)
	}
	n.run(20*time.Second, func() bool { return n.b.Conns() == 0 && n.b.Stats().Active == 0 })
	teardown := time.Since(start)
	t.Logf("%d connections: set up at %.0f/s, torn down at %.0f/s; registered %d bytes whatever their number",
		conns, conns/setup.Seconds(), conns/teardown.Seconds(), registered)
	if st := n.b.Stats(); st.Accepted != conns || st.RecvBuffersFree != DefaultRecvPool || st.SendBuffersFree != DefaultSendPool {
		t.Errorf("stats %+v", st)
	}
	if err := n.b.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		c.release()
	}
	if n.alloc.InUse() != 0 {
		t.Errorf("%d bytes left", n.alloc.InUse())
	}
}

// TestBridgePoolFairness: connections whose daemons stop reading hold
// their cap of receive buffers (a quarter of the pool), and beyond it
// only what the pool lends while more than half of it is free: with one
// stalled (its cap and a loan: half the pool), another still echoes; with
// three, the receive pool is drained and the next connection is refused
// with a REJ counted as no_resources, then admitted again once a stalled
// one goes.
func TestBridgePoolFairness(t *testing.T) {
	small := func(c *net.TCPConn) { c.SetWriteBuffer(4096) }
	n := newTestNetTimeout(t, Config{Chunks: 1, RecvPool: 8, SendPool: 8, Dial: loopbackDialer(small)}, 14)
	n.server(func(c net.Conn) { io.Copy(c, c); c.Close() })
	echoPort := n.tcpPort

	// A daemon that accepts and never reads, with a small receive buffer.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return nil
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 8)
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	defer func() {
		ln.Close()
		<-accepting
		close(held)
		for c := range held {
			c.Close()
		}
	}()
	stallPort := uint16(ln.Addr().(*net.TCPAddr).Port)
	if err := n.b.Listen(stallPort); err != nil {
		t.Fatal(err)
	}
	capRecv := n.b.cfg.Session.RecvBuffers
	if capRecv != 2 {
		t.Fatalf("receive cap %d, want a quarter of 8", capRecv)
	}
	data := make([]byte, 1<<20)
	var stalled []*client
	stall := func(holds int) {
		t.Helper()
		c := n.dial(stallPort)
		n.run(5*time.Second, func() bool { return c.connected })
		if c.connErr != nil {
			t.Fatal(c.connErr)
		}
		var bc *conn
		for cc, x := range n.b.conns {
			if cc.RemoteQPN() == c.qp.QPN() {
				bc = x
			}
		}
		sent := 0
		n.run(10*time.Second, func() bool {
			k, err := c.sess.Send(data[sent%len(data):])
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatal(err)
			}
			sent += k
			return bc.qp.SRQHeld() == holds
		})
		for range 20 { // and no more
			n.Poll()
		}
		if held := bc.qp.SRQHeld(); held != holds {
			t.Fatalf("a stalled connection holds %d receive buffers, want %d", held, holds)
		}
		stalled = append(stalled, c)
	}
	echo := func() {
		t.Helper()
		c := n.dial(echoPort)
		n.run(5*time.Second, func() bool { return c.connected })
		if c.connErr != nil {
			t.Fatal(c.connErr)
		}
		msg := data[:200<<10]
		if got := n.echo(t, c.sess, msg, 20*time.Second); !bytes.Equal(got, msg) {
			t.Error("the echo differs")
		}
		n.CliM.Disconnect(c.conn)
		n.run(5*time.Second, func() bool { return c.disconnected })
	}
	stall(4) // its cap of 2 and 2 lent, until 4 of the 8 are left
	echo()   // beside a stalled connection
	for range 2 {
		stall(capRecv) // no loan with half the pool taken
	}
	if st := n.b.Stats(); st.RecvBuffersFree != 0 {
		t.Fatalf("three stalled connections leave %d receive buffers", st.RecvBuffersFree)
	}
	c := n.dial(echoPort)
	n.run(5*time.Second, func() bool { return c.connected })
	if !errors.Is(c.connErr, cm.ErrRejected) {
		t.Fatalf("a connection with the receive pool drained: %v; want a REJ", c.connErr)
	}
	if st := n.b.Stats(); st.Refused["no_resources"] != 1 {
		t.Errorf("refusals %v", st.Refused)
	}
	// One stalled daemon goes: its connection's buffers come back.
	(<-held).Close()
	n.run(15*time.Second, func() bool { return n.b.Stats().RecvBuffersFree >= int64(capRecv) })
	echo()
	n.b.Shutdown()
	for _, c := range stalled {
		c.release()
	}
	if n.alloc.InUse() != 0 {
		t.Errorf("%d bytes left", n.alloc.InUse())
	}
}

// TestBridgeDialRefusals: when the daemon cannot be dialled, out of file
// descriptors included, the client gets a REJ at once, the refusal is
// counted by reason, and the shared buffers taken for it are back.
func TestBridgeDialRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		reason string
	}{
		{"no listener", syscall.ECONNREFUSED, "no_listener"},
		{"process out of fds", syscall.EMFILE, "no_fds"},
		{"system out of fds", syscall.ENFILE, "no_fds"},
		{"other", syscall.EHOSTUNREACH, "dial_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dial := func(context.Context, netip.AddrPort) (net.Conn, error) {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", tc.err)}
			}
			n := newTestNet(t, Config{Dial: dial})
			if err := n.b.Listen(6800); err != nil {
				t.Fatal(err)
			}
			c := n.dial(6800)
			n.run(5*time.Second, func() bool { return c.connected })
			if !errors.Is(c.connErr, cm.ErrRejected) {
				t.Fatalf("connection attempt: %v; want a REJ", c.connErr)
			}
			st := n.b.Stats()
			if st.Refused[tc.reason] != 1 || st.Active != 0 || st.RecvBuffersFree != DefaultRecvPool || n.b.Pool().Sessions() != 0 {
				t.Errorf("stats %+v, pool sessions %d", st, n.b.Pool().Sessions())
			}
			if err := n.b.Shutdown(); err != nil {
				t.Fatal(err)
			}
			if n.alloc.InUse() != 0 {
				t.Errorf("%d bytes left", n.alloc.InUse())
			}
		})
	}
}
