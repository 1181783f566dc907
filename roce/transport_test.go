package roce

import (
	"bytes"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

func TestSendSizes(t *testing.T) {
	for _, mtu := range []int{256, 1024, 4096} {
		for _, size := range []int{0, 1, 3, mtu - 1, mtu, mtu + 1, 10001, 65536} {
			for _, imm := range []bool{false, true} {
				n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
				o := defaultQPOpts()
				o.mtu = mtu
				p := n.newPair(o)
				src := roctest.Region(t, n.pa, max(size, 1), 0)
				dst := roctest.Region(t, n.pb, 70000, AccessLocalWrite)
				roctest.Pattern(src.Bytes(), uint64(size))
				if err := p.b.PostRecv(&RecvWR{ID: 7, SGList: []SGE{dst.SGE(0, 70000)}}); err != nil {
					t.Fatal(err)
				}
				wr := SendWR{ID: 9, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{src.SGE(0, size)}, Imm: 0xCAFEBABE}
				if imm {
					wr.Opcode = WRSendWithImm
				}
				if err := p.a.PostSend(&wr); err != nil {
					t.Fatal(err)
				}
				n.Run(100000, func() bool { return p.acqs[0].Len() > 0 && p.bcqs[1].Len() > 0 })
				swc, rwc := roctest.PollOne(t, p.acqs[0]), roctest.PollOne(t, p.bcqs[1])
				if swc.Status != WCSuccess || swc.WRID != 9 || swc.Opcode != WCSend {
					t.Errorf("mtu %d size %d: send completion %+v", mtu, size, swc)
				}
				if rwc.Status != WCSuccess || rwc.WRID != 7 || rwc.Opcode != WCRecv || int(rwc.ByteLen) != size ||
					rwc.QPN != p.b.QPN() || rwc.SrcQP != p.a.QPN() {
					t.Errorf("mtu %d size %d: recv completion %+v", mtu, size, rwc)
				}
				if imm != (rwc.Flags&WCWithImm != 0) || imm && rwc.Imm != 0xCAFEBABE {
					t.Errorf("mtu %d size %d imm %v: recv completion %+v", mtu, size, imm, rwc)
				}
				if !bytes.Equal(dst.Bytes()[:size], src.Bytes()[:size]) {
					t.Errorf("mtu %d size %d: data differs", mtu, size)
				}
			}
		}
	}
}

// TestSendSegmentation checks the packets of the brief's 10,001-byte SEND
// at MTU 1024: FIRST, 8 MIDDLE, LAST with 785 bytes, PadCnt 3 and AckReq,
// answered by one ACK for the last PSN with MSN 1. The FIRST asks for an
// ACK too: the first packet sent with nothing in flight is timed.
func TestSendSegmentation(t *testing.T) {
	n, o, p := newCleanPair(t)
	fromA, fromB := n.capture(n.A.Link, nil), n.capture(n.B.Link, nil)
	src := roctest.Region(t, n.pa, 10001, 0)
	dst := roctest.Region(t, n.pb, 10001, AccessLocalWrite)
	roctest.Pattern(src.Bytes(), 1)
	if err := p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{dst.SGE(0, 10001)}}); err != nil {
		t.Fatal(err)
	}
	if err := p.a.PostSend(&SendWR{ID: 2, Opcode: WRSend, SGList: []SGE{src.SGE(0, 10001)}}); err != nil {
		t.Fatal(err)
	}
	n.Run(1000, func() bool { return p.bcqs[1].Len() > 0 })
	n.Settle()
	if got := p.acqs[0].Len(); got != 0 {
		t.Errorf("unsignaled send produced %d completions", got)
	}
	if len(*fromA) != 10 {
		t.Fatalf("sent %d packets, want 10", len(*fromA))
	}
	for i, c := range *fromA {
		want, size, ackReq := wire.OpRCSendMiddle, 1024, false
		switch i {
		case 0:
			want, ackReq = wire.OpRCSendFirst, true
		case 9:
			want, size, ackReq = wire.OpRCSendLast, 785, true
		}
		if c.bth.Opcode != want || c.n != size || c.bth.AckReq != ackReq || c.bth.PSN != wire.PSNAdd(o.psnA, i) ||
			c.bth.DestQP != p.b.QPN() || c.bth.PKey != 0xFFFF {
			t.Errorf("packet %d: %v psn %#x ackreq %v %d bytes to qp %d, want %v psn %#x ackreq %v %d bytes",
				i, c.bth.Opcode, c.bth.PSN, c.bth.AckReq, c.n, c.bth.DestQP, want, wire.PSNAdd(o.psnA, i), ackReq, size)
		}
	}
	if pad := (*fromA)[9].bth.PadCnt; pad != 3 {
		t.Errorf("last packet PadCnt %d, want 3", pad)
	}
	if len(*fromB) != 1 {
		t.Fatalf("responder sent %d packets, want one ACK", len(*fromB))
	}
	ack := (*fromB)[0]
	if ack.bth.Opcode != wire.OpRCAck || ack.bth.PSN != wire.PSNAdd(o.psnA, 9) || ack.aeth.Syndrome != wire.AETHAck || ack.aeth.MSN != 1 {
		t.Errorf("ack: %v psn %#x aeth %+v", ack.bth.Opcode, ack.bth.PSN, ack.aeth)
	}
	if !bytes.Equal(dst.Bytes(), src.Bytes()) {
		t.Error("data differs")
	}
}

