package loop_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/dispatch/loop"
	"github.com/cephdpdkd/cephdpdkd/dispatch/loop/looptest"
)

const (
	svcA, svcB, svcOther = looptest.SvcA, looptest.SvcB, looptest.SvcOther
	frameLen             = looptest.FrameLen
)

// New refuses wiring that would leave a lane without its loop or a
// local service with an owner, and frees what it took when a burst, the
// engine or a slot cannot be had.
func TestNewRejects(t *testing.T) {
	slotErr := errors.New("no slot left")
	tests := []struct {
		name string
		edit func(*fakeConfig, *fakeNIC)
	}{
		{"lane past the rings", func(c *fakeConfig, _ *fakeNIC) { c.Lane = 2 }},
		{"negative lane", func(c *fakeConfig, _ *fakeNIC) { c.Lane = -1 }},
		{"too few services", func(c *fakeConfig, _ *fakeNIC) { c.Services = c.Services[:2] }},
		{"owned index out of range", func(c *fakeConfig, _ *fakeNIC) { c.Owned = []int{3} }},
		{"owning a local service", func(c *fakeConfig, _ *fakeNIC) {
			c.Services[svcB].Local = []loop.Consumer{&recorder{}, &recorder{}}
			c.Owned = []int{svcB}
		}},
		{"a local consumer short", func(c *fakeConfig, _ *fakeNIC) { c.Services[svcB].Local = []loop.Consumer{&recorder{}} }},
		{"a nil local consumer", func(c *fakeConfig, _ *fakeNIC) { c.Services[svcB].Local = []loop.Consumer{nil, &recorder{}} }},
		{"a retiring local consumer short", func(c *fakeConfig, _ *fakeNIC) {
			c.Retiring = []*fakeService{{Name: "old", Rings: []*fakeRing{{}, {}}, Local: []loop.Consumer{&recorder{}}}}
		}},
		{"no classifier", func(c *fakeConfig, _ *fakeNIC) { c.Classifier = nil }},
		{"no engine", func(_ *fakeConfig, nic *fakeNIC) { nic.fail = "engine" }},
		{"no second burst", func(_ *fakeConfig, nic *fakeNIC) { nic.fail = "burst" }},
		{"no gate slot", func(c *fakeConfig, _ *fakeNIC) {
			c.Gate = func() (loop.GateSlot, error) { return nil, slotErr }
		}},
		{"no quiescence slot", func(c *fakeConfig, _ *fakeNIC) {
			c.Gate = func() (loop.GateSlot, error) { return &fakeSlot{}, nil }
			c.Quiescence = func() (loop.QuiesceSlot, error) { return nil, slotErr }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nic := newNIC()
			cfg := nic.config(t, services(2, 8), 0, 1)
			var gate *fakeSlot
			tt.edit(&cfg, nic)
			if take := cfg.Gate; take != nil {
				cfg.Gate = func() (loop.GateSlot, error) {
					s, err := take()
					gate, _ = s.(*fakeSlot)
					return s, err
				}
			}
			if p, err := loop.New(cfg); err == nil {
				p.Free()
				t.Fatal("New accepted it")
			}
			if !nic.allFreed() {
				t.Error("New failed but left bursts or engines allocated")
			}
			if gate != nil && gate.releases != 1 {
				t.Errorf("gate slot released %d times, want 1", gate.releases)
			}
		})
	}
}

