package hugepages_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
	"github.com/cephdpdkd/cephdpdkd/internal/hugepages/hugepagestest"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
)

// The real kernel: reserve 4 more 2M pages than are free, mount
// hugetlbfs, map a page from it, give everything back. The test runs
// itself again in a private mount namespace (unshare -m), so its mount
// never shows outside and dies with it; nr_hugepages is shared with the
// machine, so it is checked and, if need be, put back exactly.
func TestRealKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	sys := &hugepages.System{}
	if _, err := os.Stat("/sys/kernel/mm/hugepages/hugepages-2048kB"); err != nil {
		t.Skipf("no 2M hugepages: %v", err)
	}
	if os.Getenv("CDD_HUGEPAGES_CHILD") == "1" {
		realKernelChild(t, sys)
		return
	}
	harness.RequireCommands(t, "util-linux", "unshare")
	hugepagestest.Lock(t)
	before, err := sys.Counts(2048)
	if err != nil {
		t.Fatal(err)
	}
	// The child records what it added here; if it dies before giving
	// the pages back, the parent does, from the state file: never by
	// writing an absolute count, which could undo another's change.
	runDir := t.TempDir()
	t.Cleanup(func() {
		parent := &hugepages.System{RunDir: runDir}
		if st, err := parent.Release(parent.StatePath("realtest")); st != nil || err != nil {
			t.Errorf("the child left %+v reserved; given back: %v", st, err)
		}
		if now, err := sys.Counts(2048); err == nil && now.Total != before.Total {
			t.Errorf("nr_hugepages %d after the test, %d before", now.Total, before.Total)
		}
	})
	cmd := exec.Command("unshare", "-m", "--propagation", "private", os.Args[0], "-test.run=^TestRealKernel$", "-test.v")
	cmd.Env = append(os.Environ(), "CDD_HUGEPAGES_CHILD=1", "CDD_HUGEPAGES_RUNDIR="+runDir)
	out, err := cmd.CombinedOutput()
	t.Logf("in a private mount namespace:\n%s", out)
	switch {
	case err != nil:
		t.Fatalf("child: %v", err)
	case strings.Contains(string(out), "--- SKIP"):
		t.Skip("skipped in the namespace")
	case !strings.Contains(string(out), "--- PASS"):
		t.Fatal("child did not pass")
	}
}

func realKernelChild(t *testing.T, sys *hugepages.System) {
	before, err := sys.Counts(2048)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "huge")
	sys.RunDir = os.Getenv("CDD_HUGEPAGES_RUNDIR")
	req := hugepages.Request{Pages: before.Available() + 4, SizeKB: 2048, Mount: dir}
	st, err := sys.Reserve("realtest", req)
	if err != nil {
		if now, _ := sys.Counts(2048); now.Total != before.Total {
			t.Fatalf("failed Reserve left nr_hugepages %d, was %d: %v", now.Total, before.Total, err)
		}
		if strings.Contains(err.Error(), "the kernel granted") {
			t.Skipf("the kernel cannot provide 4 more pages: %v", err)
		}
		t.Fatal(err)
	}
	defer sys.Release(sys.StatePath("realtest")) // if a check below fails
	after, _ := sys.Counts(2048)
	t.Logf("nr_hugepages %d -> %d, available %d -> %d; state %+v", before.Total, after.Total, before.Available(), after.Available(), *st)
	if st.Added != 4 || after.Total != before.Total+4 || after.Available() < req.Pages {
		t.Errorf("added %d, nr %d -> %d, available %d; want 4 more and %d available", st.Added, before.Total, after.Total, after.Available(), req.Pages)
	}
	if m := mountOf(dir); m != "hugetlbfs pagesize=2M" {
		t.Fatalf("mount table for %s: %q, want 2M hugetlbfs", dir, m)
	}
	// A page from the mount, as the EAL takes them.
	f, err := os.Create(filepath.Join(dir, "page0"))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 2<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap a hugepage: %v", err)
	}
	mem[0], mem[len(mem)-1] = 1, 2
	if c, _ := sys.Counts(2048); c.Free != after.Free-1 {
		t.Errorf("free pages %d with one mapped and touched, want %d", c.Free, after.Free-1)
	}
	unix.Munmap(mem)
	f.Close()
	os.Remove(f.Name())

	if _, err := sys.Release(sys.StatePath("realtest")); err != nil {
		t.Fatal(err)
	}
	end, _ := sys.Counts(2048)
	if end.Total != before.Total {
		t.Errorf("nr_hugepages %d after Release, want %d", end.Total, before.Total)
	}
	if m := mountOf(dir); m != "" {
		t.Errorf("still mounted after Release: %s", m)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("mount point Reserve created is left: %v", err)
	}
	t.Logf("given back: nr_hugepages %s", strconv.Itoa(end.Total))
}

// mountOf returns "fstype pagesize=..." of what /proc/self/mounts shows
// on dir; "" when nothing.
func mountOf(dir string) string {
	b, _ := os.ReadFile("/proc/self/mounts")
	var m string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[1] != dir {
			continue
		}
		m = f[2]
		for _, o := range strings.Split(f[3], ",") {
			if strings.HasPrefix(o, "pagesize=") {
				m += " " + o
			}
		}
	}
	return m
}
