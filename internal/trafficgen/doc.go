// Package trafficgen builds a deterministic mix of Ethernet frames resembling
// what a Ceph storage node receives: msgr2 and msgr1 monitor traffic, OSD
// traffic in both directions, RoCEv2 (RDMA over UDP 4791), ARP, ICMP, ICMPv6
// and unrelated TCP/UDP services, with 802.1Q-tagged, IPv6, fragmented and
// deliberately malformed variants.
//
// The package owns two things: the frame builder used by tests and benchmarks
// that need to know exactly what was sent (every Frame carries the metadata
// needed to compute expected per-service counts), and the committed sample
// capture configs/sample/ceph-node.pcap that the daemon's default
// configuration replays through DPDK's net_pcap driver.
//
// All addresses are private test addresses that never leave the machine:
// the node is 10.99.0.1/24 and fd99::1 with MAC 02:00:0a:63:00:01, and its
// peers are 10.99.0.2 to 10.99.0.50 (fd99::2 to fd99::32) with locally
// administered MACs 02:00:0a:63:00:NN. Link-local broadcast and multicast
// destinations (ARP, IPv6 neighbour discovery) are the only other ones used.
//
// Output is a pure function of (seed, n, mix): the generator uses its own
// PRNG, not math/rand, so the bytes do not depend on the Go release.
package trafficgen

//go:generate go run ./cmd/gen-sample-pcap -o ../../configs/sample/ceph-node.pcap -n 2000 -seed 1

// The committed sample capture configs/sample/ceph-node.pcap is
// Generate(SampleSeed, SampleFrames, DefaultMix()) written by WritePcap.
const (
	SampleSeed   = 1
	SampleFrames = 2000
)
