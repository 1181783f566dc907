package cm

import (
	"strconv"
	"sync/atomic"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// Message names a CM message, the attribute of its MAD, in the per-message
// counters of Stats. The values follow the attribute IDs (wire.AttrReq
// ...).
type Message uint8

// CM messages.
const (
	MsgREQ Message = iota
	MsgMRA
	MsgREJ
	MsgREP
	MsgRTU
	MsgDREQ
	MsgDREP
	NumMessages
)

var messageNames = [NumMessages]string{"req", "mra", "rej", "rep", "rtu", "dreq", "drep"}

// String returns the message's name in lower case, as metric labels have
// it.
func (m Message) String() string { return enumName(messageNames[:], m, "message") }

// messageOf returns the Message of a CM attribute ID.
func messageOf(attr uint16) (Message, bool) {
	m := Message(attr - wire.AttrReq)
	return m, attr >= wire.AttrReq && m < NumMessages
}

// DropReason says why the Manager dropped a MAD.
type DropReason uint8

// MAD drop reasons.
const (
	// DropMalformed: too short, not a CM MAD, a method other than Send,
	// an unknown attribute, a message that does not decode, or a MAD from
	// the endpoint's own address.
	DropMalformed DropReason = iota
	// DropUnmatched: for no connection of ours (or a duplicate the
	// connection's state does not answer).
	DropUnmatched
	// DropInboxFull: one poll brought more MADs than the Manager keeps
	// (the endpoint's receive burst is smaller, so it takes a larger
	// roce.EndpointConfig.RxBurst).
	DropInboxFull
	// DropSendFailed: a MAD to send that the link did not take; a REQ,
	// REP or DREQ goes again at its retransmission timeout.
	DropSendFailed
	NumDropReasons
)

var dropNames = [NumDropReasons]string{"malformed", "unmatched", "inbox_full", "send_failed"}

// String returns the reason in snake case, as metric labels have it.
func (r DropReason) String() string { return enumName(dropNames[:], r, "drop") }

// Limit names what refused a connection request for lack of room.
type Limit uint8

// Limits.
const (
	// LimitSessions: the listener's AcceptFunc refused because its
	// service has as many sessions as it may (an error wrapping
	// roce.ErrBusy or ErrTooManyConns: the daemon's roce.max_sessions).
	LimitSessions Limit = iota
	// LimitConns: the Manager holds Config.MaxConns connections, in
	// any state, time-wait included.
	LimitConns
	NumLimits
)

var limitNames = [NumLimits]string{"max_sessions", "max_conns"}

// String returns the limit's configuration name.
func (l Limit) String() string { return enumName(limitNames[:], l, "limit") }

// NumRejReasons bounds the REJ reasons counted one by one: every reason the
// IBA defines (1..35) is below it; larger ones are counted under 0.
const NumRejReasons = 64

// rejReasonNames are Linux's enum ib_cm_rej_reason (IBA table 109) in
// snake case, without the IB_CM_REJ_ prefix.
var rejReasonNames = [...]string{
	1: "no_qp", 2: "no_eec", 3: "no_resources", 4: "timeout", 5: "unsupported",
	6: "invalid_comm_id", 7: "invalid_comm_instance", 8: "invalid_service_id",
	9: "invalid_transport_type", 10: "stale_conn", 11: "rdc_not_exist", 12: "invalid_gid",
	13: "invalid_lid", 14: "invalid_sl", 15: "invalid_traffic_class", 16: "invalid_hop_limit",
	17: "invalid_packet_rate", 18: "invalid_alt_gid", 19: "invalid_alt_lid", 20: "invalid_alt_sl",
	21: "invalid_alt_traffic_class", 22: "invalid_alt_hop_limit", 23: "invalid_alt_packet_rate",
	24: "port_cm_redirect", 25: "port_redirect", 26: "invalid_mtu",
	27: "insufficient_resp_resources", 28: "consumer_defined", 29: "invalid_rnr_retry",
	30: "duplicate_local_comm_id", 31: "invalid_class_version", 32: "invalid_flow_label",
	33: "invalid_alt_flow_label", 35: "vendor_option_not_supported",
}

// RejectReasonName returns the metric label of a REJ reason: the IBA name
// as Linux spells it (IB_CM_REJ_NO_RESOURCES: "no_resources"),
// "reason_N" for a code without one below NumRejReasons, and "other" for
// larger codes (0 included: the slot they are counted in).
func RejectReasonName(r uint16) string {
	switch {
	case int(r) < len(rejReasonNames) && rejReasonNames[r] != "":
		return rejReasonNames[r]
	case r == 0 || r >= NumRejReasons:
		return "other"
	}
	return "reason_" + strconv.Itoa(int(r))
}

// IsOwnRejectReason reports whether r is a REJ reason the Manager sends
// itself (an AcceptFunc's refusal included): the metrics export those
// reasons even while their counts are zero.
func IsOwnRejectReason(r uint16) bool {
	switch r {
	case RejNoResources, RejTimeout, RejUnsupported, RejInvalidServiceID, RejInvalidTransportType,
		RejStaleConn, RejInvalidMTU, RejConsumerDefined:
		return true
	}
	return false
}

// rejIndex is the slot of reason r in the per-reason REJ counters.
func rejIndex(r uint16) int {
	if r >= NumRejReasons {
		return 0
	}
	return int(r)
}

// Stats counts a Manager's work. Counters only grow.
type Stats struct {
	Conns        int    // connections in any state
	Listeners    int    // listened ports
	MADsReceived uint64 // CM MADs received
	MADsSent     uint64
	BadMADs      uint64 // MADs that failed validation: Drops[DropMalformed]
	Unmatched    uint64 // MADs for no known connection: Drops[DropUnmatched]
	Dropped      uint64 // MADs or events dropped because a poll brought too many
	SendErrors   uint64 // MADs the link did not take: Drops[DropSendFailed]
	Requests     uint64 // REQs received (duplicates excluded)
	DupRequests  uint64
	RejectsSent  uint64
	RejectsRcvd  uint64
	Retransmits  uint64 // REQ, REP and DREQ sent again at their timeout
	Established  uint64 // connections established, both roles
	Failed       uint64 // connection attempts that failed
	Disconnected uint64 // established connections that ended
	// DisconnectTimeouts counts the DREQs that got no DREP after their
	// retransmissions (a peer gone, or the QP failed on a dead peer
	// first): the connection ended all the same, through time-wait.
	DisconnectTimeouts uint64

	// Received counts CM MADs with a valid header by message; Sent those
	// the link took, retransmissions included.
	Received, Sent [NumMessages]uint64
	// RetransmitsOf splits Retransmits by message (REQ, REP, DREQ).
	RetransmitsOf [NumMessages]uint64
	// RejectsSentBy and RejectsRcvdBy split RejectsSent and RejectsRcvd
	// by reason code (see NumRejReasons, RejectReasonName).
	RejectsSentBy, RejectsRcvdBy [NumRejReasons]uint64
	Drops                        [NumDropReasons]uint64 // MADs dropped, by reason
	EventsDropped                uint64                 // QP events beyond what one poll keeps
	// Refused counts requests rejected for lack of room, by limit; they
	// are also among the REJs sent (consumer defined for LimitSessions,
	// no resources for LimitConns).
	Refused                               [NumLimits]uint64
	EstablishedPassive, EstablishedActive uint64
}

// counters are written by the polling goroutine and read by Stats on any
// other, hence atomics.
type counters struct {
	madRx, madTx, req, dupReq        atomic.Uint64
	failed, disconnected, eventsDrop atomic.Uint64
	dreqTimeouts                     atomic.Uint64
	established                      [2]atomic.Uint64 // passive, active
	rx, tx, retrans                  [NumMessages]atomic.Uint64
	rejTx, rejRx                     [NumRejReasons]atomic.Uint64
	drops                            [NumDropReasons]atomic.Uint64
	refused                          [NumLimits]atomic.Uint64
	conns, listeners                 atomic.Int64
}

func (c *counters) drop(r DropReason) { c.drops[r].Add(1) }

// Stats returns the Manager's counters; it may be called from any
// goroutine.
func (m *Manager) Stats() Stats {
	c := &m.cnt
	s := Stats{
		Conns: int(c.conns.Load()), Listeners: int(c.listeners.Load()),
		MADsReceived: c.madRx.Load(), MADsSent: c.madTx.Load(),
		Requests: c.req.Load(), DupRequests: c.dupReq.Load(),
		Failed: c.failed.Load(), Disconnected: c.disconnected.Load(), DisconnectTimeouts: c.dreqTimeouts.Load(),
		EventsDropped:      c.eventsDrop.Load(),
		EstablishedPassive: c.established[0].Load(), EstablishedActive: c.established[1].Load(),
	}
	s.Established = s.EstablishedPassive + s.EstablishedActive
	for i := range NumMessages {
		s.Received[i], s.Sent[i] = c.rx[i].Load(), c.tx[i].Load()
		s.RetransmitsOf[i] = c.retrans[i].Load()
		s.Retransmits += s.RetransmitsOf[i]
	}
	for i := range NumRejReasons {
		s.RejectsSentBy[i], s.RejectsRcvdBy[i] = c.rejTx[i].Load(), c.rejRx[i].Load()
		s.RejectsSent += s.RejectsSentBy[i]
		s.RejectsRcvd += s.RejectsRcvdBy[i]
	}
	for i := range NumDropReasons {
		s.Drops[i] = c.drops[i].Load()
	}
	for i := range NumLimits {
		s.Refused[i] = c.refused[i].Load()
	}
	s.BadMADs, s.Unmatched, s.SendErrors = s.Drops[DropMalformed], s.Drops[DropUnmatched], s.Drops[DropSendFailed]
	s.Dropped = s.Drops[DropInboxFull] + s.EventsDropped
	return s
}

// enumName returns the name of v in names, or kind(v) for a value names
// does not name.
func enumName[T ~uint8](names []string, v T, kind string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return kind + "(" + strconv.Itoa(int(v)) + ")"
}
