package config

import "github.com/cephdpdkd/cephdpdkd/internal/devargs"

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
	if b.Interface != "" {
		checkIfName(bad, "port.bind.interface", b.Interface)
	}
	dev, devErr := devargs.Parse(c.Port.Device)
	bindPCI, pciErr := devargs.ParsePCI(b.PCI)
	if b.Interface != "" && b.PCI != "" {
		bad("port.bind.pci", "give port.bind.interface or port.bind.pci, not both")
	} else if b.PCI != "" && pciErr != nil {
		bad("port.bind.pci", "%v", pciErr)
	} else if b.PCI != "" && dev.PCI && bindPCI != dev.Addr {
		bad("port.bind.pci", "%s is not port.device %s: DPDK would open another device than the one bound", b.PCI, c.Port.Device)
	}
	// A malformed port.device is reported on its own.
	if c.Port.Device != "" && devErr == nil && !dev.PCI {
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
		return "", devargs.Name(p.Bind.PCI)
	}
	return "", devargs.Name(p.Device)
}
