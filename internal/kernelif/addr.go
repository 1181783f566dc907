package kernelif

import (
	"net"
	"net/netip"
)

// prefixToIPNet keeps the host bits: 10.0.0.5/24 stays 10.0.0.5/24.
func prefixToIPNet(p netip.Prefix) *net.IPNet {
	a := p.Addr()
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(p.Bits(), a.BitLen())}
}
