package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// runner is the harness.TB the set-up functions get from this program,
// as a *testing.T is theirs in the tests: it collects their cleanups and
// runs them last-registered first (runCleanups), prints their failures,
// and, like testing, ends the goroutine that called Fatal or Skip
// (runtime.Goexit) after running its deferred calls. Every call that
// could end a goroutine must come from the goroutine running the whole
// set-up, never from a cleanup.
type runner struct {
	out     io.Writer
	verbose bool // print the set-up functions' logs

	// stopping is set once the run is interrupted: the failures that
	// follow are its steps being stopped, and show as one line each.
	stopping atomic.Bool

	mu       sync.Mutex
	cleanups []func()
	cleaning bool // a Cleanup registered from now on runs at once
	failed   bool
}

func (r *runner) Helper() {}

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	if r.cleaning {
		r.mu.Unlock()
		r.runOne(f)
		return
	}
	r.cleanups = append(r.cleanups, f)
	r.mu.Unlock()
}

// runCleanups runs the cleanups registered so far, the last first, each
// on a goroutine of its own so that one that calls Fatal ends alone.
func (r *runner) runCleanups() {
	r.mu.Lock()
	r.cleaning = true
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		r.runOne(fs[i])
	}
}

func (r *runner) runOne(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func (r *runner) TempDir() string {
	d, err := os.MkdirTemp("", "cddtry-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() {
		if err := os.RemoveAll(d); err != nil {
			r.Error(err)
		}
	})
	return d
}

func (r *runner) Log(args ...any) { r.logLine(fmt.Sprint(args...)) }

func (r *runner) Logf(format string, args ...any) { r.logLine(fmt.Sprintf(format, args...)) }

func (r *runner) logLine(s string) {
	if r.verbose {
		r.printIndented("    ", s)
	}
}

func (r *runner) Error(args ...any) { r.fail("error: " + fmt.Sprint(args...)) }

func (r *runner) Errorf(format string, args ...any) { r.fail("error: " + fmt.Sprintf(format, args...)) }

func (r *runner) Fatal(args ...any) { r.stop("error: " + fmt.Sprint(args...)) }

func (r *runner) Fatalf(format string, args ...any) { r.stop("error: " + fmt.Sprintf(format, args...)) }

// Skip is how the set-up functions say that the machine lacks something
// (root, Ceph's binaries): for this program, a failure to run.
func (r *runner) Skip(args ...any) { r.stop("cannot run: " + fmt.Sprint(args...)) }

func (r *runner) Skipf(format string, args ...any) {
	r.stop("cannot run: " + fmt.Sprintf(format, args...))
}

// stop fails with msg and ends the calling goroutine.
func (r *runner) stop(msg string) {
	r.fail(msg)
	runtime.Goexit()
}

func (r *runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *runner) fail(msg string) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	if r.stopping.Load() {
		msg, _, _ = strings.Cut(msg, "\n")
		msg = "  stopped: " + msg
	}
	r.printIndented("", msg)
}

func (r *runner) printIndented(indent, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Fprintln(r.out, indent+l)
	}
}
