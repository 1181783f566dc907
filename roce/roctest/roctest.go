// Package roctest is the in-memory network the tests of package roce and
// the packages built on it share: two sides joined by a memlink, the
// things each side runs (endpoints, connection managers, applications),
// and a virtual clock that moves a microsecond per busy round and jumps
// to the next timer deadline when all is idle.
//
// It knows none of roce's types, so that package roce's own tests can
// use it: what a side runs is a Poller, what has timers is also a Timer,
// and the helpers that touch RoCE objects are generic over the methods
// they call. Package cmtest adds the pair of endpoints with connection
// managers that most tests above roce/cm want.
package roctest

import (
	"encoding/binary"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/google/gopacket/pcapgo"
)

// Start is where a network's virtual clock starts.
var Start = time.Unix(1_000_000, 0)

// The addresses of the two sides of a network.
var (
	MACA = [6]byte{0x02, 0, 0, 0, 0, 0x0A}
	MACB = [6]byte{0x02, 0, 0, 0, 0, 0x0B}
	IPA  = netip.MustParseAddr("10.0.0.1")
	IPB  = netip.MustParseAddr("10.0.0.2")
)

// A Poller is polled by the network each round and returns the work it
// did: an endpoint, a connection manager, an application.
type Poller interface {
	Poll(now time.Time) int
}

// A Timer reports its next deadline; the network's clock jumps to the
// earliest one when no Poller has work.
type Timer interface {
	NextDeadline() (time.Time, bool)
}

// PollFunc is a function used as a Poller.
type PollFunc func(now time.Time) int

// Poll calls f.
func (f PollFunc) Poll(now time.Time) int { return f(now) }

// TimerFunc is a function used as a Timer.
type TimerFunc func() (time.Time, bool)

// NextDeadline calls f.
func (f TimerFunc) NextDeadline() (time.Time, bool) { return f() }

// Side is one side of a network: its addresses and its end of the link.
type Side struct {
	Index int // 0 for side A, 1 for side B
	MAC   [6]byte
	IP    netip.Addr
	Link  *memlink.End // nil on a network made by NewBare
}

// Net is two sides and the things they run, driven by a clock that is
// either virtual (Run, Settle, Step) or the wall clock (RunWall).
type Net struct {
	TB      testing.TB
	Now     time.Time // the virtual clock
	Wall    bool      // Poll polls at the wall clock's time instead of Now
	A, B    Side
	pollers []Poller
	timers  []Timer
}

// New returns a network whose sides are joined by a memlink configured
// by lc, with nothing on them yet.
func New(tb testing.TB, lc memlink.Config) *Net {
	n := NewBare(tb)
	n.A.Link, n.B.Link = memlink.New(lc)
	return n
}

// Faulty returns a link config seeded with seed that loses, reorders,
// duplicates and corrupts each a fraction p of the frames.
func Faulty(seed uint64, p float64) memlink.Config {
	return memlink.Config{Seed: seed, Loss: p, Reorder: p, Duplicate: p, Corrupt: p}
}

// Sweep is what a sweep test's seed picks besides the link: the
// endpoint's burst sizes and windows (roce.EndpointConfig's fields of the
// same names; roctest cannot import roce, whose tests import it).
type Sweep struct {
	TxBurst, RxBurst, AckReqEvery, MaxUnackedPSNs int
}

// SweepConfig derives a link configuration and endpoint settings from
// seed, covering windows, bursts, queues and fault rates, for the sweep
// tests of roce and roce/session.
func SweepConfig(seed uint64) (memlink.Config, Sweep) {
	f := []float64{0, 0.01, 0.05, 0.1}[seed%4]
	lc := memlink.Config{Seed: seed, Loss: f, Reorder: f, Duplicate: f, Corrupt: f, QueueLen: []int{16, 64, 1024}[seed%3]}
	return lc, Sweep{
		TxBurst:        []int{1, 7, 32}[(seed/3)%3],
		RxBurst:        []int{1, 5, 32}[(seed/5)%3],
		AckReqEvery:    []int{1, 5, 64}[(seed/9)%3],
		MaxUnackedPSNs: []int{4, 32, 128}[(seed/27)%3],
	}
}

// SweepSeeds runs f as a subtest named after each seed from 1 to seeds, or
// to short with -short.
func SweepSeeds(t *testing.T, seeds, short uint64, f func(t *testing.T, seed uint64)) {
	if testing.Short() {
		seeds = short
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { f(t, seed) })
	}
}

// Received returns a done function for Net.Run and the like that
// reports whether a value has arrived on ch, storing it in *v.
func Received[T any](ch <-chan T, v *T) func() bool {
	return func() bool {
		select {
		case *v = <-ch:
			return true
		default:
			return false
		}
	}
}

