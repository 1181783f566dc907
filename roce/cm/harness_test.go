package cm

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/internal/simclock"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

var (
	macA = [6]byte{0x02, 0, 0, 0, 0, 0x0A}
	macB = [6]byte{0x02, 0, 0, 0, 0, 0x0B}
	ipA  = netip.MustParseAddr("10.0.0.1")
	ipB  = netip.MustParseAddr("10.0.0.2")
)

const testPort = 7174

// node is one endpoint with its Manager and a test application.
type node struct {
	ep    *roce.Endpoint
	m     *Manager
	pd    *roce.PD
	alloc *roce.HeapAllocator
	link  *memlink.End
	scfg  session.Config
	apps  []*app
	errs  []error // from releasing apps
}

// app is one connection's application: a session over a QP of its own.
type app struct {
	n            *node
	qp           *roce.QP
	sess         *session.Session
	conn         *Conn
	connected    int
	connErr      error
	disconnected int
	discErr      error
	released     bool
	got          []byte
	out          []byte // echo data not yet sent
	echo         bool
	discard      bool // count received bytes only
	nGot         int
	buf          [4096]byte
}

// testNet is two nodes on a memlink, driven by a manual clock.
type testNet struct {
	t    testing.TB
	a, b *node
	now  time.Time
}

func testConfig() Config {
	return Config{Seed: 1, RetransmitTimeout: 100 * time.Millisecond, MaxRetries: 4, TimeWait: 50 * time.Millisecond}
}

func newTestNet(t testing.TB, ca, cb Config) *testNet {
	t.Helper()
	return newTestNetLink(t, memlink.Config{Seed: 7}, ca, cb)
}

func newTestNetLink(t testing.TB, lc memlink.Config, ca, cb Config) *testNet {
	t.Helper()
	la, lb := memlink.New(lc)
	n := &testNet{t: t, now: time.Unix(1_000_000, 0)}
	n.a = newNode(t, macA, ipA, la, ca)
	cb.Seed++
	n.b = newNode(t, macB, ipB, lb, cb)
	return n
}

func newNode(t testing.TB, mac [6]byte, ip netip.Addr, link *memlink.End, cfg Config) *node {
	t.Helper()
	return newNodeIO(t, mac, ip, link, link, cfg)
}

