package consumer

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/consumer/session"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/pmd"
	"github.com/cephdpdkd/cephdpdkd/service"
)

// ProcessConfig wires the daemon's side of a service left to a service
// process (package service).
type ProcessConfig struct {
	Service string
	// Lanes are the service's lanes, which the process drains.
	Lanes *dispatch.RingSet
	// TxRing, RetRing and BufRing name the rings the daemon creates, of
	// RingSize (a power of two).
	TxRing, RetRing, BufRing string
	RingSize                 int
	Pool                     *mempool.Pool
	Port, Queue              uint16
	Burst                    int
}

// Process is the daemon's side of a service process: the service's
// control block in a memzone, its tx, ret and buf rings, a native
// consumer the owning poll loop runs (transmit, free, supply, recover),
// and the liveness check (Check) a supervisor calls.
//
// Counts are what the process reported receiving (Packets, Bytes) and
// the mbufs the daemon freed for it after it died (Drops).
type Process struct {
	h     *pmd.ProcessHost
	rings []*dispatch.Ring // tx, ret, buf
	name  string
	Counts
	// Sent counts the frames the process sent that went out the port.
	Sent      Counts
	Recovered atomic.Uint64 // mbufs freed after processes died
	sup       *session.Supervisor
}

// NewProcess creates the service's control block and rings.
func NewProcess(cfg ProcessConfig) (_ *Process, err error) {
	lanes := cfg.Lanes.Rings()
	if len(lanes) > pmd.MaxProcessLanes {
		return nil, fmt.Errorf("consumer: service %q has %d lanes; a service process takes at most %d", cfg.Service, len(lanes), pmd.MaxProcessLanes)
	}
	if cfg.Burst < 1 || cfg.Burst > pmd.MaxProcessBurst {
		return nil, fmt.Errorf("consumer: burst %d outside 1..%d", cfg.Burst, pmd.MaxProcessBurst)
	}
	p := &Process{name: cfg.Service}
	defer func() {
		if err != nil {
			p.free()
		}
	}()
	for _, name := range []string{cfg.TxRing, cfg.RetRing, cfg.BufRing} {
		r, err := dispatch.NewRing(name, cfg.RingSize, -1)
		if err != nil {
			return nil, err
		}
		p.rings = append(p.rings, r)
	}
	// A process tells by this that the daemon it attached to is gone.
	self := os.Getpid()
	start, err := service.StartTime(self)
	if err != nil {
		return nil, fmt.Errorf("consumer: service %s: own start time: %w", cfg.Service, err)
	}
	p.h, err = pmd.NewProcessHost(pmd.ProcessHostConfig{
		Control: service.ControlName(cfg.Service),
		Lanes:   cfg.Lanes,
		Tx:      p.rings[0], Ret: p.rings[1], Buf: p.rings[2],
		Pool: cfg.Pool.C(),
		Port: cfg.Port, Queue: cfg.Queue,
		Burst:  cfg.Burst,
		Grant:  cfg.RingSize - 1,
		Daemon: service.Owner(self, start),
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: the control block %q of service %q: %w", service.ControlName(cfg.Service), cfg.Service, err)
	}
	p.sup = session.New(control{p.h}, procs{})
	return p, nil
}

var _ dispatch.NativeConsumer = (*Process)(nil)

// Native returns the daemon's side as the C consumer the poll loop runs.
func (p *Process) Native() *pmd.Native { return p.h.Native() }

// Poll runs one turn outside a poll loop.
func (p *Process) Poll() int {
	k := p.h.Native().Run()
	p.Publish()
	return k
}

// Publish makes the counters visible; the loop calls it.
func (p *Process) Publish() {
	rxp, rxb := p.h.Received()
	p.Packets.Store(rxp)
	p.Bytes.Store(rxb)
	txp, txb := p.h.Sent()
	p.Sent.Packets.Store(txp)
	p.Sent.Bytes.Store(txb)
	t, _ := p.h.Recovered()
	total := t.Held + t.Unacked + t.Rings
	p.Recovered.Store(total)
	p.Drops.Store(total)
}

// Attached reports whether a live process holds the service, and its pid.
func (p *Process) Attached() (bool, int) { return p.sup.Attached() }

// HeartbeatAge returns how long ago the attached process last called in.
func (p *Process) HeartbeatAge(now time.Time) time.Duration { return p.sup.HeartbeatAge(now) }

// ProcessEvent is what Check found (session.Event).
type ProcessEvent = session.Event

// ProcessEventKind says what happened to a service's session.
type ProcessEventKind = session.EventKind

// Session events.
const (
	NoEvent   = session.NoEvent
	Attached  = session.Attached  // a process claimed the service
	Detached  = session.Detached  // it let go, holding nothing
	Died      = session.Died      // it is gone: the serving loop recovers
	Recovered = session.Recovered // the loop freed what it left
	Passed    = session.Passed    // a process attached and detached between two checks
)

// SetClosing tells the attached process (and any that attaches later)
// that the daemon stops: it drains the lanes, gives back what it holds
// and detaches. The supply of fresh mbufs stops.
func (p *Process) SetClosing() { p.h.SetClosing() }

// Busy reports whether a process holds the session, or a recovery is
// pending: the daemon's drain at stop waits for neither.
func (p *Process) Busy() bool {
	return p.h.Owner() != 0 || p.h.RecoverPending()
}

// Check follows the session (session.Supervisor.Check): a new owner is
// checked for being alive (pidfd_open and its start time, so that a
// reused pid does not pass), an owner's exit asks the serving loop to
// recover. One goroutine calls it, periodically; it does not block.
func (p *Process) Check(now time.Time) ProcessEvent { return p.sup.Check(now) }

// control is the process host as the session's control block.
type control struct{ *pmd.ProcessHost }

func (c control) LastRecovery() (held, unacked, rings uint64) {
	_, d := c.Recovered()
	return d.Held, d.Unacked, d.Rings
}

// procs finds the processes that claim sessions by pidfd and /proc.
type procs struct{}

func (procs) Watch(owner uint64) (session.Watch, error) {
	pid := session.PID(owner)
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	// The pidfd names the process that had pid when it was opened: if
	// that one started when the owner did, it is the owner.
	if st, err := service.StartTime(pid); err != nil || uint32(st) != uint32(owner>>32) {
		unix.Close(fd)
		return nil, errors.New("pid reused")
	}
	return pidfd(fd), nil
}

// pidfd is a process's pidfd, readable once the process exits.
type pidfd int

func (fd pidfd) Exited() bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

func (fd pidfd) Close() { unix.Close(int(fd)) }

// ErrStillAttached is returned by Reclaim when a live process still
// holds the service: what it holds cannot be taken from it.
var ErrStillAttached = errors.New("service process still attached")

// Reclaim runs after the poll loops stopped, before Close. A process
// that died is recovered here; one still alive keeps what it holds,
// which Reclaim reports as an error naming the pid and the count (the
// pool's leak check then finds that many missing). The TX packets the
// port never took are freed.
func (p *Process) Reclaim() error {
	if p.h == nil || !p.h.Live() {
		return nil
	}
	var err error
	if owner := p.h.Owner(); owner != 0 {
		pid := int(uint32(owner))
		if p.alive(owner) {
			err = fmt.Errorf("consumer: %w: pid %d still holds service %q and %d mbufs", ErrStillAttached, pid, p.name, p.h.HeldNow())
		} else {
			p.h.Recover()
		}
	}
	p.h.ReleasePending()
	p.Publish()
	p.sup.End()
	return err
}

// Close frees the rings (and the packets in them) and the control block.
// Call Reclaim first.
func (p *Process) Close() {
	if p.h != nil && p.h.Live() {
		p.h.ReleasePending()
		p.Publish()
	}
	p.sup.End()
	p.free()
}

// alive reports whether the process that claimed owner still runs.
func (p *Process) alive(owner uint64) bool {
	pid := int(uint32(owner))
	if unix.Kill(pid, 0) != nil {
		return false
	}
	st, err := service.StartTime(pid)
	return err == nil && uint32(st) == uint32(owner>>32)
}

func (p *Process) free() {
	for _, r := range p.rings {
		r.Close()
	}
	p.rings = nil
	if p.h != nil {
		p.h.Free()
	}
}
