package roce

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/internal/simclock"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

var (
	macA = [6]byte{0x02, 0, 0, 0, 0, 0x0A}
	macB = [6]byte{0x02, 0, 0, 0, 0, 0x0B}
	ipA  = netip.MustParseAddr("10.0.0.1")
	ipB  = netip.MustParseAddr("10.0.0.2")
)

// testNet is two endpoints joined by a memlink and a manual clock.
type testNet struct {
	tb     testing.TB
	la, lb *memlink.End
	a, b   *Endpoint
	pa, pb *PD
	now    time.Time
}

func newTestNet(tb testing.TB, lc memlink.Config, ec EndpointConfig) *testNet {
	tb.Helper()
	la, lb := memlink.New(lc)
	n := &testNet{tb: tb, la: la, lb: lb, now: time.Unix(1_000_000, 0)}
	var err error
	ca, cb := ec, ec
	ca.MAC, ca.IP, ca.IO = macA, ipA, la
	cb.MAC, cb.IP, cb.IO = macB, ipB, lb
	if n.a, err = NewEndpoint(ca); err != nil {
		tb.Fatal(err)
	}
	if n.b, err = NewEndpoint(cb); err != nil {
		tb.Fatal(err)
	}
	n.pa, n.pb = n.a.NewPD(), n.b.NewPD()
	return n
}

// poll runs one round on both endpoints and returns the work done.
func (n *testNet) poll() int {
	return n.a.Poll(n.now) + n.b.Poll(n.now)
}

// advance moves the clock to the next timer deadline, if any.
func (n *testNet) advance() bool {
	return simclock.Advance(&n.now, n.a.NextDeadline, n.b.NextDeadline)
}

// run polls until done reports true (simclock.Run).
func (n *testNet) run(maxRounds int, done func() bool) {
	n.tb.Helper()
	simclock.Run(n.tb, &n.now, maxRounds, n.poll, n.advance, done)
}

// settle polls until both endpoints are idle and no timer runs.
func (n *testNet) settle() {
	n.tb.Helper()
	for i := 0; i < 1_000_000; i++ {
		if n.poll() == 0 && !n.advance() {
			return
		}
		n.now = n.now.Add(time.Microsecond)
	}
	n.tb.Fatal("never settled")
}

type qpOpts struct {
	mtu                 int
	sendDepth, recvDept int
	sges                int
	access              Access
	psnA, psnB          uint32
	timeout             uint8
	retry, rnrRetry     uint8
	minRNR              uint8
	rdAtomic            int
	noRNR               bool
}

func defaultQPOpts() qpOpts {
	return qpOpts{
		mtu: 1024, sendDepth: 64, recvDept: 64, sges: 4,
		access: AccessRemoteWrite | AccessRemoteRead,
		psnA:   0xFFFFF0, psnB: 0x123456, // A's PSNs wrap early
		timeout: 14, retry: 7, rnrRetry: 7, minRNR: 14, rdAtomic: 4,
	}
}

// qpPair is a connected pair of QPs, a on endpoint a and b on b.
type qpPair struct {
	a, b       *QP
	acqs, bcqs [2]*CQ // send, recv
	aEvents    []Event
	bEvents    []Event
	opts       qpOpts
}

func (n *testNet) newQP(pd *PD, o qpOpts, events *[]Event) (*QP, [2]*CQ) {
	n.tb.Helper()
	e := pd.ep
	scq, err := e.NewCQ(CQConfig{Depth: 4 * o.sendDepth})
	if err != nil {
		n.tb.Fatal(err)
	}
	rcq, err := e.NewCQ(CQConfig{Depth: 4 * o.recvDept})
	if err != nil {
		n.tb.Fatal(err)
	}
	qp, err := pd.CreateQP(&QPInitAttr{
		SendCQ: scq, RecvCQ: rcq,
		Cap:     QPCap{MaxSendWR: o.sendDepth, MaxRecvWR: o.recvDept, MaxSendSGE: o.sges, MaxRecvSGE: o.sges},
		OnEvent: func(ev Event) { *events = append(*events, ev) },
		NoRNR:   o.noRNR,
	})
	if err != nil {
		n.tb.Fatal(err)
	}
	if err := qp.Modify(&QPAttr{State: QPStateInit, Access: o.access}, QPAttrState|QPAttrAccessFlags); err != nil {
		n.tb.Fatal(err)
	}
	return qp, [2]*CQ{scq, rcq}
}

