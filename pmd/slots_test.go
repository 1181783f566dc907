package pmd

import (
	"errors"
	"testing"
)

// CheckSlots takes slots from a table (a gate's, a quiescence's) until
// take returns full, and wants n of them; then a released slot must be
// given again, and all are released. The external tests use it too.
func CheckSlots[S interface{ Release() }](t *testing.T, take func() (S, error), full error, n int) {
	t.Helper()
	var slots []S
	for {
		s, err := take()
		if errors.Is(err, full) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, s)
		if len(slots) > 1024 {
			t.Fatal("slots never run out")
		}
	}
	if len(slots) != n {
		t.Fatalf("%d slots, want %d", len(slots), n)
	}
	slots[n-1].Release()
	s, err := take()
	if err != nil {
		t.Fatalf("a released slot is not given again: %v", err)
	}
	slots[n-1] = s
	for _, s := range slots {
		s.Release()
	}
}
