package loop

import "sync/atomic"

// Consumer drains one service's lanes. The loop does not know what a
// consumer does with packets (count them, transmit them, hand them to the
// kernel, a secondary process or the RoCE endpoint); it only calls Poll
// from the poll loop that runs it.
type Consumer interface {
	// Poll handles at most one burst and returns how many packets it
	// handled. It must not block.
	Poll() int
	// Close frees whatever packets the consumer still holds. It is called
	// once, after the poll loop has stopped.
	Close()
}

// NativeConsumer is a Consumer whose work the engine does inside its one
// step per burst (a consumer implemented in C) instead of the loop
// calling Poll. N is its C state, as the engine takes it.
type NativeConsumer[N any] interface {
	Consumer
	// Native returns the consumer's C state, which the engine runs.
	Native() N
	// Publish makes counters the C side keeps visible to readers; the
	// loop calls it when it publishes its own.
	Publish()
}

// Lane is what the loop asks of a lane: the ring that carries one loop's
// packets for one service.
type Lane interface {
	Count() int    // packets waiting
	Capacity() int // packets it holds at most
}

// Service is a named class of packets: one lane per poll loop that
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
type Service[R Lane] struct {
	Name string
	// Rings are the lanes, indexed by the receiving loop's lane number.
	Rings []R
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
func (s *Service[R]) Queued() int {
	n := 0
	for _, r := range s.Rings {
		n += r.Count()
	}
	return n
}

// Capacity returns how many packets the service's lanes hold at most.
func (s *Service[R]) Capacity() int {
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
