package cephrdma_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// echoStream sends size pseudo-random bytes on s, closes it, and reads
// the echo until EOF, comparing every byte.
func echoStream(tb testing.TB, n *testNet, s *session.Session, size int, seed byte) {
	tb.Helper()
	key := [32]byte{seed}
	src, ref := rand.NewChaCha8(key), rand.NewChaCha8(key)
	chunk, rbuf, want := make([]byte, 50_000), make([]byte, 30_000), make([]byte, 30_000)
	var pend []byte
	sent, got, closed, eof := 0, 0, false, false
	n.run(30*time.Second, func() bool {
		for sent < size || len(pend) > 0 {
			if len(pend) == 0 {
				k := min(len(chunk), size-sent)
				src.Read(chunk[:k])
				pend = chunk[:k]
			}
			k, err := s.Send(pend)
			pend, sent = pend[k:], sent+k
			if errors.Is(err, roce.ErrWouldBlock) {
				break
			}
			if err != nil {
				tb.Fatalf("send after %d bytes: %v", sent, err)
			}
		}
		if sent == size && len(pend) == 0 && !closed {
			if err := s.Close(); err == nil {
				closed = true
			} else if !errors.Is(err, roce.ErrWouldBlock) {
				tb.Fatal(err)
			}
		}
		for !eof {
			k, err := s.Recv(rbuf)
			if k > 0 {
				ref.Read(want[:k])
				if !bytes.Equal(rbuf[:k], want[:k]) {
					tb.Fatalf("echo differs after %d bytes", got)
				}
				got += k
			}
			if err == io.EOF {
				eof = true
			} else if err != nil {
				if !errors.Is(err, roce.ErrWouldBlock) {
					tb.Fatalf("recv after %d bytes: %v", got, err)
				}
				break
			}
		}
		return eof
	})
	if got != size {
		tb.Fatalf("echo of %d bytes, sent %d", got, size)
	}
}

// TestDialServeEcho: our client and our server exchange records over
// loopback TCP, then a stream goes through the echo service over the
// memlink and comes back whole, on clean and faulty links, with the
// neighbour resolved at once or later.
func TestDialServeEcho(t *testing.T) {
	for _, tc := range []struct {
		name  string
		link  memlink.Config
		async bool
		size  int
	}{
		{"clean", memlink.Config{}, false, 4 << 20},
		{"clean/async resolver", memlink.Config{}, true, 1 << 20},
		{"loss", memlink.Config{Seed: 5, Loss: 0.02}, false, 1 << 20},
		{"faults", memlink.Config{Seed: 9, Loss: 0.01, Reorder: 0.01, Duplicate: 0.01, Corrupt: 0.01}, true, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, netOpts{link: tc.link, asyncRes: tc.async})
			conn := n.mustDial()
			local, remote := conn.Records()
			if remote.GID != mapped(ipSrv) || local.GID != mapped(ipCli) || remote.PeerQPN != local.QPN ||
				local.PeerQPN != remote.QPN || local.PSN > wire.PSNMask || remote.LID != 0 {
				t.Errorf("records: local %+v remote %+v", local, remote)
			}
			if conn.RemoteAddr().Addr() != ipSrv {
				t.Errorf("remote address %v", conn.RemoteAddr())
			}
			echoStream(t, n, conn.Session(), tc.size, 1)
			conn.Close()
			if !conn.Closed() || conn.Session() != nil || conn.Err() != nil {
				t.Errorf("after close: closed %v, err %v", conn.Closed(), conn.Err())
			}
			n.run(5*time.Second, func() bool { return n.srvStack.Stats().Active == 0 })
			ss, cs := n.srvStack.Stats(), n.cliStack.Stats()
			if ss.Accepted != 1 || ss.Established != 1 || ss.Failed != 0 || ss.Closed != 1 ||
				cs.Dialed != 1 || cs.Established != 1 || cs.Failed != 0 || cs.Closed != 1 {
				t.Errorf("stats: server %+v client %+v", ss, cs)
			}
			if st := n.svc.Stats(); st.Completed != 1 || st.BytesIn != uint64(tc.size) || st.BytesOut != uint64(tc.size) {
				t.Errorf("echo stats %+v", st)
			}
			if e := append(n.srvErrs.get(), n.cliErrs.get()...); len(e) != 0 {
				t.Errorf("errors reported: %v", e)
			}
			n.shutdown()
		})
	}
}

