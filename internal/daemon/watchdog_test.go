package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/sdnotify"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/logbuf"
)

// The systemd watchdog over real poll loops: their iteration counters
// advance while they run, so each check passes; once a loop no longer
// runs (stopped here, as a stalled one would be), the next check fails
// and logs it.
func TestWatchdogOverRealPollLoops(t *testing.T) {
	d := start(t, cephConfig(t, "wdog", "net_null21", 1024))
	var loops []sdnotify.Loop
	for _, p := range d.Pollers() {
		loops = append(loops, sdnotify.Loop{Name: fmt.Sprintf("lcore %d", p.Lcore()), Progress: p.Iterations})
	}
	var logs logbuf.Buffer
	w := sdnotify.NewWatchdog(loops, slog.New(slog.NewTextHandler(&logs, nil)))
	for i := range 3 {
		time.Sleep(200 * time.Millisecond) // the loop thread may wait for a shared CPU
		if !w.Check() {
			t.Fatalf("check %d failed with the loops running:\n%s", i, logs.String())
		}
	}
	first := d.Pollers()[0]
	if n := first.Iterations(); n == 0 {
		t.Fatal("no iterations counted")
	}
	// Stop returns once every loop has returned.
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Check() // may still see the last iterations published at exit
	if w.Check() {
		t.Error("check passed with the loops stopped")
	}
	if !strings.Contains(logs.String(), "poll loop stalled") {
		t.Errorf("no stall logged:\n%s", logs.String())
	}
}
