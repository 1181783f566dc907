package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/logbuf"
	"github.com/cephdpdkd/cephdpdkd/internal/trafficgen"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

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

// mixCapture writes n frames of a generated Ceph-node capture (seed
// seed) to a pcap file, and returns them, the file, and how many each
// service should get.
func mixCapture(t *testing.T, seed int64, n int) (frames []trafficgen.Frame, path string, want map[string]uint64) {
	t.Helper()
	frames = trafficgen.Generate(seed, n, trafficgen.DefaultMix())
	path = filepath.Join(t.TempDir(), "mix.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := trafficgen.WritePcap(f, frames); err != nil {
		t.Fatal(err)
	}
	want = map[string]uint64{}
	for _, fr := range frames {
		want[serviceOf(fr)]++
	}
	return frames, path, want
}

// Every frame of a generated Ceph-node capture replayed once through
// net_pcap lands in the service its kind belongs to, and every mbuf comes
// back at shutdown.
func TestPcapReplayLandsInServices(t *testing.T) {
	frames, path, want := mixCapture(t, 7, 3000)

	d := start(t, cephConfig(t, "replay", "net_pcap10,rx_pcap="+path, 4096))
	// Loop counters are published when the loop goes idle: wait for both
	// the consumers and the published receive count.
	waitFor(t, 10*time.Second, "all frames consumed", func() bool {
		return consumed(d) == uint64(len(frames)) && received(d) == uint64(len(frames))
	})
	got := counts(d)
	for svc, n := range want {
		if got[svc] != n {
			t.Errorf("service %s: %d packets, want %d", svc, got[svc], n)
		}
	}
	var malformed uint64
	for _, m := range d.Snapshot().Malformed {
		malformed += m.Count
	}
	wantMalformed := 0
	for _, fr := range frames {
		if fr.Malformed {
			wantMalformed++
		}
	}
	if malformed != uint64(wantMalformed) {
		t.Errorf("malformed %d, want %d", malformed, wantMalformed)
	}
	for _, s := range d.Services() {
		if s.Stats.Drops.Load() != 0 {
			t.Errorf("service %s dropped %d with room to spare", s.Name, s.Stats.Drops.Load())
		}
	}
}

// A ring too small for a burst drops what does not fit, counts it, and
// still returns every mbuf: the pool is full again after shutdown. The
// sinks are listed on the loop, so packets go through their rings (a
// local sink would take each burst straight from the dispatcher).
func TestTinyRingDropsAreCountedAndFreed(t *testing.T) {
	cfg := cephConfig(t, "tiny", "net_pcap11,rx_pcap=../../configs/sample/ceph-node.pcap,infinite_rx=1", 2)
	for _, s := range cfg.Services {
		cfg.Pollers[0].Services = append(cfg.Pollers[0].Services, s.Name)
	}
	d := start(t, cfg)
	waitFor(t, 5*time.Second, "drops", func() bool {
		for _, s := range d.Services() {
			if s.Stats.Drops.Load() < 1000 {
				return false
			}
		}
		return true
	})
	var in, out uint64
	for i, s := range d.Services() {
		in += s.Stats.Packets.Load() + s.Stats.Drops.Load()
		out += d.ConsumerCounts(i).Packets
	}
	if in == 0 || out == 0 {
		t.Fatalf("dispatched+dropped %d, consumed %d", in, out)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatalf("stop (leak check): %v", err)
	}
	// Everything received was either enqueued or dropped.
	rx := received(d)
	var total uint64
	for _, s := range d.Services() {
		total += s.Stats.Packets.Load() + s.Stats.Drops.Load()
	}
	if rx != total {
		t.Errorf("received %d, dispatched+dropped %d", rx, total)
	}
}

// txPackets reads testpmd's "TX-packets: N" counts in out: the
// largest, and whether there is one and the last one's line is complete.
func txPackets(out string) (largest uint64, complete bool) {
	const key = "TX-packets:"
	found := false
	for i := strings.Index(out, key); i >= 0; i = strings.Index(out, key) {
		out = strings.TrimLeft(out[i+len(key):], " \t")
		var n uint64
		if _, err := fmt.Sscanf(out, "%d", &n); err == nil {
			found, largest = true, max(largest, n)
		}
		complete = strings.Contains(out, "\n")
	}
	return largest, found && complete
}

