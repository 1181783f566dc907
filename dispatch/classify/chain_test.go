package classify

import (
	"bytes"
	"testing"

	"github.com/google/gopacket/layers"
)

// headersEnd is where the headers ParseChain must find in the first
// segment end: the transport header, the ports of a first fragment, the
// ARP body, or the network header for other protocols.
func headersEnd(h *Headers) int {
	switch {
	case h.EtherType == EtherTypeARP:
		return h.End
	case h.IPVersion == 0:
		return h.L3Offset
	case h.Fragment && h.HasPorts:
		return h.L4Offset + 4
	}
	return h.PayloadOffset
}

// TestParseChainCuts splits every valid frame after each of its bytes, as
// an mbuf chain would: the packet parses from its first segment exactly
// as whole once the headers fit in that segment, and is refused with
// ReasonMultiSegmentHeaders, never a length error, before.
func TestParseChainCuts(t *testing.T) {
	for _, fc := range validFrames(t) {
		t.Run(fc.name, func(t *testing.T) {
			end := headersEnd(&fc.want)
			for k := 0; k < len(fc.frame); k++ {
				var h Headers
				r := ParseChain(fc.frame[:k:k], len(fc.frame), &h)
				switch {
				case k >= end && (r != ReasonNone || h != fc.want):
					t.Fatalf("first segment of %d bytes (headers end at %d): %v, headers %+v; want %+v", k, end, r, h, fc.want)
				case k < end && r != ReasonMultiSegmentHeaders:
					t.Fatalf("first segment of %d bytes (headers end at %d): %v, want %v", k, end, r, ReasonMultiSegmentHeaders)
				}
			}
		})
	}
}

// chainCase is a packet received as a chain: first is its first segment,
// pktLen its whole length.
type chainCase struct {
	name    string
	first   []byte
	pktLen  int
	service int
	reason  Reason
}

func chainCases(t *testing.T) []chainCase {
	t.Helper()
	ip := ipv4(layers.IPProtocolUDP)
	// A jumbo RoCEv2 frame, as a port with 2 KiB mbufs receives it.
	jumbo := serialize(t, ethernet(layers.EthernetTypeIPv4), ip, udp(49152, 4791, ip), make(rawLayer, 8900))
	ip = ipv4(layers.IPProtocolTCP)
	osd := serialize(t, ethernet(layers.EthernetTypeQinQ), dot1q(200, layers.EthernetTypeDot1Q), dot1q(100, layers.EthernetTypeIPv4),
		ip, tcp(40000, 6800, ip), make(rawLayer, 9000))
	// IPv4 total length beyond the packet: truncated whatever the chain.
	short := bytes.Clone(jumbo[:2048])
	short[16], short[17] = 0x23, 0x00 // 8960 > 8942 bytes of IP packet

	arp := serialize(t, ethernet(layers.EthernetTypeARP), arpRequest(roceIP))
	return []chainCase{
		{"jumbo roce, 2 KiB first segment", jumbo[:2048], len(jumbo), svcRoCE, ReasonNone},
		{"jumbo roce, headers only in first segment", jumbo[:42], len(jumbo), svcRoCE, ReasonNone},
		{"jumbo roce, ipv4 header straddles", jumbo[:30], len(jumbo), svcKernel, ReasonMultiSegmentHeaders},
		{"jumbo roce, udp header straddles", jumbo[:38], len(jumbo), svcKernel, ReasonMultiSegmentHeaders},
		{"jumbo roce, ethernet header straddles", jumbo[:10], len(jumbo), svcKernel, ReasonMultiSegmentHeaders},
		{"qinq osd, 2 KiB first segment", osd[:2048], len(osd), svcOSD, ReasonNone},
		{"qinq osd, second tag straddles", osd[:20], len(osd), svcKernel, ReasonMultiSegmentHeaders},
		{"qinq osd, tcp header straddles", osd[:60], len(osd), svcKernel, ReasonMultiSegmentHeaders},
		{"ipv4 length beyond the packet", short[:1024], 2048, svcKernel, ReasonTruncatedIPv4},
		{"arp, body straddles", arp[:30], len(arp), svcKernel, ReasonMultiSegmentHeaders},
		{"arp, padded past the first segment", arp[:42], 60, svcRoCE, ReasonNone},
		{"single segment", jumbo, len(jumbo), svcRoCE, ReasonNone},
		// pkt_len below data_len: only pkt_len bytes count.
		{"packet shorter than its segment", jumbo[:2048], 30, svcKernel, ReasonTruncatedIPv4},
	}
}

