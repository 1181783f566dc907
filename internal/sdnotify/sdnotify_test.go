package sdnotify

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// counter is a fake poll loop's iteration counter.
type counter struct{ n uint64 }

func (c *counter) progress() uint64 { return c.n }

func TestWatchdogCheck(t *testing.T) {
	// Each step advances the loops marked true, then checks.
	tests := []struct {
		name  string
		steps [][]bool
		want  []bool // Check's result per step
		logs  []int  // stall log lines after each step
	}{
		{name: "all progress", steps: [][]bool{{true, true}, {true, true}}, want: []bool{true, true}, logs: []int{0, 0}},
		{name: "one stuck", steps: [][]bool{{true, false}}, want: []bool{false}, logs: []int{1}},
		{name: "stuck stays stuck: logged once", steps: [][]bool{{true, false}, {true, false}, {true, false}},
			want: []bool{false, false, false}, logs: []int{1, 1, 1}},
		{name: "recovers", steps: [][]bool{{true, false}, {true, true}}, want: []bool{false, true}, logs: []int{1, 1}},
		{name: "all stuck (process stopped)", steps: [][]bool{{false, false}}, want: []bool{false}, logs: []int{2}},
		{name: "stalls later", steps: [][]bool{{true, true}, {false, true}}, want: []bool{true, false}, logs: []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			cs := []*counter{{n: 7}, {n: 100}}
			w := NewWatchdog([]Loop{{Name: "lcore 1", Progress: cs[0].progress}, {Name: "lcore 2", Progress: cs[1].progress}}, log)
			for i, step := range tt.steps {
				for j, adv := range step {
					if adv {
						cs[j].n += 16
					}
				}
				if got := w.Check(); got != tt.want[i] {
					t.Errorf("step %d: Check = %v, want %v", i, got, tt.want[i])
				}
				if n := strings.Count(logs.String(), "poll loop stalled"); n != tt.logs[i] {
					t.Errorf("step %d: %d stall log lines, want %d:\n%s", i, n, tt.logs[i], logs.String())
				}
			}
		})
	}
}

// recorder is a Notifier that keeps what it was sent.
type recorder struct {
	mu   sync.Mutex
	msgs []string
	got  chan string
}

func (r *recorder) Notify(state string) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, state)
	r.mu.Unlock()
	r.got <- state
	return nil
}

func TestAgentRun(t *testing.T) {
	loop := &counter{}
	rec := &recorder{got: make(chan string, 16)}
	a := New(Config{
		Notifier: rec, Watchdog: 10 * time.Second,
		Status: func() string { return "rx 5 pps" },
		Loops:  []Loop{{Name: "lcore 1", Progress: loop.progress}},
		Log:    slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)),
	})
	check, status := make(chan time.Time), make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.run(ctx, check, status); close(done) }()

	expect := func(want string) {
		t.Helper()
		select {
		case got := <-rec.got:
			if got != want {
				t.Fatalf("sent %q, want %q", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("nothing sent, want %q", want)
		}
	}
	a.Ready("started")
	expect("READY=1\nSTATUS=started")
	loop.n++
	check <- time.Time{}
	expect("WATCHDOG=1")
	status <- time.Time{}
	expect("STATUS=rx 5 pps")
	// The loop is stuck: the check sends nothing, and the next message
	// is the status line.
	check <- time.Time{}
	status <- time.Time{}
	expect("STATUS=rx 5 pps")
	loop.n++
	check <- time.Time{}
	expect("WATCHDOG=1")
	cancel()
	<-done
	a.Stopping("stopping")
	expect("STOPPING=1\nSTATUS=stopping")
}

// Without NOTIFY_SOCKET everything is a no-op.
func TestNoSocket(t *testing.T) {
	n, wd, err := FromEnv(func(string) string { return "" })
	if n != nil || wd != 0 || err != nil {
		t.Fatalf("FromEnv without NOTIFY_SOCKET = %v, %v, %v", n, wd, err)
	}
	a := New(Config{Notifier: n, Watchdog: wd})
	a.Ready("x")
	a.Status("x")
	a.Stopping("x")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.Run(ctx) // returns at once
}

// The real protocol: datagrams on the unix socket NOTIFY_SOCKET names.
func TestFromEnvSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "3000000")
	t.Setenv("WATCHDOG_PID", "")
	n, wd, err := FromEnv(os.Getenv)
	if err != nil || n == nil || wd != 3*time.Second {
		t.Fatalf("FromEnv = %v, %v, %v; want a notifier and 3s", n, wd, err)
	}
	if err := n.Notify("READY=1\nSTATUS=up"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	k, _, err := conn.ReadFromUnix(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:k]); got != "READY=1\nSTATUS=up" {
		t.Errorf("received %q", got)
	}

	// Another process's watchdog is not ours.
	t.Setenv("WATCHDOG_PID", "1")
	if _, wd, err := FromEnv(os.Getenv); err != nil || wd != 0 {
		t.Errorf("WATCHDOG_PID of another process: watchdog %v, %v; want 0", wd, err)
	}
	t.Setenv("WATCHDOG_PID", "")
	t.Setenv("WATCHDOG_USEC", "soon")
	if _, _, err := FromEnv(os.Getenv); err == nil {
		t.Error("malformed WATCHDOG_USEC accepted")
	}
}