// dpdk-testpmd in txonly mode, in its own process on CPU 0, generates
// RoCEv2-port UDP into the daemon over net_memif. Every packet testpmd
// reports sent is counted by the roce service (enqueued or dropped), and
// no other service sees any.
func TestTestpmdGeneratorOverMemif(t *testing.T) {
	testpmd, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		t.Skip("dpdk-testpmd not installed")
	}
	sock := filepath.Join(t.TempDir(), "memif.sock")
	d := start(t, cephConfig(t, "memif", "net_memif20,role=server,socket="+sock, 4096))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// stdbuf: testpmd's stdout is a pipe here, and its statistics must be
	// readable before it exits.
	cmd := exec.CommandContext(ctx, "stdbuf", "-oL", testpmd,
		"--lcores=0@0,1@0", "--no-huge", "-m", "256", "--no-pci",
		"--file-prefix", fmt.Sprintf("cdd-tpmd-%d", os.Getpid()), "--log-level=*:warning",
		"--vdev=net_memif0,role=client,socket="+sock,
		"--", "-i", "--forward-mode=txonly", "--txpkts=128", "--burst=32",
		"--tx-ip=10.99.0.2,10.99.0.1", "--tx-udp=49152,4791", "--total-num-mbufs=4096")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out logbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	send := func(line string) { io.WriteString(stdin, line+"\n") }
	// Wait for the memif link, then generate for a bounded time.
	waitFor(t, 20*time.Second, "memif link", func() bool {
		l, err := d.Port().Link()
		return err == nil && l.Up
	})
	send("start")
	time.Sleep(2 * time.Second)
	send("stop")
	waitFor(t, 10*time.Second, "testpmd's statistics", func() bool {
		_, complete := txPackets(out.String())
		return complete
	})
	// The per-port block after "stop" is the total for the run.
	sent, _ := txPackets(out.String())
	if sent == 0 {
		t.Fatalf("testpmd sent nothing:\n%s", out.String())
	}
	// Everything testpmd sent is in our RX ring by now; wait for the loop
	// to take it all (its thread may wait seconds for a busy CPU). The
	// daemon may outlive its peer: its loops pass pmd.Gate, see
	// TestMemifPeerLeavesUnderLoad.
	counts := func() (roce, others uint64) {
		for _, s := range d.Services() {
			n := s.Stats.Packets.Load() + s.Stats.Drops.Load()
			if s.Name == "roce" {
				roce = n
			} else {
				others += n
			}
		}
		return roce, others
	}
	waitFor(t, 30*time.Second, "the roce service to count what testpmd sent", func() bool {
		roce, _ := counts()
		return roce >= sent
	})
	roce, others := counts() // Stop lets the services go
	send("quit")
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("testpmd: %v\n%s", err, out.String())
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Errorf("stop: %v", err)
	}
	t.Logf("testpmd sent %d packets; roce service got %d", sent, roce)
	if roce != sent || others != 0 {
		t.Errorf("roce %d (want %d), other services %d (want 0)", roce, sent, others)
	}
}

