package config

import "testing"

func TestBindSection(t *testing.T) {
	const rest = "services: [{name: a}]\ndefault_service: a\n"
	tests := []struct {
		name, port string
		want       string // "" for valid, else a substring of the error
		iface, pci string // BindTarget when valid
	}{
		{"interface", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind: {driver: vfio-pci, interface: ens1f0}\n", "", "ens1f0", ""},
		{"pci", "port:\n  name: p\n  device: 3b:00.0\n  bind: {driver: uio_pci_generic, pci: 3B:00.0, force: true}\n", "", "", "0000:3b:00.0"},
		{"device", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind: {driver: vfio-pci}\n", "", "", "0000:3b:00.0"},
		{"no driver", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind: {interface: ens1f0}\n",
			`line 4: port.bind.driver: required: "vfio-pci" or "uio_pci_generic"`, "", ""},
		{"bad driver", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind:\n    driver: igb_uio\n",
			`line 5: port.bind.driver: "igb_uio": want "vfio-pci" or "uio_pci_generic"`, "", ""},
		{"both", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind:\n    driver: vfio-pci\n    interface: ens1f0\n    pci: 0000:3b:00.0\n",
			"line 7: port.bind.pci: give port.bind.interface or port.bind.pci, not both", "", ""},
		{"bad pci", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind: {driver: vfio-pci, pci: 3b:00}\n",
			`port.bind.pci: "3b:00" is not a PCI address`, "", ""},
		{"other pci", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind: {driver: vfio-pci, pci: 0000:3b:00.1}\n",
			"port.bind.pci: 0000:3b:00.1 is not port.device 0000:3b:00.0", "", ""},
		{"bad interface", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind: {driver: vfio-pci, interface: a/b}\n",
			`port.bind.interface: "a/b"`, "", ""},
		{"vdev", "port:\n  name: p\n  device: net_null0\n  bind: {driver: vfio-pci, interface: ens1f0}\n",
			`line 4: port.bind: port.device "net_null0" is a vdev`, "", ""},
		// The device with DPDK arguments, in another case and without the
		// domain: the same device as port.bind.pci.
		{"pci devargs", "port:\n  name: p\n  device: 3B:00.0,rxq_cqe_comp_en=1\n  bind: {driver: vfio-pci, pci: 0000:3b:00.0}\n", "", "", "0000:3b:00.0"},
		{"function 8", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind: {driver: vfio-pci, pci: 0000:3b:00.8}\n",
			`port.bind.pci: "0000:3b:00.8" is not a PCI address`, "", ""},
		{"unknown key", "port:\n  name: p\n  device: 0000:3b:00.0\n  bind: {driver: vfio-pci, iface: ens1f0}\n",
			"field iface not found", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.port + rest))
			if !checkErr(t, "Parse", err, tt.want) || tt.want != "" {
				return
			}
			if iface, pci := c.Port.BindTarget(); iface != tt.iface || pci != tt.pci {
				t.Errorf("BindTarget() = %q, %q; want %q, %q", iface, pci, tt.iface, tt.pci)
			}
		})
	}
}