// TestManySessions: several clients at once through one server.
func TestManySessions(t *testing.T) {
	n := newTestNet(t, netOpts{asyncRes: true})
	const conns = 5
	var got []*cephrdma.Conn
	for range conns {
		if err := n.cliStack.Dial(n.addr(), func(c *cephrdma.Conn, err error) {
			if err != nil {
				t.Error(err)
			}
			got = append(got, c)
		}); err != nil {
			t.Fatal(err)
		}
	}
	n.run(10*time.Second, func() bool { return len(got) == conns })
	// Three streams end (the echo closes the sessions when done), two
	// sessions stay up.
	for i, c := range got[:3] {
		if c != nil {
			echoStream(t, n, c.Session(), 100_000*(i+1), byte(i))
		}
	}
	// The server's side of an exchange completes when the client's last
	// record arrives, which can be after the client's dial returned.
	n.run(5*time.Second, func() bool {
		return n.srvStack.Stats().Active == 2 && n.cliStack.Stats().Active == 2 && n.srvStack.Stats().Established == conns
	})
	for _, c := range got[:3] {
		if !c.Closed() || c.Err() != nil {
			t.Errorf("connection of an ended stream: closed %v, %v", c.Closed(), c.Err())
		}
	}
	if st := n.srvStack.Stats(); st.Established != conns || st.Failed != 0 {
		t.Errorf("server stats %+v", st)
	}
	n.shutdown() // with two sessions still up
}

// rawClient runs script against the server on a plain TCP connection
// from the client's address, in its own goroutine.
func (n *testNet) rawClient(script func(c net.Conn) error) <-chan error {
	res := make(chan error, 1)
	go func() {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ipCli, 0)), Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", n.addr())
		if err != nil {
			res <- err
			return
		}
		defer c.Close()
		res <- script(c)
	}()
	return res
}

// readReply reads the server's record as Ceph would.
func readReply(tb testing.TB, c net.Conn) (wire.CephQPRecord, error) {
	b := make([]byte, 65)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, b); err != nil {
		return wire.CephQPRecord{}, fmt.Errorf("reading the server's record: %w", err)
	}
	return parseRecord(tb, b), nil
}

// expectClosed waits for the server to close the connection.
func expectClosed(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	// A reset is a close too: the server closes with our bytes unread.
	if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("server did not close the connection: %w", err)
	}
	return nil
}

