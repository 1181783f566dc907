// Package consumer holds what drains a service's lanes (dispatch.RingSet):
// a counting sink that counts and frees, a forwarder that transmits out a
// port queue, the kernel exception path (Kernel), and the daemon's side
// of a service process (Process). All implement dispatch.Consumer. (The
// RoCE endpoint's ring I/O is internal/roced's RingIO, next to its only
// user.)
//
// Each Poll is one cgo call into package pmd: dequeue a burst from the
// lanes, in turn, and handle it in C. Sinks, forwarders and the daemon's
// side of a service process are also run by the poll loop inside its own
// cgo call (dispatch.NativeConsumer). The package is plain Go over pmd's
// typed handles (pmd.Native, pmd.Kernel, pmd.ProcessHost). How the
// daemon follows a service process's session (attach, heartbeat, death,
// recovery) is package session's, plain Go that tests run with fakes.
package consumer
