package header

import (
	"bytes"
	"testing"
)

// checkFunc is a Check method: b is the first segment of a packet of size
// bytes.
type checkFunc func(b []byte, size int) error

// validFunc is an IsValid method.
type validFunc func(b []byte, size int) bool

// checkCuts holds check to its contract on b: it reads only b (capacity
// cut to length, so reslicing past it panics), does not modify it, and
// when b is the first k bytes of the packet, for every k, gives the
// whole-packet result or ErrSplitHeader, and ErrSplitHeader exactly for
// the k below need when the packet is accepted. need is where the
// accepted packet's header ends. valid, when not nil, must agree with
// check on every cut.
func checkCuts(t *testing.T, b []byte, check checkFunc, valid validFunc, need func(b []byte) int, known ...error) error {
	t.Helper()
	b = b[:len(b):len(b)]
	orig := bytes.Clone(b)
	whole := check(b, len(b))
	if valid != nil && valid(b, len(b)) != (whole == nil) {
		t.Fatalf("%x: IsValid %v, Check %v", b, valid(b, len(b)), whole)
	}
	if !bytes.Equal(b, orig) {
		t.Fatal("check modified its input")
	}
	if whole == ErrSplitHeader {
		t.Fatalf("%x: ErrSplitHeader for a whole packet", b)
	}
	if whole != nil && !isOneOf(whole, known) {
		t.Fatalf("%x: unknown error %v", b, whole)
	}
	end := -1
	if whole == nil {
		end = need(b)
		if end > len(b) {
			t.Fatalf("%x: accepted, header ends at %d beyond %d bytes", b, end, len(b))
		}
	}
	for k := range len(b) {
		got := check(b[:k:k], len(b))
		if valid != nil && valid(b[:k:k], len(b)) != (got == nil) {
			t.Fatalf("%x cut to %d: IsValid %v, Check %v", b, k, valid(b[:k:k], len(b)), got)
		}
		switch {
		case got != whole && got != ErrSplitHeader:
			t.Fatalf("%x cut to %d: %v, whole %v", b, k, got, whole)
		case whole == nil && (got == nil) != (k >= end):
			t.Fatalf("%x cut to %d, header ends at %d: %v", b, k, end, got)
		}
	}
	return whole
}

func isOneOf(err error, errs []error) bool {
	for _, e := range errs {
		if err == e {
			return true
		}
	}
	return false
}

// FuzzIPv4 checks IPv4.Check against IsValid and its chain contract, and
// that the accessors of an accepted header stay inside it.
func FuzzIPv4(f *testing.F) {
	udp := udpDatagram(49152, 4791, []byte("payload"))
	f.Add(ipv4Packet(f, IPv4FlagDontFragment, ProtoUDP, nil, udp))
	f.Add(ipv4Packet(f, IPv4FlagMoreFragments, ProtoTCP, []byte{0x94, 4, 0, 0}, udp))
	f.Add(ipv4Packet(f, 185, ProtoUDP, make([]byte, 40), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte, size int) error { return IPv4(b).Check(size) }
		valid := func(b []byte, size int) bool { return IPv4(b).IsValid(size) }
		err := checkCuts(t, b, check, valid, func(b []byte) int { return IPv4(b).HeaderLength() },
			ErrTruncatedIPv4, ErrBadIPv4Header, ErrBadIPv4Length)
		if err != nil {
			return
		}
		ip := IPv4(b[:len(b):len(b)])
		ihl, total := ip.HeaderLength(), ip.TotalLength()
		if ihl < IPv4MinimumSize || ihl > IPv4MaximumHeaderSize || total < ihl || total > len(b) || ip.Version() != IPv4Version {
			t.Fatalf("%x: accepted with header %d, total %d", b, ihl, total)
		}
		if ip.IsFragment() != (ip.FragmentOffset() != 0 || ip.FlagsFragmentOffset()&IPv4FlagMoreFragments != 0) {
			t.Fatalf("%x: IsFragment %v", b, ip.IsFragment())
		}
		ip.IsChecksumValid()
		_, _ = ip.SourceAddress(), ip.DestinationAddress()
	})
}

