//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/metrics"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rocenode"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rxeguest"
)

// Object sizes put and read back: over TCP, and over RoCE from a TCG
// guest, which moves a few MB/s.
var (
	tcpSizes  = []int{1 << 20, 4 << 20, 16 << 20}
	roceSizes = []int{1 << 20, 4 << 20}
)

// maxBenchObjects caps a write bench at 1.2 GB: the memstore OSD keeps
// everything in RAM (2 GiB), and a full cluster blocks writes.
const maxBenchObjects = "300"

// tryCeph is one run: what it made, and what it measured.
type tryCeph struct {
	r   *runner
	o   options
	out io.Writer
	t0  time.Time

	node  *rocenode.Node
	guest *rxeguest.Guest
	made  []string // the namespaces it made, checked after the cleanup

	written, identical int
	tcpMBps, roceMBps  float64
	roceWhyNot         string // why the RoCE part did not run; "" when it did
	daemonStop         string
}

// step prints a progress line with the seconds since the start.
func (t *tryCeph) step(format string, args ...any) {
	t.r.printIndented("", fmt.Sprintf("[%5.1fs] ", time.Since(t.t0).Seconds())+fmt.Sprintf(format, args...))
}

func (t *tryCeph) run(ctx context.Context) {
	t.step("starting cephdpdkd and a Ceph cluster (mon + memstore OSD) behind it")
	t.node = rocenode.Start(t.r, t.o.daemon, func(format string, args ...any) { t.step("  "+format, args...) })
	n := t.node
	t.made = []string{n.Bridge.NS, n.NS.Name}
	t.step("  network: client namespace %s (%s, the TCP client) ⇄ veth %s ⇄ cephdpdkd ⇄ kernel interface %s in %s (%s)",
		n.Bridge.NS, rocenode.BridgeIP, n.PortIf, n.Ifname, n.NS.Name, rocenode.NodeIP)
	if ctx.Err() != nil {
		return
	}

	t.step("TCP: rados from %s to the cluster at %s, every frame through cephdpdkd's DPDK port", n.Bridge.NS, rocenode.NodeIP)
	for _, size := range tcpSizes {
		t.tcpPutGet(ctx, fmt.Sprintf("tcp-%dMiB", size>>20), size)
	}
	t.tcpMBps = t.bench(ctx, "TCP", t.tcpRados)
	if ctx.Err() != nil {
		return
	}

	t.roce(ctx)
	if ctx.Err() != nil {
		return
	}
	t.summary()
}

