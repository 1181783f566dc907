package cm

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/neigh"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// connect dials from A to B's listener and runs until both sides are
// established.
func (n *testNet) connect(priv []byte) (ca, sb *app) {
	n.TB.Helper()
	before := len(n.b.apps)
	ca = n.a.dial(n.TB, ipB, testPort, priv)
	n.Run(1_000_000, func() bool {
		return ca.connected > 0 && len(n.b.apps) > before && n.b.apps[before].connected > 0
	})
	sb = n.b.apps[before]
	if ca.connErr != nil || sb.connErr != nil {
		n.TB.Fatalf("connect: active %v, passive %v", ca.connErr, sb.connErr)
	}
	return ca, sb
}

// exchange sends msg from a to its echoing peer and waits for the echo.
func (n *testNet) exchange(a *app, msg []byte) {
	n.TB.Helper()
	start, sent := len(a.got), 0
	n.Run(1_000_000, func() bool {
		if sent < len(msg) {
			k, err := a.sess.Send(msg[sent:])
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				n.TB.Fatal(err)
			}
			sent += k
		}
		return len(a.got) >= start+len(msg)
	})
	if !bytes.Equal(a.got[start:start+len(msg)], msg) {
		n.TB.Fatal("echo differs from what was sent")
	}
}

func TestConnectExchangeDisconnect(t *testing.T) {
	for _, tc := range []struct {
		name         string
		activeCloses bool
	}{{"active closes", true}, {"passive closes", false}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newListeningNet(t)
			priv := []byte("hello from A")
			ca, sb := n.connect(priv)

			if got := sb.conn.PrivateData(); len(got) != MaxReqPrivateData || !bytes.HasPrefix(got, priv) {
				t.Errorf("passive got private data %q", got)
			}
			if !sb.conn.Passive() || ca.conn.Passive() {
				t.Error("roles mixed up")
			}
			if ca.conn.RemoteAddr() != netip.AddrPortFrom(ipB, testPort) || sb.conn.RemoteAddr() != netip.AddrPortFrom(ipA, ca.conn.LocalAddr().Port()) {
				t.Errorf("addresses: active %v→%v, passive %v→%v", ca.conn.LocalAddr(), ca.conn.RemoteAddr(), sb.conn.LocalAddr(), sb.conn.RemoteAddr())
			}
			qa, qb := ca.qp.Query(), sb.qp.Query()
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"active state", qa.State, roce.QPStateRTS},
				{"passive state", qb.State, roce.QPStateRTS},
				{"active send psn", qa.SQPSN, qb.RQPSN},
				{"passive send psn", qb.SQPSN, qa.RQPSN},
				{"active dest qpn", qa.DestQPN, sb.qp.QPN()},
				{"passive dest qpn", qb.DestQPN, ca.qp.QPN()},
				{"active mtu", qa.PathMTU, DefaultPathMTU},
				{"passive mtu", qb.PathMTU, DefaultPathMTU},
				{"active rnr timer", qa.MinRNRTimer, uint8(DefaultMinRNRTimer)},
				{"passive rnr timer", qb.MinRNRTimer, uint8(DefaultMinRNRTimer)},
				{"passive timeout", qb.Timeout, uint8(DefaultTimeout)},
				{"passive retry", qb.RetryCnt, uint8(DefaultMaxRetryCount)},
				{"active retry", qa.RetryCnt, uint8(DefaultMaxRetryCount)},
				{"passive rnr retry", qb.RNRRetry, uint8(7)},
				{"active rnr retry", qa.RNRRetry, uint8(7)},
				{"active av mac", qa.AV.DstMAC, macB},
				{"passive av mac", qb.AV.DstMAC, macA},
				{"active remote qpn", ca.conn.RemoteQPN(), sb.qp.QPN()},
				{"comm ids", ca.conn.RemoteCommID(), sb.conn.LocalCommID()},
			} {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}

			n.exchange(ca, pattern(10_000, 1))
			n.exchange(ca, pattern(100, 2))

			closer, other := ca, sb
			if !tc.activeCloses {
				closer, other = sb, ca
			}
			if err := closer.n.m.Disconnect(closer.conn); err != nil {
				t.Fatal(err)
			}
			n.Run(1_000_000, func() bool { return closer.disconnected > 0 && other.disconnected > 0 })
			if closer.discErr != nil || other.discErr != nil {
				t.Errorf("disconnect errors: closer %v, other %v", closer.discErr, other.discErr)
			}
			if err := closer.n.m.Disconnect(closer.conn); err != nil {
				t.Errorf("second Disconnect: %v", err)
			}
			n.Settle()
			n.checkClean(n.a, "A")
			n.checkClean(n.b, "B")
			if ca.connected != 1 || sb.connected != 1 || ca.disconnected != 1 || sb.disconnected != 1 {
				t.Errorf("callbacks: connected %d/%d disconnected %d/%d", ca.connected, sb.connected, ca.disconnected, sb.disconnected)
			}
			for _, nd := range []*node{n.a, n.b} {
				st := nd.m.Stats()
				if st.Established != 1 || st.Disconnected != 1 || st.Failed != 0 || st.BadMADs != 0 {
					t.Errorf("stats %+v", st)
				}
			}
		})
	}
}

