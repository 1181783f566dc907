package loop

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
)

// Config wires a poll loop: its lcore, port, RX queues, lane and burst
// size, which stay, and the Wiring of its first table.
type Config[R Lane, N any] struct {
	Lcore     uint
	Port      uint16
	Queues    []uint16
	Lane      int // the loop's lane in every service (Service.Rings), when it has Queues
	BurstSize int
	Wiring[R, N]

	// NewBurst allocates a queue's burst; Gate and Quiescence, when set,
	// take the loop's slot in the interrupt-thread gate and in the
	// callback removers' quiescence. The Poller frees what they return.
	NewBurst   func(size int) (Burst, error)
	Gate       func() (GateSlot, error)
	Quiescence func() (QuiesceSlot, error)
	// Idle, when its Max is set, has the loop sleep instead of spin when
	// it has nothing to do.
	Idle IdleSleep
}

// IdleSleep is a poll loop's back-off when idle: after After iterations
// in a row that handled nothing, it sleeps, first Min, doubling up to
// Max while it stays idle, and spins again from the first iteration
// with work. A frame that arrives during a sleep waits for its end: Max
// bounds the latency it adds, and with it the wake-ups an idle loop
// costs. Wake, when set, ends a sleep early: other goroutines with work
// for the loop (the RoCE bridge's TCP side) call its Wake.
type IdleSleep struct {
	After    int
	Min, Max time.Duration
	// Sleeper blocks the loop for each step, and ends a sleep early on
	// its Wake; nil: a Go timer (NewTimerSleeper).
	Sleeper Sleeper
}

// Sleeper blocks a poll loop's thread while it is idle.
type Sleeper interface {
	// Sleep blocks for d or until Wake, and reports whether Wake ended
	// it (or one was pending).
	Sleep(d time.Duration) bool
	// Wake ends the current or next Sleep. Any goroutine may call it;
	// it never blocks.
	Wake()
}

// TimerSleeper is a Sleeper on a Go timer. pmd.IdleSleeper costs a poll
// loop locked to its thread far less: this one hands the goroutine
// between threads at each wake-up.
type TimerSleeper struct {
	c     chan struct{}
	timer *time.Timer
}

// NewTimerSleeper returns a TimerSleeper.
func NewTimerSleeper() *TimerSleeper { return &TimerSleeper{c: make(chan struct{}, 1)} }

