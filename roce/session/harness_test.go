package session

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/internal/simclock"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
)

var (
	macA = [6]byte{0x02, 0, 0, 0, 0, 0x0A}
	macB = [6]byte{0x02, 0, 0, 0, 0, 0x0B}
	ipA  = netip.MustParseAddr("10.0.0.1")
	ipB  = netip.MustParseAddr("10.0.0.2")
)

// testLink returns a link config with all four fault probabilities p.
func testLink(p float64) memlink.Config {
	return memlink.Config{Seed: 1, Loss: p, Reorder: p, Duplicate: p, Corrupt: p}
}

// testNet is two endpoints joined by a memlink and a manual clock.
type testNet struct {
	tb     testing.TB
	la, lb *memlink.End
	a, b   *roce.Endpoint
	pa, pb *roce.PD
	now    time.Time
}

func newTestNet(tb testing.TB, lc memlink.Config, ec roce.EndpointConfig) *testNet {
	tb.Helper()
	la, lb := memlink.New(lc)
	n := &testNet{tb: tb, la: la, lb: lb, now: time.Unix(1_000_000, 0)}
	var err error
	ca, cb := ec, ec
	ca.MAC, ca.IP, ca.IO = macA, ipA, la
	cb.MAC, cb.IP, cb.IO = macB, ipB, lb
	if n.a, err = roce.NewEndpoint(ca); err != nil {
		tb.Fatal(err)
	}
	if n.b, err = roce.NewEndpoint(cb); err != nil {
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

// newRawQP creates a plain QP in INIT on pd, with CQs of its own and
// room for a few work requests, accepting remote writes and reads.
func (n *testNet) newRawQP(pd *roce.PD) *roce.QP {
	n.tb.Helper()
	e := pd.Endpoint()
	scq, err := e.NewCQ(roce.CQConfig{Depth: 64})
	if err != nil {
		n.tb.Fatal(err)
	}
	rcq, err := e.NewCQ(roce.CQConfig{Depth: 64})
	if err != nil {
		n.tb.Fatal(err)
	}
	qp, err := pd.CreateQP(&roce.QPInitAttr{SendCQ: scq, RecvCQ: rcq, Cap: roce.QPCap{MaxSendWR: 16, MaxRecvWR: 16}})
	if err != nil {
		n.tb.Fatal(err)
	}
	attr := &roce.QPAttr{State: roce.QPStateInit, Access: roce.AccessRemoteWrite | roce.AccessRemoteRead}
	if err := qp.Modify(attr, roce.QPAttrState|roce.QPAttrAccessFlags); err != nil {
		n.tb.Fatal(err)
	}
	return qp
}

// region allocates and registers n bytes.
func region(tb testing.TB, pd *roce.PD, n int, access roce.Access) *roce.MR {
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
