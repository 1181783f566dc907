package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/trafficgen"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// The EAL the tests share, and what they build daemons with and read
// them by.

var testEAL *pmd.EAL

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithEAL(m, "daemon", &testEAL))
}

// cephRules claim the Ceph monitors' and OSDs' TCP ports, both ways,
// for services mon and osd.
const cephRules = `
  - {service: mon, protocol: tcp, dst_ports: [3300, 6789]}
  - {service: mon, protocol: tcp, src_ports: [3300, 6789]}
  - {service: osd, protocol: tcp, dst_ports: ["6800-7568"]}
  - {service: osd, protocol: tcp, src_ports: ["6800-7568"]}`

// cephConfig is the default Ceph rule set on the given device.
func cephConfig(t *testing.T, name, device string, ringSize int) *config.Config {
	t.Helper()
	y := fmt.Sprintf(`
port: {name: %s, device: "%s", rx_descriptors: 512, tx_descriptors: 512}
mempool: {headroom: 256}
services:
  - {name: mon, ring_size: %[3]d}
  - {name: osd, ring_size: %[3]d}
  - {name: roce, ring_size: %[3]d}
  - {name: unclaimed, ring_size: %[3]d}
default_service: unclaimed
rules:%s
  - {service: roce, protocol: udp, dst_ports: [4791]}
metrics: {listen: "off"}
shutdown: {drain_timeout: 1s}
`, name, device, ringSize, cephRules)
	c, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start runs a daemon on the test EAL and stops it at cleanup, failing
// the test on any shutdown error (an mbuf leak included).
func start(t *testing.T, cfg *config.Config) *daemon.Daemon {
	t.Helper()
	plan, err := daemon.NewPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	d, err := daemon.Start(plan, daemon.Options{EAL: testEAL, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if err := d.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
	})
	return d
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// serviceOf is where the default Ceph rules must put a generated frame.
func serviceOf(f trafficgen.Frame) string {
	if f.Malformed {
		return "unclaimed"
	}
	switch f.Kind {
	case trafficgen.MonV1, trafficgen.MonV2:
		return "mon"
	case trafficgen.OSD:
		return "osd"
	case trafficgen.RoCEv2:
		return "roce"
	}
	return "unclaimed"
}

func counts(d *daemon.Daemon) map[string]uint64 {
	m := map[string]uint64{}
	for _, s := range d.Services() {
		m[s.Name] = s.Stats.Packets.Load()
	}
	return m
}

func consumed(d *daemon.Daemon) (n uint64) {
	for i := range d.Services() {
		n += d.ConsumerCounts(i).Packets
	}
	return n
}

func received(d *daemon.Daemon) (n uint64) {
	for _, q := range d.Snapshot().Queues {
		n += q.RxPackets
	}
	return n
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startManual builds the data path without starting its poll loops, for
// tests and benchmarks that drive the loop from their own goroutine.
func startManual(tb testing.TB, cfg *config.Config) *daemon.Daemon {
	plan, err := daemon.NewPlan(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := daemon.Start(plan, daemon.Options{EAL: testEAL, Manual: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := d.Stop(context.Background()); err != nil {
			tb.Errorf("stop: %v", err)
		}
	})
	return d
}

func forwardConfig(tb testing.TB, name, device string) *config.Config {
	y := fmt.Sprintf(`
port: {name: %s, device: "%s"}
services:
  - {name: mon, ring_size: 1024, consumer: {type: forward}}
  - {name: osd, ring_size: 1024, consumer: {type: forward}}
  - {name: roce, ring_size: 1024, consumer: {type: forward}}
  - {name: unclaimed, ring_size: 1024, consumer: {type: forward}}
default_service: unclaimed
rules:%s
  - {service: roce, protocol: udp, dst_ports: [4791]}
metrics: {listen: "off"}
`, name, device, cephRules)
	c, err := config.Parse([]byte(y))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
