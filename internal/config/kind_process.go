package config

import "fmt"

// processKind leaves the service to a program outside the daemon, a
// service process attached as a DPDK secondary (process.go). The poll
// loop that owns the service serves the process's rings and transmits
// what it sends on consumer.tx_queue. The process holds its service's
// rings and control block by name: they stay as long as the daemon runs.
type processKind struct{ ownTx }

func (processKind) Traits() Traits { return Traits{Name: ConsumerProcess, Owned: true, Fixed: true} }

// Mbufs is what a service process can hold: ProcessMbufs.
func (processKind) Mbufs(c *Config) int { return c.ProcessMbufs() }

// check reports a TX queue the port lacks, memory a service process
// cannot map, and ring names over DPDK's limit (the lanes' names are
// checked for every service).
func (processKind) check(v *validation, i int) {
	c, bad := v.c, v.bad
	s := c.Services[i]
	path := fmt.Sprintf("services[%d]", i)
	v.checkTxQueue(i)
	// A secondary maps the primary's hugepage files: there are none
	// without hugepages, and none left with --huge-unlink, which the
	// daemon uses for the pages it reserves itself.
	switch {
	case c.EAL.NoHuge:
		bad(path+".consumer.type", "a %q consumer needs hugepages (eal.no_huge: false): a service process maps the daemon's hugepage memory", ConsumerProcess)
	case c.EAL.Hugepages != nil:
		bad(path+".consumer.type", "a %q consumer needs hugepage files a service process can map: use eal.huge_dir, not eal.hugepages (whose pages the daemon unlinks so that they go back to the kernel after a crash)", ConsumerProcess)
	}
	if !v.portNameOK || !nameRE.MatchString(s.Name) {
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