// TestClassifyChain classifies packets whose first segment is shorter
// than the packet. Classify on the first segment alone calls most of them
// truncated.
func TestClassifyChain(t *testing.T) {
	c := mustCompile(t, cephRules(), numCephServices, svcKernel)
	for _, tc := range chainCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			first := tc.first[:len(tc.first):len(tc.first)]
			service, reason := c.ClassifyChain(first, tc.pktLen)
			if service != tc.service || reason != tc.reason {
				t.Errorf("ClassifyChain = service %d, %v; want %d, %v", service, reason, tc.service, tc.reason)
			}
			var h Headers
			if r := ParseChain(first, tc.pktLen, &h); r != tc.reason {
				t.Errorf("ParseChain = %v, want %v", r, tc.reason)
			}
			if tc.reason == ReasonNone && h.End > max(tc.pktLen, len(first)) {
				t.Errorf("End %d beyond the packet", h.End)
			}
		})
	}
}

// TestClassifyBurst classifies a burst mixing whole frames, malformed
// ones and chains: each packet gets the service and reason
// ClassifyChain gives it alone, and the reasons are counted once each.
func TestClassifyBurst(t *testing.T) {
	c := mustCompile(t, cephRules(), numCephServices, svcKernel)
	var frames [][]byte
	var lens []uint32
	for _, fc := range validFrames(t) {
		for _, f := range append([][]byte{fc.frame}, mutations(fc.frame, 40)...) {
			frames = append(frames, f[:len(f):len(f)])
			lens = append(lens, uint32(len(f)))
		}
	}
	for _, tc := range chainCases(t) {
		frames = append(frames, tc.first[:len(tc.first):len(tc.first)])
		lens = append(lens, uint32(tc.pktLen))
	}
	services := make([]uint8, len(frames))
	var reasons, want [NumReasons]uint64
	c.ClassifyBurst(frames, lens, services, &reasons)
	for i, f := range frames {
		s, r := c.ClassifyChain(f, int(lens[i]))
		want[r]++
		if int(services[i]) != s {
			t.Errorf("packet %d (%d of %d bytes, %x): service %d, ClassifyChain gives %d", i, len(f), lens[i], f, services[i], s)
		}
	}
	if reasons != want {
		t.Errorf("reasons counted %v, want %v", reasons, want)
	}
	if want[ReasonNone] == 0 || want[ReasonMultiSegmentHeaders] == 0 || want[ReasonTruncatedIPv4] == 0 {
		t.Fatalf("the burst lacks a kind of packet: reasons %v", want)
	}
	if a := testing.AllocsPerRun(100, func() { c.ClassifyBurst(frames, lens, services, &reasons) }); a != 0 {
		t.Errorf("ClassifyBurst: %v allocations", a)
	}
}

func TestClassifyChainDoesNotAllocate(t *testing.T) {
	c := mustCompile(t, cephRules(), numCephServices, svcKernel)
	cases := chainCases(t)
	if a := testing.AllocsPerRun(100, func() {
		for _, tc := range cases {
			c.ClassifyChain(tc.first, tc.pktLen)
		}
	}); a != 0 {
		t.Errorf("ClassifyChain: %v allocations", a)
	}
}

// FuzzParseChain splits a frame into a first segment and the rest: what
// ParseChain accepts from the first segment, Parse accepts from the whole
// frame with the same headers, and what it refuses for anything but
// ReasonMultiSegmentHeaders, Parse refuses for the same reason.
func FuzzParseChain(f *testing.F) {
	for _, fc := range validFrames(f) {
		f.Add(fc.frame, uint16(headersEnd(&fc.want)))
		f.Add(fc.frame, uint16(headersEnd(&fc.want)-1))
	}
	f.Fuzz(func(t *testing.T, frame []byte, cut uint16) {
		frame = frame[:len(frame):len(frame)]
		k := min(int(cut), len(frame))
		var whole, chain Headers
		want := Parse(frame, &whole)
		got := ParseChain(frame[:k:k], len(frame), &chain)
		switch {
		case got == ReasonMultiSegmentHeaders:
			if k == len(frame) {
				t.Fatal("multi-segment reason for a single segment")
			}
		case got != want:
			t.Fatalf("first %d of %d bytes: ParseChain %v, Parse %v", k, len(frame), got, want)
		case got == ReasonNone && chain != whole:
			t.Fatalf("first %d of %d bytes: headers %+v, whole frame %+v", k, len(frame), chain, whole)
		case got == ReasonNone && (headersEnd(&chain) > k || chain.End > len(frame)):
			t.Fatalf("first %d of %d bytes: headers %+v read past the segment", k, len(frame), chain)
		}
	})
}
