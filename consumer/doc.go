// Package consumer holds what drains a service ring: a counting sink that
// counts and frees, and a forwarder that transmits out a port queue.
// Later consumers (the kernel exception path, DPDK secondary processes,
// the RoCE endpoint) implement the same dispatch.Consumer interface.
//
// Each Poll is one cgo call: dequeue a burst and handle it in C.
package consumer
