package roce

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports the counters of endpoints and their QPs as
// cephdpdkd_roce_* metrics. It reads only atomics and a registry of QPs
// kept under a mutex, so a Prometheus handler may collect while the
// endpoints are being polled.
type Collector struct {
	eps []*Endpoint

	packets, bytes, retransmits, timeouts       *prometheus.Desc
	rnrNaks, naks, icrc, dropped, duplicates    *prometheus.Desc
	outOfSeq, stale, cqDepth, sendBufs, state   *prometheus.Desc
	sendBufsInUse, frames, rxDropped, rnrSilent *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector for eps, for the daemon to register.
func NewCollector(eps ...*Endpoint) *Collector {
	qp := []string{"endpoint", "qpn"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cephdpdkd_roce_"+name, help, labels, nil)
	}
	return &Collector{
		eps:           eps,
		packets:       d("packets_total", "RoCE packets per QP and direction.", "endpoint", "qpn", "direction"),
		bytes:         d("bytes_total", "RoCE frame bytes per QP and direction.", "endpoint", "qpn", "direction"),
		retransmits:   d("retransmits_total", "Request packets sent again (go-back-N).", qp...),
		timeouts:      d("timeouts_total", "Retransmit timer expiries.", qp...),
		rnrNaks:       d("rnr_naks_total", "RNR NAKs sent and received.", "endpoint", "qpn", "direction"),
		rnrSilent:     d("rnr_silent_drops_total", "Requests dropped unanswered because no receive was posted, on QPs that never send RNR NAKs (bridged Ceph peers).", qp...),
		naks:          d("naks_total", "NAKs sent and received, by code.", "endpoint", "qpn", "direction", "code"),
		icrc:          d("icrc_errors_total", "Frames for the QP dropped for a bad ICRC.", qp...),
		dropped:       d("qp_dropped_total", "Frames for the QP dropped for its state, source address or P_Key.", qp...),
		duplicates:    d("duplicate_requests_total", "Duplicate requests received and acknowledged again.", qp...),
		outOfSeq:      d("out_of_sequence_total", "Requests received ahead of the expected PSN.", qp...),
		stale:         d("stale_responses_total", "Responses for PSNs already acknowledged.", qp...),
		cqDepth:       d("cq_depth", "Completions waiting in the QP's completion queues.", "endpoint", "qpn", "queue"),
		sendBufs:      d("send_buffers", "Registered session send buffers.", qp...),
		sendBufsInUse: d("send_buffers_in_use", "Session send buffers posted and not yet reaped.", qp...),
		state:         d("qp_state", "QP state: 0 RESET, 1 INIT, 2 RTR, 3 RTS, 4 ERROR.", qp...),
		frames:        d("endpoint_frames_total", "Frames received and transmitted by the endpoint.", "endpoint", "direction"),
		rxDropped:     d("endpoint_rx_dropped_total", "Received frames the endpoint dropped, by reason.", "endpoint", "reason"),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.packets, c.bytes, c.retransmits, c.timeouts, c.rnrNaks, c.naks, c.icrc, c.dropped,
		c.duplicates, c.outOfSeq, c.stale, c.cqDepth, c.sendBufs, c.sendBufsInUse, c.state,
		c.frames, c.rxDropped, c.rnrSilent,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, e := range c.eps {
		ep := e.ip.String()
		es := e.Stats()
		counter(c.frames, es.RxFrames, ep, "rx")
		counter(c.frames, es.TxFrames, ep, "tx")
		counter(c.rxDropped, es.ICRCErrors, ep, "icrc")
		counter(c.rxDropped, es.Malformed, ep, "malformed")
		counter(c.rxDropped, es.NotLocal, ep, "not_local")
		counter(c.rxDropped, es.NoQP, ep, "no_qp")
		counter(c.rxDropped, es.Unsupported, ep, "unsupported")
		counter(c.rxDropped, es.TooManyVLANs, ep, "too_many_vlans")
		counter(c.rxDropped, es.NotRoCE, ep, "not_roce")
		for _, se := range e.statsEntries() {
			s := se.cnt.snapshot(se.qpn, se.sendCQ, se.recvCQ)
			qpn := strconv.FormatUint(uint64(s.QPN), 10)
			counter(c.packets, s.TxPackets, ep, qpn, "tx")
			counter(c.packets, s.RxPackets, ep, qpn, "rx")
			counter(c.bytes, s.TxBytes, ep, qpn, "tx")
			counter(c.bytes, s.RxBytes, ep, qpn, "rx")
			counter(c.retransmits, s.Retransmits, ep, qpn)
			counter(c.timeouts, s.Timeouts, ep, qpn)
			counter(c.rnrNaks, s.RNRNaksSent, ep, qpn, "sent")
			counter(c.rnrNaks, s.RNRNaksReceived, ep, qpn, "received")
			counter(c.rnrSilent, s.RNRSilentDrops, ep, qpn)
			for k := range numNakClasses {
				counter(c.naks, s.NaksSent[k], ep, qpn, "sent", k.String())
				counter(c.naks, s.NaksReceived[k], ep, qpn, "received", k.String())
			}
			counter(c.icrc, s.ICRCErrors, ep, qpn)
			counter(c.dropped, s.Dropped, ep, qpn)
			counter(c.duplicates, s.Duplicates, ep, qpn)
			counter(c.outOfSeq, s.OutOfSequence, ep, qpn)
			counter(c.stale, s.StaleResponses, ep, qpn)
			gauge(c.cqDepth, float64(s.SendCQDepth), ep, qpn, "send")
			gauge(c.cqDepth, float64(s.RecvCQDepth), ep, qpn, "recv")
			gauge(c.sendBufs, float64(s.SendBuffers), ep, qpn)
			gauge(c.sendBufsInUse, float64(s.SendBuffersInUse), ep, qpn)
			gauge(c.state, float64(s.State), ep, qpn)
		}
	}
}
