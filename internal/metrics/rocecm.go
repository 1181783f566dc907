package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cephdpdkd/cephdpdkd/roce/cm"
)

// CMCollector exports RoCE connection managers' counters as
// cephdpdkd_roce_cm_* metrics, labelled by endpoint address like
// RoCECollector's. It reads only cm.Manager.Stats, so a Prometheus
// handler may collect while the managers are polled.
type CMCollector struct {
	ms []cmSource

	messages, retransmits, rejects, dropped, refused *prometheus.Desc
	established, failed, disconnected, dupReqs       *prometheus.Desc
	disconnectTimeouts                               *prometheus.Desc
	conns, eventsDropped                             *prometheus.Desc
}

var _ prometheus.Collector = (*CMCollector)(nil)

// cmSource is what CMCollector reads of a manager.
type cmSource struct {
	addr  string // the endpoint label
	stats func() cm.Stats
}

// NewCMCollector returns a collector for ms, for the daemon to register.
func NewCMCollector(ms ...*cm.Manager) *CMCollector {
	srcs := make([]cmSource, len(ms))
	for i, m := range ms {
		// The manager's own address: IPv4, unmapped.
		srcs[i] = cmSource{addr: m.Endpoint().IP().Unmap().String(), stats: m.Stats}
	}
	return newCMCollector(srcs)
}

func newCMCollector(ms []cmSource) *CMCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cephdpdkd_roce_cm_"+name, help, append([]string{"endpoint"}, labels...), nil)
	}
	return &CMCollector{
		ms:                 ms,
		messages:           d("messages_total", "CM MADs received (valid header) and sent (taken by the link, retransmissions included), by message.", "message", "direction"),
		retransmits:        d("retransmits_total", "REQs, REPs and DREQs sent again after their retransmission timeout.", "message"),
		rejects:            d("rejects_total", "REJs sent, and received for a connection of ours, by reason.", "direction", "reason"),
		dropped:            d("mads_dropped_total", "CM MADs dropped, by reason.", "reason"),
		refused:            d("refused_total", "Connection requests rejected for lack of room: the service's max_sessions, or the manager's connection table.", "limit"),
		established:        d("established_total", "Connections established.", "role"),
		failed:             d("failed_total", "Connection attempts that failed after the request was taken on."),
		disconnected:       d("disconnected_total", "Established connections that ended."),
		disconnectTimeouts: d("disconnect_timeouts_total", "DREQs that got no DREP after their retransmissions (the peer gone): the connection ended all the same."),
		dupReqs:            d("duplicate_requests_total", "REQs received again for a connection in progress or closing."),
		conns:              d("connections", "Connections held, in any state, time-wait included."),
		eventsDropped:      d("events_dropped_total", "QP events beyond what one poll keeps (the periodic QP check catches up)."),
	}
}

// Describe implements prometheus.Collector.
func (c *CMCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.messages, c.retransmits, c.rejects, c.dropped, c.refused, c.established,
		c.failed, c.disconnected, c.dupReqs, c.conns, c.eventsDropped, c.disconnectTimeouts,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *CMCollector) Collect(ch chan<- prometheus.Metric) {
	counter := emitter(ch).counter
	for _, m := range c.ms {
		ep := m.addr
		s := m.stats()
		for i := range cm.NumMessages {
			counter(c.messages, s.Received[i], ep, i.String(), "received")
			counter(c.messages, s.Sent[i], ep, i.String(), "sent")
		}
		for _, msg := range []cm.Message{cm.MsgREQ, cm.MsgREP, cm.MsgDREQ} {
			counter(c.retransmits, s.RetransmitsOf[msg], ep, msg.String())
		}
		// The reasons the manager sends itself are exported even at
		// zero, so that rules can rate() them; others once seen.
		rejects := func(dir string, by *[cm.NumRejReasons]uint64) {
			for r, n := range by {
				if n != 0 || cm.IsOwnRejectReason(uint16(r)) {
					counter(c.rejects, n, ep, dir, cm.RejectReasonName(uint16(r)))
				}
			}
		}
		rejects("sent", &s.RejectsSentBy)
		rejects("received", &s.RejectsRcvdBy)
		for r := range cm.NumDropReasons {
			counter(c.dropped, s.Drops[r], ep, r.String())
		}
		for l := range cm.NumLimits {
			counter(c.refused, s.Refused[l], ep, l.String())
		}
		counter(c.established, s.EstablishedPassive, ep, "passive")
		counter(c.established, s.EstablishedActive, ep, "active")
		counter(c.failed, s.Failed, ep)
		counter(c.disconnected, s.Disconnected, ep)
		counter(c.disconnectTimeouts, s.DisconnectTimeouts, ep)
		counter(c.dupReqs, s.DupRequests, ep)
		counter(c.eventsDropped, s.EventsDropped, ep)
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Conns), ep)
	}
}
