package daemon_test

import (
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// chainFrame serializes an IPv4 frame of protocol proto to dstPort with
// n bytes of payload.
func chainFrame(t *testing.T, proto layers.IPProtocol, dstPort uint16, n int) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	var l4 gopacket.SerializableLayer
	if proto == layers.IPProtocolUDP {
		u := &layers.UDP{SrcPort: 49152, DstPort: layers.UDPPort(dstPort)}
		u.SetNetworkLayerForChecksum(ip)
		l4 = u
	} else {
		c := &layers.TCP{SrcPort: 40000, DstPort: layers.TCPPort(dstPort), ACK: true, Window: 512}
		c.SetNetworkLayerForChecksum(ip)
		l4 = c
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, l4, gopacket.Payload(make([]byte, n))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Packets received as mbuf chains (net_ring hands over the chains the
// test transmits, as scattered RX would) are classified from their first
// segment with lengths checked against the whole packet: a jumbo RoCEv2
// frame whose first segment holds its headers reaches the roce service;
// one whose headers straddle the first two segments is counted as
// multi_segment_headers, not truncated_ipv4.
func TestChainedMbufsClassified(t *testing.T) {
	d := startManual(t, cephConfig(t, "chain", "net_ring9", 1024))
	p := d.Pollers()[0]
	roce := chainFrame(t, layers.IPProtocolUDP, 4791, 4000)
	osd := chainFrame(t, layers.IPProtocolTCP, 6800, 3000)
	// Segments hold at most the pool's 2048-byte data room.
	for _, tc := range []struct {
		frame []byte
		cuts  []int // first bytes of the second and later segments
	}{
		{roce, []int{2048}},             // headers in the first of two
		{roce, []int{42, 1500, 3000}},   // exactly the headers first
		{osd, []int{54, 2000}},          // TCP header ends the first segment
		{roce, []int{30, 2000}},         // IPv4 header straddles
		{osd, []int{14, 40, 100, 2000}}, // Ethernet header alone, TCP header straddles
	} {
		var segs [][]byte
		prev := 0
		for _, c := range append(tc.cuts, len(tc.frame)) {
			segs = append(segs, tc.frame[prev:c])
			prev = c
		}
		if !pmd.TxChain(d.Port().ID(), 0, d.Pool().C(), segs) {
			t.Fatal("net_ring refused a chain")
		}
	}
	// Receive, then classify and dispatch: two iterations; a third,
	// idle, publishes the counters.
	for range 4 {
		p.PollOnce()
	}
	got := counts(d)
	if got["roce"] != 2 || got["osd"] != 1 || got["unclaimed"] != 2 {
		t.Errorf("services %v, want roce 2, osd 1, unclaimed 2", got)
	}
	for r := classify.ReasonNone + 1; r < classify.NumReasons; r++ {
		want := uint64(0)
		if r == classify.ReasonMultiSegmentHeaders {
			want = 2
		}
		if n := p.Malformed(r); n != want {
			t.Errorf("malformed %v: %d, want %d", r, n, want)
		}
	}
}
