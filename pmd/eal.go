package pmd

import (
	"errors"
	"strconv"
	"strings"
)

// ErrEALInitialized is returned by InitEAL when the EAL is already running:
// DPDK allows one EAL per process.
var ErrEALInitialized = errors.New("pmd: EAL already initialized in this process")

// EALConfig holds what the EAL needs to start.
type EALConfig struct {
	Lcores     string // EAL -l list, e.g. "0-1"
	MainLcore  int
	MemoryMB   int  // -m; with hugepages the amount reserved up front
	NoHuge     bool // run from anonymous memory instead of hugepages
	HugeDir    string
	FilePrefix string   // keeps runtime files apart from other DPDK processes
	Devices    []string // PCI addresses or vdev devargs, in port order
	ExtraArgs  []string
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
	} else if c.HugeDir != "" {
		args = append(args, "--huge-dir", c.HugeDir)
	}
	pci := false
	for _, d := range c.Devices {
		if isPCI(d) {
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

// isPCI reports whether dev looks like a PCI address (DDDD:BB:DD.F or BB:DD.F).
func isPCI(dev string) bool {
	name, _, _ := strings.Cut(dev, ",")
	parts := strings.Split(name, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	last := parts[len(parts)-1]
	dev2, fn, ok := strings.Cut(last, ".")
	if !ok || len(dev2) != 2 || len(fn) != 1 {
		return false
	}
	for _, p := range append(parts[:len(parts)-1], dev2, fn) {
		if _, err := strconv.ParseUint(p, 16, 16); err != nil {
			return false
		}
	}
	return true
}

// DeviceName returns the name DPDK registers a device under: the PCI address
// or the vdev name before its first comma.
func DeviceName(dev string) string {
	name, _, _ := strings.Cut(dev, ",")
	return name
}
