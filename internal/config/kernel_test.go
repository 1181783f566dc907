package config

import (
	"strings"
	"testing"
)

func TestKernelSection(t *testing.T) {
	const base = `
port: {name: node0, device: "net_af_packet0,iface=veth0", tx_queues: 2}
services:
  - {name: mon, priority: 10, consumer: {type: kernel}}
  - {name: osd, priority: 1, consumer: {type: kernel}}
  - {name: other, priority: 5, consumer: {type: kernel}}
  - {name: fwd, consumer: {type: forward, tx_queue: 1}}
default_service: other
`
	tests := []struct {
		name, extra, want string // want: "" for valid, else a substring of the error
	}{
		{"defaults", "kernel: {addresses: [10.0.0.5/24]}\n", ""},
		{"ipv6 and netns", "kernel: {interface: ceph0, netns: node, addresses: [10.0.0.5/24, 'fd00::5/64']}\n", ""},
		{"no kernel section", "", "needs a kernel section"},
		{"long name", "kernel: {interface: abcdefghijklmnop}\n", "line 9: kernel.interface"},
		{"slash in name", "kernel: {interface: a/b}\n", "kernel.interface"},
		{"driver", "kernel: {driver: kni}\n", `"kni": want "tap" or "virtio_user"`},
		{"mtu above port", "kernel: {mtu: 9000}\n", "kernel.mtu: 9000 is outside 68..port.mtu 1500"},
		{"bad address", "kernel: {addresses: [10.0.0.300/24]}\n", "not an address"},
		{"duplicate address", "kernel: {addresses: [10.0.0.5/24, 10.0.0.5/16]}\n", "listed twice"},
		{"tx queue", "kernel: {tx_queue: 2}\n", "kernel.tx_queue: tx queue 2 does not exist"},
		{"budget", "kernel: {budget: 1000}\n", "kernel.budget: 1000 is outside 1..512"},
		{"virtio_user", "kernel: {driver: virtio_user, rx_descriptors: 1024}\n", ""},
		{"virtio_user queue not a power of two", "kernel: {driver: virtio_user, tx_descriptors: 1000}\n", "kernel.tx_descriptors: 1000 is not a power of two"},
		{"tap queue not a power of two", "kernel: {tx_descriptors: 1000}\n", ""},
		{"routes", "kernel: {addresses: [10.0.0.5/24, 'fd00::5/64'], routes: [{to: default, via: 10.0.0.1}, {to: 10.9.0.0/16, via: 10.0.0.254, metric: 100}, {to: default, via: 'fd00::1'}, {to: default, via: 'fe80::1', metric: 1024}]}\n", ""},
		{"route without via", "kernel: {addresses: [10.0.0.5/24], routes: [{to: default}]}\n", "has no via"},
		{"route without to", "kernel: {addresses: [10.0.0.5/24], routes: [{via: 10.0.0.1}]}\n", "has no to"},
		{"route to a bad prefix", "kernel: {addresses: [10.0.0.5/24], routes: [{to: 10.9.0.0/33, via: 10.0.0.1}]}\n", "is not a prefix"},
		{"route via a bad address", "kernel: {addresses: [10.0.0.5/24], routes: [{to: default, via: 10.0.0}]}\n", "is not an address"},
		{"gateway off every subnet", "kernel: {addresses: [10.0.0.5/24], routes: [{to: default, via: 10.1.0.1}]}\n", "kernel.routes[0]: gateway 10.1.0.1 is on none of the subnets"},
		{"gateway without addresses", "kernel: {routes: [{to: default, via: 10.0.0.1}]}\n", "is on none of the subnets"},
		{"gateway is the node", "kernel: {addresses: [10.0.0.5/24], routes: [{to: default, via: 10.0.0.5}]}\n", "is on none of the subnets"},
		{"families mixed", "kernel: {addresses: [10.0.0.5/24], routes: [{to: 'fd01::/64', via: 10.0.0.1}]}\n", "mixes IPv4 and IPv6"},
		{"host bits", "kernel: {addresses: [10.0.0.5/24], routes: [{to: 10.9.0.1/16, via: 10.0.0.1}]}\n", "the network is 10.9.0.0/16"},
		{"multicast gateway", "kernel: {addresses: [10.0.0.5/24], routes: [{to: default, via: 224.0.0.1}]}\n", "not a unicast address"},
		{"negative metric", "kernel: {addresses: [10.0.0.5/24], routes: [{to: default, via: 10.0.0.1, metric: -1}]}\n", "metric -1 is negative"},
		{"route twice", "kernel: {addresses: [10.0.0.5/24], routes: [{to: default, via: 10.0.0.1}, {to: 0.0.0.0/0, via: 10.0.0.2}]}\n", "kernel.routes[1]: default at metric 0 is kernel.routes[0] again"},
		{"same route at two metrics", "kernel: {addresses: [10.0.0.5/24], routes: [{to: default, via: 10.0.0.1}, {to: default, via: 10.0.0.2, metric: 10}]}\n", ""},
		{"relative netns path", "kernel: {netns: a/b}\n", "kernel.netns"},
		{"split over two loops", "eal: {lcores: 0-2}\nkernel: {}\npollers:\n  - {lcore: 1, rx_queues: [0], services: [mon, fwd]}\n  - {lcore: 2, services: [osd, other]}\n",
			"one poll loop owns the exception path"},
		{"tx queue shared with another loop", "eal: {lcores: 0-2}\nkernel: {tx_queue: 1}\npollers:\n  - {lcore: 1, rx_queues: [0], services: [mon, osd, other]}\n  - {lcore: 2, services: [fwd]}\n",
			"tx queues are not shared between lcores"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(base + tt.extra))
			checkErr(t, "Parse", err, tt.want)
		})
	}
}