func connectQP(tb testing.TB, qp *QP, o qpOpts, dstMAC [6]byte, dstIP netip.Addr, dqpn, rqPSN, sqPSN uint32) {
	tb.Helper()
	err := qp.Modify(&QPAttr{
		State: QPStateRTR, AV: AddressVector{DstMAC: dstMAC, DstIP: dstIP, TOS: 0x60, TTL: 6},
		PathMTU: o.mtu, DestQPN: dqpn, RQPSN: rqPSN, MaxDestRdAtomic: o.rdAtomic, MinRNRTimer: o.minRNR,
	}, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer)
	if err != nil {
		tb.Fatal(err)
	}
	err = qp.Modify(&QPAttr{
		State: QPStateRTS, SQPSN: sqPSN, Timeout: o.timeout, RetryCnt: o.retry, RNRRetry: o.rnrRetry, MaxRdAtomic: o.rdAtomic,
	}, QPAttrState|QPAttrSQPSN|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxRdAtomic)
	if err != nil {
		tb.Fatal(err)
	}
}

func (n *testNet) newPair(o qpOpts) *qpPair {
	n.tb.Helper()
	p := &qpPair{opts: o}
	p.a, p.acqs = n.newQP(n.pa, o, &p.aEvents)
	p.b, p.bcqs = n.newQP(n.pb, o, &p.bEvents)
	connectQP(n.tb, p.a, o, macB, ipB, p.b.QPN(), o.psnB, o.psnA)
	connectQP(n.tb, p.b, o, macA, ipA, p.a.QPN(), o.psnA, o.psnB)
	return p
}

// pollOne polls one completion from cq, failing if there is none.
func pollOne(tb testing.TB, cq *CQ) WorkCompletion {
	tb.Helper()
	var wc [1]WorkCompletion
	if cq.Poll(wc[:]) != 1 {
		tb.Fatal("no completion")
	}
	return wc[0]
}

// region allocates and registers n bytes.
func region(tb testing.TB, pd *PD, n int, access Access) *MR {
	tb.Helper()
	mr, err := pd.RegisterMR(make([]byte, n), access)
	if err != nil {
		tb.Fatal(err)
	}
	return mr
}

// pattern fills b with bytes derived from seed and position.
func pattern(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := 0; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		copy(b[i:], w[:])
	}
}

// frameInfo decodes a captured frame's BTH; ok is false for non-RoCE.
func frameInfo(frame []byte) (wire.Packet, bool) {
	var p wire.Packet
	err := wire.ParsePacket(frame, &p)
	return p, err == nil
}

// captured is what a test saw of one frame on the link.
type captured struct {
	at      time.Time
	bth     wire.BTH
	aeth    wire.AETH
	reth    wire.RETH
	n       int // payload bytes
	dropped bool
}

// capture records every RoCE frame end sends from now on; drop, if not
// nil, chooses frames to drop (i counts captured frames from 0).
func (n *testNet) capture(end *memlink.End, drop func(c *captured, i int) bool) *[]captured {
	log := new([]captured)
	end.SetFilter(func(f []byte) bool {
		p, ok := frameInfo(f)
		if !ok {
			return true
		}
		c := captured{at: n.now, bth: p.BTH, aeth: p.AETH, reth: p.RETH, n: len(p.Payload)}
		if drop != nil && drop(&c, len(*log)) {
			c.dropped = true
		}
		*log = append(*log, c)
		return !c.dropped
	})
	return log
}

// dropOnce returns a drop function that drops the first frame match
// accepts, once.
func dropOnce(match func(c *captured) bool) func(c *captured, i int) bool {
	done := false
	return func(c *captured, _ int) bool {
		if !done && match(c) {
			done = true
			return true
		}
		return false
	}
}