// Wake ends the current or next Sleep.
func (s *TimerSleeper) Wake() {
	select {
	case s.c <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// Sleep blocks for d or until Wake.
func (s *TimerSleeper) Sleep(d time.Duration) bool {
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.timer.C:
		return false
	case <-s.c:
		s.timer.Stop()
		return true
	}
}

// sleeper is a loop's IdleSleep state.
type sleeper struct {
	IdleSleep
	idle int           // iterations in a row without work
	next time.Duration // the next sleep
	// Slept counts sleeps, and their time; the loop publishes them.
	sleeps, slept uint64
}

// due counts an iteration that did work units of work, and reports
// whether the loop should now sleep.
func (s *sleeper) due(work int) bool {
	if s.Max <= 0 {
		return false
	}
	if work != 0 {
		s.idle, s.next = 0, 0
		return false
	}
	s.idle++
	return s.idle >= s.After
}

// sleep sleeps the next back-off step, or until Wake.
func (s *sleeper) sleep() {
	s.next = min(max(2*s.next, s.Min, time.Microsecond), s.Max)
	start := time.Now()
	if s.Sleeper == nil {
		s.Sleeper = NewTimerSleeper()
	}
	if s.Sleeper.Sleep(s.next) {
		s.next = 0
	}
	s.sleeps++
	s.slept += uint64(time.Since(start))
}

// Wiring is what a table is built from: the classifier and the services
// its verdicts index, which of them the loop runs, and how to build the
// table's engine.
type Wiring[R Lane, N any] struct {
	Classifier *classify.Classifier
	// Services are all services, indexed as the classifier's verdicts.
	Services []*Service[R]
	// Owned are the indexes of the services whose single consumers run
	// on this loop.
	Owned []int
	// Tasks are consumers that drain several services at once (the
	// kernel exception path); the loop polls them like a service's
	// consumer. Owned services drained by a task have a nil Consumer.
	Tasks []Consumer
	// Retiring are services a reload removed or replaced: the classifier
	// no longer hands them packets, and their consumers run here until
	// their lanes are empty: the local consumer of this loop's lane, or
	// the single Consumer, which the caller lists on its owner only.
	Retiring  []*Service[R]
	NewEngine NewEngine[R, N]
}

// publishEvery bounds how many busy iterations counters may lag.
const publishEvery = 64

type localCounts struct {
	queuePackets, queueBytes []uint64
	malformed                [classify.NumReasons]uint64
}

// Poller is one poll loop: it receives bursts from its RX queues,
// classifies each packet, has the engine enqueue the burst into its lane
// of each service, and runs the local consumers of its lanes and the
// single consumers of the services it owns. Run it on a dedicated EAL
// lcore.
//
// A reload hands the loop a new table through next, an atomic pointer
// the loop reads once per iteration, before it touches a burst: the
// loop takes no lock and allocates nothing for it, and a burst is
// dispatched whole with one table. The loop acknowledges by storing the
// table's generation in adopted; only then may the caller free what the
// old table alone referenced (rings, consumers, its engine): the
// quiescence handshake.
type Poller[R Lane, N any] struct {
	lcore  uint
	port   uint16
	lane   int
	burst  int
	queues []QueueStats
	bursts []Burst      // one per RX queue: received, not yet classified
	cur    *table[R, N] // the loop's own view

	next    atomic.Pointer[table[R, N]]
	adopted atomic.Uint64
	// latest and retired belong to the goroutine that calls Rewire:
	// the last table published, and older ones the loop may still use.
	latest  *table[R, N]
	retired []*table[R, N]
	// gate, when set, holds the loop while DPDK's interrupt thread runs:
	// the port's driver may unmap its queues then.
	gate GateSlot
	// quiet, when set, counts the loop's iterations, so that an RX or TX
	// callback removed from the port is known unused.
	quiet QuiesceSlot

	// The loop counts in plain fields and publishes them to the atomic
	// counters when idle or every publishEvery busy iterations: locked
	// instructions per burst would cost several ns per packet.
	local        localCounts
	sincePublish int
	// dirty: an iteration did work since the last publish. An idle loop
	// publishes once, not on every empty turn: its dozens of atomic
	// stores took 7% of a RoCE loop that was idle between bursts.
	dirty bool

	malformed [classify.NumReasons]atomic.Uint64
	busyNanos atomic.Uint64
	loopNanos atomic.Uint64
	// iterations counts Run's iterations, published with the busy
	// time (about every millisecond): the watchdog's sign of life.
	iterations atomic.Uint64

	stopRx    atomic.Bool
	rxDrained atomic.Bool // RX stopped and every burst dispatched
	stop      atomic.Bool

	idle               sleeper
	sleeps, sleepNanos atomic.Uint64
}

// New builds a poll loop, its first table and its bursts, and takes its
// slots.
func New[R Lane, N any](cfg Config[R, N]) (*Poller[R, N], error) {
	p := &Poller[R, N]{lcore: cfg.Lcore, port: cfg.Port, lane: cfg.Lane, burst: cfg.BurstSize,
		idle: sleeper{IdleSleep: cfg.Idle}}
	t, err := newTable(&cfg, 1)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Poller[R, N], error) {
		t.free()
		p.Free()
		return nil, err
	}
	for _, q := range cfg.Queues {
		p.queues = append(p.queues, QueueStats{Queue: q})
		b, err := cfg.NewBurst(cfg.BurstSize)
		if err != nil {
			return fail(err)
		}
		p.bursts = append(p.bursts, b)
	}
	if cfg.Gate != nil {
		if p.gate, err = cfg.Gate(); err != nil {
			p.gate = nil
			return fail(fmt.Errorf("dispatch: poller on lcore %d: %w", cfg.Lcore, err))
		}
	}
	if cfg.Quiescence != nil {
		if p.quiet, err = cfg.Quiescence(); err != nil {
			p.quiet = nil
			return fail(fmt.Errorf("dispatch: poller on lcore %d: %w", cfg.Lcore, err))
		}
	}
	p.cur, p.latest = t, t
	p.next.Store(t)
	p.adopted.Store(t.gen)
	p.local = localCounts{queuePackets: make([]uint64, len(cfg.Queues)), queueBytes: make([]uint64, len(cfg.Queues))}
	return p, nil
}

// Rewire hands the loop a new table built from cfg's Wiring; the loop's
// lcore, port, queues, lane, burst size and slots stay as New set them. The
// loop adopts it at the top of its next iteration, after publishing its
// counters of the old one. It returns the new table's generation: until
// Adopted reports it, the loop may still run the old table's consumers
// and fill its lanes. Rewire, Adopted and FreeRetired are for one
// goroutine at a time.
func (p *Poller[R, N]) Rewire(cfg Config[R, N]) (uint64, error) {
	if cfg.Lane != p.lane || cfg.BurstSize != p.burst || len(cfg.Queues) != len(p.queues) {
		return 0, fmt.Errorf("dispatch: poller on lcore %d: a rewire cannot change its lane, queues or burst size", p.lcore)
	}
	t, err := newTable(&cfg, p.latest.gen+1)
	if err != nil {
		return 0, err
	}
	p.retired = append(p.retired, p.latest)
	p.latest = t
	p.next.Store(t)
	return t.gen, nil
}

