// Package nicbind moves a PCI network device from its kernel driver to a
// DPDK driver (vfio-pci or uio_pci_generic) through sysfs, as
// dpdk-devbind.py does, and puts it back.
//
// Before it changes anything, Bind records the device's original driver,
// interface name, link state and network (its addresses and routes, and
// those the daemon puts on the exception path instead) in a state file;
// Restore reads that file, rebinds the original driver, waits for the
// interface to come back, gives it its addresses and routes, and removes
// the file. A bind that stopped half-way (a crash, a failed write) is
// undone by the same Restore.
//
// Restore leaves a record of the interface as it left it (a "restored"
// state file): the next Bind takes an interface that carries only what
// that record lists, so that a restart after a crash (systemd's
// ExecStopPost restores, then the daemon starts again) is not refused as
// "in use". Anything else on the interface still is.
//
// Every path is under System.Sysfs, so tests run against a fake tree
// (see package nicbindtest).
package nicbind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/internal/statefile"
	"github.com/cephdpdkd/cephdpdkd/internal/sysfs"
)

// DPDK drivers Bind accepts.
const (
	VFIO = "vfio-pci"
	UIO  = "uio_pci_generic"
)

// Defaults for the zero System.
const (
	DefaultSysfs   = sysfs.Default
	DefaultRunDir  = statefile.DefaultDir
	DefaultTimeout = 10 * time.Second
	// DefaultAppearTimeout is well within the unit's TimeoutStartSec.
	DefaultAppearTimeout = 60 * time.Second
)

// iffUp is IFF_UP in /sys/class/net/<if>/flags.
const iffUp = 0x1

// Activity is what an interface still carries: the reasons it is in use.
type Activity struct {
	Addresses []string `json:"addresses,omitempty"` // e.g. "10.0.0.5/24"
	Routes    []string `json:"routes,omitempty"`    // e.g. "10.0.0.0/24", "default via 10.0.0.1"
}

// System reads and writes one sysfs tree. The zero value works on the
// running kernel: /sys, /run/cephdpdkd, netlink and modprobe.
type System struct {
	// Sysfs is the sysfs mount point; "/sys" when empty.
	Sysfs string
	// RunDir holds the state files; statefile.DefaultDir when empty.
	RunDir string
	// Activity returns an interface's addresses and routes; netlink when nil.
	Activity func(ifname string) (Activity, error)
	// LoadModule loads a kernel module; modprobe when nil.
	LoadModule func(name string) error
	// SetLinkUp brings an interface up after Restore; netlink when nil.
	SetLinkUp func(ifname string) error
	// Network reads an interface's addresses and routes at Bind;
	// kernelif.Read when nil.
	Network func(ifname string) (kernelif.Network, error)
	// SetNetwork gives an interface addresses and routes and sets it up
	// after Restore; kernelif.Apply when nil.
	SetNetwork func(ifname string, n kernelif.Network) error
	// WriteFile writes one sysfs attribute; nil writes the file, which
	// must exist. Tests put a fake kernel here.
	WriteFile func(path string, data []byte) error
	// Timeout bounds the wait for a restored interface; DefaultTimeout
	// when zero.
	Timeout time.Duration
	// AppearTimeout bounds Bind's wait for Request.Interface to exist:
	// at boot the daemon may start before udev has named the NIC.
	// DefaultAppearTimeout when zero.
	AppearTimeout time.Duration
}

// Request says which device to bind and to what.
type Request struct {
	Driver    string // VFIO or UIO
	Interface string // the device's kernel interface, or
	PCI       string // its PCI address
	// Force binds an interface that is up or has addresses or routes.
	Force bool
	// Network is what the daemon puts on the exception path in the
	// NIC's place (kernel.addresses and kernel.routes): Restore puts it
	// on the NIC, with what the NIC had at Bind, so that a stop leaves
	// the node reachable.
	Network kernelif.Network
}

// State is the content of a state file: what Restore puts back.
type State struct {
	Port       string `json:"port"`
	PCI        string `json:"pci"`
	Driver     string `json:"driver"`          // the DPDK driver bound
	OrigDriver string `json:"original_driver"` // "" if it had none
	Interface  string `json:"interface,omitempty"`
	OperState  string `json:"operstate,omitempty"`
	Up         bool   `json:"up"` // IFF_UP was set
	// Network is what Restore puts on the interface: its own addresses
	// and routes at bind, and the request's.
	Network    kernelif.Network `json:"network,omitempty"`
	IOMMUGroup string           `json:"iommu_group,omitempty"`
	NoIOMMU    bool             `json:"noiommu,omitempty"`
	Time       time.Time        `json:"time"`
}

func (s *System) root() string { return sysfs.Root(s.Sysfs) }

func (s *System) path(elem ...string) string {
	return filepath.Join(append([]string{s.root()}, elem...)...)
}