// Frames a kernel peer sends over a veth pair reach the daemon through
// net_af_packet and land in the right services.
func TestAfPacketVethPeer(t *testing.T) {
	testenv.RequireRoot(t)
	v := testenv.NewVethNS(t, netip.MustParsePrefix("10.99.0.2/24"))
	var frames []trafficgen.Frame
	for _, f := range trafficgen.Generate(11, 600, trafficgen.DefaultMix()) {
		// DPDK's af_packet PMD joins its socket to a fanout group with
		// PACKET_FANOUT_FLAG_DEFRAG, so the kernel reassembles IPv4
		// fragments before the PMD sees them. The pcap test covers
		// fragments; here they would arrive as one datagram.
		if f.Frag == trafficgen.NotFragment {
			frames = append(frames, f)
		}
	}
	want := map[string]uint64{}
	var data [][]byte
	for _, f := range frames {
		want[serviceOf(f)]++
		data = append(data, f.Data)
	}
	d := start(t, cephConfig(t, "veth", "net_af_packet30,iface="+v.HostIf, 1024))
	// DPDK's af_packet PMD opens its socket for every interface
	// (ETH_P_ALL, no interface), sets up its RX ring and only then binds
	// it to iface: what any interface of the namespace carried meanwhile
	// is in the ring. Under the full suite, other packages' tests send
	// Ceph-like frames (mostly OSD) on their own veths then, and the
	// daemon counts them. That ring is filled before Start returns:
	// count from once the loop has emptied it, and then insist on exactly
	// what was sent.
	base := rxSettled(t, d)
	// Send in chunks smaller than the af_packet RX ring (512 frames by
	// default), each once the previous one arrived: on a loaded machine
	// the kernel would otherwise drop what the ring cannot hold.
	for i := 0; i < len(data); i += 100 {
		chunk := data[i:min(i+100, len(data))]
		before := received(d)
		if err := v.SendFrames(chunk); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "a chunk of frames", func() bool { return received(d) >= before+uint64(len(chunk)) })
	}
	defer func() {
		for _, m := range d.Snapshot().Malformed {
			if m.Count > 0 {
				t.Logf("malformed %s: %d", m.Reason, m.Count)
			}
		}
	}()
	got := func() map[string]uint64 {
		c := counts(d)
		for svc := range c {
			c[svc] -= base[svc]
		}
		return c
	}
	waitFor(t, 10*time.Second, "frames from the peer", func() bool {
		c := got()
		return c["mon"] >= want["mon"] && c["osd"] >= want["osd"] && c["roce"] >= want["roce"] && c["unclaimed"] >= want["unclaimed"]
	})
	// Every frame sent arrives in its service, once: a duplicate from the
	// af_packet path fails the test.
	c := got()
	for _, svc := range []string{"mon", "osd", "roce"} {
		if c[svc] != want[svc] {
			t.Errorf("service %s: %d packets, want %d", svc, c[svc], want[svc])
		}
	}
	// The peer's kernel may add its own frames (ARP, IPv6 neighbour
	// discovery); those are unclaimed too.
	if c["unclaimed"] < want["unclaimed"] {
		t.Errorf("unclaimed: %d, want at least %d", c["unclaimed"], want["unclaimed"])
	}
}

// rxSettled waits until the daemon's poll loops have taken and counted
// everything that was in their RX rings when it was called, and returns
// the services' counts then. A ring's frames are read in order, a burst
// an iteration, and counted when the loop next goes idle: a received
// count that holds while every loop makes a thousand iterations means
// the rings are empty.
func rxSettled(t *testing.T, d *daemon.Daemon) map[string]uint64 {
	t.Helper()
	iterations := func() []uint64 {
		var its []uint64
		for _, p := range d.Pollers() {
			its = append(its, p.Iterations())
		}
		return its
	}
	ran := func(since []uint64) bool {
		for i, n := range iterations() {
			if n < since[i]+1000 {
				return false
			}
		}
		return true
	}
	var settled map[string]uint64
	waitFor(t, 10*time.Second, "the poll loops to empty their RX rings", func() bool {
		r, c, its := received(d), counts(d), iterations()
		for end := time.Now().Add(time.Second); !ran(its); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				return false
			}
		}
		if received(d) != r || !maps.Equal(counts(d), c) {
			return false
		}
		settled = c
		return true
	})
	if n := received(d); n > 0 {
		t.Logf("%d frames received before the test sent any (other interfaces', caught before the PMD bound its socket): %v", n, settled)
	}
	return settled
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

// The poll loop allocates nothing in steady state: RX, classification,
// ring enqueue and forwarding of a whole burst, sample traffic looping.
func TestPollLoopDoesNotAllocate(t *testing.T) {
	d := startManual(t, forwardConfig(t, "alloc", "net_pcap12,rx_pcap=../../configs/sample/ceph-node.pcap,infinite_rx=1"))
	p := d.Pollers()[0]
	for range 100 { // warm up: fill the rings' steady state
		p.PollOnce()
	}
	handled := 0
	allocs := testing.AllocsPerRun(1000, func() { handled += p.PollOnce() })
	if allocs != 0 {
		t.Errorf("PollOnce allocates %.2f times per call", allocs)
	}
	if handled == 0 {
		t.Fatal("the loop handled no packets")
	}
}

