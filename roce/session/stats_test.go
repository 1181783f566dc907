package session

import (
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// TestRegistry: a session is in its Registry from New to Release, under
// its endpoint and QP number (the two endpoints number their QPs alike),
// with the figures Stats gives; a pool session with its caps.
func TestRegistry(t *testing.T) {
	var reg Registry
	cfg := smallSessionConfig() // 4 send buffers of 16 KiB
	cfg.Registry = &reg
	sp := newSessionPair(t, roctest.Faulty(1, 0), roce.EndpointConfig{}, cfg)
	qa, qb := sp.a.QP(), sp.b.QP()
	if qa.QPN() != qb.QPN() {
		t.Fatalf("QPNs %d and %d: the test needs one number on both endpoints", qa.QPN(), qb.QPN())
	}
	if reg.Len() != 2 {
		t.Fatalf("%d sessions registered, want 2", reg.Len())
	}
	msg := make([]byte, cfg.BufferSize*2)
	if k, err := sp.a.Send(msg); k != len(msg) || err != nil {
		t.Fatal(k, err)
	}
	sp.n.Poll() // sent, not yet acknowledged or reaped
	for _, tc := range []struct {
		name string
		ep   *roce.Endpoint
		qpn  uint32
		s    *Session
		want Stats
	}{
		{"sender", sp.n.a, qa.QPN(), sp.a, Stats{SendBuffers: 4, SendBuffersInUse: 2}},
		{"receiver", sp.n.b, qb.QPN(), sp.b, Stats{SendBuffers: 4}},
	} {
		got, ok := reg.Lookup(tc.ep, tc.qpn)
		if !ok || got != tc.want || got != tc.s.Stats() {
			t.Errorf("%s: Lookup %+v, %v; Stats %+v; want %+v", tc.name, got, ok, tc.s.Stats(), tc.want)
		}
	}
	if _, ok := reg.Lookup(sp.n.a, qa.QPN()+100); ok {
		t.Error("a QP without a session found")
	}
	sp.n.Run(100_000, func() bool {
		n, err := sp.a.Unacknowledged()
		return n == 0 && err == nil
	})
	if got, _ := reg.Lookup(sp.n.a, qa.QPN()); got.SendBuffersInUse != 0 {
		t.Errorf("after the acknowledgements: %+v", got)
	}
	for _, s := range []*Session{sp.a, sp.b} {
		s.QP().Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := reg.Lookup(sp.n.a, qa.QPN()); ok || reg.Len() != 0 {
		t.Errorf("%d sessions registered after release", reg.Len())
	}

	// A pool session publishes its caps on the pool's buffers.
	pc := cfg
	pc.SendBuffers = 3
	pn := newPoolNet(t, PoolConfig{BufferSize: cfg.BufferSize, RecvBuffers: 16, SendBuffers: 8}, pc, 1)
	b := pn.b[0]
	if got, ok := reg.Lookup(pn.n.b, b.QP().QPN()); !ok || got != (Stats{SendBuffers: 3}) {
		t.Errorf("pool session: %+v, %v", got, ok)
	}
	if k, err := b.Send(msg); k != len(msg) || err != nil {
		t.Fatal(k, err)
	}
	if got, _ := reg.Lookup(pn.n.b, b.QP().QPN()); got != (Stats{SendBuffers: 3, SendBuffersInUse: 2}) {
		t.Errorf("pool session after a send: %+v", got)
	}
	b.QP().Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	b.Release()
	if _, ok := reg.Lookup(pn.n.b, b.QP().QPN()); ok || b.Stats() != (Stats{}) {
		t.Errorf("released pool session still published: %+v", b.Stats())
	}
}

// TestRegistryConcurrently reads the registry and the endpoints' QP
// snapshots on another goroutine, as a metrics scrape does, while the
// sessions move data over a lossy link and come and go (run with -race).
func TestRegistryConcurrently(t *testing.T) {
	var reg Registry
	cfg := smallSessionConfig()
	cfg.Registry = &reg
	sp := newSessionPair(t, roctest.Faulty(1, 0.01), roce.EndpointConfig{}, cfg)
	first := sp.a
	eps := []*roce.Endpoint{sp.n.a, sp.n.b} // sp changes below
	// The reader must be running while the sessions work.
	stop := roctest.ReadConcurrently(func() {
		for _, e := range eps {
			e.EachQPStats(func(s roce.QPStats) { reg.Lookup(e, s.QPN) })
		}
		first.Stats()
		reg.Len()
	})
	for i := range 20 {
		res := sp.stream(t, 50_000, uint64(i), 7000, 9000)
		if res.sendHash != res.recvHash {
			t.Fatal("stream differs")
		}
		sp = restartSessions(t, sp, cfg)
	}
	if !stop() {
		t.Error("reader never ran")
	}
	if reg.Len() != 2 {
		t.Errorf("%d sessions registered, want 2", reg.Len())
	}
}

// restartSessions replaces the closed sessions of sp with new ones of
// cfg on the same endpoints.
func restartSessions(t *testing.T, sp *sessionPair, cfg Config) *sessionPair {
	t.Helper()
	for _, s := range []*Session{sp.a, sp.b} {
		s.QP().Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
		s.QP().Destroy()
	}
	next := &sessionPair{n: sp.n, allocA: sp.allocA, allocB: sp.allocB}
	next.open(t, cfg, 9, 7)
	return next
}
