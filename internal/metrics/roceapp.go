package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cephdpdkd/cephdpdkd/roce/app"
)

// AppSource is anything with RoCE service counters: every app.Server
// and app.SessionService.
type AppSource interface {
	Stats() app.Stats
}

// AppCollector exports RoCE services' counters as cephdpdkd_roce_app_*
// metrics, labelled by the name each service is registered under. It
// reads only the services' Stats, so a Prometheus handler may collect
// while the services run.
type AppCollector struct {
	names []string
	srcs  []AppSource

	conns, active, msgs, bytes, rdmaOps, rdmaBytes *prometheus.Desc
}

var _ prometheus.Collector = (*AppCollector)(nil)

// NewAppCollector returns a collector for services, keyed by name (for
// example "7471"), for the daemon to register.
func NewAppCollector(services map[string]AppSource) *AppCollector {
	c := &AppCollector{}
	for name := range services {
		c.names = append(c.names, name)
	}
	sort.Strings(c.names)
	for _, name := range c.names {
		c.srcs = append(c.srcs, services[name])
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cephdpdkd_roce_app_"+name, help, append([]string{"service"}, labels...), nil)
	}
	c.conns = d("connections_total", "Connections or sessions taken on (accepted) and ended (completed, failed).", "event")
	c.active = d("connections_active", "Connections or sessions holding resources.")
	c.msgs = d("messages_total", "Messages received and sent.", "direction")
	c.bytes = d("bytes_total", "Bytes received and sent.", "direction")
	c.rdmaOps = d("rdma_ops_total", "RDMA operations issued as requester.", "op")
	c.rdmaBytes = d("rdma_bytes_total", "Bytes moved by RDMA operations issued as requester.")
	return c
}

// Describe implements prometheus.Collector.
func (c *AppCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.active, c.msgs, c.bytes, c.rdmaOps, c.rdmaBytes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *AppCollector) Collect(ch chan<- prometheus.Metric) {
	counter, gauge := emitter(ch).counter, emitter(ch).gauge
	for i, src := range c.srcs {
		name, s := c.names[i], src.Stats()
		counter(c.conns, s.Accepted, name, "accepted")
		counter(c.conns, s.Completed, name, "completed")
		counter(c.conns, s.Failed, name, "failed")
		gauge(c.active, float64(s.Active), name)
		counter(c.msgs, s.MessagesIn, name, "in")
		counter(c.msgs, s.MessagesOut, name, "out")
		counter(c.bytes, s.BytesIn, name, "in")
		counter(c.bytes, s.BytesOut, name, "out")
		counter(c.rdmaOps, s.RDMAReads, name, "read")
		counter(c.rdmaOps, s.RDMAWrites, name, "write")
		counter(c.rdmaBytes, s.RDMABytes, name)
	}
}
