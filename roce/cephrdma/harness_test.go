package cephrdma_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest/cmtest"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// The endpoints' addresses double as the TCP addresses of the side
// channel, on the loopback interface (Linux answers for all of
// 127.0.0.0/8), so that the GID check sees what it would on a real
// network.
var (
	macSrv, macCli = roctest.MACA, roctest.MACB
	ipSrv          = netip.MustParseAddr("127.0.0.2")
	ipCli          = netip.MustParseAddr("127.0.0.3")
)

// testResolver answers from a table, at once or from its poll.
type testResolver struct {
	table   map[netip.Addr][6]byte
	async   bool
	silent  bool  // never answer
	err     error // answer with this error
	pending []func()
	calls   int
}

func (r *testResolver) Resolve(ip netip.Addr, done func(mac [6]byte, err error)) {
	r.calls++
	if r.silent {
		return
	}
	answer := func() {
		mac, ok := r.table[ip]
		switch {
		case r.err != nil:
			done(mac, r.err)
		case !ok:
			done(mac, fmt.Errorf("no neighbour %v", ip))
		default:
			done(mac, nil)
		}
	}
	if r.async {
		r.pending = append(r.pending, answer)
		return
	}
	answer()
}

func (r *testResolver) poll() int {
	p := r.pending
	r.pending = nil
	for _, f := range p {
		f()
	}
	return len(p)
}

// errLog collects OnError reports.
type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errLog) add(_ netip.AddrPort, err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *errLog) get() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// testNet is a server stack with an echo service and a client stack,
// on two endpoints joined by a memlink, with the TCP exchange over
// loopback. It runs on the wall clock: the TCP side is real.
type testNet struct {
	*cmtest.Net
	srvStack, cliStack *cephrdma.Stack
	srvRes, cliRes     *testResolver
	srvErrs, cliErrs   errLog
	srvAlloc, cliAlloc *roce.HeapAllocator
	svc                app.SessionService
	ln                 net.Listener
	serving            bool
	serveErr           chan error
	goroutines         int
}

type netOpts struct {
	link      memlink.Config
	session   func(*session.Config)
	server    func(*cephrdma.Config)
	svc       app.SessionService
	noServe   bool
	asyncRes  bool
	ioTimeout time.Duration
}

func testSessions() session.Config {
	cfg := session.DefaultConfig()
	cfg.BufferSize = 16 << 10
	cfg.SendBuffers, cfg.RecvBuffers = 8, 8
	cfg.Timeout = 10 // 4 ms: losses recover quickly on the wall clock
	return cfg
}

func newTestNet(tb testing.TB, o netOpts) *testNet {
	tb.Helper()
	n := &testNet{goroutines: runtime.NumGoroutine(), srvAlloc: &roce.HeapAllocator{}, cliAlloc: &roce.HeapAllocator{}}
	n.Net = cmtest.New(tb, cmtest.Config{Link: o.link, Srv: roce.EndpointConfig{IP: ipSrv}, Cli: roce.EndpointConfig{IP: ipCli}})
	n.Wall = true
	n.srvRes = &testResolver{table: map[netip.Addr][6]byte{ipCli: macCli}, async: o.asyncRes}
	n.cliRes = &testResolver{table: map[netip.Addr][6]byte{ipSrv: macSrv}, async: o.asyncRes}
	mk := func(alloc *roce.HeapAllocator, res *testResolver, log *errLog, mod func(*cephrdma.Config)) *cephrdma.Config {
		cfg := cephrdma.DefaultConfig()
		cfg.Session = testSessions()
		if o.session != nil {
			o.session(&cfg.Session)
		}
		cfg.Session.Allocator = alloc
		cfg.Resolver = res
		cfg.OnError = log.add
		cfg.IOTimeout = o.ioTimeout
		if cfg.IOTimeout == 0 {
			cfg.IOTimeout = 5 * time.Second
		}
		cfg.Dialer.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(ipCli, 0))
		if mod != nil {
			mod(&cfg)
		}
		return &cfg
	}
	var err error
	if n.srvStack, err = cephrdma.New(n.Srv, *mk(n.srvAlloc, n.srvRes, &n.srvErrs, o.server)); err != nil {
		tb.Fatal(err)
	}
	if n.cliStack, err = cephrdma.New(n.Cli, *mk(n.cliAlloc, n.cliRes, &n.cliErrs, nil)); err != nil {
		tb.Fatal(err)
	}
	n.svc = o.svc
	if n.svc == nil {
		n.svc = app.NewEcho(app.EchoConfig{})
	}
	// Each round polls the endpoints, the stacks, the service and the
	// resolvers, at one time.
	n.Add(n.srvStack, n.cliStack, n.svc)
	n.AddFunc(func(time.Time) int { return n.srvRes.poll() })
	n.AddFunc(func(time.Time) int { return n.cliRes.poll() })
	if n.ln, err = net.Listen("tcp", netip.AddrPortFrom(ipSrv, 0).String()); err != nil {
		tb.Fatal(err)
	}
	n.serveErr = make(chan error, 1)
	if !o.noServe {
		n.serving = true
		go func() { n.serveErr <- n.srvStack.Serve(n.ln, n.svc) }()
	}
	return n
}

