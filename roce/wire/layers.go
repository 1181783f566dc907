package wire

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// gopacket layer types for RoCEv2 headers. They are plain numbers until
// RegisterLayers gives them names and decoders.
const (
	LayerTypeBTH          gopacket.LayerType = 47910 + iota // base transport header
	LayerTypeRETH                                           // RDMA extended transport header
	LayerTypeAETH                                           // ACK extended transport header
	LayerTypeDETH                                           // datagram extended transport header
	LayerTypeImmDt                                          // immediate data
	LayerTypeIETH                                           // invalidate extended transport header
	LayerTypeAtomicETH                                      // atomic extended transport header
	LayerTypeAtomicAckETH                                   // atomic ACK extended transport header
	LayerTypeMAD                                            // management datagram on QP1
	LayerTypeCM                                             // communication manager message in a MAD
)

// registerOnce guards gopacket's process-wide registries, which panic on
// a second registration of the same layer type.
var registerOnce sync.Once

// RegisterLayers registers the layer types above with gopacket and binds
// UDP port 4791 to LayerTypeBTH, so that gopacket.NewPacket decodes
// RoCEv2 frames down to BTH, extension headers, payload and, for QP1
// datagrams, MAD and CM layers. gopacket's registries are global, so this
// changes how every UDP 4791 packet in the process decodes; it is safe to
// call more than once and from several goroutines.
//
// The decoders check structure (lengths, TVer, opcode, PadCnt) but not
// the ICRC, which needs the IP header: use ParsePacket or VerifyICRC on
// the whole frame for that.
func RegisterLayers() {
	registerOnce.Do(func() {
		reg := func(t gopacket.LayerType, name string, dec func([]byte, gopacket.PacketBuilder) error) {
			gopacket.RegisterLayerType(int(t), gopacket.LayerTypeMetadata{Name: name, Decoder: gopacket.DecodeFunc(dec)})
		}
		reg(LayerTypeBTH, "BTH", decodeBTH)
		reg(LayerTypeRETH, "RETH", decodeExtAlone(LayerTypeRETH))
		reg(LayerTypeAETH, "AETH", decodeExtAlone(LayerTypeAETH))
		reg(LayerTypeDETH, "DETH", decodeExtAlone(LayerTypeDETH))
		reg(LayerTypeImmDt, "ImmDt", decodeExtAlone(LayerTypeImmDt))
		reg(LayerTypeIETH, "IETH", decodeExtAlone(LayerTypeIETH))
		reg(LayerTypeAtomicETH, "AtomicETH", decodeExtAlone(LayerTypeAtomicETH))
		reg(LayerTypeAtomicAckETH, "AtomicAckETH", decodeExtAlone(LayerTypeAtomicAckETH))
		reg(LayerTypeMAD, "MAD", decodeMAD)
		reg(LayerTypeCM, "CM", decodeCMAlone)
		layers.RegisterUDPPortLayerType(UDPPort, LayerTypeBTH)
	})
}

// BTHLayer is the gopacket layer of a BTH. Its payload is the extension
// headers and data, with pad and ICRC removed.
type BTHLayer struct {
	layers.BaseLayer
	BTH
	Pad  []byte // the PadCnt pad bytes
	ICRC uint32 // the trailer as received, not verified
}

// LayerType returns LayerTypeBTH.
func (l *BTHLayer) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode returns LayerTypeBTH.
func (l *BTHLayer) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns the layer of the first extension header, or of
// the payload (LayerTypeMAD for UD datagrams to QP1).
func (l *BTHLayer) NextLayerType() gopacket.LayerType {
	if ext := extLayers(l.Opcode); len(ext) > 0 {
		return ext[0]
	}
	return payloadLayer(&l.BTH)
}

