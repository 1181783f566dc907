package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func sample(rx, osd uint64) Snapshot {
	return Snapshot{
		Ports:     []Port{{Name: "p0", Up: true, SpeedMbps: 10000, RxPackets: rx, TxPackets: osd / 3, RxMissed: 3}},
		Queues:    []Queue{{Port: "p0", Queue: 0, RxPackets: rx}},
		Services:  []ServiceSnapshot{{Name: "osd", Packets: osd, Drops: 2, RingCount: 5, RingCapacity: 1023, Consumer: "count", Consumed: osd}},
		Pools:     []Pool{{Name: "pool", Size: 100, Available: 60, InUse: 40}},
		Malformed: []Malformed{{Reason: "truncated_ipv4", Count: 7}},
		Pollers:   []Poller{{Lcore: 1, BusyNanos: 250, TotalNanos: 1000}},
	}
}

func TestCollector(t *testing.T) {
	c := NewCollector(func() Snapshot { return sample(1000, 400) })
	want := `
# HELP cephdpdkd_service_drops_total Packets dropped because the service's ring was full.
# TYPE cephdpdkd_service_drops_total counter
cephdpdkd_service_drops_total{service="osd"} 2
# HELP cephdpdkd_queue_rx_packets_total Packets the poll loop received from the queue.
# TYPE cephdpdkd_queue_rx_packets_total counter
cephdpdkd_queue_rx_packets_total{port="p0",queue="0"} 1000
# HELP cephdpdkd_poller_busy_ratio Busy time over run time since start.
# TYPE cephdpdkd_poller_busy_ratio gauge
cephdpdkd_poller_busy_ratio{lcore="1"} 0.25
# HELP cephdpdkd_malformed_frames_total Frames the classifier found malformed, by reason; they go to the default service.
# TYPE cephdpdkd_malformed_frames_total counter
cephdpdkd_malformed_frames_total{reason="truncated_ipv4"} 7
# HELP cephdpdkd_port_rx_missed_total Packets the NIC dropped for lack of RX descriptors (imissed).
# TYPE cephdpdkd_port_rx_missed_total counter
cephdpdkd_port_rx_missed_total{port="p0"} 3
`
	checkExposition(t, c, want,
		"cephdpdkd_service_drops_total", "cephdpdkd_queue_rx_packets_total", "cephdpdkd_poller_busy_ratio",
		"cephdpdkd_malformed_frames_total", "cephdpdkd_port_rx_missed_total")
}

// checkExposition compares what c exports with want, in the text format,
// and lints it.
func checkExposition(t *testing.T, c prometheus.Collector, want string, names ...string) {
	t.Helper()
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestStatusLine(t *testing.T) {
	snap := sample(0, 0)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(func() Snapshot { return snap }))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(100, 0)
	prev := StatusFromFamilies(t0, fams)
	snap = sample(2_000_000, 1_500_000)
	snap.Services[0].Drops = 12
	fams, _ = reg.Gather()
	cur := StatusFromFamilies(t0.Add(time.Second), fams)
	got := FormatStatus(prev, cur)
	want := "rx 2.00 Mpps tx 500.0 kpps | osd 1.50 Mpps drop 10 | malformed 7 | mbufs 40/100 | busy 25%"
	if got != want {
		t.Errorf("status line\n got %q\nwant %q", got, want)
	}
}

// The gate's and the capture waits' totals are exported only while the
// daemon has them.
func TestGateAndCaptureMetrics(t *testing.T) {
	snap := Snapshot{}
	c := NewCollector(func() Snapshot { return snap })
	names := []string{"cephdpdkd_interrupt_gate_windows_total", "cephdpdkd_capture_callback_removals_total"}
	if n := testutil.CollectAndCount(c, names...); n != 0 {
		t.Fatalf("%d series without a gate or capture", n)
	}
	snap.Gate = &Gate{Windows: 190, Held: 44 * time.Millisecond}
	snap.Capture = &Capture{Removals: 3, Waited: 213 * time.Microsecond}
	want := `
# HELP cephdpdkd_capture_callback_removals_total Capture callbacks DPDK's pdump removed as a capture tool stopped, each waited out.
# TYPE cephdpdkd_capture_callback_removals_total counter
cephdpdkd_capture_callback_removals_total 3
# HELP cephdpdkd_interrupt_gate_held_seconds_total Time the poll loops spent held for DPDK's interrupt thread.
# TYPE cephdpdkd_interrupt_gate_held_seconds_total counter
cephdpdkd_interrupt_gate_held_seconds_total 0.044
# HELP cephdpdkd_interrupt_gate_windows_total Times the poll loops stepped aside for DPDK's interrupt thread (net_memif ports).
# TYPE cephdpdkd_interrupt_gate_windows_total counter
cephdpdkd_interrupt_gate_windows_total 190
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "cephdpdkd_capture_callback_removals_total",
		"cephdpdkd_interrupt_gate_held_seconds_total", "cephdpdkd_interrupt_gate_windows_total"); err != nil {
		t.Error(err)
	}
}

// The foreign-configuration gauge has one series per kind, 0 included,
// so that an alert can compare it with 0.
func TestKernelForeignConfig(t *testing.T) {
	s := sample(10, 4)
	s.Kernel = []Kernel{{Interface: "ens3f0", ForeignAddresses: 2}}
	c := NewCollector(func() Snapshot { return s })
	want := `
# HELP cephdpdkd_kernel_foreign_config Addresses (kind=address) and routes (kind=route) on the kernel interface that the kernel section did not put there, at the last check: a network manager configuring it.
# TYPE cephdpdkd_kernel_foreign_config gauge
cephdpdkd_kernel_foreign_config{interface="ens3f0",kind="address"} 2
cephdpdkd_kernel_foreign_config{interface="ens3f0",kind="route"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "cephdpdkd_kernel_foreign_config"); err != nil {
		t.Error(err)
	}
}
