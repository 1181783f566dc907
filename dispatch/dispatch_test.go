package dispatch_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/dispatch/loop/looptest"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

var testEAL *pmd.EAL

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithEAL(m, "dispatch", &testEAL))
}

// The test services, frames and classifier are looptest's.
const (
	svcA, svcB, svcOther, numServices = looptest.SvcA, looptest.SvcB, looptest.SvcOther, looptest.NumServices
	frameLen                          = looptest.FrameLen
)

type tag = looptest.Tag

var (
	classifier = looptest.Classifier
	frame      = looptest.Frame
	readTag    = looptest.ReadTag
	checkOrder = looptest.CheckOrder
)

// services makes the test services with n lanes each, of sizeA slots for
// "a" and size for the others, and no consumers.
func services(t *testing.T, prefix string, n, sizeA, size int) []*dispatch.Service {
	t.Helper()
	return []*dispatch.Service{
		{Name: "a", Rings: testenv.Lanes(t, prefix+"_a", n, sizeA)},
		{Name: "b", Rings: testenv.Lanes(t, prefix+"_b", n, size)},
		{Name: "other", Rings: testenv.Lanes(t, prefix+"_o", n, size)},
	}
}

// recorder is a fake consumer: it drains a ring set, remembers the tag of
// every frame in arrival order, and frees them. While paused it takes
// nothing.
type recorder struct {
	t      *testing.T
	lanes  *dispatch.RingSet
	b      *pmd.Burst
	paused bool
	got    []tag
	closed bool
}

func newRecorder(t *testing.T, lanes *dispatch.RingSet) *recorder {
	t.Helper()
	b, err := pmd.NewBurst(32)
	if err != nil {
		t.Fatal(err)
	}
	return &recorder{t: t, lanes: lanes, b: b}
}

func (r *recorder) Poll() int {
	if r.paused {
		return 0
	}
	n := r.lanes.Dequeue(r.b, 32)
	for i := range n {
		r.got = append(r.got, readTag(r.t, r.b.Frame(i)))
	}
	r.b.FreeAll()
	return n
}

func (r *recorder) Close() {
	r.b.Free()
	r.closed = true
}

// poller builds a poll loop and frees it when the test ends, before the
// rings and the pool.
func poller(t *testing.T, cfg dispatch.PollerConfig) *dispatch.Poller {
	t.Helper()
	p, err := dispatch.NewPoller(cfg)
	return looptest.FreeAtEnd(t, p, err)
}

// idle polls the loops in turn until a full round handles nothing; the
// loops publish their counters when idle.
func idle(t *testing.T, ps ...*dispatch.Poller) {
	t.Helper()
	for range 10000 {
		work := 0
		for _, p := range ps {
			work += p.PollOnce()
		}
		if work == 0 {
			return
		}
	}
	t.Fatal("the loops never went idle")
}