// Adopted reports whether the loop has moved to table generation gen
// (or a later one): it no longer touches anything older.
func (p *Poller[R, N]) Adopted(gen uint64) bool { return p.adopted.Load() >= gen }

// FreeRetired frees the engines of the tables the loop has moved past.
func (p *Poller[R, N]) FreeRetired() {
	seen := p.adopted.Load()
	keep := p.retired[:0]
	for _, t := range p.retired {
		if t.gen < seen {
			t.free()
		} else {
			keep = append(keep, t)
		}
	}
	clear(p.retired[len(keep):])
	p.retired = keep
}

// adopt moves the loop to table t, publishing first what it counted
// with the old one, whose services may be gone from t.
func (p *Poller[R, N]) adopt(t *table[R, N]) {
	p.publish()
	p.cur = t
	p.adopted.Store(t.gen)
}

// Lcore returns the lcore this loop is meant to run on.
func (p *Poller[R, N]) Lcore() uint { return p.lcore }

// Run polls until Stop. Call it on the poller's lcore.
func (p *Poller[R, N]) Run() {
	// The clock is read once per timeSlice iterations, and a slice's time
	// is split by the share of its iterations that handled packets: the
	// busy ratio without a clock read per iteration.
	const timeSlice = 16
	last := time.Now()
	var busy, total time.Duration
	iters, busyIters := 0, 0
	var unpublished uint64 // iterations not yet added to p.iterations
	for !p.stop.Load() {
		n := p.pollOnce()
		if n == heldByGate {
			// Not an iteration: a loop its gate never lets go must show
			// as stalled (Iterations).
			continue
		}
		if n > 0 {
			busyIters++
		}
		if p.idle.due(n) {
			// Asleep, the loop is offline to the gate and the callback
			// removers, which would otherwise wait out its sleep.
			p.offline()
			p.idle.sleep()
			p.sleeps.Store(p.idle.sleeps)
			p.sleepNanos.Store(p.idle.slept)
		}
		if iters++; iters < timeSlice {
			continue
		}
		now := time.Now()
		d := now.Sub(last)
		last = now
		total += d
		busy += d * time.Duration(busyIters) / timeSlice
		iters, busyIters = 0, 0
		unpublished += timeSlice
		if total > time.Millisecond {
			p.busyNanos.Add(uint64(busy))
			p.loopNanos.Add(uint64(total))
			p.iterations.Add(unpublished)
			busy, total, unpublished = 0, 0, 0
		}
	}
	p.busyNanos.Add(uint64(busy))
	p.loopNanos.Add(uint64(total))
	p.iterations.Add(unpublished + uint64(iters))
	p.publish()
	p.offline()
}

// PollOnce runs one iteration. For each RX queue: classify the burst
// received last time, then one engine step dispatches it into the lanes,
// runs the native consumers (with the last queue) and receives the next
// burst. Then the Go consumers poll. It returns the packets handled
// (received, dispatched or consumed): 0 when the loop is idle, or held by
// its gate (Config.Gate), which it leaves offline on return.
func (p *Poller[R, N]) PollOnce() int {
	n := p.pollOnce()
	// Not a running loop: the gate and callback removers must not wait
	// for the caller's next call.
	p.offline()
	return max(n, 0)
}

// offline tells the gate and the callback removers that the loop is
// not running.
func (p *Poller[R, N]) offline() {
	if p.gate != nil {
		p.gate.Offline()
	}
	if p.quiet != nil {
		p.quiet.Offline()
	}
}

// releaseSlots gives the loop's slots back to the gate and the
// quiescence.
func (p *Poller[R, N]) releaseSlots() {
	if p.gate != nil {
		p.gate.Release()
	}
	if p.quiet != nil {
		p.quiet.Release()
	}
	p.gate, p.quiet = nil, nil
}

// heldByGate is what pollOnce returns when the gate held the loop.
const heldByGate = -1

