package classify

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/cephdpdkd/cephdpdkd/internal/trafficgen"
)

// samplePcap is the capture the daemon's default configuration replays.
const samplePcap = "../../configs/sample/ceph-node.pcap"

// sampleFrames returns the frames of samplePcap.
func sampleFrames(tb testing.TB) [][]byte {
	tb.Helper()
	f, err := os.Open(samplePcap)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	frames, err := trafficgen.ReadPcap(bufio.NewReader(f))
	if err != nil {
		tb.Fatalf("%s: %v", samplePcap, err)
	}
	if len(frames) == 0 {
		tb.Fatalf("%s: no frames", samplePcap)
	}
	return frames
}

// daemonRules are the rules of configs/cephdpdkd.yaml: mon and OSD
// messenger traffic in both directions, and RoCEv2.
func daemonRules() []Rule {
	mon := []PortRange{{3300, 3300}, {6789, 6789}}
	osd := []PortRange{{6800, 7568}}
	return []Rule{
		{Service: svcMon, Proto: ProtoTCP, DstPorts: mon},
		{Service: svcMon, Proto: ProtoTCP, SrcPorts: mon},
		{Service: svcOSD, Proto: ProtoTCP, DstPorts: osd},
		{Service: svcOSD, Proto: ProtoTCP, SrcPorts: osd},
		{Service: svcRoCE, Proto: ProtoUDP, DstPorts: []PortRange{{4791, 4791}}},
	}
}

// benchFrames is a Ceph node's receive mix: mostly OSD traffic both ways
// and RoCEv2, some mon traffic, ARP, ICMP, IPv6 and VLAN-tagged frames, and
// traffic that stays with the kernel.
func benchFrames(b *testing.B) [][]byte {
	b.Helper()
	var frames [][]byte
	tcp4 := func(src, dst uint16, n int) {
		ip := ipv4(layers.IPProtocolTCP)
		f := serialize(b, ethernet(layers.EthernetTypeIPv4), ip, tcp(src, dst, ip), make(rawLayer, 1400))
		for range n {
			frames = append(frames, f)
		}
	}
	tcp4(40000, 6800, 4) // client to OSD
	tcp4(6801, 40001, 4) // OSD replies
	tcp4(40002, 3300, 1) // mon
	tcp4(40003, 22, 1)   // ssh: kernel
	for _, fc := range validFrames(b) {
		switch fc.name {
		case "rxe_send", "rxe_ack", "rxe_cm_request", "arp_request", "ipv4_icmp",
			"qinq_ipv6_tcp", "vlan_ipv4_udp", "ipv6_hbh_routing_destopts_tcp", "ipv4_later_fragment":
			frames = append(frames, fc.frame)
		}
	}
	return frames
}

// benchRules returns n rules whose last four are the Ceph node's: a frame
// that matches must look past the first n-4 rules, which a linear matcher
// would try one by one.
func benchRules(n int) []Rule {
	var rules []Rule
	for i := range n - 4 {
		var r Rule
		r.Service = 1 + i%3
		switch i % 4 {
		case 0:
			r.Proto = ProtoTCP
			r.DstPorts = []PortRange{{uint16(10000 + 10*i), uint16(10005 + 10*i)}, {uint16(50000 + i), uint16(50000 + i)}}
		case 1:
			r.DstPrefixes = []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), 32)}
		case 2:
			r.Proto = ProtoTCP
			r.SrcPorts = []PortRange{{uint16(20000 + i), uint16(20000 + i)}}
			r.DstPrefixes = []netip.Prefix{netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x00, 0x99, 15: byte(i)}), 128)}
		case 3:
			r.EtherType = 0x88b5
		}
		rules = append(rules, r)
	}
	rules = append(rules,
		Rule{Service: svcMon, Proto: ProtoTCP, DstPorts: []PortRange{{3300, 3300}, {6789, 6789}}},
		Rule{Service: svcOSD, Proto: ProtoTCP, DstPorts: []PortRange{{6800, 7568}}},
		Rule{Service: svcRoCE, Proto: ProtoUDP, DstPorts: []PortRange{{4791, 4791}}},
		Rule{Service: svcRoCE, EtherType: EtherTypeARP, DstPrefixes: []netip.Prefix{netip.PrefixFrom(roceIP, 32)}},
	)
	return rules
}