// A loop places each consumer: a service's local consumer of the loop's
// lane and the single consumers of the services it owns run on it, in
// the engine when native (a local native one also takes packets
// directly), else by Poll; tasks are polled; retiring services' consumers
// keep running. A loop without RX queues feeds no lane.
func TestPlacement(t *testing.T) {
	nat := func() *fakeNative { return &fakeNative{} }
	tests := []struct {
		name    string
		queues  []uint16
		edit    func(svcs []*fakeService, c *fakeConfig)
		rings   []bool // per service: the engine has a lane of it
		direct  []bool // per service: a direct native consumer
		natives int
		owned   []string
		polled  int // Go consumers the loop polls
	}{
		{"receiving, nothing to run", []uint16{0}, func([]*fakeService, *fakeConfig) {},
			[]bool{true, true, true}, []bool{false, false, false}, 0, nil, 0},
		{"owner only", nil, func(s []*fakeService, c *fakeConfig) {
			s[svcA].Consumer, s[svcB].Consumer = nat(), &recorder{}
			c.Owned = []int{svcA, svcB}
		}, []bool{false, false, false}, []bool{false, false, false}, 1, []string{"a", "b"}, 1},
		{"local natives and a task", []uint16{0}, func(s []*fakeService, c *fakeConfig) {
			s[svcA].Local = []loop.Consumer{nat(), nat()}
			s[svcB].Local = []loop.Consumer{&recorder{}, &recorder{}}
			c.Tasks = []loop.Consumer{&recorder{}}
			c.Owned = []int{svcOther}
		}, []bool{true, true, true}, []bool{true, false, false}, 1, []string{"other"}, 2},
		{"closed service", []uint16{0}, func(s []*fakeService, _ *fakeConfig) { s[svcB].Rings = nil },
			[]bool{true, false, true}, []bool{false, false, false}, 0, nil, 0},
		{"retiring", []uint16{0}, func(_ []*fakeService, c *fakeConfig) {
			c.Retiring = []*fakeService{
				{Name: "old local", Rings: []*fakeRing{{}, {}}, Local: []loop.Consumer{nat(), nat()}},
				{Name: "old single", Consumer: &recorder{}},
				{Name: "old task-drained"},
			}
		}, []bool{true, true, true}, []bool{false, false, false}, 1, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nic := newNIC()
			svcs := services(2, 8)
			cfg := nic.config(t, svcs, tt.queues...)
			cfg.Lane = 1
			tt.edit(svcs, &cfg)
			p := newPoller(t, cfg)
			e := nic.engines[0]
			for i := range svcs {
				if got := e.rings[i] != nil; got != tt.rings[i] {
					t.Errorf("service %d: engine has a lane %v, want %v", i, got, tt.rings[i])
				} else if got && e.rings[i] != svcs[i].Rings[1] {
					t.Errorf("service %d: the engine feeds another lane than the loop's", i)
				}
				if got := e.direct[i] != nil; got != tt.direct[i] {
					t.Errorf("service %d: direct consumer %v, want %v", i, got, tt.direct[i])
				}
			}
			if len(e.natives) != tt.natives {
				t.Errorf("engine runs %d natives, want %d", len(e.natives), tt.natives)
			}
			var owned []string
			for _, s := range p.Owned() {
				owned = append(owned, s.Name)
			}
			if !slices.Equal(owned, tt.owned) {
				t.Errorf("owns %q, want %q", owned, tt.owned)
			}
			// Every Go consumer placed here is polled once an iteration.
			p.PollOnce()
			polled := 0
			for _, c := range allConsumers(svcs, cfg) {
				if r, ok := c.(*recorder); ok && r.polls > 0 {
					polled++
				}
			}
			if polled != tt.polled {
				t.Errorf("%d Go consumers polled, want %d", polled, tt.polled)
			}
		})
	}
}

// allConsumers lists every consumer cfg names.
func allConsumers(svcs []*fakeService, cfg fakeConfig) []loop.Consumer {
	var cs []loop.Consumer
	for _, s := range append(slices.Clone(svcs), cfg.Retiring...) {
		cs = append(append(cs, s.Local...), s.Consumer)
	}
	return append(cs, cfg.Tasks...)
}

