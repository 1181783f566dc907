package wire

import "encoding/binary"

// MAD framing. CM messages travel as one 256-byte MAD in a UD SEND_ONLY
// to QP1 with Q_Key GSIQKey.
const (
	MADLen       = 256
	MADHeaderLen = 24
	MADDataLen   = MADLen - MADHeaderLen // attribute data of one MAD

	MADBaseVersion   = 1
	MgmtClassCM      = 0x07
	CMClassVersion   = 2
	MADMethodSend    = 0x03
	MADMethodGetResp = 0x81
)

// CM attribute IDs.
const (
	AttrReq  = 0x10
	AttrMRA  = 0x11
	AttrRej  = 0x12
	AttrRep  = 0x13
	AttrRTU  = 0x14
	AttrDREQ = 0x15
	AttrDREP = 0x16
)

// REJ reasons used on RoCE.
const (
	RejReasonInvalidServiceID = 8
	RejReasonStaleConn        = 10
	RejReasonConsumerDefined  = 28
)

// Values of CMRej.MsgRejected and CMMra.MsgMRAed.
const (
	CMMsgReq   = 0
	CMMsgRep   = 1
	CMMsgOther = 2
)

// Transport service types of CMReq.TransportType.
const (
	CMTransportRC = 0
	CMTransportUC = 1
	CMTransportRD = 2
)

// MADHeader is the common 24-byte MAD header.
type MADHeader struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8
	Status        uint16
	ClassSpecific uint16
	TID           uint64
	AttrID        uint16
	AttrMod       uint32
}

// Decode reads a MAD header from the first MADHeaderLen bytes of p.
func (h *MADHeader) Decode(p []byte) error {
	if len(p) < MADHeaderLen {
		return errShortMAD
	}
	h.BaseVersion = p[0]
	h.MgmtClass = p[1]
	h.ClassVersion = p[2]
	h.Method = p[3]
	h.Status = binary.BigEndian.Uint16(p[4:6])
	h.ClassSpecific = binary.BigEndian.Uint16(p[6:8])
	h.TID = binary.BigEndian.Uint64(p[8:16])
	h.AttrID = binary.BigEndian.Uint16(p[16:18])
	h.AttrMod = binary.BigEndian.Uint32(p[20:24])
	return nil
}

// Encode writes h into p[:MADHeaderLen], reserved bytes zero; it panics
// if p is shorter.
func (h *MADHeader) Encode(p []byte) {
	_ = p[MADHeaderLen-1]
	p[0] = h.BaseVersion
	p[1] = h.MgmtClass
	p[2] = h.ClassVersion
	p[3] = h.Method
	binary.BigEndian.PutUint16(p[4:6], h.Status)
	binary.BigEndian.PutUint16(p[6:8], h.ClassSpecific)
	binary.BigEndian.PutUint64(p[8:16], h.TID)
	binary.BigEndian.PutUint16(p[16:18], h.AttrID)
	p[18], p[19] = 0, 0
	binary.BigEndian.PutUint32(p[20:24], h.AttrMod)
}

// IsCM reports whether h is a version-1 MAD of CM class version 2, the
// only CM MADs Linux's CM accepts.
func (h *MADHeader) IsCM() bool {
	return h.BaseVersion == MADBaseVersion && h.MgmtClass == MgmtClassCM && h.ClassVersion == CMClassVersion
}

// CMMessage is a CM attribute: REQ, REP, RTU, REJ, MRA, DREQ or DREP.
// Decode and Encode work on a whole MAD (at least MADLen bytes) and touch
// only its attribute data, mad[MADHeaderLen:MADLen]. Decode fails only
// on a short MAD or an out-of-range length field; Encode writes every
// attribute byte, reserved bits zero, and panics if mad is shorter than
// MADLen.
type CMMessage interface {
	AttrID() uint16
	Decode(mad []byte) error
	Encode(mad []byte)
}

// NewCMMessage returns a zero message for a CM attribute ID, or nil.
func NewCMMessage(attr uint16) CMMessage {
	switch attr {
	case AttrReq:
		return new(CMReq)
	case AttrRep:
		return new(CMRep)
	case AttrRTU:
		return new(CMRtu)
	case AttrRej:
		return new(CMRej)
	case AttrMRA:
		return new(CMMra)
	case AttrDREQ:
		return new(CMDreq)
	case AttrDREP:
		return new(CMDrep)
	}
	return nil
}