func TestConcurrentConnections(t *testing.T) {
	const conns = 8
	n := newListeningNet(t)
	var active []*app
	for i := range conns {
		active = append(active, n.a.dial(t, ipB, testPort, []byte{byte(i)}))
	}
	n.Run(1_000_000, func() bool {
		k := 0
		for _, a := range n.b.apps {
			k += a.connected
		}
		for _, a := range active {
			k += a.connected
		}
		return k == 2*conns
	})
	for i, a := range active {
		if a.connErr != nil {
			t.Fatalf("conn %d: %v", i, a.connErr)
		}
	}
	// Interleave: every connection has data in flight at once.
	msgs := make([][]byte, conns)
	sent := make([]int, conns)
	for i := range msgs {
		msgs[i] = pattern(3000+100*i, byte(i))
	}
	n.Run(1_000_000, func() bool {
		done := true
		for i, a := range active {
			if sent[i] < len(msgs[i]) {
				k, _ := a.sess.Send(msgs[i][sent[i]:])
				sent[i] += k
			}
			done = done && len(a.got) == len(msgs[i])
		}
		return done
	})
	for i, a := range active {
		if !bytes.Equal(a.got, msgs[i]) {
			t.Errorf("conn %d: echo differs", i)
		}
	}
	// The passive side's private data tells its connections apart.
	seen := map[byte]bool{}
	for _, b := range n.b.apps {
		seen[b.conn.PrivateData()[0]] = true
	}
	if len(seen) != conns {
		t.Errorf("passive side saw %d distinct private data, want %d", len(seen), conns)
	}
	for i, a := range active {
		nd, c := n.a, a.conn
		if i%2 == 1 {
			// Close the odd ones from the passive side.
			for _, b := range n.b.apps {
				if b.conn.RemoteCommID() == a.conn.LocalCommID() {
					nd, c = n.b, b.conn
				}
			}
		}
		if err := nd.m.Disconnect(c); err != nil {
			t.Fatal(err)
		}
	}
	n.Settle()
	for _, a := range append(active, n.b.apps...) {
		if a.disconnected != 1 || a.discErr != nil {
			t.Errorf("%v: disconnected %d, %v", a.conn, a.disconnected, a.discErr)
		}
	}
	n.checkClean(n.a, "A")
	n.checkClean(n.b, "B")
}

func TestRejectedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		port     uint16
		accept   AcceptFunc
		reason   uint16
		wantPriv string
	}{
		{name: "unlistened port", port: 9999, reason: RejInvalidServiceID},
		{name: "application rejects", port: testPort, reason: RejConsumerDefined, wantPriv: "go away",
			accept: func(*ConnRequest) (Accept, error) { return Accept{}, Reject(RejConsumerDefined, []byte("go away")) }},
		{name: "application fails", port: testPort, reason: RejConsumerDefined,
			accept: func(*ConnRequest) (Accept, error) { return Accept{}, errors.New("no memory") }},
		{name: "no qp", port: testPort, reason: RejNoResources,
			accept: func(*ConnRequest) (Accept, error) { return Accept{}, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			cfgB := testConfig()
			cfgB.Log = slog.New(slog.NewTextHandler(&logged, nil))
			n := newTestNet(t, testConfig(), cfgB)
			if tc.accept != nil {
				n.b.m.Listen(testPort, tc.accept)
			} else {
				n.b.listen(t, testPort)
			}
			start := n.Now
			a := n.a.dial(t, ipB, tc.port, nil)
			n.Run(10_000, func() bool { return a.connected > 0 })
			var rerr *RejectError
			if !errors.Is(a.connErr, ErrRejected) || !errors.As(a.connErr, &rerr) || rerr.Reason != tc.reason {
				t.Fatalf("Connected(%v), want a REJ with reason %d", a.connErr, tc.reason)
			}
			if !bytes.HasPrefix(rerr.PrivateData, []byte(tc.wantPriv)) {
				t.Errorf("rej private data %q, want %q", rerr.PrivateData, tc.wantPriv)
			}
			if took := n.Now.Sub(start); took >= testConfig().RetransmitTimeout {
				t.Errorf("rejected after %v: not at once", took)
			}
			if st := n.a.m.Stats(); st.Retransmits != 0 || st.RejectsRcvd != 1 {
				t.Errorf("active stats %+v", st)
			}
			if st := n.b.m.Stats(); st.RejectsSent != 1 {
				t.Errorf("passive stats %+v", st)
			}
			if want := "reason=" + RejectReasonName(tc.reason); !strings.Contains(logged.String(), "cm: REJ sent") || !strings.Contains(logged.String(), want) {
				t.Errorf("log %q: want a REJ line with %s", logged.String(), want)
			}
			n.Settle()
			n.checkClean(n.a, "A")
			n.checkClean(n.b, "B")
		})
	}
}

func TestDuplicateReqGetsSameRep(t *testing.T) {
	n := newListeningNet(t)
	sentA := watch(n.a.link, nil)
	sentB := watch(n.b.link, nil)
	ca, sb := n.connect(nil)
	req := sentA.last(wire.AttrReq)
	// The REQ again, as if the network had duplicated it.
	av := roce.AddressVector{DstMAC: macB, DstIP: ipB}
	if err := n.a.ep.SendGSI(&av, req); err != nil {
		t.Fatal(err)
	}
	n.Settle()
	if k := sentB.count(wire.AttrRep); k != 2 {
		t.Fatalf("passive sent %d REPs, want 2", k)
	}
	reps := [][]byte{}
	for i, a := range sentB.attrs {
		if a == wire.AttrRep {
			reps = append(reps, sentB.mads[i])
		}
	}
	if !bytes.Equal(reps[0], reps[1]) {
		t.Error("duplicate REQ answered with a different REP")
	}
	// The active side answers the duplicate REP with the RTU again.
	if k := sentA.count(wire.AttrRTU); k != 2 {
		t.Errorf("active sent %d RTUs, want 2", k)
	}
	if st := n.b.m.Stats(); st.DupRequests != 1 || st.Requests != 1 || st.Established != 1 {
		t.Errorf("passive stats %+v", st)
	}
	if ca.connected != 1 || sb.connected != 1 || len(n.b.apps) != 1 {
		t.Error("duplicate REQ created or re-established a connection")
	}
	n.exchange(ca, pattern(5000, 3))
}

