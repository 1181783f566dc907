package pmd

/*
#include "gate.h"
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