// EncodeCM writes a complete CM MAD for m into mad[:MADLen]: header
// (base version 1, class CM, class version 2, method SEND, the given
// TID, m's attribute ID) and attribute data.
func EncodeCM(mad []byte, tid uint64, m CMMessage) error {
	if len(mad) < MADLen {
		return ErrShortBuffer
	}
	h := MADHeader{
		BaseVersion:  MADBaseVersion,
		MgmtClass:    MgmtClassCM,
		ClassVersion: CMClassVersion,
		Method:       MADMethodSend,
		TID:          tid,
		AttrID:       m.AttrID(),
	}
	h.Encode(mad)
	m.Encode(mad)
	return nil
}

// cmData returns the attribute data of a MAD, or an error if it is short.
func cmData(mad []byte) ([]byte, error) {
	if len(mad) < MADLen {
		return nil, errShortMAD
	}
	return mad[MADHeaderLen:MADLen], nil
}

// cmDataOut returns the attribute data of a MAD being encoded, zeroed.
func cmDataOut(mad []byte) []byte {
	d := mad[MADHeaderLen:MADLen]
	clear(d)
	return d
}

func be24(p []byte) uint32 { return uint32(p[0])<<16 | uint32(p[1])<<8 | uint32(p[2]) }

func putBE24(p []byte, v uint32) { p[0], p[1], p[2] = byte(v>>16), byte(v>>8), byte(v) }

func bit(b byte, mask byte) bool { return b&mask != 0 }

func setBit(v bool, mask byte) byte {
	if v {
		return mask
	}
	return 0
}

// CMReq is a Connection Request (IBA table 106). Bit fields are stored
// right-aligned: RemoteCMRespTimeout 5 bits, TransportType 2, RetryCount
// 3, PathMTU 4 (an MTU enum), RNRRetry 3, MaxCMRetries 4, SL 4,
// LocalACKTimeout 5, PacketRate 6, FlowLabel 20.
type CMReq struct {
	LocalCommID         uint32
	ServiceID           uint64
	LocalCAGUID         uint64
	LocalQKey           uint32
	LocalQPN            uint32
	ResponderResources  uint8
	LocalEECN           uint32
	InitiatorDepth      uint8
	RemoteEECN          uint32
	RemoteCMRespTimeout uint8
	TransportType       uint8 // CMTransportRC, ...
	E2EFlowCtl          bool
	StartingPSN         uint32
	LocalCMRespTimeout  uint8
	RetryCount          uint8
	PKey                uint16
	PathMTU             uint8
	RDCExists           bool
	RNRRetry            uint8
	MaxCMRetries        uint8
	SRQ                 bool
	ExtTransportType    uint8

	PrimaryLocalLID, PrimaryRemoteLID uint16
	PrimaryLocalGID, PrimaryRemoteGID [16]byte
	FlowLabel                         uint32
	PacketRate                        uint8
	TrafficClass                      uint8
	HopLimit                          uint8
	SL                                uint8
	SubnetLocal                       bool
	LocalACKTimeout                   uint8

	// AlternatePath is the alternate path (bytes 96..139), kept raw:
	// RoCE connections through rdma_cm never set one.
	AlternatePath [44]byte
	PrivateData   [92]byte
}

// AttrID returns AttrReq.
func (m *CMReq) AttrID() uint16 { return AttrReq }

