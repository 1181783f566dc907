package roce

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// scriptIO is a PacketIO fed by a test: RecvBurst returns the queued
// frames, SendBurst checks that every frame the endpoint builds parses.
type scriptIO struct {
	tb   testing.TB
	in   [][]byte
	sent int
}

func (s *scriptIO) RecvBurst(frames [][]byte) int {
	n := copy(frames, s.in)
	s.in = s.in[n:]
	return n
}

func (s *scriptIO) SendBurst(frames [][]byte) int {
	var p wire.Packet
	for _, f := range frames {
		if err := wire.ParsePacket(f, &p); err != nil {
			s.tb.Fatalf("endpoint sent an invalid frame: %v", err)
		}
	}
	s.sent += len(frames)
	return len(frames)
}

// FuzzQPInput feeds a QP in RTS with well-formed frames (valid ICRC,
// addressed to it from its peer) whose opcodes, PSNs, lengths, keys and
// syndromes come from the fuzzer, then the raw input as a frame. The
// endpoint must not panic, must only send valid frames, must leave
// memory it grants no write access to untouched, and the QP must stay in
// RTS or go to ERROR.
func FuzzQPInput(f *testing.F) {
	seed := func(descs ...[12]byte) []byte {
		var b []byte
		for _, d := range descs {
			b = append(b, d[:]...)
		}
		return b
	}
	// op, psn delta, flags, len hi, len lo, va hi, va lo, key sel, dma hi, dma lo, syndrome, msn
	f.Add(seed([12]byte{0x04, 0, 0x80, 0, 100}))
	f.Add(seed([12]byte{0x00, 0, 0, 4, 0}, [12]byte{0x01, 1, 0, 4, 0}, [12]byte{0x02, 2, 0x80, 0, 7}))
	f.Add(seed([12]byte{0x0A, 0, 0x80, 0, 50, 0, 10, 0, 0, 50}, [12]byte{0x0C, 1, 0x80, 0, 0, 0, 0, 0, 16, 0}))
	f.Add(seed([12]byte{0x0C, 0, 0, 0, 0, 0xFF, 0xF0, 1, 0x10, 0}, [12]byte{0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x60}))
	f.Add(seed([12]byte{0x10, 0, 0, 0, 8}, [12]byte{0x11, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x21, 1}))
	f.Fuzz(fuzzQPInput)
}

func fuzzQPInput(t *testing.T, data []byte) {
	io := &scriptIO{tb: t}
	e, err := NewEndpoint(EndpointConfig{MAC: macB, IP: ipB, IO: io})
	if err != nil {
		t.Fatal(err)
	}
	pd := e.NewPD()
	scq, _ := e.NewCQ(CQConfig{Depth: 64})
	rcq, _ := e.NewCQ(CQConfig{Depth: 64})
	qp, err := pd.CreateQP(&QPInitAttr{SendCQ: scq, RecvCQ: rcq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxRecvSGE: 2}})
	if err != nil {
		t.Fatal(err)
	}
	o := defaultQPOpts()
	o.mtu = 256
	if err := qp.Modify(&QPAttr{State: QPStateInit, Access: AccessRemoteWrite | AccessRemoteRead}, QPAttrState|QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	connectQP(t, qp, o, macA, ipA, 0x42, 1000, 5000)
	writable := roctest.Region(t, pd, 4096, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	readOnly := roctest.Region(t, pd, 4096, AccessRemoteRead)
	recv := roctest.Region(t, pd, 2048, AccessLocalWrite)
	roctest.Pattern(readOnly.Bytes(), 1)
	was := bytes.Clone(readOnly.Bytes())
	for i := range 4 {
		qp.PostRecv(&RecvWR{ID: uint64(i), SGList: []SGE{recv.SGE(i*512, 256), recv.SGE(i*512+256, 256)}})
	}
	local := roctest.Region(t, pd, 4096, AccessLocalWrite)
	qp.PostSend(&SendWR{ID: 1, Opcode: WRSend, SGList: []SGE{local.SGE(0, 600)}})
	qp.PostSend(&SendWR{ID: 2, Opcode: WRRDMARead, SGList: []SGE{local.SGE(1000, 700)}, RemoteAddr: 1 << 40, RKey: 0x101})
	now := time.Unix(0, 0)
	e.Poll(now) // sends the requests at PSN 5000..

	hdr := wire.FrameHeader{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, TTL: 64, UDPSrc: 0xC000}
	payload := make([]byte, 1100)
	var p wire.Packet
	for len(data) >= 12 {
		d := data[:12]
		data = data[12:]
		op := wire.Opcode(d[0] % 0x13)
		psn := uint32(1000 + int(int8(d[1])))
		if op.IsResponse() {
			psn = uint32(5000 + int(int8(d[1])))
		}
		n := int(binary.BigEndian.Uint16(d[3:5])) % len(payload)
		key := writable.RKey()
		switch d[7] % 4 {
		case 1:
			key = readOnly.RKey()
		case 2:
			key ^= uint32(d[7])
		}
		p = wire.Packet{
			BTH:  wire.BTH{Opcode: op, PKey: 0xFFFF, DestQP: qp.QPN(), AckReq: d[2]&0x80 != 0, SE: d[2]&1 != 0, PSN: psn},
			RETH: wire.RETH{VA: writable.Addr() + uint64(binary.BigEndian.Uint16(d[5:7])), RKey: key, DMALen: uint32(binary.BigEndian.Uint16(d[8:10]))},
			AETH: wire.AETH{Syndrome: d[10], MSN: uint32(d[11])},
			Imm:  uint32(d[11]),
		}
		if d[7]%4 == 1 {
			p.RETH.VA = readOnly.Addr() + uint64(binary.BigEndian.Uint16(d[5:7]))
		}
		if !op.HasPayload() {
			n = 0
		}
		frame := make([]byte, maxFrameLen)
		k, err := wire.BuildFrame(frame, &hdr, &p, payload[:n])
		if err != nil {
			continue
		}
		io.in = append(io.in, frame[:k])
		now = now.Add(time.Millisecond)
		e.Poll(now)
	}
	io.in = append(io.in, data)
	for range 4 {
		now = now.Add(time.Second)
		e.Poll(now)
	}
	if st := qp.State(); st != QPStateRTS && st != QPStateError {
		t.Errorf("qp in %v", st)
	}
	if !bytes.Equal(readOnly.Bytes(), was) {
		t.Error("memory without remote write access changed")
	}
}
