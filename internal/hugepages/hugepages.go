// Package hugepages provides the hugepages a DPDK EAL needs: it raises
// the kernel's reservation of one page size until enough pages are free,
// mounts hugetlbfs with that page size where the EAL looks for it, and
// later gives back exactly what it added.
//
// What Reserve added (pages, a mount, a directory) is recorded in a
// state file, so that Release undoes it from another process after a
// crash (cephdpdkd restore-nic). The sysfs root, the mount table and the
// mount calls are fields, so the logic has unit tests on a fake tree.
package hugepages

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/statefile"
	"github.com/cephdpdkd/cephdpdkd/internal/sysfs"
	"golang.org/x/sys/unix"
)

// Defaults for the zero System.
const (
	DefaultSysfs  = sysfs.Default
	DefaultMounts = "/proc/self/mounts"
	DefaultRunDir = statefile.DefaultDir
)

// System reads and writes one machine's hugepage settings. The zero
// value works on the running kernel.
type System struct {
	// Sysfs is the sysfs mount point; "/sys" when empty.
	Sysfs string
	// Mounts is the mount table, in /proc/mounts format; /proc/self/mounts
	// when empty.
	Mounts string
	// RunDir holds the state files; statefile.DefaultDir when empty.
	RunDir string
	// Mount mounts hugetlbfs of a page size on a directory; mount(2) when nil.
	Mount func(dir string, sizeKB int) error
	// Unmount unmounts a directory; umount(2) when nil.
	Unmount func(dir string) error
	// WriteFile writes a sysfs attribute; nil writes the file, which must
	// exist. Tests put a fake kernel here.
	WriteFile func(path string, data []byte) error
}

// Request is what the EAL needs.
type Request struct {
	Pages  int    // free pages needed
	SizeKB int    // page size: 2048 or 1048576
	Mount  string // hugetlbfs mount point of that size
}

// State is what Reserve changed: what Release gives back.
type State struct {
	Port   string `json:"port"`
	SizeKB int    `json:"size_kb"`
	// Added is how many pages Reserve added to nr_hugepages.
	Added int `json:"added"`
	// Mounted is the hugetlbfs mount point Reserve mounted; "" if it
	// was mounted already.
	Mounted string `json:"mounted,omitempty"`
	// CreatedDir is set when Reserve created the mount point.
	CreatedDir bool      `json:"created_dir,omitempty"`
	Time       time.Time `json:"time"`
}

func (s *System) sysfs() string { return sysfs.Root(s.Sysfs) }

func (s *System) mounts() string {
	if s.Mounts == "" {
		return DefaultMounts
	}
	return s.Mounts
}

// StatePath returns the state file of a port.
func (s *System) StatePath(port string) string { return statefile.Path(s.RunDir, port, "hugepages") }

// sizeName writes a page size as people do: 2M, 1G.
func sizeName(kb int) string {
	if kb >= 1<<20 && kb%(1<<20) == 0 {
		return strconv.Itoa(kb>>20) + "G"
	}
	if kb >= 1<<10 && kb%(1<<10) == 0 {
		return strconv.Itoa(kb>>10) + "M"
	}
	return strconv.Itoa(kb) + "k"
}

func (s *System) sizeDir(kb int) string {
	return filepath.Join(s.sysfs(), "kernel", "mm", "hugepages", fmt.Sprintf("hugepages-%dkB", kb))
}

// Counts are one page size's counters.
type Counts struct {
	Total, Free int // nr_hugepages, free_hugepages
	// Resv are free pages promised to mappings already made
	// (resv_hugepages): not available to a new one.
	Resv int
}

// Available is how many pages a new mapping can get.
func (c Counts) Available() int { return max(c.Free-c.Resv, 0) }