// A lane that is full drops the rest of a burst: freed, counted as the
// service's drops, never handed on. What fit arrives in order once the
// consumer drains, and every mbuf goes back to the pool.
func TestFullLaneDropsAndCounts(t *testing.T) {
	pool := testenv.Pool(t, "dsp_drop", 4095)
	port := testenv.LoopPort(t, "net_ring20", pool, 1)
	svcs := services(t, "dsp_drop", 1, 8, 64)
	if c := svcs[svcA].Capacity(); c != 7 {
		t.Fatalf("a lane of 8 slots holds %d packets, want 7", c)
	}
	rec := newRecorder(t, testenv.RingSet(t, svcs[svcA].Rings...))
	rec.paused = true
	svcs[svcA].Consumer = rec
	p := poller(t, dispatch.PollerConfig{Lcore: 1, Port: port.ID(), Queues: []uint16{0}, BurstSize: 32,
		Classifier: classifier(t), Services: svcs, Owned: []int{svcA}})

	var frames [][]byte
	for i := range 20 {
		frames = append(frames, frame(svcA, 0, uint32(i)))
	}
	testenv.Send(t, port, pool, 0, frames)
	idle(t, p)
	st := &svcs[svcA].Stats
	if got, drops := st.Packets.Load(), st.Drops.Load(); got != 7 || drops != 13 {
		t.Errorf("packets %d, drops %d; want 7 and 13", got, drops)
	}
	if b := st.Bytes.Load(); b != 7*frameLen {
		t.Errorf("bytes %d, want %d: dropped packets must not count", b, 7*frameLen)
	}
	if q := svcs[svcA].Queued(); q != 7 {
		t.Errorf("%d packets queued, want 7", q)
	}
	if n := p.Queues()[0].Packets.Load(); n != 20 {
		t.Errorf("queue received %d, want 20", n)
	}

	rec.paused = false
	idle(t, p)
	if len(rec.got) != 7 {
		t.Fatalf("consumer got %d packets, want 7", len(rec.got))
	}
	for i, g := range rec.got {
		if g.Seq != uint32(i) || g.Svc != svcA {
			t.Errorf("packet %d: %+v; want service a seq %d", i, g, i)
		}
	}
	if st.Drops.Load() != 13 {
		t.Errorf("drops %d after draining, want 13", st.Drops.Load())
	}

	// The loop allocates nothing to receive, classify, dispatch and drop
	// a burst: the warm-up run receives it, the measured ones dispatch
	// it and go idle.
	rec.paused = true
	testenv.Send(t, port, pool, 0, frames)
	if allocs := testing.AllocsPerRun(4, func() { p.PollOnce() }); allocs != 0 {
		t.Errorf("PollOnce allocates %.2f times", allocs)
	}
	if got, drops := st.Packets.Load(), st.Drops.Load(); got != 14 || drops != 26 {
		t.Errorf("after the second burst: packets %d, drops %d; want 14 and 26", got, drops)
	}
}

// Two loops, each receiving one queue: every service has a lane per loop.
// A service one loop owns gets both lanes' packets; a local service's
// consumer on each loop sees only that loop's packets. Within a lane
// (one queue: one flow's packets) the order is kept, nothing is dropped,
// and every counter adds up.
func TestLanesAcrossLoops(t *testing.T) {
	pool := testenv.Pool(t, "dsp_lanes", 4095)
	port := testenv.LoopPort(t, "net_ring21", pool, 2)
	svcs := services(t, "dsp_lanes", 2, 256, 256)
	ownedA := newRecorder(t, testenv.RingSet(t, svcs[svcA].Rings...))
	svcs[svcA].Consumer = ownedA
	ownedO := newRecorder(t, testenv.RingSet(t, svcs[svcOther].Rings...))
	svcs[svcOther].Consumer = ownedO
	var local []*recorder
	for _, r := range svcs[svcB].Rings {
		rec := newRecorder(t, testenv.RingSet(t, r))
		local = append(local, rec)
		svcs[svcB].Local = append(svcs[svcB].Local, rec)
	}
	cls := classifier(t)
	p0 := poller(t, dispatch.PollerConfig{Lcore: 1, Port: port.ID(), Queues: []uint16{0}, Lane: 0, BurstSize: 32,
		Classifier: cls, Services: svcs, Owned: []int{svcA}})
	p1 := poller(t, dispatch.PollerConfig{Lcore: 2, Port: port.ID(), Queues: []uint16{1}, Lane: 1, BurstSize: 32,
		Classifier: cls, Services: svcs, Owned: []int{svcOther}})

	const perQueue = 600 // 200 per service
	for q := range uint32(2) {
		var frames [][]byte
		for i := range uint32(perQueue) {
			frames = append(frames, frame(int(i%numServices), q, i/numServices))
		}
		// The port's ring holds 1023 frames: send in parts, polling.
		for len(frames) > 0 {
			n := min(len(frames), 300)
			testenv.Send(t, port, pool, uint16(q), frames[:n])
			frames = frames[n:]
			idle(t, p0, p1)
		}
	}
	idle(t, p0, p1)

	const perSvc = perQueue / numServices
	for s, svc := range svcs {
		if n, d := svc.Stats.Packets.Load(), svc.Stats.Drops.Load(); n != 2*perSvc || d != 0 {
			t.Errorf("service %s: %d packets, %d drops; want %d and 0", svc.Name, n, d, 2*perSvc)
		}
		if q := svc.Queued(); q != 0 {
			t.Errorf("service %s: %d packets left in its lanes", svcs[s].Name, q)
		}
	}
	for name, rec := range map[string]*recorder{"a": ownedA, "other": ownedO} {
		if len(rec.got) != 2*perSvc {
			t.Errorf("owned %s consumer got %d, want %d", name, len(rec.got), 2*perSvc)
		}
		checkOrder(t, name, rec.got)
	}
	for k, rec := range local {
		if len(rec.got) != perSvc {
			t.Errorf("local b consumer of lane %d got %d, want %d", k, len(rec.got), perSvc)
		}
		for _, g := range rec.got {
			if g.Lane != uint32(k) || g.Svc != svcB {
				t.Fatalf("local b consumer of lane %d got %+v: another loop's packet", k, g)
			}
		}
		checkOrder(t, fmt.Sprintf("b lane %d", k), rec.got)
	}
}

