package service_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
	"github.com/cephdpdkd/cephdpdkd/internal/hugepages/hugepagestest"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/logbuf"
	"github.com/cephdpdkd/cephdpdkd/service"
)

// The test binary doubles as the service process: with CDD_SVC_HELPER
// set it runs helper (helper_test.go) instead of the tests.
func TestMain(m *testing.M) {
	if role := os.Getenv("CDD_SVC_HELPER"); role != "" {
		os.Exit(helper(role, os.Args[1:]))
	}
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

var bins struct {
	once              sync.Once
	dir, daemon, dump string
	err               error
}

// binaries builds cephdpdkd and cephdpdk-dump once.
func binaries(t *testing.T) (daemonBin, dumpBin string) {
	t.Helper()
	bins.once.Do(func() {
		if bins.dir, bins.err = os.MkdirTemp("", "cdd-svc-bin-"); bins.err != nil {
			return
		}
		bins.daemon, bins.dump = filepath.Join(bins.dir, "cephdpdkd"), filepath.Join(bins.dir, "cephdpdk-dump")
		for bin, pkg := range map[string]string{bins.daemon: "../cmd/cephdpdkd", bins.dump: "../cmd/cephdpdk-dump"} {
			if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
				bins.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.daemon, bins.dump
}

// node is a daemon on real hugepages replaying the sample capture.
type node struct {
	t       *testing.T
	prefix  string
	cfg     *config.Config
	plan    *daemon.Plan
	cmd     *exec.Cmd
	logs    *logbuf.Buffer
	done    chan struct{}
	err     error
	metrics string
	dir     string // short: net_pcap hands secondaries 63 bytes of its arguments
	path    string // the configuration file
}

// startNode starts cephdpdkd with the services named in process (and
// the rest counting) on hugepages. device, when set, replaces the port's
// devargs; {dir} in it is the node's short directory, which holds the
// sample capture as s.pcap.
func startNode(t *testing.T, device string, process ...string) *node {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for DPDK and hugepages")
	}
	daemonBin, _ := binaries(t)
	hugepagestest.Lock(t)
	huge := hugepagestest.Reserve(t, 256)
	dir, err := os.MkdirTemp("", "c")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sample, err := os.ReadFile("../configs/sample/ceph-node.pcap")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "s.pcap"), sample, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../configs/cephdpdkd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, prefix: fmt.Sprintf("cdd-svc-%d", os.Getpid()), logs: &logbuf.Buffer{}, done: make(chan struct{}), dir: dir}
	if device == "" {
		device = "net_pcap0,rx_pcap={dir}/s.pcap,infinite_rx=1"
	}
	device = strings.ReplaceAll(device, "{dir}", dir)
	y := string(b)
	edits := []string{
		"no_huge: true", "no_huge: false\n  huge_dir: " + huge,
		"memory_mb: 512", "memory_mb: 256",
		"file_prefix: cephdpdkd-sample", "file_prefix: " + n.prefix,
		"listen: 127.0.0.1:9477", "listen: 127.0.0.1:0",
		`device: "net_pcap0,rx_pcap={{sample_pcap}},infinite_rx=1"`, `device: "` + device + `"`,
	}
	for _, s := range process {
		edits = append(edits, "  - name: "+s+" ", "  - name: "+s+"\n    consumer: {type: process}\n   ")
	}
	for i := 0; i < len(edits); i += 2 {
		if !strings.Contains(y, edits[i]) {
			t.Fatalf("default config lacks %q", edits[i])
		}
		y = strings.Replace(y, edits[i], edits[i+1], 1)
	}
	if n.cfg, err = config.Parse([]byte(y)); err != nil {
		t.Fatalf("config: %v\n%s", err, y)
	}
	if n.plan, err = daemon.NewPlan(n.cfg); err != nil {
		t.Fatal(err)
	}
	n.path = filepath.Join(t.TempDir(), "svc.yaml")
	if err := os.WriteFile(n.path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(daemonBin, "run", "--config", n.path, "--status=off")
	n.cmd.Stdout, n.cmd.Stderr = n.logs, n.logs
	n.cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.done)
	}()
	t.Cleanup(func() {
		n.cmd.Process.Kill()
		<-n.done
	})
	m := n.waitLog(regexp.MustCompile(`msg="metrics listening" addr=(\S+)`), 30*time.Second)
	n.metrics = m[1]
	n.waitLog(regexp.MustCompile(`poll loop started`), 30*time.Second)
	return n
}