// Counts reads a page size's counters.
func (s *System) Counts(sizeKB int) (Counts, error) {
	dir := s.sizeDir(sizeKB)
	var c Counts
	var err error
	if c.Total, err = readInt(filepath.Join(dir, "nr_hugepages")); err != nil {
		return c, err
	}
	if c.Free, err = readInt(filepath.Join(dir, "free_hugepages")); err != nil {
		return c, err
	}
	c.Resv, err = readInt(filepath.Join(dir, "resv_hugepages"))
	return c, err
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// setTotal writes nr_hugepages and returns what the kernel made of it.
func (s *System) setTotal(sizeKB, n int) (int, error) {
	path := filepath.Join(s.sizeDir(sizeKB), "nr_hugepages")
	w := s.WriteFile
	if w == nil {
		w = sysfs.Write
	}
	if err := w(path, []byte(strconv.Itoa(n))); err != nil {
		return 0, fmt.Errorf("write %d to %s: %w", n, path, err)
	}
	return readInt(path)
}

// mountPoint is one hugetlbfs-or-not mount from the mount table.
type mountPoint struct {
	fstype string
	sizeKB int // hugetlbfs pagesize=; 0 when not given
}

// lookup returns what is mounted on dir (the top of a stack of mounts),
// or nil.
func (s *System) lookup(dir string) (*mountPoint, error) {
	f, err := os.Open(s.mounts())
	if err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	defer f.Close()
	var found *mountPoint
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || unescape(fields[1]) != dir {
			continue
		}
		m := &mountPoint{fstype: fields[2]}
		for _, opt := range strings.Split(fields[3], ",") {
			if v, ok := strings.CutPrefix(opt, "pagesize="); ok {
				m.sizeKB = parseSize(v)
			}
		}
		found = m
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	return found, nil
}

// unescape undoes the mount table's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseSize reads a pagesize= value (2M, 1024M, 1G, 2048k) in kB; 0 if
// it cannot.
func parseSize(v string) int {
	if v == "" {
		return 0
	}
	mult := 1
	switch v[len(v)-1] {
	case 'k', 'K':
		mult = 1
	case 'm', 'M':
		mult = 1 << 10
	case 'g', 'G':
		mult = 1 << 20
	default:
		n, err := strconv.Atoi(v) // bytes
		if err != nil {
			return 0
		}
		return n >> 10
	}
	n, err := strconv.Atoi(v[:len(v)-1])
	if err != nil {
		return 0
	}
	return n * mult
}

// Check reports, reading only, whether r can be provided: the kernel
// has pages of that size, and the mount point holds hugetlbfs of that
// size or nothing.
func (s *System) Check(r Request) error {
	if _, err := os.Stat(s.sizeDir(r.SizeKB)); err != nil {
		var have []string
		dirs, _ := filepath.Glob(filepath.Join(s.sysfs(), "kernel", "mm", "hugepages", "hugepages-*kB"))
		for _, d := range dirs {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(d), "hugepages-"), "kB"))
			have = append(have, sizeName(kb))
		}
		if len(have) == 0 {
			return fmt.Errorf("this kernel has no hugepages (%s does not exist)", s.sizeDir(r.SizeKB))
		}
		return fmt.Errorf("this kernel has no %s hugepages (%s); it has %s", sizeName(r.SizeKB), s.sizeDir(r.SizeKB), strings.Join(have, ", "))
	}
	m, err := s.lookup(r.Mount)
	if err != nil {
		return err
	}
	switch {
	case m == nil:
	case m.fstype != "hugetlbfs":
		return fmt.Errorf("%s is a %s mount, not hugetlbfs", r.Mount, m.fstype)
	case m.sizeKB != 0 && m.sizeKB != r.SizeKB:
		return fmt.Errorf("%s is hugetlbfs of %s pages, not %s: give eal.hugepages.mount another directory", r.Mount, sizeName(m.sizeKB), sizeName(r.SizeKB))
	}
	return nil
}

