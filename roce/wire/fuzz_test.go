package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/header"
)

var sentinels = []error{
	ErrTruncated, ErrNotRoCE, ErrBadICRC, ErrBadPad, ErrBadTVer, ErrUnknownOpcode,
	ErrBadLength, ErrBadChecksum, ErrShortBuffer, ErrBadAddress, ErrBadMAD, ErrBadRecord,
	ErrTooManyVLANs,
}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// exact returns p with its capacity cut to its length, so that reslicing
// past the input panics instead of silently reading the backing array.
func exact(p []byte) []byte { return p[:len(p):len(p)] }

func FuzzParsePacket(f *testing.F) {
	for i, fr := range roceFrames(f) {
		if i%7 == 0 {
			f.Add(fr.data)
		}
	}
	f.Add(mustHex(f, cnpFrameHex))
	for _, op := range []Opcode{OpRCSendFirst, OpRCWriteOnlyImm, OpRCAck, OpRCReadRespLast, OpUDSendOnlyImm, OpRCCompareSwap, OpRCAtomicAck} {
		var payload []byte
		if op.HasPayload() {
			payload = []byte("xyz")
		}
		f.Add(rcFrame(f, op, payload))
	}
	v6 := FrameHeader{SrcIP: netip.MustParseAddr("fe80::1"), DstIP: netip.MustParseAddr("fe80::2"), VLANs: header.Dot1Q(0)}
	buf := make([]byte, 256)
	n, _ := BuildFrame(buf, &v6, &Packet{BTH: BTH{Opcode: OpRCSendLastImm}}, []byte("a"))
	f.Add(buf[:n])
	qinq := FrameHeader{SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), VLANs: header.QinQ(200, 100)}
	n, _ = BuildFrame(buf, &qinq, &Packet{BTH: BTH{Opcode: OpRCSendOnly}}, []byte("qinq"))
	f.Add(bytes.Clone(buf[:n]))

	f.Fuzz(func(t *testing.T, data []byte) {
		data = exact(data)
		VerifyICRC(data)
		checkParse(t, data)
		// Random bytes almost never carry a valid IPv4 checksum and ICRC;
		// fix both so the fuzzer also explores the headers above them.
		fixed := append([]byte(nil), data...)
		if len(fixed) >= 34 && fixed[12] == 0x08 && fixed[13] == 0x00 {
			if ihl := int(fixed[14]&0x0F) * 4; ihl >= 20 && len(fixed) >= 14+ihl {
				fixed[24], fixed[25] = 0, 0
				binary.BigEndian.PutUint16(fixed[24:], ^header.Checksum(fixed[14:14+ihl]))
			}
		}
		if PutICRC(fixed) == nil {
			checkParse(t, exact(fixed))
		}
	})
}

// checkParse parses data and, when that succeeds, rebuilds the frame from
// the parsed fields and checks that it parses to the same packet.
func checkParse(t *testing.T, data []byte) {
	var p Packet
	err := ParsePacket(data, &p)
	checkClassifierAgrees(t, data, &p, err)

	if err != nil {
		if !isSentinel(err) {
			t.Fatalf("error %v wraps no sentinel", err)
		}
		return
	}
	if src, dst := p.SrcIP, p.DstIP; src.Is4In6() || dst.Is4In6() {
		return // BuildFrame would send these as IPv4
	}
	h := headerOf(&p)
	out := make([]byte, FrameLen(p.BTH.Opcode, len(p.Payload), p.SrcIP.Is6())+p.VLANs.Len())
	n, err := BuildFrame(out, &h, &p, p.Payload)
	if err != nil {
		t.Fatalf("BuildFrame of parsed packet: %v", err)
	}
	var q Packet
	if err := ParsePacket(exact(out[:n]), &q); err != nil {
		t.Fatalf("reparse: %v", err)
	}
	if !bytes.Equal(p.Payload, q.Payload) {
		t.Fatalf("payload %x, reparsed %x", p.Payload, q.Payload)
	}
	p.Payload, q.Payload = nil, nil
	p.ICRC, q.ICRC = 0, 0
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip:\n%+v\n%+v", p, q)
	}
}

