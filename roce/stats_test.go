package roce

import (
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"testing"
)

// qpStatsOf returns the snapshots EachQPStats gives for e, by QPN.
func qpStatsOf(e *Endpoint) map[uint32]QPStats {
	m := map[uint32]QPStats{}
	e.EachQPStats(func(s QPStats) { m[s.QPN] = s })
	return m
}

// sendSome posts k receives of size bytes on p.b and k signaled SENDs
// of size bytes on p.a, and runs until all have completed both sides.
func (n *testNet) sendSome(p *qpPair, k, size int) {
	n.TB.Helper()
	src := roctest.Region(n.TB, n.pa, size, 0)
	dst := roctest.Region(n.TB, n.pb, k*size, AccessLocalWrite)
	for i := range k {
		if err := p.b.PostRecv(&RecvWR{ID: uint64(i), SGList: []SGE{dst.SGE(i*size, size)}}); err != nil {
			n.TB.Fatal(err)
		}
		if err := p.a.PostSend(&SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{src.SGE(0, size)}}); err != nil {
			n.TB.Fatal(err)
		}
	}
	var wc [16]WorkCompletion
	sent, got := 0, 0
	n.Run(1_000_000, func() bool {
		sent += p.acqs[0].Poll(wc[:])
		got += p.bcqs[1].Poll(wc[:])
		return sent == k && got == k
	})
	src.Deregister()
	dst.Deregister()
}

// EachQPStats visits every QP of the endpoint with the counters the QP
// itself reports, and forgets a destroyed QP. (internal/metrics checks
// how these snapshots are exported.)
func TestEachQPStats(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	p := n.newPair(defaultQPOpts())
	src := roctest.Region(t, n.pa, 4096, 0)
	for i := range 2 {
		if err := p.a.PostSend(&SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{src.SGE(0, 4096)}}); err != nil {
			t.Fatal(err)
		}
	}
	n.Poll() // sent, not yet acknowledged
	qpa := p.a.QPN()
	stats := p.a.Stats()
	got := qpStatsOf(n.a)
	if len(got) != n.a.NumQPs() {
		t.Errorf("visited %d QPs of %d", len(got), n.a.NumQPs())
	}
	s, ok := got[qpa]
	if !ok {
		t.Fatalf("QP %d not visited: %v", qpa, got)
	}
	if s != stats {
		t.Errorf("EachQPStats gave\n%+v\nQP.Stats\n%+v", s, stats)
	}
	for _, tc := range []struct {
		name      string
		got, want uint64
	}{
		{"tx packets", s.TxPackets, stats.TxPackets},
		{"state", uint64(s.State), uint64(QPStateRTS)},
		{"remote access NAKs sent", s.NaksSent[NakRemoteAccess], 0},
		{"send CQ depth", uint64(s.SendCQDepth), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	if s.TxPackets == 0 || n.a.Stats().TxFrames == 0 {
		t.Error("nothing sent")
	}
	// A destroyed QP is no longer visited.
	p.a.Destroy()
	if _, ok := qpStatsOf(n.a)[qpa]; ok {
		t.Error("destroyed qp still visited")
	}
}

// TestEachQPStatsConcurrently reads the snapshots on another goroutine,
// as a metrics scrape does, while the endpoints move data over a lossy
// link and QPs come and go (run with -race).
func TestEachQPStatsConcurrently(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0.01), EndpointConfig{})
	p := n.newPair(defaultQPOpts())
	first := p.a
	// The reader must be running while the QPs work.
	stop := roctest.ReadConcurrently(func() {
		for _, e := range []*Endpoint{n.a, n.b} {
			e.Stats()
			e.EachQPStats(func(QPStats) {})
		}
		first.Stats()
	})
	for range 20 {
		n.sendSome(p, 8, 7000)
		for _, qp := range []*QP{p.a, p.b} {
			if err := qp.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
		p = n.newPair(defaultQPOpts())
	}
	if !stop() {
		t.Error("reader never ran")
	}
}

// starve sends a SEND on p with no receive posted, runs until starved
// reports that the responder has turned it away, then posts a receive
// and waits for the delivery.
func starve(t *testing.T, n *testNet, p *qpPair, starved func() bool) {
	t.Helper()
	src, dst := sendSetup(t, n, p, 3000, false)
	n.Run(100_000, starved)
	if err := p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{dst.SGE(0, dst.Len())}}); err != nil {
		t.Fatal(err)
	}
	checkDelivered(t, n, p, src, dst)
}

// The endpoint's RNR NAK, silent drop and sequence NAK counters are the
// sums of its QPs' and outlive them: a metric of backpressure sampled
// after the connection is gone still shows it.
func TestEndpointResponderCounters(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	type counts struct{ rnrNaks, silent, seqNaks uint64 }
	ofEndpoint := func(e *Endpoint) counts {
		s := e.Stats()
		return counts{s.RNRNaksSent, s.RNRSilentDrops, s.SequenceNaksSent}
	}
	ofQP := func(qp *QP) counts {
		s := qp.Stats()
		return counts{s.RNRNaksSent, s.RNRSilentDrops, s.NaksSent[NakSequence]}
	}
	// A NoRNR responder without a receive drops the SEND unanswered, and
	// sends a sequence NAK once one is posted.
	o := defaultQPOpts()
	o.noRNR = true
	o.timeout = 8 // about 1 ms
	silent := n.newPair(o)
	starve(t, n, silent, func() bool { return silent.b.Stats().RNRSilentDrops > 0 })
	// Another responder NAKs the same want with its RNR timer.
	rnr := n.newPair(defaultQPOpts())
	starve(t, n, rnr, func() bool { return rnr.a.Stats().RNRNaksReceived >= 2 })

	qs, qr := ofQP(silent.b), ofQP(rnr.b)
	if qs.silent == 0 || qs.seqNaks != 1 || qs.rnrNaks != 0 {
		t.Errorf("NoRNR responder counted %+v; want silent drops, 1 sequence NAK, no RNR NAK", qs)
	}
	if qr.rnrNaks < 2 || qr.silent != 0 || qr.seqNaks != 0 {
		t.Errorf("RNR responder counted %+v; want 2 RNR NAKs or more, nothing else", qr)
	}
	want := counts{qs.rnrNaks + qr.rnrNaks, qs.silent + qr.silent, qs.seqNaks + qr.seqNaks}
	if got := ofEndpoint(n.b); got != want {
		t.Errorf("endpoint counted %+v; its QPs %+v", got, want)
	}
	if got := ofEndpoint(n.a); got != (counts{}) {
		t.Errorf("the requesters' endpoint counted %+v; want none", got)
	}

	for _, qp := range []*QP{silent.a, silent.b, rnr.a, rnr.b} {
		if err := qp.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if k := len(qpStatsOf(n.b)); k != 0 {
		t.Fatalf("%d QPs left", k)
	}
	if got := ofEndpoint(n.b); got != want {
		t.Errorf("after the QPs' destruction the endpoint counts %+v; want %+v", got, want)
	}

	// A later QP adds to the figures.
	again := n.newPair(o)
	starve(t, n, again, func() bool { return again.b.Stats().RNRSilentDrops > 0 })
	qa := ofQP(again.b)
	want = counts{want.rnrNaks, want.silent + qa.silent, want.seqNaks + qa.seqNaks}
	if got := ofEndpoint(n.b); got != want {
		t.Errorf("with a later QP the endpoint counts %+v; want %+v", got, want)
	}
}
