package pmd

/*
// Since 21.11 an interrupt handle is opaque, and in 22.11 the calls that
// build one are still experimental.
#define ALLOW_EXPERIMENTAL_API
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <rte_alarm.h>
#include <rte_interrupts.h>
#include <rte_pause.h>
#include "cdd.h"

#define CDD_GATE_SLOTS 128
#define CDD_GATE_SPIN_NS 200000 // a long iteration: a full burst through every consumer
#define CDD_GATE_NAP_NS 20000

// A slot is one poll loop's last report: the gate epoch it saw at the top
// of an iteration, UINT64_MAX while it does not poll; and when it first
// found itself held in the current hold (CLOCK_MONOTONIC ns).
struct cdd_gate_slot {
	uint64_t seen;
	uint64_t held_at;
} __rte_cache_aligned;

struct cdd_gate {
	uint32_t run;  // loops may touch ports: the interrupt thread is parked
	uint32_t stop; // Close: park no more
	uint64_t epoch;
	uint64_t period_ns;
	// Written by the interrupt thread only.
	uint64_t windows, wait_ns, max_wait_ns, held_ns, max_held_ns;
	uint64_t hold_t;   // when the current hold began
	uint64_t acked_at; // when the last loop reported, in an open window
	int efd;
	struct rte_intr_handle *ih;
	struct cdd_gate_slot slot[CDD_GATE_SLOTS];
};

static uint64_t cdd_gate_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// cdd_gate_cb runs on DPDK's interrupt thread, in every round of its
// epoll loop: the gate's eventfd is never read, so it is always ready.
// Entering, it closes the window the previous call opened (the thread has
// run the other sources' callbacks since) and lets the loops go; it then
// parks the thread for a period, and before returning holds the loops:
// it waits until every registered loop has started an iteration after
// the hold, so none is inside a driver call when the thread goes on to
// the other callbacks.
static void cdd_gate_add(uint64_t *sum, uint64_t *max, uint64_t d)
{
	__atomic_store_n(sum, *sum + d, __ATOMIC_RELAXED);
	if (d > *max)
		__atomic_store_n(max, d, __ATOMIC_RELAXED);
}

static void cdd_gate_cb(void *arg)
{
	struct cdd_gate *g = arg;
	if (g->acked_at) {
		// The loops lost the time from the first one's held pass on.
		uint64_t first = UINT64_MAX;
		for (int i = 0; i < CDD_GATE_SLOTS; i++) {
			uint64_t h = __atomic_load_n(&g->slot[i].held_at, __ATOMIC_RELAXED);
			if (h >= g->hold_t && h < first)
				first = h;
		}
		uint64_t now = cdd_gate_now();
		if (first < now)
			cdd_gate_add(&g->held_ns, &g->max_held_ns, now - first);
		g->acked_at = 0;
	}
	__atomic_store_n(&g->run, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE)) {
		// Closing: make the eventfd quiet so that this is the last call.
		uint64_t v;
		ssize_t r = read(g->efd, &v, sizeof(v));
		(void)r;
		return;
	}
	struct timespec ts = {(time_t)(g->period_ns / 1000000000ull), (long)(g->period_ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	if (__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE))
		return; // the next call quiets the eventfd; the loops keep going
	uint64_t t = cdd_gate_now();
	g->hold_t = t;
	__atomic_store_n(&g->run, 0, __ATOMIC_SEQ_CST);
	uint64_t e = __atomic_add_fetch(&g->epoch, 1, __ATOMIC_SEQ_CST);
	// Spin: a loop reports within an iteration, microseconds, and the
	// thread must not sleep then: a wakeup on a busy CPU can take
	// milliseconds, all of which the loops that reported would spend
	// held. (DPDK keeps its control threads off the worker lcores' CPUs,
	// so the spin takes no CPU from a loop.) A loop that has not
	// reported after CDD_GATE_SPIN_NS is not running; nap between looks
	// then rather than take the CPU from whoever shares it.
	for (int i = 0; i < CDD_GATE_SLOTS; i++) {
		for (unsigned int k = 1; __atomic_load_n(&g->slot[i].seen, __ATOMIC_SEQ_CST) < e; k++) {
			if (k % 64 != 0 || cdd_gate_now() - t < CDD_GATE_SPIN_NS) {
				rte_pause();
			} else {
				struct timespec nap = {0, CDD_GATE_NAP_NS};
				nanosleep(&nap, NULL);
			}
		}
	}
	g->acked_at = cdd_gate_now();
	cdd_gate_add(&g->wait_ns, &g->max_wait_ns, g->acked_at - t);
	__atomic_store_n(&g->windows, g->windows + 1, __ATOMIC_RELAXED);
}

static struct cdd_gate *cdd_gate_new(uint64_t period_ns, int *err)
{
	struct cdd_gate *g = rte_zmalloc("cdd_gate", sizeof(*g), RTE_CACHE_LINE_SIZE);
	if (g == NULL) {
		*err = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < CDD_GATE_SLOTS; i++)
		g->slot[i].seen = UINT64_MAX;
	g->period_ns = period_ns;
	g->efd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC); // readable from the start
	if (g->efd < 0) {
		*err = errno;
		rte_free(g);
		return NULL;
	}
	g->ih = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
	int rc;
	if (g->ih == NULL) {
		*err = rte_errno;
		goto fail;
	}
	if ((rc = rte_intr_fd_set(g->ih, g->efd)) != 0 ||
	    (rc = rte_intr_type_set(g->ih, RTE_INTR_HANDLE_EXT)) != 0 ||
	    (rc = rte_intr_callback_register(g->ih, cdd_gate_cb, g)) != 0) {
		*err = -rc;
		goto fail;
	}
	return g;
fail:
	rte_intr_instance_free(g->ih);
	close(g->efd);
	rte_free(g);
	return NULL;
}

// cdd_gate_free stops the parking and waits for the interrupt thread to
// leave the callback for good.
static int cdd_gate_free(struct cdd_gate *g)
{
	__atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
	int rc = rte_intr_callback_unregister_sync(g->ih, cdd_gate_cb, g);
	rte_intr_instance_free(g->ih);
	close(g->efd);
	rte_free(g);
	return rc < 0 ? rc : 0;
}

// A probe is an alarm callback, run on the interrupt thread like any
// other source's, that records what the gate looks like from there.
struct cdd_gate_probe {
	struct cdd_gate *g;
	uint32_t done;
	uint32_t run;      // the loops' run flag
	uint32_t unheld;   // loops online that have not seen the hold
};

static void cdd_gate_probe_cb(void *arg)
{
	struct cdd_gate_probe *p = arg;
	struct cdd_gate *g = p->g;
	p->run = __atomic_load_n(&g->run, __ATOMIC_SEQ_CST);
	uint64_t e = __atomic_load_n(&g->epoch, __ATOMIC_SEQ_CST);
	for (int i = 0; i < CDD_GATE_SLOTS; i++)
		if (__atomic_load_n(&g->slot[i].seen, __ATOMIC_SEQ_CST) < e)
			p->unheld++;
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
}

static int cdd_gate_probe_set(struct cdd_gate_probe *p)
{
	return rte_eal_alarm_set(1, cdd_gate_probe_cb, p);
}

static int cdd_gate_probe_done(struct cdd_gate_probe *p)
{
	return __atomic_load_n(&p->done, __ATOMIC_ACQUIRE);
}

static void cdd_gate_stats(struct cdd_gate *g, uint64_t out[5])
{
	out[0] = __atomic_load_n(&g->windows, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&g->wait_ns, __ATOMIC_RELAXED);
	out[2] = __atomic_load_n(&g->max_wait_ns, __ATOMIC_RELAXED);
	out[3] = __atomic_load_n(&g->held_ns, __ATOMIC_RELAXED);
	out[4] = __atomic_load_n(&g->max_held_ns, __ATOMIC_RELAXED);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The slot table must match the C one: a difference fails to compile.
const _ = uint(maxLoopSlots-C.CDD_GATE_SLOTS) + uint(C.CDD_GATE_SLOTS-maxLoopSlots)

// GatePeriod is how long the gate keeps DPDK's interrupt thread parked
// between two windows. It bounds the delay the gate adds to every
// interrupt-thread event (a memif message, an alarm): a memif handshake,
// a few messages each way, takes a few periods. Each window holds the
// loops for one round of the interrupt thread, microseconds when the
// loops and that thread have CPUs of their own; a shorter period costs
// the loops more of their time.
const GatePeriod = 5 * time.Millisecond

// ErrGateFull is returned when every gate slot is taken.
var ErrGateFull = errors.New("pmd: every gate slot is taken")

// A Gate keeps the poll loops and DPDK's interrupt thread apart: the
// thread runs its callbacks only while no loop is inside a driver call,
// and the loops touch ports only while the thread is parked in the
// gate's own callback.
//
// DPDK 22.11's net_memif needs it. When the peer leaves (its DISCONNECT
// message, or the control socket closing), memif_disconnect runs on the
// interrupt thread: it clears ETH_MEMIF_FLAG_CONNECTED and the link
// status, then at once closes the queue eventfds, munmaps the shared
// regions and rte_frees their descriptors (memif_free_regions), with no
// synchronisation against eth_memif_rx/tx, which test the flag once on
// entry and then read the rings and buffers. A loop inside rx_burst at
// that moment faults on the unmapped ring. Watching the link cannot
// help: memif raises no RTE_ETH_EVENT_INTR_LSC at all (it never calls
// rte_eth_dev_callback_process, and does not set RTE_ETH_DEV_INTR_LSC),
// and the link goes down in the same call, microseconds before the unmap.
// The peer decides when that happens, whichever side is the server, so
// only keeping the interrupt thread away from the loops helps.
//
// There is one interrupt thread per process, so one gate per EAL
// (EAL.HoldGate); loops take a slot each.
type Gate struct {
	c     *C.struct_cdd_gate
	slots slotTable
}

// GateStats describe what the gate cost the loops. Wait is from a hold's
// start until the interrupt thread has seen every loop's report: a loop
// finishing its iteration, or one whose thread is not running, and the
// interrupt thread's own delays. Held is from the first loop's held pass
// until the interrupt thread is parked again: the time loops that run
// lose to the gate.
type GateStats struct {
	Windows uint64 // times the interrupt thread was let run
	Wait    time.Duration
	MaxWait time.Duration
	Held    time.Duration
	MaxHeld time.Duration
}

func newGate(period time.Duration) (*Gate, error) {
	var errno C.int
	c := C.cdd_gate_new(C.uint64_t(period.Nanoseconds()), &errno)
	if c == nil {
		return nil, fmt.Errorf("pmd: interrupt-thread gate: %w", Errno(errno))
	}
	return &Gate{c: c}, nil
}

func (g *Gate) free() error {
	if rc := C.cdd_gate_free(g.c); rc != 0 {
		return fmt.Errorf("pmd: interrupt-thread gate: unregister: %w", Errno(-rc))
	}
	g.c = nil
	return nil
}

// Stats returns the gate's counters; zero once the last hold ended.
func (g *Gate) Stats() GateStats {
	if g.c == nil { // released
		return GateStats{}
	}
	var v [5]C.uint64_t
	C.cdd_gate_stats(g.c, &v[0])
	return GateStats{
		Windows: uint64(v[0]),
		Wait:    time.Duration(v[1]), MaxWait: time.Duration(v[2]),
		Held: time.Duration(v[3]), MaxHeld: time.Duration(v[4]),
	}
}

// probe runs a callback on the interrupt thread, as another driver's
// would run there, and reports whether the loops were held then: the run
// flag down and every online slot past the hold. For tests.
func (g *Gate) probe(timeout time.Duration) (held bool, err error) {
	p := (*C.struct_cdd_gate_probe)(C.calloc(1, C.sizeof_struct_cdd_gate_probe))
	if p == nil {
		return false, fmt.Errorf("pmd: gate probe: %w", Errno(C.ENOMEM))
	}
	p.g = g.c
	if rc := C.cdd_gate_probe_set(p); rc != 0 {
		C.free(unsafe.Pointer(p))
		return false, fmt.Errorf("pmd: gate probe alarm: %w", Errno(-rc))
	}
	deadline := time.Now().Add(timeout)
	for C.cdd_gate_probe_done(p) == 0 {
		if time.Now().After(deadline) {
			// The alarm still holds p: leave it allocated.
			return false, fmt.Errorf("pmd: gate probe: no callback within %v", timeout)
		}
		time.Sleep(100 * time.Microsecond)
	}
	held = p.run == 0 && p.unheld == 0
	C.free(unsafe.Pointer(p))
	return held, nil
}

// Slot takes a slot for one poll loop. The slot starts offline: the gate
// does not wait for it until its first Pass.
func (g *Gate) Slot() (*GateSlot, error) {
	i, ok := g.slots.take()
	if !ok {
		return nil, ErrGateFull
	}
	s := &g.c.slot[i]
	return &GateSlot{
		g: g, i: i,
		seen:   (*atomic.Uint64)(unsafe.Pointer(&s.seen)),
		heldAt: (*atomic.Uint64)(unsafe.Pointer(&s.held_at)),
		epoch:  (*atomic.Uint64)(unsafe.Pointer(&g.c.epoch)),
		run:    (*atomic.Uint32)(unsafe.Pointer(&g.c.run)),
	}, nil
}

func (g *Gate) inUse() bool { return g.slots.inUse() }

// A GateSlot is one poll loop's place at the gate. Only that loop's
// thread calls Pass.
type GateSlot struct {
	g      *Gate
	i      int
	seen   *atomic.Uint64 // views of C memory, for atomics without a cgo call
	heldAt *atomic.Uint64
	epoch  *atomic.Uint64
	run    *atomic.Uint32
	// heldEpoch is the hold this loop last found itself in.
	heldEpoch uint64
}

// Pass reports that the loop is between iterations, touching no port,
// and whether it may touch ports in the iteration it starts. The
// sequentially consistent store and loads pair with the gate callback's:
// either the callback sees this report and waits for the next one, or
// this load sees the hold.
func (s *GateSlot) Pass() bool {
	e := s.epoch.Load()
	s.seen.Store(e)
	if s.run.Load() != 0 {
		return true
	}
	if e != s.heldEpoch {
		// The loop's first held pass in this hold: for GateStats.Held,
		// once a hold.
		s.heldEpoch = e
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil {
			s.heldAt.Store(uint64(ts.Nano()))
		}
	}
	return false
}

// Offline tells the gate not to wait for this loop until its next Pass:
// the loop stops polling.
func (s *GateSlot) Offline() { s.seen.Store(math.MaxUint64) }

// Release takes the loop off the gate and frees the slot.
func (s *GateSlot) Release() {
	s.Offline()
	s.g.slots.free(s.i)
}

// HoldGate returns the EAL's interrupt-thread gate, starting it on the
// first hold; each hold is ended by ReleaseGate.
func (e *EAL) HoldGate() (*Gate, error) {
	e.gateMu.Lock()
	defer e.gateMu.Unlock()
	if e.gate == nil {
		g, err := newGate(GatePeriod)
		if err != nil {
			return nil, err
		}
		e.gate = g
	}
	e.gateHolds++
	return e.gate, nil
}

// ReleaseGate ends a hold; the last one stops the gate, which waits for
// the interrupt thread to leave its callback (at most a GatePeriod).
// Every slot must have been released.
func (e *EAL) ReleaseGate() error {
	e.gateMu.Lock()
	defer e.gateMu.Unlock()
	if e.gateHolds == 0 {
		return errors.New("pmd: interrupt-thread gate released but not held")
	}
	if e.gateHolds > 1 {
		e.gateHolds--
		return nil
	}
	if e.gate.inUse() {
		// The interrupt thread would wait for the loop for good.
		return errors.New("pmd: interrupt-thread gate released with a loop's slot still taken")
	}
	e.gateHolds--
	err := e.gate.free()
	e.gate = nil
	return err
}