func (s *System) devPath(addr string, elem ...string) string {
	return s.path(append([]string{"bus", "pci", "devices", addr}, elem...)...)
}

func (s *System) write(path, data string) error {
	w := s.WriteFile
	if w == nil {
		w = sysfs.Write
	}
	if err := w(path, []byte(data)); err != nil {
		return fmt.Errorf("write %q to %s: %w", strings.TrimSpace(data), path, err)
	}
	return nil
}

// StatePath returns the state file of a port.
func (s *System) StatePath(port string) string { return statefile.Path(s.RunDir, port, "") }

// Restored is the record Restore leaves of the interface it gave back:
// what Bind may find on it without calling it in use.
type Restored struct {
	Port      string    `json:"port"`
	PCI       string    `json:"pci"`
	Interface string    `json:"interface"`
	Up        bool      `json:"up"`
	Activity  Activity  `json:"activity"`
	Time      time.Time `json:"time"`
}

// restoredKind names the Restored records: port.restored.json.
const restoredKind = "restored"

// RestoredPath returns the file of a port's Restored record.
func (s *System) RestoredPath(port string) string {
	return statefile.Path(s.RunDir, port, restoredKind)
}

// isPCIName reports whether name is a PCI address as sysfs writes it,
// which is also a safe path element.
func isPCIName(name string) bool {
	c, ok := devargs.CanonicalPCI(name)
	return ok && c == name
}

// PCIOf returns the PCI address of a network interface, from the
// /sys/class/net/<if>/device link.
func (s *System) PCIOf(ifname string) (string, error) {
	if ifname == "" || strings.ContainsAny(ifname, "/") || ifname == "." || ifname == ".." {
		return "", fmt.Errorf("interface %q: not an interface name", ifname)
	}
	dir := s.path("class", "net", ifname)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("interface %s: no such interface (%s)", ifname, dir)
	}
	dev, err := filepath.EvalSymlinks(filepath.Join(dir, "device"))
	if err != nil {
		return "", fmt.Errorf("interface %s is not backed by a device (a virtual interface?): %w", ifname, err)
	}
	// A virtio-net interface's device is virtioN, under the PCI device.
	addr := filepath.Base(dev)
	if !isPCIName(addr) {
		addr = filepath.Base(filepath.Dir(dev))
	}
	if !isPCIName(addr) {
		return "", fmt.Errorf("interface %s: device %s is not a PCI device", ifname, filepath.Base(dev))
	}
	if _, err := os.Stat(s.devPath(addr)); err != nil {
		return "", fmt.Errorf("interface %s: PCI device %s: %w", ifname, addr, err)
	}
	return addr, nil
}

// Interfaces returns the kernel network interfaces of a PCI device: in
// its net directory, or, for virtio-net, its virtioN device's.
func (s *System) Interfaces(addr string) []string {
	var names []string
	for _, pattern := range []string{s.devPath(addr, "net", "*"), s.devPath(addr, "virtio*", "net", "*")} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			names = append(names, filepath.Base(p))
		}
	}
	return names
}

// DriverOf returns the driver a PCI device is bound to; "" for none.
func (s *System) DriverOf(addr string) (string, error) {
	link, err := os.Readlink(s.devPath(addr, "driver"))
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(s.devPath(addr)); err != nil {
			return "", fmt.Errorf("PCI device %s: %w", addr, err)
		}
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("PCI device %s: driver: %w", addr, err)
	}
	return filepath.Base(link), nil
}

// readAttr returns a sysfs attribute without its trailing newline; "" if absent.
func readAttr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// linkState returns an interface's operstate and whether IFF_UP is set.
func (s *System) linkState(ifname string) (oper string, up bool) {
	oper = readAttr(s.path("class", "net", ifname, "operstate"))
	flags, err := strconv.ParseUint(strings.TrimPrefix(readAttr(s.path("class", "net", ifname, "flags")), "0x"), 16, 32)
	up = err == nil && flags&iffUp != 0 || oper == "up"
	return oper, up
}

// iommu reports how vfio-pci can take a device: its IOMMU group, or the
// vfio no-IOMMU mode.
func (s *System) iommu(addr string) (group string, noiommu bool, err error) {
	if link, err := os.Readlink(s.devPath(addr, "iommu_group")); err == nil {
		return filepath.Base(link), false, nil
	}
	switch readAttr(s.path("module", "vfio", "parameters", "enable_unsafe_noiommu_mode")) {
	case "Y", "y", "1":
		return "", true, nil
	}
	return "", false, fmt.Errorf("%s has no IOMMU group (%s) and vfio's no-IOMMU mode is off: "+
		"enable the IOMMU (VT-d/AMD-Vi in firmware, intel_iommu=on or amd_iommu=on on the kernel command line), "+
		"or use driver %s, or (unsafe) write Y to %s",
		addr, s.devPath(addr, "iommu_group"), UIO, s.path("module", "vfio", "parameters", "enable_unsafe_noiommu_mode"))
}
