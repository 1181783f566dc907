package roctest

import (
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
)

// timerNode has work until its count runs out, then a deadline.
type timerNode struct {
	work     int
	deadline time.Time
	polls    []time.Time
}

func (t *timerNode) Poll(now time.Time) int {
	t.polls = append(t.polls, now)
	if t.work > 0 {
		t.work--
		return 1
	}
	if !t.deadline.IsZero() && !now.Before(t.deadline) {
		t.deadline = time.Time{}
		return 1
	}
	return 0
}

func (t *timerNode) NextDeadline() (time.Time, bool) { return t.deadline, !t.deadline.IsZero() }

func TestClock(t *testing.T) {
	for _, tc := range []struct {
		name     string
		work     int
		deadline time.Duration // from Start; 0: none
		want     time.Duration // where Settle leaves the clock: a µs past each busy round
	}{
		{"idle", 0, 0, 0},
		{"busy", 3, 0, 3 * time.Microsecond},
		{"timer", 0, time.Second, time.Second + 2*time.Microsecond},
		{"busy then timer", 2, time.Millisecond, time.Millisecond + 2*time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := New(t, memlink.Config{})
			nd := &timerNode{work: tc.work}
			if tc.deadline > 0 {
				nd.deadline = Start.Add(tc.deadline)
			}
			n.Add(nd)
			n.Settle()
			if got := n.Now.Sub(Start); got != tc.want {
				t.Errorf("clock at %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRunStopsWhenDone(t *testing.T) {
	n := New(t, memlink.Config{})
	nd := &timerNode{deadline: Start.Add(time.Second)}
	n.Add(nd)
	n.Run(10, func() bool { return nd.deadline.IsZero() })
	if want := Start.Add(time.Second + time.Microsecond); !n.Now.Equal(want) {
		t.Errorf("clock at %v, want %v: a µs past the deadline's round", n.Now, want)
	}
}

func TestStepAndPollFuncs(t *testing.T) {
	n := NewBare(t)
	var order []string
	n.Add(PollFunc(func(time.Time) int { order = append(order, "a"); return 0 }))
	n.AddFunc(func(time.Time) int { order = append(order, "b"); return 0 })
	// A PollFunc is not a Timer: nothing moves the clock but Step.
	if _, ok := n.Deadline(); ok {
		t.Fatal("a deadline without timers")
	}
	rounds := 0
	n.Step(10*time.Microsecond, 5, func() bool { rounds++; return rounds == 3 })
	if got := n.Now.Sub(Start); got != 20*time.Microsecond {
		t.Errorf("clock moved %v, want 20µs", got)
	}
	if len(order) != 6 || order[0] != "a" || order[1] != "b" {
		t.Errorf("polled %v", order)
	}
}

func TestPairSides(t *testing.T) {
	n := New(t, memlink.Config{})
	a, b := Pair(n, func(s Side) (Side, error) { return s, nil })
	if a.Index != 0 || b.Index != 1 || a.IP != IPA || b.MAC != MACB || a.Link == nil || b.Link == nil {
		t.Errorf("sides %+v, %+v", a, b)
	}
}

func TestPattern(t *testing.T) {
	a, b, c := make([]byte, 100), make([]byte, 100), make([]byte, 100)
	Pattern(a, 1)
	Pattern(b, 1)
	Pattern(c, 2)
	if string(a) != string(b) || string(a) == string(c) {
		t.Error("pattern is not a function of its seed")
	}
}
