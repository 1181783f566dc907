package pmd_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Other callbacks on DPDK's interrupt thread (an alarm here; a memif
// disconnect in production) run only while the poll loops are held:
// every loop that polls has passed the gate since it closed, so none is
// inside a driver call. Between those windows the loops run.
func TestGateHoldsLoopsDuringInterruptCallbacks(t *testing.T) {
	g := testenv.HoldGate(t, testEAL)
	const loops = 2
	var stop atomic.Bool
	var passed, held [loops]atomic.Uint64
	var wg sync.WaitGroup
	for i := range loops {
		s, err := g.Slot()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Release()
			for !stop.Load() {
				if s.Pass() {
					passed[i].Add(1)
				} else {
					held[i].Add(1)
				}
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	w0 := g.Stats().Windows
	for i := range 20 {
		ok, err := pmd.ProbeGate(g, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("probe %d: an interrupt-thread callback ran while a loop could be in a driver call", i)
		}
	}
	st := g.Stats()
	for i := range loops {
		if passed[i].Load() == 0 || held[i].Load() == 0 {
			t.Errorf("loop %d: passed %d times, held %d: want both", i, passed[i].Load(), held[i].Load())
		}
	}
	if st.Windows <= w0 {
		t.Errorf("no window opened: %+v", st)
	}
	t.Logf("%+v", st)
}

// With no loop online, the gate still holds the (absent) loops for the
// other callbacks and lets them run within a few periods.
func TestGateWithoutLoops(t *testing.T) {
	g := testenv.HoldGate(t, testEAL)
	s, err := g.Slot()
	if err != nil {
		t.Fatal(err)
	}
	s.Release() // a slot that never passed, and was let go, is not waited for
	start := time.Now()
	ok, err := pmd.ProbeGate(g, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Error("callback ran with the run flag up")
	}
	t.Logf("callback ran %v after it was due", time.Since(start))
}

// holdGate takes a hold on the EAL's gate, which the test releases
// (testenv.HoldGate releases it at the end instead).
func holdGate(t *testing.T) *pmd.Gate {
	t.Helper()
	g, err := testEAL.HoldGate()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The gate is one per EAL: holds share it, the last release stops it,
// and an extra release is an error.
func TestGateHolds(t *testing.T) {
	if a, b := holdGate(t), holdGate(t); a != b {
		t.Error("two gates in one process")
	}
	for range 2 {
		if err := testEAL.ReleaseGate(); err != nil {
			t.Fatal(err)
		}
	}
	if err := testEAL.ReleaseGate(); err == nil {
		t.Error("release without a hold succeeded")
	}
}

// Slots run out at the table's size and come back when released.
func TestGateSlots(t *testing.T) {
	g := testenv.HoldGate(t, testEAL)
	pmd.CheckSlots(t, g.Slot, pmd.ErrGateFull, 128)
}

// The last release refuses while a loop still holds a slot: the
// interrupt thread would wait for that loop for good.
func TestGateReleaseWithSlotTaken(t *testing.T) {
	s, err := holdGate(t).Slot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testEAL.ReleaseGate(); err == nil {
		t.Fatal("released with a slot taken")
	}
	s.Release()
	if err := testEAL.ReleaseGate(); err != nil {
		t.Fatal(err)
	}
}

// What passing the gate costs a loop per iteration: one atomic load and
// store and one load, no cgo call.
func BenchmarkGatePass(b *testing.B) {
	g := testenv.HoldGate(b, testEAL)
	s, err := g.Slot()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Release()
	held := 0
	for b.Loop() {
		if !s.Pass() {
			held++
		}
	}
	b.ReportMetric(float64(held)/float64(b.N), "held/op")
}