func FuzzMAD(f *testing.F) {
	for _, fr := range roceFrames(f) {
		var p Packet
		if ParsePacket(fr.data, &p) == nil && p.BTH.Opcode.HasDETH() {
			f.Add(p.Payload)
		}
	}
	rej := make([]byte, MADLen)
	_ = EncodeCM(rej, 1, &CMRej{Reason: RejReasonStaleConn, ARILen: 72})
	f.Add(rej)
	f.Add(make([]byte, 10))
	f.Fuzz(func(t *testing.T, data []byte) {
		data = exact(data)
		var h MADHeader
		if err := h.Decode(data); err == nil {
			out := make([]byte, MADHeaderLen)
			h.Encode(out)
			var h2 MADHeader
			if err := h2.Decode(out); err != nil || h2 != h {
				t.Fatalf("header round trip: %+v %+v %v", h, h2, err)
			}
		}
		for _, attr := range []uint16{AttrReq, AttrMRA, AttrRej, AttrRep, AttrRTU, AttrDREQ, AttrDREP} {
			m := NewCMMessage(attr)
			if err := m.Decode(data); err != nil {
				if !isSentinel(err) {
					t.Fatalf("%T: error %v wraps no sentinel", m, err)
				}
				continue
			}
			out := make([]byte, MADLen)
			if err := EncodeCM(out, h.TID, m); err != nil {
				t.Fatal(err)
			}
			m2 := NewCMMessage(attr)
			if err := m2.Decode(out); err != nil {
				t.Fatalf("%T: decode of encoding: %v", m, err)
			}
			if !equalCM(m, m2) {
				t.Fatalf("%T round trip:\n%+v\n%+v", m, m, m2)
			}
		}
	})
}

func FuzzCMAHeader(f *testing.F) {
	for _, fr := range roceFrames(f) {
		var p Packet
		var req CMReq
		if ParsePacket(fr.data, &p) == nil && p.BTH.Opcode.HasDETH() && req.Decode(p.Payload) == nil {
			f.Add(req.PrivateData[:])
			break
		}
	}
	v6 := make([]byte, CMAHeaderLen)
	(&CMAHeader{IPVersion: 6, SrcAddr: netip.IPv6Loopback(), DstAddr: netip.IPv6Loopback()}).Encode(v6)
	f.Add(v6)
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, exact(data), CMAHeaderLen, (*CMAHeader).Decode, func(h *CMAHeader, out []byte) error {
			h.Encode(out)
			return nil
		})
	})
}

func FuzzCephQPRecord(f *testing.F) {
	f.Add([]byte("0000:00000011:00b92c8d:00000000:00000000000000000000ffff0a4d000b\x00"))
	f.Add([]byte("ABCD:0000001F:00B92C8D:FFFFFFFF:FE800000000000000000000000000001\x00trailing"))
	f.Fuzz(func(t *testing.T, data []byte) {
		data = exact(data)
		out := roundTrip(t, data, CephQPRecordLen, (*CephQPRecord).Decode, (*CephQPRecord).Encode)
		if out != nil && !bytes.EqualFold(out, data[:CephQPRecordLen]) {
			t.Fatalf("encoded %q from %q", out, data[:CephQPRecordLen])
		}
	})
}

// roundTrip decodes data into a T. What does not decode must fail with
// an error wrapping a sentinel; what does must encode into n bytes that
// decode to the same T. It returns the encoding, or nil if data did not
// decode.
func roundTrip[T comparable](t *testing.T, data []byte, n int, decode func(*T, []byte) error, encode func(*T, []byte) error) []byte {
	t.Helper()
	var v T
	if err := decode(&v, data); err != nil {
		if !isSentinel(err) {
			t.Fatalf("error %v wraps no sentinel", err)
		}
		return nil
	}
	out := make([]byte, n)
	if err := encode(&v, out); err != nil {
		t.Fatal(err)
	}
	var v2 T
	if err := decode(&v2, out); err != nil || v2 != v {
		t.Fatalf("round trip: %+v %+v %v", v, v2, err)
	}
	return out
}

// checkClassifierAgrees fails unless the classifier reads a frame that
// ParsePacket decodes (err nil, or only the ICRC wrong) as a well-formed,
// unfragmented UDP datagram to port 4791 between the same addresses:
// both read the Ethernet, IP and UDP headers by package header's rules,
// so a frame RoCE accepts is one the classifier hands to it.
func checkClassifierAgrees(t *testing.T, frame []byte, p *Packet, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrBadICRC) {
		return
	}
	var h classify.Headers
	r := classify.Parse(frame, &h)
	if r != classify.ReasonNone || h.Proto != classify.ProtoUDP || !h.HasPorts || h.DstPort != UDPPort ||
		h.SrcPort != p.UDPSrc || h.Fragment || h.Src != p.SrcIP || h.Dst != p.DstIP || h.VLANs != p.VLANs.N {
		t.Fatalf("ParsePacket accepts %x (%v), classifier: %v, %+v", frame, err, r, h)
	}
}