func TestLostRepRetriedReq(t *testing.T) {
	cb := testConfig()
	cb.RetransmitTimeout = time.Second // the active side's REQ retry comes first
	n := newTestNet(t, testConfig(), cb)
	n.b.listen(t, testPort)
	sentA := watch(n.a.link, nil)
	sentB := watch(n.b.link, dropFirst(wire.AttrRep))
	ca, _ := n.connect(nil)
	if k := sentA.count(wire.AttrReq); k != 2 {
		t.Errorf("active sent %d REQs, want 2", k)
	}
	if k := sentB.count(wire.AttrRep); k != 2 {
		t.Fatalf("passive sent %d REPs, want 2", k)
	}
	if st := n.b.m.Stats(); st.DupRequests != 1 || st.Retransmits != 0 {
		t.Errorf("passive stats %+v", st)
	}
	if st := n.a.m.Stats(); st.Retransmits != 1 {
		t.Errorf("active stats %+v", st)
	}
	n.exchange(ca, pattern(2000, 4))
}

func TestLostRtuFirstPacketEstablishes(t *testing.T) {
	cb := testConfig()
	cb.RetransmitTimeout = time.Hour // no REP retransmission to rescue the RTU
	n := newTestNet(t, testConfig(), cb)
	n.b.listen(t, testPort)
	sentA := watch(n.a.link, dropFirst(wire.AttrRTU))
	ca := n.a.dial(t, ipB, testPort, nil)
	n.Run(100_000, func() bool { return ca.connected > 0 })
	if ca.connErr != nil {
		t.Fatal(ca.connErr)
	}
	n.Quiesce()
	sb := n.b.apps[0]
	if sb.connected != 0 || sb.conn.State() != StateRepSent || sb.qp.State() != roce.QPStateRTR {
		t.Fatalf("passive side established without RTU or packet: %v, qp %v", sb.conn.State(), sb.qp.State())
	}
	// The active side's first SEND establishes the passive side.
	start := n.Now
	n.exchange(ca, pattern(3000, 5))
	if sb.connected != 1 || sb.connErr != nil || sb.qp.State() != roce.QPStateRTS {
		t.Errorf("passive: connected %d (%v), qp %v", sb.connected, sb.connErr, sb.qp.State())
	}
	if n.Now.Sub(start) > time.Second {
		t.Errorf("took %v", n.Now.Sub(start))
	}
	if k := sentA.count(wire.AttrRTU); k != 1 {
		t.Errorf("%d RTUs sent, want the one lost", k)
	}
}

func TestUnknownDreqGetsDrep(t *testing.T) {
	n := newListeningNet(t)
	ca, sb := n.connect(nil)
	sentB := watch(n.b.link, nil)
	send := func(d *wire.CMDreq, tid uint64) {
		var mad [wire.MADLen]byte
		wire.EncodeCM(mad[:], tid, d)
		av := roce.AddressVector{DstMAC: macB, DstIP: ipB}
		if err := n.a.ep.SendGSI(&av, mad[:]); err != nil {
			t.Fatal(err)
		}
		n.Settle()
	}
	// Unknown comm IDs: a DREP all the same, IDs swapped, TID echoed.
	send(&wire.CMDreq{LocalCommID: 0x1234, RemoteCommID: 0xABCD, RemoteQPN: 0x55}, 0x77)
	mad := sentB.last(wire.AttrDREP)
	if mad == nil {
		t.Fatal("no DREP for an unknown DREQ")
	}
	var h wire.MADHeader
	var d wire.CMDrep
	h.Decode(mad)
	d.Decode(mad)
	if h.TID != 0x77 || d.LocalCommID != 0xABCD || d.RemoteCommID != 0x1234 {
		t.Errorf("DREP tid %#x ids %#x/%#x", h.TID, d.LocalCommID, d.RemoteCommID)
	}
	// The right comm IDs but another QPN: ignored, as Linux does.
	send(&wire.CMDreq{LocalCommID: ca.conn.LocalCommID(), RemoteCommID: sb.conn.LocalCommID(), RemoteQPN: sb.qp.QPN() + 1}, 0x78)
	if k := sentB.count(wire.AttrDREP); k != 1 || sb.conn.State() != StateEstablished {
		t.Errorf("DREQ with a wrong QPN: %d DREPs, state %v", k, sb.conn.State())
	}
	n.exchange(ca, pattern(100, 6))
}

