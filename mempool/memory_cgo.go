package mempool

/*
#include <rte_config.h>
#include <rte_malloc.h>
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// ErrNoMemory is returned when DPDK memory is exhausted or over a limit.
var ErrNoMemory = errors.New("mempool: out of DPDK memory")

// Memory hands out zeroed DPDK memory (hugepages, or the EAL's anonymous
// memory under --no-huge) as byte slices: the backing store for RoCE
// memory regions. It satisfies roce.Allocator.
type Memory struct {
	name  *C.char
	limit int

	mu struct {
		sync.Mutex
		inUse int
		live  map[unsafe.Pointer]int
	}
}

// NewMemory returns an allocator of at most limit bytes (0: no limit),
// tagged name in DPDK's malloc statistics.
func NewMemory(name string, limit int) *Memory {
	m := &Memory{name: C.CString(name), limit: limit}
	m.mu.live = map[unsafe.Pointer]int{}
	return m
}

// Alloc returns size zeroed bytes, cache-line aligned.
func (m *Memory) Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("mempool: allocate %d bytes: size must be positive", size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.limit > 0 && m.mu.inUse+size > m.limit {
		return nil, fmt.Errorf("%w: %d bytes asked, %d of %d in use", ErrNoMemory, size, m.mu.inUse, m.limit)
	}
	p := C.rte_zmalloc(m.name, C.size_t(size), C.RTE_CACHE_LINE_SIZE)
	if p == nil {
		return nil, fmt.Errorf("%w: %d bytes", ErrNoMemory, size)
	}
	m.mu.inUse += size
	m.mu.live[p] = size
	return unsafe.Slice((*byte)(p), size), nil
}

// Free releases memory from Alloc. Freeing anything else is ignored.
func (m *Memory) Free(b []byte) {
	if len(b) == 0 {
		return
	}
	p := unsafe.Pointer(&b[0])
	m.mu.Lock()
	defer m.mu.Unlock()
	size, ok := m.mu.live[p]
	if !ok {
		return
	}
	delete(m.mu.live, p)
	m.mu.inUse -= size
	C.rte_free(p)
}

// InUse returns the bytes currently allocated.
func (m *Memory) InUse() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.inUse
}

// Close frees everything still allocated and returns how many bytes that was.
func (m *Memory) Close() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.mu.inUse
	for p := range m.mu.live {
		C.rte_free(p)
	}
	m.mu.live = map[unsafe.Pointer]int{}
	m.mu.inUse = 0
	if m.name != nil {
		C.free(unsafe.Pointer(m.name))
		m.name = nil
	}
	return n
}
