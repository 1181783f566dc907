package roce

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

func TestRDMAWriteRead(t *testing.T) {
	for _, size := range []int{0, 1, 1023, 1024, 3*1024 + 5, 100_000} {
		n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
		p := n.newPair(defaultQPOpts())
		local := roctest.Region(t, n.pa, 2*max(size, 1), AccessLocalWrite)
		remote := roctest.Region(t, n.pb, max(size, 1)+64, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
		src, back := local.Bytes()[:size], local.Bytes()[max(size, 1):][:size]
		roctest.Pattern(src, uint64(size))
		// WRITE at offset 64... of the remote region, then READ it back.
		if err := p.a.PostSend(&SendWR{
			ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{local.SGE(0, size)},
			RemoteAddr: remote.Addr() + 64, RKey: remote.RKey(),
		}); err != nil {
			t.Fatal(err)
		}
		if err := p.a.PostSend(&SendWR{
			ID: 2, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{local.SGE(max(size, 1), size)},
			RemoteAddr: remote.Addr() + 64, RKey: remote.RKey(),
		}); err != nil {
			t.Fatal(err)
		}
		n.Run(100_000, func() bool { return p.acqs[0].Len() == 2 })
		w, r := roctest.PollOne(t, p.acqs[0]), roctest.PollOne(t, p.acqs[0])
		if w.WRID != 1 || w.Status != WCSuccess || w.Opcode != WCRDMAWrite ||
			r.WRID != 2 || r.Status != WCSuccess || r.Opcode != WCRDMARead || int(r.ByteLen) != size {
			t.Errorf("size %d: completions %+v %+v", size, w, r)
		}
		if !bytes.Equal(remote.Bytes()[64:64+size], src) || !bytes.Equal(back, src) {
			t.Errorf("size %d: data differs", size)
		}
		if p.bcqs[1].Len() != 0 {
			t.Errorf("size %d: WRITE without immediate consumed a receive", size)
		}
	}
}

// TestRDMAWriteWithImm: the immediate arrives in a receive completion of
// the written length; without a posted receive the WRITE is RNR-NAKed at
// its last packet and the data placed only once.
func TestRDMAWriteWithImm(t *testing.T) {
	n, _, p := newCleanPair(t)
	local := roctest.Region(t, n.pa, 5000, 0)
	remote := roctest.Region(t, n.pb, 5000, AccessLocalWrite|AccessRemoteWrite)
	roctest.Pattern(local.Bytes(), 5)
	p.a.PostSend(&SendWR{ID: 1, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, SGList: []SGE{local.SGE(0, 5000)},
		RemoteAddr: remote.Addr(), RKey: remote.RKey(), Imm: 0x01020304})
	n.Run(100_000, func() bool { return p.a.Stats().RNRNaksReceived > 0 })
	p.b.PostRecv(&RecvWR{ID: 9})
	n.Run(1_000_000, func() bool { return p.acqs[0].Len() > 0 && p.bcqs[1].Len() > 0 })
	rwc := roctest.PollOne(t, p.bcqs[1])
	if rwc.Status != WCSuccess || rwc.Opcode != WCRecvRDMAWithImm || rwc.Flags&WCWithImm == 0 ||
		rwc.Imm != 0x01020304 || rwc.ByteLen != 5000 || rwc.WRID != 9 {
		t.Errorf("receive completion %+v", rwc)
	}
	if wc := roctest.PollOne(t, p.acqs[0]); wc.Status != WCSuccess {
		t.Errorf("send completion %+v", wc)
	}
	if !bytes.Equal(remote.Bytes(), local.Bytes()) {
		t.Error("data differs")
	}
}

// TestRemoteAccessErrors: a WRITE or READ with a wrong R_Key, outside the
// region, or without the rights gets a remote access error NAK; the
// target memory is untouched and both QPs end in ERROR.
func TestRemoteAccessErrors(t *testing.T) {
	const size = 3000 // three packets at MTU 1024
	type setup struct {
		mrAccess, qpAccess Access
		addr               func(mr *MR) uint64
		rkey               func(mr *MR) uint32
	}
	ok := setup{
		mrAccess: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead,
		qpAccess: AccessRemoteWrite | AccessRemoteRead,
		addr:     func(mr *MR) uint64 { return mr.Addr() },
		rkey:     func(mr *MR) uint32 { return mr.RKey() },
	}
	for _, tc := range []struct {
		name string
		op   WROpcode
		mod  func(*setup)
	}{
		{"write/wrong rkey", WRRDMAWrite, func(s *setup) { s.rkey = func(mr *MR) uint32 { return mr.RKey() ^ 1 } }},
		{"write/unknown rkey", WRRDMAWrite, func(s *setup) { s.rkey = func(mr *MR) uint32 { return 0x7F0001 } }},
		{"write/past end", WRRDMAWrite, func(s *setup) { s.addr = func(mr *MR) uint64 { return mr.Addr() + uint64(mr.Len()-size+1) } }},
		{"write/before start", WRRDMAWrite, func(s *setup) { s.addr = func(mr *MR) uint64 { return mr.Addr() - 1 } }},
		{"write/region without remote write", WRRDMAWrite, func(s *setup) { s.mrAccess = AccessRemoteRead }},
		{"write/qp without remote write", WRRDMAWrite, func(s *setup) { s.qpAccess = AccessRemoteRead }},
		{"read/wrong rkey", WRRDMARead, func(s *setup) { s.rkey = func(mr *MR) uint32 { return mr.RKey() + 0x100 } }},
		{"read/past end", WRRDMARead, func(s *setup) { s.addr = func(mr *MR) uint64 { return mr.Addr() + uint64(mr.Len()) } }},
		{"read/region without remote read", WRRDMARead, func(s *setup) { s.mrAccess = AccessLocalWrite | AccessRemoteWrite }},
		{"read/qp without remote read", WRRDMARead, func(s *setup) { s.qpAccess = AccessRemoteWrite }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.mod(&s)
			n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
			o := defaultQPOpts()
			o.access = s.qpAccess
			p := n.newPair(o)
			local := roctest.Region(t, n.pa, size, AccessLocalWrite)
			remote := roctest.Region(t, n.pb, 8192, s.mrAccess)
			roctest.Pattern(local.Bytes(), 1)
			roctest.Pattern(remote.Bytes(), 2)
			localWas, remoteWas := bytes.Clone(local.Bytes()), bytes.Clone(remote.Bytes())
			if err := p.a.PostSend(&SendWR{ID: 1, Opcode: tc.op, Flags: SendSignaled, SGList: []SGE{local.SGE(0, size)},
				RemoteAddr: s.addr(remote), RKey: s.rkey(remote)}); err != nil {
				t.Fatal(err)
			}
			p.a.PostSend(&SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled})
			n.Run(100_000, func() bool { return p.acqs[0].Len() == 2 })
			n.Settle()
			wc := roctest.PollOne(t, p.acqs[0])
			if wc.WRID != 1 || wc.Status != WCRemAccessErr || !errors.Is(wc.Status.Err(), ErrRemoteAccess) {
				t.Errorf("completion %+v, want remote access error", wc)
			}
			if wc := roctest.PollOne(t, p.acqs[0]); wc.Status != WCWRFlushErr {
				t.Errorf("second completion %+v, want flushed", wc)
			}
			if !bytes.Equal(remote.Bytes(), remoteWas) || !bytes.Equal(local.Bytes(), localWas) {
				t.Error("memory changed")
			}
			sa, sb := p.a.Stats(), p.b.Stats()
			if sb.NaksSent[NakRemoteAccess] != 1 || sa.NaksReceived[NakRemoteAccess] != 1 {
				t.Errorf("remote access NAKs sent %d, received %d", sb.NaksSent[NakRemoteAccess], sa.NaksReceived[NakRemoteAccess])
			}
			if p.a.State() != QPStateError || p.b.State() != QPStateError || !errors.Is(p.b.Err(), ErrRemoteAccess) {
				t.Errorf("states %v/%v, responder error %v", p.a.State(), p.b.State(), p.b.Err())
			}
		})
	}
}