// Decode reads a REQ from a MAD.
func (m *CMReq) Decode(mad []byte) error {
	d, err := cmData(mad)
	if err != nil {
		return err
	}
	m.LocalCommID = binary.BigEndian.Uint32(d[0:4])
	m.ServiceID = binary.BigEndian.Uint64(d[8:16])
	m.LocalCAGUID = binary.BigEndian.Uint64(d[16:24])
	m.LocalQKey = binary.BigEndian.Uint32(d[28:32])
	m.LocalQPN = be24(d[32:35])
	m.ResponderResources = d[35]
	m.LocalEECN = be24(d[36:39])
	m.InitiatorDepth = d[39]
	m.RemoteEECN = be24(d[40:43])
	m.RemoteCMRespTimeout = d[43] >> 3
	m.TransportType = d[43] >> 1 & 3
	m.E2EFlowCtl = bit(d[43], 0x01)
	m.StartingPSN = be24(d[44:47])
	m.LocalCMRespTimeout = d[47] >> 3
	m.RetryCount = d[47] & 7
	m.PKey = binary.BigEndian.Uint16(d[48:50])
	m.PathMTU = d[50] >> 4
	m.RDCExists = bit(d[50], 0x08)
	m.RNRRetry = d[50] & 7
	m.MaxCMRetries = d[51] >> 4
	m.SRQ = bit(d[51], 0x08)
	m.ExtTransportType = d[51] & 7
	m.PrimaryLocalLID = binary.BigEndian.Uint16(d[52:54])
	m.PrimaryRemoteLID = binary.BigEndian.Uint16(d[54:56])
	copy(m.PrimaryLocalGID[:], d[56:72])
	copy(m.PrimaryRemoteGID[:], d[72:88])
	m.FlowLabel = binary.BigEndian.Uint32(d[88:92]) >> 12
	m.PacketRate = d[91] & 0x3F
	m.TrafficClass = d[92]
	m.HopLimit = d[93]
	m.SL = d[94] >> 4
	m.SubnetLocal = bit(d[94], 0x08)
	m.LocalACKTimeout = d[95] >> 3
	copy(m.AlternatePath[:], d[96:140])
	copy(m.PrivateData[:], d[140:232])
	return nil
}

// Encode writes m as the attribute data of mad.
func (m *CMReq) Encode(mad []byte) {
	d := cmDataOut(mad)
	binary.BigEndian.PutUint32(d[0:4], m.LocalCommID)
	binary.BigEndian.PutUint64(d[8:16], m.ServiceID)
	binary.BigEndian.PutUint64(d[16:24], m.LocalCAGUID)
	binary.BigEndian.PutUint32(d[28:32], m.LocalQKey)
	putBE24(d[32:35], m.LocalQPN)
	d[35] = m.ResponderResources
	putBE24(d[36:39], m.LocalEECN)
	d[39] = m.InitiatorDepth
	putBE24(d[40:43], m.RemoteEECN)
	d[43] = m.RemoteCMRespTimeout<<3 | m.TransportType&3<<1 | setBit(m.E2EFlowCtl, 0x01)
	putBE24(d[44:47], m.StartingPSN)
	d[47] = m.LocalCMRespTimeout<<3 | m.RetryCount&7
	binary.BigEndian.PutUint16(d[48:50], m.PKey)
	d[50] = m.PathMTU<<4 | setBit(m.RDCExists, 0x08) | m.RNRRetry&7
	d[51] = m.MaxCMRetries<<4 | setBit(m.SRQ, 0x08) | m.ExtTransportType&7
	binary.BigEndian.PutUint16(d[52:54], m.PrimaryLocalLID)
	binary.BigEndian.PutUint16(d[54:56], m.PrimaryRemoteLID)
	copy(d[56:72], m.PrimaryLocalGID[:])
	copy(d[72:88], m.PrimaryRemoteGID[:])
	binary.BigEndian.PutUint32(d[88:92], m.FlowLabel<<12)
	d[91] |= m.PacketRate & 0x3F
	d[92] = m.TrafficClass
	d[93] = m.HopLimit
	d[94] = m.SL<<4 | setBit(m.SubnetLocal, 0x08)
	d[95] = m.LocalACKTimeout << 3
	copy(d[96:140], m.AlternatePath[:])
	copy(d[140:232], m.PrivateData[:])
}

// CMRep is a Connection Reply (IBA table 110). TargetACKDelay is 5 bits,
// FailoverAccepted 2, RNRRetry 3.
type CMRep struct {
	LocalCommID        uint32
	RemoteCommID       uint32
	QKey               uint32
	LocalQPN           uint32
	LocalEECN          uint32
	StartingPSN        uint32
	ResponderResources uint8
	InitiatorDepth     uint8
	TargetACKDelay     uint8
	FailoverAccepted   uint8
	E2EFlowCtl         bool
	RNRRetry           uint8
	SRQ                bool
	LocalCAGUID        uint64
	PrivateData        [196]byte
}

