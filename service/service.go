package service

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Errors a session returns.
var (
	// ErrClosing: the daemon stops and the service's lanes are empty;
	// Close the session.
	ErrClosing = errors.New("service: the daemon is stopping")
	// ErrBusy: the daemon has not yet taken what the session gave it
	// (its ret or tx ring is full); call again.
	ErrBusy = errors.New("service: the daemon's ring is full; try again")
	// ErrDaemonGone: the daemon the session attached to has exited (a
	// crash, or a kill): Close the session and the Daemon, and Join the
	// one that replaces it.
	ErrDaemonGone = errors.New("service: the daemon has exited")
	// ErrAttached: another process holds the service.
	ErrAttached = errors.New("service: another process is attached to the service")
	// ErrNoService: the daemon has no process service of that name.
	ErrNoService = errors.New("service: no such process service")
)

// Daemon is this process's DPDK secondary EAL, joined to a running
// cephdpdkd (the primary). One per process.
type Daemon struct {
	eal *pmd.EAL
}

// JoinConfig says which daemon to join.
type JoinConfig struct {
	// FilePrefix is the daemon's eal.file_prefix.
	FilePrefix string
	// Lcores is the EAL --lcores map of this process; default: lcore 0
	// on every CPU this process may run on, so that nothing is pinned
	// next to the daemon's poll loops.
	Lcores string
	// EALArgs are added to the EAL command line; default:
	// --log-level=*:warning.
	EALArgs []string
}

// Join starts a secondary EAL on the daemon's memory.
func Join(cfg JoinConfig) (*Daemon, error) {
	if cfg.Lcores == "" {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return nil, fmt.Errorf("service: CPUs of this process: %w", err)
		}
		var cpus []string
		for i := 0; i < len(set)*64; i++ {
			if set.IsSet(i) {
				cpus = append(cpus, strconv.Itoa(i))
			}
		}
		cfg.Lcores = "0@(" + strings.Join(cpus, ",") + ")"
	}
	if cfg.EALArgs == nil {
		cfg.EALArgs = []string{"--log-level=*:warning"}
	}
	eal, err := pmd.InitEAL(pmd.EALConfig{Lcores: cfg.Lcores, FilePrefix: cfg.FilePrefix, Secondary: true, ExtraArgs: cfg.EALArgs})
	if err != nil {
		return nil, fmt.Errorf("service: join the daemon on file prefix %q: %w", cfg.FilePrefix, err)
	}
	return &Daemon{eal: eal}, nil
}

// Close leaves the daemon. Close every session first.
func (d *Daemon) Close() error { return d.eal.Close() }

// Session is a service held by this process: it receives the
// service's packets zero-copy, one burst at a time, and sends frames
// out the daemon's port. One goroutine uses a session.
type Session struct {
	name  string
	p     *pmd.ProcessSession
	owner uint64
	n     int
	// idle counts the empty Recvs since the daemon was last seen alive;
	// gone is set once it was seen dead.
	idle int
	gone bool
}

// daemonCheckEvery is how many empty Recvs pass between two checks that
// the daemon still runs (a /proc read): a few milliseconds of idle
// polling, and nothing while packets flow.
const daemonCheckEvery = 1 << 14

// attachWait bounds how long Attach waits for a control block the
// daemon is still filling in.
const attachWait = time.Second

// Attach claims the named service for this process. It fails with
// ErrAttached while another live process holds it; a dead holder's
// session is freed by the daemon within its check interval.
func (d *Daemon) Attach(name string) (*Session, error) {
	p, err := pmd.LookupProcessSession(ControlName(name))
	for deadline := time.Now().Add(attachWait); errors.Is(err, pmd.ErrControlNotReady) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		p, err = pmd.LookupProcessSession(ControlName(name))
	}
	switch {
	case err == nil:
	case errors.Is(err, pmd.ErrNoControl), errors.Is(err, pmd.ErrControlNotReady):
		return nil, fmt.Errorf("%w: %q (no control block %s)", ErrNoService, name, ControlName(name))
	default:
		return nil, fmt.Errorf("service: %q: %w", name, err)
	}
	pid := os.Getpid()
	start, err := StartTime(pid)
	if err != nil {
		p.Free()
		return nil, fmt.Errorf("service: own start time: %w", err)
	}
	s := &Session{name: name, p: p, owner: Owner(pid, start)}
	if holder, ok := p.Claim(s.owner); !ok {
		p.Free()
		return nil, fmt.Errorf("%w: %q is held by pid %d", ErrAttached, name, uint32(holder))
	}
	if p.Closing() {
		p.Detach(s.owner)
		p.Free()
		return nil, ErrClosing
	}
	return s, nil
}

