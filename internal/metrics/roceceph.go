package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
)

// CephSource is anything with Ceph async+rdma exchange counters: a
// cephrdma.Stack.
type CephSource interface {
	Stats() cephrdma.Stats
}

// CephCollector exports Ceph async+rdma stacks' counters as
// cephdpdkd_roce_ceph_* metrics, labelled by the name each stack is
// registered under. It reads only the stacks' Stats, so a Prometheus
// handler may collect while the stacks run.
type CephCollector struct {
	names  []string
	stacks []CephSource

	conns, active *prometheus.Desc
}

var _ prometheus.Collector = (*CephCollector)(nil)

// NewCephCollector returns a collector for stacks, keyed by name (for
// example "ceph"), for the daemon to register.
func NewCephCollector(stacks map[string]CephSource) *CephCollector {
	c := &CephCollector{
		conns: prometheus.NewDesc("cephdpdkd_roce_ceph_connections_total",
			"Ceph async+rdma connections by event: accepted (TCP), dialed, established, failed, closed.",
			[]string{"stack", "event"}, nil),
		active: prometheus.NewDesc("cephdpdkd_roce_ceph_connections_active",
			"Ceph async+rdma connections in the exchange or up.", []string{"stack"}, nil),
	}
	for name := range stacks {
		c.names = append(c.names, name)
	}
	sort.Strings(c.names)
	for _, name := range c.names {
		c.stacks = append(c.stacks, stacks[name])
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *CephCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.conns
	ch <- c.active
}

// Collect implements prometheus.Collector.
func (c *CephCollector) Collect(ch chan<- prometheus.Metric) {
	for i, st := range c.stacks {
		name, s := c.names[i], st.Stats()
		for _, e := range []struct {
			event string
			v     uint64
		}{
			{"accepted", s.Accepted}, {"dialed", s.Dialed}, {"established", s.Established},
			{"failed", s.Failed}, {"closed", s.Closed},
		} {
			ch <- prometheus.MustNewConstMetric(c.conns, prometheus.CounterValue, float64(e.v), name, e.event)
		}
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(s.Active), name)
	}
}
