package app

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// Session service defaults.
const (
	DefaultEchoBuffer = 64 << 10
	DefaultLinger     = time.Second
	// sessionBudget bounds the Recv/Send rounds one session gets per
	// Poll, so that a busy session cannot starve the others.
	sessionBudget = 8
)

// EchoConfig configures Echo and Discard.
type EchoConfig struct {
	// BufferSize is what one Recv takes at most: Echo's per-session
	// buffer, Discard's scratch buffer (DefaultEchoBuffer if 0). Echo
	// receives nothing more while any of it waits to be sent back.
	BufferSize int
	// Linger bounds how long, after the session is closed for sending,
	// the service waits for the peer to acknowledge everything sent
	// before it reports the session done (DefaultLinger if 0). A Ceph
	// peer that closed first has already put its QP in ERROR and never
	// acknowledges the close.
	Linger time.Duration
	// StallTimeout fails a session whose unsent or unacknowledged data
	// made no progress for this long (0: never).
	StallTimeout time.Duration
}

// Echo sends back every byte its sessions receive, in order. When the
// peer closes its stream, Echo finishes sending what it received, closes
// its own and reports the session done.
type Echo struct {
	*sessionServer // Attach, Detach, Poll, Stats
}

var _ SessionService = (*Echo)(nil)

// NewEcho returns an echo service.
func NewEcho(cfg EchoConfig) *Echo { return &Echo{newSessionServer(cfg, false)} }

// Discard receives and counts what its sessions send and sends nothing
// back; when the peer closes, Discard closes too and reports the session
// done.
type Discard struct {
	*sessionServer // Attach, Detach, Poll, Stats
}

var _ SessionService = (*Discard)(nil)

// NewDiscard returns a discard service.
func NewDiscard(cfg EchoConfig) *Discard { return &Discard{newSessionServer(cfg, true)} }

// Stats implements SessionService.
func (ss *sessionServer) Stats() Stats { return ss.cnt.snapshot() }

// sessionServer runs Echo and Discard.
type sessionServer struct {
	cfg      EchoConfig
	discard  bool
	name     string
	scratch  []byte // Discard's receive buffer, shared by all sessions
	sessions []*streamSession
	ended    []*streamSession
	cnt      counters
}

type streamSession struct {
	s      *session.Session
	done   func(error)
	buf    []byte
	pend   []byte // received, not yet sent back
	eof    bool   // the peer closed
	closed bool   // our close is posted
	closAt time.Time
	over   bool
	err    error
	stall  stallClock
	sqFree int // send queue slots free at the last look, to see acknowledgements
}

func newSessionServer(cfg EchoConfig, discard bool) *sessionServer {
	orDefault(&cfg.BufferSize, DefaultEchoBuffer)
	orDefault(&cfg.Linger, DefaultLinger)
	ss := &sessionServer{cfg: cfg, discard: discard, name: "echo"}
	if discard {
		ss.name = "discard"
		ss.scratch = make([]byte, cfg.BufferSize)
	}
	return ss
}

// Attach implements SessionService; Echo allocates the session's buffer.
func (ss *sessionServer) Attach(s *session.Session, done func(error)) error {
	if s == nil {
		return fmt.Errorf("app: %s: attach nil session: %w", ss.name, roce.ErrInvalidArgument)
	}
	for _, x := range ss.sessions {
		if x.s == s {
			return fmt.Errorf("app: %s: session on qp %d attached twice: %w", ss.name, s.QP().QPN(), roce.ErrInvalidState)
		}
	}
	st := &streamSession{s: s, done: done, buf: ss.scratch, sqFree: s.QP().SendQueueFree()}
	if !ss.discard {
		st.buf = make([]byte, ss.cfg.BufferSize)
	}
	ss.sessions = append(ss.sessions, st)
	ss.cnt.accepted.Add(1)
	return nil
}

// Detach implements SessionService.
func (ss *sessionServer) Detach(s *session.Session) {
	for i, st := range ss.sessions {
		if st.s != s {
			continue
		}
		last := len(ss.sessions) - 1
		ss.sessions[i] = ss.sessions[last]
		ss.sessions[last] = nil
		ss.sessions = ss.sessions[:last]
		if !st.over {
			st.over = true
			ss.cnt.finished(st.s.Err())
		}
		st.done = nil // detached: the owner knows
		ss.cnt.closed.Add(1)
		return
	}
}

// Poll implements SessionService.
func (ss *sessionServer) Poll(now time.Time) int {
	work := 0
	for i := 0; i < len(ss.sessions); {
		st := ss.sessions[i]
		n, finished, err := ss.step(st, now)
		work += n
		if !finished {
			i++
			continue
		}
		// Done: the session leaves the service now; its owner tears it
		// down from the callback.
		st.over, st.err = true, err
		ss.cnt.finished(err)
		ss.cnt.closed.Add(1)
		last := len(ss.sessions) - 1
		ss.sessions[i] = ss.sessions[last]
		ss.sessions[last] = nil
		ss.sessions = ss.sessions[:last]
		ss.ended = append(ss.ended, st)
	}
	for i := 0; i < len(ss.ended); i++ {
		st := ss.ended[i]
		ss.ended[i] = nil
		if st.done != nil {
			st.done(st.err)
		}
		work++
	}
	ss.ended = ss.ended[:0]
	return work
}

// step moves what it can for one session. It reports whether the
// session is finished, and why if it failed.
func (ss *sessionServer) step(st *streamSession, now time.Time) (int, bool, error) {
	s, qp := st.s, st.s.QP()
	work := 0
	for range sessionBudget {
		if len(st.pend) > 0 {
			k, err := s.Send(st.pend)
			if k > 0 {
				st.pend = st.pend[k:]
				ss.cnt.out(k)
				work += k
			}
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				return work, true, fmt.Errorf("app: %s on qp %d: %w", ss.name, qp.QPN(), err)
			}
			if k == 0 {
				break
			}
			continue
		}
		if st.eof {
			break
		}
		k, err := s.Recv(st.buf)
		if k > 0 {
			ss.cnt.in(k)
			work += k
			if !ss.discard {
				st.pend = st.buf[:k]
			}
		}
		if err == io.EOF {
			st.eof = true
			work++
			break
		}
		if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
			return work, true, fmt.Errorf("app: %s on qp %d: %w", ss.name, qp.QPN(), err)
		}
		if k == 0 {
			break
		}
	}
	if st.eof && len(st.pend) == 0 && !st.closed {
		err := s.Close()
		switch {
		case err == nil:
			st.closed, st.closAt = true, now
			work++
		case !errors.Is(err, roce.ErrWouldBlock):
			return work, true, fmt.Errorf("app: %s on qp %d: close: %w", ss.name, qp.QPN(), err)
		}
	}
	free, depth := qp.SendQueueFree(), qp.Cap().MaxSendWR
	acked := free != st.sqFree
	st.sqFree = free
	if st.closed && (free == depth || now.Sub(st.closAt) >= ss.cfg.Linger) {
		return work, true, nil
	}
	if err := qpFailed(qp); err != nil {
		return work, true, fmt.Errorf("app: %s: %w", ss.name, err)
	}
	busy := len(st.pend) > 0 || free < depth
	if err := st.stall.check(now, ss.cfg.StallTimeout, busy, work > 0 || acked); err != nil {
		return work, true, fmt.Errorf("app: %s on qp %d: %w", ss.name, qp.QPN(), err)
	}
	return work, false, nil
}
