package bridge

import "github.com/prometheus/client_golang/prometheus"

// Collector exports a bridge's counters as cephdpdkd_roce_bridge_*.
type Collector struct {
	b                                                       *Bridge
	conns, accepted, closed, bytes, refused, errors, stalls *prometheus.Desc
	poolFree, registered, sendPoolEmpty                     *prometheus.Desc
}

// NewCollector returns a collector for b; it reads only atomics.
func NewCollector(b *Bridge) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cephdpdkd_roce_bridge_"+name, help, labels, nil)
	}
	return &Collector{b: b,
		conns:         d("connections", "RoCE connections bridged to a Ceph daemon's TCP endpoint now."),
		accepted:      d("accepted_total", "RoCE connections accepted and bridged."),
		closed:        d("closed_total", "Bridged connections that ended."),
		bytes:         d("bytes_total", "Bytes relayed: to_tcp from the RoCE clients to the daemons, to_roce back.", "direction"),
		refused:       d("refused_total", "Connection requests rejected, by reason.", "reason"),
		errors:        d("errors_total", "Bridged connections that failed, by side.", "side"),
		stalls:        d("stalls_total", "Times one direction began waiting on the other side (backpressure).", "waiting_on"),
		poolFree:      d("pool_free_buffers", "Shared registered buffers free: recv posted on the SRQ, send on the free list.", "pool"),
		registered:    d("registered_bytes", "Registered memory of the shared buffer pools."),
		sendPoolEmpty: d("send_pool_empty_total", "Sends that found the shared send pool empty (backpressure)."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.b.Stats()
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Active))
	counter(c.accepted, s.Accepted)
	counter(c.closed, s.Closed)
	counter(c.bytes, s.BytesToTCP, "to_tcp")
	counter(c.bytes, s.BytesToRoCE, "to_roce")
	for k, v := range s.Refused {
		counter(c.refused, v, k)
	}
	for k, v := range s.Errors {
		counter(c.errors, v, k)
	}
	ch <- prometheus.MustNewConstMetric(c.poolFree, prometheus.GaugeValue, float64(s.RecvBuffersFree), "recv")
	ch <- prometheus.MustNewConstMetric(c.poolFree, prometheus.GaugeValue, float64(s.SendBuffersFree), "send")
	ch <- prometheus.MustNewConstMetric(c.registered, prometheus.GaugeValue, float64(s.RegisteredBytes))
	counter(c.sendPoolEmpty, s.SendPoolEmpty)
	for k, v := range s.Stalls {
		counter(c.stalls, v, k)
	}
}
