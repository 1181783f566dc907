package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cephdpdkd/cephdpdkd/roce/bridge"
)

// BridgeCollector exports a RoCE⇄TCP bridge's counters as
// cephdpdkd_roce_bridge_*. It reads only bridge.Bridge.Stats, so a
// Prometheus handler may collect while the bridge is polled.
type BridgeCollector struct {
	stats                                                   func() bridge.Stats
	conns, accepted, closed, bytes, refused, errors, stalls *prometheus.Desc
	poolFree, registered, sendPoolEmpty, deadPeers          *prometheus.Desc
	copied, syscalls, wakeups                               *prometheus.Desc
}

var _ prometheus.Collector = (*BridgeCollector)(nil)

// NewBridgeCollector returns a collector for b, for the daemon to
// register.
func NewBridgeCollector(b *bridge.Bridge) *BridgeCollector { return newBridgeCollector(b.Stats) }

func newBridgeCollector(stats func() bridge.Stats) *BridgeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cephdpdkd_roce_bridge_"+name, help, labels, nil)
	}
	return &BridgeCollector{stats: stats,
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
		copied:        d("copied_bytes_total", "Bytes the bridge copied in user space between the registered buffers and the sockets, by direction: per byte relayed, the copies per byte.", "direction"),
		syscalls:      d("syscalls_total", "Socket system calls the bridge made (reads, writes, readiness probes), by direction.", "direction"),
		wakeups:       d("wakeups_total", "Hand-offs between the bridge's poll loop and its socket goroutines that may wake one, by direction.", "direction"),
		deadPeers:     d("dead_peers_total", "Bridged connections reaped because the client stopped answering (its QP spent its retries on lost requests or idle probes): the daemon's TCP connection reset, the session freed."),
	}
}

// Describe implements prometheus.Collector.
func (c *BridgeCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

// Collect implements prometheus.Collector.
func (c *BridgeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	counter, gauge := emitter(ch).counter, emitter(ch).gauge
	gauge(c.conns, float64(s.Active))
	counter(c.accepted, s.Accepted)
	counter(c.closed, s.Closed)
	counter(c.deadPeers, s.DeadPeers)
	counter(c.bytes, s.BytesToTCP, "to_tcp")
	counter(c.bytes, s.BytesToRoCE, "to_roce")
	// The maps are keyed by the bridge's own label values.
	for k, v := range s.Refused {
		counter(c.refused, v, k)
	}
	for k, v := range s.Errors {
		counter(c.errors, v, k)
	}
	gauge(c.poolFree, float64(s.RecvBuffersFree), "recv")
	gauge(c.poolFree, float64(s.SendBuffersFree), "send")
	gauge(c.registered, float64(s.RegisteredBytes))
	counter(c.sendPoolEmpty, s.SendPoolEmpty)
	for k, v := range s.Stalls {
		counter(c.stalls, v, k)
	}
	for k, v := range s.Copied {
		counter(c.copied, v, k)
	}
	for k, v := range s.Syscalls {
		counter(c.syscalls, v, k)
	}
	for k, v := range s.Wakeups {
		counter(c.wakeups, v, k)
	}
}