func TestPeerVanishes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		activeVanishes bool
	}{{"passive vanishes", false}, {"active vanishes", true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newListeningNet(t)
			ca, sb := n.connect(nil)
			n.exchange(ca, pattern(1000, 7))
			survivor, gone := ca, sb
			if tc.activeVanishes {
				survivor, gone = sb, ca
			}
			gone.echo = false
			// Everything the vanished side sends is lost from now on.
			gone.n.link.SetFilter(func([]byte) bool { return false })
			sentS := watch(survivor.n.link, nil)
			if _, err := survivor.sess.Send(pattern(20_000, 8)); err != nil {
				t.Fatal(err)
			}
			start := n.Now
			n.Run(10_000_000, func() bool { return survivor.disconnected > 0 })
			if !errors.Is(survivor.discErr, ErrQPFailed) || !errors.Is(survivor.discErr, roce.ErrRetryExceeded) {
				t.Errorf("survivor disconnected with %v, want a QP failure from the retry limit", survivor.discErr)
			}
			// 7 transport timeouts of 4.096 µs·2^DefaultTimeout each.
			if took, want := n.Now.Sub(start), 7*(4096*time.Nanosecond<<DefaultTimeout); took < want || took > want+time.Second {
				t.Errorf("QP failed after %v, want about %v", took, want)
			}
			n.Settle()
			if k := sentS.count(wire.AttrDREQ); k != testConfig().MaxRetries+1 {
				t.Errorf("%d DREQs sent, want %d", k, testConfig().MaxRetries+1)
			}
			// The unanswered DREQ ends the connection all the same, counted.
			if st := survivor.n.m.Stats(); st.DisconnectTimeouts != 1 || st.Disconnected != 1 || st.Conns != 0 {
				t.Errorf("survivor's manager: %d DREQ timeouts, %d disconnected, %d connections; want 1, 1, 0",
					st.DisconnectTimeouts, st.Disconnected, st.Conns)
			}
			n.checkClean(survivor.n, "survivor")
			// The vanished side still heard the DREQs and cleaned up too.
			if gone.disconnected != 1 || gone.discErr != nil {
				t.Errorf("vanished side: disconnected %d, %v", gone.disconnected, gone.discErr)
			}
			n.checkClean(gone.n, "vanished")
		})
	}
}

func TestRepTimeout(t *testing.T) {
	n := newListeningNet(t)
	// The active side's REQ gets through; nothing else it sends does.
	sentA := watch(n.a.link, func(attr uint16, _ []byte) bool { return attr != wire.AttrReq })
	sentB := watch(n.b.link, nil)
	ca := n.a.dial(t, ipB, testPort, nil)
	n.Run(1_000_000, func() bool { return len(n.b.apps) == 1 && n.b.apps[0].connected > 0 })
	sb := n.b.apps[0]
	if !errors.Is(sb.connErr, ErrTimeout) {
		t.Fatalf("passive Connected(%v), want ErrTimeout", sb.connErr)
	}
	if k := sentB.count(wire.AttrRep); k != testConfig().MaxRetries+1 {
		t.Errorf("%d REPs, want %d", k, testConfig().MaxRetries+1)
	}
	if k := sentA.count(wire.AttrRTU); k != testConfig().MaxRetries+1 {
		t.Errorf("%d RTUs (one per REP), want %d", k, testConfig().MaxRetries+1)
	}
	// The passive side's timeout REJ reaches the established active side.
	n.Settle()
	var rerr *RejectError
	if ca.disconnected != 1 || !errors.As(ca.discErr, &rerr) || rerr.Reason != RejTimeout ||
		!bytes.Equal(rerr.ARI, []byte{0x00, 0, 0, 0xFF, 0xFE, 0, 0, 0x0B}) {
		t.Errorf("active: disconnected %d with %v (ari %x)", ca.disconnected, ca.discErr, rerr)
	}
	n.checkClean(n.a, "A")
	n.checkClean(n.b, "B")
}

