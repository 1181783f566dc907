package dispatch

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Consumer drains one service ring. The dispatcher does not know what a
// consumer does with packets (count them, transmit them, hand them to the
// kernel, a secondary process or the RoCE endpoint); it only calls Poll
// from the poll loop that owns the service.
type Consumer interface {
	// Poll handles at most one burst from the ring and returns how many
	// packets it handled. It must not block.
	Poll() int
	// Close frees whatever packets the consumer still holds. It is called
	// once, after the poll loop has stopped.
	Close()
}

// Service is a named class of packets: one lane (ring) per poll loop that
// receives, the consumers that drain them, and its counters.
//
// A service's consumer runs in one of two ways. Local consumers (Local,
// one per lane: sinks, forwarders) run on the loop that received the
// packet, which then never leaves that core. A single consumer
// (Consumer, or a task such as the kernel exception path) runs on the
// loop that owns the service and drains every lane.
//
// A service without rings or local consumers is closed: the dispatcher
// frees what is classified to it and counts it in Stats.Drops. A reload
// closes a service for the moment between its old lanes' retirement
// and its new ones.
type Service struct {
	Name string
	// Rings are the lanes, indexed by the receiving loop's lane number.
	Rings []*Ring
	// Local, when not nil, holds one consumer per lane: Local[i] drains
	// Rings[i], and nothing else, on the loop of lane i. A native one may
	// be handed packets by the dispatcher directly, while its ring is
	// empty.
	Local []Consumer
	// Consumer drains every lane, from the loop that owns the service;
	// nil with Local set, or when a task drains the service.
	Consumer Consumer
	Stats    ServiceStats
}

// Queued returns the packets waiting in the service's lanes.
func (s *Service) Queued() int {
	n := 0
	for _, r := range s.Rings {
		n += r.Count()
	}
	return n
}

// Capacity returns how many packets the service's lanes hold at most.
func (s *Service) Capacity() int {
	n := 0
	for _, r := range s.Rings {
		n += r.Capacity()
	}
	return n
}

// ServiceStats count what the dispatcher handed to a service. Every
// receiving loop adds to them when it publishes; anyone reads them.
type ServiceStats struct {
	Packets atomic.Uint64 // enqueued to the ring
	Bytes   atomic.Uint64
	Drops   atomic.Uint64 // ring full: freed and counted
}

// QueueStats count what a poll loop received from one RX queue.
type QueueStats struct {
	Queue   uint16
	Packets atomic.Uint64
	Bytes   atomic.Uint64
}

// publishEvery bounds how many busy iterations counters may lag.
const publishEvery = 64

type localCounts struct {
	queuePackets, queueBytes []uint64
	malformed                [classify.NumReasons]uint64
}

// table is what a poll loop dispatches with: the classifier, the
// services its verdicts index, the loop's C state over its lanes of
// them, and the consumers the loop runs. Only the loop writes to it
// (its per-service counters and C state) once published, and a reload
// replaces it whole (Poller.Rewire).
type table struct {
	gen        uint64
	classifier *classify.Classifier
	services   []*Service // indexed by service number (all of them)
	loop       *pmd.Loop
	deltas     []pmd.ServiceDelta // the loop's, after each Step
	owned      []*Service         // services whose single consumers run here
	goPolled   []Consumer         // consumers run here that are not native
	natives    []NativeConsumer
	// Per service, counted by the loop since it last published.
	svcPackets, svcBytes, svcDrops []uint64
}

// Poller is one poll loop: it receives bursts from its RX queues,
// classifies each packet, enqueues the burst into its lane of each
// service with one cgo call, and runs the local consumers of its lanes
// and the single consumers of the services it owns. Run it on a
// dedicated EAL lcore.
//
// A reload hands the loop a new table through next, an atomic pointer
// the loop reads once per iteration, before it touches a burst: the
// loop takes no lock and allocates nothing for it, and a burst is
// dispatched whole with one table. The loop acknowledges by storing the
// table's generation in adopted; only then may the caller free what the
// old table alone referenced (rings, consumers, its C state): the
// quiescence handshake.
type Poller struct {
	lcore  uint
	port   uint16
	lane   int
	burst  int
	queues []QueueStats
	bursts []*pmd.Burst // one per RX queue: received, not yet classified
	cur    *table       // the loop's own view

	next    atomic.Pointer[table]
	adopted atomic.Uint64
	// latest and retired belong to the goroutine that calls Rewire:
	// the last table published, and older ones the loop may still use.
	latest  *table
	retired []*table
	// gate, when set, holds the loop while DPDK's interrupt thread runs
	// (pmd.Gate): the port's driver may unmap its queues then.
	gate *pmd.GateSlot
	// quiet, when set, counts the loop's iterations, so that an RX or TX
	// callback removed from the port (pmd.Quiescence) is known unused.
	quiet *pmd.QuiesceSlot

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
}

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
}

