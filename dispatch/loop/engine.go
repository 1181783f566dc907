package loop

// Burst is one RX queue's burst: the packets received and not yet
// dispatched, their first segments and whole lengths, and the verdicts
// the classifier writes (pmd.Burst). A Burst belongs to one loop.
type Burst interface {
	Len() int      // packets held
	Bytes() uint64 // their total length
	Frames() [][]byte
	PktLens() []uint32
	Verdicts() []uint8
	// Free releases the burst, freeing the packets still in it.
	Free()
}

// Engine is a table's C state (pmd.Loop): the loop's lane of each
// service, and the native consumers it runs.
type Engine interface {
	// Step dispatches b, classified, into the lanes (or straight to a
	// local native consumer), runs the native consumers if runNatives,
	// and receives the next burst from port's queue into b if rx: the
	// loop's one cgo call per RX queue and iteration. b is nil for a
	// loop without RX queues. It returns the packets the natives handled.
	Step(b Burst, port, queue uint16, runNatives, rx bool) int
	// Account adds what the last Step handed each service (enqueued,
	// their bytes, dropped at a full lane) to packets, bytes and drops,
	// indexed by service, and forgets it.
	Account(packets, bytes, drops []uint64)
	// Free releases the C state; lanes and consumers are left alone.
	Free()
}

// NewEngine builds a table's engine: rings[s] is the loop's lane of
// service s (zero for a loop that does not receive, or a closed
// service), direct[s] the local native consumer the engine may hand
// service s's packets directly (zero: none), natives every native
// consumer the loop runs, burst the most packets a burst holds.
type NewEngine[R Lane, N any] func(rings []R, direct, natives []N, burst int) (Engine, error)

// GateSlot is a loop's slot in the EAL's interrupt-thread gate
// (pmd.GateSlot): while the gate holds it, the loop touches no port.
type GateSlot interface {
	Pass() bool // false: held, skip this iteration
	Offline()   // not running: the gate need not wait for the loop
	Release()
}

// QuiesceSlot is a loop's slot in the callback removers' quiescence
// (pmd.QuiesceSlot): it counts the iterations the loop begins.
type QuiesceSlot interface {
	Pass()
	Offline()
	Release()
}