// Reserve makes r.Pages pages of r.SizeKB free, adding to the kernel's
// reservation what is missing, and mounts hugetlbfs at r.Mount if
// nothing is mounted there. What it added is recorded in the port's
// state file, together with what an earlier run that did not release
// recorded. On failure it gives back what it added.
func (s *System) Reserve(port string, r Request) (_ *State, err error) {
	if err := s.Check(r); err != nil {
		return nil, fmt.Errorf("hugepages: %w", err)
	}
	statePath := s.StatePath(port)
	st, err := s.ReadState(statePath)
	if err != nil {
		return nil, err
	}
	if st == nil || st.SizeKB != r.SizeKB {
		if st != nil {
			// A crashed run of another size: give its pages back first.
			if _, err := s.Release(statePath); err != nil {
				return nil, err
			}
		}
		st = &State{Port: port, SizeKB: r.SizeKB}
	}
	st.Time = time.Now().UTC()
	var added int
	var mounted string
	var created bool
	defer func() {
		if err == nil {
			return
		}
		// Give back this call's part; an earlier run's stays recorded.
		if mounted != "" {
			s.unmount(mounted)
			if created {
				os.Remove(mounted)
			}
		}
		if added > 0 {
			if c, cerr := s.Counts(r.SizeKB); cerr == nil {
				s.setTotal(r.SizeKB, max(c.Total-added, 0))
			}
		}
	}()

	c, err := s.Counts(r.SizeKB)
	if err != nil {
		return nil, fmt.Errorf("hugepages: %w", err)
	}
	if need := r.Pages - c.Available(); need > 0 {
		got, err := s.setTotal(r.SizeKB, c.Total+need)
		if err != nil {
			return nil, fmt.Errorf("hugepages: %w", err)
		}
		added = max(got-c.Total, 0)
		if added < need {
			return nil, fmt.Errorf("hugepages: %d free %s pages needed, %d free: the kernel granted %d of the %d more asked for "+
				"(memory too fragmented or too small: reserve them at boot with hugepages=%d on the kernel command line, or lower eal.hugepages.pages)",
				r.Pages, sizeName(r.SizeKB), c.Available(), added, need, c.Total+need)
		}
	}

	m, err := s.lookup(r.Mount)
	if err != nil {
		return nil, fmt.Errorf("hugepages: %w", err)
	}
	if m == nil {
		if _, err := os.Stat(r.Mount); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(r.Mount, 0o755); err != nil {
				return nil, fmt.Errorf("hugepages: %w", err)
			}
			created = true
		}
		if err := s.mount(r.Mount, r.SizeKB); err != nil {
			if created {
				os.Remove(r.Mount)
			}
			return nil, fmt.Errorf("hugepages: mount hugetlbfs (pagesize=%s) on %s: %w", sizeName(r.SizeKB), r.Mount, err)
		}
		mounted = r.Mount
	}

	st.Added += added
	if mounted != "" {
		st.Mounted, st.CreatedDir = mounted, created
	}
	if st.Added > 0 || st.Mounted != "" {
		if err := s.writeState(statePath, st); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (s *System) mount(dir string, sizeKB int) error {
	if s.Mount != nil {
		return s.Mount(dir, sizeKB)
	}
	return unix.Mount("nodev", dir, "hugetlbfs", 0, "pagesize="+sizeName(sizeKB))
}

func (s *System) unmount(dir string) error {
	if s.Unmount != nil {
		return s.Unmount(dir)
	}
	return unix.Unmount(dir, 0)
}

// Release gives back what a state file records: it unmounts the mount
// Reserve made if it is still there (in this mount namespace), removes
// the directory it created, lowers nr_hugepages by the pages it added,
// and removes the file. With no state file it does nothing and returns
// nil, nil.
func (s *System) Release(statePath string) (*State, error) {
	st, err := s.ReadState(statePath)
	if err != nil || st == nil {
		return nil, err
	}
	var errs []error
	if st.Mounted != "" {
		m, err := s.lookup(st.Mounted)
		switch {
		case err != nil:
			errs = append(errs, err)
		case m != nil && m.fstype == "hugetlbfs":
			if err := s.unmount(st.Mounted); err != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", st.Mounted, err))
			}
		}
		if st.CreatedDir && len(errs) == 0 {
			// Only if empty: not a mount point any more, nothing in it.
			if err := os.Remove(st.Mounted); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove %s: %w", st.Mounted, err))
			}
		}
	}
	if st.Added > 0 {
		c, err := s.Counts(st.SizeKB)
		if err == nil {
			want := max(c.Total-st.Added, 0)
			var got int
			if got, err = s.setTotal(st.SizeKB, want); err == nil && got > want {
				// Pages still in use stay, as surplus pages the kernel
				// frees when their user lets them go: in the af_xdp
				// mode, the mbuf pool that AF_XDP's UMEM keeps pinned
				// until this process exits. Given back all the same.
				var surplus int
				if surplus, err = readInt(filepath.Join(s.sizeDir(st.SizeKB), "surplus_hugepages")); err == nil && got-surplus > want {
					err = fmt.Errorf("nr_hugepages of %s is %d (%d surplus) after writing %d: pages still in use", sizeName(st.SizeKB), got, surplus, want)
				}
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("hugepages: give back %d %s pages and mount %q (state in %s): %w", st.Added, sizeName(st.SizeKB), st.Mounted, statePath, err)
	}
	if err := os.Remove(statePath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("hugepages: %w", err)
	}
	return st, nil
}

// ReadState reads a state file; nil, nil when it does not exist.
func (s *System) ReadState(path string) (*State, error) {
	var st State
	if ok, err := statefile.Read(path, &st); !ok || err != nil {
		if err != nil {
			err = fmt.Errorf("hugepages: %w", err)
		}
		return nil, err
	}
	if st.SizeKB <= 0 || st.Added < 0 || (st.Mounted != "" && !filepath.IsAbs(st.Mounted)) {
		return nil, fmt.Errorf("hugepages: state file %s: size_kb %d, added %d, mounted %q: not what Reserve writes", path, st.SizeKB, st.Added, st.Mounted)
	}
	return &st, nil
}

func (s *System) writeState(path string, st *State) error {
	if err := statefile.Write(path, st); err != nil {
		return fmt.Errorf("hugepages: %w", err)
	}
	return nil
}
