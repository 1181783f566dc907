package roce

import (
	"fmt"
	"sync/atomic"
)

// Allocator provides the memory that memory regions are registered over.
// The daemon supplies one backed by DPDK memory (rte_zmalloc on hugepages
// or --no-huge memory); tests use HeapAllocator.
type Allocator interface {
	// Alloc returns size bytes of zeroed memory.
	Alloc(size int) ([]byte, error)
	// Free releases memory returned by Alloc.
	Free(b []byte)
}

// HeapAllocator allocates from the Go heap, up to Limit bytes in use (no
// limit when Limit is 0). Its zero value is ready to use; it is safe for
// concurrent use.
type HeapAllocator struct {
	Limit int64
	inUse atomic.Int64
}

var _ Allocator = (*HeapAllocator)(nil)

// Alloc implements Allocator.
func (a *HeapAllocator) Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("roce: heap alloc %d bytes: %w", size, ErrInvalidArgument)
	}
	if n := a.inUse.Add(int64(size)); a.Limit > 0 && n > a.Limit {
		a.inUse.Add(-int64(size))
		return nil, fmt.Errorf("roce: heap alloc %d bytes (%d in use, limit %d): %w",
			size, n-int64(size), a.Limit, ErrNoMemory)
	}
	return make([]byte, size), nil
}

// Free implements Allocator.
func (a *HeapAllocator) Free(b []byte) { a.inUse.Add(-int64(cap(b))) }

// InUse returns the bytes allocated and not yet freed.
func (a *HeapAllocator) InUse() int64 { return a.inUse.Load() }

// Access is a set of memory access rights, for memory regions and for
// the remote operations a QP accepts. Local read is always allowed.
type Access uint8

// Access rights.
const (
	AccessLocalWrite Access = 1 << iota
	AccessRemoteWrite
	AccessRemoteRead
)

func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	s := ""
	for _, f := range []struct {
		bit  Access
		name string
	}{{AccessLocalWrite, "local-write"}, {AccessRemoteWrite, "remote-write"}, {AccessRemoteRead, "remote-read"}} {
		if a&f.bit != 0 {
			if s != "" {
				s += "|"
			}
			s += f.name
		}
	}
	if rest := a &^ (AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead); rest != 0 {
		s += fmt.Sprintf("|%#x", uint8(rest))
	}
	return s
}

// vaShift places each memory region at its own synthetic virtual
// address: slot i (from 0) starts at (i+1)<<vaShift. Peers see only these
// addresses, so no real pointer leaves the process; a region may be up to
// 1 TiB.
const vaShift = 40

// MaxMRSize is the largest memory region, in bytes.
const MaxMRSize = 1<<vaShift - 1

// SGE is a scatter/gather element: Length bytes at virtual address Addr
// of the memory region with local key LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// PD is a protection domain: memory regions and QPs created in it can
// only be used together.
type PD struct {
	ep   *Endpoint
	mrs  []*MR   // slot i holds keys (i+1)<<8 | generation
	gens []uint8 // last generation used per slot
	free []int
	qps  int
	mrN  int
	dead bool // deallocated
}

// MR is a registered memory region.
type MR struct {
	pd     *PD
	buf    []byte
	access Access
	key    uint32
	base   uint64
}

// NewPD allocates a protection domain on e.
func (e *Endpoint) NewPD() *PD { return &PD{ep: e} }

// Endpoint returns the endpoint the protection domain belongs to, where
// its QPs' completion queues must be created too.
func (pd *PD) Endpoint() *Endpoint { return pd.ep }

// Dealloc releases the protection domain, which must hold no memory
// regions and no QPs.
func (pd *PD) Dealloc() error {
	if pd.mrN > 0 || pd.qps > 0 {
		return fmt.Errorf("roce: dealloc pd with %d mrs and %d qps: %w", pd.mrN, pd.qps, ErrBusy)
	}
	pd.mrs, pd.gens, pd.free, pd.dead = nil, nil, nil, true
	return nil
}

