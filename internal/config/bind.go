package config

import "strings"

// Bind moves the port's PCI device from its kernel driver to a DPDK
// driver, as dpdk-devbind.py does; `cephdpdkd restore-nic` puts the
// original driver back. The device is named by its kernel interface or
// its PCI address; with neither, it is port.device.
type Bind struct {
	// Driver is "vfio-pci" (needs an IOMMU group, or vfio's no-IOMMU
	// mode) or "uio_pci_generic".
	Driver string `yaml:"driver"`
	// Interface is the device's kernel interface, e.g. ens1f0.
	Interface string `yaml:"interface"`
	// PCI is the device's PCI address, e.g. 0000:3b:00.0.
	PCI string `yaml:"pci"`
	// Force binds an interface that is up or has addresses or routes.
	Force bool `yaml:"force"`
}

// Bind drivers.
const (
	BindVFIO = "vfio-pci"
	BindUIO  = "uio_pci_generic"
)

// CanonicalPCI returns a PCI address as sysfs names it: lower case, with
// the 0000: domain when it is left out.
func CanonicalPCI(addr string) string {
	addr = strings.ToLower(addr)
	if strings.Count(addr, ":") == 1 {
		addr = "0000:" + addr
	}
	return addr
}

func (c *Config) validateBind(bad func(string, string, ...any)) {
	b := c.Port.Bind
	if b == nil {
		return
	}
	switch b.Driver {
	case BindVFIO, BindUIO:
	case "":
		bad("port.bind.driver", "required: %q or %q", BindVFIO, BindUIO)
	default:
		bad("port.bind.driver", "%q: want %q or %q", b.Driver, BindVFIO, BindUIO)
	}
	if b.Interface != "" && (len(b.Interface) > MaxInterfaceName || !ifnameRE.MatchString(b.Interface)) {
		bad("port.bind.interface", "%q: a Linux interface name is 1..%d letters, digits, '-', '_' or '.'", b.Interface, MaxInterfaceName)
	}
	devPCI := IsPCIAddress(c.Port.Device)
	if b.Interface != "" && b.PCI != "" {
		bad("port.bind.pci", "give port.bind.interface or port.bind.pci, not both")
	} else if b.PCI != "" && !IsPCIAddress(b.PCI) {
		bad("port.bind.pci", "%q is not a PCI address (0000:3b:00.0)", b.PCI)
	} else if b.PCI != "" && devPCI && CanonicalPCI(b.PCI) != CanonicalPCI(c.Port.Device) {
		bad("port.bind.pci", "%s is not port.device %s: DPDK would open another device than the one bound", b.PCI, c.Port.Device)
	}
	if c.Port.Device != "" && !devPCI {
		bad("port.bind", "port.device %q is a vdev: only a PCI device can be bound to %s", c.Port.Device, b.Driver)
	}
}

// BindTarget returns the device port.bind names: its interface, or else
// its PCI address, which is port.device when neither is set.
func (p Port) BindTarget() (iface, pci string) {
	if p.Bind == nil {
		return "", ""
	}
	switch {
	case p.Bind.Interface != "":
		return p.Bind.Interface, ""
	case p.Bind.PCI != "":
		return "", CanonicalPCI(p.Bind.PCI)
	}
	return "", CanonicalPCI(p.Device)
}
