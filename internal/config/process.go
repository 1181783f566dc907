package config

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