// tcpRados runs rados in the client namespace with args.
func (t *tryCeph) tcpRados(ctx context.Context, args ...string) (string, error) {
	out, err := t.node.Cluster.Command(ctx, t.node.Bridge.NS, "rados", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("rados %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// tcpPutGet puts size random bytes as object name over TCP, gets it
// back and compares.
func (t *tryCeph) tcpPutGet(ctx context.Context, name string, size int) {
	dir := t.r.TempDir()
	in, out := filepath.Join(dir, name), filepath.Join(dir, name+".back")
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.r.Fatal(err)
	}
	start := time.Now()
	if _, err := t.tcpRados(ctx, "-p", t.node.Cluster.Pool(), "put", name, in); err != nil {
		t.r.Fatal(err)
	}
	if _, err := t.tcpRados(ctx, "-p", t.node.Cluster.Pool(), "get", name, out); err != nil {
		t.r.Fatal(err)
	}
	back, err := os.ReadFile(out)
	if err != nil {
		t.r.Fatal(err)
	}
	t.check(name, size, time.Since(start), sha256.Sum256(data), sha256.Sum256(back))
}

// check counts and reports one object read back.
func (t *tryCeph) check(name string, size int, took time.Duration, want, got [32]byte) {
	t.written++
	if got != want {
		t.r.Errorf("%s: read back differs: sha256 %x, wrote %x", name, got, want)
		return
	}
	t.identical++
	t.step("  %s: %d MiB put and read back in %.1f s, byte-identical (sha256 %x…)", name, size>>20, took.Seconds(), want[:6])
}

var bandwidth = regexp.MustCompile(`Bandwidth \(MB/sec\):\s+([0-9.]+)`)

// bench runs `rados bench SECONDS write` with rados, prints the daemon's
// status line while it runs, removes what it wrote and returns its MB/s.
func (t *tryCeph) bench(ctx context.Context, what string, rados func(context.Context, ...string) (string, error)) float64 {
	secs := strconv.Itoa(int(t.o.bench.Round(time.Second) / time.Second))
	pool := t.node.Cluster.Pool()
	t.step("%s: rados bench %s write (4 MiB objects), cephdpdkd's status line each second:", what, secs)
	stop := t.showStatus()
	out, err := rados(ctx, "-p", pool, "bench", secs, "write", "--no-cleanup", "--max-objects", maxBenchObjects)
	stop()
	if err != nil {
		t.r.Fatal(err)
	}
	m := bandwidth.FindStringSubmatch(out)
	if m == nil {
		t.r.Fatalf("rados bench: no bandwidth in\n%s", out)
	}
	mbps, _ := strconv.ParseFloat(m[1], 64)
	t.step("  %s: %.2f MB/s", what, mbps)
	// The OSD keeps it all in RAM: free it (over TCP, the quicker way).
	if _, err := t.tcpRados(ctx, "-p", pool, "cleanup", "--prefix", "benchmark_data"); err != nil {
		t.r.Fatal(err)
	}
	return mbps
}

// showStatus prints cephdpdkd's status line (metrics.FormatStatus, as
// `cephdpdkd run` and `cephdpdkd status` show it) each second until the
// returned function is called.
func (t *tryCeph) showStatus() (stop func()) {
	client := &http.Client{Timeout: 2 * time.Second}
	url := t.node.Daemon.MetricsURL()
	prev, err := metrics.Scrape(client, url)
	return t.every(time.Second, func() {
		cur, cerr := metrics.Scrape(client, url)
		if err == nil && cerr == nil {
			t.r.printIndented("    ", metrics.FormatStatus(prev, cur))
		}
		prev, err = cur, cerr
	})
}

// roce runs the RoCE part where a Soft-RoCE guest can be built here, and
// otherwise records why not.
func (t *tryCeph) roce(ctx context.Context) {
	if t.o.roce == "off" {
		t.roceWhyNot = "turned off (--roce=off)"
		t.step("RoCE: %s", t.roceWhyNot)
		return
	}
	if err := rxeguest.CephAvailable(); err != nil {
		t.roceWhyNot = "no Soft-RoCE guest on this machine: " + err.Error()
		t.step("RoCE: not run: %s", t.roceWhyNot)
		return
	}
	t.step("RoCE: building the Soft-RoCE guest image (first run only: a few minutes; cached under /var/cache/cephdpdkd)")
	start := time.Now()
	stop := t.every(20*time.Second, func() { t.step("  still building the guest image (%.0f s)", time.Since(start).Seconds()) })
	im, err := rxeguest.BuildImage(ctx, rxeguest.WithCeph())
	stop()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		t.roceWhyNot = "the Soft-RoCE guest image could not be built: " + firstLines(err.Error(), 6)
		t.step("RoCE: not run: %s", t.roceWhyNot)
		return
	}
	t.step("  guest image ready in %.1f s: %s", time.Since(start).Seconds(), im.Dir)
	t.step("RoCE: booting the Soft-RoCE guest %s under qemu TCG (about 10-45 s)", rocenode.GuestIP)
	if t.guest, err = t.node.BootClient(ctx, t.r, "c1"); err != nil {
		t.r.Fatal(err)
	}
	t.step("  guest up in %.1f s: rados in rdma_cm mode on rxe0, its Ceph connections go to cephdpdkd's RoCE bridge", t.guest.BootTime.Seconds())
	for _, size := range roceSizes {
		t.rocePutGet(ctx, fmt.Sprintf("roce-%dMiB", size>>20), size)
	}
	t.roceMBps = t.bench(ctx, "RoCE", t.guestRados)
}

// guestRados runs rados in the guest with args.
func (t *tryCeph) guestRados(ctx context.Context, args ...string) (string, error) {
	out, code, err := t.guest.Rados(ctx, args...)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d", code)
	}
	if err != nil {
		log, _, _ := t.guest.Run(ctx, "tail -n 20 "+rxeguest.GuestCephDir+"/log/*.log")
		return out, fmt.Errorf("guest: rados %s: %w\n%s\nclient log:\n%s", strings.Join(args, " "), err, out, log)
	}
	return out, nil
}