// pollOnce is PollOnce for Run: it leaves the gate slot online.
func (p *Poller[R, N]) pollOnce() int {
	if p.quiet != nil {
		p.quiet.Pass()
	}
	if p.gate != nil && !p.gate.Pass() {
		// Held: the interrupt thread runs. Touch nothing this round;
		// consumers may transmit on the port too. (No sched_yield: that
		// thread runs on other CPUs, and under EEVDF each yield pushes
		// this thread's deadline a slice further back.)
		return heldByGate
	}
	if t := p.next.Load(); t != p.cur {
		p.adopt(t)
	}
	t := p.cur
	work := 0
	rx := !p.stopRx.Load()
	last := len(p.bursts) - 1
	for qi, b := range p.bursts {
		if n := b.Len(); n > 0 {
			p.classify(b)
			work += n
		}
		work += t.engine.Step(b, p.port, p.queues[qi].Queue, qi == last, rx)
		t.account()
		if n := b.Len(); n > 0 { // received: classified next iteration
			p.local.queuePackets[qi] += uint64(n)
			p.local.queueBytes[qi] += b.Bytes()
			work += n
		}
	}
	if len(p.bursts) == 0 && len(t.natives) > 0 {
		work += t.engine.Step(nil, 0, 0, true, false)
	}
	if !rx && !p.rxDrained.Load() && p.held() == 0 {
		p.rxDrained.Store(true)
	}
	for _, c := range t.goPolled {
		work += c.Poll()
	}
	p.sincePublish++
	if work > 0 {
		p.dirty = true
	}
	if p.dirty && (work == 0 || p.sincePublish >= publishEvery) {
		p.publish()
	}
	return work
}

// classify fills in the verdict of every packet in the burst. A chained
// mbuf is classified from its first segment, its lengths checked against
// the whole packet.
func (p *Poller[R, N]) classify(b Burst) {
	p.cur.classifier.ClassifyBurst(b.Frames(), b.PktLens(), b.Verdicts(), &p.local.malformed)
}

// held counts packets received but not yet dispatched.
func (p *Poller[R, N]) held() int {
	n := 0
	for _, b := range p.bursts {
		n += b.Len()
	}
	return n
}

// publish copies the loop's counters to the atomics readers see. The
// services' counters are written by every loop that receives, so they
// are added as deltas.
func (p *Poller[R, N]) publish() {
	p.sincePublish, p.dirty = 0, false
	l, t := &p.local, p.cur
	for i, s := range t.services {
		if t.svcPackets[i]|t.svcDrops[i] == 0 {
			continue
		}
		s.Stats.Packets.Add(t.svcPackets[i])
		s.Stats.Bytes.Add(t.svcBytes[i])
		s.Stats.Drops.Add(t.svcDrops[i])
		t.svcPackets[i], t.svcBytes[i], t.svcDrops[i] = 0, 0, 0
	}
	for r := classify.ReasonNone + 1; r < classify.NumReasons; r++ {
		p.malformed[r].Store(l.malformed[r])
	}
	for _, n := range t.natives {
		n.Publish()
	}
	// Queue counters last: a reader that sees them sees everything
	// counted up to the same point.
	for i := range p.queues {
		p.queues[i].Bytes.Store(l.queueBytes[i])
		p.queues[i].Packets.Store(l.queuePackets[i])
	}
}

// StopRx makes the loop stop receiving; it still dispatches what it
// holds, and consumers keep draining.
func (p *Poller[R, N]) StopRx() { p.stopRx.Store(true) }

// RxDrained reports whether, after StopRx, the loop has dispatched every
// packet it had received.
func (p *Poller[R, N]) RxDrained() bool { return p.rxDrained.Load() }

// Stop makes Run return after its current iteration.
func (p *Poller[R, N]) Stop() { p.stop.Store(true) }

// Owned returns the services whose single consumers this loop runs.
// It is the latest table's: call it from the goroutine that rewires.
func (p *Poller[R, N]) Owned() []*Service[R] { return p.latest.owned }

// Queues returns the per-queue counters.
func (p *Poller[R, N]) Queues() []QueueStats { return p.queues }

// Malformed returns the count of malformed frames seen for a reason.
func (p *Poller[R, N]) Malformed(r classify.Reason) uint64 { return p.malformed[r].Load() }

// BusyRatio returns the busy and total nanoseconds the loop has spent,
// where busy time is iterations that handled at least one packet.
func (p *Poller[R, N]) BusyRatio() (busy, total uint64) {
	return p.busyNanos.Load(), p.loopNanos.Load()
}

// Sleeps reports the idle sleeps the loop took (IdleSleep), and their
// time.
func (p *Poller[R, N]) Sleeps() (n uint64, d time.Duration) {
	return p.sleeps.Load(), time.Duration(p.sleepNanos.Load())
}

// Iterations returns how many iterations Run has made, as last
// published: it advances about every millisecond while the loop runs,
// and stops when the loop is stuck (in a consumer, a driver call, held
// by its gate, or a stopped process). It costs the loop one atomic add
// per millisecond.
func (p *Poller[R, N]) Iterations() uint64 { return p.iterations.Load() }

// Free releases the loop's engines, slots and bursts, freeing the
// packets still held in them. Run must have returned.
func (p *Poller[R, N]) Free() {
	p.releaseSlots()
	for _, b := range p.bursts {
		b.Free()
	}
	p.bursts = nil
	for _, t := range p.retired {
		t.free()
	}
	p.retired = nil
	if p.latest != nil {
		p.latest.free()
	}
	p.cur, p.latest = nil, nil
}
