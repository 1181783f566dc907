package roced

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cephdpdkd/cephdpdkd/consumer"
)

// collector exports what the node's frame I/O counts beyond the service
// consumer counters: frames the TX queue refused.
type collector struct {
	endpoint string
	io       *consumer.RingIO
	refused  *prometheus.Desc
}

func newCollector(endpoint string, io *consumer.RingIO) *collector {
	return &collector{
		endpoint: endpoint,
		io:       io,
		refused: prometheus.NewDesc("cephdpdkd_roce_endpoint_tx_refused_total",
			"Frames the port's TX queue refused (full, or no mbuf to copy into). The endpoint keeps QP frames and offers them again; a refused CM MAD or ARP frame is retransmitted by its protocol.",
			[]string{"endpoint"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.refused }

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(c.io.TxRefused.Load()), c.endpoint)
}
