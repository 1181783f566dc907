package cm

import (
	"fmt"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// rawReq encodes a REQ for ipB:port from A, as a peer's rdma_cm sends it,
// with comm ID id and QP number qpn.
func rawReq(t *testing.T, id, qpn uint32, port uint16) []byte {
	t.Helper()
	mtu, _ := wire.MTUEnum(DefaultPathMTU)
	req := wire.CMReq{
		LocalCommID: id, ServiceID: wire.ServiceID(wire.PSTCP, port), LocalCAGUID: CAGUID(macA),
		LocalQPN: qpn, ResponderResources: 1, InitiatorDepth: 1, TransportType: wire.CMTransportRC,
		StartingPSN: 1, RetryCount: 7, RNRRetry: 7, PKey: wire.DefaultPKey, PathMTU: mtu,
		MaxCMRetries: 15, LocalACKTimeout: DefaultTimeout, TrafficClass: 0, HopLimit: 64,
	}
	cma := wire.CMAHeader{Version: wire.CMAVersion, IPVersion: 4, SrcPort: 40000, SrcAddr: ipA, DstAddr: ipB}
	cma.Encode(req.PrivateData[:])
	mad := make([]byte, wire.MADLen)
	if err := wire.EncodeCM(mad, uint64(id), &req); err != nil {
		t.Fatal(err)
	}
	return mad
}

// sendRaw sends MADs from A's QP1 to B's, polling both nodes whenever the
// link fills and at the end, without moving the clock.
func (n *testNet) sendRaw(mads [][]byte) {
	n.TB.Helper()
	av := roce.AddressVector{DstMAC: macB, DstIP: ipB}
	for i, mad := range mads {
		if i%256 == 255 {
			n.Quiesce()
		}
		if err := n.a.ep.SendGSI(&av, mad); err != nil {
			n.TB.Fatalf("MAD %d: %v", i, err)
		}
	}
	n.Quiesce()
}

// TestRequestFloodCounters floods a listener with connection requests
// beyond its session limit and the manager's connection table, amid
// malformed and unmatched MADs and one real connection, and checks every
// counter of the passive side in Stats (internal/metrics checks how these
// Stats are exported).
func TestRequestFloodCounters(t *testing.T) {
	const (
		flood       = 5000
		maxSessions = 3 // the flooded service's, as roce.max_sessions
		maxConns    = 6 // the manager's
		p1, p2      = testPort, testPort + 1
	)
	cb := testConfig()
	cb.MaxConns = maxConns
	n := newTestNet(t, testConfig(), cb)
	// p1 is a service at its session limit after maxSessions requests,
	// refusing the way roce/app's servers do; p2 takes everything.
	accepted := 0
	if err := n.b.m.Listen(p1, func(req *ConnRequest) (Accept, error) {
		if accepted == maxSessions {
			return Accept{}, fmt.Errorf("app: echo: accept: %d connections already: %w", accepted, roce.ErrBusy)
		}
		accepted++
		a := n.b.newApp(t)
		return Accept{QP: a.qp, Events: a.events()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	n.b.listen(t, p2)

	// One real connection, established both ways.
	ca := n.a.dial(t, ipB, p2, nil)
	n.Run(1_000_000, func() bool { return ca.connected > 0 && len(n.b.apps) == 1 && n.b.apps[0].connected > 0 })

	// The flood: REQs that nobody answers past the REP.
	var mads [][]byte
	for i := range flood {
		mads = append(mads, rawReq(t, 0xF000_0000+uint32(i), 0x1000+uint32(i), p1))
	}
	n.sendRaw(mads)
	// Five to the other port: two fill the table, three find it full.
	mads = mads[:0]
	for i := range 5 {
		mads = append(mads, rawReq(t, 0xE000_0000+uint32(i), 0x9000+uint32(i), p2))
	}
	// Noise: a MAD of another class, an unknown CM attribute, an RTU and
	// a DREQ for no connection.
	bad := rawReq(t, 1, 2, p1)
	bad[1] = 0x04 // management class SA
	unknown := rawReq(t, 1, 2, p1)
	unknown[16], unknown[17] = 0x00, 0x20
	var rtu, dreq [wire.MADLen]byte
	wire.EncodeCM(rtu[:], 7, &wire.CMRtu{LocalCommID: 0x1234, RemoteCommID: 0x5678})
	wire.EncodeCM(dreq[:], 8, &wire.CMDreq{LocalCommID: 0x1234, RemoteCommID: 0x5678, RemoteQPN: 0x55})
	mads = append(mads, bad, unknown, rtu[:], dreq[:])
	n.sendRaw(mads)
	if got := n.b.m.NumConns(); got != maxConns {
		t.Fatalf("%d connections after the flood, want %d", got, maxConns)
	}

	// The five accepted REQs' REPs go unanswered: retransmitted, then
	// given up with a timeout REJ. Then A disconnects the real one.
	n.Settle()
	if err := n.a.m.Disconnect(ca.conn); err != nil {
		t.Fatal(err)
	}
	n.Settle()
	n.checkClean(n.a, "A")
	n.checkClean(n.b, "B")

	const (
		pending  = maxSessions + 2 // accepted, never completed
		refusedS = flood - maxSessions
		refusedC = 5 - 2
		repRetx  = pending * 4 // testConfig().MaxRetries
		reqs     = 1 + flood + 5
	)
	want := Stats{
		MADsReceived: 1 + 1 + flood + 5 + 4 + 1, // REQ, RTU, flood, p2, noise, DREQ
		MADsSent:     1 + pending + repRetx + refusedS + refusedC + pending + 2,
		BadMADs:      2, Unmatched: 2,
		Requests: reqs, RejectsSent: refusedS + refusedC + pending,
		Retransmits: repRetx, Established: 1, Failed: pending, Disconnected: 1,
		EstablishedPassive: 1,
		Drops:              [NumDropReasons]uint64{DropMalformed: 2, DropUnmatched: 2},
		Refused:            [NumLimits]uint64{LimitSessions: refusedS, LimitConns: refusedC},
	}
	want.Listeners = 2
	want.Received[MsgREQ], want.Received[MsgRTU], want.Received[MsgDREQ] = reqs, 2, 2
	want.Sent[MsgREP] = 1 + pending + repRetx
	want.Sent[MsgREJ] = refusedS + refusedC + pending
	want.Sent[MsgDREP] = 2
	want.RetransmitsOf[MsgREP] = repRetx
	want.RejectsSentBy[RejConsumerDefined] = refusedS
	want.RejectsSentBy[RejNoResources] = refusedC
	want.RejectsSentBy[RejTimeout] = pending
	if got := n.b.m.Stats(); got != want {
		t.Errorf("passive stats\n got %+v\nwant %+v", got, want)
	}
	checkStats(t, n.a.m.Stats())
	checkStats(t, n.b.m.Stats())
	// The active side sent the flood past its Manager, which saw only
	// the answers: the REJs and REPs match nothing of its own.
	if st := n.a.m.Stats(); st.EstablishedActive != 1 || st.Sent[MsgREQ] != 1 || st.Sent[MsgDREQ] != 1 ||
		st.Received[MsgDREP] != 2 || st.Received[MsgREJ] != refusedS+refusedC+pending ||
		st.Drops[DropUnmatched] != refusedS+refusedC+pending+pending+repRetx+1 {
		t.Errorf("active stats %+v", st)
	}
}

func TestRejectReasonName(t *testing.T) {
	for _, tc := range []struct {
		r    uint16
		want string
	}{
		{RejNoResources, "no_resources"}, {RejInvalidServiceID, "invalid_service_id"},
		{RejConsumerDefined, "consumer_defined"}, {35, "vendor_option_not_supported"},
		{34, "reason_34"}, {63, "reason_63"}, {64, "other"}, {0, "other"},
	} {
		if got := RejectReasonName(tc.r); got != tc.want {
			t.Errorf("RejectReasonName(%d) = %q, want %q", tc.r, got, tc.want)
		}
	}
	for r := range uint16(NumRejReasons + 1) {
		want := false
		switch r {
		case RejNoResources, RejTimeout, RejUnsupported, RejInvalidServiceID, RejInvalidTransportType,
			RejStaleConn, RejInvalidMTU, RejConsumerDefined:
			want = true
		}
		if got := IsOwnRejectReason(r); got != want {
			t.Errorf("IsOwnRejectReason(%d) = %v, want %v", r, got, want)
		}
	}
	for _, tc := range []struct {
		attr uint16
		want Message
		ok   bool
	}{
		{wire.AttrReq, MsgREQ, true}, {wire.AttrMRA, MsgMRA, true}, {wire.AttrRej, MsgREJ, true},
		{wire.AttrRep, MsgREP, true}, {wire.AttrRTU, MsgRTU, true}, {wire.AttrDREQ, MsgDREQ, true},
		{wire.AttrDREP, MsgDREP, true}, {wire.AttrReq - 1, 0, false}, {wire.AttrDREP + 1, 0, false},
	} {
		if m, ok := messageOf(tc.attr); ok != tc.ok || ok && m != tc.want {
			t.Errorf("messageOf(%#x) = %v, %v; want %v, %v", tc.attr, m, ok, tc.want, tc.ok)
		}
	}
}
