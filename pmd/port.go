package pmd

import (
	"errors"
	"fmt"
	"net"
)

// ErrNoPort is returned when no DPDK port has the requested name.
var ErrNoPort = errors.New("pmd: no such port")

// PortConfig is how a port is set up before Start.
type PortConfig struct {
	RxQueues      uint16
	TxQueues      uint16
	RxDescriptors uint16
	TxDescriptors uint16
	MTU           uint16 // 0 leaves the driver's default
	Promiscuous   bool
}

func (c PortConfig) validate() error {
	switch {
	case c.RxQueues == 0 || c.TxQueues == 0:
		return fmt.Errorf("need at least one rx and one tx queue, have %d/%d", c.RxQueues, c.TxQueues)
	case c.RxDescriptors == 0 || c.TxDescriptors == 0:
		return fmt.Errorf("descriptor counts must be non-zero, have %d/%d", c.RxDescriptors, c.TxDescriptors)
	}
	return nil
}

// Link is a port's link state.
type Link struct {
	Up         bool
	SpeedMbps  uint32
	FullDuplex bool
}

func (l Link) String() string {
	if !l.Up {
		return "down"
	}
	d := "half"
	if l.FullDuplex {
		d = "full"
	}
	return fmt.Sprintf("up %d Mbps %s-duplex", l.SpeedMbps, d)
}

// Stats are a port's basic counters (rte_eth_stats).
type Stats struct {
	RxPackets, TxPackets uint64
	RxBytes, TxBytes     uint64
	RxMissed             uint64 // dropped by the NIC: no free descriptor
	RxErrors, TxErrors   uint64
	RxNoMbuf             uint64
	Queues               []QueueStats
}

// QueueStats are per-queue counters, where the driver keeps them.
type QueueStats struct {
	RxPackets, TxPackets uint64
	RxBytes, TxBytes     uint64
	RxErrors             uint64
}

// XStat is one extended statistic.
type XStat struct {
	Name  string
	Value uint64
}

// Info describes an open port.
type Info struct {
	ID       uint16
	Name     string
	Driver   string
	MAC      net.HardwareAddr
	MaxRxQ   uint16
	MaxTxQ   uint16
	SocketID int
}

// NeedsGate reports whether a port of this driver must be polled behind
// the EAL's interrupt-thread gate (Gate): whether the driver frees or
// unmaps queue memory from DPDK's interrupt thread while the port runs.
// In DPDK 22.11, net_memif does, when its peer leaves.
func NeedsGate(driver string) bool { return driver == "net_memif" }
