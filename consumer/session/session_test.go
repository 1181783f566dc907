package session_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/consumer/session"
)

// fakeCtl is a control block the test writes as processes and the
// serving loop would.
type fakeCtl struct {
	owner, claims, lastOwner, heartbeat uint64
	pending                             bool
	asked                               int
	recovery                            [3]uint64
}

func (c *fakeCtl) Owner() uint64        { return c.owner }
func (c *fakeCtl) Claims() uint64       { return c.claims }
func (c *fakeCtl) LastOwner() uint64    { return c.lastOwner }
func (c *fakeCtl) Heartbeat() uint64    { return c.heartbeat }
func (c *fakeCtl) RecoverPending() bool { return c.pending }
func (c *fakeCtl) AskRecover()          { c.asked++; c.pending = true }
func (c *fakeCtl) LastRecovery() (held, unacked, rings uint64) {
	return c.recovery[0], c.recovery[1], c.recovery[2]
}

// fakeProcs are the system's processes, by session word: true while
// running. A word it does not hold is a reused pid.
type fakeProcs struct {
	running map[uint64]bool
	open    int // watches not closed
}

type fakeWatch struct {
	p     *fakeProcs
	owner uint64
}

func (p *fakeProcs) Watch(owner uint64) (session.Watch, error) {
	if !p.running[owner] {
		return nil, errors.New("no such process")
	}
	p.open++
	return fakeWatch{p, owner}, nil
}

func (w fakeWatch) Exited() bool { return !w.p.running[w.owner] }
func (w fakeWatch) Close()       { w.p.open-- }

// Two processes' session words: pid and start time.
const (
	procA = 0x0000_0001_0000_0064 // pid 100
	procB = 0x0000_0002_0000_00c8 // pid 200
)

// step changes the world, then checks: want is what Check must report,
// attached what Attached must say after.
type step struct {
	what     string
	change   func(*fakeCtl, *fakeProcs)
	want     session.Event
	attached bool
}

func TestCheck(t *testing.T) {
	claim := func(owner uint64) func(*fakeCtl, *fakeProcs) {
		return func(c *fakeCtl, p *fakeProcs) { c.owner, c.claims = owner, c.claims+1; p.running[owner] = true }
	}
	detach := func(c *fakeCtl, _ *fakeProcs) { c.lastOwner, c.owner = c.owner, 0 }
	nothing := func(*fakeCtl, *fakeProcs) {}
	tests := []struct {
		name  string
		steps []step
	}{
		{"attach, beat, detach", []step{
			{"claim", claim(procA), session.Event{Kind: session.Attached, PID: 100}, true},
			{"heartbeat", func(c *fakeCtl, _ *fakeProcs) { c.heartbeat++ }, session.Event{}, true},
			{"detach", detach, session.Event{Kind: session.Detached, PID: 100}, false},
			{"quiet", nothing, session.Event{}, false},
		}},
		{"attach and detach between checks", []step{
			{"pass", func(c *fakeCtl, _ *fakeProcs) { c.claims, c.lastOwner = 1, procB }, session.Event{Kind: session.Passed, PID: 200}, false},
			{"quiet", nothing, session.Event{}, false},
		}},
		{"death and recovery", []step{
			{"claim", claim(procA), session.Event{Kind: session.Attached, PID: 100}, true},
			{"exit", func(_ *fakeCtl, p *fakeProcs) { p.running[procA] = false }, session.Event{Kind: session.Died, PID: 100}, false},
			{"loop not yet there", nothing, session.Event{}, false},
			{"loop recovered", func(c *fakeCtl, _ *fakeProcs) { c.pending, c.owner, c.recovery = false, 0, [3]uint64{3, 1, 7} },
				session.Event{Kind: session.Recovered, PID: 100, Held: 3, Unacked: 1, Rings: 7}, false},
			{"quiet", nothing, session.Event{}, false},
		}},
		{"reused pid", []step{
			{"claim by a word no process has", func(c *fakeCtl, _ *fakeProcs) { c.owner, c.claims = procA, 1 },
				session.Event{Kind: session.Died, PID: 100}, false},
		}},
		{"owner replaced between checks", []step{
			{"claim", claim(procA), session.Event{Kind: session.Attached, PID: 100}, true},
			{"another claims", claim(procB), session.Event{Kind: session.Attached, PID: 200}, true},
			{"detach", detach, session.Event{Kind: session.Detached, PID: 200}, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctl, procs := &fakeCtl{}, &fakeProcs{running: map[uint64]bool{}}
			s := session.New(ctl, procs)
			now := time.Unix(1000, 0)
			for _, st := range tt.steps {
				asked := ctl.asked
				st.change(ctl, procs)
				now = now.Add(time.Second)
				if got := s.Check(now); got != st.want {
					t.Fatalf("%s: Check = %+v, want %+v", st.what, got, st.want)
				}
				if att, pid := s.Attached(); att != st.attached || att && pid != st.want.PID && st.want.Kind == session.Attached {
					t.Errorf("%s: Attached = %v, pid %d; want %v", st.what, att, pid, st.attached)
				}
				if died := st.want.Kind == session.Died; (ctl.asked > asked) != died {
					t.Errorf("%s: recovery asked %d times, died %v", st.what, ctl.asked-asked, died)
				}
				if age := s.HeartbeatAge(now); st.attached && age != 0 {
					t.Errorf("%s: heartbeat %v old, want 0: the beat changed at this check", st.what, age)
				}
			}
			s.End()
			if procs.open != 0 {
				t.Errorf("%d process watches left open", procs.open)
			}
		})
	}
}

// The heartbeat's age grows while the process does not call in, and
// restarts when it does.
func TestHeartbeatAge(t *testing.T) {
	ctl, procs := &fakeCtl{owner: procA, claims: 1}, &fakeProcs{running: map[uint64]bool{procA: true}}
	s := session.New(ctl, procs)
	t0 := time.Unix(1000, 0)
	s.Check(t0)
	for _, tt := range []struct {
		after time.Duration
		beat  bool
		want  time.Duration
	}{
		{time.Second, false, time.Second},
		{2 * time.Second, false, 2 * time.Second},
		{3 * time.Second, true, 0},
		{5 * time.Second, false, 2 * time.Second},
	} {
		if tt.beat {
			ctl.heartbeat++
		}
		now := t0.Add(tt.after)
		s.Check(now)
		if age := s.HeartbeatAge(now); age != tt.want {
			t.Errorf("at +%v: age %v, want %v", tt.after, age, tt.want)
		}
	}
}
