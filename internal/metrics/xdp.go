package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

// XDPCollector exports the af_xdp mode's XDP program counters as
// cephdpdkd_xdp_* metrics, labelled by interface. It reads the program's
// per-CPU map when scraped; the program counts in the kernel, so the
// series go on while the daemon is down and start again from the
// program's own totals when it comes back.
type XDPCollector struct {
	iface            string
	stats            func() (xdp.Stats, error)
	redirected, pass *prometheus.Desc
}

var _ prometheus.Collector = (*XDPCollector)(nil)

// NewXDPCollector returns a collector for the program on iface.
func NewXDPCollector(iface string, stats func() (xdp.Stats, error)) *XDPCollector {
	c := &XDPCollector{iface: iface, stats: stats}
	c.redirected = prometheus.NewDesc("cephdpdkd_xdp_redirected_total",
		"Frames the XDP program redirected to the daemon's AF_XDP sockets (RoCEv2 to the RoCE address).",
		[]string{"interface"}, nil)
	c.pass = prometheus.NewDesc("cephdpdkd_xdp_passed_total",
		"Frames the XDP program passed to the kernel stack, by reason: no_socket counts RoCE for the daemon that found no socket on its queue (daemon down, or a queue without a socket).",
		[]string{"interface", "reason"}, nil)
	return c
}

// Describe implements prometheus.Collector.
func (c *XDPCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.redirected
	ch <- c.pass
}

// Collect implements prometheus.Collector.
func (c *XDPCollector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.stats()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.redirected, err)
		return
	}
	counter := emitter(ch).counter
	counter(c.redirected, s[xdp.Redirected], c.iface)
	for r := xdp.Redirected + 1; r < xdp.NumReasons; r++ {
		counter(c.pass, s[r], c.iface, r.String())
	}
}