// TestAckReqAndCoalescing checks AckReq on the first packet (sent with
// nothing in flight), every AckReqEvery-th packet after it and the last,
// and that the responder answers a burst of them with fewer ACKs.
func TestAckReqAndCoalescing(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{AckReqEvery: 8})
	o := defaultQPOpts()
	o.mtu = 256
	p := n.newPair(o)
	fromA, fromB := n.capture(n.A.Link, nil), n.capture(n.B.Link, nil)
	const size = 256 * 256
	src := roctest.Region(t, n.pa, size, 0)
	dst := roctest.Region(t, n.pb, size, AccessLocalWrite)
	p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{dst.SGE(0, size)}})
	p.a.PostSend(&SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{src.SGE(0, size)}})
	n.Run(10000, func() bool { return p.acqs[0].Len() > 0 })
	ackReqs := 0
	for i, c := range *fromA {
		want := i%8 == 0 || i == 255
		if c.bth.AckReq != want {
			t.Errorf("packet %d: AckReq %v", i, c.bth.AckReq)
		}
		if c.bth.AckReq {
			ackReqs++
		}
	}
	if len(*fromA) != 256 {
		t.Errorf("sent %d packets, want 256", len(*fromA))
	}
	if acks := len(*fromB); acks == 0 || acks >= ackReqs {
		t.Errorf("%d ACKs for %d AckReq packets: not coalesced", acks, ackReqs)
	}
}

func TestSendScatterGather(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	o := defaultQPOpts()
	o.mtu = 256
	p := n.newPair(o)
	s1, s2, s3 := roctest.Region(t, n.pa, 1000, 0), roctest.Region(t, n.pa, 1500, 0), roctest.Region(t, n.pa, 777, 0)
	roctest.Pattern(s1.Bytes(), 1)
	roctest.Pattern(s2.Bytes(), 2)
	roctest.Pattern(s3.Bytes(), 3)
	d1, d2 := roctest.Region(t, n.pb, 2000, AccessLocalWrite), roctest.Region(t, n.pb, 2000, AccessLocalWrite)
	p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{d1.SGE(0, 2000), d2.SGE(0, 2000)}})
	// The middle SGE starts inside its region to check SGE offsets.
	err := p.a.PostSend(&SendWR{ID: 2, Opcode: WRSend, SGList: []SGE{s1.SGE(0, 1000), s2.SGE(100, 1400), s3.SGE(0, 777)}})
	if err != nil {
		t.Fatal(err)
	}
	n.Run(10000, func() bool { return p.bcqs[1].Len() > 0 })
	wc := roctest.PollOne(t, p.bcqs[1])
	want := append(append(append([]byte{}, s1.Bytes()...), s2.Bytes()[100:]...), s3.Bytes()...)
	got := append(append([]byte{}, d1.Bytes()...), d2.Bytes()...)[:len(want)]
	if wc.Status != WCSuccess || int(wc.ByteLen) != len(want) || !bytes.Equal(got, want) {
		t.Errorf("completion %+v, data equal %v", wc, bytes.Equal(got, want))
	}
}

// TestSmallWindowAsksForAck: with a window smaller than AckReqEvery, the
// packet that fills the window carries AckReq, so a long message moves
// without waiting for the retransmit timer.
func TestSmallWindowAsksForAck(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{MaxUnackedPSNs: 4, AckReqEvery: 64})
	o := defaultQPOpts()
	o.mtu = 256
	p := n.newPair(o)
	fromA := n.capture(n.A.Link, nil)
	src, dst := roctest.Region(t, n.pa, 256*20, 0), roctest.Region(t, n.pb, 256*20, AccessLocalWrite)
	p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{dst.SGE(0, dst.Len())}})
	p.a.PostSend(&SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{src.SGE(0, src.Len())}})
	n.Run(10000, func() bool { return p.acqs[0].Len() > 0 })
	if sa := p.a.Stats(); sa.Timeouts != 0 || sa.Retransmits != 0 {
		t.Errorf("%d timeouts, %d retransmits", sa.Timeouts, sa.Retransmits)
	}
	asks := 0
	for _, c := range *fromA {
		if c.bth.AckReq {
			asks++
		}
	}
	if len(*fromA) != 20 || asks < 5 {
		t.Errorf("%d packets, %d with AckReq", len(*fromA), asks)
	}
}