// RegisterMR registers buf with access rights access and returns the
// region, whose L_Key and R_Key are equal. buf must stay allocated until
// the region is deregistered.
func (pd *PD) RegisterMR(buf []byte, access Access) (*MR, error) {
	if pd.dead {
		return nil, fmt.Errorf("roce: register mr: pd deallocated: %w", ErrInvalidState)
	}
	if len(buf) == 0 || len(buf) > MaxMRSize {
		return nil, fmt.Errorf("roce: register mr of %d bytes: %w", len(buf), ErrInvalidArgument)
	}
	if access&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead) != 0 {
		return nil, fmt.Errorf("roce: register mr with access %v: %w", access, ErrInvalidArgument)
	}
	if access&AccessRemoteWrite != 0 && access&AccessLocalWrite == 0 {
		// As in verbs: remote write implies the memory may change under us.
		return nil, fmt.Errorf("roce: register mr with access %v: remote write needs local write: %w", access, ErrInvalidArgument)
	}
	var slot int
	if n := len(pd.free); n > 0 {
		slot = pd.free[n-1]
		pd.free = pd.free[:n-1]
	} else {
		if len(pd.mrs) >= 1<<24-1 {
			return nil, fmt.Errorf("roce: register mr: key space exhausted: %w", ErrNoMemory)
		}
		slot = len(pd.mrs)
		pd.mrs = append(pd.mrs, nil)
		pd.gens = append(pd.gens, 0)
	}
	pd.gens[slot]++
	mr := &MR{
		pd:     pd,
		buf:    buf,
		access: access,
		key:    uint32(slot+1)<<8 | uint32(pd.gens[slot]),
		base:   uint64(slot+1) << vaShift,
	}
	pd.mrs[slot] = mr
	pd.mrN++
	return mr, nil
}

// Deregister removes the region from its protection domain; its keys
// stop working at once.
func (mr *MR) Deregister() error {
	pd := mr.pd
	if pd == nil {
		return fmt.Errorf("roce: deregister mr: %w", ErrInvalidState)
	}
	slot := int(mr.key>>8) - 1
	pd.mrs[slot] = nil
	pd.free = append(pd.free, slot)
	pd.mrN--
	mr.pd = nil
	return nil
}

// LKey returns the region's local key.
func (mr *MR) LKey() uint32 { return mr.key }

// RKey returns the region's remote key.
func (mr *MR) RKey() uint32 { return mr.key }

// Addr returns the virtual address of the region's first byte.
func (mr *MR) Addr() uint64 { return mr.base }

// Len returns the region's length in bytes.
func (mr *MR) Len() int { return len(mr.buf) }

// Bytes returns the registered memory.
func (mr *MR) Bytes() []byte { return mr.buf }

// Access returns the region's access rights.
func (mr *MR) Access() Access { return mr.access }

// SGE returns the scatter/gather element for n bytes at offset off of the
// region.
func (mr *MR) SGE(off, n int) SGE {
	return SGE{Addr: mr.base + uint64(off), Length: uint32(n), LKey: mr.key}
}

// lookup returns the region with key, or nil.
func (pd *PD) lookup(key uint32) *MR {
	slot := int(key>>8) - 1
	if slot < 0 || slot >= len(pd.mrs) {
		return nil
	}
	if mr := pd.mrs[slot]; mr != nil && mr.key == key {
		return mr
	}
	return nil
}

// span returns the n bytes at virtual address va of the region with key
// if the region exists, grants need and contains them all.
func (pd *PD) span(key uint32, va uint64, n uint64, need Access) ([]byte, bool) {
	mr := pd.lookup(key)
	if mr == nil || mr.access&need != need || va < mr.base {
		return nil, false
	}
	off := va - mr.base
	if off > uint64(len(mr.buf)) || n > uint64(len(mr.buf))-off {
		return nil, false
	}
	return mr.buf[off : off+n : off+n], true
}
