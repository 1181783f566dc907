package config

import (
	"fmt"
	"strings"
	"testing"
)

// afxdpConfig is a Ceph node's RoCE in the af_xdp mode, with port
// settings from port and the rest from extra.
func afxdpConfig(port, extra string) string {
	return "port:\n  name: p\n" + port +
		"services:\n  - {name: roce, consumer: {type: roce}}\n  - {name: other}\n" +
		"default_service: other\n" +
		"roce:\n  service: roce\n  address: 192.0.2.10\n" + extra
}

func TestPortMode(t *testing.T) {
	const mode = "  mode: af_xdp\n  af_xdp: {interface: ens1f0}\n"
	tests := []struct {
		name, yaml string
		want       string // "" for valid, else a substring of the error
	}{
		{"af_xdp", afxdpConfig(mode, ""), ""},
		{"generic, four queues", afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: veth0, attach: generic}\n  rx_queues: 4\n", ""), ""},
		{"bad mode", afxdpConfig("  mode: xdp\n  device: net_null0\n", ""), `line 3: port.mode: "xdp": want rebind or af_xdp`},
		{"no interface", afxdpConfig("  mode: af_xdp\n", ""), "line 1: port.af_xdp.interface: required with port.mode: af_xdp"},
		{"bad interface", afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: a/b}\n", ""), `line 4: port.af_xdp.interface: "a/b": a Linux interface name is 1..15`},
		{"long interface", afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: sixteen-chars-xx}\n", ""), `"sixteen-chars-xx": a Linux interface name is 1..15`},
		{"bad attach", afxdpConfig("  mode: af_xdp\n  af_xdp:\n    interface: ens1f0\n    attach: skb\n", ""), `line 6: port.af_xdp.attach: "skb": want native or generic`},
		{"device given", afxdpConfig(mode+"  device: net_af_xdp0,iface=ens1f0\n", ""), "line 5: port.device: not with port.mode: af_xdp"},
		{"bind", afxdpConfig(mode+"  bind: {driver: vfio-pci, interface: ens1f0}\n", ""), "line 5: port.bind: not with port.mode: af_xdp: the NIC stays on its kernel driver"},
		{"kernel", afxdpConfig(mode, "kernel: {addresses: [192.0.2.10/24]}\n"), "line 12: kernel: not with port.mode: af_xdp"},
		{"no roce", "port:\n  name: p\n" + mode + "services: [{name: a}]\ndefault_service: a\n", "roce: required with port.mode: af_xdp"},
		{"roce mtu 4096", afxdpConfig(mode, "  mtu: 4096\n"), "line 12: roce.mtu: 4096: at most 2048 with port.mode: af_xdp"},
		{"roce mtu 2048", afxdpConfig(mode, "  mtu: 2048\n"), ""},
		{"no roce address (the interface's)", strings.Replace(afxdpConfig(mode, ""), "  address: 192.0.2.10\n", "", 1), ""},
		{"no roce address in rebind mode", strings.Replace(afxdpConfig("  device: net_null0\n", ""), "  address: 192.0.2.10\n", "", 1), "roce.address: want the endpoint's IPv4 address"},
		{"port mtu", afxdpConfig(mode+"  mtu: 9000\n", ""), "line 5: port.mtu: not with port.mode: af_xdp"},
		{"promiscuous", afxdpConfig(mode+"  promiscuous: true\n", ""), "line 5: port.promiscuous: not with port.mode: af_xdp"},
		{"queues unpaired", afxdpConfig(mode+"  rx_queues: 2\n  tx_queues: 1\n", ""), "line 6: port.tx_queues: 1: with port.mode: af_xdp as many as port.rx_queues (2)"},
		{"data room small", afxdpConfig(mode, "  mtu: 2048\nmempool: {data_room: 2176}\n"), "line 13: mempool.data_room: 2176 leaves 1792 bytes"},
		{"af_xdp section in rebind mode", "port:\n  name: p\n  device: net_null0\n  af_xdp: {interface: ens1f0}\nservices: [{name: a}]\ndefault_service: a\n", "line 4: port.af_xdp: only with port.mode: af_xdp"},
		{"raw net_af_xdp device", "port:\n  name: p\n  device: net_af_xdp0,iface=ens1f0\nservices: [{name: a}]\ndefault_service: a\n", "line 3: port.device: net_af_xdp0 is the af_xdp mode's device: set port.mode: af_xdp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			checkErr(t, "Parse", err, tt.want)
		})
	}
}

// TestPortModeNoInterface: a missing port.af_xdp.interface is the one
// error, not followed by complaints about the device derived from it.
func TestPortModeNoInterface(t *testing.T) {
	_, err := Parse([]byte(afxdpConfig("  mode: af_xdp\n", "")))
	if err == nil || strings.Count(err.Error(), "\n") != 0 || !strings.Contains(err.Error(), "line 1: port.af_xdp.interface: required") {
		t.Errorf("Parse = %v, want only the missing interface", err)
	}
}

func TestPortModeDefaults(t *testing.T) {
	c, err := Parse([]byte(afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: ens1f0}\n  rx_queues: 2\n", "")))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Port
	if !p.IsAFXDP() || p.MTU != 0 || *p.Promiscuous || p.TxQueues != 2 || p.XDPMode().String() != "native" || c.Mempool.DataRoom != DefaultAFXDPDataRoom {
		t.Errorf("defaults: %+v, data room %d", p, c.Mempool.DataRoom)
	}
	const dev = "net_af_xdp0,iface=ens1f0,start_queue=0,queue_count=2,busy_budget=0"
	if p.Device != dev {
		t.Errorf("device %q, want %q", p.Device, dev)
	}
	c, err = Parse([]byte("port:\n  name: p\n  device: net_null0\nservices: [{name: a}]\ndefault_service: a\n"))
	if err != nil || c.Port.Mode != PortRebind || c.Port.IsAFXDP() || !strings.HasPrefix(c.Port.Device, "net_null0") {
		t.Errorf("rebind default: %+v, %v", c.Port, err)
	}
}

// TestMaxRoCEPathMTU: the largest path MTU a client may connect with is
// what the port carries, never less than roce.mtu.
func TestMaxRoCEPathMTU(t *testing.T) {
	rebind := func(portMTU, dataRoom int) string {
		return afxdpConfig(fmt.Sprintf("  device: net_null0\n  mtu: %d\n", portMTU), fmt.Sprintf("mempool: {data_room: %d}\n", dataRoom))
	}
	tests := []struct {
		name, yaml string
		want       int
	}{
		{"rebind, port mtu 1500", rebind(1500, 2176), 1024},
		{"rebind, port mtu 2112", rebind(2112, 2304), 2048},
		{"rebind, port mtu 2111", rebind(2111, 2304), 1024},
		{"rebind, port mtu 4160", rebind(4160, 4352), 4096},
		{"rebind, port mtu 9000", rebind(9000, 9344), 4096},
		{"af_xdp", afxdpConfig("  mode: af_xdp\n  af_xdp: {interface: ens1f0}\n", ""), MaxAFXDPRoCEMTU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.MaxRoCEPathMTU(); got != tt.want {
				t.Errorf("MaxRoCEPathMTU = %d, want %d", got, tt.want)
			}
		})
	}
}
