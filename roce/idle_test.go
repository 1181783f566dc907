package roce

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

const testIdle = 15 * time.Second

// idleSend moves k single-packet SENDs from one QP of p to the other
// (fromA: a to b) and checks their completions.
func idleSend(t *testing.T, n *testNet, p *qpPair, fromA bool, k int) {
	t.Helper()
	if k == 0 {
		return
	}
	s, r, spd, rpd, scq, rcq := p.a, p.b, n.pa, n.pb, p.acqs[0], p.bcqs[1]
	if !fromA {
		s, r, spd, rpd, scq, rcq = p.b, p.a, n.pb, n.pa, p.bcqs[0], p.acqs[1]
	}
	src, dst := roctest.Region(t, spd, 64*k, 0), roctest.Region(t, rpd, 64*k, AccessLocalWrite)
	for i := range k {
		if err := r.PostRecv(&RecvWR{ID: uint64(i), SGList: []SGE{dst.SGE(i*64, 64)}}); err != nil {
			t.Fatal(err)
		}
		if err := s.PostSend(&SendWR{ID: uint64(i), Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{src.SGE(i*64, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	n.Run(1_000_000, func() bool { return scq.Len() == k && rcq.Len() == k })
	var wc [1]WorkCompletion
	for _, cq := range []*CQ{scq, rcq} {
		for cq.Poll(wc[:]) == 1 {
			if wc[0].Status != WCSuccess {
				t.Fatalf("completion %+v", wc[0])
			}
		}
	}
}

// spareRecv posts a 64-byte receive on qp, which an idle probe must
// leave alone.
func spareRecv(t *testing.T, qp *QP) {
	t.Helper()
	mr := roctest.Region(t, qp.PD(), 64, AccessLocalWrite)
	if err := qp.PostRecv(&RecvWR{ID: 99, SGList: []SGE{mr.SGE(0, 64)}}); err != nil {
		t.Fatal(err)
	}
}

// isIdleProbe reports whether c is an idle probe: a SEND ONLY without
// payload, asking for an ACK.
func isIdleProbe(c *captured) bool {
	return c.bth.Opcode == wire.OpRCSendOnly && c.n == 0 && c.bth.AckReq
}

func idleProbes(log []captured) []captured {
	var out []captured
	for _, c := range log {
		if isIdleProbe(&c) {
			out = append(out, c)
		}
	}
	return out
}

func newIdleNet(t *testing.T) *testNet {
	return newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{IdleProbe: testIdle})
}

// TestIdleProbeHealthy leaves a healthy connection idle for a minute:
// one probe goes out per idle interval (the side that probes restarts
// the other's clock too), at the prober's last acknowledged PSN, each
// is acknowledged as a duplicate, and nothing is delivered, consumed or
// completed; the connection then carries data as before.
func TestIdleProbeHealthy(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs int // SENDs a→b before the idle minute (a's PSNs wrap)
	}{{"nothing sent", 0}, {"after traffic", 20}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newIdleNet(t)
			o := defaultQPOpts()
			o.retry = 3
			p := n.newPair(o)
			idleSend(t, n, p, true, tc.msgs)
			spareRecv(t, p.a)
			spareRecv(t, p.b)
			fromA, fromB := n.capture(n.A.Link, nil), n.capture(n.B.Link, nil)
			before := [2]QPStats{p.a.Stats(), p.b.Stats()}
			n.RunUntil(n.Now.Add(61 * time.Second))

			wantPSN := [2]uint32{wire.PSNAdd(o.psnA, tc.msgs-1), wire.PSNAdd(o.psnB, -1)}
			probes := [2][]captured{idleProbes(*fromA), idleProbes(*fromB)}
			logs := [2][]captured{*fromA, *fromB}
			qps := [2]*QP{p.a, p.b}
			if k := len(probes[0]) + len(probes[1]); k != 4 {
				t.Fatalf("%d+%d probes in 61 s idle, want 4 in all", len(probes[0]), len(probes[1]))
			}
			for side := range 2 {
				other := 1 - side
				acks := 0
				for _, c := range logs[other] {
					if c.bth.Opcode == wire.OpRCAck && c.aeth.IsAck() && c.bth.PSN == wantPSN[side] {
						acks++
					}
				}
				for _, c := range probes[side] {
					if c.bth.PSN != wantPSN[side] {
						t.Errorf("side %d probe psn %#x, want %#x", side, c.bth.PSN, wantPSN[side])
					}
				}
				if acks != len(probes[side]) {
					t.Errorf("side %d: %d probes, %d ACKs for them", side, len(probes[side]), acks)
				}
				s, o := qps[side].Stats(), qps[other].Stats()
				if s.State != QPStateRTS || s.IdleProbes != uint64(len(probes[side])) || s.DeadPeers != 0 ||
					s.StaleResponses-before[side].StaleResponses != s.IdleProbes || s.Timeouts != 0 {
					t.Errorf("side %d: %+v", side, s)
				}
				if d := o.Duplicates - before[other].Duplicates; d != s.IdleProbes {
					t.Errorf("side %d's peer counted %d duplicates for %d probes", side, d, s.IdleProbes)
				}
				if qps[side].RecvQueueLen() != 1 || qps[side].RecvCQ().Len() != 0 {
					t.Errorf("side %d: %d receives posted, %d completions: a probe was delivered",
						side, qps[side].RecvQueueLen(), qps[side].RecvCQ().Len())
				}
			}
			ea, eb := n.a.Stats(), n.b.Stats()
			if ea.IdleProbes+eb.IdleProbes != 4 || ea.DeadPeers+eb.DeadPeers != 0 {
				t.Errorf("endpoint stats %+v %+v", ea, eb)
			}
			// The spare receive takes the next message: data flows on.
			idleSend(t, n, p, true, 1)
		})
	}
}

// TestIdleProbeDeadPeer makes b vanish (everything it sends is lost):
// a probes once idle, resends on its retransmit schedule and fails the
// QP exactly idle + timeout × (retry+1) after it last heard from b,
// with a retry-exceeded error that says the peer is dead.
func TestIdleProbeDeadPeer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		msgs  int // SENDs a→b first: with an RTT sample, probes also go again at the adaptive timeout
		retry uint8
	}{{"fresh, no retry", 0, 0}, {"fresh, three retries", 0, 3}, {"after traffic", 20, 3}, {"six retries", 5, 6}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newIdleNet(t)
			o := defaultQPOpts()
			o.retry = tc.retry
			p := n.newPair(o)
			idleSend(t, n, p, true, tc.msgs)
			spareRecv(t, p.a)
			fromA := n.capture(n.A.Link, nil)
			n.capture(n.B.Link, func(*captured, int) bool { return true }) // b vanishes
			n.Poll()
			heard := p.a.req.heardAt
			n.Run(100_000_000, func() bool { return p.a.State() == QPStateError })

			timeout := 4096 * time.Nanosecond << o.timeout
			want := heard.Add(testIdle + time.Duration(tc.retry+1)*timeout)
			if d := n.Now.Sub(want); d < 0 || d > time.Millisecond {
				t.Errorf("declared dead %v after it last heard, want %v", n.Now.Sub(heard), want.Sub(heard))
			}
			probes := idleProbes(*fromA)
			if len(probes) == 0 || probes[0].at.Sub(heard) != testIdle {
				t.Fatalf("first probe %v after a last heard, want %v (%d probes)", probes[0].at.Sub(heard), testIdle, len(probes))
			}
			if tc.msgs == 0 && len(probes) != int(tc.retry)+1 {
				t.Errorf("%d probes without an RTT sample, want one per transport timeout: %d", len(probes), tc.retry+1)
			}
			for _, c := range probes {
				if c.bth.PSN != wire.PSNAdd(o.psnA, tc.msgs-1) {
					t.Errorf("probe psn %#x, want %#x", c.bth.PSN, wire.PSNAdd(o.psnA, tc.msgs-1))
				}
			}
			if len(probes) != len(*fromA) {
				t.Errorf("a sent %d frames, %d of them probes", len(*fromA), len(probes))
			}
			s := p.a.Stats()
			if s.DeadPeers != 1 || s.IdleProbes != uint64(len(probes)) || s.RetryTimeouts != uint64(tc.retry)+1 {
				t.Errorf("a's stats %+v", s)
			}
			if err := p.a.Err(); !errors.Is(err, ErrRetryExceeded) || !errors.Is(err, ErrPeerDead) {
				t.Errorf("qp error %v, want retry exceeded and peer dead", err)
			}
			fatal := 0
			for _, ev := range p.aEvents {
				if ev.Type == EventQPFatal && errors.Is(ev.Err, ErrPeerDead) {
					fatal++
				}
			}
			if fatal != 1 {
				t.Errorf("events %+v, want one QP fatal for a dead peer", p.aEvents)
			}
			if wc := roctest.PollOne(t, p.acqs[1]); wc.WRID != 99 || wc.Status != WCWRFlushErr {
				t.Errorf("spare receive completed %+v, want flushed", wc)
			}
			if p.bcqs[1].Len() != 0 {
				t.Errorf("b got %d receive completions from probes", p.bcqs[1].Len())
			}
			if err := p.a.Destroy(); err != nil {
				t.Fatal(err)
			}
			if es := n.a.Stats(); es.DeadPeers != 1 || es.IdleProbes != s.IdleProbes {
				t.Errorf("endpoint stats after the QP's destruction: %d dead, %d probes; want 1, %d", es.DeadPeers, es.IdleProbes, s.IdleProbes)
			}
		})
	}
}