// FuzzIPv6 checks IPv6.Check and ParseExtensions: their chain contract,
// IsValid, and that the upper-layer header an accepted chain points at
// lies within the packet.
func FuzzIPv6(f *testing.F) {
	udp := udpDatagram(1, 4791, []byte("data"))
	f.Add(ipv6Packet(ProtoUDP, udp))
	f.Add(ipv6Packet(IPv6ExtHopByHop, cat(ext(IPv6ExtRouting, 0, false), ext(IPv6ExtAuth, 2, true), ext(IPv6ExtFragment, 1, false), fragment(ProtoUDP, 0, true), udp)))
	f.Add(ipv6Packet(IPv6ExtFragment, cat(fragment(ProtoTCP, 185, false), udp)))
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		check := func(b []byte, size int) error { return IPv6(b).Check(size) }
		valid := func(b []byte, size int) bool { return IPv6(b).IsValid(size) }
		err := checkCuts(t, b, check, valid, func([]byte) int { return IPv6MinimumSize }, ErrTruncatedIPv6, ErrBadIPv6Header)
		if err != nil {
			return
		}
		ip := IPv6(b)
		end := IPv6MinimumSize + ip.PayloadLength()
		var p IPv6Payload
		exts := func(seg []byte, _ int) error {
			if len(seg) < IPv6MinimumSize {
				return ErrSplitHeader // what Check says of such a segment
			}
			return IPv6(seg).ParseExtensions(&p)
		}
		err = checkCuts(t, b, exts, nil, func([]byte) int { return p.Offset }, ErrBadIPv6ExtHeader, ErrTooManyIPv6ExtHeaders)
		if err != nil {
			return
		}
		ip.ParseExtensions(&p)
		if p.Offset < IPv6MinimumSize || p.Offset > end || IsIPv6ExtHeader(p.Protocol) ||
			p.Offset > IPv6MinimumSize+MaxIPv6ExtHeaders*2048 || p.FragmentOffset != 0 && !p.Fragment {
			t.Fatalf("%x: payload %+v, packet ends at %d", b, p, end)
		}
		_, _, _, _ = ip.TrafficClass(), ip.FlowLabel(), ip.SourceAddress(), ip.DestinationAddress()
	})
}

// FuzzTransport checks TCP.Check and UDP.Check: their chain contract,
// IsValid, and the lengths of accepted headers.
func FuzzTransport(f *testing.F) {
	f.Add(udpDatagram(49152, 4791, []byte("abc")))
	tcp := make([]byte, 32)
	tcp[12] = 8 << 4
	f.Add(tcp)
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		tcpCheck := func(b []byte, size int) error { return TCP(b).Check(size) }
		tcpValid := func(b []byte, size int) bool { return TCP(b).IsValid(size) }
		err := checkCuts(t, b, tcpCheck, tcpValid, func(b []byte) int { return TCP(b).DataOffset() }, ErrTruncatedTCP, ErrBadTCPHeader)
		if err == nil && (TCP(b).DataOffset() < TCPMinimumSize || TCP(b).DataOffset() > len(b)) {
			t.Fatalf("%x: TCP accepted with data offset %d", b, TCP(b).DataOffset())
		}
		udpCheck := func(b []byte, size int) error { return UDP(b).Check(size) }
		udpValid := func(b []byte, size int) bool { return UDP(b).IsValid(size) }
		err = checkCuts(t, b, udpCheck, udpValid, func([]byte) int { return UDPMinimumSize }, ErrTruncatedUDP, ErrBadUDPLength)
		if err == nil && (UDP(b).Length() < UDPMinimumSize || UDP(b).Length() > len(b)) {
			t.Fatalf("%x: UDP accepted with length %d", b, UDP(b).Length())
		}
	})
}

// FuzzARP checks ARP.Check's chain contract and that the addresses of an
// accepted packet lie inside it, where Len says.
func FuzzARP(f *testing.F) {
	b := make([]byte, ARPSize)
	ARP(b).Encode(&ARPFields{Op: ARPRequest, SenderHardwareAddr: macSrc, SenderProtocolAddr: [4]byte{10, 0, 0, 1}})
	f.Add(b)
	f.Add(unhex(f, "001b", "0800", "08", "04", "0002", "0102030405060708", "0a000001", "1112131415161718", "0a000002"))
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:len(b):len(b)]
		check := func(b []byte, size int) error { return ARP(b).Check(size) }
		valid := func(b []byte, size int) bool { return ARP(b).IsValid(size) }
		if checkCuts(t, b, check, valid, func(b []byte) int { return ARP(b).Len() }, ErrTruncatedARP) != nil {
			return
		}
		a := ARP(b)
		h, p := a.HardwareAddressLength(), a.ProtocolAddressLength()
		got := len(a.SenderHardwareAddress()) + len(a.SenderProtocolAddress()) + len(a.TargetHardwareAddress()) + len(a.TargetProtocolAddress())
		if got != 2*h+2*p || a.Len() != ARPFixedSize+got {
			t.Fatalf("%x: addresses of %d bytes, Len %d", b, got, a.Len())
		}
		if a.IsEthernetIPv4() && a.Len() != ARPSize {
			t.Fatalf("%x: Ethernet/IPv4 ARP of %d bytes", b, a.Len())
		}
	})
}
