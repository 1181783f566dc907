package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Snapshot is everything the daemon reports at one instant.
type Snapshot struct {
	Ports     []Port
	Queues    []Queue
	Services  []ServiceSnapshot
	Pools     []Pool
	Malformed []Malformed
	Pollers   []Poller
	Kernel    []Kernel
	Processes []ProcessSnapshot
	// Gate is set while the poll loops pass an interrupt-thread gate
	// (net_memif ports); Capture while DPDK's capture tools are served.
	Gate    *Gate
	Capture *Capture
}

// Gate holds the interrupt-thread gate's totals: windows the interrupt
// thread ran in, and the time the poll loops spent held for them.
type Gate struct {
	Windows uint64
	Held    time.Duration
}

// Capture holds the capture callbacks DPDK's pdump removed, and how long
// the daemon waited for its poll loops to leave them.
type Capture struct {
	Removals, TimedOut uint64
	Waited             time.Duration
}

// ProcessSnapshot is the session of a service left to a service process.
type ProcessSnapshot struct {
	Service                string
	Attached               bool
	PID                    int           // 0 when none is attached
	HeartbeatAge           time.Duration // since the attached process last called in
	SentPackets, SentBytes uint64        // what it sent that went out the port
	Recovered              uint64        // mbufs freed after processes died
}

// Kernel holds the exception path's counters for the kernel's direction;
// what the kernel received is in the kernel services' consumer counters.
type Kernel struct {
	Interface                string
	FromPackets, FromBytes   uint64 // the kernel's frames sent out the port
	FromDrops                uint64 // freed at stop, never taken by the port
	IfRxPackets, IfTxPackets uint64 // the interface's DPDK driver counters
	IfErrors                 uint64
	// ForeignAddresses and ForeignRoutes are what the last check found
	// on the interface that the kernel section did not put there.
	ForeignAddresses, ForeignRoutes int
}

// Port holds a port's driver counters.
type Port struct {
	Name               string
	Up                 bool
	SpeedMbps          uint32
	RxPackets, RxBytes uint64
	TxPackets, TxBytes uint64
	RxMissed, RxErrors uint64
	TxErrors, RxNoMbuf uint64
}

// Queue holds what a poll loop received from one RX queue and what the
// driver counted for it (where it counts per queue).
type Queue struct {
	Port               string
	Queue              int
	RxPackets, RxBytes uint64
	TxPackets, TxBytes uint64
	Errors             uint64
}

// ServiceSnapshot holds a service's dispatch and consumer counters.
type ServiceSnapshot struct {
	Name                    string
	Packets, Bytes, Drops   uint64 // dispatched into its ring; drops: ring full
	RingCount, RingCapacity int
	Consumer                string
	Consumed, ConsumedBytes uint64
	ConsumerDrops           uint64
}

// Pool holds an mbuf pool's occupancy.
type Pool struct {
	Name                   string
	Size, Available, InUse int
}

// Malformed counts malformed frames of one reason.
type Malformed struct {
	Reason string
	Count  uint64
}

// Poller holds a poll loop's time accounting.
type Poller struct {
	Lcore                 uint
	BusyNanos, TotalNanos uint64
	// Sleeps and SleepNanos are the loop's idle sleeps (idle_sleep).
	Sleeps, SleepNanos uint64
}

// Collector is a prometheus.Collector over a snapshot function.
type Collector struct {
	snapshot func() Snapshot
	descs    descs
}

type descs struct {
	portUp, portSpeed, portRxPkts, portRxBytes, portTxPkts, portTxBytes,
	portMissed, portRxErr, portTxErr, portNoMbuf *prometheus.Desc
	qRxPkts, qRxBytes, qTxPkts, qTxBytes, qErr                                                        *prometheus.Desc
	svcPkts, svcBytes, svcDrops, svcRing, svcRingCap, svcConsumed, svcConsumedBytes, svcConsumerDrops *prometheus.Desc
	poolSize, poolAvail, poolInUse                                                                    *prometheus.Desc
	malformed                                                                                         *prometheus.Desc
	busy, loop, busyRatio, sleeps, slept                                                              *prometheus.Desc
	kFromPkts, kFromBytes, kFromDrops, kIfRx, kIfTx, kIfErr, kForeign                                 *prometheus.Desc
	procAttached, procBeat, procSentPkts, procSentBytes, procRecovered                                *prometheus.Desc
	gateWindows, gateHeld, capRemovals, capWaited, capTimedOut                                        *prometheus.Desc
}

