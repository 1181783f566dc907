package sdnotify

import "log/slog"

// Loop is a poll loop as the watchdog sees it.
type Loop struct {
	Name string
	// Progress returns a counter that advances while the loop runs
	// (dispatch.Poller.Iterations).
	Progress func() uint64
}

// Watchdog decides whether the daemon is alive: every loop's counter
// must have advanced since the last check.
type Watchdog struct {
	loops   []Loop
	last    []uint64
	stalled []bool
	log     *slog.Logger
}

// NewWatchdog returns a watchdog that takes the loops' counters as they
// are now as its first reference.
func NewWatchdog(loops []Loop, log *slog.Logger) *Watchdog {
	w := &Watchdog{loops: loops, last: make([]uint64, len(loops)), stalled: make([]bool, len(loops)), log: log}
	for i, l := range loops {
		w.last[i] = l.Progress()
	}
	return w
}

// Check reads every loop's counter and reports whether each advanced
// since the previous Check. A loop that stops is logged once when it
// stalls and once when it moves again, not at every check.
func (w *Watchdog) Check() bool {
	ok := true
	for i, l := range w.loops {
		n := l.Progress()
		moved := n != w.last[i]
		w.last[i] = n
		switch {
		case !moved && !w.stalled[i]:
			w.log.Error("poll loop stalled: withholding the systemd watchdog ping", "loop", l.Name, "iterations", n)
		case moved && w.stalled[i]:
			w.log.Warn("poll loop progresses again", "loop", l.Name, "iterations", n)
		}
		w.stalled[i] = !moved
		ok = ok && moved
	}
	return ok
}
