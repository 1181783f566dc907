package metrics

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// RoCECollector exports the counters of RoCE endpoints and their QPs as
// cephdpdkd_roce_* metrics, with the send buffers of the sessions on the
// QPs. It reads only the endpoints' snapshots (roce.Endpoint.Stats and
// EachQPStats) and a session.Registry, so a Prometheus handler may
// collect while the endpoints are being polled.
type RoCECollector struct {
	eps []roceSource

	packets, bytes, retransmits, timeouts       *prometheus.Desc
	rnrNaks, naks, icrc, dropped, duplicates    *prometheus.Desc
	outOfSeq, stale, cqDepth, sendBufs, state   *prometheus.Desc
	sendBufsInUse, frames, rxDropped, rnrSilent *prometheus.Desc
	// The endpoint's sums of its QPs' counters, destroyed QPs included.
	epRNRNaks, epRNRSilent, epSeqNaks *prometheus.Desc
	epSeqNakResends, epSpurious       *prometheus.Desc
	// Dead-peer detection: idle probes per QP and per endpoint, and the
	// QPs that gave up on a silent peer (per endpoint: such a QP is soon
	// destroyed).
	idleProbes, epIdleProbes, epDeadPeers *prometheus.Desc

	// Loss recovery besides timeouts.
	fastRetransmits, retryTimeouts *prometheus.Desc
}

var _ prometheus.Collector = (*RoCECollector)(nil)

// roceSource is what RoCECollector reads of an endpoint.
type roceSource struct {
	addr  string // the endpoint label
	stats func() roce.EndpointStats
	eachQ func(func(roce.QPStats))
	// session returns the figures of the session on QP qpn: zero for a
	// QP without one.
	session func(qpn uint32) session.Stats
}

// NewRoCECollector returns a collector for eps, for the daemon to
// register. sessions, if not nil, is where the sessions on the
// endpoints' QPs publish their send buffers; a QP without a session
// exports none.
func NewRoCECollector(sessions *session.Registry, eps ...*roce.Endpoint) *RoCECollector {
	srcs := make([]roceSource, len(eps))
	for i, e := range eps {
		srcs[i] = roceSource{addr: e.IP().String(), stats: e.Stats, eachQ: e.EachQPStats,
			session: func(qpn uint32) session.Stats {
				if sessions == nil {
					return session.Stats{}
				}
				st, _ := sessions.Lookup(e, qpn)
				return st
			}}
	}
	return newRoCECollector(srcs)
}

