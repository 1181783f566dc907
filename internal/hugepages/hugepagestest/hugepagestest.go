// Package hugepagestest is a fake kernel for package hugepages' tests: a
// sysfs tree with one page size, a mount table file, and the writes and
// mount calls that change them.
package hugepagestest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
)

// Kernel is a fake kernel for 2M pages: nr_hugepages grows up to Max,
// never below the pages in use.
type Kernel struct {
	t    testing.TB
	Root string
	// Nr, InUse, Resv and Surplus are nr_hugepages, the pages mapped,
	// the pages promised and the pages in use beyond what nr_hugepages
	// was lowered to; Sync writes them out after a change.
	Nr, InUse, Resv, Surplus int
	// Max is the most pages the kernel can find.
	Max int
	// MountErr, when set, fails every mount.
	MountErr error
	// Mounts and Unmounts record the calls.
	Mounts, Unmounts []string
}

// New returns a fake kernel with nr pages, inUse of them mapped, and a
// System over it.
func New(t testing.TB, nr, inUse int) (*Kernel, *hugepages.System) {
	t.Helper()
	k := &Kernel{t: t, Root: t.TempDir(), Nr: nr, InUse: inUse, Max: 1 << 20}
	k.writeMounts([]string{"proc /proc proc rw 0 0", "tmpfs /run tmpfs rw 0 0"})
	if err := os.MkdirAll(filepath.Join(k.Root, "sys/kernel/mm/hugepages/hugepages-2048kB"), 0o755); err != nil {
		t.Fatal(err)
	}
	k.Sync()
	return k, &hugepages.System{
		Sysfs: filepath.Join(k.Root, "sys"), Mounts: k.MountTable(), RunDir: filepath.Join(k.Root, "run"),
		WriteFile: k.Write, Mount: k.Mount, Unmount: k.Unmount,
	}
}

// MountTable is the path of the fake mount table.
func (k *Kernel) MountTable() string { return filepath.Join(k.Root, "mounts") }

func (k *Kernel) attr(name string) string {
	return filepath.Join(k.Root, "sys/kernel/mm/hugepages/hugepages-2048kB", name)
}

// Sync writes the counters to the tree.
func (k *Kernel) Sync() {
	for name, v := range map[string]int{"nr_hugepages": k.Nr, "free_hugepages": k.Nr - k.InUse, "resv_hugepages": k.Resv, "surplus_hugepages": k.Surplus} {
		if err := os.WriteFile(k.attr(name), []byte(strconv.Itoa(v)+"\n"), 0o644); err != nil {
			k.t.Fatal(err)
		}
	}
}

// Write is System.WriteFile: it acts on nr_hugepages as the kernel does.
func (k *Kernel) Write(path string, data []byte) error {
	if path != k.attr("nr_hugepages") {
		return fmt.Errorf("fake sysfs: unexpected write to %s", path)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 0 {
		return errors.New("EINVAL")
	}
	// Pages in use above n stay, as surplus pages, which the kernel
	// frees when their user lets them go.
	k.Nr = max(min(n, k.Max), k.InUse)
	k.Surplus = max(k.InUse-n, 0)
	k.Sync()
	return nil
}

func (k *Kernel) readMounts() []string {
	b, _ := os.ReadFile(k.MountTable())
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (k *Kernel) writeMounts(lines []string) {
	if err := os.WriteFile(k.MountTable(), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

// AddMount adds a line to the mount table ("nodev DIR hugetlbfs rw,pagesize=2M 0 0").
func (k *Kernel) AddMount(line string) { k.writeMounts(append(k.readMounts(), line)) }

// Mount is System.Mount: the directory must exist.
func (k *Kernel) Mount(dir string, sizeKB int) error {
	k.Mounts = append(k.Mounts, dir)
	if k.MountErr != nil {
		return k.MountErr
	}
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	k.AddMount(fmt.Sprintf("nodev %s hugetlbfs rw,relatime,pagesize=%dM 0 0", dir, sizeKB>>10))
	return nil
}

// Unmount is System.Unmount: it removes the top mount on dir.
func (k *Kernel) Unmount(dir string) error {
	k.Unmounts = append(k.Unmounts, dir)
	lines := k.readMounts()
	for i := len(lines) - 1; i >= 0; i-- {
		if f := strings.Fields(lines[i]); len(f) > 1 && f[1] == dir {
			k.writeMounts(slices.Delete(lines, i, i+1))
			return nil
		}
	}
	return errors.New("EINVAL: not mounted")
}

// Mounted reports whether hugetlbfs is mounted on dir.
func (k *Kernel) Mounted(dir string) bool {
	for _, l := range k.readMounts() {
		if f := strings.Fields(l); len(f) > 2 && f[1] == dir && f[2] == "hugetlbfs" {
			return true
		}
	}
	return false
}

// LockFile serializes the tests that change this machine's hugepage
// reservation, across packages and test binaries: nr_hugepages is one
// per machine, and a test that reads it while another changes it would
// put back the wrong count.
const LockFile = "/tmp/cephdpdkd-hugepages-test.lock"

// Lock holds LockFile until the test ends.
func Lock(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(LockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("hugepages test lock: %v", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("hugepages test lock: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing drops the lock
}