func BenchmarkParse(b *testing.B) {
	frames := benchFrames(b)
	var h Headers
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		Parse(frames[i], &h)
		if i++; i == len(frames) {
			i = 0
		}
	}
}

// BenchmarkClassify reports the cost per frame of the mix. The compiled
// classifier's cost depends on which header fields the rules constrain (a
// field no rule constrains costs no lookup; the 4 Ceph rules constrain no
// source port and no IPv6 address, the fillers do) and on whether the first
// rule the other fields leave standing has a destination prefix (then the
// address is looked up: the fillers' prefix rules come before the Ceph
// rules), not on how many rules there are: 8, 16 and 64 rules cost the
// same. The linear reference, for comparison, grows with the rules it has
// to try.
func BenchmarkClassify(b *testing.B) {
	frames := benchFrames(b)
	b.Run("ceph", func(b *testing.B) {
		c := mustCompile(b, cephRules(), numCephServices, svcKernel)
		benchClassify(b, c, frames)
	})
	want := map[int][]int{}
	for _, n := range []int{4, 8, 16, 64} {
		rules := benchRules(n)
		c := mustCompile(b, rules, numCephServices, svcKernel)
		for _, f := range frames {
			s, _ := c.Classify(f)
			want[n] = append(want[n], s)
		}
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) { benchClassify(b, c, frames) })
		b.Run(fmt.Sprintf("linear/rules=%d", n), func(b *testing.B) {
			var h Headers
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if Parse(frames[i], &h) == ReasonNone {
					refMatch(rules, &h)
				}
				if i++; i == len(frames) {
					i = 0
				}
			}
		})
	}
	// The extra rules must not change where the mix goes, or the
	// comparison would measure different work.
	for n, services := range want {
		for i := range frames {
			if services[i] != want[4][i] {
				b.Fatalf("frame %d: service %d with 4 rules, %d with %d", i, want[4][i], services[i], n)
			}
		}
	}
}

func benchClassify(b *testing.B, c *Classifier, frames [][]byte) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Classify(frames[i])
		if i++; i == len(frames) {
			i = 0
		}
	}
}

// BenchmarkClassifySample classifies every frame of the sample capture with
// the daemon's rules, the work of the poll loop on the default
// configuration, and reports the cost per frame.
func BenchmarkClassifySample(b *testing.B) {
	frames := sampleFrames(b)
	c := mustCompile(b, daemonRules(), numCephServices, svcKernel)
	b.ReportAllocs()
	sum := 0
	for b.Loop() {
		for _, f := range frames {
			s, r := c.Classify(f)
			sum += s + int(r)
		}
	}
	if sum < 0 {
		b.Fatal("negative service or reason")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(frames)), "ns/frame")
}

// BenchmarkClassifyCopied classifies the sample capture as the poll loop
// does: in bursts of 32 frames, each burst first copied into 2 KiB
// buffers as net_pcap copies received frames into mbufs. The "copy" case
// is the copying alone; classification costs the difference, which is
// what the loop pays, unlike BenchmarkClassifySample (frames in their
// own memory, mostly out of cache) or a single hot frame.
func BenchmarkClassifyCopied(b *testing.B) {
	const burst = 32
	frames := sampleFrames(b)
	frames = frames[:len(frames)/burst*burst]
	c := mustCompile(b, daemonRules(), numCephServices, svcKernel)
	bufs := make([][2048]byte, burst)
	copied := make([][]byte, burst)
	pktLens := make([]uint32, burst)
	services := make([]uint8, burst)
	var reasons [NumReasons]uint64
	for _, classify := range []bool{false, true} {
		name := "copy"
		if classify {
			name = "copy+classify"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i := 0; i < len(frames); i += burst {
					for k, f := range frames[i : i+burst] {
						copied[k] = bufs[k][:copy(bufs[k][:], f)]
						pktLens[k] = uint32(len(copied[k]))
					}
					if classify {
						c.ClassifyBurst(copied, pktLens, services, &reasons)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(frames)), "ns/frame")
			if classify && reasons[ReasonNone] == 0 {
				b.Fatal("no frame classified")
			}
		})
	}
}