func newRoCECollector(eps []roceSource) *RoCECollector {
	qp := []string{"endpoint", "qpn"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cephdpdkd_roce_"+name, help, labels, nil)
	}
	return &RoCECollector{
		eps:             eps,
		packets:         d("packets_total", "RoCE packets per QP and direction.", "endpoint", "qpn", "direction"),
		bytes:           d("bytes_total", "RoCE frame bytes per QP and direction.", "endpoint", "qpn", "direction"),
		retransmits:     d("retransmits_total", "Request packets sent again (go-back-N).", qp...),
		timeouts:        d("timeouts_total", "Retransmit timer expiries.", qp...),
		rnrNaks:         d("rnr_naks_total", "RNR NAKs sent and received.", "endpoint", "qpn", "direction"),
		rnrSilent:       d("rnr_silent_drops_total", "Requests dropped unanswered because no receive was posted, on QPs that never send RNR NAKs (bridged Ceph peers).", qp...),
		naks:            d("naks_total", "NAKs sent and received, by code.", "endpoint", "qpn", "direction", "code"),
		icrc:            d("icrc_errors_total", "Frames for the QP dropped for a bad ICRC.", qp...),
		dropped:         d("qp_dropped_total", "Frames for the QP dropped for its state, source address or P_Key.", qp...),
		duplicates:      d("duplicate_requests_total", "Duplicate requests received and acknowledged again.", qp...),
		outOfSeq:        d("out_of_sequence_total", "Requests received ahead of the expected PSN.", qp...),
		stale:           d("stale_responses_total", "Responses for PSNs already acknowledged.", qp...),
		cqDepth:         d("cq_depth", "Completions waiting in the QP's completion queues.", "endpoint", "qpn", "queue"),
		sendBufs:        d("send_buffers", "Registered session send buffers.", qp...),
		sendBufsInUse:   d("send_buffers_in_use", "Session send buffers posted and not yet reaped.", qp...),
		state:           d("qp_state", "QP state: 0 RESET, 1 INIT, 2 RTR, 3 RTS, 4 ERROR.", qp...),
		frames:          d("endpoint_frames_total", "Frames received and transmitted by the endpoint.", "endpoint", "direction"),
		rxDropped:       d("endpoint_rx_dropped_total", "Received frames the endpoint dropped, by reason.", "endpoint", "reason"),
		epRNRNaks:       d("endpoint_rnr_naks_sent_total", "RNR NAKs sent by the endpoint's QPs, those destroyed included.", "endpoint"),
		epRNRSilent:     d("endpoint_rnr_silent_drops_total", "Requests the endpoint's QPs dropped unanswered because no receive was posted, those destroyed included.", "endpoint"),
		epSeqNaks:       d("endpoint_sequence_naks_sent_total", "PSN sequence error NAKs sent by the endpoint's QPs, those destroyed included.", "endpoint"),
		epSeqNakResends: d("endpoint_sequence_nak_resends_total", "Sequence NAKs among endpoint_sequence_naks_sent_total that went again because what the first asked for did not come within a few round trips (a lost NAK), those of destroyed QPs included.", "endpoint"),
		epSpurious:      d("endpoint_spurious_timeouts_total", "Adaptive retransmit timeouts of the endpoint's QPs that proved spurious (the one packet resent was answered with an acknowledgement of the packets after it: a late acknowledgement, not a loss), those of destroyed QPs included.", "endpoint"),

		fastRetransmits: d("fast_retransmits_total", "Retransmissions started before any timer: go-back-N rounds a sequence NAK or a gap in READ responses started (nak), and tail-loss probes (probe).", "endpoint", "qpn", "reason"),
		idleProbes:      d("idle_probes_total", "Idle probes sent (duplicate zero-length SENDs that check an idle connection's peer is alive), resends included.", qp...),
		epIdleProbes:    d("endpoint_idle_probes_total", "Idle probes sent by the endpoint's QPs, those destroyed included.", "endpoint"),
		epDeadPeers:     d("endpoint_dead_peers_total", "QPs that gave up on a peer that answered nothing, requests or idle probes, for their whole retry budget, those destroyed included.", "endpoint"),
		retryTimeouts:   d("retry_timeouts_total", "Timeouts that were a whole transport timeout without progress, each spending one of the QP's retries; timeouts_total counts the adaptive timer's too.", qp...),
	}
}