// A ring set takes turns: each call starts one lane further, so a lane
// that always has packets cannot starve the others, and each lane's
// packets come out in their order.
func TestRingSetTakesTurns(t *testing.T) {
	pool := testenv.Pool(t, "dsp_turns", 4095)
	port := testenv.LoopPort(t, "net_ring22", pool, 3)
	svcs := services(t, "dsp_turns", 3, 64, 64)
	cls := classifier(t)
	var ps []*dispatch.Poller
	for k := range 3 {
		// No consumer anywhere: the lanes keep what the loops put in.
		ps = append(ps, poller(t, dispatch.PollerConfig{Lcore: uint(k + 1), Port: port.ID(), Queues: []uint16{uint16(k)},
			Lane: k, BurstSize: 32, Classifier: cls, Services: svcs}))
		var frames [][]byte
		for i := range 10 {
			frames = append(frames, frame(svcA, uint32(k), uint32(i)))
		}
		testenv.Send(t, port, pool, uint16(k), frames)
	}
	idle(t, ps...)
	set := testenv.RingSet(t, svcs[svcA].Rings...)
	if n := set.Count(); n != 30 {
		t.Fatalf("lanes hold %d, want 30", n)
	}
	b, err := pmd.NewBurst(32)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	var got []tag
	for call := range 3 {
		n := set.Dequeue(b, 4)
		if n != 4 {
			t.Fatalf("call %d took %d, want 4", call, n)
		}
		for i := range n {
			g := readTag(t, b.Frame(i))
			if g.Lane != uint32(call) {
				t.Errorf("call %d took from lane %d: it should start one lane further each call", call, g.Lane)
			}
			got = append(got, g)
		}
		b.FreeAll()
	}
	// A large request spans lanes.
	for {
		n := set.Dequeue(b, 32)
		if n == 0 {
			break
		}
		for i := range n {
			got = append(got, readTag(t, b.Frame(i)))
		}
		b.FreeAll()
	}
	if len(got) != 30 {
		t.Errorf("took %d, want 30", len(got))
	}
	checkOrder(t, "set", got)
}

