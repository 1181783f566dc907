// Package simclock drives in-memory RoCE tests on virtual time: poll
// everything, move the clock a microsecond while there is work, jump to
// the next timer deadline when there is none. It is for tests of package
// roce and the packages built on it.
package simclock

import (
	"testing"
	"time"
)

// Deadline returns the earliest of the deadlines the functions report.
func Deadline(next ...func() (time.Time, bool)) (time.Time, bool) {
	var t time.Time
	ok := false
	for _, f := range next {
		if d, has := f(); has && (!ok || d.Before(t)) {
			t, ok = d, true
		}
	}
	return t, ok
}

// Advance moves now to the earliest deadline, if there is one (never
// backwards), and reports whether there was.
func Advance(now *time.Time, next ...func() (time.Time, bool)) bool {
	t, ok := Deadline(next...)
	if !ok {
		return false
	}
	if t.After(*now) {
		*now = t
	}
	return true
}

// Run polls until done reports true, advancing now by a microsecond per
// busy round and to the next deadline when idle. It fails the test after
// maxRounds rounds, or when nothing is left to do and no timer runs.
func Run(tb testing.TB, now *time.Time, maxRounds int, poll func() int, advance func() bool, done func() bool) {
	tb.Helper()
	for i := 0; i < maxRounds; i++ {
		if done() {
			return
		}
		if poll() == 0 {
			if done() {
				return
			}
			if !advance() {
				tb.Fatalf("stuck after %d rounds at %v: nothing to do and no timer running", i, *now)
			}
			continue
		}
		*now = now.Add(time.Microsecond)
	}
	tb.Fatalf("not done after %d rounds", maxRounds)
}
