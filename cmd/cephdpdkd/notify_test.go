package main

import (
	"net"
	"os/exec"
	"path/filepath"
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
	p := startDaemon(t, sampleConfig(t, "notify"), func(c *exec.Cmd) {
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
