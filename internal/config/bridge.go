package config

import (
	"fmt"

	"github.com/cephdpdkd/cephdpdkd/roce/bridge"
)

// RoCEBridge configures the RoCE⇄TCP bridge: each rdma_cm connection to one
// of Ports on roce.address becomes a kernel TCP connection to the same
// address and port, where ceph-mon or ceph-osd listens on the kernel
// interface. roce.address is then the node's own address, one of
// kernel.addresses.
type RoCEBridge struct {
	Ports []PortRange `yaml:"ports"`
	// Chunks bounds the registered send buffers of roce.buffer_size one
	// batch of the bridge's TCP reads fills for a connection
	// (bridge.Config.Chunks).
	Chunks int `yaml:"chunks"`
	// RecvPool and SendPool are the registered buffers of roce.buffer_size
	// that every bridged connection shares: receives all posted on one
	// shared receive queue, and sends. roce.recv_buffers and
	// roce.send_buffers cap what one connection holds.
	RecvPool int `yaml:"recv_pool"`
	SendPool int `yaml:"send_pool"`
}

// DefaultBridgePorts are Ceph's: the monitor's msgr2 port and the range
// OSDs, MGRs and MDSs bind.
var DefaultBridgePorts = []PortRange{{3300, 3300}, {6800, 7568}}

func (c *Config) bridgeDefaults() {
	if c.RoCE == nil || c.RoCE.Bridge == nil {
		return
	}
	b := c.RoCE.Bridge
	if len(b.Ports) == 0 {
		b.Ports = append([]PortRange(nil), DefaultBridgePorts...)
	}
	if b.Chunks == 0 {
		b.Chunks = bridge.DefaultChunks
	}
	if b.RecvPool == 0 {
		b.RecvPool = bridge.DefaultRecvPool
	}
	if b.SendPool == 0 {
		b.SendPool = bridge.DefaultSendPool
	}
}

func (c *Config) validateBridge(bad func(string, string, ...any)) {
	if c.RoCE == nil || c.RoCE.Bridge == nil {
		return
	}
	b := c.RoCE.Bridge
	if c.Port.IsAFXDP() {
		// The kernel keeps the interface, and the Ceph daemons listen on
		// roce.address there: the host check holds it to the interface.
	} else if c.Kernel == nil {
		bad("roce.bridge", "needs a kernel section: the Ceph daemons listen on the kernel interface")
	} else if !c.roceAddressIsKernel() {
		bad("roce.bridge", "roce.address %v must be one of kernel.addresses: clients reach the daemons at the address they dial", c.RoCE.Address.Addr())
	}
	if b.Chunks < 1 || b.Chunks > bridge.MaxChunks {
		bad("roce.bridge.chunks", "%d is outside 1..%d", b.Chunks, bridge.MaxChunks)
	}
	for _, p := range []struct {
		path string
		v    int
	}{{"roce.bridge.recv_pool", b.RecvPool}, {"roce.bridge.send_pool", b.SendPool}} {
		if p.v < bridge.MinPool || p.v > bridge.MaxPool {
			bad(p.path, "%d is outside %d..%d", p.v, bridge.MinPool, bridge.MaxPool)
		}
	}
	for i, r := range b.Ports {
		if r.Lo == 0 {
			bad(fmt.Sprintf("roce.bridge.ports[%d]", i), "port 0")
		}
		for _, l := range c.RoCE.Listen {
			if l.Port >= r.Lo && l.Port <= r.Hi {
				bad(fmt.Sprintf("roce.bridge.ports[%d]", i), "%v includes port %d, which roce.listen serves", r, l.Port)
			}
		}
	}
}

// BridgePorts lists every bridged port.
func (b *RoCEBridge) BridgePorts() []uint16 {
	var out []uint16
	seen := map[uint16]bool{}
	for _, r := range b.Ports {
		for p := int(r.Lo); p <= int(r.Hi); p++ {
			if !seen[uint16(p)] {
				seen[uint16(p)] = true
				out = append(out, uint16(p))
			}
		}
	}
	return out
}

// roceAddressIsKernel reports whether the RoCE endpoint shares its
// address with the kernel interface.
func (c *Config) roceAddressIsKernel() bool {
	if c.RoCE == nil || c.Kernel == nil {
		return false
	}
	for _, a := range c.Kernel.Addresses {
		if a.Addr() == c.RoCE.Address.Addr() {
			return true
		}
	}
	return false
}