// TestIdleProbeNotWhileBusy: traffic either way restarts the idle clock,
// so a connection that carries a message every 5 s sends no probe; the
// first one goes out an idle interval after the last traffic.
func TestIdleProbeNotWhileBusy(t *testing.T) {
	for _, tc := range []struct {
		name         string
		fromA, fromB bool
	}{{"a sends", true, false}, {"b sends", false, true}, {"both send", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newIdleNet(t)
			o := defaultQPOpts()
			o.retry = 3
			p := n.newPair(o)
			end := n.Now.Add(time.Minute)
			for n.Now.Before(end) {
				if tc.fromA {
					idleSend(t, n, p, true, 1)
				}
				if tc.fromB {
					idleSend(t, n, p, false, 1)
				}
				n.RunUntil(n.Now.Add(5 * time.Second))
			}
			for _, qp := range []*QP{p.a, p.b} {
				if s := qp.Stats(); s.IdleProbes != 0 || s.Timeouts != 0 {
					t.Errorf("qp %d probed while busy: %+v", qp.QPN(), s)
				}
			}
			last := n.Now.Add(-5 * time.Second) // the last message's round trip ended by then
			fromA, fromB := n.capture(n.A.Link, nil), n.capture(n.B.Link, nil)
			n.Run(10_000_000, func() bool { return len(idleProbes(*fromA))+len(idleProbes(*fromB)) > 0 })
			if d := n.Now.Sub(last); d < testIdle-time.Millisecond || d > testIdle {
				t.Errorf("first probe %v after the last message, want %v", d, testIdle)
			}
		})
	}
}

