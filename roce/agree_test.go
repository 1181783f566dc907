package roce

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/header"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// agreeFrame builds a RoCEv2 SEND from A to B's QP 0x99 (which does not
// exist), tagged with v, over IPv6 if v6.
func agreeFrame(t *testing.T, v header.VLANs, v6 bool) []byte {
	t.Helper()
	h := wire.FrameHeader{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, VLANs: v, TTL: 64, UDPSrc: 49152}
	if v6 {
		h.SrcIP, h.DstIP = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	}
	p := wire.Packet{BTH: wire.BTH{Opcode: wire.OpRCSendOnly, PKey: wire.DefaultPKey, DestQP: 0x99}}
	buf := make([]byte, 256)
	n, err := wire.BuildFrame(buf, &h, &p, []byte("agreement"))
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// refresh recomputes the IPv4 header checksum of an untagged frame and
// its ICRC, after a change.
func refresh(t *testing.T, f []byte) []byte {
	t.Helper()
	if header.Ethernet(f).Type() == header.EtherTypeIPv4 {
		ip := header.IPv4(f[header.EthernetHeaderLen:])
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:12], ^header.Checksum(ip[:ip.HeaderLength()]))
	}
	if err := wire.PutICRC(f); err != nil {
		t.Fatal(err)
	}
	return f
}

// insert returns f with b inserted at off.
func insert(f []byte, off int, b ...byte) []byte {
	return append(append(append([]byte(nil), f[:off]...), b...), f[off:]...)
}

// TestClassifierAgreement feeds frames to the classifier, with the
// daemon's rule for RoCEv2, and to an endpoint. Both read the headers by
// package header's rules, so a frame the classifier refuses as malformed
// never reaches RoCE, and one the endpoint drops it drops for a reason of
// its own that it counts: an IPv4 fragment or IPv6 extension headers
// (RoCEv2 sends neither: not RoCE), a UDP length short of the IP payload
// or a bad IPv4 header checksum (which the classifier does not verify:
// malformed).
func TestClassifierAgreement(t *testing.T) {
	const svcRoCE, svcKernel = 1, 0
	c, err := classify.Compile([]classify.Rule{
		{Service: svcRoCE, Proto: classify.ProtoUDP, DstPorts: []classify.PortRange{{Lo: wire.UDPPort, Hi: wire.UDPPort}}},
	}, 2, svcKernel)
	if err != nil {
		t.Fatal(err)
	}
	const ipOff, udpOff = header.EthernetHeaderLen, header.EthernetHeaderLen + header.IPv4MinimumSize
	plain := agreeFrame(t, header.VLANs{}, false)
	mod := func(f func(f []byte) []byte) []byte { return f(bytes.Clone(plain)) }
	threeTags := insert(agreeFrame(t, header.QinQ(1, 2), false), 12, 0x81, 0x00, 0x00, 0x03)

	for _, tc := range []struct {
		name    string
		frame   []byte
		service int
		reason  classify.Reason
		counter string // the EndpointStats field the frame lands in
	}{
		{"ipv4", plain, svcRoCE, classify.ReasonNone, "NoQP"},
		{"802.1q", agreeFrame(t, header.Dot1Q(100), false), svcRoCE, classify.ReasonNone, "NoQP"},
		{"qinq", agreeFrame(t, header.QinQ(200, 100), false), svcRoCE, classify.ReasonNone, "NoQP"},
		{"ethernet padding", append(bytes.Clone(plain), make([]byte, 8)...), svcRoCE, classify.ReasonNone, "NoQP"},
		{"ipv4 options skipped", mod(func(f []byte) []byte {
			f = insert(f, udpOff, 1, 1, 1, 0) // NOP NOP NOP EOL
			f[ipOff] = 0x46
			binary.BigEndian.PutUint16(f[ipOff+2:], uint16(len(f)-ipOff))
			return refresh(t, f)
		}), svcRoCE, classify.ReasonNone, "NoQP"},
		// A valid IPv6 frame to an address the endpoint does not have.
		{"ipv6", agreeFrame(t, header.VLANs{}, true), svcRoCE, classify.ReasonNone, "NotLocal"},

		{"three tags", threeTags, svcKernel, classify.ReasonTooManyVLANs, "TooManyVLANs"},
		{"ipv4 total length beyond the frame", mod(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[ipOff+2:], uint16(len(f)))
			return f
		}), svcKernel, classify.ReasonTruncatedIPv4, "Malformed"},
		{"udp length beyond the datagram", mod(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[udpOff+4:], uint16(len(f)))
			return f
		}), svcKernel, classify.ReasonBadUDPLength, "Malformed"},

		// The classifier hands these to RoCE, which counts its refusal.
		{"ipv4 first fragment", mod(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[ipOff+6:], header.IPv4FlagMoreFragments)
			return refresh(t, f)
		}), svcRoCE, classify.ReasonNone, "NotRoCE"},
		{"ipv6 destination options", func() []byte {
			f := agreeFrame(t, header.VLANs{}, true)
			const udp6 = header.EthernetHeaderLen + header.IPv6MinimumSize
			f = insert(f, udp6, header.ProtoUDP, 0, 1, 4, 0, 0, 0, 0) // PadN
			f[header.EthernetHeaderLen+6] = header.IPv6ExtDestOptions
			ip := header.IPv6(f[header.EthernetHeaderLen:])
			binary.BigEndian.PutUint16(ip[4:6], uint16(ip.PayloadLength()+8))
			return refresh(t, f)
		}(), svcRoCE, classify.ReasonNone, "NotRoCE"},
		{"udp length short of the datagram", mod(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[udpOff+4:], uint16(len(f)-udpOff-1))
			return refresh(t, f)
		}), svcRoCE, classify.ReasonNone, "Malformed"},
		{"ipv4 header checksum", mod(func(f []byte) []byte {
			f[ipOff+10] ^= 0xff
			return f
		}), svcRoCE, classify.ReasonNone, "Malformed"},
		// Not for RoCE: later fragments carry no ports.
		{"ipv4 later fragment", mod(func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[ipOff+6:], 185)
			return refresh(t, f)
		}), svcKernel, classify.ReasonNone, "NotRoCE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := tc.frame[:len(tc.frame):len(tc.frame)]
			if s, r := c.Classify(frame); s != tc.service || r != tc.reason {
				t.Errorf("Classify = service %d, %v; want %d, %v", s, r, tc.service, tc.reason)
			}
			n := newTestNet(t, memlink.Config{}, EndpointConfig{})
			before := n.b.Stats()
			if n.A.Link.SendBurst([][]byte{frame}) != 1 {
				t.Fatal("link full")
			}
			n.Poll()
			if got := statsDelta(before, n.b.Stats()); len(got) != 1 || got[0] != tc.counter {
				t.Errorf("endpoint counted the frame under %v, want %s", got, tc.counter)
			}
		})
	}
}

// statsDelta names the drop and delivery counters of EndpointStats that
// differ between a and b.
func statsDelta(a, b EndpointStats) []string {
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		name := va.Type().Field(i).Name
		if name == "RxFrames" || name == "TxFrames" {
			continue
		}
		if va.Field(i).Uint() != vb.Field(i).Uint() {
			out = append(out, name)
		}
	}
	return out
}
