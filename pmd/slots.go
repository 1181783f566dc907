package pmd

import "sync"

// maxLoopSlots is the size of the gate's and the quiescence's C slot
// tables (CDD_GATE_SLOTS, CDD_QUIESCE_SLOTS): one slot per poll loop.
const maxLoopSlots = 128

// slotTable hands out the indexes of a C slot table, one per poll loop.
// Its zero value is an empty table.
type slotTable struct {
	mu   sync.Mutex
	used [maxLoopSlots]bool
}

// take claims a free index.
func (t *slotTable) take() (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, u := range t.used {
		if !u {
			t.used[i] = true
			return i, true
		}
	}
	return 0, false
}

// free gives index i back.
func (t *slotTable) free(i int) {
	t.mu.Lock()
	t.used[i] = false
	t.mu.Unlock()
}

// inUse reports whether any index is taken.
func (t *slotTable) inUse() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, u := range t.used {
		if u {
			return true
		}
	}
	return false
}
