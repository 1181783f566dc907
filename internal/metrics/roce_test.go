package metrics

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest/cmtest"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// Every counter of an endpoint and of a QP, each with its own value, is
// exported under its name, help and labels.
func TestRoCECollector(t *testing.T) {
	q := roce.QPStats{QPN: 17, State: roce.QPStateRTS, TxPackets: 1, TxBytes: 2, RxPackets: 3, RxBytes: 4,
		Retransmits: 5, Timeouts: 6, RNRNaksSent: 7, RNRNaksReceived: 8, RNRSilentDrops: 9,
		ICRCErrors: 18, Dropped: 19, Duplicates: 20, OutOfSequence: 21, StaleResponses: 22,
		SendCQDepth: 23, RecvCQDepth: 24, NakRetransmits: 27, TailProbes: 28, RetryTimeouts: 29,
		IdleProbes: 30}
	q.NaksSent[roce.NakSequence], q.NaksSent[roce.NakInvalidRequest] = 10, 11
	q.NaksSent[roce.NakRemoteAccess], q.NaksSent[roce.NakRemoteOperational] = 12, 13
	q.NaksReceived[roce.NakSequence], q.NaksReceived[roce.NakInvalidRequest] = 14, 15
	q.NaksReceived[roce.NakRemoteAccess], q.NaksReceived[roce.NakRemoteOperational] = 16, 17
	c := newRoCECollector([]roceSource{{
		addr: "10.0.0.2",
		stats: func() roce.EndpointStats {
			return roce.EndpointStats{RxFrames: 100, TxFrames: 101, ICRCErrors: 102, Malformed: 103, NotLocal: 104,
				NoQP: 105, Unsupported: 106, TooManyVLANs: 107, NotRoCE: 108, GSIReceived: 109, GSISent: 110, TxBusy: 111,
				RNRNaksSent: 112, RNRSilentDrops: 113, SequenceNaksSent: 114, IdleProbes: 115, DeadPeers: 116, SequenceNakResends: 117, SpuriousTimeouts: 118}
		},
		eachQ: func(f func(roce.QPStats)) { f(q) },
		session: func(qpn uint32) session.Stats {
			if qpn != q.QPN {
				t.Errorf("session figures asked for qp %d", qpn)
			}
			return session.Stats{SendBuffersInUse: 25, SendBuffers: 26}
		},
	}})
	checkExposition(t, c, `
# HELP cephdpdkd_roce_bytes_total RoCE frame bytes per QP and direction.
# TYPE cephdpdkd_roce_bytes_total counter
cephdpdkd_roce_bytes_total{direction="rx",endpoint="10.0.0.2",qpn="17"} 4
cephdpdkd_roce_bytes_total{direction="tx",endpoint="10.0.0.2",qpn="17"} 2
# HELP cephdpdkd_roce_cq_depth Completions waiting in the QP's completion queues.
# TYPE cephdpdkd_roce_cq_depth gauge
cephdpdkd_roce_cq_depth{endpoint="10.0.0.2",qpn="17",queue="recv"} 24
cephdpdkd_roce_cq_depth{endpoint="10.0.0.2",qpn="17",queue="send"} 23
# HELP cephdpdkd_roce_duplicate_requests_total Duplicate requests received and acknowledged again.
# TYPE cephdpdkd_roce_duplicate_requests_total counter
cephdpdkd_roce_duplicate_requests_total{endpoint="10.0.0.2",qpn="17"} 20
# HELP cephdpdkd_roce_endpoint_dead_peers_total QPs that gave up on a peer that answered nothing, requests or idle probes, for their whole retry budget, those destroyed included.
# TYPE cephdpdkd_roce_endpoint_dead_peers_total counter
cephdpdkd_roce_endpoint_dead_peers_total{endpoint="10.0.0.2"} 116
# HELP cephdpdkd_roce_endpoint_frames_total Frames received and transmitted by the endpoint.
# TYPE cephdpdkd_roce_endpoint_frames_total counter
cephdpdkd_roce_endpoint_frames_total{direction="rx",endpoint="10.0.0.2"} 100
cephdpdkd_roce_endpoint_frames_total{direction="tx",endpoint="10.0.0.2"} 101
# HELP cephdpdkd_roce_endpoint_idle_probes_total Idle probes sent by the endpoint's QPs, those destroyed included.
# TYPE cephdpdkd_roce_endpoint_idle_probes_total counter
cephdpdkd_roce_endpoint_idle_probes_total{endpoint="10.0.0.2"} 115
# HELP cephdpdkd_roce_endpoint_rnr_naks_sent_total RNR NAKs sent by the endpoint's QPs, those destroyed included.
# TYPE cephdpdkd_roce_endpoint_rnr_naks_sent_total counter
cephdpdkd_roce_endpoint_rnr_naks_sent_total{endpoint="10.0.0.2"} 112
# HELP cephdpdkd_roce_endpoint_rnr_silent_drops_total Requests the endpoint's QPs dropped unanswered because no receive was posted, those destroyed included.
# TYPE cephdpdkd_roce_endpoint_rnr_silent_drops_total counter
cephdpdkd_roce_endpoint_rnr_silent_drops_total{endpoint="10.0.0.2"} 113
# HELP cephdpdkd_roce_endpoint_rx_dropped_total Received frames the endpoint dropped, by reason.
# TYPE cephdpdkd_roce_endpoint_rx_dropped_total counter
cephdpdkd_roce_endpoint_rx_dropped_total{endpoint="10.0.0.2",reason="icrc"} 102
cephdpdkd_roce_endpoint_rx_dropped_total{endpoint="10.0.0.2",reason="malformed"} 103
cephdpdkd_roce_endpoint_rx_dropped_total{endpoint="10.0.0.2",reason="no_qp"} 105
cephdpdkd_roce_endpoint_rx_dropped_total{endpoint="10.0.0.2",reason="not_local"} 104
cephdpdkd_roce_endpoint_rx_dropped_total{endpoint="10.0.0.2",reason="not_roce"} 108
cephdpdkd_roce_endpoint_rx_dropped_total{endpoint="10.0.0.2",reason="too_many_vlans"} 107
cephdpdkd_roce_endpoint_rx_dropped_total{endpoint="10.0.0.2",reason="unsupported"} 106
# HELP cephdpdkd_roce_endpoint_sequence_nak_resends_total Sequence NAKs among endpoint_sequence_naks_sent_total that went again because what the first asked for did not come within a few round trips (a lost NAK), those of destroyed QPs included.
# TYPE cephdpdkd_roce_endpoint_sequence_nak_resends_total counter
cephdpdkd_roce_endpoint_sequence_nak_resends_total{endpoint="10.0.0.2"} 117
# HELP cephdpdkd_roce_endpoint_spurious_timeouts_total Adaptive retransmit timeouts of the endpoint's QPs that proved spurious (the one packet resent was answered with an acknowledgement of the packets after it: a late acknowledgement, not a loss), those of destroyed QPs included.
# TYPE cephdpdkd_roce_endpoint_spurious_timeouts_total counter
cephdpdkd_roce_endpoint_spurious_timeouts_total{endpoint="10.0.0.2"} 118
# HELP cephdpdkd_roce_endpoint_sequence_naks_sent_total PSN sequence error NAKs sent by the endpoint's QPs, those destroyed included.
# TYPE cephdpdkd_roce_endpoint_sequence_naks_sent_total counter
cephdpdkd_roce_endpoint_sequence_naks_sent_total{endpoint="10.0.0.2"} 114
# HELP cephdpdkd_roce_fast_retransmits_total Retransmissions started before any timer: go-back-N rounds a sequence NAK or a gap in READ responses started (nak), and tail-loss probes (probe).
# TYPE cephdpdkd_roce_fast_retransmits_total counter
cephdpdkd_roce_fast_retransmits_total{endpoint="10.0.0.2",qpn="17",reason="nak"} 27
cephdpdkd_roce_fast_retransmits_total{endpoint="10.0.0.2",qpn="17",reason="probe"} 28
# HELP cephdpdkd_roce_icrc_errors_total Frames for the QP dropped for a bad ICRC.
# TYPE cephdpdkd_roce_icrc_errors_total counter
cephdpdkd_roce_icrc_errors_total{endpoint="10.0.0.2",qpn="17"} 18
# HELP cephdpdkd_roce_idle_probes_total Idle probes sent (duplicate zero-length SENDs that check an idle connection's peer is alive), resends included.
# TYPE cephdpdkd_roce_idle_probes_total counter
cephdpdkd_roce_idle_probes_total{endpoint="10.0.0.2",qpn="17"} 30
# HELP cephdpdkd_roce_naks_total NAKs sent and received, by code.
# TYPE cephdpdkd_roce_naks_total counter
cephdpdkd_roce_naks_total{code="invalid_request",direction="received",endpoint="10.0.0.2",qpn="17"} 15
cephdpdkd_roce_naks_total{code="invalid_request",direction="sent",endpoint="10.0.0.2",qpn="17"} 11
cephdpdkd_roce_naks_total{code="psn_sequence",direction="received",endpoint="10.0.0.2",qpn="17"} 14
cephdpdkd_roce_naks_total{code="psn_sequence",direction="sent",endpoint="10.0.0.2",qpn="17"} 10
cephdpdkd_roce_naks_total{code="remote_access",direction="received",endpoint="10.0.0.2",qpn="17"} 16
cephdpdkd_roce_naks_total{code="remote_access",direction="sent",endpoint="10.0.0.2",qpn="17"} 12
cephdpdkd_roce_naks_total{code="remote_operational",direction="received",endpoint="10.0.0.2",qpn="17"} 17
cephdpdkd_roce_naks_total{code="remote_operational",direction="sent",endpoint="10.0.0.2",qpn="17"} 13
# HELP cephdpdkd_roce_out_of_sequence_total Requests received ahead of the expected PSN.
# TYPE cephdpdkd_roce_out_of_sequence_total counter
cephdpdkd_roce_out_of_sequence_total{endpoint="10.0.0.2",qpn="17"} 21
# HELP cephdpdkd_roce_packets_total RoCE packets per QP and direction.
# TYPE cephdpdkd_roce_packets_total counter
cephdpdkd_roce_packets_total{direction="rx",endpoint="10.0.0.2",qpn="17"} 3
cephdpdkd_roce_packets_total{direction="tx",endpoint="10.0.0.2",qpn="17"} 1
# HELP cephdpdkd_roce_qp_dropped_total Frames for the QP dropped for its state, source address or P_Key.
# TYPE cephdpdkd_roce_qp_dropped_total counter
cephdpdkd_roce_qp_dropped_total{endpoint="10.0.0.2",qpn="17"} 19
# HELP cephdpdkd_roce_qp_state QP state: 0 RESET, 1 INIT, 2 RTR, 3 RTS, 4 ERROR.
# TYPE cephdpdkd_roce_qp_state gauge
cephdpdkd_roce_qp_state{endpoint="10.0.0.2",qpn="17"} 3
# HELP cephdpdkd_roce_retransmits_total Request packets sent again (go-back-N).
# TYPE cephdpdkd_roce_retransmits_total counter
cephdpdkd_roce_retransmits_total{endpoint="10.0.0.2",qpn="17"} 5
# HELP cephdpdkd_roce_retry_timeouts_total Timeouts that were a whole transport timeout without progress, each spending one of the QP's retries; timeouts_total counts the adaptive timer's too.
# TYPE cephdpdkd_roce_retry_timeouts_total counter
cephdpdkd_roce_retry_timeouts_total{endpoint="10.0.0.2",qpn="17"} 29
# HELP cephdpdkd_roce_rnr_naks_total RNR NAKs sent and received.
# TYPE cephdpdkd_roce_rnr_naks_total counter
cephdpdkd_roce_rnr_naks_total{direction="received",endpoint="10.0.0.2",qpn="17"} 8
cephdpdkd_roce_rnr_naks_total{direction="sent",endpoint="10.0.0.2",qpn="17"} 7
# HELP cephdpdkd_roce_rnr_silent_drops_total Requests dropped unanswered because no receive was posted, on QPs that never send RNR NAKs (bridged Ceph peers).
# TYPE cephdpdkd_roce_rnr_silent_drops_total counter
cephdpdkd_roce_rnr_silent_drops_total{endpoint="10.0.0.2",qpn="17"} 9
# HELP cephdpdkd_roce_send_buffers Registered session send buffers.
# TYPE cephdpdkd_roce_send_buffers gauge
cephdpdkd_roce_send_buffers{endpoint="10.0.0.2",qpn="17"} 26
# HELP cephdpdkd_roce_send_buffers_in_use Session send buffers posted and not yet reaped.
# TYPE cephdpdkd_roce_send_buffers_in_use gauge
cephdpdkd_roce_send_buffers_in_use{endpoint="10.0.0.2",qpn="17"} 25
# HELP cephdpdkd_roce_stale_responses_total Responses for PSNs already acknowledged.
# TYPE cephdpdkd_roce_stale_responses_total counter
cephdpdkd_roce_stale_responses_total{endpoint="10.0.0.2",qpn="17"} 22
# HELP cephdpdkd_roce_timeouts_total Retransmit timer expiries.
# TYPE cephdpdkd_roce_timeouts_total counter
cephdpdkd_roce_timeouts_total{endpoint="10.0.0.2",qpn="17"} 6
`)
}

