package wire

import (
	"encoding/binary"
	"net/netip"
)

// CMAHeaderLen is the length of the rdma_cm header that opens REQ
// private data.
const CMAHeaderLen = 36

// CMAVersion is the only rdma_cm header version Linux accepts.
const CMAVersion = 0

// PSTCP is rdma_cm's RDMA_PS_TCP port space.
const PSTCP = 0x0106

// CMAMaxUserPrivateData is the REQ private data left to the application
// after the rdma_cm header.
const CMAMaxUserPrivateData = len(CMReq{}.PrivateData) - CMAHeaderLen

// ServiceID returns the IB service ID rdma_cm uses for port space ps and
// port: (ps << 16) + port.
func ServiceID(ps uint16, port uint16) uint64 {
	return uint64(ps)<<16 | uint64(port)
}

// ServicePort splits a service ID built by ServiceID. Callers should
// check that ServiceID(ps, port) == id, which fails for IDs with bits set
// above the port space.
func ServicePort(id uint64) (ps uint16, port uint16) {
	return uint16(id >> 16), uint16(id)
}

// CMAHeader is the rdma_cm private-data header (Linux struct cma_hdr):
// the active side's IP addresses and source port, which a RoCE passive
// side uses instead of a path record.
type CMAHeader struct {
	Version   uint8 // CMAVersion
	IPVersion uint8 // 4 or 6
	SrcPort   uint16
	// SrcAddr and DstAddr are 4-byte addresses when IPVersion is 4.
	SrcAddr, DstAddr netip.Addr
}

// Decode reads an rdma_cm header from the first CMAHeaderLen bytes of p.
// It fails with ErrBadRecord for a version other than CMAVersion or an
// IP version other than 4 and 6.
func (h *CMAHeader) Decode(p []byte) error {
	if len(p) < CMAHeaderLen {
		return errShortCMA
	}
	if p[0] != CMAVersion {
		return errCMAVersion
	}
	h.Version = p[0]
	h.IPVersion = p[1] >> 4
	h.SrcPort = binary.BigEndian.Uint16(p[2:4])
	switch h.IPVersion {
	case 4:
		h.SrcAddr = netip.AddrFrom4([4]byte(p[16:20]))
		h.DstAddr = netip.AddrFrom4([4]byte(p[32:36]))
	case 6:
		h.SrcAddr = netip.AddrFrom16([16]byte(p[4:20]))
		h.DstAddr = netip.AddrFrom16([16]byte(p[20:36]))
	default:
		return errCMAIPVersion
	}
	return nil
}

// Encode writes h into p[:CMAHeaderLen]; it panics if p is shorter. With
// IPVersion 4, IPv4 and IPv4-mapped addresses are written in the last 4
// bytes of each 16-byte slot; an address that does not fit the version
// is written as zeros.
func (h *CMAHeader) Encode(p []byte) {
	_ = p[CMAHeaderLen-1]
	clear(p[:CMAHeaderLen])
	p[0] = h.Version
	p[1] = h.IPVersion << 4
	binary.BigEndian.PutUint16(p[2:4], h.SrcPort)
	putCMAAddr(p[4:20], h.IPVersion, h.SrcAddr)
	putCMAAddr(p[20:36], h.IPVersion, h.DstAddr)
}

func putCMAAddr(p []byte, ver uint8, a netip.Addr) {
	switch {
	case ver == 4 && a.Unmap().Is4():
		a4 := a.Unmap().As4()
		copy(p[12:16], a4[:])
	case ver == 6 && a.IsValid():
		a16 := a.As16()
		copy(p, a16[:])
	}
}
