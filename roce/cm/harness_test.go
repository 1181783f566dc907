package cm

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// The addresses of the network's two sides.
var macA, macB, ipA, ipB = roctest.MACA, roctest.MACB, roctest.IPA, roctest.IPB

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

// testNet is two nodes on a roctest network.
type testNet struct {
	*roctest.Net
	a, b *node
}

func testConfig() Config {
	return Config{Seed: 1, RetransmitTimeout: 100 * time.Millisecond, MaxRetries: 4, TimeWait: 50 * time.Millisecond}
}

func newTestNet(t testing.TB, ca, cb Config) *testNet {
	t.Helper()
	return newTestNetLink(t, memlink.Config{Seed: 7}, ca, cb)
}

// newListeningNet is newTestNet with the test configuration on both
// sides and B listening on testPort.
func newListeningNet(t testing.TB) *testNet {
	t.Helper()
	n := newTestNet(t, testConfig(), testConfig())
	n.b.listen(t, testPort)
	return n
}

func newTestNetLink(t testing.TB, lc memlink.Config, ca, cb Config) *testNet {
	t.Helper()
	return newTestNetWrap(t, lc, ca, cb, nil)
}

// newTestNetWrap is newTestNetLink with node a's frames going through
// the PacketIO wrap makes of its link end, if wrap is not nil. Node b's
// Manager is seeded with cb.Seed+1.
func newTestNetWrap(t testing.TB, lc memlink.Config, ca, cb Config, wrap func(*memlink.End) roce.PacketIO) *testNet {
	t.Helper()
	n := &testNet{Net: roctest.New(t, lc)}
	var io roce.PacketIO = n.A.Link
	if wrap != nil {
		io = wrap(n.A.Link)
	}
	n.a = newNode(t, n.A, io, ca)
	cb.Seed++
	n.b = newNode(t, n.B, n.B.Link, cb)
	// Each endpoint, then its Manager, as internal/roced's Node does.
	n.Add(n.a.ep, n.a.m, n.b.ep, n.b.m)
	return n
}

// newNode makes the node of side s, its endpoint's frames going through
// io (s's link end or a wrapper of it).
func newNode(t testing.TB, s roctest.Side, io roce.PacketIO, cfg Config) *node {
	t.Helper()
	ep, err := roce.NewEndpoint(roce.EndpointConfig{MAC: s.MAC, IP: s.IP, IO: io})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(ep, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nd := &node{ep: ep, m: m, pd: ep.NewPD(), alloc: &roce.HeapAllocator{}, link: s.Link}
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

// checkClean verifies that a node has no connection, QP or buffer left.
func (n *testNet) checkClean(nd *node, name string) {
	n.TB.Helper()
	if c := nd.m.NumConns(); c != 0 {
		n.TB.Errorf("%s: %d connections left", name, c)
	}
	if q := nd.ep.NumQPs(); q != 0 {
		n.TB.Errorf("%s: %d qps left", name, q)
	}
	if b := nd.alloc.InUse(); b != 0 {
		n.TB.Errorf("%s: %d bytes of buffers left", name, b)
	}
	if len(nd.m.byQPN) != 0 || len(nd.m.byRemote) != 0 {
		n.TB.Errorf("%s: index entries left: %d by qpn, %d by remote", name, len(nd.m.byQPN), len(nd.m.byRemote))
	}
	for _, err := range nd.errs {
		n.TB.Errorf("%s: %v", name, err)
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
