// Package sdnotify tells systemd how the daemon is doing over the
// sd_notify protocol: READY=1 once the data path runs, STATUS= lines with
// live rates, STOPPING=1 at shutdown, and WATCHDOG=1 pings sent only
// while every poll loop makes progress, so that a stalled loop (or a
// stopped process) gets the service restarted by WatchdogSec=.
//
// Without NOTIFY_SOCKET (not started by systemd with Type=notify) it
// does nothing.
package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends one sd_notify message.
type Notifier interface {
	Notify(state string) error
}

// socket is the notifier of NOTIFY_SOCKET.
type socket struct{}

func (socket) Notify(state string) error {
	_, err := daemon.SdNotify(false, state)
	return err
}

// FromEnv returns the notifier systemd gave the process and its
// watchdog timeout (WATCHDOG_USEC, when WATCHDOG_PID is this process or
// unset): nil and 0 without NOTIFY_SOCKET, 0 without a watchdog.
func FromEnv(getenv func(string) string) (Notifier, time.Duration, error) {
	if getenv("NOTIFY_SOCKET") == "" {
		return nil, 0, nil
	}
	wd, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return nil, 0, fmt.Errorf("sd_notify: %w", err)
	}
	return socket{}, wd, nil
}

// StatusEvery is how often the STATUS= line is refreshed.
const StatusEvery = 5 * time.Second

// Config sets up an Agent.
type Config struct {
	// Notifier receives the messages; nil makes the Agent a no-op.
	Notifier Notifier
	// Watchdog is systemd's watchdog timeout; 0 sends no pings.
	Watchdog time.Duration
	// Status returns the STATUS= text; nil sends none.
	Status func() string
	// Loops are the poll loops the watchdog watches.
	Loops []Loop
	Log   *slog.Logger
}

// Agent sends the daemon's notifications.
type Agent struct {
	cfg Config
	wd  *Watchdog
}

// New returns an Agent; its watchdog takes the loops' counters as they
// are now.
func New(cfg Config) *Agent {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	a := &Agent{cfg: cfg}
	if cfg.Notifier != nil && cfg.Watchdog > 0 {
		a.wd = NewWatchdog(cfg.Loops, cfg.Log)
	}
	return a
}

func (a *Agent) notify(state string) {
	if a.cfg.Notifier == nil {
		return
	}
	if err := a.cfg.Notifier.Notify(state); err != nil {
		a.cfg.Log.Warn("sd_notify", "state", state, "err", err)
	}
}

// Ready tells systemd the service is up, with a first status line.
func (a *Agent) Ready(status string) {
	msg := "READY=1"
	if status != "" {
		msg += "\nSTATUS=" + status
	}
	a.notify(msg)
}

// Stopping tells systemd the service is shutting down, which also ends
// systemd's watchdog: a drain that outlasts it is not a stall.
func (a *Agent) Stopping(status string) {
	msg := "STOPPING=1"
	if status != "" {
		msg += "\nSTATUS=" + status
	}
	a.notify(msg)
}

// Status sends a STATUS= line.
func (a *Agent) Status(status string) { a.notify("STATUS=" + status) }

// Run refreshes the status line every StatusEvery and, with a watchdog,
// checks the loops every half timeout and pings when all progressed,
// until ctx ends. Without a notifier it returns at once.
func (a *Agent) Run(ctx context.Context) {
	if a.cfg.Notifier == nil {
		return
	}
	status := time.NewTicker(StatusEvery)
	defer status.Stop()
	var check <-chan time.Time
	if a.wd != nil {
		// Half the timeout, as sd_watchdog_enabled(3) advises: one late
		// check does not miss the deadline.
		t := time.NewTicker(a.cfg.Watchdog / 2)
		defer t.Stop()
		check = t.C
	}
	a.run(ctx, check, status.C)
}

// run is Run with its clocks as channels, for tests.
func (a *Agent) run(ctx context.Context, check, status <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-check:
			if a.wd.Check() {
				a.notify("WATCHDOG=1")
			}
		case <-status:
			if a.cfg.Status != nil {
				a.Status(a.cfg.Status())
			}
		}
	}
}
