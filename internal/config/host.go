package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
)

// SamplePcapToken in port.device stands for the sample capture embedded in
// the binary.
const SamplePcapToken = "{{sample_pcap}}"

// CheckHost checks what the configuration needs from the machine it runs
// on, each problem with its line: lcores among the CPUs this process may
// run on, capture files net_pcap can replay, interfaces and PCI devices
// that exist, hugepages when the EAL uses them. DPDK would refuse all of
// these at start, some with 80 lines of usage text, one by draining the
// pool. Parse does not call it: a configuration may be written for
// another machine. `run` and `check-config` do.
func (c *Config) CheckHost() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, c.problem(path, fmt.Sprintf(format, args...)))
	}
	c.checkLcoresHost(bad)
	if c.Port.IsAFXDP() {
		c.checkAFXDPHost(bad)
	} else {
		c.checkDeviceHost(bad)
	}
	c.checkHugepagesHost(bad)
	return errors.Join(errs...)
}

// problem formats a validation error with the line of path.
func (c *Config) problem(path, msg string) error {
	if l := c.Line(path); l > 0 {
		return fmt.Errorf("line %d: %s: %s", l, path, msg)
	}
	return fmt.Errorf("%s: %s", path, msg)
}

// allowedCPUs returns the CPUs the EAL may pin lcores to; tests replace
// it. That is the machine's online CPUs within the process's cgroup
// cpuset, not the calling thread's affinity: a process started from a
// pinned thread (by a DPDK program, or taskset) inherits a narrower mask,
// which the EAL widens again when it pins its lcores.
var allowedCPUs = func() (unix.CPUSet, error) {
	online, err := readCPUList("/sys/devices/system/cpu/online")
	if err != nil {
		var s unix.CPUSet
		err := unix.SchedGetaffinity(0, &s)
		return s, err
	}
	if cg, err := cgroupCPUs(); err == nil {
		for i := 0; i < MaxLcores; i++ {
			if !cg.IsSet(i) {
				online.Clear(i)
			}
		}
	}
	return online, nil
}

// cgroupCPUs reads the effective cpuset of the process's cgroup (v2, or
// v1's cpuset controller).
func cgroupCPUs() (unix.CPUSet, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return unix.CPUSet{}, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			if s, err := readCPUList(filepath.Join("/sys/fs/cgroup", parts[2], "cpuset.cpus.effective")); err == nil {
				return s, nil
			}
		case parts[1] == "cpuset":
			if s, err := readCPUList(filepath.Join("/sys/fs/cgroup/cpuset", parts[2], "cpuset.effective_cpus")); err == nil {
				return s, nil
			}
		}
	}
	return unix.CPUSet{}, errors.New("config: no cgroup cpuset")
}

// readCPUList reads a kernel CPU list file ("0-3,8").
func readCPUList(path string) (unix.CPUSet, error) {
	var s unix.CPUSet
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	cpus, err := ParseLcores(strings.TrimSpace(string(b)))
	if err != nil {
		return s, fmt.Errorf("config: %s: %w", path, err)
	}
	for _, c := range cpus {
		s.Set(c)
	}
	return s, nil
}

// checkLcoresHost refuses lcores outside the process's CPU affinity: EAL
// lcore IDs given with -l are CPU numbers.
// eal.runtime_cpus gets the same check.
func (c *Config) checkLcoresHost(bad func(path, format string, args ...any)) {
	checkCPUsHost("eal.lcores", c.EAL.Lcores, bad)
	if c.EAL.RuntimeCPUs != "" {
		checkCPUsHost("eal.runtime_cpus", c.EAL.RuntimeCPUs, bad)
	}
}

