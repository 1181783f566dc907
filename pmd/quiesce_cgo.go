package pmd

/*
#include "quiesce.h"
*/
import "C"

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The slot table must match the C one: a difference fails to compile.
const _ = uint(maxLoopSlots-C.CDD_QUIESCE_SLOTS) + uint(C.CDD_QUIESCE_SLOTS-maxLoopSlots)

// Quiescence tracks the poll loops' iterations so that a callback removed
// from a port's RX or TX path (by DPDK's pdump, when a capture tool stops)
// is known to be out of use before its remover frees what it uses.
type Quiescence struct {
	slots slotTable
}

var quiescenceInit sync.Once

func initQuiesceSlots() { C.cdd_quiesce_init() }

// Quiescence returns the process's quiescence tracker.
func (e *EAL) Quiescence() *Quiescence {
	e.quiesceOnce.Do(func() {
		quiescenceInit.Do(initQuiesceSlots)
		e.quiesce = &Quiescence{}
	})
	return e.quiesce
}

// ErrQuiescenceFull: every slot is taken.
var ErrQuiescenceFull = errors.New("pmd: no free quiescence slot")

// Slot takes a slot for one poll loop, offline until its first Pass.
func (q *Quiescence) Slot() (*QuiesceSlot, error) {
	i, ok := q.slots.take()
	if !ok {
		return nil, ErrQuiescenceFull
	}
	s := &QuiesceSlot{q: q, i: i, n: (*atomic.Uint64)(unsafe.Pointer(C.cdd_quiesce_slot_n(C.int(i))))}
	s.Offline()
	return s, nil
}

// A QuiesceSlot is one poll loop's iteration count. Only that loop's
// thread calls Pass.
type QuiesceSlot struct {
	q     *Quiescence
	i     int
	n     *atomic.Uint64 // a view of C memory: an atomic without a cgo call
	count uint64
}

// Pass counts an iteration: the loop is between bursts, inside no RX or
// TX callback.
func (s *QuiesceSlot) Pass() {
	s.count++
	if s.count == math.MaxUint64 {
		s.count = 0
	}
	s.n.Store(s.count)
}

// Offline tells removers not to wait for this loop until its next Pass.
func (s *QuiesceSlot) Offline() { s.n.Store(math.MaxUint64) }

// Release frees the slot.
func (s *QuiesceSlot) Release() {
	s.Offline()
	s.q.slots.free(s.i)
}

// QuiesceStats says how often a removed callback was waited for, and how
// long in all; TimedOut counts waits given up on a loop stalled 5 s.
type QuiesceStats struct {
	Removals, TimedOut uint64
	Waited             time.Duration
}

// Stats returns the removals waited for so far.
func (q *Quiescence) Stats() QuiesceStats {
	var v [3]C.uint64_t
	C.cdd_quiesce_stats(&v[0])
	return QuiesceStats{Removals: uint64(v[0]), Waited: time.Duration(v[1]), TimedOut: uint64(v[2])}
}

// removeNone calls the interposed rte_eth_remove_rx_callback with no
// callback, as a library linked against ethdev would: DPDK refuses it
// (EINVAL) without a wait. For tests.
func removeNone(port uint16) int { return int(C.cdd_quiesce_remove_none(C.uint16_t(port))) }

// quiesceNow waits as a callback remover does. For tests.
func quiesceNow() { C.cdd_quiesce() }