func TestDialUnreachable(t *testing.T) {
	n := newTestNet(t, testConfig(), testConfig())
	a := n.a.dial(t, netip.MustParseAddr("10.0.0.99"), testPort, nil)
	n.Run(100_000, func() bool { return a.connected > 0 })
	if !errors.Is(a.connErr, neigh.ErrUnreachable) {
		t.Errorf("Connected(%v), want neigh.ErrUnreachable", a.connErr)
	}
	n.Settle()
	n.checkClean(n.a, "A")
}

func TestDisconnectWhileConnecting(t *testing.T) {
	t.Run("resolving", func(t *testing.T) {
		n := newListeningNet(t)
		a := n.a.dial(t, ipB, testPort, nil)
		if err := n.a.m.Disconnect(a.conn); err != nil {
			t.Fatal(err)
		}
		if a.connected != 1 || !errors.Is(a.connErr, ErrCanceled) {
			t.Fatalf("Connected %d times with %v", a.connected, a.connErr)
		}
		n.Settle()
		if len(n.b.apps) != 0 {
			t.Error("canceled dial reached the listener")
		}
		n.checkClean(n.a, "A")
	})
	t.Run("req sent", func(t *testing.T) {
		n := newListeningNet(t)
		watch(n.b.link, func(attr uint16, _ []byte) bool { return attr == wire.AttrRep })
		a := n.a.dial(t, ipB, testPort, nil)
		n.Run(100_000, func() bool { return len(n.b.apps) == 1 })
		n.Poll()
		if err := n.a.m.Disconnect(a.conn); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(a.connErr, ErrCanceled) {
			t.Fatalf("Connected(%v)", a.connErr)
		}
		// The timeout REJ finds the passive side by our GUID and comm ID.
		n.Run(100_000, func() bool { return n.b.apps[0].connected > 0 })
		var rerr *RejectError
		if !errors.As(n.b.apps[0].connErr, &rerr) || rerr.Reason != RejTimeout {
			t.Errorf("passive Connected(%v)", n.b.apps[0].connErr)
		}
		n.Settle()
		n.checkClean(n.a, "A")
		n.checkClean(n.b, "B")
	})
}

func TestMaxConns(t *testing.T) {
	cb := testConfig()
	cb.MaxConns = 2
	n := newTestNet(t, testConfig(), cb)
	n.b.listen(t, testPort)
	n.connect(nil)
	n.connect(nil)
	a := n.a.dial(t, ipB, testPort, nil)
	n.Run(100_000, func() bool { return a.connected > 0 })
	var rerr *RejectError
	if !errors.As(a.connErr, &rerr) || rerr.Reason != RejNoResources {
		t.Errorf("third connection: %v", a.connErr)
	}
	if n.b.m.NumConns() != 2 {
		t.Errorf("%d connections", n.b.m.NumConns())
	}
}

func TestStaleConnectionReplaced(t *testing.T) {
	n := newListeningNet(t)
	_, sb := n.connect(nil)
	// A new REQ from the same peer QP, with a new comm ID: the peer
	// restarted.
	var req wire.CMReq
	var mad [wire.MADLen]byte
	req = wire.CMReq{
		LocalCommID: 0x5151, ServiceID: wire.ServiceID(wire.PSTCP, testPort), LocalQPN: sb.qp.Query().DestQPN,
		TransportType: wire.CMTransportRC, StartingPSN: 1, RetryCount: 7, PKey: 0xFFFF, PathMTU: 3, RNRRetry: 7,
		MaxCMRetries: 15, HopLimit: 64, LocalACKTimeout: 18,
	}
	cma := wire.CMAHeader{IPVersion: 4, SrcPort: 40000, SrcAddr: ipA, DstAddr: ipB}
	cma.Encode(req.PrivateData[:])
	wire.EncodeCM(mad[:], 99, &req)
	av := roce.AddressVector{DstMAC: macB, DstIP: ipB}
	n.a.ep.SendGSI(&av, mad[:])
	n.Quiesce()
	if !errors.Is(sb.discErr, ErrStale) {
		t.Errorf("old connection ended with %v, want ErrStale", sb.discErr)
	}
	if len(n.b.apps) != 2 || n.b.apps[1].conn.State() != StateRepSent {
		t.Errorf("new request not accepted")
	}
	n.Settle()
	n.checkClean(n.b, "B")
}

