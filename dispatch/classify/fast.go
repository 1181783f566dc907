package classify

import (
	"encoding/binary"
	"math/bits"

	"github.com/cephdpdkd/cephdpdkd/header"
)

// Classify runs for every received packet, so it does not go through Parse
// and Match for the frames it sees most: well-formed IPv4, IPv6 without
// extension headers, and ARP, untagged or behind up to header.MaxVLANs
// VLAN tags (802.1Q, QinQ). For those it reads the few header fields rules
// look at straight from the frame, checks exactly what Parse checks, and
// combines tables that Compile has folded, so that a TCP or UDP packet
// costs a protocol entry and an entry per port, and an address lookup only
// when the first rule left standing has a prefix. Every other frame,
// malformed ones included, takes Parse and Match, and Parse names the
// reason.
//
// The fast path is one function: on a frame every few nanoseconds, each
// call it saves is worth keeping the IP cases inline.

// fastTables are the lookup tables of Classify's fast path, folded from
// those Match uses.
type fastTables struct {
	// ip4 and ip6, indexed by protocol, are the rules accepting the
	// ethertype, the protocol, some address of the family and, for a
	// protocol other than TCP and UDP, a packet without ports.
	ip4, ip6 [256]uint64
	// walk4 and walk6 are the rules some but not all addresses of the
	// family match: only they need the address looked up.
	walk4, walk6 uint64
	// arp4 is the mask of ARP frames with an IPv4 target address before
	// its lookup, arpNoAddr that of the others.
	arp4, arpNoAddr uint64
	// nonIP is the mask of frames of other ethertypes, less the lookup of
	// their ethertype.
	nonIP uint64
}

// buildFast folds the tables of c into c.fast.
func (c *Classifier) buildFast() {
	f := &c.fast
	any4, all4 := c.dst4.span()
	any6, all6 := c.dst6.span()
	f.walk4, f.walk6 = any4&^all4, any6&^all6
	ether4 := c.etherType.lookup(EtherTypeIPv4) & any4
	ether6 := c.etherType.lookup(EtherTypeIPv6) & any6
	for p := range f.ip4 {
		m := c.proto[p]
		if uint8(p) != ProtoTCP && uint8(p) != ProtoUDP {
			m &= c.noPorts
		}
		f.ip4[p] = ether4 & m
		f.ip6[p] = ether6 & m
	}
	arp := c.etherType.lookup(EtherTypeARP) & c.protoNonIP & c.noPorts
	f.arp4 = arp & any4
	f.arpNoAddr = arp & c.noAddr
	f.nonIP = c.protoNonIP & c.noPorts & c.noAddr
}

