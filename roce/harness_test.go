package roce

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// The addresses of the network's two sides.
var macA, macB, ipA, ipB = roctest.MACA, roctest.MACB, roctest.IPA, roctest.IPB

// testNet is two endpoints on a roctest network.
type testNet struct {
	*roctest.Net
	a, b   *Endpoint
	pa, pb *PD
}

func newTestNet(tb testing.TB, lc memlink.Config, ec EndpointConfig) *testNet {
	tb.Helper()
	return newTestNetOn(roctest.New(tb, lc), ec, [2]PacketIO{})
}

// newTestNetOn puts two endpoints configured by ec on rn, each on its
// side's link end unless io names another for it.
func newTestNetOn(rn *roctest.Net, ec EndpointConfig, io [2]PacketIO) *testNet {
	rn.TB.Helper()
	n := &testNet{Net: rn}
	n.a, n.b = roctest.Pair(rn, func(s roctest.Side) (*Endpoint, error) {
		c := ec
		c.MAC, c.IP, c.IO = s.MAC, s.IP, io[s.Index]
		if c.IO == nil {
			c.IO = s.Link
		}
		return NewEndpoint(c)
	})
	rn.Add(n.a, n.b)
	n.pa, n.pb = n.a.NewPD(), n.b.NewPD()
	return n
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
	n.TB.Helper()
	e := pd.Endpoint()
	scq, err := e.NewCQ(CQConfig{Depth: 4 * o.sendDepth})
	if err != nil {
		n.TB.Fatal(err)
	}
	rcq, err := e.NewCQ(CQConfig{Depth: 4 * o.recvDept})
	if err != nil {
		n.TB.Fatal(err)
	}
	qp, err := pd.CreateQP(&QPInitAttr{
		SendCQ: scq, RecvCQ: rcq,
		Cap:     QPCap{MaxSendWR: o.sendDepth, MaxRecvWR: o.recvDept, MaxSendSGE: o.sges, MaxRecvSGE: o.sges},
		OnEvent: func(ev Event) { *events = append(*events, ev) },
		NoRNR:   o.noRNR,
	})
	if err != nil {
		n.TB.Fatal(err)
	}
	if err := qp.Modify(&QPAttr{State: QPStateInit, Access: o.access}, QPAttrState|QPAttrAccessFlags); err != nil {
		n.TB.Fatal(err)
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

// newCleanPair returns a network whose link loses nothing, with a QP
// pair of the default options, and those options.
func newCleanPair(t *testing.T) (*testNet, qpOpts, *qpPair) {
	t.Helper()
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	o := defaultQPOpts()
	return n, o, n.newPair(o)
}

func (n *testNet) newPair(o qpOpts) *qpPair {
	n.TB.Helper()
	p := &qpPair{opts: o}
	p.a, p.acqs = n.newQP(n.pa, o, &p.aEvents)
	p.b, p.bcqs = n.newQP(n.pb, o, &p.bEvents)
	connectQP(n.TB, p.a, o, macB, ipB, p.b.QPN(), o.psnB, o.psnA)
	connectQP(n.TB, p.b, o, macA, ipA, p.a.QPN(), o.psnA, o.psnB)
	return p
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
		c := captured{at: n.Now, bth: p.BTH, aeth: p.AETH, reth: p.RETH, n: len(p.Payload)}
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