// TestServerRefuses: whatever a client gets wrong, the server reports a
// clear error, closes the TCP connection and destroys whatever QP it
// made; nothing leaks.
func TestServerRefuses(t *testing.T) {
	const cliQPN, cliPSN = 0x2a, 0x123456
	hello := cephRecord(0, cliQPN, cliPSN, 0, mapped(ipCli))
	// exchange sends the first record, checks the server's and sends
	// ack(server record) back.
	exchange := func(t *testing.T, ack func(srv wire.CephQPRecord) []byte) func(c net.Conn) error {
		return func(c net.Conn) error {
			if _, err := c.Write(hello); err != nil {
				return err
			}
			srv, err := readReply(t, c)
			if err != nil {
				return err
			}
			if srv.PeerQPN != cliQPN || srv.GID != mapped(ipSrv) || srv.LID != 0 || srv.PSN > wire.PSNMask {
				return fmt.Errorf("server record %+v", srv)
			}
			if b := ack(srv); b != nil {
				if _, err := c.Write(b); err != nil {
					return err
				}
			} else {
				c.(*net.TCPConn).CloseWrite()
			}
			return expectClosed(c)
		}
	}
	write := func(b []byte) func(c net.Conn) error {
		return func(c net.Conn) error {
			if _, err := c.Write(b); err != nil {
				return err
			}
			c.(*net.TCPConn).CloseWrite()
			return expectClosed(c)
		}
	}
	resolverErr := errors.New("no ARP reply")
	fe80 := netip.MustParseAddr("fe80::5054:ff:fe12:3456").As16()
	for _, tc := range []struct {
		name    string
		script  func(t *testing.T) func(c net.Conn) error
		timeout time.Duration
		server  func(*cephrdma.Config)
		silent  bool
		want    error
	}{
		{name: "short record", want: cephrdma.ErrBadRecord,
			script: func(*testing.T) func(net.Conn) error { return write(hello[:10]) }},
		{name: "nothing", want: cephrdma.ErrBadRecord,
			script: func(*testing.T) func(net.Conn) error { return write(nil) }},
		{name: "stalled record", want: os.ErrDeadlineExceeded, timeout: 200 * time.Millisecond,
			script: func(*testing.T) func(net.Conn) error {
				return func(c net.Conn) error {
					c.Write(hello[:10])
					return expectClosed(c)
				}
			}},
		{name: "garbage", want: wire.ErrBadRecord,
			script: func(*testing.T) func(net.Conn) error { return write(bytes.Repeat([]byte("x"), 65)) }},
		{name: "no NUL", want: cephrdma.ErrBadRecord,
			script: func(*testing.T) func(net.Conn) error { return write(append(hello[:64:64], 'x')) }},
		{name: "wrong gid", want: cephrdma.ErrGIDMismatch,
			script: func(*testing.T) func(net.Conn) error {
				return write(cephRecord(0, cliQPN, cliPSN, 0, mapped(netip.MustParseAddr("10.9.9.9"))))
			}},
		{name: "link-local gid", want: cephrdma.ErrGIDMismatch,
			script: func(*testing.T) func(net.Conn) error { return write(cephRecord(0, cliQPN, cliPSN, 0, fe80)) }},
		{name: "peer qpn in first record", want: cephrdma.ErrBadRecord,
			script: func(*testing.T) func(net.Conn) error {
				return write(cephRecord(0, cliQPN, cliPSN, 0x11, mapped(ipCli)))
			}},
		{name: "qpn 1", want: cephrdma.ErrBadRecord,
			script: func(*testing.T) func(net.Conn) error { return write(cephRecord(0, 1, cliPSN, 0, mapped(ipCli))) }},
		{name: "psn wider than 24 bits", want: cephrdma.ErrBadRecord,
			script: func(*testing.T) func(net.Conn) error {
				return write(cephRecord(0, cliQPN, 0x1000000, 0, mapped(ipCli)))
			}},
		{name: "ack names another qp", want: cephrdma.ErrBadRecord,
			script: func(t *testing.T) func(net.Conn) error {
				return exchange(t, func(srv wire.CephQPRecord) []byte {
					return cephRecord(0, cliQPN, cliPSN, srv.QPN+1, mapped(ipCli))
				})
			}},
		{name: "ack from another qp", want: cephrdma.ErrBadRecord,
			script: func(t *testing.T) func(net.Conn) error {
				return exchange(t, func(srv wire.CephQPRecord) []byte {
					return cephRecord(0, cliQPN+1, cliPSN, srv.QPN, mapped(ipCli))
				})
			}},
		{name: "first record three times", want: cephrdma.ErrBadRecord,
			script: func(t *testing.T) func(net.Conn) error {
				return exchange(t, func(wire.CephQPRecord) []byte { return bytes.Repeat(hello, 3) })
			}},
		{name: "closed before ack", want: cephrdma.ErrBadRecord,
			script: func(t *testing.T) func(net.Conn) error {
				return exchange(t, func(wire.CephQPRecord) []byte { return nil })
			}},
		{name: "no ack", want: os.ErrDeadlineExceeded, timeout: 200 * time.Millisecond,
			script: func(t *testing.T) func(net.Conn) error {
				return func(c net.Conn) error {
					c.Write(hello)
					if _, err := readReply(t, c); err != nil {
						return err
					}
					return expectClosed(c)
				}
			}},
		{name: "data after the exchange", want: cephrdma.ErrUnexpectedData,
			script: func(t *testing.T) func(net.Conn) error {
				return exchange(t, func(srv wire.CephQPRecord) []byte {
					// Two records repeated: Ceph calls that a logic error.
					return append(cephRecord(0, cliQPN, cliPSN, srv.QPN, mapped(ipCli)), hello...)
				})
			}},
		{name: "resolver fails", want: resolverErr,
			server: func(c *cephrdma.Config) { c.Resolver.(*testResolver).err = resolverErr },
			script: func(*testing.T) func(net.Conn) error {
				return func(c net.Conn) error {
					c.Write(hello)
					return expectClosed(c)
				}
			}},
		{name: "resolver silent", want: cephrdma.ErrTimeout, timeout: 200 * time.Millisecond, silent: true,
			script: func(*testing.T) func(net.Conn) error {
				return func(c net.Conn) error {
					c.Write(hello)
					return expectClosed(c)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, netOpts{ioTimeout: tc.timeout, server: tc.server})
			n.srvRes.silent = tc.silent
			res := n.rawClient(tc.script(t))
			var cerr error
			done := false
			n.run(10*time.Second, func() bool {
				if !done {
					select {
					case cerr = <-res:
						done = true
					default:
					}
				}
				return done && len(n.srvErrs.get()) > 0 && n.srvStack.Stats().Active == 0
			})
			if cerr != nil {
				t.Errorf("client: %v", cerr)
			}
			errs := n.srvErrs.get()
			if len(errs) != 1 || !errors.Is(errs[0], tc.want) {
				t.Errorf("server reported %v, want one error matching %v", errs, tc.want)
			} else {
				t.Logf("reported: %v", errs[0])
			}
			if st := n.srvStack.Stats(); st.Failed != 1 || st.Established != 0 && !errors.Is(tc.want, cephrdma.ErrUnexpectedData) {
				t.Errorf("stats %+v", st)
			}
			n.shutdown()
		})
	}
}

