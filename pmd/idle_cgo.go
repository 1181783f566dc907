package pmd

/*
#include "idle.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Waker lets an idle poll loop sleep on its own thread, in the kernel,
// until a timeout or until another goroutine has work for it (Wake).
type Waker struct {
	fd int
}

// NewWaker creates a Waker (an eventfd).
func NewWaker() (*Waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("pmd: eventfd: %w", err)
	}
	return &Waker{fd: fd}, nil
}

// Wait blocks until Wake or until d passes, and reports whether Wake
// ended it. One goroutine, the loop's, waits.
func (w *Waker) Wait(d time.Duration) bool {
	return C.cdd_idle_wait(C.int(w.fd), C.long(d)) == 1
}

// Wake ends the current or the next Wait. Any goroutine may call it.
func (w *Waker) Wake() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(w.fd, one[:]) // EAGAIN: a wake-up is pending already
}

// Close releases the eventfd, once nothing waits or wakes.
func (w *Waker) Close() error { return unix.Close(w.fd) }
