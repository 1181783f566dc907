package pmd

import (
	"testing"
	"time"
)

// TestIdleSleeper: a Wake ends a sleep at once, one Wake before a sleep
// ends the next one, and without one the timeout does.
func TestIdleSleeper(t *testing.T) {
	s := NewIdleSleeper()
	go func() {
		time.Sleep(10 * time.Millisecond)
		s.Wake()
	}()
	start := time.Now()
	if !s.Sleep(time.Hour) || time.Since(start) > time.Minute {
		t.Fatal("a Wake did not end the sleep")
	}
	s.Wake()
	s.Wake() // never blocks
	if !s.Sleep(time.Hour) {
		t.Fatal("a Wake before the sleep did not end it")
	}
	start = time.Now()
	if s.Sleep(2 * time.Millisecond) {
		t.Fatal("a second Wake before the sleep was kept")
	}
	if d := time.Since(start); d < 2*time.Millisecond {
		t.Fatalf("slept %v, want 2ms", d)
	}
}
