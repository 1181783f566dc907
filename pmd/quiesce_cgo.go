package pmd

/*
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <rte_ethdev.h>

// DPDK 22.11's pdump removes its RX/TX callbacks (rte_eth_remove_*_callback)
// on the EAL's multi-process thread when a capture tool (dpdk-dumpcap,
// dpdk-pdump) stops, replies, and the tool then frees the ring and mempool
// the callback copies into. Removal does not wait for a burst already
// inside the callback (rte_ethdev.h leaves that to the application; later
// DPDK's pdump waits itself), so a poll loop preempted there copies into
// freed memory: the daemon crashed so under load. The executable defines
// both functions, and the dynamic linker binds librte_pdump's calls to
// these: each calls DPDK's own, then waits until every poll loop has
// begun an iteration since, so none is still inside the old callback.
//
// The slots are process-wide because these functions are: their callers
// pass no context, and a process has one EAL.

#define CDD_QUIESCE_SLOTS 128
#define CDD_QUIESCE_OFFLINE UINT64_MAX
#define CDD_QUIESCE_WAIT_NS 5000000000ull // a loop stalled longer is stuck: go on
#define CDD_QUIESCE_NAP_NS 20000

// A slot counts one poll loop's iterations; CDD_QUIESCE_OFFLINE while it
// does not poll.
struct cdd_quiesce_slot {
	uint64_t n;
} __rte_cache_aligned;

static struct cdd_quiesce_slot cdd_quiesce_slot[CDD_QUIESCE_SLOTS];
static uint64_t cdd_quiesce_calls, cdd_quiesce_wait_ns, cdd_quiesce_timeouts;

static uint64_t *cdd_quiesce_slot_n(int i) { return &cdd_quiesce_slot[i].n; }

static void cdd_quiesce_init(void)
{
	for (int i = 0; i < CDD_QUIESCE_SLOTS; i++)
		__atomic_store_n(&cdd_quiesce_slot[i].n, CDD_QUIESCE_OFFLINE, __ATOMIC_RELAXED);
}

static uint64_t cdd_quiesce_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// cdd_quiesce waits until every online loop has counted an iteration
// since the call.
static void cdd_quiesce(void)
{
	uint64_t snap[CDD_QUIESCE_SLOTS];
	for (int i = 0; i < CDD_QUIESCE_SLOTS; i++)
		snap[i] = __atomic_load_n(&cdd_quiesce_slot[i].n, __ATOMIC_SEQ_CST);
	uint64_t t = cdd_quiesce_now();
	int timedout = 0;
	for (int i = 0; i < CDD_QUIESCE_SLOTS && !timedout; i++) {
		if (snap[i] == CDD_QUIESCE_OFFLINE)
			continue;
		while (__atomic_load_n(&cdd_quiesce_slot[i].n, __ATOMIC_SEQ_CST) == snap[i]) {
			if (cdd_quiesce_now() - t > CDD_QUIESCE_WAIT_NS) {
				timedout = 1;
				break;
			}
			struct timespec nap = {0, CDD_QUIESCE_NAP_NS};
			nanosleep(&nap, NULL);
		}
	}
	__atomic_add_fetch(&cdd_quiesce_calls, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&cdd_quiesce_wait_ns, cdd_quiesce_now() - t, __ATOMIC_RELAXED);
	if (timedout)
		__atomic_add_fetch(&cdd_quiesce_timeouts, 1, __ATOMIC_RELAXED);
}

typedef int (*cdd_remove_cb_fn)(uint16_t, uint16_t, const struct rte_eth_rxtx_callback *);

static int cdd_remove_and_quiesce(const char *name, uint16_t port, uint16_t queue,
				  const struct rte_eth_rxtx_callback *cb)
{
	cdd_remove_cb_fn real = (cdd_remove_cb_fn)dlsym(RTLD_NEXT, name);
	if (real == NULL)
		return -ENOSYS;
	int rc = real(port, queue, cb);
	if (rc == 0)
		cdd_quiesce();
	return rc;
}

int rte_eth_remove_rx_callback(uint16_t port_id, uint16_t queue_id,
			       const struct rte_eth_rxtx_callback *user_cb)
{
	return cdd_remove_and_quiesce("rte_eth_remove_rx_callback", port_id, queue_id, user_cb);
}

int rte_eth_remove_tx_callback(uint16_t port_id, uint16_t queue_id,
			       const struct rte_eth_rxtx_callback *user_cb)
{
	return cdd_remove_and_quiesce("rte_eth_remove_tx_callback", port_id, queue_id, user_cb);
}

static void cdd_quiesce_stats(uint64_t *v)
{
	v[0] = __atomic_load_n(&cdd_quiesce_calls, __ATOMIC_RELAXED);
	v[1] = __atomic_load_n(&cdd_quiesce_wait_ns, __ATOMIC_RELAXED);
	v[2] = __atomic_load_n(&cdd_quiesce_timeouts, __ATOMIC_RELAXED);
}

// For tests: remove a callback that was never added, through the
// interposed function, as pdump would call it.
static int cdd_quiesce_remove_none(uint16_t port)
{
	return rte_eth_remove_rx_callback(port, 0, NULL);
}
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
