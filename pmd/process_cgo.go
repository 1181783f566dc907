package pmd

/*
#include "svcctl.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// The limits of a service process's control block (svcctl.h).
const (
	MaxProcessLanes = C.CDD_SVC_MAX_LANES // lanes of a service a process drains
	MaxProcessBurst = C.CDD_SVC_MAX_BURST
)

// ProcessRecovery is what the daemon freed for a service process that
// went away: mbufs it held, mbufs it was taking from a ring, and what
// was left in the service's rings.
type ProcessRecovery struct{ Held, Unacked, Rings uint64 }

// ProcessHostConfig wires the daemon's side of a service process.
type ProcessHostConfig struct {
	Control     string   // the memzone of the control block
	Lanes       *RingSet // the service's lanes, which the process drains
	Tx, Ret     *Ring    // process → daemon: frames to send, mbufs done with
	Buf         *Ring    // daemon → process: fresh mbufs
	Pool        *Mempool // what Buf is filled from and frames come from
	Port, Queue uint16   // where Tx's frames leave
	Burst       int
	Grant       int    // fresh mbufs kept in Buf while a process is attached
	Daemon      uint64 // this process's owner word: pid | start time << 32
}

// ProcessHost is the daemon's side of a service process (svcctl.h): the
// control block in a memzone and a native consumer that the owning poll
// loop runs (transmit, free, supply, recover). The supervisor's reads
// and writes of the control block are atomic.
type ProcessHost struct {
	native *Native
	d      *C.struct_cdd_svc_daemon
	ctl    *C.struct_cdd_svc_ctl
	mz     *C.struct_rte_memzone // const in C
}

// NewProcessHost creates the control block and publishes it.
func NewProcessHost(cfg ProcessHostConfig) (_ *ProcessHost, err error) {
	lanes := cfg.Lanes.Rings()
	if len(lanes) > MaxProcessLanes || cfg.Burst < 1 || cfg.Burst > MaxProcessBurst {
		return nil, fmt.Errorf("pmd: a service process of %d lanes, burst %d: want at most %d, 1..%d", len(lanes), cfg.Burst, MaxProcessLanes, MaxProcessBurst)
	}
	n, err := newNative(C.CDD_NATIVE_FUNC, cfg.Lanes, cfg.Burst)
	if err != nil {
		return nil, err
	}
	h := &ProcessHost{native: n}
	defer func() {
		if err != nil {
			h.Free()
		}
	}()
	h.d = (*C.struct_cdd_svc_daemon)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_svc_daemon, C.RTE_CACHE_LINE_SIZE))
	if h.d == nil {
		return nil, fmt.Errorf("pmd: %w", errNoMemory)
	}
	mzName := C.CString(cfg.Control)
	defer C.free(unsafe.Pointer(mzName))
	var errno C.int
	h.mz = C.cdd_svc_reserve(mzName, &errno)
	if h.mz == nil {
		return nil, fmt.Errorf("pmd: reserve memzone %q: %w", cfg.Control, Errno(errno))
	}
	h.ctl = C.cdd_svc_mz_ctl(h.mz)
	C.memset(unsafe.Pointer(h.ctl), 0, C.sizeof_struct_cdd_svc_ctl)
	c, d := h.ctl, h.d
	setName(c.pool[:], cfg.Pool.Name())
	setName(c.txname[:], cfg.Tx.Name())
	setName(c.retname[:], cfg.Ret.Name())
	setName(c.bufname[:], cfg.Buf.Name())
	for i, r := range lanes {
		setName(c.lanes[i][:], r.Name())
		d.lanes[i] = r.c()
	}
	c.nlanes, c.burst = C.uint16_t(len(lanes)), C.uint16_t(cfg.Burst)
	// A process tells by this that the daemon it attached to is gone.
	c.daemon = C.uint64_t(cfg.Daemon)
	d.c = c
	d.tx, d.ret, d.buf = cfg.Tx.c(), cfg.Ret.c(), cfg.Buf.c()
	d.mp = cfg.Pool.c()
	c.data_room = C.uint32_t(cfg.Pool.DataRoom())
	d.nlanes, d.burst, d.port, d.queue = C.uint16_t(len(lanes)), C.uint16_t(cfg.Burst), C.uint16_t(cfg.Port), C.uint16_t(cfg.Queue)
	d.grant = C.uint32_t(cfg.Grant)
	C.cdd_svc_daemon_init(n.c, d)
	// Published last: a process that finds the memzone before this
	// waits for the magic.
	c.version = C.CDD_SVC_VERSION
	C.cdd_svc_store32(&c.magic, C.CDD_SVC_MAGIC)
	return h, nil
}

func setName(dst []C.char, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = C.char(s[i])
	}
}

// Native returns the consumer the owning poll loop runs.
func (h *ProcessHost) Native() *Native { return h.native }

// Received returns what the process reported receiving.
func (h *ProcessHost) Received() (packets, bytes uint64) {
	return uint64(C.cdd_svc_load64(&h.ctl.rx_pkts)), uint64(C.cdd_svc_load64(&h.ctl.rx_bytes))
}

// Sent returns the frames the process sent that went out the port. Read
// it where the consumer runs, or once it stopped.
func (h *ProcessHost) Sent() (packets, bytes uint64) {
	return uint64(h.d.tx_pkts), uint64(h.d.tx_bytes)
}

// Recovered returns what all recoveries so far freed, and the last one.
func (h *ProcessHost) Recovered() (total, last ProcessRecovery) {
	t, l := h.d.total, h.d.last
	return ProcessRecovery{uint64(t.held), uint64(t.unacked), uint64(t.rings)}, ProcessRecovery{uint64(l.held), uint64(l.unacked), uint64(l.rings)}
}

// Owner returns the session word of the process holding the service (0:
// none), Claims the sessions claimed so far and LastOwner the last
// claimant, Heartbeat the process's call counter.
func (h *ProcessHost) Owner() uint64     { return uint64(C.cdd_svc_load64(&h.ctl.owner)) }
func (h *ProcessHost) Claims() uint64    { return uint64(C.cdd_svc_load64(&h.ctl.claims)) }
func (h *ProcessHost) LastOwner() uint64 { return uint64(C.cdd_svc_load64(&h.ctl.last_owner)) }
func (h *ProcessHost) Heartbeat() uint64 { return uint64(C.cdd_svc_load64(&h.ctl.heartbeat)) }

// RecoverPending reports whether the serving loop has a recovery to do.
func (h *ProcessHost) RecoverPending() bool { return C.cdd_svc_load32(&h.ctl.recover) != 0 }

// AskRecover asks the serving loop to recover what a gone owner left.
func (h *ProcessHost) AskRecover() { C.cdd_svc_store32(&h.ctl.recover, 1) }

// SetClosing tells the attached process, and any that attaches later,
// that the daemon stops.
func (h *ProcessHost) SetClosing() { C.cdd_svc_store32(&h.ctl.closing, 1) }

// HeldNow counts what a live process holds now.
func (h *ProcessHost) HeldNow() uint64 { return uint64(C.cdd_svc_held_now(h.ctl)) }

// Recover frees what a gone process left and frees its session. Only
// when no poll loop runs the consumer.
func (h *ProcessHost) Recover() { C.cdd_svc_daemon_recover(h.d) }

// ReleasePending frees the frames the port's TX queue never took. Only
// when no poll loop runs the consumer.
func (h *ProcessHost) ReleasePending() { C.cdd_svc_release_pending(h.d) }

// Live reports whether the host still has its C state (Free not called).
func (h *ProcessHost) Live() bool { return h.d != nil }

// Free releases the control block and the C state; the rings are the
// caller's.
func (h *ProcessHost) Free() {
	if h.mz != nil {
		C.rte_memzone_free(h.mz)
		h.mz, h.ctl = nil, nil
	}
	if h.d != nil {
		C.rte_free(unsafe.Pointer(h.d))
		h.d = nil
	}
	h.native.Free()
}
