package pmd

import (
	"testing"
	"time"
)

func newTestQuiescence() *Quiescence {
	quiescenceInit.Do(func() { initQuiesceSlots() })
	return &Quiescence{}
}

// A remover waits for a loop that is inside an iteration until it begins
// the next one, and not for a loop that is offline.
func TestQuiesceWaitsForOnlineLoops(t *testing.T) {
	q := newTestQuiescence()
	busy, err := q.Slot()
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Release()
	idle, err := q.Slot()
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Release()
	idle.Pass()
	idle.Offline()

	before := q.Stats()
	busy.Pass() // inside an iteration from here on
	const lag = 50 * time.Millisecond
	go func() {
		time.Sleep(lag)
		busy.Pass()
	}()
	start := time.Now()
	quiesceNow()
	if took := time.Since(start); took < lag {
		t.Errorf("the remover went on after %v, before the loop's next iteration (%v)", took, lag)
	}
	st := q.Stats()
	if st.Removals != before.Removals+1 || st.TimedOut != before.TimedOut {
		t.Errorf("stats %+v after one wait from %+v", st, before)
	}

	busy.Offline()
	start = time.Now()
	quiesceNow()
	if took := time.Since(start); took > lag {
		t.Errorf("waited %v with every loop offline", took)
	}
}

// Removing a callback that is not there fails in DPDK and waits for
// nothing.
func TestQuiesceRemoveRefused(t *testing.T) {
	q := newTestQuiescence()
	before := q.Stats()
	if rc := removeNone(0); rc == 0 {
		t.Fatal("removing no callback succeeded")
	}
	if st := q.Stats(); st.Removals != before.Removals {
		t.Errorf("a refused removal waited: %+v then %+v", before, st)
	}
}

func TestQuiesceSlotsRunOut(t *testing.T) {
	CheckSlots(t, newTestQuiescence().Slot, ErrQuiescenceFull, 128)
}
