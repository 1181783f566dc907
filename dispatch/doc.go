// Package dispatch classifies received frames and hands each to the ring of
// the service that claims it, in poll loops that run on dedicated lcores.
//
// Classification itself is package classify (pure Go, no cgo).
//
// A Poller is one poll loop. Per RX queue and iteration it classifies the
// burst it received last time, in Go, then makes one cgo call that enqueues
// the burst into the service rings (one enqueue per service present), runs
// the consumers implemented in C (NativeConsumer: counting sink, forwarder)
// and receives the next burst. Consumers written in Go (the RoCE endpoint)
// implement Consumer and are polled after. Counters are kept in plain fields
// and published to atomics when the loop is idle or every 64 iterations.
//
// cgo and unsafe live in loop_cgo.go (with native.h, shared with package
// consumer); the loop logic is plain Go.
package dispatch