// TestServerSkipsRepeatedHello: Ceph's server ignores its client's
// first record when it comes again; so does ours, up to a bound.
func TestServerSkipsRepeatedHello(t *testing.T) {
	n := newTestNet(t, netOpts{})
	hello := cephRecord(0, 0x33, 7, 0, mapped(ipCli))
	res := n.rawClient(func(c net.Conn) error {
		c.Write(hello)
		srv, err := readReply(t, c)
		if err != nil {
			return err
		}
		c.Write(append(append(bytes.Clone(hello), hello...), cephRecord(0, 0x33, 7, srv.QPN, mapped(ipCli))...))
		time.Sleep(100 * time.Millisecond)
		return nil
	})
	var cerr error
	n.run(10*time.Second, roctest.Received(res, &cerr))
	n.run(5*time.Second, func() bool { return n.srvStack.Stats().Established == 1 })
	if cerr != nil || len(n.srvErrs.get()) != 0 {
		t.Errorf("client %v, server errors %v", cerr, n.srvErrs.get())
	}
	// The client closed its end: the session is torn down.
	n.run(5*time.Second, func() bool { return n.srvStack.Stats().Active == 0 })
	n.shutdown()
}

func TestTooManyConns(t *testing.T) {
	n := newTestNet(t, netOpts{server: func(c *cephrdma.Config) { c.MaxConns = 1 }})
	first := n.mustDial()
	if _, err := n.dial(n.addr()); err == nil {
		t.Error("second connection accepted")
	}
	if errs := n.srvErrs.get(); len(errs) != 1 || !errors.Is(errs[0], cephrdma.ErrTooManyConns) {
		t.Errorf("server reported %v", errs)
	}
	first.Close()
	n.run(5*time.Second, func() bool { return n.srvStack.Stats().Active == 0 })
	if _, err := n.dial(n.addr()); err != nil {
		t.Errorf("after the first closed: %v", err)
	}
	n.shutdown()
}

