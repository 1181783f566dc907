// Package consumer holds what drains a service's lanes (dispatch.RingSet):
// a counting sink that counts and frees, a forwarder that transmits out a
// port queue, the kernel exception path (Kernel), and RingIO, which gives
// a packet-level endpoint (the RoCE endpoint) a service's frames in
// bursts. All implement dispatch.Consumer.
//
// Each Poll is one cgo call: dequeue a burst from the lanes, in turn, and
// handle it in C. Sinks and forwarders are also run by the poll loop
// inside its own cgo call (dispatch.NativeConsumer).
package consumer