// daemonAlive reports whether the daemon that published the control
// block still runs: its pid, with the start time it recorded.
func (s *Session) daemonAlive() bool {
	d := s.p.Daemon()
	st, err := StartTime(int(uint32(d)))
	return err == nil && uint32(st) == uint32(d>>32)
}

// Name returns the service's name.
func (s *Session) Name() string { return s.name }

// Burst returns the most packets one Recv takes: the daemon's burst_size.
func (s *Session) Burst() int { return s.p.Burst() }

// MaxFrame returns the longest frame Send takes.
func (s *Session) MaxFrame() int { return s.p.DataRoom() }

// Recv gives back the burst held, then receives up to max packets (at
// most Burst) from the service's lanes, and returns how many. Frame reads
// them until the next Recv, Release, Forward or Close. It returns 0 when
// nothing waits, ErrBusy when the daemon has not yet taken the last burst
// back, ErrClosing once the daemon stops and nothing is left, and
// ErrDaemonGone when, after a while without packets, the daemon is found
// to have exited without stopping (killed, crashed).
func (s *Session) Recv(max int) (int, error) {
	s.n = 0
	rc, err := s.p.Recv(max)
	if rc > 0 {
		s.n, s.idle = rc, 0
		return rc, nil
	}
	// Nothing: an idle service, a daemon that has not taken the last
	// burst back yet, or one that is gone.
	if s.idle++; s.idle >= daemonCheckEvery {
		s.idle = 0
		if !s.daemonAlive() {
			s.gone = true
			return 0, ErrDaemonGone
		}
	}
	switch {
	case errors.Is(err, pmd.ErrRingFull):
		return 0, ErrBusy
	case errors.Is(err, pmd.ErrShutdown):
		return 0, ErrClosing
	}
	return 0, nil
}

// Len returns the number of packets held.
func (s *Session) Len() int { return s.n }

// Bytes returns the total length of the packets held.
func (s *Session) Bytes() uint64 {
	if s.n == 0 {
		return 0
	}
	return s.p.Bytes()
}

// Frame returns packet i's first segment, over mbuf memory: the whole
// frame unless it is a chain (PktLen says).
func (s *Session) Frame(i int) []byte { return s.p.Frame(i) }

// PktLen returns packet i's length, all segments together.
func (s *Session) PktLen(i int) int { return s.p.PktLen(i) }

// Release gives the burst held back to the daemon now.
func (s *Session) Release() error {
	s.n = 0
	if s.p.GiveBack() != nil {
		return ErrBusy
	}
	return nil
}

// Forward sends the burst held out the daemon's port, zero-copy (frames
// may have been changed in place), all of it or, with ErrBusy, none.
func (s *Session) Forward() (int, error) {
	rc, err := s.p.Forward()
	if err != nil {
		return 0, ErrBusy
	}
	s.n = 0
	return rc, nil
}

// Send copies frames into fresh mbufs the daemon supplies and queues
// them for its port, and returns how many it took: a prefix of frames.
// Fewer than all (0 included) means the daemon's tx ring or supply is
// short for now; call again.
func (s *Session) Send(frames [][]byte) (int, error) {
	n := min(len(frames), pmd.MaxProcessBurst)
	for i, f := range frames[:n] {
		if len(f) == 0 || len(f) > s.MaxFrame() {
			return 0, fmt.Errorf("service: frame %d is %d bytes: want 1..%d", i, len(f), s.MaxFrame())
		}
	}
	return s.p.Send(frames[:n]), nil
}

// Close gives back what the session holds and frees the service for
// another process. It waits (up to a second) for room in the daemon's
// ret ring.
func (s *Session) Close() error {
	if s.p == nil {
		return nil
	}
	s.n = 0
	if s.gone {
		// Nobody to give anything back to: the daemon's memory goes
		// with this process's mappings.
		s.p.Free()
		s.p = nil
		return nil
	}
	var err error
	for deadline := time.Now().Add(time.Second); ; runtime.Gosched() {
		if err = s.p.Detach(s.owner); !errors.Is(err, pmd.ErrRingFull) || time.Now().After(deadline) {
			break
		}
	}
	s.p.Free()
	s.p = nil
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pmd.ErrRingFull):
		return fmt.Errorf("service: detach %q: %w (the daemon frees what this process holds once it exits)", s.name, ErrBusy)
	default:
		return fmt.Errorf("service: detach %q: the session is no longer this process's", s.name)
	}
}
