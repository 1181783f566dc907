package roce

import "testing"

// qpStatsOf returns the snapshots EachQPStats gives for e, by QPN.
func qpStatsOf(e *Endpoint) map[uint32]QPStats {
	m := map[uint32]QPStats{}
	e.EachQPStats(func(s QPStats) { m[s.QPN] = s })
	return m
}

// EachQPStats visits every QP of the endpoint with the counters the QP
// itself reports, and forgets a destroyed QP. (internal/metrics checks
// how these snapshots are exported.)
func TestEachQPStats(t *testing.T) {
	cfg := smallSessionConfig()
	sp := newSessionPair(t, testLink(0), EndpointConfig{}, cfg)
	msg := make([]byte, cfg.BufferSize*2)
	sp.a.Send(msg)
	sp.n.poll() // sent, not yet acknowledged or reaped
	qpa := sp.a.QP().QPN()
	stats := sp.a.QP().Stats()
	got := qpStatsOf(sp.n.a)
	if len(got) != sp.n.a.NumQPs() {
		t.Errorf("visited %d QPs of %d", len(got), sp.n.a.NumQPs())
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
		{"send buffers in use", uint64(s.SendBuffersInUse), 2},
		{"send buffers", uint64(s.SendBuffers), 4},
		{"state", uint64(s.State), uint64(QPStateRTS)},
		{"remote access NAKs sent", s.NaksSent[NakRemoteAccess], 0},
		{"send CQ depth", uint64(s.SendCQDepth), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	if s.TxPackets == 0 || sp.n.a.Stats().TxFrames == 0 {
		t.Error("nothing sent")
	}
	// A destroyed QP is no longer visited.
	sp.a.QP().Destroy()
	if _, ok := qpStatsOf(sp.n.a)[qpa]; ok {
		t.Error("destroyed qp still visited")
	}
}

// TestEachQPStatsConcurrently reads the snapshots on another goroutine,
// as a metrics scrape does, while the endpoints move data and QPs come
// and go (run with -race).
func TestEachQPStatsConcurrently(t *testing.T) {
	sp := newSessionPair(t, testLink(0.01), EndpointConfig{}, smallSessionConfig())
	stop := make(chan struct{})
	done := make(chan int)
	started := make(chan struct{})
	first := sp.a.QP()
	eps := []*Endpoint{sp.n.a, sp.n.b} // sp changes below
	go func() {
		reads := 0
		for {
			if reads == 1 {
				close(started)
			}
			select {
			case <-stop:
				done <- reads
				return
			default:
			}
			for _, e := range eps {
				e.Stats()
				e.EachQPStats(func(QPStats) {})
			}
			first.Stats()
			reads++
		}
	}()
	var ev []Event
	// The reader must be running while the sessions work: on a loaded
	// machine it may not have been scheduled yet.
	<-started
	for i := range 20 {
		qp, _ := sp.n.newQP(sp.n.pa, defaultQPOpts(), &ev)
		res := sp.stream(t, 50_000, uint64(i), 7000, 9000)
		if res.sendHash != res.recvHash {
			t.Fatal("stream differs")
		}
		qp.Destroy()
		sp = restartSessions(t, sp)
	}
	close(stop)
	if r := <-done; r == 0 {
		t.Error("reader never ran")
	}
}

// restartSessions replaces the closed sessions of sp with new ones on the
// same endpoints.
func restartSessions(t *testing.T, sp *sessionPair) *sessionPair {
	t.Helper()
	for _, s := range []*Session{sp.a, sp.b} {
		s.QP().Modify(&QPAttr{State: QPStateError}, QPAttrState)
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
		s.QP().Destroy()
	}
	next := &sessionPair{n: sp.n, allocA: sp.allocA, allocB: sp.allocB}
	cfg := smallSessionConfig()
	cfg.Allocator = sp.allocA
	qa, err := NewSessionQP(sp.n.pa, cfg)
	if err != nil {
		t.Fatal(err)
	}
	next.a, _ = NewSession(qa, cfg)
	cfg.Allocator = sp.allocB
	qb, err := NewSessionQP(sp.n.pb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	next.b, _ = NewSession(qb, cfg)
	for _, m := range []struct {
		qp   *QP
		attr func() (*QPAttr, QPAttrMask)
	}{
		{qa, func() (*QPAttr, QPAttrMask) { return cfg.RTRAttr(AddressVector{DstMAC: macB, DstIP: ipB}, qb.QPN(), 7) }},
		{qb, func() (*QPAttr, QPAttrMask) { return cfg.RTRAttr(AddressVector{DstMAC: macA, DstIP: ipA}, qa.QPN(), 9) }},
		{qa, func() (*QPAttr, QPAttrMask) { return cfg.RTSAttr(9) }},
		{qb, func() (*QPAttr, QPAttrMask) { return cfg.RTSAttr(7) }},
	} {
		if err := m.qp.Modify(m.attr()); err != nil {
			t.Fatal(err)
		}
	}
	return next
}
