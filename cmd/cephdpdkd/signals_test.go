package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/logbuf"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// sampleConfig writes the default configuration, edited by from/to pairs,
// with its own file prefix and no metrics listener, and returns its path.
func sampleConfig(t *testing.T, name string, edits ...string) string {
	t.Helper()
	b, err := os.ReadFile("../../configs/cephdpdkd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("cdd-%s-%d", name, os.Getpid())
	t.Cleanup(func() { os.RemoveAll(pmd.RuntimeDir(prefix)) })
	edits = append(edits,
		"file_prefix: cephdpdkd-sample", "file_prefix: "+prefix,
		"listen: 127.0.0.1:9477", `listen: "off"`)
	y := string(b)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(y, edits[i]) {
			t.Fatalf("default config lacks %q", edits[i])
		}
		y = strings.Replace(y, edits[i], edits[i+1], 1)
	}
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// daemonProc is a cephdpdkd run process.
type daemonProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	logs *logbuf.Buffer // stdout and stderr, unless the test redirected them
	done chan struct{}
	err  error // Wait's, once done is closed
}

// startDaemon starts `cephdpdkd run` on a configuration and kills it at
// cleanup if it is still running. setup may redirect its output.
func startDaemon(t *testing.T, config string, setup func(*exec.Cmd)) *daemonProc {
	t.Helper()
	p := &daemonProc{t: t, logs: &logbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binary(t), "run", "--config", config, "--status=off")
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	// What a killed or forced exit leaves there goes with the test.
	p.cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	if setup != nil {
		setup(p.cmd)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitLog waits until the output has s.
func (p *daemonProc) waitLog(s string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.logs.String(), s) {
		select {
		case <-p.done:
			p.t.Fatalf("exited (%v) before logging %q:\n%s", p.err, s, p.logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %q in %v:\n%s", s, timeout, p.logs)
		}
	}
}

func (p *daemonProc) signal(s os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		p.t.Fatalf("signal %v: %v", s, err)
	}
}

// running fails the test if the process has exited.
func (p *daemonProc) running() {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Fatalf("exited: %v\n%s", p.err, p.logs)
	default:
	}
}

// wait waits for the exit and returns its status (-1: killed by a signal).
func (p *daemonProc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("still running after %v:\n%s", timeout, p.logs)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for DPDK")
	}
}

// A second daemon on the same file prefix exits with an error naming the
// first one, instead of crashing inside DPDK's lcore launch; the first
// keeps running and stops cleanly.
func TestSecondDaemonSamePrefix(t *testing.T) {
	needRoot(t)
	cfg := sampleConfig(t, "prefix")
	first := startDaemon(t, cfg, nil)
	first.waitLog("poll loop started", 20*time.Second)

	second := startDaemon(t, cfg, nil)
	if code := second.wait(20 * time.Second); code != 1 {
		t.Errorf("second daemon: exit %d (%v), want 1", code, second.err)
	}
	out := second.logs.String()
	for _, want := range []string{
		fmt.Sprintf("EAL file prefix \"cdd-prefix-%d\" is in use by pid %d (%s run --config %s", os.Getpid(), first.cmd.Process.Pid, binary(t), cfg),
		"/dpdk/cdd-prefix-",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("second daemon's output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"panic", "SIGSEGV", "goroutine "} {
		if strings.Contains(out, bad) {
			t.Errorf("second daemon's output has %q:\n%s", bad, out)
		}
	}

	first.running()
	first.signal(syscall.SIGTERM)
	if code := first.wait(30 * time.Second); code != 0 || !strings.Contains(first.logs.String(), "all mbufs returned") {
		t.Errorf("first daemon: exit %d:\n%s", code, first.logs)
	}
}

// Writes to a closed stdout (the live status line) and stderr (the log)
// fail without killing the daemon: it keeps running and exits 0, which
// it does only when every mbuf came back.
func TestClosedStdoutStderr(t *testing.T) {
	needRoot(t)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := startDaemon(t, sampleConfig(t, "pipe"), func(c *exec.Cmd) {
		c.Args = append(c.Args, "--status=on") // a status line every second
		c.Stdout, c.Stderr = outW, errW
	})
	outW.Close()
	errW.Close()
	started := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(errR)
		for s.Scan() {
			if strings.Contains(s.Text(), "poll loop started") {
				started <- true
				return
			}
		}
		started <- false
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatal("stderr closed before the poll loop started")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no poll loop started")
	}
	outR.Close()
	errR.Close()

	time.Sleep(2500 * time.Millisecond) // two status lines into the closed stdout
	p.running()
	p.signal(syscall.SIGHUP) // a log line into the closed stderr
	time.Sleep(500 * time.Millisecond)
	p.running()
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Errorf("exit %d (%v) with stdout and stderr closed", code, p.err)
	}
}

// veth creates a veth pair for the test, both ends up, and returns the
// first end's name.
func veth(t *testing.T) string {
	t.Helper()
	a, b := fmt.Sprintf("cddsig%da", os.Getpid()%100000), fmt.Sprintf("cddsig%db", os.Getpid()%100000)
	if out, err := exec.Command("ip", "link", "add", a, "type", "veth", "peer", "name", b).CombinedOutput(); err != nil {
		t.Skipf("cannot create a veth pair: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", a).Run() })
	for _, ifname := range []string{a, b} {
		if out, err := exec.Command("ip", "link", "set", ifname, "up").CombinedOutput(); err != nil {
			t.Fatalf("ip link set %s up: %v: %s", ifname, err, out)
		}
	}
	return a
}

// A shutdown stuck draining (a forwarder whose TX interface went down
// keeps its ring full for the whole 60 s drain timeout) ends at once on a
// second signal, with a non-zero status and the skipped leak check logged.
func TestSecondSignalForcesExit(t *testing.T) {
	needRoot(t)
	ifname := veth(t)
	p := startDaemon(t, sampleConfig(t, "force",
		"infinite_rx=1", "infinite_rx=1,tx_iface="+ifname,
		"    ring_size: 4096", "    ring_size: 4096\n    consumer: {type: forward}",
		"drain_timeout: 2s", "drain_timeout: 60s",
	), nil)
	p.waitLog("poll loop started", 20*time.Second)
	time.Sleep(500 * time.Millisecond)
	if out, err := exec.Command("ip", "link", "set", ifname, "down").CombinedOutput(); err != nil {
		t.Fatalf("ip link set down: %v: %s", err, out)
	}
	time.Sleep(500 * time.Millisecond) // the osd ring fills behind the stuck forwarder

	p.signal(syscall.SIGTERM)
	p.waitLog("shutting down", 5*time.Second)
	time.Sleep(2 * time.Second)
	p.running() // draining, as it would for a minute
	p.signal(syscall.SIGTERM)
	if code := p.wait(10 * time.Second); code == 0 {
		t.Errorf("exit 0 after a forced exit:\n%s", p.logs)
	}
	for _, want := range []string{"second signal during shutdown", "mbuf leak check was skipped"} {
		if !strings.Contains(p.logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, p.logs)
		}
	}
	if strings.Contains(p.logs.String(), "all mbufs returned") {
		t.Errorf("the forced exit ran the leak check:\n%s", p.logs)
	}
}
