package pmd

import (
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// IdleSleeper blocks a poll loop's thread in the kernel (a futex wait
// with a timeout) while the loop has nothing to do, and lets any
// goroutine end the wait early.
//
// Not a Go timer: the loop's goroutine is locked to its lcore thread, so
// each timer wake-up hands the goroutine and a P between threads (four
// thread switches a sleep), and the netpoller rounds a timer under a
// millisecond up to one. Not a cgo call either: a thread blocked in one
// keeps its P in a system call, which sysmon then checks every 20 µs.
// The wait is a raw system call: the runtime sees a goroutine still
// running, which it is, on a P that is the loop's alone (GOMAXPROCS
// counts one for each loop). A stop-the-world's preemption signal ends
// the wait early, like any other wake-up.
type IdleSleeper struct {
	// word is 1 while a wake-up is pending: the futex word.
	word atomic.Uint32
}

// NewIdleSleeper returns a sleeper with no wake-up pending.
func NewIdleSleeper() *IdleSleeper { return &IdleSleeper{} }

const (
	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

// Sleep blocks the calling thread for d, or until Wake; it reports
// whether a Wake ended it (or was pending).
func (s *IdleSleeper) Sleep(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if s.word.Swap(0) == 1 {
			return true
		}
		ts := syscall.NsecToTimespec(int64(d))
		// Returns at the timeout, on a Wake, at once if a Wake came in
		// between (the word is no longer 0), or on a signal: then back
		// in Go, where the runtime may preempt the goroutine (sysmon
		// asks every 10 ms of a goroutine that never blocks, and a
		// stop-the-world asks too), before the rest of the sleep.
		_, _, errno := syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&s.word)), futexWaitPrivate, 0,
			uintptr(unsafe.Pointer(&ts)), 0, 0)
		if errno != syscall.EINTR {
			return s.word.Swap(0) == 1
		}
		if d = time.Until(deadline); d <= 0 {
			return s.word.Swap(0) == 1
		}
	}
}

// Wake ends the current or next Sleep. Any goroutine may call it; it
// never blocks.
func (s *IdleSleeper) Wake() {
	if s.word.Swap(1) == 0 {
		syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&s.word)), futexWakePrivate, 1, 0, 0, 0)
	}
}