func TestKernelDefaultsAndOrder(t *testing.T) {
	c, err := Parse([]byte(`
port: {name: node0, device: "net_af_packet0,iface=veth0", mtu: 1400}
burst_size: 64
services:
  - {name: osd, priority: 1, consumer: {type: kernel}}
  - {name: a, consumer: {type: kernel}}
  - {name: mon, priority: 10, consumer: {type: kernel}}
  - {name: b, consumer: {type: kernel}}
default_service: a
kernel: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kernel
	if k.Interface != "node0" || k.Driver != KernelTap || k.MTU != 1400 || k.Budget != 32 {
		t.Errorf("defaults: %+v", k)
	}
	var order []string
	for _, i := range c.KernelServices() {
		order = append(order, c.Services[i].Name)
	}
	if got := strings.Join(order, ","); got != "mon,osd,a,b" {
		t.Errorf("drain order %s; want mon,osd,a,b (priority, then file order)", got)
	}
}

// sharedAddressBase is a configuration with a kernel interface at
// 10.0.0.5 and a roce service, for a roce section to follow.
const sharedAddressBase = `
port: {name: node0, device: "net_af_packet0,iface=veth0"}
services:
  - {name: other, consumer: {type: kernel}}
  - {name: roce, consumer: {type: roce}}
default_service: other
kernel: {addresses: [10.0.0.5/24]}
`

func TestKernelAddressSharedWithRoCE(t *testing.T) {
	const base = sharedAddressBase
	c, err := Parse([]byte(base + "roce: {service: roce, address: 10.0.0.5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.RoCERules() {
		if r.EtherType == 0x0806 {
			t.Error("the endpoint claims ARP for an address the kernel answers for")
		}
	}
	// A shared address with a MAC of its own is refused.
	_, err = Parse([]byte(base + "roce: {service: roce, address: 10.0.0.5, mac: '02:00:00:00:00:09'}\n"))
	checkErr(t, "Parse", err, "also roce.address")
}

func TestBridgeSection(t *testing.T) {
	const base = `
port: {name: node0, device: "net_af_packet0,iface=veth0"}
services:
  - {name: other, consumer: {type: kernel}}
  - {name: roce, consumer: {type: roce}}
default_service: other
`
	tests := []struct{ name, extra, want string }{
		{"defaults", "kernel: {addresses: [10.0.0.5/24]}\nroce: {service: roce, address: 10.0.0.5, bridge: {}}\n", ""},
		{"no kernel", "roce: {service: roce, address: 10.0.0.5, bridge: {}}\n", "needs a kernel section"},
		{"other address", "kernel: {addresses: [10.0.0.5/24]}\nroce: {service: roce, address: 10.0.0.6, bridge: {}}\n", "must be one of kernel.addresses"},
		{"listen overlap", "kernel: {addresses: [10.0.0.5/24]}\nroce: {service: roce, address: 10.0.0.5, listen: [{port: 6800, app: echo}], bridge: {}}\n", "includes port 6800"},
		{"chunks", "kernel: {addresses: [10.0.0.5/24]}\nroce: {service: roce, address: 10.0.0.5, bridge: {chunks: 5000}}\n", "roce.bridge.chunks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(base + tt.extra))
			if checkErr(t, "Parse", err, tt.want) && tt.want == "" {
				if got := len(c.RoCE.Bridge.BridgePorts()); got != 1+769 {
					t.Errorf("%d bridged ports; want 3300 and 6800-7568", got)
				}
			}
		})
	}
}

// TestBridgeMemory: the bridge's connections share its pools, so the
// memory check counts the pools, not max_sessions × per-session buffers.
func TestBridgeMemory(t *testing.T) {
	const base = sharedAddressBase
	if _, err := Parse([]byte(base + "roce: {service: roce, address: 10.0.0.5, max_sessions: 1000, memory_mb: 128, bridge: {}}\n")); err != nil {
		t.Fatalf("1000 bridged sessions in the default 96 MiB of pools: %v", err)
	}
	_, err := Parse([]byte(base + "roce: {service: roce, address: 10.0.0.5, memory_mb: 64, bridge: {}}\n"))
	checkErr(t, "Parse", err, "the bridge's 512 + 256 pooled buffers")
}
