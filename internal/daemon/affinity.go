package daemon

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinThreads confines every thread of the process to one CPU: the main
// lcore's, before the EAL starts. The EAL then pins each poll loop's
// thread to its own lcore, and threads the Go runtime starts later
// inherit the mask of the thread that starts them, so the runtime (GC,
// metrics, timers) stays off the poll loops' CPUs. Without it, threads
// started before the EAL keep the whole machine's mask and preempt the
// loops. Two passes catch a thread started while the first ran. The
// threads in except are left alone.
func pinThreads(cpu int, except map[int]bool) (int, error) {
	var set unix.CPUSet
	set.Set(cpu)
	pinned := map[int]bool{}
	for pass := 0; pass < 2; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return 0, fmt.Errorf("daemon: pin threads to CPU %d: %w", cpu, err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || pinned[tid] || except[tid] {
				continue
			}
			var cur unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &cur); err == nil && cur == set {
				pinned[tid] = true
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return 0, fmt.Errorf("daemon: pin thread %d to CPU %d: %w", tid, cpu, err)
			}
			pinned[tid] = true
		}
	}
	return len(pinned), nil
}