// waitLog waits for a log line matching re and returns its submatches.
func (n *node) waitLog(re *regexp.Regexp, timeout time.Duration) []string {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(n.logs.String()); m != nil {
			return m
		}
		select {
		case <-n.done:
			n.t.Fatalf("daemon exited (%v) before logging %s:\n%s", n.err, re, n.logs)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("no %s in %v:\n%s", re, timeout, n.logs)
		}
	}
}

// metric returns a sample's value from the daemon's metrics.
func (n *node) metric(name, service string) float64 {
	n.t.Helper()
	resp, err := http.Get(n.metrics)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*service="` + service + `"[^}]*\} (\S+)$`)
	m := re.FindSubmatch(b)
	if m == nil {
		n.t.Fatalf("no %s{service=%q} in metrics:\n%s", name, service, b)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// stop stops the daemon and checks that it exits 0 with every mbuf back.
func (n *node) stop() string {
	n.t.Helper()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		n.t.Fatalf("daemon still running 30s after SIGTERM:\n%s", n.logs)
	}
	logs := n.logs.String()
	if n.err != nil || !strings.Contains(logs, "all mbufs returned") {
		n.t.Fatalf("daemon stop: %v\n%s", n.err, logs)
	}
	return logs
}

// serviceIndex returns the daemon's index of a service.
func (n *node) serviceIndex(name string) int { return n.cfg.ServiceIndex(name) }

// helperCmd runs this test binary as a service process.
func (n *node) helperCmd(role string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{n.prefix}, args...)...)
	cmd.Env = append(os.Environ(), "CDD_SVC_HELPER="+role)
	return cmd
}

// startHelper starts a service process, killed when the test ends, and
// returns it with a reader of its standard output.
func (n *node) startHelper(role string, args ...string) (*exec.Cmd, *bufio.Reader) {
	n.t.Helper()
	cmd := n.helperCmd(role, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, bufio.NewReader(stdout)
}

// runHelper runs a helper to completion and returns its stdout.
func (n *node) runHelper(role string, args ...string) string {
	n.t.Helper()
	cmd := n.helperCmd(role, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan struct{})
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	close(done)
	if err != nil {
		n.t.Fatalf("helper %s %q: %v\nstdout:\n%s\nstderr:\n%s\ndaemon:\n%s", role, args, err, out, &stderr, n.logs)
	}
	return string(out)
}

// readFrames reads the length-prefixed frames a recv helper wrote.
func readFrames(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for len(b) >= 4 {
		l := binary.BigEndian.Uint32(b)
		frames = append(frames, b[4:4+l])
		b = b[4+l:]
	}
	return frames
}

// readPcap returns the frames of a capture file.
func readPcap(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for {
		b, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b)
	}
}

// sampleFrames returns the sample capture's frames as a set.
func sampleFrames(t *testing.T) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, b := range readPcap(t, "../configs/sample/ceph-node.pcap") {
		set[string(b)] = true
	}
	return set
}

// checkFrames checks that every frame is one the daemon replays and
// that the daemon's own classifier gives it to service.
func (n *node) checkFrames(frames [][]byte, service string) {
	n.t.Helper()
	want := sampleFrames(n.t)
	svc := n.serviceIndex(service)
	for i, f := range frames {
		if !want[string(f)] {
			n.t.Fatalf("%s: frame %d (%d bytes) is not in the replayed capture", service, i, len(f))
		}
		if got, _ := n.plan.Classifier.Classify(f); got != svc {
			n.t.Fatalf("%s: frame %d belongs to service %d, not %d", service, i, got, svc)
		}
	}
}

// The bytes a service process receives are the replayed frames of its
// service, and cephdpdk-dump writes them to a pcap.
func TestReceive(t *testing.T) {
	n := startNode(t, "", "osd")
	out := filepath.Join(t.TempDir(), "osd.frames")
	res := n.runHelper("recv", "osd", "2000", out)
	t.Logf("helper: %s", strings.TrimSpace(res))
	frames := readFrames(t, out)
	if len(frames) != 2000 {
		t.Fatalf("%d frames received, want 2000", len(frames))
	}
	n.checkFrames(frames, "osd")
	// The daemon notices within a check period.
	for deadline := time.Now().Add(time.Second); n.metric("cephdpdkd_service_attached", "osd") != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("attached 1 a second after the helper detached")
		}
	}

	// cephdpdk-dump, the real program.
	_, dumpBin := binaries(t)
	pcap := filepath.Join(t.TempDir(), "osd.pcap")
	cmd := exec.Command(dumpBin, "--file-prefix", n.prefix, "--service", "osd", "-w", pcap, "-c", "1000")
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "1000 packets written") {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	t.Logf("cephdpdk-dump: %s", strings.ReplaceAll(strings.TrimSpace(string(b)), "\r", " | "))
	dumped := readPcap(t, pcap)
	if len(dumped) != 1000 {
		t.Fatalf("cephdpdk-dump wrote %d frames, want 1000", len(dumped))
	}
	n.checkFrames(dumped, "osd")
	logs := n.stop()
	// The daemon checks sessions every few milliseconds: one as short as
	// a dump's may fall between two checks, and is logged as one line.
	if !regexp.MustCompile(`msg="service process attached" service=osd(?s:.*)msg="service process detached" service=osd|msg="service process attached and detached" service=osd`).MatchString(logs) {
		t.Errorf("the daemon logged no attach and detach:\n%s", logs)
	}
}

// Two service processes hold two services at once, each receiving its
// own service's frames.
func TestTwoServices(t *testing.T) {
	n := startNode(t, "", "mon", "osd")
	var wg sync.WaitGroup
	outs := map[string]string{}
	for _, s := range []string{"mon", "osd"} {
		outs[s] = filepath.Join(t.TempDir(), s+".frames")
	}
	errs := make(chan error, 2)
	for s, out := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := n.helperCmd("recv", s, "1000", out)
			if b, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%s: %v\n%s", s, err, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v\ndaemon:\n%s", err, n.logs)
	}
	for s, out := range outs {
		frames := readFrames(t, out)
		if len(frames) != 1000 {
			t.Fatalf("%s: %d frames, want 1000", s, len(frames))
		}
		n.checkFrames(frames, s)
	}
	n.stop()
}

// A service process killed with SIGKILL while it holds a burst: the
// daemon keeps running, counts the drops while nobody drains, frees what
// the process left, lets a new process attach, and has every mbuf back
// at stop.
func TestKilledProcess(t *testing.T) {
	n := startNode(t, "", "osd")
	cmd, stdout := n.startHelper("hold", "osd")
	line, err := stdout.ReadString('\n')
	var holding int
	if _, serr := fmt.Sscanf(line, "holding %d", &holding); err != nil || serr != nil {
		t.Fatalf("helper: %q, %v\n%s", line, err, n.logs)
	}
	n.waitLog(regexp.MustCompile(`msg="service process attached" service=osd pid=`+strconv.Itoa(cmd.Process.Pid)), 10*time.Second)
	if v := n.metric("cephdpdkd_service_attached", "osd"); v != 1 {
		t.Errorf("attached %v while the helper runs", v)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	m := n.waitLog(regexp.MustCompile(`msg="service process recovered" service=osd pid=\d+ held=(\d+) unacked=(\d+) in_rings=(\d+)`), 10*time.Second)
	t.Logf("recovered after SIGKILL: held %s (the helper said %d), unacked %s, in rings %s", m[1], holding, m[2], m[3])
	if m[1] != strconv.Itoa(holding) {
		t.Errorf("recovery freed %s held mbufs; the process held %d", m[1], holding)
	}
	if v := n.metric("cephdpdkd_service_process_recovered_mbufs_total", "osd"); v == 0 {
		t.Errorf("no mbufs recovered")
	}
	if v := n.metric("cephdpdkd_service_attached", "osd"); v != 0 {
		t.Errorf("attached %v after the helper died", v)
	}
	// Nobody drains: the lane fills and the drops are counted.
	d0 := n.metric("cephdpdkd_service_drops_total", "osd")
	time.Sleep(100 * time.Millisecond)
	if d1 := n.metric("cephdpdkd_service_drops_total", "osd"); d1 <= d0 {
		t.Errorf("drops %v then %v while nobody drains", d0, d1)
	}
	// A new process attaches and receives.
	out := filepath.Join(t.TempDir(), "osd.frames")
	n.runHelper("recv", "osd", "500", out)
	frames := readFrames(t, out)
	if len(frames) != 500 {
		t.Fatalf("%d frames after the kill, want 500", len(frames))
	}
	n.checkFrames(frames, "osd")
	n.stop()
}

// A reload while a service process receives: another service rebuilt
// under it leaves the process attached and receiving; a reload that
// would change the process's own service is refused and changes
// nothing.
func TestReloadWhileAttached(t *testing.T) {
	n := startNode(t, "", "osd")
	cmd := n.helperCmd("rate", "osd", "4s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	n.waitLog(regexp.MustCompile(`msg="service process attached" service=osd`), 10*time.Second)

	rewrite := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(n.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(from)) {
			t.Fatalf("config lacks %q", from)
		}
		if err := os.WriteFile(n.path, bytes.Replace(b, []byte(from), []byte(to), 1), 0o600); err != nil {
			t.Fatal(err)
		}
		n.cmd.Process.Signal(syscall.SIGHUP)
	}
	rewrite("ring_size: 2048", "ring_size: 1024") // roce, rebuilt
	m := n.waitLog(regexp.MustCompile(`msg="configuration reloaded" .* rebuilt=(\d+)`), 10*time.Second)
	if m[1] != "1" {
		t.Errorf("reload rebuilt %s services, want 1 (roce)", m[1])
	}
	if v := n.metric("cephdpdkd_service_attached", "osd"); v != 1 {
		t.Errorf("attached %v after a reload around the process", v)
	}
	rewrite("ring_size: 4096", "ring_size: 8192") // osd, the process's
	n.waitLog(regexp.MustCompile(`msg="reload refused" .*a service with a process consumer cannot be added, removed or changed`), 10*time.Second)

	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s\ndaemon:\n%s", err, &stderr, n.logs)
	}
	var pkts int
	if _, err := fmt.Sscanf(stdout.String()[strings.Index(stdout.String(), "received"):], "received %d", &pkts); err != nil || pkts == 0 {
		t.Fatalf("helper received nothing across the reloads: %q", stdout.String())
	}
	t.Logf("service process across two reloads: %s", strings.TrimSpace(stdout.String()))
	n.stop()
}

// A daemon killed under a service process: the process's Recv returns
// ErrDaemonGone instead of polling a dead daemon's rings for ever.
func TestDaemonGone(t *testing.T) {
	n := startNode(t, "", "osd")
	cmd, r := n.startHelper("untilgone", "osd")
	if line, err := r.ReadString('\n'); err != nil || line != "attached\n" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	n.cmd.Process.Kill()
	<-n.done
	killed := time.Now()
	var rest []byte
	done := make(chan error, 1)
	go func() {
		rest, _ = io.ReadAll(r) // all of it before Wait closes the pipe
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(string(rest), service.ErrDaemonGone.Error()) {
			t.Fatalf("helper after the daemon's kill: %v, %q", err, rest)
		}
		t.Logf("the process saw the daemon gone %v after its kill: %s", time.Since(killed).Round(time.Millisecond), strings.TrimSpace(string(rest)))
	case <-time.After(10 * time.Second):
		t.Fatal("the process still polls 10 s after the daemon's kill")
	}
}

// Frames a service process sends go out the daemon's port: net_pcap
// writes them to tx_pcap, read after the daemon stops.
func TestSend(t *testing.T) {
	// No infinite_rx: the devargs must stay within net_pcap's 63 bytes.
	n := startNode(t, "net_pcap0,rx_pcap={dir}/s.pcap,tx_pcap={dir}/t.pcap", "osd")
	const count = 300
	res := n.runHelper("send", "osd", strconv.Itoa(count))
	t.Logf("helper: %s", strings.TrimSpace(res))
	deadline := time.Now().Add(10 * time.Second)
	for n.metric("cephdpdkd_service_process_tx_packets_total", "osd") < count && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	n.stop()
	next := 0
	for _, b := range readPcap(t, filepath.Join(n.dir, "t.pcap")) {
		if bytes.Equal(b, helperFrame(next)) {
			next++
		}
	}
	if next != count {
		t.Fatalf("tx_pcap has the helper's frames 0..%d in order, want all %d", next-1, count)
	}
}

// Figures for the record, one run: attach latency, and the packets a
// service process receives per second next to the daemon's own counting
// consumer on the same service.
func TestReceiveRate(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	const window = 2 * time.Second
	t.Run("process", func(t *testing.T) {
		n := startNode(t, "", "osd")
		res := n.runHelper("rate", "osd", window.String())
		t.Logf("service process: %s", strings.TrimSpace(res))
		n.stop()
	})
	t.Run("count", func(t *testing.T) {
		c := startNode(t, "")
		a := c.metric("cephdpdkd_service_consumed_packets_total", "osd")
		time.Sleep(window)
		b := c.metric("cephdpdkd_service_consumed_packets_total", "osd")
		t.Logf("in-daemon count consumer: %.0f pps", (b-a)/window.Seconds())
		c.stop()
	})
}
