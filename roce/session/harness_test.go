package session

import (
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// The addresses of the network's two sides.
var macA, macB, ipA, ipB = roctest.MACA, roctest.MACB, roctest.IPA, roctest.IPB

// testNet is two endpoints on a roctest network.
type testNet struct {
	*roctest.Net
	a, b   *roce.Endpoint
	pa, pb *roce.PD
}

func newTestNet(tb testing.TB, lc memlink.Config, ec roce.EndpointConfig) *testNet {
	tb.Helper()
	n := &testNet{Net: roctest.New(tb, lc)}
	n.a, n.b = roctest.Pair(n.Net, func(s roctest.Side) (*roce.Endpoint, error) {
		c := ec
		c.MAC, c.IP, c.IO = s.MAC, s.IP, s.Link
		return roce.NewEndpoint(c)
	})
	n.Add(n.a, n.b)
	n.pa, n.pb = n.a.NewPD(), n.b.NewPD()
	return n
}

// newRawQP creates a plain QP in INIT on pd, with CQs of its own and
// room for a few work requests, accepting remote writes and reads.
func (n *testNet) newRawQP(pd *roce.PD) *roce.QP {
	n.TB.Helper()
	e := pd.Endpoint()
	scq, err := e.NewCQ(roce.CQConfig{Depth: 64})
	if err != nil {
		n.TB.Fatal(err)
	}
	rcq, err := e.NewCQ(roce.CQConfig{Depth: 64})
	if err != nil {
		n.TB.Fatal(err)
	}
	qp, err := pd.CreateQP(&roce.QPInitAttr{SendCQ: scq, RecvCQ: rcq, Cap: roce.QPCap{MaxSendWR: 16, MaxRecvWR: 16}})
	if err != nil {
		n.TB.Fatal(err)
	}
	attr := &roce.QPAttr{State: roce.QPStateInit, Access: roce.AccessRemoteWrite | roce.AccessRemoteRead}
	if err := qp.Modify(attr, roce.QPAttrState|roce.QPAttrAccessFlags); err != nil {
		n.TB.Fatal(err)
	}
	return qp
}

// connectPair moves qa, on endpoint a, and qb, on endpoint b, to RTS
// towards each other with cfg's attributes; qa sends from psnA, qb from
// psnB.
func connectPair(cfg Config, qa, qb *roce.QP, psnA, psnB uint32) error {
	for _, m := range []struct {
		qp   *roce.QP
		attr func() (*roce.QPAttr, roce.QPAttrMask)
	}{
		{qa, func() (*roce.QPAttr, roce.QPAttrMask) {
			return cfg.RTRAttr(roce.AddressVector{DstMAC: macB, DstIP: ipB}, qb.QPN(), psnB)
		}},
		{qb, func() (*roce.QPAttr, roce.QPAttrMask) {
			return cfg.RTRAttr(roce.AddressVector{DstMAC: macA, DstIP: ipA}, qa.QPN(), psnA)
		}},
		{qa, func() (*roce.QPAttr, roce.QPAttrMask) { return cfg.RTSAttr(psnA) }},
		{qb, func() (*roce.QPAttr, roce.QPAttrMask) { return cfg.RTSAttr(psnB) }},
	} {
		if err := m.qp.Modify(m.attr()); err != nil {
			return err
		}
	}
	return nil
}