// After StopRx the loop receives nothing more, but still dispatches the
// burst it received last, and reports RxDrained once it holds nothing.
func TestStopRxDispatchesHeldBurst(t *testing.T) {
	pool := testenv.Pool(t, "dsp_stop", 4095)
	port := testenv.LoopPort(t, "net_ring23", pool, 1)
	svcs := services(t, "dsp_stop", 1, 64, 64)
	rec := newRecorder(t, testenv.RingSet(t, svcs[svcB].Rings...))
	svcs[svcB].Local = []dispatch.Consumer{rec}
	p := poller(t, dispatch.PollerConfig{Lcore: 1, Port: port.ID(), Queues: []uint16{0}, BurstSize: 32,
		Classifier: classifier(t), Services: svcs})
	var frames [][]byte
	for i := range 10 {
		frames = append(frames, frame(svcB, 0, uint32(i)))
	}
	testenv.Send(t, port, pool, 0, frames)
	p.PollOnce() // receives the 10 into its burst: classified next time
	if len(rec.got) != 0 {
		t.Fatalf("consumer got %d before the burst was dispatched", len(rec.got))
	}
	p.StopRx()
	if p.RxDrained() {
		t.Fatal("RxDrained with a burst held")
	}
	testenv.Send(t, port, pool, 0, [][]byte{frame(svcB, 0, 10)}) // after StopRx: stays in the port
	p.PollOnce()
	if !p.RxDrained() {
		t.Error("not RxDrained after dispatching the held burst")
	}
	idle(t, p)
	if len(rec.got) != 10 {
		t.Errorf("consumer got %d, want the 10 received before StopRx", len(rec.got))
	}
	checkOrder(t, "b", rec.got)
	if n := p.Queues()[0].Packets.Load(); n != 10 {
		t.Errorf("queue counted %d, want 10", n)
	}
}

// NewPoller refuses wiring that would leave a lane without its loop or a
// local service with an owner.
func TestNewPollerRejects(t *testing.T) {
	cls := classifier(t)
	tests := []struct {
		name string
		edit func(*dispatch.PollerConfig)
	}{
		{"lane past the rings", func(c *dispatch.PollerConfig) { c.Lane = 2 }},
		{"negative lane", func(c *dispatch.PollerConfig) { c.Lane = -1 }},
		{"too few services", func(c *dispatch.PollerConfig) { c.Services = c.Services[:2] }},
		{"owned index out of range", func(c *dispatch.PollerConfig) { c.Owned = []int{3} }},
		{"owning a local service", func(c *dispatch.PollerConfig) {
			c.Services[svcB].Local = []dispatch.Consumer{&recorder{}, &recorder{}}
			c.Owned = []int{svcB}
		}},
		{"a local consumer short", func(c *dispatch.PollerConfig) {
			c.Services[svcB].Local = []dispatch.Consumer{&recorder{}}
		}},
		{"a nil local consumer", func(c *dispatch.PollerConfig) {
			c.Services[svcB].Local = []dispatch.Consumer{nil, &recorder{}}
		}},
		{"no classifier", func(c *dispatch.PollerConfig) { c.Classifier = nil }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svcs := services(t, fmt.Sprintf("dsp_rej%d", i), 2, 8, 8)
			cfg := dispatch.PollerConfig{Lcore: 1, Queues: []uint16{0}, BurstSize: 32, Classifier: cls, Services: svcs}
			tt.edit(&cfg)
			if p, err := dispatch.NewPoller(cfg); err == nil {
				p.Free()
				t.Fatal("NewPoller accepted it")
			}
		})
	}
}