// newNodeIO is newNode with the endpoint's frames going through io, a
// wrapper of link.
func newNodeIO(t testing.TB, mac [6]byte, ip netip.Addr, link *memlink.End, io roce.PacketIO, cfg Config) *node {
	t.Helper()
	ep, err := roce.NewEndpoint(roce.EndpointConfig{MAC: mac, IP: ip, IO: io})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(ep, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nd := &node{ep: ep, m: m, pd: ep.NewPD(), alloc: &roce.HeapAllocator{}, link: link}
	nd.scfg = session.DefaultConfig()
	nd.scfg.BufferSize = 4096
	nd.scfg.SendBuffers = 8
	nd.scfg.RecvBuffers = 8
	nd.scfg.Allocator = nd.alloc
	nd.scfg.Access = roce.AccessRemoteWrite | roce.AccessRemoteRead
	return nd
}

// newApp creates a session QP in INIT with its receives posted.
func (nd *node) newApp(t testing.TB) *app {
	t.Helper()
	a := &app{n: nd}
	cfg := nd.scfg
	cfg.OnCompletion = func(*roce.CQ) { a.pump() }
	qp, err := session.NewQP(nd.pd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.New(qp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.qp, a.sess = qp, s
	nd.apps = append(nd.apps, a)
	return a
}

// pump reads what arrived and, for an echo app, sends it back.
func (a *app) pump() {
	if a.released {
		return
	}
	buf := a.buf[:]
	for {
		k, err := a.sess.Recv(buf)
		a.nGot += k
		if k > 0 && !a.discard {
			a.got = append(a.got, buf[:k]...)
			if a.echo {
				a.out = append(a.out, buf[:k]...)
			}
		}
		if err != nil {
			break
		}
	}
	// Sending before Connected would fail the session: the QP is not in
	// RTS yet.
	for len(a.out) > 0 && a.connected > 0 && a.connErr == nil {
		k, err := a.sess.Send(a.out)
		a.out = a.out[k:]
		if err != nil {
			return
		}
	}
}

func (a *app) events() Events {
	return Events{
		Connected: func(c *Conn, err error) {
			a.connected++
			a.connErr = err
			a.conn = c
			if err != nil {
				a.release()
				return
			}
			a.pump()
		},
		Disconnected: func(c *Conn, err error) {
			a.disconnected++
			a.discErr = err
			a.release()
		},
	}
}

// release frees everything the app owns, as a real application does
// once the Manager hands the QP back.
func (a *app) release() {
	if a.released {
		return
	}
	a.released = true
	if err := a.sess.Release(); err != nil {
		a.n.errs = append(a.n.errs, err)
	}
	scq, rcq := a.qp.SendCQ(), a.qp.RecvCQ()
	if err := a.qp.Destroy(); err != nil {
		a.n.errs = append(a.n.errs, err)
	}
	scq.Destroy()
	rcq.Destroy()
}

// listen makes nd accept every request on port with an echo app.
func (nd *node) listen(t testing.TB, port uint16) {
	t.Helper()
	err := nd.m.Listen(port, func(req *ConnRequest) (Accept, error) {
		a := nd.newApp(t)
		a.echo = true
		a.conn = req.Conn
		return Accept{QP: a.qp, Events: a.events()}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dial connects a new app of nd to ip:port.
func (nd *node) dial(t testing.TB, ip netip.Addr, port uint16, priv []byte) *app {
	t.Helper()
	a := nd.newApp(t)
	c, err := nd.m.Dial(ip, port, a.qp, priv, a.events())
	if err != nil {
		t.Fatal(err)
	}
	a.conn = c
	return a
}

func (n *testNet) poll() int { return n.a.m.Poll(n.now) + n.b.m.Poll(n.now) }

// advance moves the clock to the next deadline of either node.
func (n *testNet) advance() bool {
	return simclock.Advance(&n.now, n.a.m.NextDeadline, n.b.m.NextDeadline)
}

// run polls until done reports true (simclock.Run).
func (n *testNet) run(maxRounds int, done func() bool) {
	n.t.Helper()
	simclock.Run(n.t, &n.now, maxRounds, n.poll, n.advance, done)
}

// settle polls until nothing is left to do on either node.
func (n *testNet) settle() {
	n.t.Helper()
	for i := 0; i < 100_000; i++ {
		if n.poll() == 0 && !n.advance() {
			return
		}
		n.now = n.now.Add(time.Microsecond)
	}
	n.t.Fatal("never settled")
}

// quiesce polls until neither node has work, without moving the clock.
func (n *testNet) quiesce() {
	n.t.Helper()
	for i := 0; n.poll() != 0; i++ {
		if i > 100_000 {
			n.t.Fatal("never quiet")
		}
	}
}

// checkClean verifies that a node has no connection, QP or buffer left.
func (n *testNet) checkClean(nd *node, name string) {
	n.t.Helper()
	if c := nd.m.NumConns(); c != 0 {
		n.t.Errorf("%s: %d connections left", name, c)
	}
	if q := nd.ep.NumQPs(); q != 0 {
		n.t.Errorf("%s: %d qps left", name, q)
	}
	if b := nd.alloc.InUse(); b != 0 {
		n.t.Errorf("%s: %d bytes of buffers left", name, b)
	}
	if len(nd.m.byQPN) != 0 || len(nd.m.byRemote) != 0 {
		n.t.Errorf("%s: index entries left: %d by qpn, %d by remote", name, len(nd.m.byQPN), len(nd.m.byRemote))
	}
	for _, err := range nd.errs {
		n.t.Errorf("%s: %v", name, err)
	}
}

// madOf returns the CM attribute and MAD of a frame, if it is one.
func madOf(frame []byte) (uint16, []byte, bool) {
	var p wire.Packet
	if wire.ParsePacket(frame, &p) != nil || p.BTH.Opcode != wire.OpUDSendOnly || len(p.Payload) < wire.MADLen {
		return 0, nil, false
	}
	var h wire.MADHeader
	if h.Decode(p.Payload) != nil || !h.IsCM() {
		return 0, nil, false
	}
	return h.AttrID, p.Payload[:wire.MADLen], true
}

// madLog records the CM MADs an end sends; drop chooses ones to lose.
type madLog struct {
	attrs []uint16
	mads  [][]byte
}

func (l *madLog) count(attr uint16) int {
	k := 0
	for _, a := range l.attrs {
		if a == attr {
			k++
		}
	}
	return k
}

func (l *madLog) last(attr uint16) []byte {
	for i := len(l.attrs) - 1; i >= 0; i-- {
		if l.attrs[i] == attr {
			return l.mads[i]
		}
	}
	return nil
}

// watch logs the MADs end sends; drop, if set, decides which are lost.
func watch(end *memlink.End, drop func(attr uint16, mad []byte) bool) *madLog {
	l := &madLog{}
	end.SetFilter(func(f []byte) bool {
		attr, mad, ok := madOf(f)
		if !ok {
			return true
		}
		l.attrs = append(l.attrs, attr)
		l.mads = append(l.mads, append([]byte(nil), mad...))
		return drop == nil || !drop(attr, mad)
	})
	return l
}

// dropFirst returns a drop function losing the first MAD of attr.
func dropFirst(attr uint16) func(uint16, []byte) bool {
	done := false
	return func(a uint16, _ []byte) bool {
		if !done && a == attr {
			done = true
			return true
		}
		return false
	}
}