func TestDoFromOtherGoroutine(t *testing.T) {
	n := newListeningNet(t)
	done := make(chan struct{})
	var a *app
	go func() {
		defer close(done)
		for {
			err := n.a.m.Do(func() { a = n.a.dial(t, ipB, testPort, nil) })
			if err == nil {
				return
			}
		}
	}()
	<-done
	n.Run(100_000, func() bool { return a != nil && a.connected > 0 })
	if a.connErr != nil {
		t.Fatal(a.connErr)
	}
	full := 0
	for range DefaultCommandQueue + 1 {
		if errors.Is(n.a.m.Do(func() {}), ErrQueueFull) {
			full++
		}
	}
	if full != 1 {
		t.Errorf("%d Do calls refused, want 1", full)
	}
}

func TestArgumentErrors(t *testing.T) {
	n := newTestNet(t, testConfig(), testConfig())
	a := n.a.newApp(t)
	for _, tc := range []struct {
		name string
		ip   netip.Addr
		port uint16
		qp   *roce.QP
		priv []byte
		want error
	}{
		{"ipv6", netip.MustParseAddr("fe80::1"), 1, a.qp, nil, ErrInvalidArgument},
		{"own address", ipA, 1, a.qp, nil, ErrInvalidArgument},
		{"port 0", ipB, 0, a.qp, nil, ErrInvalidArgument},
		{"private data", ipB, 1, a.qp, make([]byte, 57), ErrInvalidArgument},
		{"no qp", ipB, 1, nil, nil, ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := n.a.m.Dial(tc.ip, tc.port, tc.qp, tc.priv, Events{}); !errors.Is(err, tc.want) {
				t.Errorf("Dial = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := n.a.m.Dial(ipB, 1, a.qp, nil, Events{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.a.m.Dial(ipB, 1, a.qp, nil, Events{}); !errors.Is(err, ErrInvalidState) {
		t.Errorf("second Dial with the same QP = %v", err)
	}
	if err := n.b.m.Listen(0, func(*ConnRequest) (Accept, error) { return Accept{}, nil }); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Listen(0) = %v", err)
	}
	n.b.listen(t, 5)
	if err := n.b.m.Listen(5, func(*ConnRequest) (Accept, error) { return Accept{}, nil }); !errors.Is(err, ErrPortInUse) {
		t.Errorf("second Listen = %v", err)
	}
	if err := n.b.m.Unlisten(5); err != nil {
		t.Error(err)
	}
	if err := n.b.m.Unlisten(5); !errors.Is(err, ErrNotListening) {
		t.Errorf("second Unlisten = %v", err)
	}
	for _, cfg := range []Config{{PathMTU: 1000}, {PathMTU: 4096, MaxPathMTU: 1024}, {RetryCount: 8}, {MinRNRTimer: 32}, {InitiatorDepth: 17}} {
		if _, err := New(n.a.ep, cfg); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v", cfg, err)
		}
	}
	if s := fmt.Sprint(&RejectError{Reason: RejInvalidServiceID}); s != "cm: connection rejected: invalid service id (8)" {
		t.Errorf("RejectError text %q", s)
	}
}

// TestNoAllocsEstablished: once connected, moving data through sessions
// driven by Manager.Poll (the endpoint's poll, neighbour learning from
// every frame, the CM's checks) allocates nothing.
func TestNoAllocsEstablished(t *testing.T) {
	n := newListeningNet(t)
	ca, sb := n.connect(nil)
	sb.echo, sb.discard = false, true
	msg := make([]byte, 64<<10)
	pump := func() {
		sent, start := 0, sb.nGot
		for i := 0; sb.nGot < start+len(msg); i++ {
			if i > 1_000_000 {
				t.Fatal("pump stuck")
			}
			if sent < len(msg) {
				k, _ := ca.sess.Send(msg[sent:])
				sent += k
			}
			if n.Poll() == 0 {
				n.Advance()
			}
			n.Now = n.Now.Add(10 * time.Microsecond)
		}
	}
	for range 10 {
		pump()
	}
	if a := testing.AllocsPerRun(20, pump); a != 0 {
		t.Errorf("%v allocations per 64 KiB", a)
	}
}

func BenchmarkConnectDisconnect(b *testing.B) {
	n := newTestNet(b, testConfig(), testConfig())
	n.b.listen(b, testPort)
	b.ReportAllocs()
	for b.Loop() {
		ca, _ := n.connect(nil)
		n.a.m.Disconnect(ca.conn)
		n.Settle()
		n.b.apps = n.b.apps[:0]
		n.a.apps = n.a.apps[:0]
	}
}

func BenchmarkPollIdle(b *testing.B) {
	n := newTestNet(b, testConfig(), testConfig())
	n.b.listen(b, testPort)
	n.connect(nil)
	b.ReportAllocs()
	for b.Loop() {
		n.Now = n.Now.Add(time.Microsecond)
		n.a.ep.Poll(n.Now)
		n.a.m.Poll(n.Now)
	}
}

func TestMRAExtendsTimer(t *testing.T) {
	n := newListeningNet(t)
	watch(n.b.link, func(attr uint16, _ []byte) bool { return attr == wire.AttrRep })
	a := n.a.dial(t, ipB, testPort, nil)
	n.Run(100_000, func() bool { return a.conn.State() == StateReqSent && len(n.b.apps) == 1 })
	n.Quiesce()
	mra := wire.CMMra{LocalCommID: n.b.apps[0].conn.LocalCommID(), RemoteCommID: a.conn.LocalCommID(), MsgMRAed: wire.CMMsgReq, ServiceTimeout: 20}
	var mad [wire.MADLen]byte
	wire.EncodeCM(mad[:], 1, &mra)
	av := roce.AddressVector{DstMAC: macA, DstIP: ipA}
	if err := n.b.ep.SendGSI(&av, mad[:]); err != nil {
		t.Fatal(err)
	}
	n.Quiesce()
	want := n.Now.Add(4096*time.Nanosecond<<20 + testConfig().RetransmitTimeout)
	if d := a.conn.deadline.Sub(want); d < -10*time.Microsecond || d > 10*time.Microsecond {
		t.Errorf("REQ retransmission at %v after the MRA, want %v", a.conn.deadline.Sub(n.Now), want.Sub(n.Now))
	}
	if st := n.a.m.Stats(); st.Retransmits != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestResolve(t *testing.T) {
	n := newTestNet(t, testConfig(), testConfig())
	type answer struct {
		mac [6]byte
		err error
	}
	var got []answer
	done := func(mac [6]byte, err error) { got = append(got, answer{mac, err}) }
	n.a.m.Resolve(ipB, done)
	n.a.m.Resolve(netip.MustParseAddr("fe80::1"), done)
	if len(got) != 1 || !errors.Is(got[0].err, neigh.ErrInvalidAddress) {
		t.Fatalf("invalid address: %+v", got)
	}
	n.Run(1000, func() bool { return len(got) == 2 })
	if got[1] != (answer{macB, nil}) {
		t.Errorf("Resolve(%v) = %+v", ipB, got[1])
	}
}

// TestOneManagerPerEndpoint: the endpoint has one transport dispatcher,
// so a second Manager on it fails instead of stealing its MADs.
func TestOneManagerPerEndpoint(t *testing.T) {
	n := newTestNet(t, testConfig(), testConfig())
	if _, err := New(n.a.ep, testConfig()); !errors.Is(err, roce.ErrInvalidState) {
		t.Fatalf("second New on one endpoint = %v, want roce.ErrInvalidState", err)
	}
	// The first still works.
	n.b.listen(t, testPort)
	n.connect(nil)
}
