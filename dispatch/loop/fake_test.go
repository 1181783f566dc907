package loop_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/dispatch/loop"
	"github.com/cephdpdkd/cephdpdkd/dispatch/loop/looptest"
)

// The fakes stand for pmd's C state: a lane is a slice of frames, a
// burst holds frames and their verdicts, the engine dispatches by
// verdict into the lanes and receives from a fake NIC's queues, and a
// native consumer drains its lanes when the engine runs it.

type (
	fakeService = loop.Service[*fakeRing]
	fakeConfig  = loop.Config[*fakeRing, *fakeNative]
	fakePoller  = loop.Poller[*fakeRing, *fakeNative]
)

type fakeRing struct {
	frames [][]byte
	size   int
}

func (r *fakeRing) Count() int    { return len(r.frames) }
func (r *fakeRing) Capacity() int { return r.size }

// take removes up to n frames, oldest first.
func (r *fakeRing) take(n int) [][]byte {
	n = min(n, len(r.frames))
	out := r.frames[:n:n]
	r.frames = r.frames[n:]
	return out
}

type fakeBurst struct {
	frames   [][]byte
	lens     []uint32
	verdicts []uint8
	size     int
	freed    bool
}

func (b *fakeBurst) Len() int { return len(b.frames) }
func (b *fakeBurst) Bytes() uint64 {
	n := uint64(0)
	for _, l := range b.lens {
		n += uint64(l)
	}
	return n
}
func (b *fakeBurst) Frames() [][]byte  { return b.frames }
func (b *fakeBurst) PktLens() []uint32 { return b.lens }
func (b *fakeBurst) Verdicts() []uint8 { return b.verdicts }
func (b *fakeBurst) Free()             { b.set(nil); b.freed = true }

func (b *fakeBurst) set(frames [][]byte) {
	b.frames, b.lens, b.verdicts = frames, make([]uint32, len(frames)), make([]uint8, len(frames))
	for i, f := range frames {
		b.lens[i] = uint32(len(f))
	}
}

// fakeNIC holds what its loops receive, per RX queue, and every burst,
// engine and slot they took, to check what was freed.
type fakeNIC struct {
	rx      map[uint16][][]byte
	bursts  []*fakeBurst
	engines []*fakeEngine
	fail    string // "burst", "engine": that allocation fails
}

func newNIC() *fakeNIC { return &fakeNIC{rx: map[uint16][][]byte{}} }

func (nic *fakeNIC) send(queue uint16, frames [][]byte) {
	nic.rx[queue] = append(nic.rx[queue], frames...)
}

func (nic *fakeNIC) newBurst(size int) (loop.Burst, error) {
	if nic.fail == "burst" && len(nic.bursts) > 0 {
		return nil, errors.New("no memory for a burst")
	}
	b := &fakeBurst{size: size}
	nic.bursts = append(nic.bursts, b)
	return b, nil
}

func (nic *fakeNIC) newEngine(rings []*fakeRing, direct, natives []*fakeNative, burst int) (loop.Engine, error) {
	if nic.fail == "engine" {
		return nil, errors.New("no memory for the loop")
	}
	e := &fakeEngine{nic: nic, rings: rings, direct: direct, natives: natives, burst: burst, deltas: make([][3]uint64, len(rings))}
	nic.engines = append(nic.engines, e)
	return e, nil
}

// config wires a loop of the test services on the given queues.
func (nic *fakeNIC) config(t *testing.T, svcs []*fakeService, queues ...uint16) fakeConfig {
	return fakeConfig{Lcore: 1, Queues: queues, BurstSize: 4, NewBurst: nic.newBurst,
		Wiring: loop.Wiring[*fakeRing, *fakeNative]{Classifier: looptest.Classifier(t), Services: svcs, NewEngine: nic.newEngine}}
}

// allFreed reports whether every burst and engine was freed.
func (nic *fakeNIC) allFreed() bool {
	for _, b := range nic.bursts {
		if !b.freed {
			return false
		}
	}
	for _, e := range nic.engines {
		if !e.freed {
			return false
		}
	}
	return true
}

