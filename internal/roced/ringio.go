package roced

import (
	"fmt"
	"sync/atomic"

	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// RingIO gives a packet-level endpoint (the RoCE endpoint) a service's
// lanes to read and a port TX queue to write, as bursts of frames: the
// roce.PacketIO interface. Received frames are views of mbuf memory and
// stay valid until the next RecvBurst, which frees them; sent frames are
// copied into fresh mbufs.
//
// Counts are what RecvBurst took from the ring. Every mbuf taken is handed
// to the endpoint, so Counts.Drops stays 0: a frame the TX queue refuses
// is not a drop here, since the caller still holds it and decides (the
// RoCE transport offers it again, or retransmits); TxRefused counts
// those.
type RingIO struct {
	lanes   *dispatch.RingSet
	port    uint16
	queue   uint16
	pool    *mempool.Pool
	burst   *pmd.Burst
	scratch pmd.TxScratch
	consumer.Counts
	// TxRefused counts frames SendBurst did not transmit: the TX queue
	// was full or the pool had no mbuf to copy them into.
	TxRefused atomic.Uint64
}

// NewRingIO reads a service's lanes in bursts of up to burst frames and
// transmits on port's TX queue with mbufs from pool. Only one lcore may
// use the queue.
func NewRingIO(lanes *dispatch.RingSet, port, queue uint16, pool *mempool.Pool, burst int) (*RingIO, error) {
	b, err := pmd.NewBurst(burst)
	if err != nil {
		return nil, fmt.Errorf("roced: ring io for %q: %w", lanes.Rings()[0].Name(), err)
	}
	return &RingIO{lanes: lanes, port: port, queue: queue, pool: pool, burst: b}, nil
}

// RecvBurst frees the previous burst and fills frames with the next one.
func (io *RingIO) RecvBurst(frames [][]byte) int {
	b := io.burst
	n := io.lanes.Dequeue(b, len(frames)) // frees the previous burst first
	copy(frames, b.Frames())
	if n > 0 {
		io.Packets.Add(uint64(n))
		io.Bytes.Add(b.Bytes())
	}
	return n
}

// SendBurst copies frames into mbufs and transmits them, and returns how
// many the queue took: a prefix of frames. The rest stay the caller's to
// send again; they are counted in TxRefused, not as drops (the copies
// made for them are freed, the frames are not lost).
func (io *RingIO) SendBurst(frames [][]byte) int {
	sent := 0
	for sent < len(frames) {
		n := pmd.TxCopy(io.port, io.queue, io.pool.C(), frames[sent:], &io.scratch)
		if n == 0 {
			break
		}
		sent += n
	}
	if r := len(frames) - sent; r > 0 {
		io.TxRefused.Add(uint64(r))
	}
	return sent
}

// Close frees the last received burst and the burst memory.
func (io *RingIO) Close() {
	if io.burst != nil {
		io.burst.Free()
		io.burst = nil
	}
}