// TestReadLostResponse drops one READ response in the middle: the
// requester asks again for the rest only, from the missing PSN.
func TestReadLostResponse(t *testing.T) {
	n, o, p := newCleanPair(t)
	const size = 8*1024 + 100
	local := roctest.Region(t, n.pa, size, AccessLocalWrite)
	remote := roctest.Region(t, n.pb, size, AccessRemoteRead)
	roctest.Pattern(remote.Bytes(), 3)
	fromA := n.capture(n.A.Link, nil)
	n.capture(n.B.Link, dropOnce(func(c *captured) bool { return c.bth.Opcode == wire.OpRCReadRespMiddle }))
	p.a.PostSend(&SendWR{ID: 1, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{local.SGE(0, size)},
		RemoteAddr: remote.Addr(), RKey: remote.RKey()})
	n.Run(100_000, func() bool { return p.acqs[0].Len() > 0 })
	if wc := roctest.PollOne(t, p.acqs[0]); wc.Status != WCSuccess || wc.ByteLen != size {
		t.Errorf("completion %+v", wc)
	}
	if !bytes.Equal(local.Bytes(), remote.Bytes()) {
		t.Error("data differs")
	}
	if len(*fromA) != 2 {
		t.Fatalf("%d read requests, want 2", len(*fromA))
	}
	re := (*fromA)[1]
	if re.bth.PSN != wire.PSNAdd(o.psnA, 1) || re.reth.VA != remote.Addr()+1024 || re.reth.DMALen != size-1024 {
		t.Errorf("second request psn %#x reth %+v, want psn %#x va %#x len %d",
			re.bth.PSN, re.reth, wire.PSNAdd(o.psnA, 1), remote.Addr()+1024, size-1024)
	}
}

