package pmd

/*
#include "cdd.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// MaxBurst is the largest burst a Burst can hold.
const MaxBurst = C.CDD_MAX_BURST

// Burst is a C-allocated array of received mbufs plus, for each, its
// first segment as a []byte and its length, so the classifier reads
// frames with no cgo call per packet. A Burst belongs to one poll loop.
type Burst struct {
	c      *C.struct_cdd_burst
	frames [][]byte // first segments, over mbuf memory
	pktLen []uint32 // whole packet, all segments
	svc    []uint8
}

// struct cdd_frame must be laid out as a []byte, whose headers C writes
// for Go to read: a difference fails to compile.
const (
	word = unsafe.Sizeof(uintptr(0))
	_    = uint(unsafe.Sizeof([]byte(nil))-C.sizeof_struct_cdd_frame) + uint(C.sizeof_struct_cdd_frame-unsafe.Sizeof([]byte(nil))) +
		uint(unsafe.Offsetof(C.struct_cdd_frame{}.len)-word) + uint(word-unsafe.Offsetof(C.struct_cdd_frame{}.len)) +
		uint(unsafe.Offsetof(C.struct_cdd_frame{}.cap)-2*word) + uint(2*word-unsafe.Offsetof(C.struct_cdd_frame{}.cap))
)

// NewBurst allocates a burst of up to size packets.
func NewBurst(size int) (*Burst, error) {
	if size < 1 || size > MaxBurst {
		return nil, fmt.Errorf("pmd: burst size %d outside 1..%d", size, MaxBurst)
	}
	c := (*C.struct_cdd_burst)(C.rte_zmalloc(nil, C.sizeof_struct_cdd_burst, C.RTE_CACHE_LINE_SIZE))
	if c == nil {
		return nil, fmt.Errorf("pmd: allocate burst: %w", Errno(C.ENOMEM))
	}
	c.cap = C.uint16_t(size)
	return &Burst{
		c:      c,
		frames: unsafe.Slice((*[]byte)(unsafe.Pointer(&c.frame[0])), size),
		pktLen: unsafe.Slice((*uint32)(unsafe.Pointer(&c.pkt_len[0])), size),
		svc:    unsafe.Slice((*uint8)(unsafe.Pointer(&c.svc[0])), size),
	}, nil
}

// Free releases the burst's memory, freeing any packets still in it.
func (b *Burst) Free() {
	if b.c == nil {
		return
	}
	C.cdd_burst_free(b.c)
	C.rte_free(unsafe.Pointer(b.c))
	b.c = nil
}

// RxBurst receives up to the burst's capacity from a port queue, replacing
// the burst's contents (which must have been handed on or freed).
func (b *Burst) RxBurst(port, queue uint16) int {
	return int(C.cdd_rx_burst(b.c, C.uint16_t(port), C.uint16_t(queue)))
}

// Len returns the number of packets in the burst.
func (b *Burst) Len() int { return int(b.c.n) }

// Bytes returns the total packet length of the burst.
func (b *Burst) Bytes() uint64 { return uint64(b.c.bytes) }

// Frame returns packet i's first segment as a slice over mbuf memory. It is
// valid until the packet is freed or enqueued elsewhere. A packet in a
// chain of mbufs (scattered RX, a frame larger than the data room) is
// longer than its first segment: see PktLens.
func (b *Burst) Frame(i int) []byte {
	return b.frames[i]
}

// Frames returns the first segments of the burst's packets (Frame).
func (b *Burst) Frames() [][]byte { return b.frames[:b.c.n] }

// PktLens returns the lengths of the burst's packets, all segments
// together: each mbuf's pkt_len, which equals the length of its Frame
// unless the packet is a chain.
func (b *Burst) PktLens() []uint32 { return b.pktLen[:b.c.n] }

// Verdicts returns the per-packet service slots, for the classifier to fill.
func (b *Burst) Verdicts() []uint8 { return b.svc[:b.c.n] }

// FreeAll frees every packet in the burst.
func (b *Burst) FreeAll() {
	if b.c.n > 0 { // an idle loop's empty burst costs no cgo call
		C.cdd_burst_free(b.c)
	}
}

// SetLen records how many packets remain in the burst, forgetting the
// rest without freeing them: for a caller that handed them on by other
// means, or whose pool is gone.
func (b *Burst) SetLen(n int) { b.c.n = C.uint16_t(n) }

// TxCopy transmits frames by copying them into mbufs from pool: one cgo call
// for the burst. frames are packed into scratch first (cgo must not be
// handed Go pointers to Go pointers). It returns how many were sent.
func TxCopy(port, queue uint16, pool *Mempool, frames [][]byte, scratch *TxScratch) int {
	n := min(len(frames), MaxBurst)
	if n == 0 {
		return 0
	}
	scratch.buf = scratch.buf[:0]
	scratch.lens = scratch.lens[:0]
	for _, f := range frames[:n] {
		scratch.buf = append(scratch.buf, f...)
		scratch.lens = append(scratch.lens, uint16(len(f)))
	}
	return int(C.cdd_tx_copy(C.uint16_t(port), C.uint16_t(queue), pool.c(),
		(*C.uint8_t)(unsafe.Pointer(&scratch.buf[0])), (*C.uint16_t)(unsafe.Pointer(&scratch.lens[0])), C.uint16_t(n)))
}

// TxChain transmits one packet made of segs, each copied into an mbuf of
// its own from pool and chained (rte_pktmbuf_chain), as a NIC with
// scattered RX would hand it over. It reports whether the queue took it;
// if not, the chain is freed. It is for tests: nothing on the data path
// builds chains.
func TxChain(port, queue uint16, pool *Mempool, segs [][]byte) bool {
	if len(segs) == 0 || len(segs) > MaxBurst {
		return false
	}
	var scratch TxScratch
	for _, s := range segs {
		if len(s) > 0xFFFF {
			return false
		}
		scratch.buf = append(scratch.buf, s...)
		scratch.lens = append(scratch.lens, uint16(len(s)))
	}
	if len(scratch.buf) == 0 {
		return false
	}
	return C.cdd_tx_chain(C.uint16_t(port), C.uint16_t(queue), pool.c(),
		(*C.uint8_t)(unsafe.Pointer(&scratch.buf[0])), (*C.uint16_t)(unsafe.Pointer(&scratch.lens[0])), C.uint16_t(len(segs))) == 1
}

// TxScratch is reusable packing space for TxCopy, so steady-state
// transmission does not allocate.
type TxScratch struct {
	buf  []byte
	lens []uint16
}