// The loop classifies what it received and the engine hands each packet
// to its service's lane; a full lane or a closed service drops the rest,
// counted as the service's drops, never as packets or bytes. Queue and
// malformed counters are published when the loop goes idle.
func TestDispatchCounts(t *testing.T) {
	type want struct{ packets, drops uint64 }
	tests := []struct {
		name   string
		size   int     // lane slots
		closed int     // a service without lanes, or -1
		sends  [][]int // per queue, the services of the frames it receives
		want   [3]want // per service
		bad    int     // malformed frames sent on queue 0
	}{
		{"each to its service", 8, -1, [][]int{{svcA, svcA, svcB, svcOther, svcA}},
			[3]want{{3, 0}, {1, 0}, {1, 0}}, 0},
		{"full lane drops the rest", 4, -1, [][]int{{svcA, svcA, svcA, svcA, svcA, svcA, svcB}},
			[3]want{{4, 2}, {1, 0}, {0, 0}}, 0},
		{"closed service drops", 8, svcB, [][]int{{svcB, svcA, svcB}},
			[3]want{{1, 0}, {0, 2}, {0, 0}}, 0},
		{"two queues", 8, -1, [][]int{{svcA, svcB}, {svcB, svcOther, svcOther}},
			[3]want{{1, 0}, {2, 0}, {2, 0}}, 0},
		{"malformed to the default", 8, -1, [][]int{{svcA}}, [3]want{{1, 0}, {0, 0}, {2, 0}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nic := newNIC()
			svcs := services(1, tt.size)
			if tt.closed >= 0 {
				svcs[tt.closed].Rings = nil
			}
			var queues []uint16
			sent := map[uint16]int{}
			for q, list := range tt.sends {
				queues = append(queues, uint16(q))
				for i, s := range list {
					nic.send(uint16(q), [][]byte{looptest.Frame(s, 0, uint32(i))})
				}
				sent[uint16(q)] = len(list) * frameLen
			}
			for range tt.bad {
				nic.send(0, [][]byte{make([]byte, 10)})
				sent[0] += 10
			}
			p := newPoller(t, nic.config(t, svcs, queues...))
			idle(t, p)
			for i, s := range svcs {
				w := tt.want[i]
				if n, b, d := s.Stats.Packets.Load(), s.Stats.Bytes.Load(), s.Stats.Drops.Load(); n != w.packets || d != w.drops ||
					(i != svcOther || tt.bad == 0) && b != w.packets*frameLen {
					t.Errorf("service %s: %d packets, %d bytes, %d drops; want %d, %d, %d",
						s.Name, n, b, d, w.packets, w.packets*frameLen, w.drops)
				}
				if q := s.Queued(); tt.closed != i && uint64(q) != w.packets {
					t.Errorf("service %s: %d queued, want %d", s.Name, q, w.packets)
				}
			}
			for i := range p.Queues() {
				q := &p.Queues()[i]
				if b := q.Bytes.Load(); b != uint64(sent[q.Queue]) {
					t.Errorf("queue %d: %d bytes received, want %d", q.Queue, b, sent[q.Queue])
				}
			}
			malformed := uint64(0)
			for r := classify.ReasonNone + 1; r < classify.NumReasons; r++ {
				malformed += p.Malformed(r)
			}
			if malformed != uint64(tt.bad) {
				t.Errorf("%d malformed counted, want %d", malformed, tt.bad)
			}
		})
	}
}

// After StopRx the loop receives nothing more but still dispatches the
// burst it holds; only then does it report RxDrained.
func TestStopRxDispatchesHeldBurst(t *testing.T) {
	nic := newNIC()
	svcs := services(1, 64)
	nic.send(0, looptest.Frames(svcA, 0, 0, 10))
	p := newPoller(t, nic.config(t, svcs, 0))
	p.PollOnce() // receives 4, classified next time
	p.StopRx()
	if p.RxDrained() {
		t.Fatal("drained while holding a burst")
	}
	p.PollOnce()
	if !p.RxDrained() {
		t.Fatal("not drained after dispatching the held burst")
	}
	idle(t, p)
	if n := svcs[svcA].Stats.Packets.Load(); n != 4 {
		t.Errorf("dispatched %d, want the 4 held", n)
	}
	if left := len(nic.rx[0]); left != 6 {
		t.Errorf("%d frames left in the queue, want 6: received after StopRx", left)
	}
}

