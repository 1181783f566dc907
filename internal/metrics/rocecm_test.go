package metrics

import (
	"fmt"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/cm"
)

// TestCMCollector exports the passive side's counters after roce/cm's
// TestRequestFloodCounters: a listener flooded with 5000 requests beyond
// its session limit and the manager's connection table, amid malformed
// and unmatched MADs and one real connection. The Stats are those that
// test checks; this one checks how they are exported.
func TestCMCollector(t *testing.T) {
	const (
		flood       = 5000
		maxSessions = 3
		pending     = maxSessions + 2 // accepted, never completed
		refusedS    = flood - maxSessions
		refusedC    = 5 - 2
		repRetx     = pending * 4
		reqs        = 1 + flood + 5
	)
	s := cm.Stats{
		MADsReceived: 1 + 1 + flood + 5 + 4 + 1,
		MADsSent:     1 + pending + repRetx + refusedS + refusedC + pending + 2,
		BadMADs:      2, Unmatched: 2,
		Requests: reqs, RejectsSent: refusedS + refusedC + pending,
		Retransmits: repRetx, Established: 1, Failed: pending, Disconnected: 1,
		EstablishedPassive: 1,
		Drops:              [cm.NumDropReasons]uint64{cm.DropMalformed: 2, cm.DropUnmatched: 2},
		Refused:            [cm.NumLimits]uint64{cm.LimitSessions: refusedS, cm.LimitConns: refusedC},
		Listeners:          2,
	}
	s.Received[cm.MsgREQ], s.Received[cm.MsgRTU], s.Received[cm.MsgDREQ] = reqs, 2, 2
	s.Sent[cm.MsgREP] = 1 + pending + repRetx
	s.Sent[cm.MsgREJ] = refusedS + refusedC + pending
	s.Sent[cm.MsgDREP] = 2
	s.RetransmitsOf[cm.MsgREP] = repRetx
	s.RejectsSentBy[cm.RejConsumerDefined] = refusedS
	s.RejectsSentBy[cm.RejNoResources] = refusedC
	s.RejectsSentBy[cm.RejTimeout] = pending

	exp := fmt.Sprintf(`
# HELP cephdpdkd_roce_cm_connections Connections held, in any state, time-wait included.
# TYPE cephdpdkd_roce_cm_connections gauge
cephdpdkd_roce_cm_connections{endpoint="10.0.0.2"} 0
# HELP cephdpdkd_roce_cm_disconnect_timeouts_total DREQs that got no DREP after their retransmissions (the peer gone): the connection ended all the same.
# TYPE cephdpdkd_roce_cm_disconnect_timeouts_total counter
cephdpdkd_roce_cm_disconnect_timeouts_total{endpoint="10.0.0.2"} 0
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
	c := newCMCollector([]cmSource{{addr: "10.0.0.2", stats: func() cm.Stats { return s }}})
	checkExposition(t, c, exp)
}

// REJ reasons the manager does not send itself are exported once seen,
// under their IBA names, "reason_N" without one, and "other" beyond.
func TestCMCollectorOtherRejects(t *testing.T) {
	var s cm.Stats
	s.RejectsRcvdBy[cm.RejNoQP] = 2
	s.RejectsRcvdBy[34] = 1
	s.RejectsRcvdBy[0] = 5 // where codes of 64 and above are counted
	c := newCMCollector([]cmSource{{addr: "10.0.0.2", stats: func() cm.Stats { return s }}})
	checkExposition(t, c, `
# HELP cephdpdkd_roce_cm_rejects_total REJs sent, and received for a connection of ours, by reason.
# TYPE cephdpdkd_roce_cm_rejects_total counter
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="consumer_defined"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="invalid_mtu"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="invalid_service_id"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="invalid_transport_type"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="no_qp"} 2
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="no_resources"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="other"} 5
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="reason_34"} 1
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="stale_conn"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="timeout"} 0
cephdpdkd_roce_cm_rejects_total{direction="received",endpoint="10.0.0.2",reason="unsupported"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="consumer_defined"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="invalid_mtu"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="invalid_service_id"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="invalid_transport_type"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="no_resources"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="stale_conn"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="timeout"} 0
cephdpdkd_roce_cm_rejects_total{direction="sent",endpoint="10.0.0.2",reason="unsupported"} 0
`, "cephdpdkd_roce_cm_rejects_total")
}