// ReadConcurrently calls read over and over on another goroutine, as a
// metrics scrape does, until the returned stop is called; stop reports
// whether read ran at all. ReadConcurrently returns once read has run
// once: on a loaded machine the goroutine may otherwise not be scheduled
// before the test's work is over.
func ReadConcurrently(read func()) (stop func() bool) {
	quit := make(chan struct{})
	done := make(chan int)
	started := make(chan struct{})
	go func() {
		reads := 0
		for {
			if reads == 1 {
				close(started)
			}
			select {
			case <-quit:
				done <- reads
				return
			default:
			}
			read()
			reads++
		}
	}()
	<-started
	return func() bool {
		close(quit)
		return <-done > 0
	}
}

// CleanAndFaulty runs f as two subtests: "clean", on a link without
// faults, and "faulty", on one with 1% of each fault.
func CleanAndFaulty(t *testing.T, f func(t *testing.T, lc memlink.Config)) {
	for _, tc := range []struct {
		name   string
		faults float64
	}{{"clean", 0}, {"faulty", 0.01}} {
		t.Run(tc.name, func(t *testing.T) { f(t, Faulty(1, tc.faults)) })
	}
}

// NewBare returns a network without a link, for a test that brings its
// own.
func NewBare(tb testing.TB) *Net {
	return &Net{
		TB:  tb,
		Now: Start,
		A:   Side{Index: 0, MAC: MACA, IP: IPA},
		B:   Side{Index: 1, MAC: MACB, IP: IPB},
	}
}

// Add appends ps to what every round polls, in order; those that are
// Timers also move the virtual clock.
func (n *Net) Add(ps ...Poller) {
	for _, p := range ps {
		n.pollers = append(n.pollers, p)
		if t, ok := p.(Timer); ok {
			n.timers = append(n.timers, t)
		}
	}
}

// AddFunc adds f to what every round polls, after what is there. Its
// deadlines, if it has any, do not move the clock.
func (n *Net) AddFunc(f func(now time.Time) int) { n.Add(PollFunc(f)) }

// Serve adds p, which a constructor has just returned with err, as
// AddFunc adds its Poll; it fails the test if err is not nil.
func (n *Net) Serve(p Poller, err error) {
	n.TB.Helper()
	if err != nil {
		n.TB.Fatal(err)
	}
	n.AddFunc(p.Poll)
}

// InUse is what an allocator still holds, such as roce.HeapAllocator.
type InUse interface{ InUse() int64 }

// Shutdown shuts svc down and fails the test if that fails or if alloc,
// when not nil, still holds memory afterwards.
func Shutdown(tb testing.TB, svc interface{ Shutdown() error }, alloc InUse) {
	tb.Helper()
	if err := svc.Shutdown(); err != nil {
		tb.Fatal(err)
	}
	if alloc != nil && alloc.InUse() != 0 {
		tb.Errorf("%d bytes still allocated", alloc.InUse())
	}
}

// AddTimer adds deadlines that move the virtual clock without anything
// to poll, such as frames on their way over a link with a delay.
func (n *Net) AddTimer(t Timer) { n.timers = append(n.timers, t) }

// Pair makes one thing for each side with mk and fails the test if
// either returns an error. It adds neither: the test chooses the order
// in which things are polled.
func Pair[T any](n *Net, mk func(s Side) (T, error)) (a, b T) {
	n.TB.Helper()
	var err error
	if a, err = mk(n.A); err != nil {
		n.TB.Fatalf("side A: %v", err)
	}
	if b, err = mk(n.B); err != nil {
		n.TB.Fatalf("side B: %v", err)
	}
	return a, b
}

// Poll runs one round at the virtual time (the wall clock's with Wall
// set) and returns the work done.
func (n *Net) Poll() int {
	if n.Wall {
		return n.PollAt(time.Now())
	}
	return n.PollAt(n.Now)
}

// PollAt runs one round at now and returns the work done.
func (n *Net) PollAt(now time.Time) int {
	w := 0
	for _, p := range n.pollers {
		w += p.Poll(now)
	}
	return w
}

// Deadline returns the earliest deadline of the network's timers.
func (n *Net) Deadline() (time.Time, bool) {
	var t time.Time
	ok := false
	for _, tm := range n.timers {
		if d, has := tm.NextDeadline(); has && (!ok || d.Before(t)) {
			t, ok = d, true
		}
	}
	return t, ok
}

// Advance moves the clock to the earliest deadline, if there is one
// (never backwards), and reports whether there was.
func (n *Net) Advance() bool {
	t, ok := n.Deadline()
	if !ok {
		return false
	}
	if t.After(n.Now) {
		n.Now = t
	}
	return true
}

