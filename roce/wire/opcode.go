package wire

import "strings"

// Opcode is the BTH OpCode byte. Bits 7:5 select the transport (RC, UC,
// UD, CNP) and bits 4:0 the operation.
type Opcode uint8

// Reliable Connected opcodes.
const (
	OpRCSendFirst      Opcode = 0x00
	OpRCSendMiddle     Opcode = 0x01
	OpRCSendLast       Opcode = 0x02
	OpRCSendLastImm    Opcode = 0x03
	OpRCSendOnly       Opcode = 0x04
	OpRCSendOnlyImm    Opcode = 0x05
	OpRCWriteFirst     Opcode = 0x06
	OpRCWriteMiddle    Opcode = 0x07
	OpRCWriteLast      Opcode = 0x08
	OpRCWriteLastImm   Opcode = 0x09
	OpRCWriteOnly      Opcode = 0x0A
	OpRCWriteOnlyImm   Opcode = 0x0B
	OpRCReadRequest    Opcode = 0x0C
	OpRCReadRespFirst  Opcode = 0x0D
	OpRCReadRespMiddle Opcode = 0x0E
	OpRCReadRespLast   Opcode = 0x0F
	OpRCReadRespOnly   Opcode = 0x10
	OpRCAck            Opcode = 0x11
	OpRCAtomicAck      Opcode = 0x12
	OpRCCompareSwap    Opcode = 0x13
	OpRCFetchAdd       Opcode = 0x14
	OpRCSendLastInv    Opcode = 0x16
	OpRCSendOnlyInv    Opcode = 0x17
)

// Unreliable Connected opcodes.
const (
	OpUCSendFirst    Opcode = 0x20
	OpUCSendMiddle   Opcode = 0x21
	OpUCSendLast     Opcode = 0x22
	OpUCSendLastImm  Opcode = 0x23
	OpUCSendOnly     Opcode = 0x24
	OpUCSendOnlyImm  Opcode = 0x25
	OpUCWriteFirst   Opcode = 0x26
	OpUCWriteMiddle  Opcode = 0x27
	OpUCWriteLast    Opcode = 0x28
	OpUCWriteLastImm Opcode = 0x29
	OpUCWriteOnly    Opcode = 0x2A
	OpUCWriteOnlyImm Opcode = 0x2B
)

// Unreliable Datagram opcodes (QP1 MADs travel as OpUDSendOnly).
const (
	OpUDSendOnly    Opcode = 0x64
	OpUDSendOnlyImm Opcode = 0x65
)

// OpCNP is the RoCEv2 congestion notification packet: BTH followed by 16
// reserved bytes, which ParsePacket exposes as the payload.
const OpCNP Opcode = 0x81

// CNPPayloadLen is the reserved area following a CNP's BTH.
const CNPPayloadLen = 16

// Transport is the transport service encoded in opcode bits 7:5.
type Transport uint8

// Transport services.
const (
	TransportRC  Transport = 0
	TransportUC  Transport = 1
	TransportRD  Transport = 2
	TransportUD  Transport = 3
	TransportCNP Transport = 4
)

// opFlags describes one opcode: which extension headers follow the BTH
// and what role the packet plays in a message.
type opFlags uint32

const (
	fValid opFlags = 1 << iota
	fRETH
	fAETH
	fDETH
	fImm
	fIETH
	fAtomicETH
	fAtomicAckETH
	fFirst
	fMiddle
	fLast
	fOnly
	fSend
	fWrite
	fReadReq
	fReadResp
	fAck
	fAtomic
	fAtomicAck
	fCNP
	fPayload
	fRWR // consumes a receive WQE at the responder
)

type opInfo struct {
	flags opFlags
	name  string
}

