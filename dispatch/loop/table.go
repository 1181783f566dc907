package loop

import (
	"errors"
	"fmt"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
)

// MaxServices is how many services a loop dispatches to: a service set
// is a 64-bit mask in C.
const MaxServices = 64

// table is what a poll loop dispatches with: the classifier, the
// services its verdicts index, the engine over the loop's lanes of them,
// and the consumers the loop runs. Only the loop writes to it (its
// per-service counters and engine) once published, and a reload
// replaces it whole (Poller.Rewire).
type table[R Lane, N any] struct {
	gen        uint64
	classifier *classify.Classifier
	services   []*Service[R] // indexed by service number (all of them)
	engine     Engine
	owned      []*Service[R] // services whose single consumers run here
	goPolled   []Consumer    // consumers run here that are not native
	natives    []NativeConsumer[N]
	// Per service, counted by the loop since it last published.
	svcPackets, svcBytes, svcDrops []uint64
}

// newTable builds the table of cfg's classifier, services and consumers
// for a loop of cfg's lane, queues and burst size: which lane of each
// service the loop feeds, and which consumers it runs, in the engine or
// by Poll.
func newTable[R Lane, N any](cfg *Config[R, N], gen uint64) (*table[R, N], error) {
	if cfg.Classifier == nil {
		return nil, errors.New("dispatch: poller without classifier")
	}
	if len(cfg.Services) != cfg.Classifier.NumServices() {
		return nil, fmt.Errorf("dispatch: %d services but the classifier has %d", len(cfg.Services), cfg.Classifier.NumServices())
	}
	if len(cfg.Services) > MaxServices {
		return nil, fmt.Errorf("dispatch: %d services; at most %d", len(cfg.Services), MaxServices)
	}
	t := &table[R, N]{gen: gen, classifier: cfg.Classifier, services: cfg.Services}
	// A loop that receives feeds its lane of every service and runs the
	// local consumers of those lanes; one without RX queues only runs
	// what it owns.
	rings := make([]R, len(cfg.Services))
	direct := make([]NativeConsumer[N], len(cfg.Services))
	receives := len(cfg.Queues) > 0
	if receives {
		for i, s := range cfg.Services {
			if len(s.Rings) == 0 && s.Local == nil {
				continue // closed: what it is handed is dropped
			}
			if cfg.Lane < 0 || cfg.Lane >= len(s.Rings) {
				return nil, fmt.Errorf("dispatch: poller on lcore %d feeds lane %d; service %q has %d", cfg.Lcore, cfg.Lane, s.Name, len(s.Rings))
			}
			rings[i] = s.Rings[cfg.Lane]
			if s.Local != nil {
				c, err := localConsumer(s, cfg.Lane)
				if err != nil {
					return nil, err
				}
				t.addConsumer(c)
				direct[i], _ = c.(NativeConsumer[N])
			}
		}
	}
	for _, i := range cfg.Owned {
		if i < 0 || i >= len(cfg.Services) {
			return nil, fmt.Errorf("dispatch: poller owns service %d of %d", i, len(cfg.Services))
		}
		s := cfg.Services[i]
		if s.Local != nil {
			return nil, fmt.Errorf("dispatch: service %q runs on every receiving loop; no loop owns it", s.Name)
		}
		t.owned = append(t.owned, s)
		if s.Consumer != nil { // else drained by a task
			t.addConsumer(s.Consumer)
		}
	}
	for _, s := range cfg.Retiring {
		switch {
		case s.Local != nil && receives:
			c, err := localConsumer(s, cfg.Lane)
			if err != nil {
				return nil, err
			}
			t.addConsumer(c)
		case s.Local == nil && s.Consumer != nil:
			t.addConsumer(s.Consumer)
		}
	}
	t.goPolled = append(t.goPolled, cfg.Tasks...)
	e, err := cfg.NewEngine(rings, nativesOf(direct), nativesOf(t.natives), cfg.BurstSize)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	t.engine = e
	n := len(cfg.Services)
	t.svcPackets, t.svcBytes, t.svcDrops = make([]uint64, n), make([]uint64, n), make([]uint64, n)
	return t, nil
}

// nativesOf returns the C state of each consumer (zero for nil).
func nativesOf[N any](cs []NativeConsumer[N]) []N {
	ns := make([]N, len(cs))
	for i, c := range cs {
		if c != nil {
			ns[i] = c.Native()
		}
	}
	return ns
}

// localConsumer returns s's local consumer of lane.
func localConsumer[R Lane](s *Service[R], lane int) (Consumer, error) {
	if len(s.Local) != len(s.Rings) {
		return nil, fmt.Errorf("dispatch: service %q has %d lanes and %d local consumers", s.Name, len(s.Rings), len(s.Local))
	}
	if lane < 0 || lane >= len(s.Local) || s.Local[lane] == nil {
		return nil, fmt.Errorf("dispatch: service %q has no local consumer for lane %d", s.Name, lane)
	}
	return s.Local[lane], nil
}

// addConsumer runs c on this loop: inside the engine's step if it is
// native, else by calling Poll.
func (t *table[R, N]) addConsumer(c Consumer) {
	if n, ok := c.(NativeConsumer[N]); ok {
		t.natives = append(t.natives, n)
	} else {
		t.goPolled = append(t.goPolled, c)
	}
}

// account adds the last step's per-service deltas.
func (t *table[R, N]) account() { t.engine.Account(t.svcPackets, t.svcBytes, t.svcDrops) }

func (t *table[R, N]) free() {
	if t.engine != nil {
		t.engine.Free()
		t.engine = nil
	}
}
