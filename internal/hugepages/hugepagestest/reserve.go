package hugepagestest

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Reserve sets this machine's 2 MiB hugepage count to n and mounts
// hugetlbfs on a directory of the test, for tests that run DPDK on real
// hugepages; the count and the mount are put back at cleanup. It skips
// the test when the kernel refuses. Hold Lock first.
func Reserve(t testing.TB, n int) string {
	t.Helper()
	const knob = "/proc/sys/vm/nr_hugepages"
	old, err := os.ReadFile(knob)
	if err != nil {
		t.Skipf("no hugepage support: %v", err)
	}
	if err := os.WriteFile(knob, []byte(strconv.Itoa(n)), 0); err != nil {
		t.Skipf("cannot reserve hugepages: %v", err)
	}
	t.Cleanup(func() { os.WriteFile(knob, old, 0) })
	got, _ := os.ReadFile(knob)
	if have, _ := strconv.Atoi(strings.TrimSpace(string(got))); have < n {
		t.Skipf("kernel reserved %d of %d hugepages", have, n)
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "hugetlbfs", "nodev", dir).CombinedOutput(); err != nil {
		t.Skipf("mount hugetlbfs: %v: %s", err, out)
	}
	t.Cleanup(func() { unmount(t, dir) })
	return dir
}

// unmount unmounts the test's hugetlbfs. A process that still maps its
// pages (a daemon or service process the test did not reap) keeps it
// busy: it waits a little for one that is exiting, then detaches the
// mount anyway, so that none outlives the test, and fails the test.
func unmount(t testing.TB, dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := exec.Command("umount", dir).CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			lazy := exec.Command("umount", "--lazy", dir).Run()
			t.Errorf("umount hugetlbfs %s: %v: %s (detached lazily: %v)", dir, err, strings.TrimSpace(string(out)), lazy)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
