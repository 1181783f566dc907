package roce

import (
	"bytes"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"math/rand/v2"
	"testing"
)

// soakSide drives one direction of TestMixedOperationsUnderFaults: the
// requester side's QP posts random operations at the responder side's QP.
type soakSide struct {
	req, resp     *QP
	sendCQ        *CQ // requester's
	recvCQ        *CQ // responder's
	src, readDst  *MR // requester memory
	target, recvs *MR // responder memory: WRITE target, receive buffers
	readable      *MR // responder memory READs read, never written
	ops           []soakOp
	posted        int
	sendDone      int
	recvDone      int
	recvOps       []int // ops that consume a receive, in order
}

type soakOp struct {
	op   WROpcode
	off  int // offset in src/target/readDst/readable
	size int
}

const soakSlot = 8 << 10 // memory per operation

func newSoakSide(t *testing.T, req, resp *QP, reqPD, respPD *PD, sendCQ, recvCQ *CQ, nops int, rng *rand.Rand) *soakSide {
	s := &soakSide{
		req: req, resp: resp, sendCQ: sendCQ, recvCQ: recvCQ,
		src:      roctest.Region(t, reqPD, nops*soakSlot, 0),
		readDst:  roctest.Region(t, reqPD, nops*soakSlot, AccessLocalWrite),
		target:   roctest.Region(t, respPD, nops*soakSlot, AccessLocalWrite|AccessRemoteWrite),
		recvs:    roctest.Region(t, respPD, nops*soakSlot, AccessLocalWrite),
		readable: roctest.Region(t, respPD, nops*soakSlot, AccessRemoteRead),
	}
	roctest.Pattern(s.src.Bytes(), rng.Uint64())
	roctest.Pattern(s.readable.Bytes(), rng.Uint64())
	for i := range nops {
		op := soakOp{op: WROpcode(rng.IntN(int(WRRDMARead) + 1)), off: i * soakSlot, size: rng.IntN(6000)}
		if rng.IntN(8) == 0 {
			op.size = 0
		}
		s.ops = append(s.ops, op)
		if op.op == WRSend || op.op == WRSendWithImm || op.op == WRRDMAWriteWithImm {
			s.recvOps = append(s.recvOps, i)
			// Receives are posted up front, in the order they will be used.
			if err := resp.PostRecv(&RecvWR{ID: uint64(i), SGList: []SGE{s.recvs.SGE(i*soakSlot, soakSlot)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

// post posts as many operations as the send queue takes.
func (s *soakSide) post(t *testing.T) {
	for s.posted < len(s.ops) && s.req.SendQueueFree() > 0 {
		i := s.posted
		o := s.ops[i]
		wr := SendWR{ID: uint64(i), Opcode: o.op, Flags: SendSignaled, Imm: uint32(i)}
		switch o.op {
		case WRRDMARead:
			wr.SGList = []SGE{s.readDst.SGE(o.off, o.size)}
			wr.RemoteAddr, wr.RKey = s.readable.Addr()+uint64(o.off), s.readable.RKey()
		case WRRDMAWrite, WRRDMAWriteWithImm:
			wr.SGList = []SGE{s.src.SGE(o.off, o.size)}
			wr.RemoteAddr, wr.RKey = s.target.Addr()+uint64(o.off), s.target.RKey()
		default:
			wr.SGList = []SGE{s.src.SGE(o.off, o.size)}
		}
		if err := s.req.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		s.posted++
	}
}

// check polls both CQs and verifies every completion and its data.
func (s *soakSide) check(t *testing.T) {
	var wc [16]WorkCompletion
	for k := s.sendCQ.Poll(wc[:]); k > 0; k = s.sendCQ.Poll(wc[:]) {
		for _, c := range wc[:k] {
			i := s.sendDone
			o := s.ops[i]
			if c.WRID != uint64(i) || c.Status != WCSuccess || c.Opcode != wrCompletionOpcode(o.op) {
				t.Fatalf("send completion %d: %+v for %v", i, c, o.op)
			}
			switch o.op {
			case WRRDMARead:
				if !bytes.Equal(s.readDst.Bytes()[o.off:o.off+o.size], s.readable.Bytes()[o.off:o.off+o.size]) {
					t.Fatalf("op %d: read data differs", i)
				}
			case WRRDMAWrite, WRRDMAWriteWithImm:
				if !bytes.Equal(s.target.Bytes()[o.off:o.off+o.size], s.src.Bytes()[o.off:o.off+o.size]) {
					t.Fatalf("op %d: written data differs", i)
				}
			}
			s.sendDone++
		}
	}
	for k := s.recvCQ.Poll(wc[:]); k > 0; k = s.recvCQ.Poll(wc[:]) {
		for _, c := range wc[:k] {
			i := s.recvOps[s.recvDone]
			o := s.ops[i]
			wantOp := WCRecv
			if o.op == WRRDMAWriteWithImm {
				wantOp = WCRecvRDMAWithImm
			}
			withImm := o.op != WRSend
			if c.WRID != uint64(i) || c.Status != WCSuccess || c.Opcode != wantOp || int(c.ByteLen) != o.size ||
				withImm != (c.Flags&WCWithImm != 0) || withImm && c.Imm != uint32(i) {
				t.Fatalf("receive completion for op %d (%v, %d bytes): %+v", i, o.op, o.size, c)
			}
			if o.op != WRRDMAWriteWithImm && !bytes.Equal(s.recvs.Bytes()[o.off:o.off+o.size], s.src.Bytes()[o.off:o.off+o.size]) {
				t.Fatalf("op %d: received data differs", i)
			}
			s.recvDone++
		}
	}
}

func (s *soakSide) done() bool { return s.sendDone == len(s.ops) && s.recvDone == len(s.recvOps) }

// soak runs nops random operations each way over p, drawn from rng, for
// at most rounds rounds, checking every completion.
func (n *testNet) soak(t *testing.T, p *qpPair, nops int, rng *rand.Rand, rounds int) {
	ab := newSoakSide(t, p.a, p.b, n.pa, n.pb, p.acqs[0], p.bcqs[1], nops, rng)
	ba := newSoakSide(t, p.b, p.a, n.pb, n.pa, p.bcqs[0], p.acqs[1], nops, rng)
	n.Run(rounds, func() bool {
		for _, s := range []*soakSide{ab, ba} {
			s.post(t)
			s.check(t)
		}
		return ab.done() && ba.done()
	})
}

// TestMixedOperationsUnderFaults runs random SENDs, WRITEs and READs,
// with and without immediate, in both directions at once over a link
// with 2% of each fault: every operation completes, in order, with its
// data intact.
func TestMixedOperationsUnderFaults(t *testing.T) {
	nops := 400
	if testing.Short() {
		nops = 100
	}
	n := newTestNet(t, roctest.Faulty(1, 0.02), EndpointConfig{})
	o := defaultQPOpts()
	o.mtu = 512
	o.sendDepth, o.recvDept = 32, nops
	p := n.newPair(o)
	n.soak(t, p, nops, rand.New(rand.NewPCG(5, 6)), 10_000_000)
	sa, sb := p.a.Stats(), p.b.Stats()
	if sa.Retransmits == 0 || sb.Retransmits == 0 || sa.Duplicates == 0 || sb.Duplicates == 0 {
		t.Errorf("recovery not exercised: a %+v, b %+v", sa, sb)
	}
	t.Logf("a: tx %d retransmits %d timeouts %d naks %v; b: tx %d retransmits %d timeouts %d naks %v",
		sa.TxPackets, sa.Retransmits, sa.Timeouts, sa.NaksSent, sb.TxPackets, sb.Retransmits, sb.Timeouts, sb.NaksSent)
}
