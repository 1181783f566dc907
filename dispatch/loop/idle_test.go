package loop

import (
	"testing"
	"time"
)

// fakeWaiter records the sleeps asked for, and wakes the ones listed.
type fakeWaiter struct {
	got  []time.Duration
	wake map[int]bool // by call number
}

func (w *fakeWaiter) Sleep(d time.Duration) bool {
	w.got = append(w.got, d)
	return w.wake[len(w.got)-1]
}

func (w *fakeWaiter) Wake() {}

func TestIdleSleep(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		name string
		work []int // per iteration
		wake map[int]bool
		want []time.Duration
	}{
		{"spins until After", []int{0, 0, 0}, nil, []time.Duration{10 * us}},
		{"doubles up to Max", []int{0, 0, 0, 0, 0, 0, 0}, nil, []time.Duration{10 * us, 20 * us, 40 * us, 50 * us, 50 * us}},
		{"work resets", []int{0, 0, 0, 0, 5, 0, 0, 0}, nil, []time.Duration{10 * us, 20 * us, 10 * us}},
		{"a wake-up starts over", []int{0, 0, 0, 0, 0}, map[int]bool{1: true}, []time.Duration{10 * us, 20 * us, 10 * us}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWaiter{wake: tc.wake}
			s := sleeper{IdleSleep: IdleSleep{After: 3, Min: 10 * us, Max: 50 * us, Sleeper: w}}
			for _, n := range tc.work {
				if s.due(n) {
					s.sleep()
				}
			}
			if len(w.got) != len(tc.want) {
				t.Fatalf("sleeps %v, want %v", w.got, tc.want)
			}
			for i := range w.got {
				if w.got[i] != tc.want[i] {
					t.Fatalf("sleeps %v, want %v", w.got, tc.want)
				}
			}
			if s.sleeps != uint64(len(tc.want)) {
				t.Errorf("counted %d sleeps, want %d", s.sleeps, len(tc.want))
			}
		})
	}
	// Max 0: never.
	s := sleeper{IdleSleep: IdleSleep{After: 1, Min: us}}
	for range 10 {
		if s.due(0) {
			t.Fatal("a loop without idle_sleep slept")
		}
	}
}

// TestTimerSleeper: a Wake ends a sleep at once, and one Wake before a
// sleep ends the next one; without Wake the timer does.
func TestTimerSleeper(t *testing.T) {
	testSleeper(t, NewTimerSleeper())
}

// testSleeper checks a Sleeper's contract.
func testSleeper(t *testing.T, s Sleeper) {
	t.Helper()
	go func() {
		time.Sleep(10 * time.Millisecond)
		s.Wake()
	}()
	if !s.Sleep(time.Hour) {
		t.Fatal("a Wake did not end the sleep")
	}
	s.Wake()
	s.Wake() // never blocks
	if !s.Sleep(time.Hour) {
		t.Fatal("a Wake before the sleep did not end it")
	}
	start := time.Now()
	if s.Sleep(2 * time.Millisecond) {
		t.Fatal("a second Wake before the sleep was kept")
	}
	if d := time.Since(start); d < 2*time.Millisecond {
		t.Fatalf("slept %v, want 2ms", d)
	}
}