// NewCollector returns a collector that calls snapshot on every scrape.
func NewCollector(snapshot func() Snapshot) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cephdpdkd_"+name, help, labels, nil)
	}
	return &Collector{snapshot: snapshot, descs: descs{
		portUp:      d("port_link_up", "Link state of the port (1 up).", "port"),
		portSpeed:   d("port_link_speed_mbps", "Link speed in Mbit/s.", "port"),
		portRxPkts:  d("port_rx_packets_total", "Packets received by the port (driver count).", "port"),
		portRxBytes: d("port_rx_bytes_total", "Bytes received by the port (driver count).", "port"),
		portTxPkts:  d("port_tx_packets_total", "Packets transmitted by the port (driver count).", "port"),
		portTxBytes: d("port_tx_bytes_total", "Bytes transmitted by the port (driver count).", "port"),
		portMissed:  d("port_rx_missed_total", "Packets the NIC dropped for lack of RX descriptors (imissed).", "port"),
		portRxErr:   d("port_rx_errors_total", "Erroneous received packets.", "port"),
		portTxErr:   d("port_tx_errors_total", "Failed transmissions.", "port"),
		portNoMbuf:  d("port_rx_nombuf_total", "RX mbuf allocation failures.", "port"),

		qRxPkts:  d("queue_rx_packets_total", "Packets the poll loop received from the queue.", "port", "queue"),
		qRxBytes: d("queue_rx_bytes_total", "Bytes the poll loop received from the queue.", "port", "queue"),
		qTxPkts:  d("queue_tx_packets_total", "Packets transmitted on the queue (driver count).", "port", "queue"),
		qTxBytes: d("queue_tx_bytes_total", "Bytes transmitted on the queue (driver count).", "port", "queue"),
		qErr:     d("queue_rx_errors_total", "Receive errors on the queue (driver count).", "port", "queue"),

		svcPkts:          d("service_packets_total", "Packets dispatched into the service's ring.", "service"),
		svcBytes:         d("service_bytes_total", "Bytes dispatched into the service's ring.", "service"),
		svcDrops:         d("service_drops_total", "Packets dropped because the service's ring was full.", "service"),
		svcRing:          d("service_ring_occupancy", "Packets waiting in the service's ring.", "service"),
		svcRingCap:       d("service_ring_capacity", "Capacity of the service's ring.", "service"),
		svcConsumed:      d("service_consumed_packets_total", "Packets the service's consumer handled.", "service", "consumer"),
		svcConsumedBytes: d("service_consumed_bytes_total", "Bytes the service's consumer handled.", "service", "consumer"),
		svcConsumerDrops: d("service_consumer_drops_total", "Packets the consumer had to free undelivered.", "service", "consumer"),

		poolSize:  d("mempool_mbufs", "Mbufs in the pool.", "pool"),
		poolAvail: d("mempool_available_mbufs", "Free mbufs in the pool.", "pool"),
		poolInUse: d("mempool_in_use_mbufs", "Mbufs held by queues, rings and consumers.", "pool"),

		malformed: d("malformed_frames_total", "Frames the classifier found malformed, by reason; they go to the default service.", "reason"),

		busy:      d("poller_busy_seconds_total", "Time the poll loop spent in iterations that handled packets.", "lcore"),
		loop:      d("poller_seconds_total", "Time the poll loop has run.", "lcore"),
		sleeps:    d("poller_idle_sleeps_total", "Sleeps the poll loop took when idle (idle_sleep).", "lcore"),
		slept:     d("poller_idle_sleep_seconds_total", "Time the poll loop slept when idle (idle_sleep), part of poller_seconds_total.", "lcore"),
		busyRatio: d("poller_busy_ratio", "Busy time over run time since start.", "lcore"),

		kFromPkts:  d("kernel_tx_packets_total", "Frames the kernel sent on the exception-path interface that went out the port.", "interface"),
		kFromBytes: d("kernel_tx_bytes_total", "Bytes of the frames the kernel sent that went out the port.", "interface"),
		kFromDrops: d("kernel_tx_drops_total", "Frames the kernel sent that the port never took (freed at stop).", "interface"),
		kIfRx:      d("kernel_interface_read_packets_total", "Frames DPDK read from the kernel interface (driver count).", "interface"),
		kIfTx:      d("kernel_interface_written_packets_total", "Frames DPDK wrote to the kernel interface (driver count).", "interface"),
		kIfErr:     d("kernel_interface_errors_total", "Failed reads and writes on the kernel interface (driver count).", "interface"),
		kForeign:   d("kernel_foreign_config", "Addresses (kind=address) and routes (kind=route) on the kernel interface that the kernel section did not put there, at the last check: a network manager configuring it.", "interface", "kind"),

		procAttached:  d("service_attached", "1 while a live service process holds the service (consumer type process).", "service"),
		procBeat:      d("service_heartbeat_age_seconds", "Time since the attached service process last called in.", "service"),
		procSentPkts:  d("service_process_tx_packets_total", "Frames the service process sent that went out the port.", "service"),
		procSentBytes: d("service_process_tx_bytes_total", "Bytes of the frames the service process sent that went out the port.", "service"),
		procRecovered: d("service_process_recovered_mbufs_total", "Mbufs the daemon freed after a service process died: held, being taken, and left in its rings.", "service"),

		gateWindows: d("interrupt_gate_windows_total", "Times the poll loops stepped aside for DPDK's interrupt thread (net_memif ports)."),
		gateHeld:    d("interrupt_gate_held_seconds_total", "Time the poll loops spent held for DPDK's interrupt thread."),
		capRemovals: d("capture_callback_removals_total", "Capture callbacks DPDK's pdump removed as a capture tool stopped, each waited out."),
		capWaited:   d("capture_callback_wait_seconds_total", "Time spent waiting for the poll loops to leave removed capture callbacks."),
		capTimedOut: d("capture_callback_wait_timeouts_total", "Removals whose wait was given up on a poll loop stalled 5 s."),
	}}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	d := &c.descs
	counter, gauge := emitter(ch).counter, emitter(ch).gauge
	for _, p := range s.Ports {
		up := 0.0
		if p.Up {
			up = 1
		}
		gauge(d.portUp, up, p.Name)
		gauge(d.portSpeed, float64(p.SpeedMbps), p.Name)
		counter(d.portRxPkts, p.RxPackets, p.Name)
		counter(d.portRxBytes, p.RxBytes, p.Name)
		counter(d.portTxPkts, p.TxPackets, p.Name)
		counter(d.portTxBytes, p.TxBytes, p.Name)
		counter(d.portMissed, p.RxMissed, p.Name)
		counter(d.portRxErr, p.RxErrors, p.Name)
		counter(d.portTxErr, p.TxErrors, p.Name)
		counter(d.portNoMbuf, p.RxNoMbuf, p.Name)
	}
	for _, q := range s.Queues {
		qs := strconv.Itoa(q.Queue)
		counter(d.qRxPkts, q.RxPackets, q.Port, qs)
		counter(d.qRxBytes, q.RxBytes, q.Port, qs)
		counter(d.qTxPkts, q.TxPackets, q.Port, qs)
		counter(d.qTxBytes, q.TxBytes, q.Port, qs)
		counter(d.qErr, q.Errors, q.Port, qs)
	}
	for _, v := range s.Services {
		counter(d.svcPkts, v.Packets, v.Name)
		counter(d.svcBytes, v.Bytes, v.Name)
		counter(d.svcDrops, v.Drops, v.Name)
		gauge(d.svcRing, float64(v.RingCount), v.Name)
		gauge(d.svcRingCap, float64(v.RingCapacity), v.Name)
		counter(d.svcConsumed, v.Consumed, v.Name, v.Consumer)
		counter(d.svcConsumedBytes, v.ConsumedBytes, v.Name, v.Consumer)
		counter(d.svcConsumerDrops, v.ConsumerDrops, v.Name, v.Consumer)
	}
	for _, p := range s.Pools {
		gauge(d.poolSize, float64(p.Size), p.Name)
		gauge(d.poolAvail, float64(p.Available), p.Name)
		gauge(d.poolInUse, float64(p.InUse), p.Name)
	}
	for _, m := range s.Malformed {
		counter(d.malformed, m.Count, m.Reason)
	}
	for _, p := range s.Pollers {
		l := strconv.FormatUint(uint64(p.Lcore), 10)
		ch <- prometheus.MustNewConstMetric(d.busy, prometheus.CounterValue, float64(p.BusyNanos)/1e9, l)
		ch <- prometheus.MustNewConstMetric(d.loop, prometheus.CounterValue, float64(p.TotalNanos)/1e9, l)
		counter(d.sleeps, p.Sleeps, l)
		ch <- prometheus.MustNewConstMetric(d.slept, prometheus.CounterValue, float64(p.SleepNanos)/1e9, l)
		ratio := 0.0
		if p.TotalNanos > 0 {
			ratio = float64(p.BusyNanos) / float64(p.TotalNanos)
		}
		gauge(d.busyRatio, ratio, l)
	}
	for _, k := range s.Kernel {
		counter(d.kFromPkts, k.FromPackets, k.Interface)
		counter(d.kFromBytes, k.FromBytes, k.Interface)
		counter(d.kFromDrops, k.FromDrops, k.Interface)
		counter(d.kIfRx, k.IfRxPackets, k.Interface)
		counter(d.kIfTx, k.IfTxPackets, k.Interface)
		counter(d.kIfErr, k.IfErrors, k.Interface)
		gauge(d.kForeign, float64(k.ForeignAddresses), k.Interface, "address")
		gauge(d.kForeign, float64(k.ForeignRoutes), k.Interface, "route")
	}
	for _, p := range s.Processes {
		attached := 0.0
		if p.Attached {
			attached = 1
		}
		gauge(d.procAttached, attached, p.Service)
		gauge(d.procBeat, p.HeartbeatAge.Seconds(), p.Service)
		counter(d.procSentPkts, p.SentPackets, p.Service)
		counter(d.procSentBytes, p.SentBytes, p.Service)
		counter(d.procRecovered, p.Recovered, p.Service)
	}
	if g := s.Gate; g != nil {
		counter(d.gateWindows, g.Windows)
		ch <- prometheus.MustNewConstMetric(d.gateHeld, prometheus.CounterValue, g.Held.Seconds())
	}
	if c := s.Capture; c != nil {
		counter(d.capRemovals, c.Removals)
		ch <- prometheus.MustNewConstMetric(d.capWaited, prometheus.CounterValue, c.Waited.Seconds())
		counter(d.capTimedOut, c.TimedOut)
	}
}