// Describe implements prometheus.Collector.
func (c *RoCECollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.packets, c.bytes, c.retransmits, c.timeouts, c.rnrNaks, c.naks, c.icrc, c.dropped,
		c.duplicates, c.outOfSeq, c.stale, c.cqDepth, c.sendBufs, c.sendBufsInUse, c.state,
		c.frames, c.rxDropped, c.rnrSilent, c.epRNRNaks, c.epRNRSilent, c.epSeqNaks, c.epSeqNakResends, c.epSpurious,
		c.fastRetransmits, c.retryTimeouts, c.idleProbes, c.epIdleProbes, c.epDeadPeers,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *RoCECollector) Collect(ch chan<- prometheus.Metric) {
	counter, gauge := emitter(ch).counter, emitter(ch).gauge
	for _, e := range c.eps {
		ep := e.addr
		es := e.stats()
		counter(c.frames, es.RxFrames, ep, "rx")
		counter(c.frames, es.TxFrames, ep, "tx")
		counter(c.rxDropped, es.ICRCErrors, ep, "icrc")
		counter(c.rxDropped, es.Malformed, ep, "malformed")
		counter(c.rxDropped, es.NotLocal, ep, "not_local")
		counter(c.rxDropped, es.NoQP, ep, "no_qp")
		counter(c.rxDropped, es.Unsupported, ep, "unsupported")
		counter(c.rxDropped, es.TooManyVLANs, ep, "too_many_vlans")
		counter(c.rxDropped, es.NotRoCE, ep, "not_roce")
		counter(c.epRNRNaks, es.RNRNaksSent, ep)
		counter(c.epRNRSilent, es.RNRSilentDrops, ep)
		counter(c.epSeqNaks, es.SequenceNaksSent, ep)
		counter(c.epSeqNakResends, es.SequenceNakResends, ep)
		counter(c.epSpurious, es.SpuriousTimeouts, ep)
		counter(c.epIdleProbes, es.IdleProbes, ep)
		counter(c.epDeadPeers, es.DeadPeers, ep)
		e.eachQ(func(s roce.QPStats) {
			qpn := strconv.FormatUint(uint64(s.QPN), 10)
			counter(c.packets, s.TxPackets, ep, qpn, "tx")
			counter(c.packets, s.RxPackets, ep, qpn, "rx")
			counter(c.bytes, s.TxBytes, ep, qpn, "tx")
			counter(c.bytes, s.RxBytes, ep, qpn, "rx")
			counter(c.retransmits, s.Retransmits, ep, qpn)
			counter(c.timeouts, s.Timeouts, ep, qpn)
			counter(c.retryTimeouts, s.RetryTimeouts, ep, qpn)
			counter(c.idleProbes, s.IdleProbes, ep, qpn)
			counter(c.fastRetransmits, s.NakRetransmits, ep, qpn, "nak")
			counter(c.fastRetransmits, s.TailProbes, ep, qpn, "probe")
			counter(c.rnrNaks, s.RNRNaksSent, ep, qpn, "sent")
			counter(c.rnrNaks, s.RNRNaksReceived, ep, qpn, "received")
			counter(c.rnrSilent, s.RNRSilentDrops, ep, qpn)
			for k := range s.NaksSent {
				code := roce.NakClass(k).String()
				counter(c.naks, s.NaksSent[k], ep, qpn, "sent", code)
				counter(c.naks, s.NaksReceived[k], ep, qpn, "received", code)
			}
			counter(c.icrc, s.ICRCErrors, ep, qpn)
			counter(c.dropped, s.Dropped, ep, qpn)
			counter(c.duplicates, s.Duplicates, ep, qpn)
			counter(c.outOfSeq, s.OutOfSequence, ep, qpn)
			counter(c.stale, s.StaleResponses, ep, qpn)
			gauge(c.cqDepth, float64(s.SendCQDepth), ep, qpn, "send")
			gauge(c.cqDepth, float64(s.RecvCQDepth), ep, qpn, "recv")
			ss := e.session(s.QPN)
			gauge(c.sendBufs, float64(ss.SendBuffers), ep, qpn)
			gauge(c.sendBufsInUse, float64(ss.SendBuffersInUse), ep, qpn)
			gauge(c.state, float64(s.State), ep, qpn)
		})
	}
}

// TxRefusedCollector exports cephdpdkd_roce_endpoint_tx_refused_total:
// what a RoCE node's frame I/O counts beyond the service consumer
// counters, the frames the TX queue refused.
type TxRefusedCollector struct {
	endpoint string
	refused  *atomic.Uint64
	desc     *prometheus.Desc
}

var _ prometheus.Collector = (*TxRefusedCollector)(nil)

// NewTxRefusedCollector returns a collector of refused, the counter of
// the frame I/O under the endpoint whose address is endpoint.
func NewTxRefusedCollector(endpoint string, refused *atomic.Uint64) *TxRefusedCollector {
	return &TxRefusedCollector{
		endpoint: endpoint,
		refused:  refused,
		desc: prometheus.NewDesc("cephdpdkd_roce_endpoint_tx_refused_total",
			"Frames the port's TX queue refused (full, or no mbuf to copy into). The endpoint keeps QP frames and offers them again; a refused CM MAD or ARP frame is retransmitted by its protocol.",
			[]string{"endpoint"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *TxRefusedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *TxRefusedCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.refused.Load()), c.endpoint)
}