// rocePutGet puts size random bytes as object name from the guest over
// RoCE, gets it back there and compares it there, then reads it over
// TCP too: one cluster, both kinds of client.
func (t *tryCeph) rocePutGet(ctx context.Context, name string, size int) {
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(t.guest.ShareDir(), name), data, 0o644); err != nil {
		t.r.Fatal(err)
	}
	want := sha256.Sum256(data)
	start := time.Now()
	pool := t.node.Cluster.Pool()
	if _, err := t.guestRados(ctx, "-p", pool, "put", name, rxeguest.GuestShareDir+"/"+name); err != nil {
		t.r.Fatal(err)
	}
	if _, err := t.guestRados(ctx, "-p", pool, "get", name, "/tmp/"+name); err != nil {
		t.r.Fatal(err)
	}
	sum, err := t.guest.SHA256(ctx, "/tmp/"+name)
	if err != nil {
		t.r.Fatal(err)
	}
	took := time.Since(start)
	t.guest.Run(ctx, "rm -f /tmp/"+name)
	var got [32]byte
	if b, err := hex.DecodeString(sum); err == nil {
		copy(got[:], b)
	}
	t.check(name, size, took, want, got)
	back := filepath.Join(t.r.TempDir(), name)
	if _, err := t.tcpRados(ctx, "-p", pool, "get", name, back); err != nil {
		t.r.Fatal(err)
	}
	if b, err := os.ReadFile(back); err != nil || !bytes.Equal(b, data) {
		t.r.Errorf("%s: the TCP client reads it back differently (%v)", name, err)
	}
}

// every calls f every d until the returned function is called.
func (t *tryCeph) every(d time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				f()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// summary stops the daemon cleanly and prints what the run showed.
func (t *tryCeph) summary() {
	m, err := t.node.Daemon.Metrics()
	if err != nil {
		t.r.Fatalf("cephdpdkd's metrics: %v", err)
	}
	sessions := daemonproc.Sum(m, "cephdpdkd_roce_bridge_accepted_total")
	ringDrops := daemonproc.Sum(m, "cephdpdkd_service_drops_total")
	missed := daemonproc.Sum(m, "cephdpdkd_port_rx_missed_total")
	log, err := t.node.Daemon.Stop(20 * time.Second)
	switch {
	case err != nil:
		t.r.Errorf("cephdpdkd's stop: %v\n%s", err, lastLines(log, 20))
		t.daemonStop = "did not stop cleanly: " + err.Error()
	case !strings.Contains(log, "all mbufs returned"):
		t.r.Errorf("cephdpdkd stopped without returning every mbuf:\n%s", lastLines(log, 20))
		t.daemonStop = "stopped, but not every mbuf came back"
	default:
		t.daemonStop = "stopped cleanly, every mbuf returned to its pool"
	}
	bench := int(t.o.bench.Round(time.Second) / time.Second)
	p := func(format string, args ...any) { t.r.printIndented("", fmt.Sprintf(format, args...)) }
	p("")
	p("== summary")
	p("  objects   %d written and read back, %d byte-identical (sha256)", t.written, t.identical)
	p("  TCP       rados bench write %d s through cephdpdkd's port: %.2f MB/s", bench, t.tcpMBps)
	if t.roceWhyNot == "" {
		p("  RoCE      rados bench write %d s from the Soft-RoCE guest (TCG) through the RoCE bridge: %.2f MB/s", bench, t.roceMBps)
	} else {
		p("  RoCE      not run: %s", t.roceWhyNot)
	}
	p("  sessions  %.0f RoCE sessions bridged to Ceph's TCP endpoints", sessions)
	p("  drops     %.0f packets dropped (service rings %.0f, port missed %.0f)", ringDrops+missed, ringDrops, missed)
	p("  daemon    %s", t.daemonStop)
	if t.identical != t.written {
		t.r.Errorf("%d of %d objects read back differently", t.written-t.identical, t.written)
	}
}

// checkCleanedUp reports any namespace of the run still there after the
// cleanup.
func (t *tryCeph) checkCleanedUp() {
	var left []string
	for _, ns := range t.made {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			left = append(left, ns)
		}
	}
	if len(left) > 0 {
		t.r.Errorf("namespaces left behind: %s", strings.Join(left, ", "))
		return
	}
	if len(t.made) > 0 {
		t.step("cleaned up: namespaces %s removed, with their veths, taps and bridge", strings.Join(t.made, ", "))
	}
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