func (n *testNet) addr() string { return n.ln.Addr().String() }

// run polls until cond holds, yielding to the TCP goroutines when
// idle; it fails the test after limit.
func (n *testNet) run(limit time.Duration, cond func() bool) {
	n.TB.Helper()
	if !n.RunWall(limit, func() { time.Sleep(20 * time.Microsecond) }, cond) {
		n.TB.Fatalf("condition not met within %v", limit)
	}
}

// mustDial dials the server's address and fails the test if that fails.
func (n *testNet) mustDial() *cephrdma.Conn {
	n.TB.Helper()
	conn, err := n.dial(n.addr())
	if err != nil {
		n.TB.Fatal(err)
	}
	return conn
}

// dial dials the server from the client stack and waits for the result.
func (n *testNet) dial(addr string) (*cephrdma.Conn, error) {
	n.TB.Helper()
	var (
		conn *cephrdma.Conn
		derr error
		done bool
	)
	if err := n.cliStack.Dial(addr, func(c *cephrdma.Conn, err error) { conn, derr, done = c, err, true }); err != nil {
		return nil, err
	}
	n.run(10*time.Second, func() bool { return done })
	return conn, derr
}

// shutdown closes both stacks and checks that nothing is left: no
// connection, no QP (the protection domains deallocate), no buffer, no
// goroutine.
func (n *testNet) shutdown() {
	n.TB.Helper()
	if err := n.srvStack.Close(); err != nil {
		n.TB.Errorf("server close: %v", err)
	}
	if err := n.cliStack.Close(); err != nil {
		n.TB.Errorf("client close: %v", err)
	}
	n.ln.Close()
	if n.serving {
		select {
		case err := <-n.serveErr:
			if !errors.Is(err, cephrdma.ErrClosed) {
				n.TB.Errorf("Serve returned %v", err)
			}
		case <-time.After(5 * time.Second):
			n.TB.Error("Serve did not return")
		}
	}
	if a, b := n.srvAlloc.InUse(), n.cliAlloc.InUse(); a != 0 || b != 0 {
		n.TB.Errorf("session buffers still allocated: %d / %d bytes", a, b)
	}
	for _, s := range []*cephrdma.Stack{n.srvStack, n.cliStack} {
		if st := s.Stats(); st.Active != 0 {
			n.TB.Errorf("stats after close: %+v", st)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n.goroutines && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > n.goroutines {
		buf := make([]byte, 1<<16)
		n.TB.Errorf("%d goroutines left over (%d before):\n%s", g-n.goroutines, n.goroutines, buf[:runtime.Stack(buf, true)])
	}
}

// cephRecord formats a record the way Ceph's send_cm_meta does, with
// its own sprintf: an encoder independent of wire.CephQPRecord.
func cephRecord(lid uint16, qpn, psn, peerQPN uint32, gid [16]byte) []byte {
	var g strings.Builder
	for _, b := range gid {
		fmt.Fprintf(&g, "%02x", b)
	}
	return append([]byte(fmt.Sprintf("%04x:%08x:%08x:%08x:%s", lid, qpn, psn, peerQPN, g.String())), 0)
}

func mapped(a netip.Addr) [16]byte { return a.As16() }

// parseRecord decodes a record the way Ceph's recv_cm_meta does
// (sscanf), independently of wire.CephQPRecord.
func parseRecord(tb testing.TB, b []byte) wire.CephQPRecord {
	tb.Helper()
	var r wire.CephQPRecord
	var gid string
	if len(b) != 65 || b[64] != 0 {
		tb.Fatalf("record %q is not 65 bytes ending in NUL", b)
	}
	if _, err := fmt.Sscanf(string(b[:64]), "%4x:%8x:%8x:%8x:%32s", &r.LID, &r.QPN, &r.PSN, &r.PeerQPN, &gid); err != nil {
		tb.Fatalf("record %q: %v", b, err)
	}
	for i := range r.GID {
		fmt.Sscanf(gid[2*i:2*i+2], "%02x", &r.GID[i])
	}
	return r
}