func TestDialErrors(t *testing.T) {
	n := newTestNet(t, netOpts{})
	// A port nobody listens on.
	l, err := net.Listen("tcp", netip.AddrPortFrom(ipSrv, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	if _, err := n.dial(dead); err == nil {
		t.Error("dial to a closed port succeeded")
	}
	if errs := n.cliErrs.get(); len(errs) != 1 {
		t.Errorf("client reported %v", errs)
	}
	if err := n.cliStack.Dial(n.addr(), nil); !errors.Is(err, roce.ErrInvalidArgument) {
		t.Errorf("nil callback: %v", err)
	}
	n.shutdown()
	if err := n.cliStack.Dial(n.addr(), func(*cephrdma.Conn, error) {}); !errors.Is(err, cephrdma.ErrClosed) {
		t.Errorf("dial after close: %v", err)
	}
}

// TestCloseDuringExchange: Close ends half-done exchanges and pending
// dials too, and their callbacks learn of it.
func TestCloseDuringExchange(t *testing.T) {
	n := newTestNet(t, netOpts{})
	n.srvRes.silent = true // server exchanges hang in resolution
	var dialErr error
	dialed := false
	if err := n.cliStack.Dial(n.addr(), func(c *cephrdma.Conn, err error) { dialed, dialErr = true, err }); err != nil {
		t.Fatal(err)
	}
	res := n.rawClient(func(c net.Conn) error {
		c.Write(cephRecord(0, 0x40, 1, 0, mapped(ipCli)))
		return expectClosed(c)
	})
	n.run(5*time.Second, func() bool { return n.srvRes.calls == 2 })
	n.shutdown()
	if !dialed || !errors.Is(dialErr, cephrdma.ErrClosed) {
		t.Errorf("dial callback: %v %v", dialed, dialErr)
	}
	if err := <-res; err != nil {
		t.Error(err)
	}
	if e := n.srvErrs.get(); len(e) != 0 {
		t.Errorf("close reported as errors: %v", e)
	}
}

// TestNewErrors: configurations New refuses.
func TestNewErrors(t *testing.T) {
	ep, err := roce.NewEndpoint(roce.EndpointConfig{IP: ipSrv, IO: nopIO{}})
	if err != nil {
		t.Fatal(err)
	}
	res := &testResolver{}
	for _, tc := range []struct {
		name string
		ep   *roce.Endpoint
		mod  func(*cephrdma.Config)
	}{
		{"no endpoint", nil, nil},
		{"no resolver", ep, func(c *cephrdma.Config) { c.Resolver = nil }},
		{"mtu 4096", ep, func(c *cephrdma.Config) { c.Session.PathMTU = 4096 }},
	} {
		cfg := cephrdma.DefaultConfig()
		cfg.Resolver = res
		if tc.mod != nil {
			tc.mod(&cfg)
		}
		if _, err := cephrdma.New(tc.ep, cfg); !errors.Is(err, roce.ErrInvalidArgument) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	st, err := cephrdma.New(ep, cephrdma.Config{Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Serve(nil, nil); !errors.Is(err, roce.ErrInvalidArgument) {
		t.Errorf("serve without service: %v", err)
	}
	st.Close()
}

type nopIO struct{}

func (nopIO) RecvBurst([][]byte) int   { return 0 }
func (nopIO) SendBurst(f [][]byte) int { return len(f) }

var _ app.SessionService = (*app.Echo)(nil)
