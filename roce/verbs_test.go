package roce

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

func TestMemoryRegions(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	pd := n.pa
	a := roctest.Region(t, pd, 4096, AccessLocalWrite|AccessRemoteRead)
	b := roctest.Region(t, pd, 100, AccessLocalWrite|AccessRemoteWrite)
	if a.LKey() == b.LKey() || a.Addr() == b.Addr() || a.LKey() != a.RKey() {
		t.Fatalf("keys %#x/%#x addrs %#x/%#x", a.LKey(), b.LKey(), a.Addr(), b.Addr())
	}
	for _, tc := range []struct {
		name string
		key  uint32
		va   uint64
		n    uint64
		need Access
		ok   bool
	}{
		{"whole", a.RKey(), a.Addr(), 4096, AccessRemoteRead, true},
		{"tail", a.RKey(), a.Addr() + 4095, 1, AccessRemoteRead, true},
		{"empty at end", a.RKey(), a.Addr() + 4096, 0, AccessRemoteRead, true},
		{"one past", a.RKey(), a.Addr() + 4096, 1, AccessRemoteRead, false},
		{"too long", a.RKey(), a.Addr(), 4097, AccessRemoteRead, false},
		{"before", a.RKey(), a.Addr() - 1, 1, AccessRemoteRead, false},
		{"huge length wraps", a.RKey(), a.Addr() + 1, ^uint64(0), AccessRemoteRead, false},
		{"other region's address", a.RKey(), b.Addr(), 1, AccessRemoteRead, false},
		{"missing right", a.RKey(), a.Addr(), 1, AccessRemoteWrite, false},
		{"wrong generation", a.RKey() ^ 0xFF, a.Addr(), 1, AccessRemoteRead, false},
		{"key zero", 0, a.Addr(), 1, 0, false},
		{"unknown slot", 0xFFFF00, a.Addr(), 1, 0, false},
	} {
		if _, ok := pd.span(tc.key, tc.va, tc.n, tc.need); ok != tc.ok {
			t.Errorf("%s: span ok %v, want %v", tc.name, ok, tc.ok)
		}
	}
	old := a.RKey()
	if err := a.Deregister(); err != nil {
		t.Fatal(err)
	}
	if _, ok := pd.span(old, a.Addr(), 1, 0); ok {
		t.Error("deregistered key still works")
	}
	c := roctest.Region(t, pd, 10, 0) // reuses a's slot with a new generation
	if c.Addr() != a.Addr() || c.LKey() == old {
		t.Errorf("reused slot: addr %#x key %#x (old %#x)", c.Addr(), c.LKey(), old)
	}
	if err := a.Deregister(); !errors.Is(err, ErrInvalidState) {
		t.Errorf("second deregister: %v", err)
	}
	if err := pd.Dealloc(); !errors.Is(err, ErrBusy) {
		t.Errorf("dealloc of a pd with regions: %v", err)
	}
	for _, mr := range []*MR{b, c} {
		mr.Deregister()
	}
	if err := pd.Dealloc(); err != nil {
		t.Errorf("dealloc of an empty pd: %v", err)
	}
	if _, err := pd.RegisterMR(make([]byte, 1), 0); !errors.Is(err, ErrInvalidState) {
		t.Errorf("register on a deallocated pd: %v", err)
	}
	pd = n.pb
	for _, bad := range []struct {
		buf    []byte
		access Access
	}{{nil, 0}, {make([]byte, 1), AccessRemoteWrite}, {make([]byte, 1), 0x80}} {
		if _, err := pd.RegisterMR(bad.buf, bad.access); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("register %d bytes %v: %v", len(bad.buf), bad.access, err)
		}
	}
}

func TestHeapAllocator(t *testing.T) {
	a := &HeapAllocator{Limit: 1000}
	b1, err := a.Alloc(600)
	if err != nil || len(b1) != 600 {
		t.Fatal(err)
	}
	if _, err := a.Alloc(500); !errors.Is(err, ErrNoMemory) {
		t.Errorf("over limit: %v", err)
	}
	a.Free(b1)
	if a.InUse() != 0 {
		t.Errorf("in use %d after free", a.InUse())
	}
	if _, err := a.Alloc(0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("zero size: %v", err)
	}
}

