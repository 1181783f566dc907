package cm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

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
	n.t.Helper()
	av := roce.AddressVector{DstMAC: macB, DstIP: ipB}
	for i, mad := range mads {
		if i%256 == 255 {
			n.quiesce()
		}
		if err := n.a.ep.SendGSI(&av, mad); err != nil {
			n.t.Fatalf("MAD %d: %v", i, err)
		}
	}
	n.quiesce()
}

// TestRequestFloodCounters floods a listener with connection requests
// beyond its session limit and the manager's connection table, amid
// malformed and unmatched MADs and one real connection, and checks every
// counter of the passive side, in Stats and as the collector exports them.
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
	n.run(1_000_000, func() bool { return ca.connected > 0 && len(n.b.apps) == 1 && n.b.apps[0].connected > 0 })

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
	n.settle()
	if err := n.a.m.Disconnect(ca.conn); err != nil {
		t.Fatal(err)
	}
	n.settle()
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

	exp := fmt.Sprintf(`
# HELP cephdpdkd_roce_cm_connections Connections held, in any state, time-wait included.
# TYPE cephdpdkd_roce_cm_connections gauge
cephdpdkd_roce_cm_connections{endpoint="10.0.0.2"} 0
# HELP cephdpdkd_roce_cm_disconnected_total Established connections that ended.
# TYPE cephdpdkd_roce_cm_disconnected_total counter
cephdpdkd_roce_cm_disconnected_total{endpoint="10.0.0.2"} 1
# HELP cephdpdkd_roce_cm_duplicate_requests_total REQs received again for a connection in progress or closing.
# TYPE cephdpdkd_roce_cm_duplicate_requests_total counter
cephdpdkd_roce_cm_duplicate_requests_total{endpoint="10.0.0.2"} 0
# HELP cephdpdkd_roce_cm_established_total Connections established.
# TYPE cephdpdkd_roce_cm_established_total counter
cephdpdkd_roce_cm_established_total{endpoint="10.0.0.2",role="active"} 0
cephdpdkd_roce_cm_established_total{endpoint="10.0.0.2",role="passive"} 1
# HELP cephdpdkd_roce_cm_events_dropped_total QP events beyond what one poll keeps (the periodic QP check catches up).
# TYPE cephdpdkd_roce_cm_events_dropped_total counter
cephdpdkd_roce_cm_events_dropped_total{endpoint="10.0.0.2"} 0
# HELP cephdpdkd_roce_cm_failed_total Connection attempts that failed after the request was taken on.
# TYPE cephdpdkd_roce_cm_failed_total counter
cephdpdkd_roce_cm_failed_total{endpoint="10.0.0.2"} %[1]d
# HELP cephdpdkd_roce_cm_mads_dropped_total CM MADs dropped, by reason.
# TYPE cephdpdkd_roce_cm_mads_dropped_total counter
cephdpdkd_roce_cm_mads_dropped_total{endpoint="10.0.0.2",reason="inbox_full"} 0
cephdpdkd_roce_cm_mads_dropped_total{endpoint="10.0.0.2",reason="malformed"} 2
cephdpdkd_roce_cm_mads_dropped_total{endpoint="10.0.0.2",reason="send_failed"} 0
cephdpdkd_roce_cm_mads_dropped_total{endpoint="10.0.0.2",reason="unmatched"} 2
# HELP cephdpdkd_roce_cm_messages_total CM MADs received (valid header) and sent (taken by the link, retransmissions included), by message.
# TYPE cephdpdkd_roce_cm_messages_total counter
cephdpdkd_roce_cm_messages_total{direction="received",endpoint="10.0.0.2",message="drep"} 0
cephdpdkd_roce_cm_messages_total{direction="received",endpoint="10.0.0.2",message="dreq"} 2
cephdpdkd_roce_cm_messages_total{direction="received",endpoint="10.0.0.2",message="mra"} 0
cephdpdkd_roce_cm_messages_total{direction="received",endpoint="10.0.0.2",message="rej"} 0
cephdpdkd_roce_cm_messages_total{direction="received",endpoint="10.0.0.2",message="rep"} 0
cephdpdkd_roce_cm_messages_total{direction="received",endpoint="10.0.0.2",message="req"} %[2]d
cephdpdkd_roce_cm_messages_total{direction="received",endpoint="10.0.0.2",message="rtu"} 2
cephdpdkd_roce_cm_messages_total{direction="sent",endpoint="10.0.0.2",message="drep"} 2
cephdpdkd_roce_cm_messages_total{direction="sent",endpoint="10.0.0.2",message="dreq"} 0
cephdpdkd_roce_cm_messages_total{direction="sent",endpoint="10.0.0.2",message="mra"} 0
cephdpdkd_roce_cm_messages_total{direction="sent",endpoint="10.0.0.2",message="rej"} %[3]d
cephdpdkd_roce_cm_messages_total{direction="sent",endpoint="10.0.0.2",message="rep"} %[4]d
cephdpdkd_roce_cm_messages_total{direction="sent",endpoint="10.0.0.2",message="req"} 0
cephdpdkd_roce_cm_messages_total{direction="sent",endpoint="10.0.0.2",message="rtu"} 0
# HELP cephdpdkd_roce_cm_refused_total Connection requests rejected for lack of room: the service's max_sessions, or the manager's connection table.
# TYPE cephdpdkd_roce_cm_refused_total counter
cephdpdkd_roce_cm_refused_total{endpoint="10.0.0.2",limit="max_conns"} %[5]d
cephdpdkd_roce_cm_refused_total{endpoint="10.0.0.2",limit="max_sessions"} %[6]d
# HELP cephdpdkd_roce_cm_rejects_total REJs sent, and received for a connection of ours, by reason.
# TYPE cephdpdkd_roce_cm_rejects_total counter
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="consumer_defined"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="invalid_mtu"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="invalid_service_id"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="invalid_transport_type"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="no_resources"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="stale_conn"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="timeout"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="unsupported"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="consumer_defined"} %[6]d
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="invalid_mtu"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="invalid_service_id"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="invalid_transport_type"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="no_resources"} %[5]d
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="stale_conn"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="timeout"} %[1]d
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="unsupported"} 0
# HELP cephdpdkd_roce_cm_retransmits_total REQs, REPs and DREQs sent again after their retransmission timeout.
# TYPE cephdpdkd_roce_cm_retransmits_total counter
cephdpdkd_roce_cm_retransmits_total{endpoint="10.0.0.2",message="dreq"} 0
cephdpdkd_roce_cm_retransmits_total{endpoint="10.0.0.2",message="rep"} %[7]d
cephdpdkd_roce_cm_retransmits_total{endpoint="10.0.0.2",message="req"} 0
`, pending, reqs, refusedS+refusedC+pending, 1+pending+repRetx, refusedC, refusedS, repRetx)
	c := NewCollector(n.b.m)
	if err := testutil.CollectAndCompare(c, strings.NewReader(exp)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
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
