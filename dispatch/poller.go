package dispatch

import (
	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/dispatch/loop"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Consumer drains one service ring (loop.Consumer). The dispatcher does
// not know what a consumer does with packets; it only calls Poll from
// the poll loop that owns the service.
type Consumer = loop.Consumer

// NativeConsumer is a Consumer implemented in C that the poll loop runs
// inside its one cgo call per iteration instead of calling Poll.
type NativeConsumer = loop.NativeConsumer[*pmd.Native]

// Service is a named class of packets: one lane per poll loop that
// receives, the consumers that drain them, and its counters
// (loop.Service).
type Service = loop.Service[*Ring]

// ServiceStats count what the dispatcher handed to a service.
type ServiceStats = loop.ServiceStats

// QueueStats count what a poll loop received from one RX queue.
type QueueStats = loop.QueueStats

// The loop package's bound on services is pmd's, a C service mask's
// width: a difference fails to compile.
const _ = uint(pmd.MaxServices-loop.MaxServices) + uint(loop.MaxServices-pmd.MaxServices)

// PollerConfig wires a poll loop.
type PollerConfig struct {
	Lcore  uint
	Port   uint16
	Queues []uint16
	// Lane is the loop's lane number in every service (Service.Rings),
	// when it has Queues.
	Lane       int
	BurstSize  int
	Classifier *classify.Classifier
	Services   []*Service // all services, indexed as the classifier's verdicts
	Owned      []int      // indexes of the services whose single consumers run on this loop
	// Tasks are consumers that drain several services at once (the
	// kernel exception path); the loop polls them like a service's
	// consumer. Owned services drained by a task have a nil Consumer.
	Tasks []Consumer
	// Retiring are services a reload removed or replaced: the classifier
	// no longer hands them packets, and their consumers run here until
	// their lanes are empty: the local consumer of this loop's lane, or
	// the single Consumer, which the caller lists on its owner only.
	Retiring []*Service
	// Gate, when set, is the EAL's interrupt-thread gate: the loop takes
	// a slot and touches no port while the gate holds it.
	Gate *pmd.Gate
	// Quiescence, when set, is told of every iteration the loop begins:
	// a remover of an RX or TX callback (DPDK's pdump) waits on it.
	Quiescence *pmd.Quiescence
	// Idle is the loop's back-off when idle.
	Idle loop.IdleSleep
}

// loopConfig is cfg with pmd's C state behind package loop's
// interfaces.
func (cfg PollerConfig) loopConfig() loop.Config[*Ring, *pmd.Native] {
	lc := loop.Config[*Ring, *pmd.Native]{
		Lcore: cfg.Lcore, Port: cfg.Port, Queues: cfg.Queues, Lane: cfg.Lane, BurstSize: cfg.BurstSize,
		Wiring: loop.Wiring[*Ring, *pmd.Native]{
			Classifier: cfg.Classifier, Services: cfg.Services, Owned: cfg.Owned, Tasks: cfg.Tasks, Retiring: cfg.Retiring,
			NewEngine: newEngine,
		},
		NewBurst: newBurst,
		Idle:     cfg.Idle,
	}
	if g := cfg.Gate; g != nil {
		lc.Gate = func() (loop.GateSlot, error) { return g.Slot() }
	}
	if q := cfg.Quiescence; q != nil {
		lc.Quiescence = func() (loop.QuiesceSlot, error) { return q.Slot() }
	}
	return lc
}

// Poller is one poll loop (loop.Poller) over pmd's bursts, lanes and
// native consumers: per RX queue and iteration it classifies the burst
// received last time and makes one cgo call (pmd.Loop.Step). Run it on
// a dedicated EAL lcore.
type Poller struct {
	*lanePoller
}

type lanePoller = loop.Poller[*Ring, *pmd.Native]

// NewPoller allocates a poll loop's bursts and C state.
func NewPoller(cfg PollerConfig) (*Poller, error) {
	p, err := loop.New(cfg.loopConfig())
	if err != nil {
		return nil, err
	}
	return &Poller{p}, nil
}

// Rewire hands the loop a new table built from cfg's Classifier,
// Services, Owned, Tasks and Retiring (loop.Poller.Rewire); the loop's
// lcore, port, queues, lane and burst size stay as NewPoller set them.
func (p *Poller) Rewire(cfg PollerConfig) (uint64, error) {
	return p.lanePoller.Rewire(cfg.loopConfig())
}

// newBurst allocates an RX queue's burst.
func newBurst(size int) (loop.Burst, error) {
	b, err := pmd.NewBurst(size)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// engine is a table's C state (pmd.Loop) as package loop drives it.
type engine struct {
	l      *pmd.Loop
	deltas []pmd.ServiceDelta // the loop's, after each Step
}

func newEngine(rings []*Ring, direct, natives []*pmd.Native, burst int) (loop.Engine, error) {
	l, err := pmd.NewLoop(rings, direct, natives, burst)
	if err != nil {
		return nil, err
	}
	return &engine{l: l, deltas: l.Deltas()}, nil
}

// Step hands b to pmd.Loop.Step: one cgo call. Every burst the loop
// package holds is a *pmd.Burst (newBurst).
func (e *engine) Step(b loop.Burst, port, queue uint16, runNatives, rx bool) int {
	var pb *pmd.Burst
	if b != nil {
		pb = b.(*pmd.Burst)
	}
	return e.l.Step(pb, port, queue, runNatives, rx)
}

// Account adds the last Step's per-service deltas, which C wrote, and
// clears them.
func (e *engine) Account(packets, bytes, drops []uint64) {
	for i, d := range e.deltas {
		packets[i] += d.Packets
		bytes[i] += d.Bytes
		drops[i] += d.Drops
		e.deltas[i] = pmd.ServiceDelta{}
	}
}

func (e *engine) Free() { e.l.Free() }
