package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notifySocket listens where NOTIFY_SOCKET will point, as systemd does,
// and returns the messages it receives.
func notifySocket(t *testing.T) (string, <-chan string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	msgs := make(chan string, 1024)
	go func() {
		defer close(msgs)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	return path, msgs
}

// The sd_notify protocol with the real daemon on the sample config:
// READY=1 once the port runs, watchdog pings every half WATCHDOG_USEC
// that stop while the process is stopped and come back after, STATUS=
// lines with rates, STOPPING=1 at SIGTERM.
func TestSystemdNotify(t *testing.T) {
	needRoot(t)
	sock, msgs := notifySocket(t)
	p := startDaemon(t, sampleConfig(t, "notify", `main_lcore: 0`, "main_lcore: 0\n  runtime_cpus: \"0\""), func(c *exec.Cmd) {
		c.Env = append(c.Env, "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=1000000", "WATCHDOG_PID=")
	})
	// next waits for a message with prefix and returns it.
	next := func(prefix string, within time.Duration) string {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case m := <-msgs:
				if strings.HasPrefix(m, prefix) {
					return m
				}
			case <-deadline:
				t.Fatalf("no %q message within %v:\n%s", prefix, within, p.logs)
			}
		}
	}
	ready := next("READY=1", 30*time.Second)
	if !strings.Contains(ready, "STATUS=port sample started, 1 poll loops") {
		t.Errorf("READY message %q lacks the start status", ready)
	}
	for range 3 {
		next("WATCHDOG=1", 2*time.Second)
	}
	// A thread the runtime starts from the loop's thread is moved back
	// within a second.
	time.Sleep(1500 * time.Millisecond)
	checkThreadCPUs(t, p.cmd.Process.Pid)
	status := next("STATUS=", 12*time.Second)
	for _, want := range []string{"STATUS=rx ", " tx ", "| osd ", "mbufs "} {
		if !strings.Contains(status, want) {
			t.Errorf("status %q lacks %q", status, want)
		}
	}
	if strings.HasPrefix(status, "STATUS=rx 0 pps") {
		t.Errorf("status %q: no packets received from the replayed capture", status)
	}
	t.Logf("%s", status)

	// A stopped process sends nothing; pings resume once it runs again.
	p.signal(syscall.SIGSTOP)
	time.Sleep(200 * time.Millisecond)
	for len(msgs) > 0 {
		<-msgs
	}
	time.Sleep(2 * time.Second)
	if len(msgs) > 0 {
		t.Errorf("stopped process sent %q", <-msgs)
	}
	p.signal(syscall.SIGCONT)
	next("WATCHDOG=1", 3*time.Second)

	p.signal(syscall.SIGTERM)
	stopping := next("STOPPING=1", 10*time.Second)
	if !strings.Contains(stopping, "STATUS=stopping: terminated signal received") {
		t.Errorf("STOPPING message %q", stopping)
	}
	if code := p.wait(30 * time.Second); code != 0 {
		t.Errorf("exit %d:\n%s", code, p.logs)
	}
}

// checkThreadCPUs checks the CPU layout of the sample config with
// runtime_cpus "0" (lcores 0-1): one thread, the poll loop's (an EAL
// worker), on CPU 1; every other
// thread (the Go runtime's, the EAL's service threads, and runtime
// threads started from the worker, which inherit its name) on the main
// lcore, CPU 0.
func checkThreadCPUs(t *testing.T, pid int) {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*"))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	var layout []string
	onLoopCPU := 0
	for _, task := range tasks {
		comm, _ := os.ReadFile(filepath.Join(task, "comm"))
		status, _ := os.ReadFile(filepath.Join(task, "status"))
		var cpus string
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				cpus = strings.TrimSpace(v)
			}
		}
		name := strings.TrimSpace(string(comm))
		layout = append(layout, fmt.Sprintf("%s %s: CPUs %s", filepath.Base(task), name, cpus))
		switch {
		case cpus == "1" && name == "rte-worker-1":
			onLoopCPU++
		case cpus != "0":
			t.Errorf("thread %s (%s) may run on CPUs %s, want 0", filepath.Base(task), name, cpus)
		}
	}
	if onLoopCPU != 1 {
		t.Errorf("%d threads on the poll loop's CPU 1, want 1 (the loop's)", onLoopCPU)
	}
	if t.Failed() {
		t.Logf("threads:\n%s", strings.Join(layout, "\n"))
	}
}
