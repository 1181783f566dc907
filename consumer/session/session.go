// Package session follows a service process's session as the daemon
// sees it: which process holds the service, whether it is still alive
// (and the same process: a reused pid does not pass), its heartbeat, and
// what the serving loop recovered after it died. It is plain Go over two
// small interfaces: the service's control block (Control, pmd's
// ProcessHost in the daemon) and the system's processes (Procs, pidfds
// and /proc in the daemon), which tests fake.
package session

import (
	"sync/atomic"
	"time"
)

// Control is a service's control block, as the daemon reads it.
type Control interface {
	Owner() uint64     // the session word of the process holding the service; 0: none
	Claims() uint64    // how many claims have succeeded
	LastOwner() uint64 // the session word of the last process to hold it
	Heartbeat() uint64 // advanced by the attached process
	// RecoverPending reports whether the serving loop has yet to recover
	// what a dead owner left; AskRecover asks it to.
	RecoverPending() bool
	AskRecover()
	// LastRecovery is what the loop's last recovery freed: mbufs the
	// process held, mbufs it was taking from a ring, and what was left
	// in the service's rings.
	LastRecovery() (held, unacked, rings uint64)
}

// Procs finds the processes that claim sessions.
type Procs interface {
	// Watch opens a handle on the process that claimed owner; it fails
	// when that process is gone, or its pid names another process now.
	Watch(owner uint64) (Watch, error)
}

// Watch is a handle on one process.
type Watch interface {
	Exited() bool // without blocking
	Close()
}

// PID returns the pid in a session word.
func PID(owner uint64) int { return int(uint32(owner)) }

// Event is what Check found.
type Event struct {
	Kind EventKind
	PID  int
	// Held, Unacked and Rings are what recovery freed
	// (Control.LastRecovery).
	Held, Unacked, Rings uint64
}

// EventKind says what happened to a service's session.
type EventKind int

// Session events.
const (
	NoEvent   EventKind = iota
	Attached            // a process claimed the service
	Detached            // it let go, holding nothing
	Died                // it is gone: the serving loop recovers
	Recovered           // the loop freed what it left
	Passed              // a process attached and detached between two checks
)

// Supervisor follows one service's session. Check is for one goroutine;
// Attached and HeartbeatAge for any.
type Supervisor struct {
	ctl   Control
	procs Procs

	attached atomic.Bool
	pid      atomic.Int64
	beat     atomic.Int64 // unix nanoseconds of the last heartbeat change

	// Check's own state.
	session  uint64 // the owner it follows
	claims   uint64 // the control block's claims at the last Check
	watch    Watch
	dying    bool
	lastBeat uint64
}

// New returns a supervisor of ctl's session.
func New(ctl Control, procs Procs) *Supervisor { return &Supervisor{ctl: ctl, procs: procs} }

// Attached reports whether a live process holds the service, and its pid.
func (s *Supervisor) Attached() (bool, int) { return s.attached.Load(), int(s.pid.Load()) }

// HeartbeatAge returns how long ago the attached process last called in.
func (s *Supervisor) HeartbeatAge(now time.Time) time.Duration {
	if !s.attached.Load() {
		return 0
	}
	return now.Sub(time.Unix(0, s.beat.Load()))
}

// Check follows the session: a new owner is checked for being alive,
// an owner's exit asks the serving loop to recover. One goroutine calls
// it, periodically; it does not block.
func (s *Supervisor) Check(now time.Time) Event {
	if s.ctl.RecoverPending() {
		return Event{} // the loop has not got to it yet
	}
	owner := s.ctl.Owner()
	if s.dying {
		if owner != 0 && owner == s.session {
			return Event{} // cannot happen: the loop frees the session
		}
		pid := PID(s.session)
		s.End()
		held, unacked, rings := s.ctl.LastRecovery()
		return Event{Kind: Recovered, PID: pid, Held: held, Unacked: unacked, Rings: rings}
	}
	claims := s.ctl.Claims()
	switch {
	case owner == 0:
		if s.session != 0 {
			pid := PID(s.session)
			s.End()
			s.claims = claims
			return Event{Kind: Detached, PID: pid}
		}
		if claims != s.claims {
			s.claims = claims
			return Event{Kind: Passed, PID: PID(s.ctl.LastOwner())}
		}
	case owner != s.session:
		if s.session != 0 {
			s.End()
		}
		s.session, s.claims = owner, claims
		w, err := s.procs.Watch(owner)
		if err != nil {
			return s.die(PID(owner))
		}
		s.watch = w
		s.pid.Store(int64(PID(owner)))
		s.attached.Store(true)
		s.lastBeat = s.ctl.Heartbeat()
		s.beat.Store(now.UnixNano())
		return Event{Kind: Attached, PID: PID(owner)}
	default:
		if s.watch.Exited() {
			return s.die(PID(owner))
		}
		if b := s.ctl.Heartbeat(); b != s.lastBeat {
			s.lastBeat = b
			s.beat.Store(now.UnixNano())
		}
	}
	return Event{}
}

// die asks the serving loop to recover what the owner left.
func (s *Supervisor) die(pid int) Event {
	s.dying = true
	s.attached.Store(false)
	s.ctl.AskRecover()
	return Event{Kind: Died, PID: pid}
}

// End forgets the session followed: its process's handle is closed.
func (s *Supervisor) End() {
	if s.watch != nil {
		s.watch.Close()
		s.watch = nil
	}
	s.session, s.dying = 0, false
	s.attached.Store(false)
	s.pid.Store(0)
}
