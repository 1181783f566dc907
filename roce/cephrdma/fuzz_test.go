package cephrdma_test

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
)

// pipeListener hands out in-memory connections from net.Pipe.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn, 1), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: ipSrv.AsSlice(), Port: 6800} }

// remoteConn gives a pipe end the TCP address of a peer.
type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.remote }

// FuzzServerExchange feeds a server whatever bytes a client might send
// on the TCP side channel. The server must never panic, must end every
// connection (by refusing it, or by tearing it down when the input ends)
// and must leave nothing behind: no QP (the protection domain
// deallocates), no buffer, no goroutine blocked.
func FuzzServerExchange(f *testing.F) {
	gid := mapped(ipCli)
	hello := cephRecord(0, 0x2a, 0x123456, 0, gid)
	ack := cephRecord(0, 0x2a, 0x123456, 0x11, gid) // the server's first QP is 0x11
	f.Add(append(append([]byte{}, hello...), ack...))
	f.Add(hello)
	f.Add(append(append([]byte{}, hello...), cephRecord(0, 0x2a, 0x123456, 0x12, gid)...))
	f.Add(append(append(append([]byte{}, hello...), hello...), ack...))
	f.Add(append(append(append([]byte{}, hello...), ack...), 'x'))
	f.Add(cephRecord(0, 0x2a, 0x123456, 0, mapped(netip.MustParseAddr("10.1.1.1"))))
	f.Add([]byte("0000:0000002A:00123456:00000000:00000000000000000000FFFF7F000003\x00"))
	f.Add(hello[:30])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		ls, _ := memlink.New(memlink.Config{})
		ep, err := roce.NewEndpoint(roce.EndpointConfig{MAC: macSrv, IP: ipSrv, IO: ls})
		if err != nil {
			t.Fatal(err)
		}
		alloc := &roce.HeapAllocator{}
		cfg := cephrdma.DefaultConfig()
		cfg.Session = testSessions()
		cfg.Session.SendBuffers, cfg.Session.RecvBuffers, cfg.Session.BufferSize = 2, 2, 4096
		cfg.Session.Allocator = alloc
		cfg.Resolver = &testResolver{table: map[netip.Addr][6]byte{ipCli: macCli}}
		cfg.IOTimeout = 100 * time.Millisecond
		st, err := cephrdma.New(ep, cfg)
		if err != nil {
			t.Fatal(err)
		}
		echo := app.NewEcho(app.EchoConfig{BufferSize: 4096})
		ln := newPipeListener()
		served := make(chan error, 1)
		go func() { served <- st.Serve(ln, echo) }()
		client, server := net.Pipe()
		ln.conns <- remoteConn{server, &net.TCPAddr{IP: ipCli.AsSlice(), Port: 40000}}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // the client's bytes, then its close
			defer wg.Done()
			client.SetWriteDeadline(time.Now().Add(time.Second))
			client.Write(in)
			client.Close()
		}()
		go func() { // whatever the server answers
			defer wg.Done()
			io.Copy(io.Discard, client)
		}()
		end := time.Now().Add(5 * time.Second)
		for {
			now := time.Now()
			ep.Poll(now)
			st.Poll(now)
			echo.Poll(now)
			s := st.Stats()
			if s.Active == 0 && (s.Failed > 0 || s.Closed > 0) {
				break
			}
			if now.After(end) {
				t.Fatalf("connection never ended: %+v", s)
			}
			time.Sleep(10 * time.Microsecond)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		<-served
		if alloc.InUse() != 0 {
			t.Fatalf("%d bytes of buffers leaked", alloc.InUse())
		}
		if s := echo.Stats(); s.Active != 0 {
			t.Fatalf("echo still holds a session: %+v", s)
		}
	})
}
