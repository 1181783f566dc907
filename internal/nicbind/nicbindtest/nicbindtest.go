// Package nicbindtest builds a fake sysfs tree of PCI network devices and
// plays the kernel's part when a test writes to it: unbind, bind,
// driver_override and drivers_probe move the driver link and add or
// remove the device's network interface. It also keeps each interface's
// addresses and routes, which a kernel would lose with the interface.
package nicbindtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
)

// NIC describes one fake PCI network device.
type NIC struct {
	PCI       string // 0000:3b:00.0
	Vendor    string // 8086
	Device    string // 1572
	Class     string // 020000 when empty
	Driver    string // its kernel driver, bound at start; "" for none
	Interface string // the interface its kernel driver creates
	Up        bool   // IFF_UP and operstate up
	// IOMMUGroup, when set, gives it an iommu_group link.
	IOMMUGroup string
	// Sub, when set, is the child device that holds the interface, as
	// virtio-pci's virtioN holds virtio-net's.
	Sub string
}

// Tree is a fake sysfs under Root.
type Tree struct {
	Root string

	mu   sync.Mutex
	nics map[string]*NIC
	nets map[string]kernelif.Network // by interface
	// FailWrite, when it returns an error for a path, makes that write
	// fail before the fake kernel acts on it.
	FailWrite func(path string) error
	// NoReappear keeps restored interfaces from coming back.
	NoReappear bool
	// Writes records each write as "path-relative-to-Root data".
	Writes []string
}

// New returns an empty tree under a test's temporary directory.
func New(t testing.TB) *Tree {
	t.Helper()
	tr := &Tree{Root: t.TempDir(), nics: map[string]*NIC{}, nets: map[string]kernelif.Network{}}
	for _, d := range []string{"bus/pci/devices", "bus/pci/drivers", "class/net", "module"} {
		tr.mkdir(t, d)
	}
	tr.file(t, "bus/pci/drivers_probe", "")
	return tr
}

func (tr *Tree) p(rel string) string { return filepath.Join(tr.Root, rel) }

