package wire

import "encoding/binary"

// UDPPort is the IANA RoCEv2 UDP destination port.
const UDPPort = 4791

// Header lengths in bytes.
const (
	BTHLen          = 12
	RETHLen         = 16
	AETHLen         = 4
	DETHLen         = 8
	ImmLen          = 4
	IETHLen         = 4
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
	ICRCLen         = 4
)

// DefaultPKey is the full-membership default partition key rxe and
// rdma_cm use on RoCE.
const DefaultPKey = 0xFFFF

// BTH is the base transport header.
//
// The reserved bits (resv6 in byte 4, resv7 in byte 8) are not kept:
// Decode ignores them and Encode writes zeros, as the IBA requires.
type BTH struct {
	Opcode Opcode
	SE     bool  // solicited event
	MigReq bool  // migration state
	PadCnt uint8 // 0..3 pad bytes after the payload
	TVer   uint8 // transport header version; 0 is the only valid one
	PKey   uint16
	FECN   bool   // forward explicit congestion notification
	BECN   bool   // backward explicit congestion notification
	DestQP uint32 // 24 bits
	AckReq bool
	PSN    uint32 // 24 bits
}

// Decode reads a BTH from the first BTHLen bytes of p.
func (b *BTH) Decode(p []byte) error {
	if len(p) < BTHLen {
		return errShortBTH
	}
	b.Opcode = Opcode(p[0])
	b.SE = p[1]&0x80 != 0
	b.MigReq = p[1]&0x40 != 0
	b.PadCnt = p[1] >> 4 & 3
	b.TVer = p[1] & 0x0F
	b.PKey = binary.BigEndian.Uint16(p[2:4])
	b.FECN = p[4]&0x80 != 0
	b.BECN = p[4]&0x40 != 0
	b.DestQP = binary.BigEndian.Uint32(p[4:8]) & PSNMask
	b.AckReq = p[8]&0x80 != 0
	b.PSN = binary.BigEndian.Uint32(p[8:12]) & PSNMask
	return nil
}

// Encode writes b into p[:BTHLen]. Like binary.BigEndian.PutUint32, it
// requires len(p) >= BTHLen and panics otherwise; frame builders size
// their buffers with FrameLen. Fields wider than their wire width are
// truncated (PadCnt to 2 bits, TVer to 4, DestQP and PSN to 24).
func (b *BTH) Encode(p []byte) {
	_ = p[BTHLen-1]
	p[0] = byte(b.Opcode)
	p[1] = b.PadCnt&3<<4 | b.TVer&0x0F
	if b.SE {
		p[1] |= 0x80
	}
	if b.MigReq {
		p[1] |= 0x40
	}
	binary.BigEndian.PutUint16(p[2:4], b.PKey)
	binary.BigEndian.PutUint32(p[4:8], b.DestQP&PSNMask)
	if b.FECN {
		p[4] |= 0x80
	}
	if b.BECN {
		p[4] |= 0x40
	}
	binary.BigEndian.PutUint32(p[8:12], b.PSN&PSNMask)
	if b.AckReq {
		p[8] |= 0x80
	}
}

// RETH is the RDMA extended transport header of WRITE FIRST/ONLY and READ
// REQUEST.
type RETH struct {
	VA     uint64
	RKey   uint32
	DMALen uint32 // total bytes of the whole WRITE or READ
}

// Decode reads a RETH from the first RETHLen bytes of p.
func (r *RETH) Decode(p []byte) error {
	if len(p) < RETHLen {
		return errShortRETH
	}
	r.VA, r.RKey = getVAKey(p)
	r.DMALen = binary.BigEndian.Uint32(p[12:16])
	return nil
}

// Encode writes r into p[:RETHLen]; it panics if p is shorter.
func (r *RETH) Encode(p []byte) {
	_ = p[RETHLen-1]
	putVAKey(p, r.VA, r.RKey)
	binary.BigEndian.PutUint32(p[12:16], r.DMALen)
}

// getVAKey reads the virtual address and R_Key that open a RETH and an
// AtomicETH.
func getVAKey(p []byte) (va uint64, rkey uint32) {
	return binary.BigEndian.Uint64(p[0:8]), binary.BigEndian.Uint32(p[8:12])
}

// putVAKey writes what getVAKey reads.
func putVAKey(p []byte, va uint64, rkey uint32) {
	binary.BigEndian.PutUint64(p[0:8], va)
	binary.BigEndian.PutUint32(p[8:12], rkey)
}

// AETH syndromes. An ACK syndrome is 000ccccc with c a credit count; an
// RNR NAK is 001ttttt with t an RNR timer code (see RNRDelay); a NAK is
// 011nnnnn.
const (
	AETHAck           uint8 = 0x1F // ACK, credits "unlimited" (what rxe sends)
	AETHRNRNak        uint8 = 0x20 // RNR NAK; OR in the timer code
	NakPSNSeq         uint8 = 0x60 // PSN sequence error
	NakInvalidRequest uint8 = 0x61
	NakRemoteAccess   uint8 = 0x62
	NakRemoteOp       uint8 = 0x63 // remote operational error
)

