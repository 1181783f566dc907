package memlink

import (
	"math/rand/v2"
	"sync"
)

// Defaults for a zero Config.
const (
	DefaultQueueLen = 1024
	DefaultMaxFrame = 9216 // jumbo frame, enough for any RoCE path MTU
)

// Config describes both directions of a link. Probabilities are per frame
// and between 0 and 1.
type Config struct {
	Seed      uint64  // seed of the fault generator; equal seeds give equal runs
	Loss      float64 // frame silently dropped
	Reorder   float64 // frame delivered before the one queued ahead of it, if that one is still queued
	Duplicate float64 // frame delivered twice
	Corrupt   float64 // one byte of the frame flipped

	QueueLen int // frames queued per direction (DefaultQueueLen if 0)
	MaxFrame int // largest frame accepted (DefaultMaxFrame if 0)
}

// Stats counts what happened to the frames one end sent.
type Stats struct {
	Sent       uint64 // frames accepted by SendBurst
	Delivered  uint64 // frames handed to the other end's RecvBurst
	Lost       uint64 // dropped by the Loss probability
	Filtered   uint64 // dropped by the end's filter
	Oversize   uint64 // dropped for exceeding MaxFrame
	Reordered  uint64
	Duplicated uint64
	Corrupted  uint64
}

// queue is one direction of the link.
type queue struct {
	mu     sync.Mutex
	cfg    Config
	rng    *rand.Rand
	bufs   [][]byte // ring of frame buffers, each with capacity MaxFrame
	head   int
	n      int
	filter func(frame []byte) bool
	stats  Stats
}

// End is one side of a link: it sends into one queue and receives from
// the other.
type End struct {
	tx, rx *queue
	// loaned holds the buffers returned by the last RecvBurst; they go
	// back into the queue on the next call, which is when the caller's
	// frames stop being valid.
	loaned [][]byte
	rxMu   sync.Mutex
}

// New returns the two ends of a link configured by cfg. Frames sent on a
// are received on b and vice versa; the two directions draw faults from
// generators derived from cfg.Seed.
func New(cfg Config) (a, b *End) {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	ab := newQueue(cfg, cfg.Seed)
	ba := newQueue(cfg, cfg.Seed^0x9E3779B97F4A7C15)
	return &End{tx: ab, rx: ba}, &End{tx: ba, rx: ab}
}

func newQueue(cfg Config, seed uint64) *queue {
	q := &queue{
		cfg:  cfg,
		rng:  rand.New(rand.NewPCG(seed, seed>>1|1)),
		bufs: make([][]byte, cfg.QueueLen),
	}
	for i := range q.bufs {
		q.bufs[i] = make([]byte, 0, cfg.MaxFrame)
	}
	return q
}

// SetFilter installs f to decide the fate of every frame this end sends
// from now on (before the random faults): false drops the frame. A nil f
// removes the filter. Tests use it to drop one particular packet.
func (e *End) SetFilter(f func(frame []byte) bool) {
	e.tx.mu.Lock()
	e.tx.filter = f
	e.tx.mu.Unlock()
}

// SetFaults changes the fault probabilities of the frames this end sends.
func (e *End) SetFaults(loss, reorder, duplicate, corrupt float64) {
	e.tx.mu.Lock()
	e.tx.cfg.Loss, e.tx.cfg.Reorder = loss, reorder
	e.tx.cfg.Duplicate, e.tx.cfg.Corrupt = duplicate, corrupt
	e.tx.mu.Unlock()
}

// Stats returns the counters of the frames this end sent.
func (e *End) Stats() Stats {
	e.tx.mu.Lock()
	defer e.tx.mu.Unlock()
	return e.tx.stats
}

// Queued returns the frames waiting to be received by this end.
func (e *End) Queued() int {
	e.rx.mu.Lock()
	defer e.rx.mu.Unlock()
	return e.rx.n
}

// SendBurst copies frames into the link and returns how many it accepted;
// it stops early when the queue is full, as a NIC transmit ring does.
// Accepted frames may still be lost, filtered or damaged on the way.
func (e *End) SendBurst(frames [][]byte) int {
	q := e.tx
	q.mu.Lock()
	defer q.mu.Unlock()
	accepted := 0
	for _, f := range frames {
		if q.n == len(q.bufs) {
			break
		}
		accepted++
		q.stats.Sent++
		switch {
		case len(f) > q.cfg.MaxFrame:
			q.stats.Oversize++
			continue
		case q.filter != nil && !q.filter(f):
			q.stats.Filtered++
			continue
		case q.hit(q.cfg.Loss):
			q.stats.Lost++
			continue
		}
		slot := q.push(f)
		if q.hit(q.cfg.Corrupt) && len(slot) > 0 {
			slot[q.rng.IntN(len(slot))] ^= byte(1 + q.rng.IntN(255))
			q.stats.Corrupted++
		}
		if q.hit(q.cfg.Reorder) && q.n >= 2 {
			i, j := q.index(q.n-2), q.index(q.n-1)
			q.bufs[i], q.bufs[j] = q.bufs[j], q.bufs[i]
			q.stats.Reordered++
		}
		if q.hit(q.cfg.Duplicate) && q.n < len(q.bufs) {
			q.push(f)
			q.stats.Duplicated++
		}
	}
	return accepted
}

// RecvBurst fills frames with up to len(frames) queued frames and returns
// how many. The frames stay valid until the next RecvBurst call on e.
func (e *End) RecvBurst(frames [][]byte) int {
	e.rxMu.Lock()
	defer e.rxMu.Unlock()
	q := e.rx
	q.mu.Lock()
	defer q.mu.Unlock()
	k := 0
	for k < len(frames) && q.n > 0 {
		if k == len(e.loaned) {
			e.loaned = append(e.loaned, make([]byte, 0, q.cfg.MaxFrame))
		}
		// Swap the queued buffer with the one loaned out last time.
		buf := q.bufs[q.head]
		q.bufs[q.head] = e.loaned[k][:0]
		e.loaned[k] = buf
		frames[k] = buf
		q.head = q.index(1)
		q.n--
		q.stats.Delivered++
		k++
	}
	return k
}

func (q *queue) hit(p float64) bool { return p > 0 && q.rng.Float64() < p }

func (q *queue) index(i int) int { return (q.head + i) % len(q.bufs) }

// push appends a copy of f to the queue, which must have room, and
// returns the queued copy.
func (q *queue) push(f []byte) []byte {
	i := q.index(q.n)
	q.bufs[i] = append(q.bufs[i][:0], f...)
	q.n++
	return q.bufs[i]
}