// TestReceiveTooSmall: a SEND longer than the receive buffer fails both
// sides: local length error at the receiver, invalid request NAK at the
// sender.
func TestReceiveTooSmall(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	p := n.newPair(defaultQPOpts())
	src := roctest.Region(t, n.pa, 3000, 0)
	dst := roctest.Region(t, n.pb, 4096, AccessLocalWrite)
	p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{dst.SGE(0, 2000)}})
	p.b.PostRecv(&RecvWR{ID: 2, SGList: []SGE{dst.SGE(2000, 2000)}})
	p.a.PostSend(&SendWR{ID: 3, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{src.SGE(0, 3000)}})
	n.Run(100_000, func() bool { return p.acqs[0].Len() > 0 && p.bcqs[1].Len() == 2 })
	if wc := roctest.PollOne(t, p.acqs[0]); wc.Status != WCRemInvReqErr {
		t.Errorf("send completion %+v", wc)
	}
	if wc := roctest.PollOne(t, p.bcqs[1]); wc.WRID != 1 || wc.Status != WCLocLenErr {
		t.Errorf("first receive completion %+v", wc)
	}
	if wc := roctest.PollOne(t, p.bcqs[1]); wc.WRID != 2 || wc.Status != WCWRFlushErr {
		t.Errorf("second receive completion %+v", wc)
	}
	if sb := p.b.Stats(); sb.NaksSent[NakInvalidRequest] != 1 {
		t.Errorf("invalid request NAKs %d", sb.NaksSent[NakInvalidRequest])
	}
}

// TestOutstandingReads issues more READs than MaxRdAtomic: the requester
// keeps at most that many in flight and all complete in order.
func TestOutstandingReads(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0.02), EndpointConfig{})
	o := defaultQPOpts()
	o.rdAtomic = 2
	p := n.newPair(o)
	local := roctest.Region(t, n.pa, 16*5000, AccessLocalWrite)
	remote := roctest.Region(t, n.pb, 16*5000, AccessRemoteRead)
	roctest.Pattern(remote.Bytes(), 4)
	for i := range 16 {
		if err := p.a.PostSend(&SendWR{ID: uint64(i), Opcode: WRRDMARead, Flags: SendSignaled,
			SGList: []SGE{local.SGE(i*5000, 5000)}, RemoteAddr: remote.Addr() + uint64(i*5000), RKey: remote.RKey()}); err != nil {
			t.Fatal(err)
		}
	}
	maxOut := 0
	n.Run(1_000_000, func() bool {
		maxOut = max(maxOut, p.a.req.readsOut)
		return p.acqs[0].Len() == 16
	})
	readsDone(t, p.acqs[0], 16, local, remote)
	if maxOut > 2 {
		t.Errorf("%d reads outstanding, max 2", maxOut)
	}
}