func TestCQRing(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	calls := 0
	cq, err := n.a.NewCQ(CQConfig{Depth: 3, OnCompletion: func(*CQ) { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	var out [2]WorkCompletion
	id := uint64(0)
	for round := range 5 {
		for range 2 {
			if !cq.push(&WorkCompletion{WRID: id}) {
				t.Fatalf("round %d: push failed with %d queued", round, cq.Len())
			}
			id++
		}
		if k := cq.Poll(out[:]); k != 2 || out[0].WRID != id-2 || out[1].WRID != id-1 {
			t.Fatalf("round %d: polled %d: %+v", round, k, out[:k])
		}
	}
	for range 3 {
		cq.push(&WorkCompletion{})
	}
	if cq.push(&WorkCompletion{}) {
		t.Error("push into a full queue succeeded")
	}
	n.a.Poll(n.Now)
	if calls != 1 {
		t.Errorf("completion handler called %d times in one poll, want 1", calls)
	}
	if _, err := n.a.NewCQ(CQConfig{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("zero depth: %v", err)
	}
}

func TestQPStateMachine(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	var events []Event
	qp, _ := n.newQP(n.pa, defaultQPOpts(), &events)
	rtr := QPAttr{State: QPStateRTR, AV: AddressVector{DstMAC: macB, DstIP: ipB}, PathMTU: 1024, DestQPN: 0x22, RQPSN: 5}
	rtrMask := QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
	steps := []struct {
		name  string
		attr  QPAttr
		mask  QPAttrMask
		err   error
		state QPState
	}{
		{"init to rts", QPAttr{State: QPStateRTS, SQPSN: 1}, QPAttrState | QPAttrSQPSN, ErrInvalidState, QPStateInit},
		{"rtr without av", QPAttr{State: QPStateRTR, PathMTU: 1024, DestQPN: 2}, QPAttrState | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN, ErrInvalidArgument, QPStateInit},
		{"rtr with sq psn", rtr, rtrMask | QPAttrSQPSN, ErrInvalidArgument, QPStateInit},
		{"rtr bad mtu", func() QPAttr { a := rtr; a.PathMTU = 1500; return a }(), rtrMask, ErrInvalidArgument, QPStateInit},
		{"rtr dest qp 1", func() QPAttr { a := rtr; a.DestQPN = 1; return a }(), rtrMask, ErrInvalidArgument, QPStateInit},
		{"rtr psn too wide", func() QPAttr { a := rtr; a.RQPSN = 1 << 24; return a }(), rtrMask, ErrInvalidArgument, QPStateInit},
		{"rtr ipv6 to ipv4", func() QPAttr { a := rtr; a.AV.SrcIP = netip.MustParseAddr("fe80::1"); return a }(), rtrMask, ErrInvalidArgument, QPStateInit},
		{"rtr", rtr, rtrMask, nil, QPStateRTR},
		{"rts retry 8", QPAttr{State: QPStateRTS, RetryCnt: 8}, QPAttrState | QPAttrSQPSN | QPAttrRetryCnt, ErrInvalidArgument, QPStateRTR},
		{"rts rd atomic 17", QPAttr{State: QPStateRTS, MaxRdAtomic: 17}, QPAttrState | QPAttrSQPSN | QPAttrMaxRdAtomic, ErrInvalidArgument, QPStateRTR},
		{"rts", QPAttr{State: QPStateRTS, SQPSN: 7, Timeout: 14}, QPAttrState | QPAttrSQPSN | QPAttrTimeout, nil, QPStateRTS},
		{"rts to rts timeout", QPAttr{Timeout: 20}, QPAttrTimeout, nil, QPStateRTS},
		{"rts to rts av", rtr, QPAttrAV, ErrInvalidArgument, QPStateRTS},
		{"rts to rtr", rtr, rtrMask, ErrInvalidState, QPStateRTS},
		{"error with attributes", QPAttr{State: QPStateError}, QPAttrState | QPAttrTimeout, ErrInvalidArgument, QPStateRTS},
		{"error", QPAttr{State: QPStateError}, QPAttrState, nil, QPStateError},
		{"error to rts", QPAttr{State: QPStateRTS, SQPSN: 1}, QPAttrState | QPAttrSQPSN, ErrInvalidState, QPStateError},
		{"reset", QPAttr{State: QPStateReset}, QPAttrState, nil, QPStateReset},
		{"init again", QPAttr{State: QPStateInit}, QPAttrState, nil, QPStateInit},
	}
	for _, s := range steps {
		err := qp.Modify(&s.attr, s.mask)
		if s.err == nil && err != nil || s.err != nil && !errors.Is(err, s.err) {
			t.Errorf("%s: err %v, want %v", s.name, err, s.err)
		}
		if qp.State() != s.state {
			t.Errorf("%s: state %v, want %v", s.name, qp.State(), s.state)
		}
	}
	if got := qp.Stats().State; got != QPStateInit {
		t.Errorf("published state %v", got)
	}
	if err := qp.PostSend(&SendWR{}); !errors.Is(err, ErrInvalidState) {
		t.Errorf("post send in INIT: %v", err)
	}
	if len(events) != 0 {
		t.Errorf("events for a requested ERROR: %+v", events)
	}
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&QPAttr{State: QPStateError}, QPAttrState); !errors.Is(err, ErrInvalidState) {
		t.Errorf("modify after destroy: %v", err)
	}
}

func TestPostValidation(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	o := defaultQPOpts()
	o.sendDepth, o.recvDept, o.sges = 2, 2, 1
	p := n.newPair(o)
	ro := roctest.Region(t, n.pa, 100, 0)
	rw := roctest.Region(t, n.pa, 100, AccessLocalWrite)
	for _, tc := range []struct {
		name string
		wr   SendWR
		err  error
	}{
		{"unknown lkey", SendWR{Opcode: WRSend, SGList: []SGE{{Addr: ro.Addr(), Length: 1, LKey: 0x999}}}, ErrLocalProtection},
		{"past region", SendWR{Opcode: WRSend, SGList: []SGE{ro.SGE(50, 51)}}, ErrLocalProtection},
		{"read into read-only", SendWR{Opcode: WRRDMARead, SGList: []SGE{ro.SGE(0, 10)}}, ErrLocalProtection},
		{"too many sges", SendWR{Opcode: WRSend, SGList: []SGE{rw.SGE(0, 1), rw.SGE(1, 1)}}, ErrInvalidArgument},
		{"bad opcode", SendWR{Opcode: 99}, ErrInvalidArgument},
	} {
		if err := p.a.PostSend(&tc.wr); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	if err := p.a.PostRecv(&RecvWR{SGList: []SGE{ro.SGE(0, 10)}}); !errors.Is(err, ErrLocalProtection) {
		t.Errorf("receive into read-only memory: %v", err)
	}
	for range 2 {
		if err := p.a.PostSend(&SendWR{Opcode: WRSend}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.a.PostSend(&SendWR{Opcode: WRSend}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("third send on a 2-deep queue: %v", err)
	}
	if p.a.SendQueueFree() != 0 {
		t.Errorf("free slots %d", p.a.SendQueueFree())
	}
}

// TestFlushInError: moving a QP to ERROR completes every posted work
// request, signaled or not, as flushed; later posts complete at once.
func TestFlushInError(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	p := n.newPair(defaultQPOpts())
	buf := roctest.Region(t, n.pa, 100, AccessLocalWrite)
	for i := range 3 {
		p.a.PostSend(&SendWR{ID: uint64(i), Opcode: WRSend, SGList: []SGE{buf.SGE(0, 10)}}) // unsignaled
		p.a.PostRecv(&RecvWR{ID: uint64(10 + i), SGList: []SGE{buf.SGE(0, 100)}})
	}
	n.Poll() // some packets go out; nothing completes before ERROR
	if err := p.a.Modify(&QPAttr{State: QPStateError}, QPAttrState); err != nil {
		t.Fatal(err)
	}
	p.a.PostSend(&SendWR{ID: 3, Opcode: WRSend})
	p.a.PostRecv(&RecvWR{ID: 13})
	for _, q := range []struct {
		cq   *CQ
		base uint64
		op   WCOpcode
	}{{p.acqs[0], 0, WCSend}, {p.acqs[1], 10, WCRecv}} {
		for i := range 4 {
			wc := roctest.PollOne(t, q.cq)
			if wc.WRID != q.base+uint64(i) || wc.Status != WCWRFlushErr || wc.Opcode != q.op || wc.QPN != p.a.QPN() {
				t.Errorf("completion %+v, want wr %d flushed", wc, q.base+uint64(i))
			}
		}
	}
	n.Settle() // frames to an ERROR QP are dropped
	if p.a.Stats().Dropped == 0 {
		t.Error("the peer's acknowledgements were not dropped")
	}
}

func TestCommEstablished(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	o := defaultQPOpts()
	var aEv, bEv []Event
	qa, acqs := n.newQP(n.pa, o, &aEv)
	qb, bcqs := n.newQP(n.pb, o, &bEv)
	connectQP(t, qa, o, macB, ipB, qb.QPN(), o.psnB, o.psnA)
	// b stays in RTR: it receives and acknowledges, it does not send.
	err := qb.Modify(&QPAttr{State: QPStateRTR, AV: AddressVector{DstMAC: macA, DstIP: ipA}, PathMTU: o.mtu,
		DestQPN: qa.QPN(), RQPSN: o.psnA}, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN)
	if err != nil {
		t.Fatal(err)
	}
	qb.PostRecv(&RecvWR{ID: 1})
	qa.PostSend(&SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled})
	n.Run(1000, func() bool { return acqs[0].Len() > 0 && bcqs[1].Len() > 0 })
	if len(bEv) != 1 || bEv[0].Type != EventCommEstablished || bEv[0].QPN != qb.QPN() {
		t.Errorf("events %+v", bEv)
	}
}

// TestAddressChecks: frames from a source address other than the QP's
// peer (rxe check_addr), to an unknown QP or to another host are dropped.
func TestAddressChecks(t *testing.T) {
	n, o, p := newCleanPair(t)
	var ev []Event
	send := func(dstIP, srcIP netip.Addr, dqpn uint32) {
		qp, _ := n.newQP(n.pa, o, &ev)
		err := qp.Modify(&QPAttr{State: QPStateRTR, AV: AddressVector{DstMAC: macB, DstIP: dstIP, SrcIP: srcIP},
			PathMTU: o.mtu, DestQPN: dqpn}, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN)
		if err != nil {
			t.Fatal(err)
		}
		if err := qp.Modify(&QPAttr{State: QPStateRTS, SQPSN: o.psnA}, QPAttrState|QPAttrSQPSN); err != nil {
			t.Fatal(err)
		}
		qp.PostSend(&SendWR{Opcode: WRSend})
	}
	send(ipB, netip.MustParseAddr("10.0.0.9"), p.b.QPN())
	send(ipB, ipA, 0xABCDE)
	send(netip.MustParseAddr("10.0.0.3"), ipA, p.b.QPN())
	for range 10 {
		n.Poll()
	}
	if sb := p.b.Stats(); sb.Dropped != 1 || sb.RxPackets != 0 {
		t.Errorf("qp stats %+v, want the spoofed frame dropped", sb)
	}
	if es := n.b.Stats(); es.NoQP != 1 || es.NotLocal != 1 {
		t.Errorf("endpoint stats %+v, want one frame for no qp, one for another host", es)
	}
}

func TestGSI(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	var got []byte
	var from wire.Packet
	n.b.Attach(nil, &dispatcher{gsi: func(p *wire.Packet) {
		got = bytes.Clone(p.Payload)
		from = *p
	}})
	mad := make([]byte, 256)
	roctest.Pattern(mad, 9)
	if err := n.a.SendGSI(&AddressVector{DstMAC: macB, DstIP: ipB}, mad); err != nil {
		t.Fatal(err)
	}
	n.Poll()
	if !bytes.Equal(got, mad) {
		t.Fatalf("handler got %d bytes", len(got))
	}
	if from.BTH.Opcode != wire.OpUDSendOnly || from.BTH.DestQP != 1 || from.DETH.SrcQP != 1 ||
		from.DETH.QKey != wire.GSIQKey || from.SrcIP != ipA || from.SrcMAC != macA || from.UDPSrc != udpSourcePort(1) {
		t.Errorf("packet %+v", from)
	}
	if es := n.b.Stats(); es.GSIReceived != 1 {
		t.Errorf("endpoint stats %+v", es)
	}
}

func TestUDPSourcePort(t *testing.T) {
	// rxe: 0xC000 | hash_32(qpn, 14), hash_32(v, b) = v*0x61C88647 >> (32-b).
	for _, tc := range []struct {
		qpn  uint32
		port uint16
	}{{0, 0xC000}, {1, 0xD872}, {17, 0xDF94}, {0x123456, 0xC168}} {
		if got := udpSourcePort(tc.qpn); got != tc.port {
			t.Errorf("qpn %d: %#x, want %#x", tc.qpn, got, tc.port)
		}
	}
}