// DecodeFromBytes decodes a UDP payload: BTH, extension headers, payload,
// pad and ICRC.
func (l *BTHLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < BTHLen+ICRCLen {
		df.SetTruncated()
		return fmt.Errorf("bth layer of %d bytes: %w", len(data), ErrTruncated)
	}
	l.BTH.Decode(data)
	if l.TVer != 0 {
		return fmt.Errorf("bth layer tver %d: %w", l.TVer, ErrBadTVer)
	}
	if !l.Opcode.Valid() {
		return fmt.Errorf("bth layer %v: %w", l.Opcode, ErrUnknownOpcode)
	}
	body := data[BTHLen : len(data)-ICRCLen]
	ext := l.Opcode.ExtHeaderLen()
	if len(body) < ext {
		df.SetTruncated()
		return fmt.Errorf("bth layer %v: %w", l.Opcode, errShortExt)
	}
	pad := int(l.PadCnt)
	if len(body)-ext < pad {
		return fmt.Errorf("bth layer %v pad %d: %w", l.Opcode, pad, ErrBadPad)
	}
	if !l.Opcode.HasPayload() && len(body) != ext {
		return fmt.Errorf("bth layer %v: %w", l.Opcode, errNoPayload)
	}
	l.ICRC = binary.LittleEndian.Uint32(data[len(data)-ICRCLen:])
	l.Pad = body[len(body)-pad:]
	l.Contents = data[:BTHLen]
	l.Payload = body[:len(body)-pad]
	return nil
}

// extLayers lists the extension header layers of op in wire order.
func extLayers(op Opcode) []gopacket.LayerType {
	f := opTable[op].flags
	var out []gopacket.LayerType
	for _, e := range extOrder {
		if f&e.flag != 0 {
			out = append(out, e.layer)
		}
	}
	return out
}

var extOrder = [...]struct {
	flag  opFlags
	layer gopacket.LayerType
}{
	{fDETH, LayerTypeDETH},
	{fRETH, LayerTypeRETH},
	{fAtomicETH, LayerTypeAtomicETH},
	{fAETH, LayerTypeAETH},
	{fAtomicAckETH, LayerTypeAtomicAckETH},
	{fImm, LayerTypeImmDt},
	{fIETH, LayerTypeIETH},
}

// payloadLayer is the layer type of the data after the extension headers.
func payloadLayer(b *BTH) gopacket.LayerType {
	if b.Opcode.Transport() == TransportUD && b.DestQP == 1 {
		return LayerTypeMAD
	}
	return gopacket.LayerTypePayload
}

// ExtLayer is the gopacket layer of one extension header; the field
// matching its LayerType is set.
type ExtLayer struct {
	layers.BaseLayer
	Type      gopacket.LayerType
	RETH      RETH
	AETH      AETH
	DETH      DETH
	Atomic    AtomicETH
	AtomicAck AtomicAckETH
	Imm       uint32 // LayerTypeImmDt
	IETH      uint32 // LayerTypeIETH: R_Key to invalidate

	next gopacket.LayerType
}

// LayerType returns the header's layer type.
func (l *ExtLayer) LayerType() gopacket.LayerType { return l.Type }

// NextLayerType returns the following header's layer type, known when the
// layer was decoded as part of a BTH chain, and gopacket.LayerTypePayload
// otherwise.
func (l *ExtLayer) NextLayerType() gopacket.LayerType {
	if l.next == 0 {
		return gopacket.LayerTypePayload
	}
	return l.next
}

func extLen(t gopacket.LayerType) int {
	switch t {
	case LayerTypeRETH:
		return RETHLen
	case LayerTypeAETH:
		return AETHLen
	case LayerTypeDETH:
		return DETHLen
	case LayerTypeImmDt:
		return ImmLen
	case LayerTypeIETH:
		return IETHLen
	case LayerTypeAtomicETH:
		return AtomicETHLen
	case LayerTypeAtomicAckETH:
		return AtomicAckETHLen
	}
	return 0
}