// NewPoller allocates a poll loop's burst and ring table.
func NewPoller(cfg PollerConfig) (*Poller, error) {
	p := &Poller{lcore: cfg.Lcore, port: cfg.Port, lane: cfg.Lane, burst: cfg.BurstSize}
	t, err := p.newTable(cfg, 1)
	if err != nil {
		return nil, err
	}
	for _, q := range cfg.Queues {
		p.queues = append(p.queues, QueueStats{Queue: q})
		b, err := pmd.NewBurst(cfg.BurstSize)
		if err != nil {
			t.free()
			p.Free()
			return nil, err
		}
		p.bursts = append(p.bursts, b)
	}
	if cfg.Gate != nil {
		if p.gate, err = cfg.Gate.Slot(); err != nil {
			t.free()
			p.Free()
			return nil, fmt.Errorf("dispatch: poller on lcore %d: %w", cfg.Lcore, err)
		}
	}
	if cfg.Quiescence != nil {
		if p.quiet, err = cfg.Quiescence.Slot(); err != nil {
			t.free()
			p.Free()
			return nil, fmt.Errorf("dispatch: poller on lcore %d: %w", cfg.Lcore, err)
		}
	}
	p.cur, p.latest = t, t
	p.next.Store(t)
	p.adopted.Store(t.gen)
	p.local = localCounts{queuePackets: make([]uint64, len(cfg.Queues)), queueBytes: make([]uint64, len(cfg.Queues))}
	return p, nil
}

// newTable builds the table of cfg's classifier, services and consumers
// for this loop.
func (p *Poller) newTable(cfg PollerConfig, gen uint64) (*table, error) {
	if cfg.Classifier == nil {
		return nil, errors.New("dispatch: poller without classifier")
	}
	if len(cfg.Services) != cfg.Classifier.NumServices() {
		return nil, fmt.Errorf("dispatch: %d services but the classifier has %d", len(cfg.Services), cfg.Classifier.NumServices())
	}
	if len(cfg.Services) > 64 {
		return nil, fmt.Errorf("dispatch: %d services; at most 64", len(cfg.Services))
	}
	t := &table{gen: gen, classifier: cfg.Classifier, services: cfg.Services}
	// A loop that receives feeds its lane of every service and runs the
	// local consumers of those lanes; one without RX queues only runs
	// what it owns.
	rings := make([]*Ring, len(cfg.Services))
	direct := make([]NativeConsumer, len(cfg.Services))
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
				direct[i], _ = c.(NativeConsumer)
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
	l, err := pmd.NewLoop(rings, nativesOf(direct), nativesOf(t.natives), cfg.BurstSize)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	t.loop, t.deltas = l, l.Deltas()
	n := len(cfg.Services)
	t.svcPackets, t.svcBytes, t.svcDrops = make([]uint64, n), make([]uint64, n), make([]uint64, n)
	return t, nil
}

// nativesOf returns the C state of each consumer (nil for nil).
func nativesOf(cs []NativeConsumer) []*pmd.Native {
	ns := make([]*pmd.Native, len(cs))
	for i, c := range cs {
		if c != nil {
			ns[i] = c.Native()
		}
	}
	return ns
}

// localConsumer returns s's local consumer of lane.
func localConsumer(s *Service, lane int) (Consumer, error) {
	if len(s.Local) != len(s.Rings) {
		return nil, fmt.Errorf("dispatch: service %q has %d lanes and %d local consumers", s.Name, len(s.Rings), len(s.Local))
	}
	if lane < 0 || lane >= len(s.Local) || s.Local[lane] == nil {
		return nil, fmt.Errorf("dispatch: service %q has no local consumer for lane %d", s.Name, lane)
	}
	return s.Local[lane], nil
}

// addConsumer runs c on this loop: inside the loop's cgo call if it is
// native, else by calling Poll.
func (t *table) addConsumer(c Consumer) {
	if n, ok := c.(NativeConsumer); ok {
		t.natives = append(t.natives, n)
	} else {
		t.goPolled = append(t.goPolled, c)
	}
}

func (t *table) free() {
	if t.loop != nil {
		t.loop.Free()
		t.loop, t.deltas = nil, nil
	}
}