// span returns the rules that some address matches and those every
// address matches.
func (t *trie) span() (some, every uint64) {
	every = ^uint64(0)
	for _, m := range t.masks {
		some |= m
		every &= m
	}
	return some, every
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// classify is Classify. It also reports whether the fast path took the
// frame and, if it did, the rules it found matching, so that tests can
// check them. Its checks are package header's, through the inlined
// IsValid forms of the Check methods Parse calls.
func (c *Classifier) classify(frame []byte) (service int, reason Reason, fast bool, m uint64) {
	if len(frame) < header.EthernetHeaderLen {
		return c.defaultService, ReasonTruncatedEthernet, false, 0
	}
	et := header.Ethernet(frame).Type()
	b := frame[header.EthernetHeaderLen:]
	if header.IsVLAN(et) {
		// Untagged frames, the most, skip the loop.
		var off int
		var ok bool
		if et, off, ok = header.InnerEtherType(frame); !ok {
			// Too many tags or cut off: Parse says which.
			service, reason = c.classifySlow(frame)
			return service, reason, false, 0
		}
		b = frame[off:]
	}
	// Each case sets fast once it has checked what Parse checks; a break
	// before that leaves the frame to Parse.
	switch et {
	case EtherTypeIPv4:
		ip := header.IPv4(b)
		if !ip.IsValid(len(b)) {
			break
		}
		proto := ip.Protocol()
		l4 := b[ip.HeaderLength():ip.TotalLength()]
		m = c.fast.ip4[proto]
		if ff := ip.FlagsFragmentOffset(); header.IPv4IsFragment(ff) {
			m &= c.fragmentPorts(proto, header.IPv4FragmentOffset(ff) == 0, l4)
		} else if proto == ProtoTCP || proto == ProtoUDP {
			if len(l4) < header.UDPMinimumSize || !transportValid(proto, l4) {
				break
			}
			m &= c.dstPorts.lookup(be16(l4[2:4])) & c.srcPorts.lookup(be16(l4[0:2]))
		}
		if m&-m&c.fast.walk4 != 0 {
			m &= c.dst4.lookup4(be32(b[16:20]))
		}
		fast = true
	case EtherTypeIPv6:
		ip := header.IPv6(b)
		if !ip.IsValid(len(b)) {
			break
		}
		next := ip.NextHeader()
		if header.IsIPv6ExtHeader(next) {
			break
		}
		l4 := b[header.IPv6MinimumSize : header.IPv6MinimumSize+ip.PayloadLength()]
		m = c.fast.ip6[next]
		if next == ProtoTCP || next == ProtoUDP {
			if len(l4) < header.UDPMinimumSize || !transportValid(next, l4) {
				break
			}
			m &= c.dstPorts.lookup(be16(l4[2:4])) & c.srcPorts.lookup(be16(l4[0:2]))
		}
		if m&-m&c.fast.walk6 != 0 {
			m &= c.dst6.lookup(b[24:40])
		}
		fast = true
	case EtherTypeARP:
		m, fast = c.classifyARP(b)
	default:
		m, fast = c.etherType.lookup(et)&c.fast.nonIP, true
	}
	if !fast {
		service, reason = c.classifySlow(frame)
		return service, reason, false, 0
	}
	// For an empty mask, TrailingZeros64 is 64: the default service.
	return c.service[bits.TrailingZeros64(m)], ReasonNone, true, m
}

// transportValid reports whether l4, the rest of an unfragmented IP packet
// with protocol TCP or UDP, holds the header Parse accepts. Callers check
// first that l4 holds UDPMinimumSize bytes, as both headers do: it tells
// the compiler the ports they read are there, and keeps this function
// small enough to inline.
func transportValid(proto uint8, l4 []byte) bool {
	if proto == ProtoTCP {
		return header.TCP(l4).IsValid(len(l4))
	}
	return header.UDP(l4).IsValid(len(l4))
}

// fragmentPorts returns the rules an IPv4 fragment with protocol proto,
// the first of its datagram if first, matches by its ports: only a first
// fragment has them, and then only if it is long enough; they are not
// checked, as the transport header may be split.
func (c *Classifier) fragmentPorts(proto uint8, first bool, l4 []byte) uint64 {
	if first && (proto == ProtoTCP || proto == ProtoUDP) && len(l4) >= header.PortsSize {
		return c.dstPorts.lookup(be16(l4[2:4])) & c.srcPorts.lookup(be16(l4[0:2]))
	}
	return c.noPorts
}

// classifyARP is the fast path for the ARP packet b: it returns the rules
// matching it, and false if b is malformed.
func (c *Classifier) classifyARP(b []byte) (uint64, bool) {
	a := header.ARP(b)
	if !a.IsValid(len(b)) {
		return 0, false
	}
	if a.ProtocolType() != EtherTypeIPv4 || a.ProtocolAddressLength() != 4 {
		return c.fast.arpNoAddr, true
	}
	m := c.fast.arp4
	if m&-m&c.fast.walk4 != 0 {
		m &= c.dst4.lookup4(be32(a.TargetProtocolAddress()))
	}
	return m, true
}