// opTable is indexed by opcode; entries without fValid are unknown.
var opTable = withUC([256]opInfo{
	OpRCSendFirst:      {fValid | fSend | fFirst | fPayload | fRWR, "RC_SEND_FIRST"},
	OpRCSendMiddle:     {fValid | fSend | fMiddle | fPayload, "RC_SEND_MIDDLE"},
	OpRCSendLast:       {fValid | fSend | fLast | fPayload, "RC_SEND_LAST"},
	OpRCSendLastImm:    {fValid | fSend | fLast | fPayload | fImm, "RC_SEND_LAST_WITH_IMMEDIATE"},
	OpRCSendOnly:       {fValid | fSend | fOnly | fPayload | fRWR, "RC_SEND_ONLY"},
	OpRCSendOnlyImm:    {fValid | fSend | fOnly | fPayload | fImm | fRWR, "RC_SEND_ONLY_WITH_IMMEDIATE"},
	OpRCWriteFirst:     {fValid | fWrite | fFirst | fPayload | fRETH, "RC_RDMA_WRITE_FIRST"},
	OpRCWriteMiddle:    {fValid | fWrite | fMiddle | fPayload, "RC_RDMA_WRITE_MIDDLE"},
	OpRCWriteLast:      {fValid | fWrite | fLast | fPayload, "RC_RDMA_WRITE_LAST"},
	OpRCWriteLastImm:   {fValid | fWrite | fLast | fPayload | fImm | fRWR, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE"},
	OpRCWriteOnly:      {fValid | fWrite | fOnly | fPayload | fRETH, "RC_RDMA_WRITE_ONLY"},
	OpRCWriteOnlyImm:   {fValid | fWrite | fOnly | fPayload | fRETH | fImm | fRWR, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"},
	OpRCReadRequest:    {fValid | fReadReq | fOnly | fRETH, "RC_RDMA_READ_REQUEST"},
	OpRCReadRespFirst:  {fValid | fReadResp | fFirst | fPayload | fAETH, "RC_RDMA_READ_RESPONSE_FIRST"},
	OpRCReadRespMiddle: {fValid | fReadResp | fMiddle | fPayload, "RC_RDMA_READ_RESPONSE_MIDDLE"},
	OpRCReadRespLast:   {fValid | fReadResp | fLast | fPayload | fAETH, "RC_RDMA_READ_RESPONSE_LAST"},
	OpRCReadRespOnly:   {fValid | fReadResp | fOnly | fPayload | fAETH, "RC_RDMA_READ_RESPONSE_ONLY"},
	OpRCAck:            {fValid | fAck | fOnly | fAETH, "RC_ACKNOWLEDGE"},
	OpRCAtomicAck:      {fValid | fAtomicAck | fOnly | fAETH | fAtomicAckETH, "RC_ATOMIC_ACKNOWLEDGE"},
	OpRCCompareSwap:    {fValid | fAtomic | fOnly | fAtomicETH, "RC_COMPARE_SWAP"},
	OpRCFetchAdd:       {fValid | fAtomic | fOnly | fAtomicETH, "RC_FETCH_ADD"},
	OpRCSendLastInv:    {fValid | fSend | fLast | fPayload | fIETH, "RC_SEND_LAST_WITH_INVALIDATE"},
	OpRCSendOnlyInv:    {fValid | fSend | fOnly | fPayload | fIETH | fRWR, "RC_SEND_ONLY_WITH_INVALIDATE"},

	OpUDSendOnly:    {fValid | fSend | fOnly | fPayload | fDETH | fRWR, "UD_SEND_ONLY"},
	OpUDSendOnlyImm: {fValid | fSend | fOnly | fPayload | fDETH | fImm | fRWR, "UD_SEND_ONLY_WITH_IMMEDIATE"},

	OpCNP: {fValid | fCNP | fOnly | fPayload, "CNP"},
})

// withUC returns t with the UC opcodes filled in: UC SEND and WRITE
// (0x20-0x2B) are RC's (0x00-0x0B) on the other transport, with the same
// headers and roles.
func withUC(t [256]opInfo) [256]opInfo {
	for o := OpRCSendFirst; o <= OpRCWriteOnlyImm; o++ {
		t[o|OpUCSendFirst] = opInfo{t[o].flags, "UC" + strings.TrimPrefix(t[o].name, "RC")}
	}
	return t
}

func (o Opcode) has(f opFlags) bool { return opTable[o].flags&f != 0 }

// String returns the IBA name of the opcode ("RC_SEND_ONLY") or
// "Opcode(0xNN)" for opcodes this package does not know.
func (o Opcode) String() string {
	if n := opTable[o].name; n != "" {
		return n
	}
	const hex = "0123456789abcdef"
	return "Opcode(0x" + string([]byte{hex[o>>4], hex[o&0xF]}) + ")"
}

// Valid reports whether the opcode is one ParsePacket and BuildFrame handle.
func (o Opcode) Valid() bool { return o.has(fValid) }

// Transport returns the transport service from bits 7:5.
func (o Opcode) Transport() Transport { return Transport(o >> 5) }

// HasRETH reports whether an RDMA extended transport header follows the BTH
// (WRITE FIRST/ONLY, READ REQUEST).
func (o Opcode) HasRETH() bool { return o.has(fRETH) }

// HasAETH reports whether an ACK extended transport header follows
// (ACK, ATOMIC ACK, READ RESPONSE FIRST/LAST/ONLY).
func (o Opcode) HasAETH() bool { return o.has(fAETH) }

// HasDETH reports whether a datagram extended transport header follows (UD).
func (o Opcode) HasDETH() bool { return o.has(fDETH) }

// HasImm reports whether 4 bytes of immediate data follow the other headers.
func (o Opcode) HasImm() bool { return o.has(fImm) }

// HasIETH reports whether an invalidate extended transport header (R_Key
// to invalidate) follows (SEND LAST/ONLY with invalidate).
func (o Opcode) HasIETH() bool { return o.has(fIETH) }

// HasAtomicETH reports whether an atomic extended transport header follows.
func (o Opcode) HasAtomicETH() bool { return o.has(fAtomicETH) }

// HasAtomicAckETH reports whether an atomic ACK extended transport header
// follows the AETH.
func (o Opcode) HasAtomicAckETH() bool { return o.has(fAtomicAckETH) }

// IsFirst reports whether the packet opens a multi-packet message.
func (o Opcode) IsFirst() bool { return o.has(fFirst) }

// IsMiddle reports whether the packet continues a multi-packet message.
func (o Opcode) IsMiddle() bool { return o.has(fMiddle) }

// IsLast reports whether the packet ends a multi-packet message.
func (o Opcode) IsLast() bool { return o.has(fLast) }

// IsOnly reports whether the packet is a whole message by itself. ACKs,
// READ REQUESTs, atomics and CNPs are single-packet and report true.
func (o Opcode) IsOnly() bool { return o.has(fOnly) }

// StartsMessage reports IsFirst() || IsOnly().
func (o Opcode) StartsMessage() bool { return o.has(fFirst | fOnly) }

// EndsMessage reports IsLast() || IsOnly().
func (o Opcode) EndsMessage() bool { return o.has(fLast | fOnly) }

// IsSend reports whether the opcode is a SEND of any kind (RC, UC or UD).
func (o Opcode) IsSend() bool { return o.has(fSend) }

// IsWrite reports whether the opcode is an RDMA WRITE of any kind.
func (o Opcode) IsWrite() bool { return o.has(fWrite) }

// IsReadRequest reports whether the opcode is an RDMA READ REQUEST.
func (o Opcode) IsReadRequest() bool { return o.has(fReadReq) }

// IsReadResp reports whether the opcode is an RDMA READ RESPONSE packet.
func (o Opcode) IsReadResp() bool { return o.has(fReadResp) }

// IsAck reports whether the opcode is a plain ACKNOWLEDGE (ACK or NAK).
func (o Opcode) IsAck() bool { return o.has(fAck) }

// IsAtomic reports whether the opcode is an atomic request.
func (o Opcode) IsAtomic() bool { return o.has(fAtomic) }

// IsAtomicAck reports whether the opcode is an ATOMIC ACKNOWLEDGE.
func (o Opcode) IsAtomicAck() bool { return o.has(fAtomicAck) }

// IsCNP reports whether the opcode is a RoCEv2 congestion notification.
func (o Opcode) IsCNP() bool { return o.has(fCNP) }

// IsRequest reports whether a requester sends this opcode (SEND, WRITE,
// READ REQUEST, atomic). Its PSN belongs to the requester's sequence.
func (o Opcode) IsRequest() bool { return o.has(fSend | fWrite | fReadReq | fAtomic) }

// IsResponse reports whether a responder sends this opcode (ACK, READ
// RESPONSE, ATOMIC ACK). Its PSN echoes the request sequence.
func (o Opcode) IsResponse() bool { return o.has(fAck | fReadResp | fAtomicAck) }

// HasPayload reports whether the opcode may carry payload bytes. Opcodes
// without payload must have PadCnt 0 and nothing between the headers and
// the ICRC.
func (o Opcode) HasPayload() bool { return o.has(fPayload) }

// ConsumesRecvWQE reports whether the responder takes a new receive WQE
// for this packet (rxe's RWR mask): SEND FIRST/ONLY, WRITE with immediate
// LAST/ONLY. MIDDLE/LAST SENDs continue the WQE the FIRST took.
func (o Opcode) ConsumesRecvWQE() bool { return o.has(fRWR) }