// Rewire hands the loop a new table built from cfg's Classifier,
// Services, Owned, Tasks and Retiring; the loop's lcore, port, queues,
// lane and burst size stay as NewPoller set them. The loop adopts it at
// the top of its next iteration, after publishing its counters of the
// old one. It returns the new table's generation: until Adopted reports
// it, the loop may still run the old table's consumers and fill its
// lanes. Rewire, Adopted and FreeRetired are for one goroutine at a time.
func (p *Poller) Rewire(cfg PollerConfig) (uint64, error) {
	if cfg.Lane != p.lane || cfg.BurstSize != p.burst || len(cfg.Queues) != len(p.queues) {
		return 0, fmt.Errorf("dispatch: poller on lcore %d: a rewire cannot change its lane, queues or burst size", p.lcore)
	}
	t, err := p.newTable(cfg, p.latest.gen+1)
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
func (p *Poller) Adopted(gen uint64) bool { return p.adopted.Load() >= gen }

// FreeRetired frees the C state of the tables the loop has moved past.
func (p *Poller) FreeRetired() {
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
func (p *Poller) adopt(t *table) {
	p.publish()
	p.cur = t
	p.adopted.Store(t.gen)
}

// Lcore returns the lcore this loop is meant to run on.
func (p *Poller) Lcore() uint { return p.lcore }

// Run polls until Stop. Call it on the poller's lcore.
func (p *Poller) Run() {
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
	if p.gate != nil {
		p.gate.Offline()
	}
	if p.quiet != nil {
		p.quiet.Offline()
	}
}

// PollOnce runs one iteration. For each RX queue: classify the burst
// received last time, then one cgo call dispatches it into the lanes,
// runs the native consumers (with the last queue) and receives the next
// burst. Then the Go consumers poll. It returns the packets handled
// (received, dispatched or consumed): 0 when the loop is idle, or held by
// its gate (PollerConfig.Gate), which it leaves offline on return.
func (p *Poller) PollOnce() int {
	n := p.pollOnce()
	// Not a running loop: the gate and callback removers must not wait
	// for the caller's next call.
	if p.gate != nil {
		p.gate.Offline()
	}
	if p.quiet != nil {
		p.quiet.Offline()
	}
	return max(n, 0)
}

// heldByGate is what pollOnce returns when the gate held the loop.
const heldByGate = -1

// pollOnce is PollOnce for Run: it leaves the gate slot online.
func (p *Poller) pollOnce() int {
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
		work += t.loop.Step(b, p.port, p.queues[qi].Queue, qi == last, rx)
		t.account()
		if n := b.Len(); n > 0 { // received: classified next iteration
			p.local.queuePackets[qi] += uint64(n)
			p.local.queueBytes[qi] += b.Bytes()
			work += n
		}
	}
	if len(p.bursts) == 0 && len(t.natives) > 0 {
		work += t.loop.Step(nil, 0, 0, true, false)
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
func (p *Poller) classify(b *pmd.Burst) {
	p.cur.classifier.ClassifyBurst(b.Frames(), b.PktLens(), b.Verdicts(), &p.local.malformed)
}

// account adds the last dispatch's per-service deltas.
func (t *table) account() {
	for i, d := range t.deltas {
		t.svcPackets[i] += d.Packets
		t.svcBytes[i] += d.Bytes
		t.svcDrops[i] += d.Drops
		t.deltas[i] = pmd.ServiceDelta{}
	}
}

// held counts packets received but not yet dispatched.
func (p *Poller) held() int {
	n := 0
	for _, b := range p.bursts {
		n += b.Len()
	}
	return n
}

// publish copies the loop's counters to the atomics readers see. The
// services' counters are written by every loop that receives, so they
// are added as deltas.
func (p *Poller) publish() {
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
func (p *Poller) StopRx() { p.stopRx.Store(true) }

// RxDrained reports whether, after StopRx, the loop has dispatched every
// packet it had received.
func (p *Poller) RxDrained() bool { return p.rxDrained.Load() }

// Stop makes Run return after its current iteration.
func (p *Poller) Stop() { p.stop.Store(true) }

// Owned returns the services whose single consumers this loop runs.
// It is the latest table's: call it from the goroutine that rewires.
func (p *Poller) Owned() []*Service { return p.latest.owned }

// Queues returns the per-queue counters.
func (p *Poller) Queues() []QueueStats { return p.queues }

// Malformed returns the count of malformed frames seen for a reason.
func (p *Poller) Malformed(r classify.Reason) uint64 { return p.malformed[r].Load() }

// BusyRatio returns the busy and total nanoseconds the loop has spent,
// where busy time is iterations that handled at least one packet.
func (p *Poller) BusyRatio() (busy, total uint64) { return p.busyNanos.Load(), p.loopNanos.Load() }

// Iterations returns how many iterations Run has made, as last
// published: it advances about every millisecond while the loop runs,
// and stops when the loop is stuck (in a consumer, a driver call, held
// by its gate, or a stopped process). It costs the loop one atomic add
// per millisecond.
func (p *Poller) Iterations() uint64 { return p.iterations.Load() }

// Free releases the loop's C memory and frees packets still held in its
// bursts. Run must have returned.
func (p *Poller) Free() {
	if p.gate != nil {
		p.gate.Release()
		p.gate = nil
	}
	if p.quiet != nil {
		p.quiet.Release()
		p.quiet = nil
	}
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
