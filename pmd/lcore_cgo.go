package pmd

/*
#include <rte_lcore.h>
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"
)

// LcorePanic is what RunOnLcore reports when the function panicked.
type LcorePanic struct {
	Lcore uint
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

func (p *LcorePanic) Error() string { return fmt.Sprintf("panic on lcore %d: %v", p.Lcore, p.Value) }

// Unwrap returns the panic value when it is an error.
func (p *LcorePanic) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

type lcoreJob struct {
	fn   func()
	done chan<- error
}

// lcores holds the job queue of each worker lcore. A queue stays after
// stopWorkers closes it: a worker thread may pick it up only then.
var lcores struct {
	sync.Mutex
	jobs    [C.RTE_MAX_LCORE]chan lcoreJob
	stopped bool
}

func openLcore(l uint) {
	lcores.Lock()
	defer lcores.Unlock()
	lcores.jobs[l] = make(chan lcoreJob, 16)
}

// stopWorkers ends every lcore's job loop once its queued jobs are done.
func stopWorkers() {
	lcores.Lock()
	defer lcores.Unlock()
	if lcores.stopped {
		return
	}
	lcores.stopped = true
	for _, ch := range lcores.jobs {
		if ch != nil {
			close(ch)
		}
	}
}

// RunOnLcore runs fn on the EAL thread of a worker lcore, which is pinned
// to its CPU and locked to its OS thread for as long as fn runs. The
// returned channel receives fn's panic (a *LcorePanic) or nil when fn
// returns.
func (e *EAL) RunOnLcore(lcore uint, fn func()) <-chan error {
	done := make(chan error, 1)
	lcores.Lock()
	defer lcores.Unlock()
	if lcores.stopped || lcore >= uint(len(lcores.jobs)) || lcores.jobs[lcore] == nil {
		done <- fmt.Errorf("pmd: lcore %d is not a running worker lcore of this EAL", lcore)
		return done
	}
	lcores.jobs[lcore] <- lcoreJob{fn: fn, done: done}
	return done
}

// cddLcoreLoop runs on a worker lcore thread, launched by
// rte_eal_remote_launch: it runs the jobs sent to the lcore until
// stopWorkers closes its queue.
//
//export cddLcoreLoop
func cddLcoreLoop(unsafe.Pointer) C.int {
	l := uint(C.rte_lcore_id())
	lcores.Lock()
	jobs := lcores.jobs[l]
	lcores.Unlock()
	for j := range jobs {
		j.done <- runJob(l, j.fn)
	}
	return 0
}

func runJob(l uint, fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &LcorePanic{Lcore: l, Value: r, Stack: debug.Stack()}
		}
	}()
	fn()
	return nil
}
