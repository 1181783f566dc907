package mempool

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// ErrNoMemory is returned when DPDK memory is exhausted or over a limit.
var ErrNoMemory = errors.New("mempool: out of DPDK memory")

// Memory hands out zeroed DPDK memory (hugepages, or the EAL's anonymous
// memory under --no-huge) as byte slices: the backing store for RoCE
// memory regions. It satisfies roce.Allocator.
type Memory struct {
	name  string
	limit int

	mu struct {
		sync.Mutex
		inUse int
		live  map[*byte][]byte // by first byte
	}
}

// NewMemory returns an allocator of at most limit bytes (0: no limit),
// tagged name in DPDK's malloc statistics.
func NewMemory(name string, limit int) *Memory {
	m := &Memory{name: name, limit: limit}
	m.mu.live = map[*byte][]byte{}
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
	b := pmd.Zmalloc(m.name, size)
	if b == nil {
		return nil, fmt.Errorf("%w: %d bytes", ErrNoMemory, size)
	}
	m.mu.inUse += size
	m.mu.live[&b[0]] = b
	prefault(b)
	return b, nil
}

// prefault writes a byte of every page of b. Memory registered for RDMA
// is resident, as ibv_reg_mr pins it; DPDK's anonymous memory under
// --no-huge (and a hugepage rte_zmalloc knows to be clean) is otherwise
// faulted in on the data path, a page at a time, the first time a
// receive lands in it: a first pass over a bridge's 256 MiB receive pool
// ran at half the speed of the next.
func prefault(b []byte) {
	page := os.Getpagesize()
	for i := 0; i < len(b); i += page {
		b[i] = 0
	}
}

// Free releases memory from Alloc. Freeing anything else is ignored.
func (m *Memory) Free(b []byte) {
	if len(b) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	all, ok := m.mu.live[&b[0]]
	if !ok {
		return
	}
	delete(m.mu.live, &b[0])
	m.mu.inUse -= len(all)
	pmd.FreeMemory(all)
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
	for _, b := range m.mu.live {
		pmd.FreeMemory(b)
	}
	m.mu.live = map[*byte][]byte{}
	m.mu.inUse = 0
	return n
}
