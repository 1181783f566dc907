package consumer

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

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
	attached  atomic.Bool
	pid       atomic.Int64
	beat      atomic.Int64 // unix nanoseconds of the last heartbeat change

	// The supervisor's state (Check's caller only).
	session  uint64
	claims   uint64 // the control block's claims at the last Check
	pidfd    int
	dying    bool
	lastBeat uint64
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
	p := &Process{name: cfg.Service, pidfd: -1}
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
func (p *Process) Attached() (bool, int) { return p.attached.Load(), int(p.pid.Load()) }

// HeartbeatAge returns how long ago the attached process last called in.
func (p *Process) HeartbeatAge(now time.Time) time.Duration {
	if !p.attached.Load() {
		return 0
	}
	return now.Sub(time.Unix(0, p.beat.Load()))
}

// ProcessEvent is what Check found.
type ProcessEvent struct {
	Kind ProcessEventKind
	PID  int
	// Held, Unacked and Rings are what recovery freed (Recovered): mbufs
	// the process held, mbufs it was taking from a ring, and what was
	// left in the service's rings.
	Held, Unacked, Rings uint64
}

// ProcessEventKind says what happened to a service's session.
type ProcessEventKind int

// Session events.
const (
	NoEvent   ProcessEventKind = iota
	Attached                   // a process claimed the service
	Detached                   // it let go, holding nothing
	Died                       // it is gone: the serving loop recovers
	Recovered                  // the loop freed what it left
	Passed                     // a process attached and detached between two checks
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

// Check follows the session: a new owner is checked for being alive
// (pidfd_open and its start time, so that a reused pid does not pass),
// an owner's exit asks the serving loop to recover. One goroutine calls
// it, periodically; it does not block.
func (p *Process) Check(now time.Time) ProcessEvent {
	if p.h.RecoverPending() {
		return ProcessEvent{} // the loop has not got to it yet
	}
	owner := p.h.Owner()
	if p.dying {
		if owner != 0 && owner == p.session {
			return ProcessEvent{} // cannot happen: the loop frees the session
		}
		pid := int(uint32(p.session))
		p.endSession()
		_, d := p.h.Recovered()
		return ProcessEvent{Kind: Recovered, PID: pid, Held: d.Held, Unacked: d.Unacked, Rings: d.Rings}
	}
	claims := p.h.Claims()
	switch {
	case owner == 0:
		if p.session != 0 {
			pid := int(uint32(p.session))
			p.endSession()
			p.claims = claims
			return ProcessEvent{Kind: Detached, PID: pid}
		}
		if claims != p.claims {
			p.claims = claims
			return ProcessEvent{Kind: Passed, PID: int(uint32(p.h.LastOwner()))}
		}
	case owner != p.session:
		if p.session != 0 {
			p.endSession()
		}
		p.session, p.claims = owner, claims
		pid := int(uint32(owner))
		fd, err := unix.PidfdOpen(pid, 0)
		if err == nil {
			// The pidfd names the process that had pid when it was
			// opened: if that one started when the owner did, it is the
			// owner.
			if st, err2 := service.StartTime(pid); err2 != nil || uint32(st) != uint32(owner>>32) {
				unix.Close(fd)
				err = errors.New("pid reused")
			}
		}
		if err != nil {
			return p.die(pid)
		}
		p.pidfd = fd
		p.pid.Store(int64(pid))
		p.attached.Store(true)
		p.lastBeat = p.h.Heartbeat()
		p.beat.Store(now.UnixNano())
		return ProcessEvent{Kind: Attached, PID: pid}
	default:
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			return p.die(int(uint32(owner)))
		}
		if b := p.h.Heartbeat(); b != p.lastBeat {
			p.lastBeat = b
			p.beat.Store(now.UnixNano())
		}
	}
	return ProcessEvent{}
}

// die asks the serving loop to recover what the owner left.
func (p *Process) die(pid int) ProcessEvent {
	p.dying = true
	p.attached.Store(false)
	p.h.AskRecover()
	return ProcessEvent{Kind: Died, PID: pid}
}

func (p *Process) endSession() {
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
	p.session, p.dying = 0, false
	p.attached.Store(false)
	p.pid.Store(0)
}

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
	p.endSession()
	return err
}

// Close frees the rings (and the packets in them) and the control block.
// Call Reclaim first.
func (p *Process) Close() {
	if p.h != nil && p.h.Live() {
		p.h.ReleasePending()
		p.Publish()
	}
	p.endSession()
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