// Run polls until done reports true, moving the clock a microsecond per
// busy round and to the next deadline when idle. It fails the test after
// maxRounds rounds, or when nothing is left to do and no timer runs.
func (n *Net) Run(maxRounds int, done func() bool) {
	n.TB.Helper()
	for i := 0; i < maxRounds; i++ {
		if done() {
			return
		}
		if n.Poll() == 0 {
			if done() {
				return
			}
			if !n.Advance() {
				n.TB.Fatalf("stuck after %d rounds at %v: nothing to do and no timer running", i, n.Now)
			}
			continue
		}
		n.Now = n.Now.Add(time.Microsecond)
	}
	n.TB.Fatalf("not done after %d rounds", maxRounds)
}

// RunUntil polls until the clock reaches t, moving it a microsecond per
// busy round and from deadline to deadline when idle. Unlike Settle it
// ends while timers run, as some always do (idle probes).
func (n *Net) RunUntil(t time.Time) {
	n.TB.Helper()
	for range 100_000_000 {
		if !n.Now.Before(t) {
			return
		}
		if n.Poll() > 0 {
			n.Now = n.Now.Add(time.Microsecond)
			continue
		}
		d, ok := n.Deadline()
		switch {
		case !ok || d.After(t):
			n.Now = t
		case d.After(n.Now):
			n.Now = d
		default:
			n.Now = n.Now.Add(time.Microsecond)
		}
	}
	n.TB.Fatalf("clock never reached %v", t)
}

// Settle polls until nothing is left to do and no timer runs.
func (n *Net) Settle() {
	n.TB.Helper()
	for range 1_000_000 {
		if n.Poll() == 0 && !n.Advance() {
			return
		}
		n.Now = n.Now.Add(time.Microsecond)
	}
	n.TB.Fatal("never settled")
}

// Quiesce polls until nothing has work, without moving the clock.
func (n *Net) Quiesce() {
	n.TB.Helper()
	for i := 0; n.Poll() != 0; i++ {
		if i > 100_000 {
			n.TB.Fatal("never quiet")
		}
	}
}

// Step polls, then moves the clock by d, until done reports true after a
// round; it fails the test after maxRounds rounds. Unlike Run it ignores
// deadlines: for applications that keep time of their own.
func (n *Net) Step(d time.Duration, maxRounds int, done func() bool) {
	n.TB.Helper()
	for range maxRounds {
		n.Poll()
		if done() {
			return
		}
		n.Now = n.Now.Add(d)
	}
	n.TB.Fatalf("not done after %d rounds of %v", maxRounds, d)
}

// RunWall polls at the wall clock's time until done reports true, and
// reports false if it does not within limit. When a round finds no work
// it calls idle, or yields the processor if idle is nil: the goroutines
// of a test's TCP side need it. It is for a network with Wall set.
func (n *Net) RunWall(limit time.Duration, idle func(), done func() bool) bool {
	end := time.Now().Add(limit)
	for !done() {
		now := time.Now()
		if now.After(end) {
			return false
		}
		if n.PollAt(now) == 0 {
			if idle != nil {
				idle()
			} else {
				runtime.Gosched()
			}
		}
	}
	return true
}

// Pattern fills b with bytes derived from seed and position.
func Pattern(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := 0; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		copy(b[i:], w[:])
	}
}

// PollOne polls one completion from cq (a *roce.CQ), failing the test if
// there is none.
func PollOne[W any](tb testing.TB, cq interface{ Poll([]W) int }) W {
	tb.Helper()
	var wc [1]W
	if cq.Poll(wc[:]) != 1 {
		tb.Fatal("no completion")
	}
	return wc[0]
}

// Region allocates n bytes and registers them with pd (a *roce.PD).
func Region[A, M any](tb testing.TB, pd interface {
	RegisterMR([]byte, A) (M, error)
}, n int, access A) M {
	tb.Helper()
	mr, err := pd.RegisterMR(make([]byte, n), access)
	if err != nil {
		tb.Fatal(err)
	}
	return mr
}

// ReadCapture returns the frames of the pcapng capture at path; frame n
// (numbered from 1, as Wireshark does) is at index n−1. It fails the test
// if the file does not read, holds no frames, or holds a frame cut short
// by the snap length.
func ReadCapture(tb testing.TB, path string) [][]byte {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	var out [][]byte
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if ci.CaptureLength != ci.Length {
			tb.Fatalf("%s frame %d: snapped to %d of %d bytes", path, len(out)+1, ci.CaptureLength, ci.Length)
		}
		out = append(out, append([]byte(nil), data...))
	}
	if len(out) == 0 {
		tb.Fatalf("%s: no frames", path)
	}
	return out
}