func checkCPUsHost(path, list string, bad func(path, format string, args ...any)) {
	lcores, err := ParseLcores(list)
	if err != nil {
		return // Validate reports it
	}
	cpus, err := allowedCPUs()
	if err != nil {
		return // cannot tell; DPDK will
	}
	var missing, avail []int
	for _, l := range lcores {
		if !cpus.IsSet(l) {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return
	}
	for i := 0; i < MaxLcores; i++ {
		if cpus.IsSet(i) {
			avail = append(avail, i)
		}
	}
	what := "lcore " + formatLcores(missing) + " is not a CPU"
	if len(missing) > 1 {
		what = "lcores " + formatLcores(missing) + " are not CPUs"
	}
	bad(path, "%s this process may run on; available CPUs on this machine: %s", what, formatLcores(avail))
}

// formatLcores writes sorted lcores as an EAL list: "0-3,8".
func formatLcores(ls []int) string {
	var b strings.Builder
	for i := 0; i < len(ls); {
		j := i
		for j+1 < len(ls) && ls[j+1] == ls[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ls[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(ls[j]))
		}
		i = j + 1
	}
	return b.String()
}

// checkDeviceHost checks that the PCI device or the files and interfaces
// a vdev names exist.
func (c *Config) checkDeviceHost(bad func(path, format string, args ...any)) {
	dev, err := devargs.Parse(c.Port.Device)
	if err != nil {
		return // Validate reports it
	}
	if dev.PCI {
		if _, err := os.Stat(filepath.Join("/sys/bus/pci/devices", dev.Name)); err != nil {
			bad("port.device", "PCI device %s does not exist on this machine", dev.Name)
		}
		return
	}
	ifaceKeys := []string{"iface"}
	if strings.HasPrefix(dev.Name, "net_pcap") {
		ifaceKeys = []string{"iface", "rx_iface", "rx_iface_in", "tx_iface"}
		c.checkPcapFiles(&dev, bad)
	} else if !strings.HasPrefix(dev.Name, "net_af_packet") {
		return
	}
	for _, k := range ifaceKeys {
		for _, ifname := range dev.Values(k) {
			if _, err := os.Stat(filepath.Join("/sys/class/net", ifname)); err != nil {
				bad("port.device", "%s=%s: no such network interface on this machine", k, ifname)
			}
		}
	}
}

// checkPcapFiles checks net_pcap's capture files: every rx_pcap must be a
// capture, and with infinite_rx it must hold a frame: net_pcap (DPDK
// 22.11) replaying an empty capture takes every mbuf of the pool.
func (c *Config) checkPcapFiles(dev *devargs.Device, bad func(path, format string, args ...any)) {
	infinite := false
	for _, v := range dev.Values("infinite_rx") {
		n, err := strconv.Atoi(v)
		infinite = infinite || (err == nil && n > 0)
	}
	for _, f := range dev.Values("rx_pcap") {
		if strings.Contains(f, SamplePcapToken) {
			continue // the embedded capture: written at start, has frames
		}
		frames, err := captureHasFrames(f)
		switch {
		case err != nil:
			bad("port.device", "rx_pcap=%s: %v", f, err)
		case !frames && infinite:
			bad("port.device", "rx_pcap=%s holds no frames: net_pcap with infinite_rx would take every mbuf of the pool replaying it; give it a capture with frames or drop infinite_rx", f)
		}
	}
	for _, f := range dev.Values("tx_pcap") {
		if dir := filepath.Dir(f); !isDir(dir) {
			bad("port.device", "tx_pcap=%s: directory %s does not exist", f, dir)
		}
	}
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// checkHugepagesHost checks, when the EAL uses hugepages, that hugetlbfs
// is mounted (at eal.huge_dir when set) and that this machine reserves at
// least eal.memory_mb of hugepages, which the EAL takes at start. With
// eal.hugepages the daemon provides them: it checks that it can.
func (c *Config) checkHugepagesHost(bad func(path, format string, args ...any)) {
	if c.EAL.NoHuge {
		return
	}
	if h := c.EAL.Hugepages; h != nil {
		// The daemon reserves and mounts them at start: check only that
		// it can.
		if err := (&hugepages.System{}).Check(h.Request()); err != nil {
			bad("eal.hugepages", "%v", err)
		}
		return
	}
	if d := c.EAL.HugeDir; d != "" {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err != nil || st.Type != unix.HUGETLBFS_MAGIC {
			bad("eal.huge_dir", "%s is not a hugetlbfs mount on this machine", d)
		}
	} else if !hugetlbfsMounted() {
		bad("eal.no_huge", "the EAL uses hugepages but no hugetlbfs is mounted on this machine; mount one (eal.huge_dir) or set eal.no_huge: true")
	}
	if mb, ok := reservedHugepagesMB(); ok && mb < c.EAL.MemoryMB {
		bad("eal.memory_mb", "%d MB of hugepages needed at start, this machine reserves %d MB (/sys/kernel/mm/hugepages/*/nr_hugepages); reserve more or set eal.no_huge: true", c.EAL.MemoryMB, mb)
	}
}

func hugetlbfsMounted() bool {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return true // cannot tell; DPDK will
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "hugetlbfs" {
			return true
		}
	}
	return false
}

// reservedHugepagesMB sums the hugepages of every size the kernel has
// reserved, in use or not.
func reservedHugepagesMB() (int, bool) {
	dirs, err := filepath.Glob("/sys/kernel/mm/hugepages/hugepages-*kB")
	if err != nil || len(dirs) == 0 {
		return 0, false
	}
	kb := 0
	for _, d := range dirs {
		size, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(d), "hugepages-"), "kB"))
		if err != nil {
			return 0, false
		}
		b, err := os.ReadFile(filepath.Join(d, "nr_hugepages"))
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0, false
		}
		kb += n * size
	}
	return kb >> 10, true
}
