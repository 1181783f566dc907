package wire

import (
	"errors"

	"github.com/cephdpdkd/cephdpdkd/header"
)

// Sentinel errors. Parsers return either one of these or a package-level
// error wrapping one of them, so callers test with errors.Is and the
// packet path never allocates to report a malformed frame.
var (
	// ErrTruncated: the input ends before a header or length field says it should.
	ErrTruncated = errors.New("wire: truncated")
	// ErrTooManyVLANs: the frame carries more than header.MaxVLANs VLAN
	// tags. It is header.ErrTooManyVLANs, so either matches.
	ErrTooManyVLANs = header.ErrTooManyVLANs
	// ErrNotRoCE: the frame is well formed but is not a RoCEv2 packet
	// (other EtherType, IP protocol, UDP port, an IPv4 fragment, IPv6
	// extension headers).
	ErrNotRoCE = errors.New("wire: not a RoCEv2 packet")
	// ErrBadICRC: the invariant CRC trailer does not match the packet.
	ErrBadICRC = errors.New("wire: bad ICRC")
	// ErrBadPad: PadCnt is larger than the bytes left for payload.
	ErrBadPad = errors.New("wire: bad pad count")
	// ErrBadTVer: BTH transport header version is not 0.
	ErrBadTVer = errors.New("wire: bad BTH transport version")
	// ErrUnknownOpcode: the BTH opcode is not one this package decodes.
	ErrUnknownOpcode = errors.New("wire: unknown opcode")
	// ErrBadLength: a length field is inconsistent (IP vs UDP length,
	// payload on an opcode that carries none, ...).
	ErrBadLength = errors.New("wire: bad length")
	// ErrBadChecksum: the IPv4 header checksum does not verify.
	ErrBadChecksum = errors.New("wire: bad IPv4 header checksum")
	// ErrShortBuffer: an encode destination is too small.
	ErrShortBuffer = errors.New("wire: buffer too small")
	// ErrBadAddress: an address is missing or of the wrong family.
	ErrBadAddress = errors.New("wire: bad address")
	// ErrBadMAD: a MAD or CM message field has an invalid value.
	ErrBadMAD = errors.New("wire: bad MAD")
	// ErrBadRecord: a Ceph QP record or rdma_cm header is malformed.
	ErrBadRecord = errors.New("wire: bad record")
)

// wireError names the exact problem while matching its sentinel with
// errors.Is.
type wireError struct {
	msg      string
	sentinel error
}

func (e *wireError) Error() string { return e.msg }
func (e *wireError) Unwrap() error { return e.sentinel }

func wrap(msg string, sentinel error) error { return &wireError{msg, sentinel} }

// Wrapped variants built once, so that returning them costs nothing.
var (
	errShortEth     = wrap("wire: truncated ethernet header", ErrTruncated)
	errShortVLAN    = wrap("wire: truncated vlan tag", ErrTruncated)
	errShortIPv4    = wrap("wire: truncated ipv4 header", ErrTruncated)
	errShortIPv6    = wrap("wire: truncated ipv6 header", ErrTruncated)
	errShortUDP     = wrap("wire: truncated udp header", ErrTruncated)
	errShortBTH     = wrap("wire: truncated bth", ErrTruncated)
	errShortExt     = wrap("wire: truncated extension headers", ErrTruncated)
	errShortIP      = wrap("wire: ip length exceeds the frame", ErrTruncated)
	errShortICRC    = wrap("wire: truncated icrc trailer", ErrTruncated)
	errShortRETH    = wrap("wire: truncated reth", ErrTruncated)
	errShortAETH    = wrap("wire: truncated aeth", ErrTruncated)
	errShortDETH    = wrap("wire: truncated deth", ErrTruncated)
	errShortAtomic  = wrap("wire: truncated atomic eth", ErrTruncated)
	errShortAtomAck = wrap("wire: truncated atomic ack eth", ErrTruncated)
	errShortMAD     = wrap("wire: truncated mad", ErrTruncated)
	errShortCMA     = wrap("wire: truncated cma header", ErrTruncated)
	errShortCeph    = wrap("wire: truncated ceph qp record", ErrTruncated)

	errEtherType     = wrap("wire: not RoCEv2: ethertype is not ip", ErrNotRoCE)
	errIPProto       = wrap("wire: not RoCEv2: ip protocol is not udp", ErrNotRoCE)
	errIPVersion     = wrap("wire: not RoCEv2: ip version does not match ethertype", ErrNotRoCE)
	errFragment      = wrap("wire: not RoCEv2: ip fragment", ErrNotRoCE)
	errIPv6ExtHeader = wrap("wire: not RoCEv2: ipv6 extension headers", ErrNotRoCE)
	errUDPPort       = wrap("wire: not RoCEv2: udp destination port is not 4791", ErrNotRoCE)
	errIPv4Len       = wrap("wire: ipv4 total length shorter than its header", ErrBadLength)
	errIPv4IHL       = wrap("wire: ipv4 header length below 20", ErrBadLength)
	errUDPLen        = wrap("wire: udp length does not match ip length", ErrBadLength)
	errBadIP         = wrap("wire: malformed ip or udp header", ErrBadLength)
	errNoPayload     = wrap("wire: payload on an opcode that carries none", ErrBadLength)
	errRejARILen     = wrap("wire: rej ari length beyond 72 bytes", ErrBadMAD)
	errCMAVersion    = wrap("wire: cma header version is not 0", ErrBadRecord)
	errCMAIPVersion  = wrap("wire: cma header ip version is not 4 or 6", ErrBadRecord)
	errCephLayout    = wrap("wire: bad ceph qp record layout", ErrBadRecord)
	errCephHex       = wrap("wire: bad ceph qp record hex digit", ErrBadRecord)
	errAddrFamily    = wrap("wire: src and dst ip of different families", ErrBadAddress)
	errAddrInvalid   = wrap("wire: ip address not set", ErrBadAddress)
)