// AttrID returns AttrRep.
func (m *CMRep) AttrID() uint16 { return AttrRep }

// Decode reads a REP from a MAD.
func (m *CMRep) Decode(mad []byte) error {
	d, err := cmData(mad)
	if err != nil {
		return err
	}
	m.LocalCommID = binary.BigEndian.Uint32(d[0:4])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:8])
	m.QKey = binary.BigEndian.Uint32(d[8:12])
	m.LocalQPN = be24(d[12:15])
	m.LocalEECN = be24(d[16:19])
	m.StartingPSN = be24(d[20:23])
	m.ResponderResources = d[24]
	m.InitiatorDepth = d[25]
	m.TargetACKDelay = d[26] >> 3
	m.FailoverAccepted = d[26] >> 1 & 3
	m.E2EFlowCtl = bit(d[26], 0x01)
	m.RNRRetry = d[27] >> 5
	m.SRQ = bit(d[27], 0x10)
	m.LocalCAGUID = binary.BigEndian.Uint64(d[28:36])
	copy(m.PrivateData[:], d[36:232])
	return nil
}

// Encode writes m as the attribute data of mad.
func (m *CMRep) Encode(mad []byte) {
	d := cmDataOut(mad)
	binary.BigEndian.PutUint32(d[0:4], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:8], m.RemoteCommID)
	binary.BigEndian.PutUint32(d[8:12], m.QKey)
	putBE24(d[12:15], m.LocalQPN)
	putBE24(d[16:19], m.LocalEECN)
	putBE24(d[20:23], m.StartingPSN)
	d[24] = m.ResponderResources
	d[25] = m.InitiatorDepth
	d[26] = m.TargetACKDelay<<3 | m.FailoverAccepted&3<<1 | setBit(m.E2EFlowCtl, 0x01)
	d[27] = m.RNRRetry<<5 | setBit(m.SRQ, 0x10)
	binary.BigEndian.PutUint64(d[28:36], m.LocalCAGUID)
	copy(d[36:232], m.PrivateData[:])
}

// RTU and DREP carry the same fields: the two communication IDs and
// private data.
func decodeCommIDs(mad []byte, local, remote *uint32, priv *[224]byte) error {
	d, err := cmData(mad)
	if err != nil {
		return err
	}
	*local = binary.BigEndian.Uint32(d[0:4])
	*remote = binary.BigEndian.Uint32(d[4:8])
	copy(priv[:], d[8:232])
	return nil
}

func encodeCommIDs(mad []byte, local, remote uint32, priv *[224]byte) {
	d := cmDataOut(mad)
	binary.BigEndian.PutUint32(d[0:4], local)
	binary.BigEndian.PutUint32(d[4:8], remote)
	copy(d[8:232], priv[:])
}

// CMRtu is a Ready To Use (IBA table 111).
type CMRtu struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [224]byte
}

// AttrID returns AttrRTU.
func (m *CMRtu) AttrID() uint16 { return AttrRTU }

// Decode reads an RTU from a MAD.
func (m *CMRtu) Decode(mad []byte) error {
	return decodeCommIDs(mad, &m.LocalCommID, &m.RemoteCommID, &m.PrivateData)
}

// Encode writes m as the attribute data of mad.
func (m *CMRtu) Encode(mad []byte) {
	encodeCommIDs(mad, m.LocalCommID, m.RemoteCommID, &m.PrivateData)
}

// CMDreq is a Disconnect Request (IBA table 112). RemoteQPN must be the
// receiver's QPN or Linux ignores the DREQ.
type CMDreq struct {
	LocalCommID  uint32
	RemoteCommID uint32
	RemoteQPN    uint32
	PrivateData  [220]byte
}

// AttrID returns AttrDREQ.
func (m *CMDreq) AttrID() uint16 { return AttrDREQ }

// Decode reads a DREQ from a MAD.
func (m *CMDreq) Decode(mad []byte) error {
	d, err := cmData(mad)
	if err != nil {
		return err
	}
	m.LocalCommID = binary.BigEndian.Uint32(d[0:4])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:8])
	m.RemoteQPN = be24(d[8:11])
	copy(m.PrivateData[:], d[12:232])
	return nil
}

