package pmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
)

// ErrEALInitialized is returned by InitEAL when the EAL is already running:
// DPDK allows one EAL per process.
var ErrEALInitialized = errors.New("pmd: EAL already initialized in this process")

// EALConfig holds what the EAL needs to start.
type EALConfig struct {
	Lcores     string // EAL -l list, e.g. "0-1"; a secondary's: an --lcores map, e.g. "0@(0-3)"
	MainLcore  int
	MemoryMB   int  // -m; with hugepages the amount reserved up front
	NoHuge     bool // run from anonymous memory instead of hugepages
	HugeDir    string
	FilePrefix string   // keeps runtime files apart from other DPDK processes
	Devices    []string // PCI addresses or vdev devargs, in port order
	// HugeUnlink removes each hugepage file once mapped, so the pages go
	// back to the kernel's free pool when the process ends, killed
	// included, and whoever reserved them can give them back; files left
	// in a shared hugetlbfs would keep them in use. No secondary process
	// can attach to the memory then.
	HugeUnlink bool
	// Secondary joins the primary process running with FilePrefix
	// (--proc-type=secondary): its memory, mempools, rings and ports.
	// MemoryMB, NoHuge, HugeDir, HugeUnlink and Devices are the
	// primary's and are not given.
	Secondary bool
	ExtraArgs []string
}

// Args renders the EAL command line. It adds --no-pci when no device is a
// PCI address so that a vdev-only process never scans (or grabs) the
// machine's NICs.
func (c EALConfig) Args() ([]string, error) {
	if c.Lcores == "" {
		return nil, errors.New("pmd: EAL lcores not set")
	}
	if c.FilePrefix == "" {
		return nil, errors.New("pmd: EAL file prefix not set: each DPDK process needs its own")
	}
	if c.Secondary {
		// Lcores is an --lcores map, which can leave the thread
		// unpinned; no PCI scan: the secondary gets the primary's
		// devices from it.
		args := []string{"cephdpdk-service", "--lcores", c.Lcores, "--main-lcore", strconv.Itoa(c.MainLcore),
			"--file-prefix", c.FilePrefix, "--proc-type=secondary", "--no-pci"}
		return append(args, c.ExtraArgs...), nil
	}
	args := []string{"cephdpdkd",
		"-l", c.Lcores,
		"--main-lcore", strconv.Itoa(c.MainLcore),
		"--file-prefix", c.FilePrefix,
	}
	if c.MemoryMB > 0 {
		args = append(args, "-m", strconv.Itoa(c.MemoryMB))
	}
	if c.NoHuge {
		// Anonymous memory instead of hugepages: no secondary processes.
		args = append(args, "--no-huge")
	} else {
		if c.HugeDir != "" {
			args = append(args, "--huge-dir", c.HugeDir)
		}
		if c.HugeUnlink {
			args = append(args, "--huge-unlink")
		}
	}
	pci := false
	for _, d := range c.Devices {
		if devargs.IsPCI(d) {
			pci = true
			args = append(args, "-a", d)
		} else {
			args = append(args, "--vdev", d)
		}
	}
	if !pci {
		args = append(args, "--no-pci")
	}
	args = append(args, c.ExtraArgs...)
	return args, nil
}

// DeviceName returns the name DPDK registers the device of the device
// string dev under, which OpenPort takes: devargs.Name.
func DeviceName(dev string) string { return devargs.Name(dev) }

// PrefixInUseError is returned by InitEAL when another DPDK primary process
// runs with the same file prefix. DPDK itself fails such a start without an
// error code.
type PrefixInUseError struct {
	Prefix  string
	Config  string // the runtime config file the other process has locked
	PID     int    // 0 when the holder is not visible from our PID namespace
	Command string // the holder's command line, when readable
}

func (e *PrefixInUseError) Error() string {
	who := "another process (not visible from this PID namespace)"
	if e.PID > 0 {
		who = "pid " + strconv.Itoa(e.PID)
		if e.Command != "" {
			who += fmt.Sprintf(" (%s)", e.Command)
		}
	}
	return fmt.Sprintf("pmd: EAL file prefix %q is in use by %s, which holds the lock on %s: stop it, or give this process another file prefix",
		e.Prefix, who, e.Config)
}

// RuntimeDir returns the directory where a DPDK primary process with the
// given file prefix keeps its runtime files (eal_create_runtime_dir).
func RuntimeDir(prefix string) string {
	return runtimeDir(os.Getuid(), os.Getenv, prefix)
}

func runtimeDir(uid int, getenv func(string) string, prefix string) string {
	dir := getenv("RUNTIME_DIRECTORY") // systemd's RuntimeDirectory=
	if dir == "" {
		switch {
		case uid == 0:
			dir = "/var/run"
		case getenv("XDG_RUNTIME_DIR") != "":
			dir = getenv("XDG_RUNTIME_DIR")
		default:
			dir = "/tmp"
		}
	}
	return filepath.Join(dir, "dpdk", prefix)
}

// PrimaryPID returns the pid of the DPDK primary process running with
// file prefix, which holds the lock on its runtime config: unlike a pid
// file, the lock goes with the process. ok is false when none runs (or
// it runs with --in-memory or --no-shconf, which keep no runtime config).
func PrimaryPID(prefix string) (pid int, ok bool) {
	return configLockHolder(filepath.Join(RuntimeDir(prefix), "config"))
}

// ErrNoPrimary is returned by InitEAL for a secondary when no primary
// process runs with its file prefix.
var ErrNoPrimary = errors.New("pmd: no DPDK primary process runs with this file prefix")

// checkPrimary returns an error wrapping ErrNoPrimary unless a primary
// holds the runtime config of cfg's file prefix: DPDK would fail later,
// less clearly.
func checkPrimary(cfg EALConfig) error {
	if _, ok := PrimaryPID(cfg.FilePrefix); !ok {
		return fmt.Errorf("%w: %q (no lock on %s)", ErrNoPrimary, cfg.FilePrefix, filepath.Join(RuntimeDir(cfg.FilePrefix), "config"))
	}
	return nil
}

// checkPrefixFree returns a *PrefixInUseError when a running primary
// process holds the runtime config of cfg's file prefix. It must not run
// while this process has an EAL: closing the file would drop our own lock.
func checkPrefixFree(cfg EALConfig) error {
	if slices.Contains(cfg.ExtraArgs, "--in-memory") || slices.Contains(cfg.ExtraArgs, "--no-shconf") {
		return nil // no shared config: nothing to collide on
	}
	path := filepath.Join(RuntimeDir(cfg.FilePrefix), "config")
	pid, locked := configLockHolder(path)
	if !locked {
		return nil
	}
	return &PrefixInUseError{Prefix: cfg.FilePrefix, Config: path, PID: pid, Command: processCommand(pid)}
}

// configLockHolder reports whether a process holds DPDK's write lock on a
// runtime config file (rte_eal_config_create locks part of it), and its
// PID. A file that cannot be read is left for DPDK to report.
func configLockHolder(path string) (pid int, locked bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart} // Len 0: the whole file
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil || lk.Type == unix.F_UNLCK {
		return 0, false
	}
	return int(lk.Pid), true
}

// processCommand returns pid's command line from /proc, shortened to one
// readable line, or "" when it cannot be read.
func processCommand(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	s := string(bytes.Join(bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}), []byte{' '}))
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