// RNRNakSyndrome returns the AETH syndrome of an RNR NAK with timer code t.
func RNRNakSyndrome(t uint8) uint8 { return AETHRNRNak | t&0x1F }

// AETH is the ACK extended transport header.
type AETH struct {
	Syndrome uint8
	MSN      uint32 // 24 bits: messages completed by the responder
}

// Decode reads an AETH from the first AETHLen bytes of p.
func (a *AETH) Decode(p []byte) error {
	if len(p) < AETHLen {
		return errShortAETH
	}
	a.Syndrome = p[0]
	a.MSN = binary.BigEndian.Uint32(p[0:4]) & PSNMask
	return nil
}

// Encode writes a into p[:AETHLen]; it panics if p is shorter.
func (a *AETH) Encode(p []byte) {
	_ = p[AETHLen-1]
	binary.BigEndian.PutUint32(p[0:4], a.MSN&PSNMask)
	p[0] = a.Syndrome
}

// IsAck reports whether the syndrome is a positive acknowledgement.
func (a *AETH) IsAck() bool { return a.Syndrome>>5 == 0 }

// Credits returns the credit count of an ACK (0x1F: unlimited).
func (a *AETH) Credits() uint8 { return a.Syndrome & 0x1F }

// IsRNRNak reports whether the syndrome is a receiver-not-ready NAK.
func (a *AETH) IsRNRNak() bool { return a.Syndrome>>5 == 1 }

// RNRTimer returns the RNR timer code of an RNR NAK (see RNRDelay).
func (a *AETH) RNRTimer() uint8 { return a.Syndrome & 0x1F }

// IsNak reports whether the syndrome is a NAK (0x60..0x7F).
func (a *AETH) IsNak() bool { return a.Syndrome>>5 == 3 }

// NakCode returns the whole NAK syndrome, for comparison with NakPSNSeq,
// NakInvalidRequest, NakRemoteAccess and NakRemoteOp; it returns 0 when
// the AETH is not a NAK.
func (a *AETH) NakCode() uint8 {
	if !a.IsNak() {
		return 0
	}
	return a.Syndrome
}

// GSIQKey is the well-known Q_Key of QP1 (general services interface).
const GSIQKey = 0x80010000

// DETH is the datagram extended transport header of UD packets.
type DETH struct {
	QKey  uint32
	SrcQP uint32 // 24 bits
}

// Decode reads a DETH from the first DETHLen bytes of p.
func (d *DETH) Decode(p []byte) error {
	if len(p) < DETHLen {
		return errShortDETH
	}
	d.QKey = binary.BigEndian.Uint32(p[0:4])
	d.SrcQP = binary.BigEndian.Uint32(p[4:8]) & PSNMask
	return nil
}

// Encode writes d into p[:DETHLen]; it panics if p is shorter.
func (d *DETH) Encode(p []byte) {
	_ = p[DETHLen-1]
	binary.BigEndian.PutUint32(p[0:4], d.QKey)
	binary.BigEndian.PutUint32(p[4:8], d.SrcQP&PSNMask)
}

// AtomicETH is the atomic extended transport header of COMPARE SWAP and
// FETCH ADD.
type AtomicETH struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64 // swap value or add operand
	Compare uint64
}

// Decode reads an AtomicETH from the first AtomicETHLen bytes of p.
func (a *AtomicETH) Decode(p []byte) error {
	if len(p) < AtomicETHLen {
		return errShortAtomic
	}
	a.VA, a.RKey = getVAKey(p)
	a.SwapAdd = binary.BigEndian.Uint64(p[12:20])
	a.Compare = binary.BigEndian.Uint64(p[20:28])
	return nil
}

// Encode writes a into p[:AtomicETHLen]; it panics if p is shorter.
func (a *AtomicETH) Encode(p []byte) {
	_ = p[AtomicETHLen-1]
	putVAKey(p, a.VA, a.RKey)
	binary.BigEndian.PutUint64(p[12:20], a.SwapAdd)
	binary.BigEndian.PutUint64(p[20:28], a.Compare)
}

// AtomicAckETH carries the original remote value in an ATOMIC ACKNOWLEDGE.
type AtomicAckETH struct {
	OrigData uint64
}

// Decode reads an AtomicAckETH from the first AtomicAckETHLen bytes of p.
func (a *AtomicAckETH) Decode(p []byte) error {
	if len(p) < AtomicAckETHLen {
		return errShortAtomAck
	}
	a.OrigData = binary.BigEndian.Uint64(p[0:8])
	return nil
}

// Encode writes a into p[:AtomicAckETHLen]; it panics if p is shorter.
func (a *AtomicAckETH) Encode(p []byte) {
	binary.BigEndian.PutUint64(p[0:8], a.OrigData)
}
