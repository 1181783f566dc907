// Package daemonproc runs cephdpdkd as a process of its own, as an
// operator would (`cephdpdkd run --config FILE`), for the end-to-end
// tests and internal/tools/tryceph: it starts the daemon, waits until its
// poll loop runs and its metrics answer, scrapes its metrics, and stops
// it. The daemon dies with the process that started it.
package daemonproc

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
)

// Proc is a running cephdpdkd and its log.
type Proc struct {
	cmd     *exec.Cmd
	metrics string
	client  *http.Client
	mu      sync.Mutex
	log     strings.Builder
	exited  chan struct{}
	waitErr error
}

// Start runs `bin run --config cfg --status=off` and waits until its poll
// loop runs and its metrics answer at metricsAddr (the config's
// metrics.listen). t's cleanup stops it (SIGTERM, then SIGKILL after 5 s)
// if it is still running; it is killed when the process that started it
// dies.
func Start(t harness.TB, bin, cfg, metricsAddr string) *Proc {
	t.Helper()
	return StartIn(t, "", bin, cfg, metricsAddr)
}

// StartIn is Start with the daemon in network namespace netns (a name from
// `ip netns list`; "" is this process's own), where the af_xdp mode's
// interface and the Ceph daemons its bridge dials are. Its metrics are
// scraped inside netns too.
func StartIn(t harness.TB, netns, bin, cfg, metricsAddr string) *Proc {
	t.Helper()
	d := &Proc{metrics: "http://" + metricsAddr + "/metrics", exited: make(chan struct{}),
		client: &http.Client{Timeout: 5 * time.Second}}
	args := []string{bin, "run", "--config", cfg, "--status=off"}
	if netns != "" {
		// ip execs the daemon in place: it keeps the pid and Pdeathsig.
		args = append([]string{"ip", "netns", "exec", netns}, args...)
		d.client.Transport = &http.Transport{DialContext: dialIn("/run/netns/" + netns)}
	}
	d.cmd = exec.Command(args[0], args[1:]...)
	// Pdeathsig: a test binary killed by its timeout (or by hand) must not
	// leave a poll loop spinning behind it.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the daemon exits,
		// not the process: keep this thread, locked, for the daemon's life.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := d.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		d.waitErr = d.cmd.Wait()
		pw.Close()
		close(d.exited)
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			d.mu.Lock()
			d.log.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			if !sent && strings.Contains(sc.Text(), "poll loop started") {
				close(ready)
				sent = true
			}
		}
	}()
	t.Cleanup(func() {
		// A clean stop, so that the EAL removes its runtime files.
		_, _ = d.Stop(5 * time.Second)
	})
	select {
	case <-ready:
	case <-d.exited:
		t.Fatalf("cephdpdkd exited at start: %v\n%s", d.waitErr, d.Log())
	case <-time.After(30 * time.Second):
		t.Fatalf("cephdpdkd did not start in 30 s:\n%s", d.Log())
	}
	// The metrics server may come up a moment after the poll loop: a test
	// that scrapes at once must not read a refused connection as a fault.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := d.Metrics()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cephdpdkd's metrics did not answer in 30 s: %v\n%s", err, d.Log())
		}
	}
	return d
}

// Log returns what the daemon has written so far.
func (d *Proc) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// Pid is the daemon's process ID, also its process group's.
func (d *Proc) Pid() int { return d.cmd.Process.Pid }

// Exited is closed once the daemon has exited and been reaped.
func (d *Proc) Exited() <-chan struct{} { return d.exited }

// MetricsURL is the daemon's /metrics endpoint.
func (d *Proc) MetricsURL() string { return d.metrics }

// Stop sends SIGTERM and waits for the exit; it returns the log and the
// exit error.
func (d *Proc) Stop(timeout time.Duration) (string, error) {
	select {
	case <-d.exited:
		return d.Log(), d.waitErr
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(timeout):
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
		return d.Log(), fmt.Errorf("cephdpdkd did not stop within %v", timeout)
	}
	return d.Log(), d.waitErr
}

// Metrics scrapes the daemon: "name{label=value,...}" → value, for the
// cephdpdkd_ series and process_open_fds and go_goroutines.
func (d *Proc) Metrics() (map[string]float64, error) {
	resp, err := d.client.Get(d.metrics)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads a scrape in Prometheus' text format as Metrics
// returns it: "name{label=value,...}" → value, for the cephdpdkd_ series
// and process_open_fds and go_goroutines.
func ParseMetrics(r io.Reader) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		// The daemon's own series, and the process's fds and goroutines
		// (leak checks).
		if !strings.HasPrefix(name, "cephdpdkd_") && name != "process_open_fds" && name != "go_goroutines" {
			continue
		}
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			}
		}
	}
	return out, nil
}

// Sum adds every series of metric name in m (as Metrics returns it)
// whose labels contain all of want ("service=osd").
func Sum(m map[string]float64, name string, want ...string) float64 {
	total := 0.0
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, w := range want {
			if !strings.Contains(k, w) {
				ok = false
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// FreeAddr returns a loopback TCP address nothing listens on now, for a
// daemon's metrics.listen.
func FreeAddr(t harness.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// LogTail returns the last 30 lines of a log, for a failure report.
func LogTail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// CountSeries returns how many series of m (as Metrics returns it) have
// a key that starts with prefix ("cephdpdkd_roce_qp_state{").
func CountSeries(m map[string]float64, prefix string) int {
	n := 0
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// WaitMetric polls the daemon's metrics until the sum of metric name's
// series satisfies ok, and fails t if it does not within the time given.
func (d *Proc) WaitMetric(t harness.TB, name string, ok func(float64) bool, within time.Duration) {
	t.Helper()
	var last float64
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		m, err := d.Metrics()
		if err != nil {
			continue
		}
		if last = Sum(m, name); ok(last) {
			return
		}
	}
	t.Fatalf("%s stayed at %v for %v", name, last, within)
}