func (tr *Tree) mkdir(t testing.TB, rel string) {
	t.Helper()
	if err := os.MkdirAll(tr.p(rel), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (tr *Tree) file(t testing.TB, rel, content string) {
	t.Helper()
	tr.mkdir(t, filepath.Dir(rel))
	if err := os.WriteFile(tr.p(rel), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// AddDriver adds a loaded driver: /sys/bus/pci/drivers/<name>.
func (tr *Tree) AddDriver(t testing.TB, name string) {
	t.Helper()
	tr.file(t, "bus/pci/drivers/"+name+"/bind", "")
	tr.file(t, "bus/pci/drivers/"+name+"/unbind", "")
}

// AddNIC adds a device, its driver (loaded) and, when bound, its interface.
func (tr *Tree) AddNIC(t testing.TB, n NIC) {
	t.Helper()
	if n.Class == "" {
		n.Class = "020000"
	}
	dev := "bus/pci/devices/" + n.PCI
	tr.file(t, dev+"/vendor", "0x"+n.Vendor+"\n")
	tr.file(t, dev+"/device", "0x"+n.Device+"\n")
	tr.file(t, dev+"/class", "0x"+n.Class+"\n")
	tr.file(t, dev+"/driver_override", "(null)\n")
	if n.IOMMUGroup != "" {
		tr.mkdir(t, "kernel/iommu_groups/"+n.IOMMUGroup)
		if err := os.Symlink("../../../../kernel/iommu_groups/"+n.IOMMUGroup, tr.p(dev+"/iommu_group")); err != nil {
			t.Fatal(err)
		}
	}
	tr.mu.Lock()
	tr.nics[n.PCI] = &n
	tr.mu.Unlock()
	if n.Driver != "" {
		tr.AddDriver(t, n.Driver)
		if err := tr.bind(n.PCI, n.Driver); err != nil {
			t.Fatal(err)
		}
		if n.Up {
			tr.file(t, "class/net/"+n.Interface+"/operstate", "up\n")
			tr.file(t, "class/net/"+n.Interface+"/flags", "0x1003\n")
		}
	}
}

// SetNoIOMMU creates vfio's enable_unsafe_noiommu_mode parameter.
func (tr *Tree) SetNoIOMMU(t testing.TB, on bool) {
	t.Helper()
	v := "N\n"
	if on {
		v = "Y\n"
	}
	tr.file(t, "module/vfio/parameters/enable_unsafe_noiommu_mode", v)
}

// LoadModule is a fake modprobe: it adds the driver's directory.
func (tr *Tree) LoadModule(name string) error {
	switch name {
	case "vfio-pci", "uio_pci_generic":
	default:
		return fmt.Errorf("modprobe: FATAL: Module %s not found", name)
	}
	for _, f := range []string{"bind", "unbind"} {
		p := tr.p("bus/pci/drivers/" + name + "/" + f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Driver returns the driver a device is bound to; "" for none.
func (tr *Tree) Driver(addr string) string {
	l, err := os.Readlink(tr.p("bus/pci/devices/" + addr + "/driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(l)
}

// HasInterface reports whether /sys/class/net/<name> exists.
func (tr *Tree) HasInterface(name string) bool {
	_, err := os.Lstat(tr.p("class/net/" + name))
	return err == nil
}

// Write is System.WriteFile for the tree: it writes like sysfs (the
// file must exist) and reacts like the kernel.
func (tr *Tree) Write(path string, data []byte) error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	rel, err := filepath.Rel(tr.Root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("fake sysfs: write outside the tree: %s", path)
	}
	tr.Writes = append(tr.Writes, rel+" "+strings.TrimSpace(string(data)))
	if tr.FailWrite != nil {
		if err := tr.FailWrite(rel); err != nil {
			return err
		}
	}
	if _, err := os.Stat(path); err != nil {
		return err
	}
	val := strings.TrimSpace(string(data))
	parts := strings.Split(rel, "/")
	switch {
	case rel == "bus/pci/drivers_probe":
		return tr.probe(val)
	case len(parts) == 6 && parts[2] == "devices" && parts[4] == "driver" && parts[5] == "unbind":
		if parts[3] != val {
			return fmt.Errorf("fake sysfs: unbind %s through %s: no such device", val, parts[3])
		}
		return tr.unbind(val, tr.Driver(val))
	case len(parts) == 5 && parts[2] == "drivers" && parts[4] == "unbind":
		return tr.unbind(val, parts[3])
	case len(parts) == 5 && parts[2] == "drivers" && parts[4] == "bind":
		n := tr.nics[val]
		if n == nil || tr.Driver(val) != "" {
			return fmt.Errorf("fake sysfs: bind %s: no such device", val)
		}
		if o := tr.override(val); o != "" && o != parts[3] {
			return fmt.Errorf("fake sysfs: bind %s: driver_override is %s", val, o)
		}
		return tr.bind(val, parts[3])
	case len(parts) == 5 && parts[2] == "devices" && parts[4] == "driver_override":
		if val == "" {
			val = "(null)"
		}
		return os.WriteFile(path, []byte(val+"\n"), 0o644)
	}
	return os.WriteFile(path, data, 0o644)
}

func (tr *Tree) override(addr string) string {
	b, _ := os.ReadFile(tr.p("bus/pci/devices/" + addr + "/driver_override"))
	if v := strings.TrimSpace(string(b)); v != "(null)" {
		return v
	}
	return ""
}

// probe binds a driverless device to its override, or else to its own
// kernel driver, if that driver is loaded and can take it.
func (tr *Tree) probe(addr string) error {
	n := tr.nics[addr]
	if n == nil {
		return fmt.Errorf("fake sysfs: probe %s: no such device", addr)
	}
	if tr.Driver(addr) != "" {
		return nil
	}
	drv := tr.override(addr)
	if drv == "" {
		drv = n.Driver
	}
	if drv == "" {
		return nil
	}
	if _, err := os.Stat(tr.p("bus/pci/drivers/" + drv)); err != nil {
		return nil // not loaded: the device stays without a driver
	}
	if drv == "vfio-pci" && n.IOMMUGroup == "" {
		b, _ := os.ReadFile(tr.p("module/vfio/parameters/enable_unsafe_noiommu_mode"))
		if strings.TrimSpace(string(b)) != "Y" {
			return nil // vfio-pci's probe fails: no IOMMU group
		}
	}
	return tr.bind(addr, drv)
}

func (tr *Tree) bind(addr, drv string) error {
	n := tr.nics[addr]
	dev := tr.p("bus/pci/devices/" + addr)
	if err := os.Symlink("../../../../bus/pci/drivers/"+drv, dev+"/driver"); err != nil {
		return err
	}
	if drv != n.Driver || n.Interface == "" || tr.NoReappear {
		return nil
	}
	// The kernel driver registers the interface, down.
	parent, link := dev, "../../../bus/pci/devices/"+addr
	if n.Sub != "" {
		parent, link = dev+"/"+n.Sub, link+"/"+n.Sub
	}
	if err := os.MkdirAll(parent+"/net/"+n.Interface, 0o755); err != nil {
		return err
	}
	cn := tr.p("class/net/" + n.Interface)
	if err := os.MkdirAll(cn, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(link, cn+"/device"); err != nil {
		return err
	}
	if err := os.WriteFile(cn+"/operstate", []byte("down\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(cn+"/flags", []byte("0x1002\n"), 0o644)
}

func (tr *Tree) unbind(addr, drv string) error {
	n := tr.nics[addr]
	if n == nil || drv == "" || tr.Driver(addr) != drv {
		return fmt.Errorf("fake sysfs: unbind %s from %q: no such device", addr, drv)
	}
	dev := tr.p("bus/pci/devices/" + addr)
	if err := os.Remove(dev + "/driver"); err != nil {
		return err
	}
	if drv == n.Driver && n.Interface != "" {
		os.RemoveAll(dev + "/net")
		if n.Sub != "" {
			os.RemoveAll(dev + "/" + n.Sub)
		}
		os.RemoveAll(tr.p("class/net/" + n.Interface))
		delete(tr.nets, n.Interface) // the interface's addresses and routes go with it
	}
	return nil
}

// Network returns an interface's addresses and routes: nicbind.System's
// Network.
func (tr *Tree) Network(ifname string) (kernelif.Network, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !tr.HasInterface(ifname) {
		return kernelif.Network{}, fmt.Errorf("interface %s: no such interface", ifname)
	}
	return tr.nets[ifname], nil
}

// SetNetwork adds addresses and routes to an interface and sets it up:
// nicbind.System's SetNetwork.
func (tr *Tree) SetNetwork(ifname string, n kernelif.Network) error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !tr.HasInterface(ifname) {
		return fmt.Errorf("interface %s: no such interface", ifname)
	}
	tr.nets[ifname] = tr.nets[ifname].Merge(n)
	if err := os.WriteFile(tr.p("class/net/"+ifname+"/flags"), []byte("0x1003\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(tr.p("class/net/"+ifname+"/operstate"), []byte("up\n"), 0o644)
}

// Activity is nicbind.System's Activity as the kernel reports it: the
// addresses, the subnet route each adds, and the routes via gateways.
func (tr *Tree) Activity(ifname string) (nicbind.Activity, error) {
	n, err := tr.Network(ifname)
	var a nicbind.Activity
	for _, p := range n.Addresses {
		a.Addresses = append(a.Addresses, p.String())
		a.Routes = append(a.Routes, p.Masked().String())
	}
	for _, r := range n.Routes {
		if r.To.Bits() == 0 {
			a.Routes = append(a.Routes, "default via "+r.Via.String())
		} else {
			a.Routes = append(a.Routes, r.To.String()+" via "+r.Via.String())
		}
	}
	return a, err
}

// System returns a nicbind.System on the tree, with runDir for its state
// files: every interface carries activity, a link comes up at once, and
// the waits are short.
func (tr *Tree) System(runDir string, activity nicbind.Activity) *nicbind.System {
	return &nicbind.System{
		Sysfs: tr.Root, RunDir: runDir,
		Activity:      func(string) (nicbind.Activity, error) { return activity, nil },
		LoadModule:    tr.LoadModule,
		SetLinkUp:     func(string) error { return nil },
		Network:       tr.Network,
		SetNetwork:    tr.SetNetwork,
		WriteFile:     tr.Write,
		Timeout:       time.Second,
		AppearTimeout: 200 * time.Millisecond,
	}
}