// A local native consumer gets its packets straight from the dispatcher
// while nothing waits in its lane. When its TX queue is full, what it
// does not take goes into the lane's ring (what does not fit there is
// dropped and counted), and later packets queue behind it: once the
// queue has room everything left goes out, in order.
func TestLocalForwarderDirectAndBacklog(t *testing.T) {
	pool := testenv.Pool(t, "dsp_direct", 4095)
	in := testenv.LoopPort(t, "net_ring24", pool, 1)
	out := testenv.LoopPort(t, "net_ring25", pool, 1)
	svcs := services(t, "dsp_direct", 1, 16, 64)
	fwd, err := consumer.NewForwarder(testenv.RingSet(t, svcs[svcA].Rings...), out.ID(), 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.Close)
	svcs[svcA].Local = []dispatch.Consumer{fwd}
	p := poller(t, dispatch.PollerConfig{Lcore: 1, Port: in.ID(), Queues: []uint16{0}, BurstSize: 32,
		Classifier: classifier(t), Services: svcs})
	frames := func(from, to int) [][]byte {
		var fs [][]byte
		for i := from; i < to; i++ {
			fs = append(fs, frame(svcA, 0, uint32(i)))
		}
		return fs
	}
	receive := func() []tag {
		b, _ := pmd.NewBurst(32)
		defer b.Free()
		var got []tag
		for b.RxBurst(out.ID(), 0) > 0 {
			for i := range b.Len() {
				got = append(got, readTag(t, b.Frame(i)))
			}
			b.FreeAll()
		}
		return got
	}

	testenv.Send(t, in, pool, 0, frames(0, 20))
	idle(t, p)
	got := receive()
	if len(got) != 20 || fwd.Packets.Load() != 20 || fwd.Bytes.Load() != 20*frameLen {
		t.Fatalf("forwarded %d (counted %d packets, %d bytes), want 20", len(got), fwd.Packets.Load(), fwd.Bytes.Load())
	}
	checkOrder(t, "direct", got)

	// Fill the out port: its TX queue refuses everything.
	junk := 0
	var scratch pmd.TxScratch
	for pmd.TxCopy(out.ID(), 0, pool.C(), [][]byte{frame(svcB, 9, 9)}, &scratch) == 1 {
		junk++
	}
	testenv.Send(t, in, pool, 0, frames(20, 60))
	idle(t, p)
	st := &svcs[svcA].Stats
	// 32 arrive first: the ring takes 15, 17 drop; the forwarder then
	// holds those 15, and the last 8 wait in the ring.
	if n, d := st.Packets.Load(), st.Drops.Load(); n != 43 || d != 17 {
		t.Errorf("dispatched %d, dropped %d; want 43 and 17", n, d)
	}
	if n := len(receive()); n != junk {
		t.Fatalf("out port held %d, want the %d junk frames only", n, junk)
	}
	idle(t, p)
	got = receive()
	if len(got) != 23 {
		t.Fatalf("forwarded %d after the queue drained, want 23", len(got))
	}
	for i, g := range got {
		want := uint32(20 + i)
		if i >= 15 {
			want = uint32(52 + i - 15)
		}
		if g.Seq != want {
			t.Fatalf("frame %d: seq %d, want %d", i, g.Seq, want)
		}
	}
	if n := fwd.Packets.Load(); n != 43 {
		t.Errorf("forwarder counted %d, want 43", n)
	}
}