func (l *ExtLayer) decode(t gopacket.LayerType, data []byte) error {
	n := extLen(t)
	if n == 0 || len(data) < n {
		return fmt.Errorf("%v layer of %d bytes: %w", t, len(data), ErrTruncated)
	}
	l.Type = t
	l.Contents, l.Payload = data[:n], data[n:]
	switch t {
	case LayerTypeRETH:
		l.RETH.Decode(data)
	case LayerTypeAETH:
		l.AETH.Decode(data)
	case LayerTypeDETH:
		l.DETH.Decode(data)
	case LayerTypeImmDt:
		l.Imm = binary.BigEndian.Uint32(data)
	case LayerTypeIETH:
		l.IETH = binary.BigEndian.Uint32(data)
	case LayerTypeAtomicETH:
		l.Atomic.Decode(data)
	case LayerTypeAtomicAckETH:
		l.AtomicAck.Decode(data)
	}
	return nil
}

func decodeBTH(data []byte, pb gopacket.PacketBuilder) error {
	b := &BTHLayer{}
	if err := b.DecodeFromBytes(data, pb); err != nil {
		return err
	}
	pb.AddLayer(b)
	rest := b.Payload
	ext := extLayers(b.Opcode)
	final := payloadLayer(&b.BTH)
	for i, t := range ext {
		l := &ExtLayer{next: final}
		if i+1 < len(ext) {
			l.next = ext[i+1]
		}
		// DecodeFromBytes checked the total length of the headers.
		if err := l.decode(t, rest); err != nil {
			return err
		}
		pb.AddLayer(l)
		rest = l.Payload
	}
	return pb.NextDecoder(final)
}

// decodeExtAlone decodes an extension header met outside a BTH chain.
func decodeExtAlone(t gopacket.LayerType) func([]byte, gopacket.PacketBuilder) error {
	return func(data []byte, pb gopacket.PacketBuilder) error {
		l := &ExtLayer{}
		if err := l.decode(t, data); err != nil {
			return err
		}
		pb.AddLayer(l)
		return pb.NextDecoder(gopacket.LayerTypePayload)
	}
}

// MADLayer is the gopacket layer of a MAD header; its payload is the
// attribute data.
type MADLayer struct {
	layers.BaseLayer
	MADHeader
}

// LayerType returns LayerTypeMAD.
func (l *MADLayer) LayerType() gopacket.LayerType { return LayerTypeMAD }

// NextLayerType returns LayerTypeCM for CM MADs.
func (l *MADLayer) NextLayerType() gopacket.LayerType {
	if l.IsCM() {
		return LayerTypeCM
	}
	return gopacket.LayerTypePayload
}

// CMLayer is the gopacket layer of a CM message. Msg is a *CMReq,
// *CMRep, *CMRtu, *CMRej, *CMMra, *CMDreq or *CMDrep, or nil for CM
// attributes this package does not decode.
type CMLayer struct {
	layers.BaseLayer
	Msg CMMessage
}

// LayerType returns LayerTypeCM.
func (l *CMLayer) LayerType() gopacket.LayerType { return LayerTypeCM }

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

func decodeMAD(data []byte, pb gopacket.PacketBuilder) error {
	m := &MADLayer{}
	if err := m.MADHeader.Decode(data); err != nil {
		return err
	}
	end := min(len(data), MADLen)
	m.Contents, m.Payload = data[:MADHeaderLen], data[MADHeaderLen:end]
	pb.AddLayer(m)
	if !m.IsCM() {
		return pb.NextDecoder(gopacket.LayerTypePayload)
	}
	cm := &CMLayer{Msg: NewCMMessage(m.AttrID)}
	cm.Contents = m.Payload
	if cm.Msg != nil {
		if err := cm.Msg.Decode(data); err != nil {
			return err
		}
	}
	pb.AddLayer(cm)
	return nil
}

// decodeCMAlone decodes CM attribute data without its MAD header, which
// carries the attribute ID: the message stays undecoded.
func decodeCMAlone(data []byte, pb gopacket.PacketBuilder) error {
	cm := &CMLayer{}
	cm.Contents = data
	pb.AddLayer(cm)
	return nil
}