func TestTxRefusedCollector(t *testing.T) {
	var refused atomic.Uint64
	c := NewTxRefusedCollector("10.78.0.2", &refused)
	refused.Add(3)
	checkExposition(t, c, `
# HELP cephdpdkd_roce_endpoint_tx_refused_total Frames the port's TX queue refused (full, or no mbuf to copy into). The endpoint keeps QP frames and offers them again; a refused CM MAD or ARP frame is retransmitted by its protocol.
# TYPE cephdpdkd_roce_endpoint_tx_refused_total counter
cephdpdkd_roce_endpoint_tx_refused_total{endpoint="10.78.0.2"} 3
`)
}

// family returns the value of the series of name whose labels include
// labels, and whether there is one.
func family(fams []*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

// The collectors over real endpoints, connection managers and an echo
// service: scraped on another goroutine while a lossy roce-ping runs
// (run with -race), then checked against the snapshots once the poll
// loop is still. A QP that is gone is no longer exported.
func TestRoCECollectorsLive(t *testing.T) {
	p := newRocePair(t, memlink.Config{Seed: 5, Loss: 0.02, Reorder: 0.02})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewRoCECollector(nil, p.Srv, p.Cli), NewCMCollector(p.SrvM, p.CliM),
		NewAppCollector(map[string]AppSource{"7471": p.echo}))
	stop, scrapes, started := make(chan struct{}), make(chan int), make(chan struct{})
	go func() {
		n := 0
		for {
			if n == 1 {
				close(started)
			}
			select {
			case <-stop:
				scrapes <- n
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	done := p.ping(t, 200)
	// The scraper must run while the endpoints work: on a loaded machine
	// it may not have been scheduled yet.
	<-started
	p.run(func() bool { return p.echo.Stats().MessagesIn >= 50 })
	close(stop)
	if n := <-scrapes; n == 0 {
		t.Error("never scraped")
	}

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, labels map[string]string, want float64) {
		t.Helper()
		if got, ok := family(fams, name, labels); !ok || got != want {
			t.Errorf("%s%v = %v (found %v), want %v", name, labels, got, ok, want)
		}
	}
	for _, e := range []*roce.Endpoint{p.Srv, p.Cli} {
		ep := e.IP().String()
		es := e.Stats()
		check("cephdpdkd_roce_endpoint_frames_total", map[string]string{"endpoint": ep, "direction": "rx"}, float64(es.RxFrames))
		check("cephdpdkd_roce_endpoint_frames_total", map[string]string{"endpoint": ep, "direction": "tx"}, float64(es.TxFrames))
		check("cephdpdkd_roce_endpoint_sequence_naks_sent_total", map[string]string{"endpoint": ep}, float64(es.SequenceNaksSent))
		check("cephdpdkd_roce_endpoint_rnr_silent_drops_total", map[string]string{"endpoint": ep}, float64(es.RNRSilentDrops))
		check("cephdpdkd_roce_endpoint_rnr_naks_sent_total", map[string]string{"endpoint": ep}, float64(es.RNRNaksSent))
		check("cephdpdkd_roce_endpoint_idle_probes_total", map[string]string{"endpoint": ep}, float64(es.IdleProbes))
		check("cephdpdkd_roce_endpoint_dead_peers_total", map[string]string{"endpoint": ep}, float64(es.DeadPeers))
		qps := 0
		e.EachQPStats(func(s roce.QPStats) {
			qps++
			l := func(kv ...string) map[string]string {
				m := map[string]string{"endpoint": ep, "qpn": strconv.Itoa(int(s.QPN))}
				for i := 0; i < len(kv); i += 2 {
					m[kv[i]] = kv[i+1]
				}
				return m
			}
			check("cephdpdkd_roce_packets_total", l("direction", "tx"), float64(s.TxPackets))
			check("cephdpdkd_roce_packets_total", l("direction", "rx"), float64(s.RxPackets))
			check("cephdpdkd_roce_bytes_total", l("direction", "tx"), float64(s.TxBytes))
			check("cephdpdkd_roce_retransmits_total", l(), float64(s.Retransmits))
			check("cephdpdkd_roce_naks_total", l("direction", "sent", "code", "psn_sequence"), float64(s.NaksSent[roce.NakSequence]))
			check("cephdpdkd_roce_cq_depth", l("queue", "recv"), float64(s.RecvCQDepth))
			check("cephdpdkd_roce_qp_state", l(), float64(s.State))
			check("cephdpdkd_roce_send_buffers", l(), 0) // no sessions here
		})
		// The connection's QP at least.
		if qps == 0 || qps != e.NumQPs() {
			t.Errorf("%s: %d QPs visited, %d held", ep, qps, e.NumQPs())
		}
	}
	srv, cli := p.Srv.IP().String(), p.Cli.IP().String()
	check("cephdpdkd_roce_cm_established_total", map[string]string{"endpoint": srv, "role": "passive"}, 1)
	check("cephdpdkd_roce_cm_established_total", map[string]string{"endpoint": cli, "role": "active"}, 1)
	check("cephdpdkd_roce_cm_connections", map[string]string{"endpoint": srv}, float64(p.SrvM.NumConns()))
	check("cephdpdkd_roce_app_connections_total", map[string]string{"service": "7471", "event": "accepted"}, 1)
	check("cephdpdkd_roce_app_messages_total", map[string]string{"service": "7471", "direction": "in"}, float64(p.echo.Stats().MessagesIn))

	p.run(func() bool { return len(done) == 1 })
	if r := <-done; r.Err != nil || r.Received != 200 {
		t.Fatalf("ping: %+v", r)
	}
	p.run(func() bool { return p.CliM.NumConns() == 0 && p.Cli.NumQPs() == 0 })
	fams, _ = reg.Gather()
	var qpns []string
	for _, f := range fams {
		if f.GetName() != "cephdpdkd_roce_qp_state" {
			continue
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "endpoint" && l.GetValue() == cli {
					qpns = append(qpns, m.String())
				}
			}
		}
	}
	if len(qpns) != 0 {
		t.Errorf("client QPs exported after the disconnect: %v", qpns)
	}
	// The endpoint's sums of its QPs' counters stay.
	es := p.Cli.Stats()
	check("cephdpdkd_roce_endpoint_sequence_naks_sent_total", map[string]string{"endpoint": cli}, float64(es.SequenceNaksSent))
	check("cephdpdkd_roce_endpoint_rnr_naks_sent_total", map[string]string{"endpoint": cli}, float64(es.RNRNaksSent))
}

// The send-buffer gauges of QPs with sessions come from the sessions'
// registry, keyed by endpoint and QP number (both endpoints here number
// their QPs alike); a QP without a session exports zeros.
func TestRoCECollectorSessions(t *testing.T) {
	n := cmtest.New(t, cmtest.Config{})
	eps := [2]*roce.Endpoint{n.Srv, n.Cli}
	var sessions session.Registry
	cfg := session.DefaultConfig()
	cfg.BufferSize, cfg.SendBuffers, cfg.RecvBuffers = 4096, 5, 4
	cfg.Registry = &sessions
	var qps [2]*roce.QP
	var ss [2]*session.Session
	for i, e := range eps {
		var err error
		if qps[i], err = session.NewQP(e.NewPD(), cfg); err != nil {
			t.Fatal(err)
		}
		if ss[i], err = session.New(qps[i], cfg); err != nil {
			t.Fatal(err)
		}
	}
	if qps[0].QPN() != qps[1].QPN() {
		t.Fatalf("QPNs %d and %d: the test needs one number on both endpoints", qps[0].QPN(), qps[1].QPN())
	}
	for i, peer := range []struct {
		mac [6]byte
		ip  netip.Addr
	}{{macCli, ipCli}, {macSrv, ipSrv}} {
		if err := qps[i].Modify(cfg.RTRAttr(roce.AddressVector{DstMAC: peer.mac, DstIP: peer.ip}, qps[1-i].QPN(), 100)); err != nil {
			t.Fatal(err)
		}
		if err := qps[i].Modify(cfg.RTSAttr(100)); err != nil {
			t.Fatal(err)
		}
	}
	if k, err := ss[0].Send(make([]byte, 3*4096)); k != 3*4096 || err != nil {
		t.Fatal(k, err)
	}
	// A QP without a session on the server.
	cq, err := eps[0].NewCQ(roce.CQConfig{Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := eps[0].NewPD().CreateQP(&roce.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: roce.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	if err != nil {
		t.Fatal(err)
	}
	c := NewRoCECollector(&sessions, eps[:]...)
	srv, cli := ipSrv.String(), ipCli.String()
	q, r := strconv.Itoa(int(qps[0].QPN())), strconv.Itoa(int(raw.QPN()))
	want := func(total, inUse [3]int) string {
		return fmt.Sprintf(`
# HELP cephdpdkd_roce_send_buffers Registered session send buffers.
# TYPE cephdpdkd_roce_send_buffers gauge
cephdpdkd_roce_send_buffers{endpoint=%[1]q,qpn=%[3]q} %[5]d
cephdpdkd_roce_send_buffers{endpoint=%[1]q,qpn=%[4]q} %[6]d
cephdpdkd_roce_send_buffers{endpoint=%[2]q,qpn=%[3]q} %[7]d
# HELP cephdpdkd_roce_send_buffers_in_use Session send buffers posted and not yet reaped.
# TYPE cephdpdkd_roce_send_buffers_in_use gauge
cephdpdkd_roce_send_buffers_in_use{endpoint=%[1]q,qpn=%[3]q} %[8]d
cephdpdkd_roce_send_buffers_in_use{endpoint=%[1]q,qpn=%[4]q} %[9]d
cephdpdkd_roce_send_buffers_in_use{endpoint=%[2]q,qpn=%[3]q} %[10]d
`, srv, cli, q, r, total[0], total[1], total[2], inUse[0], inUse[1], inUse[2])
	}
	names := []string{"cephdpdkd_roce_send_buffers", "cephdpdkd_roce_send_buffers_in_use"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want([3]int{5, 0, 5}, [3]int{3, 0, 0})), names...); err != nil {
		t.Error(err)
	}
	// Released sessions export zeros while their QPs live on.
	for _, s := range ss {
		s.QP().Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want([3]int{}, [3]int{})), names...); err != nil {
		t.Error(err)
	}
}