// TestIdleProbeLost: a probe that is lost goes again at the transport
// timeout, and its answer gives the retry back; a SEND posted while a
// probe is outstanding replaces it.
func TestIdleProbeLost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		postData bool
	}{{"probe resent", false}, {"data replaces the probe", true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newIdleNet(t)
			o := defaultQPOpts()
			o.retry = 3
			p := n.newPair(o)
			// b does not probe: its probe would answer for b as well.
			n.b.cfg.IdleProbe = 0
			fromA := n.capture(n.A.Link, dropOnce(isIdleProbe))
			n.Run(10_000_000, func() bool { return len(idleProbes(*fromA)) == 1 })
			if !p.a.req.idleOn {
				t.Fatal("probe sent and not outstanding")
			}
			if tc.postData {
				idleSend(t, n, p, true, 1)
			}
			n.RunUntil(n.Now.Add(time.Second))
			s := p.a.Stats()
			want := uint64(2)
			if tc.postData {
				want = 1
			}
			if s.State != QPStateRTS || s.IdleProbes != want || s.RetryTimeouts != want-1 ||
				p.a.req.idleOn || p.a.req.retryLeft != o.retry {
				t.Errorf("after a lost probe: %+v, outstanding %v, %d retries left", s, p.a.req.idleOn, p.a.req.retryLeft)
			}
		})
	}
}

func TestIdleProbeConfig(t *testing.T) {
	for _, tc := range []struct {
		idle time.Duration
		ok   bool
	}{{0, true}, {MinIdleProbe, true}, {DefaultIdleProbe, true}, {MaxIdleProbe, true},
		{-time.Second, false}, {MinIdleProbe - 1, false}, {MaxIdleProbe + 1, false}} {
		la, _ := memlink.New(roctest.Faulty(1, 0))
		_, err := NewEndpoint(EndpointConfig{MAC: macA, IP: netip.MustParseAddr("10.0.0.1"), IO: la, IdleProbe: tc.idle})
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("idle probe %v: %v", tc.idle, err)
		}
	}
}