// TestReadCompletedBehindLostRead loses the response to a first READ
// while a second READ, as long as the whole window, gets all its data:
// the second can complete only after the first is asked again, and the
// window must then open past both, or the SEND behind them stalls. The
// second READ is not asked for again.
func TestReadCompletedBehindLostRead(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{MaxUnackedPSNs: 4})
	o := defaultQPOpts()
	p := n.newPair(o)
	local := roctest.Region(t, n.pa, 100+4096, AccessLocalWrite)
	remote := roctest.Region(t, n.pb, 100+4096, AccessRemoteRead)
	roctest.Pattern(remote.Bytes(), 8)
	fromA := n.capture(n.A.Link, nil)
	n.capture(n.B.Link, dropOnce(func(c *captured) bool { return c.bth.Opcode == wire.OpRCReadRespOnly }))
	p.a.PostSend(&SendWR{ID: 0, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{local.SGE(0, 100)},
		RemoteAddr: remote.Addr(), RKey: remote.RKey()})
	p.a.PostSend(&SendWR{ID: 1, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{local.SGE(100, 4096)},
		RemoteAddr: remote.Addr() + 100, RKey: remote.RKey()})
	p.b.PostRecv(&RecvWR{ID: 9})
	p.a.PostSend(&SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled})
	n.Run(100_000, func() bool { return p.acqs[0].Len() == 3 })
	readsDone(t, p.acqs[0], 3, local, remote)
	var reads int
	for _, c := range *fromA {
		if c.bth.Opcode == wire.OpRCReadRequest {
			reads++
		}
	}
	if reads != 3 {
		t.Errorf("%d read requests, want 3 (the first twice)", reads)
	}
}

// TestReadPartlyAnsweredBehindLostRead loses the response to a first
// READ and the last response to a second one: the second READ's other
// responses arrive while the first is missing and must count once it is
// complete, so that asking for the one missing response fits the window.
func TestReadPartlyAnsweredBehindLostRead(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{MaxUnackedPSNs: 4})
	o := defaultQPOpts()
	p := n.newPair(o)
	const second = 6 * 1024
	local := roctest.Region(t, n.pa, 100+second, AccessLocalWrite)
	remote := roctest.Region(t, n.pb, 100+second, AccessRemoteRead)
	roctest.Pattern(remote.Bytes(), 9)
	fromA := n.capture(n.A.Link, nil)
	dropOnly := dropOnce(func(c *captured) bool { return c.bth.Opcode == wire.OpRCReadRespOnly })
	dropLast := dropOnce(func(c *captured) bool { return c.bth.Opcode == wire.OpRCReadRespLast })
	n.capture(n.B.Link, func(c *captured, i int) bool { return dropOnly(c, i) || dropLast(c, i) })
	p.a.PostSend(&SendWR{ID: 0, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{local.SGE(0, 100)},
		RemoteAddr: remote.Addr(), RKey: remote.RKey()})
	p.a.PostSend(&SendWR{ID: 1, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{local.SGE(100, second)},
		RemoteAddr: remote.Addr() + 100, RKey: remote.RKey()})
	n.Run(100_000, func() bool { return p.acqs[0].Len() == 2 })
	readsDone(t, p.acqs[0], 2, local, remote)
	last := (*fromA)[len(*fromA)-1]
	if last.bth.Opcode != wire.OpRCReadRequest || last.reth.DMALen != 1024 || last.reth.VA != remote.Addr()+100+5*1024 {
		t.Errorf("last request %v %+v, want a READ of the last 1024 bytes", last.bth.Opcode, last.reth)
	}
}

// readsDone takes k successful completions from cq, in work request ID
// order from 0, and checks that the READs brought remote's bytes to
// local.
func readsDone(t *testing.T, cq *CQ, k int, local, remote *MR) {
	t.Helper()
	for i := range k {
		if wc := roctest.PollOne(t, cq); wc.WRID != uint64(i) || wc.Status != WCSuccess {
			t.Errorf("completion %d: %+v", i, wc)
		}
	}
	if !bytes.Equal(local.Bytes(), remote.Bytes()) {
		t.Error("data differs")
	}
}