// A rewire swaps the loop's table between iterations: the loop adopts
// it at its next iteration, publishing first what it counted with the
// old one; the old engine is freed only once adopted; a retiring
// service's consumer keeps draining; a rewire cannot move the loop to
// another lane, queue count or burst size.
func TestRewire(t *testing.T) {
	nic := newNIC()
	svcs := services(1, 64)
	rec := &recorder{t: t, lanes: svcs[svcB].Rings, paused: true}
	svcs[svcB].Consumer = rec
	cfg := nic.config(t, svcs, 0)
	cfg.Owned = []int{svcB}
	p := newPoller(t, cfg)
	nic.send(0, looptest.Frames(svcB, 0, 0, 3))
	idle(t, p)

	next := nic.config(t, []*fakeService{svcs[svcA], {Name: "c"}, svcs[svcOther]}, 0)
	next.Retiring = []*fakeService{svcs[svcB]}
	gen, err := p.Rewire(next)
	if err != nil {
		t.Fatal(err)
	}
	p.FreeRetired()
	if p.Adopted(gen) || nic.engines[0].freed {
		t.Fatal("adopted, or the old engine freed, before the loop ran")
	}
	rec.paused = false
	nic.send(0, looptest.Frames(svcB, 0, 3, 2)) // now service c's: closed
	idle(t, p)
	if !p.Adopted(gen) {
		t.Fatal("not adopted after the loop ran")
	}
	p.FreeRetired()
	if !nic.engines[0].freed || nic.engines[1].freed {
		t.Errorf("after adoption: old engine freed %v, new %v; want true, false", nic.engines[0].freed, nic.engines[1].freed)
	}
	if n := svcs[svcB].Stats.Packets.Load(); n != 3 || len(rec.got) != 3 {
		t.Errorf("retired b: %d packets counted, %d consumed; want 3 and 3", n, len(rec.got))
	}
	if d := next.Services[1].Stats.Drops.Load(); d != 2 {
		t.Errorf("closed c: %d drops, want 2", d)
	}
	for _, edit := range []func(*fakeConfig){
		func(c *fakeConfig) { c.Lane = 1 },
		func(c *fakeConfig) { c.BurstSize = 8 },
		func(c *fakeConfig) { c.Queues = []uint16{0, 1} },
	} {
		bad := nic.config(t, svcs, 0)
		edit(&bad)
		if _, err := p.Rewire(bad); err == nil {
			t.Errorf("a rewire to %+v was accepted", bad)
		}
	}
}

// A loop behind the gate touches nothing while held; driven by hand
// (PollOnce) it goes offline after every call, held or not, and counts
// every iteration it begins in its quiescence slot.
func TestGateAndQuiescence(t *testing.T) {
	for _, held := range []bool{false, true} {
		nic := newNIC()
		gate, q := &fakeSlot{held: held}, &fakeSlot{}
		cfg := nic.config(t, services(1, 64), 0)
		cfg.Gate = func() (loop.GateSlot, error) { return gate, nil }
		cfg.Quiescence = func() (loop.QuiesceSlot, error) { return quiet{q}, nil }
		p, err := loop.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nic.send(0, looptest.Frames(svcA, 0, 0, 4))
		// Open, the call receives the 4 frames in one engine step.
		wantWork, wantSteps := 4, 1
		if held {
			wantWork, wantSteps = 0, 0
		}
		if n, s := p.PollOnce(), nic.engines[0].steps; n != wantWork || s != wantSteps {
			t.Errorf("held %v: PollOnce handled %d in %d engine steps, want %d in %d", held, n, s, wantWork, wantSteps)
		}
		if gate.passes != 1 || q.passes != 1 || gate.offlines != 1 || q.offlines != 1 {
			t.Errorf("held %v: gate %+v, quiescence %+v: want one pass and one offline each", held, *gate, *q)
		}
		p.Free()
		if gate.releases != 1 || q.releases != 1 || !nic.allFreed() {
			t.Errorf("held %v: Free: gate released %d, quiescence %d, all freed %v", held, gate.releases, q.releases, nic.allFreed())
		}
	}
}

// Run polls on its own goroutine until Stop while others read the
// counters; it publishes them and goes offline when it returns.
func TestRunUntilStop(t *testing.T) {
	nic := newNIC()
	svcs := services(1, 1024)
	native := &fakeNative{lanes: svcs[svcA].Rings}
	svcs[svcA].Consumer = native
	gate := &fakeSlot{}
	cfg := nic.config(t, svcs, 0)
	cfg.Owned = []int{svcA}
	cfg.Gate = func() (loop.GateSlot, error) { return gate, nil }
	nic.send(0, looptest.Frames(svcA, 0, 0, 100))
	p := newPoller(t, cfg)
	var wg sync.WaitGroup
	wg.Go(p.Run)
	for svcs[svcA].Stats.Packets.Load() < 100 {
		p.BusyRatio()
		p.Iterations()
	}
	p.Stop()
	wg.Wait()
	if n := native.published.Load(); n != 100 {
		t.Errorf("the native consumer published %d, want 100", n)
	}
	if p.Iterations() == 0 {
		t.Error("no iterations counted")
	}
	if gate.offlines != 1 {
		t.Errorf("gate offline %d times, want once, at the end", gate.offlines)
	}
}