// Encode writes m as the attribute data of mad.
func (m *CMDreq) Encode(mad []byte) {
	d := cmDataOut(mad)
	binary.BigEndian.PutUint32(d[0:4], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:8], m.RemoteCommID)
	putBE24(d[8:11], m.RemoteQPN)
	copy(d[12:232], m.PrivateData[:])
}

// CMDrep is a Disconnect Reply (IBA table 113).
type CMDrep struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [224]byte
}

// AttrID returns AttrDREP.
func (m *CMDrep) AttrID() uint16 { return AttrDREP }

// Decode reads a DREP from a MAD.
func (m *CMDrep) Decode(mad []byte) error {
	return decodeCommIDs(mad, &m.LocalCommID, &m.RemoteCommID, &m.PrivateData)
}

// Encode writes m as the attribute data of mad.
func (m *CMDrep) Encode(mad []byte) {
	encodeCommIDs(mad, m.LocalCommID, m.RemoteCommID, &m.PrivateData)
}

// CMRej is a Reject (IBA table 108). MsgRejected is 2 bits (CMMsgReq,
// CMMsgRep, CMMsgOther); ARILen (7 bits) counts the valid bytes of ARI.
type CMRej struct {
	LocalCommID  uint32
	RemoteCommID uint32
	MsgRejected  uint8
	ARILen       uint8
	Reason       uint16
	ARI          [72]byte
	PrivateData  [148]byte
}

// AttrID returns AttrRej.
func (m *CMRej) AttrID() uint16 { return AttrRej }

// Decode reads a REJ from a MAD. An ARI length beyond the 72-byte ARI
// field is an error wrapping ErrBadMAD.
func (m *CMRej) Decode(mad []byte) error {
	d, err := cmData(mad)
	if err != nil {
		return err
	}
	m.LocalCommID = binary.BigEndian.Uint32(d[0:4])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:8])
	m.MsgRejected = d[8] >> 6
	m.ARILen = d[9] >> 1
	if int(m.ARILen) > len(m.ARI) {
		return errRejARILen
	}
	m.Reason = binary.BigEndian.Uint16(d[10:12])
	copy(m.ARI[:], d[12:84])
	copy(m.PrivateData[:], d[84:232])
	return nil
}

// Encode writes m as the attribute data of mad.
func (m *CMRej) Encode(mad []byte) {
	d := cmDataOut(mad)
	binary.BigEndian.PutUint32(d[0:4], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:8], m.RemoteCommID)
	d[8] = m.MsgRejected << 6
	d[9] = m.ARILen << 1
	binary.BigEndian.PutUint16(d[10:12], m.Reason)
	copy(d[12:84], m.ARI[:])
	copy(d[84:232], m.PrivateData[:])
}

// CMMra is a Message Receipt Acknowledgement (IBA table 107).
// MsgMRAed is 2 bits, ServiceTimeout 5.
type CMMra struct {
	LocalCommID    uint32
	RemoteCommID   uint32
	MsgMRAed       uint8
	ServiceTimeout uint8
	PrivateData    [222]byte
}

// AttrID returns AttrMRA.
func (m *CMMra) AttrID() uint16 { return AttrMRA }

// Decode reads an MRA from a MAD.
func (m *CMMra) Decode(mad []byte) error {
	d, err := cmData(mad)
	if err != nil {
		return err
	}
	m.LocalCommID = binary.BigEndian.Uint32(d[0:4])
	m.RemoteCommID = binary.BigEndian.Uint32(d[4:8])
	m.MsgMRAed = d[8] >> 6
	m.ServiceTimeout = d[9] >> 3
	copy(m.PrivateData[:], d[10:232])
	return nil
}

// Encode writes m as the attribute data of mad.
func (m *CMMra) Encode(mad []byte) {
	d := cmDataOut(mad)
	binary.BigEndian.PutUint32(d[0:4], m.LocalCommID)
	binary.BigEndian.PutUint32(d[4:8], m.RemoteCommID)
	d[8] = m.MsgMRAed << 6
	d[9] = m.ServiceTimeout << 3
	copy(d[10:232], m.PrivateData[:])
}
