// Package wire encodes and decodes RoCEv2 frames: Ethernet (untagged,
// 802.1Q or QinQ, by package header's rules), IPv4 or IPv6, UDP 4791,
// the InfiniBand base and extension transport headers, the invariant
// CRC, the communication-manager MADs rdma_cm exchanges on QP1, the
// rdma_cm private-data header and the Ceph async+rdma QP record. The
// Ethernet, IP and UDP headers are package header's: the classifier
// reads them by the same rules.
//
// Decoders read from the caller's bytes without allocating; encoders
// write into the caller's buffer. Header Decode methods return an error
// wrapping ErrTruncated when the input is short; header Encode methods
// require a buffer of at least the header's length (BTHLen, RETHLen, ...)
// and, like binary.BigEndian.PutUint32, panic otherwise. Whole-frame and
// MAD-level functions (BuildFrame, EncodeCM, ...) check lengths and
// return errors. All errors wrap the sentinels in errors.go, tested with
// errors.Is.
//
// API summary (see each declaration for details):
//
//	const UDPPort = 4791; DefaultPKey = 0xFFFF; GSIQKey = 0x80010000; PSNMask = 0xFFFFFF
//	const BTHLen, RETHLen, AETHLen, DETHLen, ImmLen, IETHLen, AtomicETHLen,
//	  AtomicAckETHLen, ICRCLen, CNPPayloadLen
//	type Opcode uint8: OpRC* (0x00-0x17), OpUC* (0x20-0x2B), OpUDSendOnly(Imm), OpCNP
//	  String, Valid, Transport, ExtHeaderLen, HasRETH, HasAETH, HasDETH, HasImm,
//	  HasIETH, HasAtomicETH, HasAtomicAckETH, HasPayload, IsFirst, IsMiddle,
//	  IsLast, IsOnly, StartsMessage, EndsMessage, IsSend, IsWrite,
//	  IsReadRequest, IsReadResp, IsAck, IsAtomic, IsAtomicAck, IsCNP,
//	  IsRequest, IsResponse, ConsumesRecvWQE
//	type Transport uint8: TransportRC, TransportUC, TransportRD, TransportUD, TransportCNP
//	type BTH, RETH, AETH, DETH, AtomicETH, AtomicAckETH, MADHeader:
//	  (*T) Decode(p []byte) error; (*T) Encode(p []byte) // panics if p is short
//	AETH: IsAck, Credits, IsRNRNak, RNRTimer, IsNak, NakCode
//	const AETHAck, AETHRNRNak, NakPSNSeq, NakInvalidRequest, NakRemoteAccess, NakRemoteOp uint8
//	func RNRNakSyndrome(t uint8) uint8
//	func PSNAdd(psn uint32, n int) uint32; PSNCompare(a, b uint32) int; PSNDiff(a, b uint32) int
//	func RNRDelay(code uint8) time.Duration
//	func MTUFromEnum(e uint8) (int, bool); MTUEnum(mtu int) (uint8, bool)
//	func ICRC(ipAndAbove []byte) uint32; VerifyICRC(frame []byte) bool
//	func PutICRC(frame []byte) error; AppendICRC(frame []byte) ([]byte, error)
//	func FrameICRC(frame []byte) (uint32, error)
//	type Packet; func ParsePacket(frame []byte, p *Packet) error
//	type FrameHeader
//	func BuildFrame(buf []byte, h *FrameHeader, p *Packet, payload []byte) (int, error)
//	func FrameLen(op Opcode, payloadLen int, ipv6 bool) int; PadLen(n int) int
//	const MADLen, MADHeaderLen, MADDataLen, MADBaseVersion, MgmtClassCM,
//	  CMClassVersion, MADMethodSend, AttrReq, AttrMRA, AttrRej, AttrRep,
//	  AttrRTU, AttrDREQ, AttrDREP, RejReason*, CMMsg*, CMTransport*
//	MADHeader: IsCM
//	type CMMessage interface { AttrID() uint16; Decode(mad []byte) error; Encode(mad []byte) }
//	  implemented by *CMReq, *CMRep, *CMRtu, *CMDreq, *CMDrep, *CMRej, *CMMra
//	func NewCMMessage(attr uint16) CMMessage
//	func EncodeCM(mad []byte, tid uint64, m CMMessage) error
//	type CMAHeader (Decode/Encode); const CMAHeaderLen, CMAVersion, CMAMaxUserPrivateData, PSTCP
//	func ServiceID(ps, port uint16) uint64; ServicePort(id uint64) (ps, port uint16)
//	type CephQPRecord: Decode(p []byte) error; Encode(p []byte) error; const CephQPRecordLen = 65
//	var ErrTruncated, ErrTooManyVLANs, ErrNotRoCE, ErrBadICRC, ErrBadPad, ErrBadTVer,
//	  ErrUnknownOpcode, ErrBadLength, ErrBadChecksum, ErrShortBuffer,
//	  ErrBadAddress, ErrBadMAD, ErrBadRecord
package wire