// BenchmarkPollLoop measures the data path per packet on one goroutine:
// net_pcap RX of the sample capture, classification, enqueue into four
// rings, forwarders transmitting to the PMD (which drops).
func BenchmarkPollLoop(b *testing.B) {
	d := startManual(b, forwardConfig(b, "bench", "net_pcap13,rx_pcap=../../configs/sample/ceph-node.pcap,infinite_rx=1"))
	p := d.Pollers()[0]
	rx := &p.Queues()[0].Packets
	b.ReportAllocs()
	b.ResetTimer()
	start := rx.Load()
	for rx.Load()-start < uint64(b.N) {
		p.PollOnce()
	}
	b.StopTimer()
	b.ReportMetric(float64(rx.Load()-start)/b.Elapsed().Seconds()/1e6, "Mpps")
}

// Two poll loops, one RX queue each: every service has a lane per loop.
// The forwarders no poller lists run on both loops (lane k transmitting on
// TX queue k); roce, listed on the second loop, drains both lanes there.
// Neither loop allocates; once RX stops and the lanes drain, every
// packet received was dispatched or dropped, every packet dispatched was
// forwarded, and every mbuf comes back.
func TestTwoLoopsWithLanes(t *testing.T) {
	const pcap = "../../configs/sample/ceph-node.pcap"
	cfg := forwardConfig(t, "lanes", "net_pcap14,rx_pcap="+pcap+",rx_pcap="+pcap+",infinite_rx=1")
	cfg.EAL.Lcores = "0-2"
	cfg.Port.RxQueues, cfg.Port.TxQueues = 2, 2
	cfg.Services[2].Consumer.TxQueue = 1
	cfg.Pollers = []config.Poller{{Lcore: 1, RxQueues: []int{0}}, {Lcore: 2, RxQueues: []int{1}, Services: []string{"roce"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d := startManual(t, cfg)
	for i, s := range d.Services() {
		if len(s.Rings) != 2 {
			t.Fatalf("service %s has %d lanes, want 2", s.Name, len(s.Rings))
		}
		if want := "cdd_lanes_" + s.Name + ".1"; s.Rings[1].Name() != want {
			t.Errorf("lane 1 ring %q, want %q", s.Rings[1].Name(), want)
		}
		if local := cfg.IsLocal(i); local != (s.Local != nil) || local == (s.Name == "roce") {
			t.Errorf("service %s: local %v, with %d local consumers", s.Name, local, len(s.Local))
		}
	}
	ps := d.Pollers()
	for range 200 {
		ps[0].PollOnce()
		ps[1].PollOnce()
	}
	for i, p := range ps {
		if allocs := testing.AllocsPerRun(500, func() { p.PollOnce() }); allocs != 0 {
			t.Errorf("loop %d: PollOnce allocates %.2f times per call", i, allocs)
		}
	}
	for _, p := range ps {
		p.StopRx()
	}
	for range 10000 {
		work := ps[0].PollOnce() + ps[1].PollOnce()
		if work == 0 && ps[0].RxDrained() && ps[1].RxDrained() {
			break
		}
	}
	var rx, in uint64
	for _, p := range ps {
		q := p.Queues()[0].Packets.Load()
		if q == 0 {
			t.Errorf("queue %d received nothing", p.Queues()[0].Queue)
		}
		rx += q
	}
	for i, s := range d.Services() {
		n := s.Stats.Packets.Load()
		in += n + s.Stats.Drops.Load()
		if c := d.ConsumerCounts(i).Packets; c != n || n == 0 {
			t.Errorf("service %s: dispatched %d, forwarded %d", s.Name, n, c)
		}
		if q := s.Queued(); q != 0 {
			t.Errorf("service %s: %d packets left in its lanes", s.Name, q)
		}
	}
	if rx != in {
		t.Errorf("received %d, dispatched or dropped %d", rx, in)
	}
}
