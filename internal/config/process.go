package config

import "fmt"

// Service processes: a service whose consumer is "process" is left to a
// program outside the daemon that attaches as a DPDK secondary process
// (package service). It reads the service's lanes, which are named rings
// already (RingName), and the daemon adds three rings per such service,
// each with one producer and one consumer:
//
//   - tx: frames the process sends, which the owning poll loop transmits
//     on consumer.tx_queue;
//   - ret: mbufs the process is done with, which the loop frees (the
//     process never frees into, nor allocates from, the shared pool);
//   - buf: fresh mbufs the loop hands the process to send from.
//
// The owning poll loop (pollers[].services, as for kernel and roce
// services) serves them and recovers what a dead process held.

// ProcessRings names the daemon's rings of a process service, by suffix.
var ProcessRings = [...]string{"tx", "ret", "buf"}

// ProcessRingName is the DPDK name of a process service's ring kind (one
// of ProcessRings): the lane-0 name, a '.', and the kind.
func (c *Config) ProcessRingName(service, kind string) string {
	return c.RingName(service, 0) + "." + kind
}

// ProcessRingSize is the size of a process service's tx, ret and buf
// rings: four bursts, so that a burst the process holds fits in ret while
// the loop drains the rest, and the process has a burst to fill while
// the loop transmits another. The loop serves them every iteration.
func (c *Config) ProcessRingSize() int {
	n := 4
	for n < 4*c.Burst {
		n <<= 1
	}
	return n
}

// ProcessMbufs is what a process service can hold on top of its lanes:
// its tx, ret and buf rings full, a burst received and one being filled,
// and a burst the loop could not transmit yet.
func (c *Config) ProcessMbufs() int {
	return 3*(c.ProcessRingSize()-1) + 3*c.Burst
}

// validateProcess checks a process service: its TX queue exists and its
// ring names fit DPDK's limit (the lanes' names are checked for every
// service).
func (c *Config) validateProcess(i int, portNameOK bool, bad func(string, string, ...any)) {
	s := c.Services[i]
	path := fmt.Sprintf("services[%d]", i)
	if s.Consumer.TxQueue < 0 || s.Consumer.TxQueue >= c.Port.TxQueues {
		bad(path+".consumer.tx_queue", "tx queue %d does not exist: the port has %d", s.Consumer.TxQueue, c.Port.TxQueues)
	}
	// A secondary maps the primary's hugepage files: there are none
	// without hugepages, and none left with --huge-unlink, which the
	// daemon uses for the pages it reserves itself.
	switch {
	case c.EAL.NoHuge:
		bad(path+".consumer.type", "a %q consumer needs hugepages (eal.no_huge: false): a service process maps the daemon's hugepage memory", ConsumerProcess)
	case c.EAL.Hugepages != nil:
		bad(path+".consumer.type", "a %q consumer needs hugepage files a service process can map: use eal.huge_dir, not eal.hugepages (whose pages the daemon unlinks so that they go back to the kernel after a crash)", ConsumerProcess)
	}
	if !portNameOK || !nameRE.MatchString(s.Name) {
		return
	}
	longest := ProcessRings[0]
	for _, k := range ProcessRings {
		if len(k) > len(longest) {
			longest = k
		}
	}
	if r := c.ProcessRingName(s.Name, longest); len(r) > RingNameMax {
		bad(path+".name", "%q makes the ring name %q %d characters, over DPDK's limit of %d for ring names (RTE_RING_NAMESIZE); with port %q a process service's name takes at most %d",
			s.Name, r, len(r), RingNameMax, c.Port.Name, RingNameMax-len(c.ProcessRingName("", longest)))
	}
}
