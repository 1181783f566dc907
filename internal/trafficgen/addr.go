package trafficgen

import (
	"net"
	"net/netip"
)

// Peer numbers run from FirstPeer to LastPeer; peer p has IPv4 address
// 10.99.0.p, IPv6 address fd99::p (p in hexadecimal) and MAC
// 02:00:0a:63:00:p.
const (
	FirstPeer = 2
	LastPeer  = 50
)

// StorageVLAN is the 802.1Q VLAN ID of tagged frames.
const StorageVLAN = 99

// RoCEPriority is the 802.1Q priority (PCP) of tagged RoCEv2 frames; other
// tagged frames use priority 0.
const RoCEPriority = 3

// NodeMAC returns the MAC address of the node receiving the traffic.
func NodeMAC() net.HardwareAddr { return PeerMAC(1) }

// NodeIPv4 returns the node's IPv4 address, 10.99.0.1.
func NodeIPv4() netip.Addr { return PeerIPv4(1) }

// NodeIPv6 returns the node's IPv6 address, fd99::1.
func NodeIPv6() netip.Addr { return PeerIPv6(1) }

// NodePrefix4 returns the test subnet 10.99.0.0/24 that holds the node and
// every peer.
func NodePrefix4() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, 0, 0}), 24) }

// NodePrefix6 returns the test subnet fd99::/64 that holds the node and
// every peer.
func NodePrefix6() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom16([16]byte{0: 0xfd, 1: 0x99}), 64)
}

// PeerMAC returns the locally administered MAC of host p (1 is the node).
func PeerMAC(p int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x00, 0x0a, 0x63, 0x00, byte(p)}
}

// PeerIPv4 returns 10.99.0.p.
func PeerIPv4(p int) netip.Addr { return netip.AddrFrom4([4]byte{10, 99, 0, byte(p)}) }

// PeerIPv6 returns fd99::p.
func PeerIPv6(p int) netip.Addr {
	return netip.AddrFrom16([16]byte{0: 0xfd, 1: 0x99, 15: byte(p)})
}

// nodeSolicitedIPv6 returns the node's solicited-node multicast group
// ff02::1:ff00:1 (RFC 4291 section 2.7.1), the destination of neighbour
// solicitations for fd99::1.
func nodeSolicitedIPv6() netip.Addr {
	return netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff, 15: 0x01})
}

// nodeSolicitedMAC returns the Ethernet mapping of nodeSolicitedIPv6
// (RFC 2464 section 7).
func nodeSolicitedMAC() net.HardwareAddr { return net.HardwareAddr{0x33, 0x33, 0xff, 0x00, 0x00, 0x01} }

func broadcastMAC() net.HardwareAddr { return net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} }