// A rewire swaps the loop's table between bursts: the loop adopts it at
// its next iteration, services kept across it keep their lanes and
// counters, a retiring service's consumer still drains what its lane
// holds, and a closed service's packets are freed and counted as drops.
func TestRewire(t *testing.T) {
	pool := testenv.Pool(t, "dsp_rewire", 4095)
	port := testenv.LoopPort(t, "net_ring26", pool, 1)
	svcs := services(t, "dsp_rewire", 1, 256, 256)
	recs := make([]*recorder, len(svcs))
	for i, s := range svcs {
		recs[i] = newRecorder(t, testenv.RingSet(t, s.Rings...))
		s.Consumer = recs[i]
	}
	p := poller(t, dispatch.PollerConfig{Lcore: 1, Port: port.ID(), Queues: []uint16{0}, BurstSize: 32,
		Classifier: classifier(t), Services: svcs, Owned: []int{svcA, svcB, svcOther}})
	send := func(svc, n int, seq0 uint32) {
		var frames [][]byte
		for i := range n {
			frames = append(frames, frame(svc, 0, seq0+uint32(i)))
		}
		testenv.Send(t, port, pool, 0, frames)
	}
	for s := range numServices {
		send(s, 10, 0)
	}
	idle(t, p)
	recs[svcB].paused = true
	send(svcB, 10, 10)
	idle(t, p)
	if q := svcs[svcB].Queued(); q != 10 {
		t.Fatalf("b holds %d packets, want 10", q)
	}

	// b goes; port 2000 now belongs to c, closed (no lanes yet).
	closed := &dispatch.Service{Name: "c"}
	cls, err := classify.Compile([]classify.Rule{
		{Service: 0, Proto: 17, DstPorts: []classify.PortRange{{Lo: 1000, Hi: 1000}}},
		{Service: 2, Proto: 17, DstPorts: []classify.PortRange{{Lo: 2000, Hi: 2000}}},
	}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := p.Rewire(dispatch.PollerConfig{Lcore: 1, Port: port.ID(), Queues: []uint16{0}, BurstSize: 32,
		Classifier: cls, Services: []*dispatch.Service{svcs[svcA], svcs[svcOther], closed}, Owned: []int{0, 1},
		Retiring: []*dispatch.Service{svcs[svcB]}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Adopted(gen) {
		t.Fatal("adopted before the loop ran")
	}
	recs[svcB].paused = false
	for s := range numServices {
		send(s, 10, 20)
	}
	idle(t, p)
	if !p.Adopted(gen) {
		t.Fatal("not adopted after the loop ran")
	}
	p.FreeRetired()
	for _, c := range []struct {
		svc         *dispatch.Service
		rec         *recorder
		pkts, drops uint64
		got         int
	}{
		{svcs[svcA], recs[svcA], 20, 0, 20},
		{svcs[svcOther], recs[svcOther], 20, 0, 20},
		{svcs[svcB], recs[svcB], 20, 0, 20},
		{closed, nil, 0, 10, 0},
	} {
		if n, d := c.svc.Stats.Packets.Load(), c.svc.Stats.Drops.Load(); n != c.pkts || d != c.drops {
			t.Errorf("service %s: %d packets, %d drops; want %d and %d", c.svc.Name, n, d, c.pkts, c.drops)
		}
		if c.rec != nil {
			if len(c.rec.got) != c.got {
				t.Errorf("service %s: consumer got %d, want %d", c.svc.Name, len(c.rec.got), c.got)
			}
			checkOrder(t, c.svc.Name, c.rec.got)
		}
	}
	if q := svcs[svcB].Queued(); q != 0 {
		t.Errorf("retired b still holds %d packets", q)
	}
	if _, err := p.Rewire(dispatch.PollerConfig{Lcore: 1, Port: port.ID(), Queues: []uint16{0}, Lane: 1, BurstSize: 32,
		Classifier: cls, Services: []*dispatch.Service{svcs[svcA], svcs[svcOther], closed}}); err == nil {
		t.Error("a rewire to another lane was accepted")
	}
}

// A loop behind the interrupt-thread gate receives everything, in the
// windows between the gate's holds; driven by hand (PollOnce), it is
// offline between calls, so the gate does not wait for a caller that
// has stopped calling and the interrupt thread keeps its rounds.
func TestGatedPollerDrivenByHand(t *testing.T) {
	g := testenv.HoldGate(t, testEAL)
	pool := testenv.Pool(t, "dsp_gate", 4095)
	port := testenv.LoopPort(t, "net_ring22", pool, 1)
	svcs := services(t, "dsp_gate", 1, 64, 64)
	rec := newRecorder(t, testenv.RingSet(t, svcs[svcA].Rings...))
	svcs[svcA].Consumer = rec
	p := poller(t, dispatch.PollerConfig{Lcore: 1, Port: port.ID(), Queues: []uint16{0}, BurstSize: 32,
		Classifier: classifier(t), Services: svcs, Owned: []int{svcA}, Gate: g})
	var frames [][]byte
	for i := range 20 {
		frames = append(frames, frame(svcA, 0, uint32(i)))
	}
	testenv.Send(t, port, pool, 0, frames)
	// A held call handles nothing, so idle() cannot tell when it is done.
	deadline := time.Now().Add(5 * time.Second)
	for len(rec.got) < len(frames) && time.Now().Before(deadline) {
		p.PollOnce()
	}
	if len(rec.got) != len(frames) {
		t.Fatalf("consumer got %d packets, want %d", len(rec.got), len(frames))
	}
	checkOrder(t, "gated", rec.got)
	w := g.Stats().Windows
	waitWindows := time.Now().Add(5 * time.Second)
	for g.Stats().Windows < w+3 {
		if time.Now().After(waitWindows) {
			t.Fatalf("the gate stalled with the loop idle between calls: %+v", g.Stats())
		}
		time.Sleep(pmd.GatePeriod)
	}
}