type fakeEngine struct {
	nic     *fakeNIC
	rings   []*fakeRing
	direct  []*fakeNative
	natives []*fakeNative
	burst   int
	deltas  [][3]uint64 // per service: packets, bytes, drops
	steps   int
	freed   bool
}

func (e *fakeEngine) Step(b loop.Burst, port, queue uint16, runNatives, rx bool) int {
	e.steps++
	fb, _ := b.(*fakeBurst)
	if fb != nil {
		for i, f := range fb.frames {
			v := fb.verdicts[i]
			r, d := e.rings[v], &e.deltas[v]
			if r == nil || len(r.frames) == r.size {
				d[2]++ // closed or full: freed
				continue
			}
			r.frames = append(r.frames, f)
			d[0]++
			d[1] += uint64(len(f))
		}
		fb.set(nil)
	}
	n := 0
	if runNatives {
		for _, nat := range e.natives {
			n += nat.Poll()
		}
	}
	if rx && fb != nil {
		q := e.nic.rx[queue]
		k := min(len(q), fb.size)
		fb.set(q[:k:k])
		e.nic.rx[queue] = q[k:]
	}
	return n
}

func (e *fakeEngine) Account(packets, bytes, drops []uint64) {
	for i, d := range e.deltas {
		packets[i] += d[0]
		bytes[i] += d[1]
		drops[i] += d[2]
		e.deltas[i] = [3]uint64{}
	}
}

func (e *fakeEngine) Free() { e.freed = true }

// fakeNative is a native consumer: the engine runs it, and it counts
// what it takes from its lanes. published is what the loop made visible.
type fakeNative struct {
	lanes     []*fakeRing
	taken     uint64
	published atomic.Uint64
	closed    bool
}

func (n *fakeNative) Poll() int {
	k := 0
	for _, r := range n.lanes {
		k += len(r.take(32))
	}
	n.taken += uint64(k)
	return k
}
func (n *fakeNative) Close()              { n.closed = true }
func (n *fakeNative) Native() *fakeNative { return n }
func (n *fakeNative) Publish()            { n.published.Store(n.taken) }

// recorder is a consumer in Go: it drains its lanes and remembers the
// tag of every frame, in arrival order. While paused it takes nothing.
type recorder struct {
	t      testing.TB
	lanes  []*fakeRing
	paused bool
	got    []looptest.Tag
	polls  int
}

func (r *recorder) Poll() int {
	r.polls++
	if r.paused {
		return 0
	}
	k := 0
	for _, l := range r.lanes {
		for _, f := range l.take(32) {
			r.got = append(r.got, looptest.ReadTag(r.t, f))
			k++
		}
	}
	return k
}
func (r *recorder) Close() {}

// fakeSlot is a gate's or quiescence's slot: Pass lets the loop through
// unless held, and the calls are counted.
type fakeSlot struct {
	held                       bool
	passes, offlines, releases int
}

func (s *fakeSlot) Pass() bool { s.passes++; return !s.held }
func (s *fakeSlot) Offline()   { s.offlines++ }
func (s *fakeSlot) Release()   { s.releases++ }

// quiet is s as a quiescence slot, whose Pass returns nothing.
type quiet struct{ *fakeSlot }

func (q quiet) Pass() { q.fakeSlot.Pass() }

// services makes the test services with n lanes of size each and no
// consumers.
func services(n, size int) []*fakeService {
	svcs := make([]*fakeService, looptest.NumServices)
	for i, name := range []string{"a", "b", "other"} {
		svcs[i] = &fakeService{Name: name}
		for range n {
			svcs[i].Rings = append(svcs[i].Rings, &fakeRing{size: size})
		}
	}
	return svcs
}

// newPoller builds a loop and frees it when the test ends.
func newPoller(t *testing.T, cfg fakeConfig) *fakePoller {
	t.Helper()
	p, err := loop.New(cfg)
	return looptest.FreeAtEnd(t, p, err)
}

// idle polls the loop until an iteration handles nothing.
func idle(t *testing.T, p *fakePoller) {
	t.Helper()
	for range 1000 {
		if p.PollOnce() == 0 {
			return
		}
	}
	t.Fatal("the loop never went idle")
}
