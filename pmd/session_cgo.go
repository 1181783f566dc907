package pmd

/*
#include "svcctl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// ProcessControlVersion is the control block version this library
// speaks (svcctl.h).
const ProcessControlVersion = C.CDD_SVC_VERSION

// What ProcessSession.Lookup finds.
var (
	ErrNoControl       = errors.New("no control block")              // the memzone is missing
	ErrControlNotReady = errors.New("control block not ready")       // the daemon is still filling it in
	ErrControlVersion  = errors.New("control block version differs") // another version of the protocol
)

// ProcessSession is a service process's side of a service (struct
// cdd_svc_proc, svcctl.h): the rings its control block names, looked up
// in this process, and views of the burst it holds. One goroutine uses
// it.
type ProcessSession struct {
	p *C.struct_cdd_svc_proc
	// Views of the burst held: frames are read from mbuf memory.
	data   []unsafe.Pointer
	length []uint16
	pktLen []uint32
	// For Send: frames packed for C.
	scratch TxScratch
}

// LookupProcessSession finds the control block in memzone control and
// everything it names. The errors are ErrNoControl, ErrControlNotReady,
// or one naming both versions of the control block or a ring or pool
// that is missing.
func LookupProcessSession(control string) (*ProcessSession, error) {
	p := (*C.struct_cdd_svc_proc)(C.calloc(1, C.sizeof_struct_cdd_svc_proc))
	if p == nil {
		return nil, errors.New("pmd: out of memory")
	}
	zone := C.CString(control)
	defer C.free(unsafe.Pointer(zone))
	var missing *C.char
	var err error
	switch C.cdd_svc_lookup(zone, p, &missing) {
	case C.CDD_SVC_OK:
		return &ProcessSession{
			p:      p,
			data:   unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(&p.data[0])), MaxProcessBurst),
			length: unsafe.Slice((*uint16)(unsafe.Pointer(&p.len[0])), MaxProcessBurst),
			pktLen: unsafe.Slice((*uint32)(unsafe.Pointer(&p.pkt_len[0])), MaxProcessBurst),
		}, nil
	case C.CDD_SVC_NO_ZONE:
		err = ErrNoControl
	case C.CDD_SVC_NOT_READY:
		err = ErrControlNotReady
	case C.CDD_SVC_VERSION_MISMATCH:
		err = fmt.Errorf("the daemon speaks control block version %d, this library %d", p.c.version, ProcessControlVersion)
	default:
		err = fmt.Errorf("the daemon's %s is missing", C.GoString(missing))
	}
	C.free(unsafe.Pointer(p))
	return nil, err
}

// Claim takes the session for owner (pid | start time << 32). When
// another holds it, it returns false and the holder's word.
func (s *ProcessSession) Claim(owner uint64) (holder uint64, ok bool) {
	var h C.uint64_t
	if C.cdd_svc_claim(s.p.c, C.uint64_t(owner), &h) != 0 {
		return uint64(h), false
	}
	return 0, true
}

// Closing reports whether the daemon stops.
func (s *ProcessSession) Closing() bool { return C.cdd_svc_closing(s.p.c) != 0 }

// Daemon returns the daemon's owner word: pid | start time << 32.
func (s *ProcessSession) Daemon() uint64 { return uint64(s.p.c.daemon) }

// Burst returns the most packets one Recv takes.
func (s *ProcessSession) Burst() int { return int(s.p.c.burst) }

// DataRoom returns the bytes an mbuf holds after its headroom: the
// longest frame Send takes.
func (s *ProcessSession) DataRoom() int { return int(s.p.c.data_room) }

// Errors of the session's steps.
var (
	// ErrRingFull: the daemon has not yet taken what the session gave it.
	ErrRingFull = errors.New("the daemon's ring is full")
	// ErrShutdown: the daemon stops and the lanes are empty.
	ErrShutdown = errors.New("the daemon is stopping")
	// ErrNotOwner: the session is no longer this process's.
	ErrNotOwner = errors.New("the session is no longer this process's")
)

// Recv gives back the burst held, then takes up to max packets from the
// lanes, in turn: one cgo call. It returns the count, or ErrRingFull or
// ErrShutdown.
func (s *ProcessSession) Recv(max int) (int, error) {
	rc := int(C.cdd_svc_recv(s.p, C.uint(max)))
	switch {
	case rc >= 0:
		return rc, nil
	case rc == -int(C.ENOBUFS):
		return 0, ErrRingFull
	case rc == -int(C.ESHUTDOWN):
		return 0, ErrShutdown
	}
	return 0, Errno(-rc)
}

// Bytes returns the total length of the burst held.
func (s *ProcessSession) Bytes() uint64 { return uint64(s.p.bytes) }

// Frame returns packet i's first segment, over mbuf memory.
func (s *ProcessSession) Frame(i int) []byte { return unsafe.Slice((*byte)(s.data[i]), s.length[i]) }

// PktLen returns packet i's length, all segments together.
func (s *ProcessSession) PktLen(i int) int { return int(s.pktLen[i]) }

// GiveBack returns the burst held to the daemon, or ErrRingFull.
func (s *ProcessSession) GiveBack() error {
	if C.cdd_svc_give_back(s.p) < 0 {
		return ErrRingFull
	}
	return nil
}

// Forward sends the burst held out the port, all or (ErrRingFull) none.
func (s *ProcessSession) Forward() (int, error) {
	rc := int(C.cdd_svc_forward(s.p))
	if rc < 0 {
		return 0, ErrRingFull
	}
	return rc, nil
}

// Send copies frames (at most MaxProcessBurst, each at most DataRoom
// bytes) into fresh mbufs the daemon supplies and queues them for its
// port. It returns how many it took: a prefix of frames.
func (s *ProcessSession) Send(frames [][]byte) int {
	n := min(len(frames), MaxProcessBurst)
	if n == 0 {
		return 0
	}
	s.scratch.buf, s.scratch.lens = s.scratch.buf[:0], s.scratch.lens[:0]
	for _, f := range frames[:n] {
		s.scratch.buf = append(s.scratch.buf, f...)
		s.scratch.lens = append(s.scratch.lens, uint16(len(f)))
	}
	return int(C.cdd_svc_send(s.p, (*C.uint8_t)(unsafe.Pointer(&s.scratch.buf[0])), (*C.uint16_t)(unsafe.Pointer(&s.scratch.lens[0])), C.uint(n)))
}

// Detach gives back what the session holds and frees it for another
// process: ErrRingFull when the daemon's ring has no room yet,
// ErrNotOwner when owner no longer holds it.
func (s *ProcessSession) Detach(owner uint64) error {
	switch rc := C.cdd_svc_detach(s.p, C.uint64_t(owner)); rc {
	case 0:
		return nil
	case -C.ENOBUFS:
		return ErrRingFull
	default:
		return ErrNotOwner
	}
}

// Free releases the session's process-local memory.
func (s *ProcessSession) Free() {
	if s.p != nil {
		C.free(unsafe.Pointer(s.p))
		s.p = nil
	}
}
