package consumer

/*
#cgo CFLAGS: -I${SRCDIR}/../service
#include <stdlib.h>
#include <rte_memzone.h>
#include <rte_mempool.h>
#include "native.h"
#include "ctl.h"

// The daemon's side of a service process (ctl.h), run by the poll loop
// that owns the service.
struct cdd_svc_daemon {
	struct cdd_svc_ctl *c;
	struct rte_ring *tx, *ret, *buf;
	struct rte_mempool *mp;
	uint16_t nlanes, burst, port, queue, npend;
	uint32_t grant; // fresh mbufs kept in buf while a process is attached
	uint64_t tx_pkts, tx_bytes, returned, granted;
	uint64_t recoveries;
	struct cdd_svc_recovery last, total;
	struct rte_ring *lanes[CDD_SVC_MAX_LANES];
	struct rte_mbuf *pend[CDD_SVC_MAX_BURST];
};

static void cdd_svc_daemon_recover(struct cdd_svc_daemon *d)
{
	cdd_svc_recover(d->c, d->lanes, d->nlanes, d->tx, d->ret, d->buf, &d->last);
	d->recoveries++;
	d->total.held += d->last.held;
	d->total.unacked += d->last.unacked;
	d->total.rings += d->last.rings;
}

// cdd_svc_serve is one turn: recover a gone process if the supervisor
// asks, free what the process gave back, transmit what it sent (keeping
// what the TX queue refuses, as the forwarder does), and keep its supply
// of fresh mbufs while it is attached. The lanes are the process's to
// drain: while none is attached they fill, and the dispatcher counts
// the drops.
static unsigned int cdd_svc_serve(void *arg)
{
	struct cdd_svc_daemon *d = arg;
	struct cdd_svc_ctl *c = d->c;
	if (__atomic_load_n(&c->recover, __ATOMIC_ACQUIRE)) {
		cdd_svc_daemon_recover(d);
		__atomic_store_n(&c->recover, 0, __ATOMIC_RELEASE);
		return 1;
	}
	unsigned int work = 0;
	void *objs[CDD_SVC_MAX_BURST];
	unsigned int n = rte_ring_sc_dequeue_burst(d->ret, objs, d->burst, NULL);
	if (n > 0) {
		rte_pktmbuf_free_bulk((struct rte_mbuf **)objs, n);
		d->returned += n;
		work += n;
	}
	if (d->npend < d->burst)
		d->npend += rte_ring_sc_dequeue_burst(d->tx, (void **)&d->pend[d->npend], d->burst - d->npend, NULL);
	if (d->npend > 0) {
		uint64_t bytes = 0;
		for (uint16_t i = 0; i < d->npend; i++)
			bytes += d->pend[i]->pkt_len;
		uint16_t sent = rte_eth_tx_burst(d->port, d->queue, d->pend, d->npend);
		for (uint16_t i = sent; i < d->npend; i++)
			bytes -= d->pend[i]->pkt_len;
		d->tx_pkts += sent;
		d->tx_bytes += bytes;
		if (sent > 0 && sent < d->npend)
			memmove(&d->pend[0], &d->pend[sent], (d->npend - sent) * sizeof(d->pend[0]));
		d->npend -= sent;
		work += sent;
	}
	if (__atomic_load_n(&c->owner, __ATOMIC_ACQUIRE) != 0 && !__atomic_load_n(&c->closing, __ATOMIC_ACQUIRE)) {
		unsigned int have = rte_ring_count(d->buf);
		if (have < d->grant / 2) {
			unsigned int k = d->grant - have;
			if (k > d->burst)
				k = d->burst;
			// We are buf's only producer: the room is there.
			if (rte_pktmbuf_alloc_bulk(d->mp, (struct rte_mbuf **)objs, k) == 0) {
				rte_ring_sp_enqueue_bulk(d->buf, objs, k, NULL);
				d->granted += k;
			}
		}
	}
	return work;
}

static void cdd_svc_daemon_init(struct cdd_native *n, struct cdd_svc_daemon *d)
{
	n->fn = cdd_svc_serve;
	n->arg = d;
}

static uint64_t cdd_svc_load64(uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static uint32_t cdd_svc_load32(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void cdd_svc_store32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static const struct rte_memzone *cdd_svc_reserve(const char *name, int *err)
{
	rte_errno = 0;
	const struct rte_memzone *mz = rte_memzone_reserve(name, sizeof(struct cdd_svc_ctl), SOCKET_ID_ANY, 0);
	*err = rte_errno;
	return mz;
}

static struct cdd_svc_ctl *cdd_svc_mz_ctl(const struct rte_memzone *mz) { return mz->addr; }

static void cdd_svc_release_pending(struct cdd_svc_daemon *d)
{
	rte_pktmbuf_free_bulk(d->pend, d->npend);
	d->npend = 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

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
	native // its Native is the poll loop's handle
	d      *C.struct_cdd_svc_daemon
	ctl    *C.struct_cdd_svc_ctl
	mz     *C.struct_rte_memzone // const in C
	rings  []*dispatch.Ring      // tx, ret, buf
	name   string
	Counts
	// Sent counts the frames the process sent that went out the port.
	Sent      Counts
	Recovered atomic.Uint64 // mbufs freed after processes died
	attached  atomic.Bool
	pid       atomic.Int64
	beat      atomic.Int64 // unix nanoseconds of the last heartbeat change

	// The supervisor's state (Check's caller only).
	session   uint64
	claims    uint64 // the control block's claims at the last Check
	pidfd     int
	dying     bool
	lastBeat  uint64
	recovered uint64 // Recovered at the last Check
}

// NewProcess creates the service's control block and rings.
func NewProcess(cfg ProcessConfig) (_ *Process, err error) {
	lanes := cfg.Lanes.Rings()
	if len(lanes) > C.CDD_SVC_MAX_LANES {
		return nil, fmt.Errorf("consumer: service %q has %d lanes; a service process takes at most %d", cfg.Service, len(lanes), C.CDD_SVC_MAX_LANES)
	}
	if cfg.Burst < 1 || cfg.Burst > C.CDD_SVC_MAX_BURST {
		return nil, fmt.Errorf("consumer: burst %d outside 1..%d", cfg.Burst, C.CDD_SVC_MAX_BURST)
	}
	n, err := newNative(C.CDD_NATIVE_FUNC, cfg.Lanes, cfg.Burst)
	if err != nil {
		return nil, err
	}
	p := &Process{native: n, name: cfg.Service, pidfd: -1}
	defer func() {
		if err != nil {
			p.free()
		}
	}()
	p.d = (*C.struct_cdd_svc_daemon)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_svc_daemon, C.RTE_CACHE_LINE_SIZE))
	if p.d == nil {
		return nil, fmt.Errorf("consumer: service %q: out of DPDK memory", cfg.Service)
	}
	mzName := C.CString(service.ControlName(cfg.Service))
	defer C.free(unsafe.Pointer(mzName))
	var errno C.int
	p.mz = C.cdd_svc_reserve(mzName, &errno)
	if p.mz == nil {
		return nil, fmt.Errorf("consumer: reserve the control block %q of service %q: %w", service.ControlName(cfg.Service), cfg.Service, pmd.Errno(errno))
	}
	p.ctl = C.cdd_svc_mz_ctl(p.mz)
	C.memset(unsafe.Pointer(p.ctl), 0, C.sizeof_struct_cdd_svc_ctl)
	for _, name := range []string{cfg.TxRing, cfg.RetRing, cfg.BufRing} {
		r, err := dispatch.NewRing(name, cfg.RingSize, -1)
		if err != nil {
			return nil, err
		}
		p.rings = append(p.rings, r)
	}
	c, d := p.ctl, p.d
	setName(c.pool[:], cfg.Pool.Name())
	setName(c.txname[:], cfg.TxRing)
	setName(c.retname[:], cfg.RetRing)
	setName(c.bufname[:], cfg.BufRing)
	for i, r := range lanes {
		setName(c.lanes[i][:], r.Name())
		d.lanes[i] = ring(r)
	}
	c.nlanes, c.burst = C.uint16_t(len(lanes)), C.uint16_t(cfg.Burst)
	// A process tells by this that the daemon it attached to is gone.
	self := os.Getpid()
	start, err := service.StartTime(self)
	if err != nil {
		return nil, fmt.Errorf("consumer: service %s: own start time: %w", cfg.Service, err)
	}
	c.daemon = C.uint64_t(service.Owner(self, start))
	d.c = c
	d.tx, d.ret, d.buf = ring(p.rings[0]), ring(p.rings[1]), ring(p.rings[2])
	d.mp = (*C.struct_rte_mempool)(unsafe.Pointer(cfg.Pool.C()))
	c.data_room = C.uint32_t(C.rte_pktmbuf_data_room_size(d.mp)) - C.RTE_PKTMBUF_HEADROOM
	d.nlanes, d.burst, d.port, d.queue = C.uint16_t(len(lanes)), C.uint16_t(cfg.Burst), C.uint16_t(cfg.Port), C.uint16_t(cfg.Queue)
	d.grant = C.uint32_t(cfg.RingSize - 1)
	C.cdd_svc_daemon_init(p.native.c, d)
	// Published last: a process that finds the memzone before this
	// waits for the magic.
	c.version = C.CDD_SVC_VERSION
	C.cdd_svc_store32(&c.magic, C.CDD_SVC_MAGIC)
	return p, nil
}

func setName(dst []C.char, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = C.char(s[i])
	}
}

var _ dispatch.NativeConsumer = (*Process)(nil)

// Poll runs one turn outside a poll loop.
func (p *Process) Poll() int {
	k := p.poll()
	p.Publish()
	return k
}

// Publish makes the counters visible; the loop calls it.
func (p *Process) Publish() {
	d, c := p.d, p.ctl
	p.Packets.Store(uint64(C.cdd_svc_load64(&c.rx_pkts)))
	p.Bytes.Store(uint64(C.cdd_svc_load64(&c.rx_bytes)))
	p.Sent.Packets.Store(uint64(d.tx_pkts))
	p.Sent.Bytes.Store(uint64(d.tx_bytes))
	total := uint64(d.total.held + d.total.unacked + d.total.rings)
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
func (p *Process) SetClosing() { C.cdd_svc_store32(&p.ctl.closing, 1) }

// Busy reports whether a process holds the session, or a recovery is
// pending: the daemon's drain at stop waits for neither.
func (p *Process) Busy() bool {
	return C.cdd_svc_load64(&p.ctl.owner) != 0 || C.cdd_svc_load32(&p.ctl.recover) != 0
}

// Check follows the session: a new owner is checked for being alive
// (pidfd_open and its start time, so that a reused pid does not pass),
// an owner's exit asks the serving loop to recover. One goroutine calls
// it, periodically; it does not block.
func (p *Process) Check(now time.Time) ProcessEvent {
	if C.cdd_svc_load32(&p.ctl.recover) != 0 {
		return ProcessEvent{} // the loop has not got to it yet
	}
	owner := uint64(C.cdd_svc_load64(&p.ctl.owner))
	if p.dying {
		if owner != 0 && owner == p.session {
			return ProcessEvent{} // cannot happen: the loop frees the session
		}
		pid := int(uint32(p.session))
		p.endSession()
		d := p.d.last
		return ProcessEvent{Kind: Recovered, PID: pid, Held: uint64(d.held), Unacked: uint64(d.unacked), Rings: uint64(d.rings)}
	}
	claims := uint64(C.cdd_svc_load64(&p.ctl.claims))
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
			return ProcessEvent{Kind: Passed, PID: int(uint32(C.cdd_svc_load64(&p.ctl.last_owner)))}
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
		p.lastBeat = uint64(C.cdd_svc_load64(&p.ctl.heartbeat))
		p.beat.Store(now.UnixNano())
		return ProcessEvent{Kind: Attached, PID: pid}
	default:
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			return p.die(int(uint32(owner)))
		}
		if b := uint64(C.cdd_svc_load64(&p.ctl.heartbeat)); b != p.lastBeat {
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
	C.cdd_svc_store32(&p.ctl.recover, 1)
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
	if p.d == nil {
		return nil
	}
	var err error
	if owner := uint64(C.cdd_svc_load64(&p.ctl.owner)); owner != 0 {
		pid := int(uint32(owner))
		if p.alive(owner) {
			err = fmt.Errorf("consumer: %w: pid %d still holds service %q and %d mbufs", ErrStillAttached, pid, p.name, uint64(C.cdd_svc_held_now(p.ctl)))
		} else {
			C.cdd_svc_daemon_recover(p.d)
		}
	}
	C.cdd_svc_release_pending(p.d)
	p.Publish()
	p.endSession()
	return err
}

// Close frees the rings (and the packets in them) and the control block.
// Call Reclaim first.
func (p *Process) Close() {
	if p.d != nil {
		C.cdd_svc_release_pending(p.d)
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
	if p.mz != nil {
		C.rte_memzone_free(p.mz)
		p.mz, p.ctl = nil, nil
	}
	if p.d != nil {
		C.rte_free(unsafe.Pointer(p.d))
		p.d = nil
	}
	p.native.close()
	p.native.c = nil
}
