package roce

import (
	"fmt"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// dropN returns a drop function that drops the first n frames match
// accepts.
func dropN(n int, match func(c *captured) bool) func(c *captured, i int) bool {
	return func(c *captured, _ int) bool {
		if n > 0 && match(c) {
			n--
			return true
		}
		return false
	}
}

// warmUp sends one single-packet message from a to b, so that a's
// requester has measured the round trip.
func warmUp(t *testing.T, n *testNet, p *qpPair) {
	t.Helper()
	src, dst := sendSetup(t, n, p, 100, true)
	checkDelivered(t, n, p, src, dst)
	if p.a.req.rtt.srtt == 0 {
		t.Fatal("no RTT sample after a message")
	}
}

// TestTailLoss: with the round trip measured, a message whose tail is
// lost recovers in about a probe's silence (2·SRTT, at least minPTO), or
// an adaptive RTO if the probe is lost too, and never waits for the
// transport timeout (67 ms here), which is what each of these cost
// before.
func TestTailLoss(t *testing.T) {
	o := defaultQPOpts()
	first := wire.PSNAdd(o.psnA, 1) // after warmUp's packet
	psn := func(k int) uint32 { return wire.PSNAdd(first, k) }
	transport := 4096 * time.Nanosecond << o.timeout
	for _, tc := range []struct {
		name     string
		fromA    func(c *captured, i int) bool
		fromB    func(c *captured, i int) bool
		min, max time.Duration
		want     QPStats // of a: Retransmits, Timeouts, TailProbes, NakRetransmits
		dups     uint64  // duplicates b saw
	}{
		{
			name:  "last packet",
			fromA: dropOnce(func(c *captured) bool { return c.bth.PSN == psn(2) }),
			min:   minPTO, max: minPTO + time.Millisecond,
			want: QPStats{Retransmits: 1, TailProbes: 1},
		},
		{
			name:  "acknowledgement",
			fromB: dropOnce(func(c *captured) bool { return c.bth.Opcode == wire.OpRCAck && c.bth.PSN == psn(2) }),
			min:   minPTO, max: minPTO + time.Millisecond,
			want: QPStats{Retransmits: 1, TailProbes: 1}, dups: 1,
		},
		{
			// The probe (the last packet) is out of sequence: the
			// responder NAKs the first missing one, and the requester
			// goes back to it.
			name:  "last two packets",
			fromA: dropN(2, func(c *captured) bool { return c.bth.PSN == psn(1) || c.bth.PSN == psn(2) }),
			min:   minPTO, max: minPTO + time.Millisecond,
			want: QPStats{Retransmits: 3, TailProbes: 1, NakRetransmits: 1},
		},
		{
			// The RTO goes back to the oldest unacknowledged packet,
			// the second (the first, sent with nothing in flight, asked
			// for an ACK), which the responder has.
			name:  "last packet and its probe",
			fromA: dropN(2, func(c *captured) bool { return c.bth.PSN == psn(2) }),
			min:   minRTO, max: 2 * minRTO,
			want: QPStats{Retransmits: 3, TailProbes: 1, Timeouts: 1}, dups: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, testLink(0), EndpointConfig{})
			p := n.newPair(o)
			warmUp(t, n, p)
			n.capture(n.la, tc.fromA)
			n.capture(n.lb, tc.fromB)
			start := n.now
			src, dst := sendSetup(t, n, p, 3000, true)
			n.run(1_000_000, func() bool { return p.acqs[0].Len() > 0 && p.bcqs[1].Len() > 0 })
			took := n.now.Sub(start)
			checkDelivered(t, n, p, src, dst)
			if took < tc.min || took > tc.max {
				t.Errorf("recovered after %v, want %v to %v (the transport timeout is %v)", took, tc.min, tc.max, transport)
			}
			sa := p.a.Stats()
			got := QPStats{Retransmits: sa.Retransmits, Timeouts: sa.Timeouts, TailProbes: sa.TailProbes, NakRetransmits: sa.NakRetransmits}
			if got != tc.want || sa.RetryTimeouts != 0 {
				t.Errorf("requester: %d retransmits, %d timeouts (%d transport), %d probes, %d NAK go-back-Ns; want %d, %d (0), %d, %d",
					got.Retransmits, got.Timeouts, sa.RetryTimeouts, got.TailProbes, got.NakRetransmits,
					tc.want.Retransmits, tc.want.Timeouts, tc.want.TailProbes, tc.want.NakRetransmits)
			}
			if d := p.b.Stats().Duplicates; d != tc.dups {
				t.Errorf("responder saw %d duplicates, want %d", d, tc.dups)
			}
		})
	}
}

// TestGapAckThenNak: the first packet after a gap draws exactly one
// sequence NAK for the missing PSN, and just before it an ACK of the PSN
// before that, which resets a Linux requester's retry state so that it
// acts on the NAK (see queueNakSeq); no ACK goes first when the responder
// has accepted nothing yet, or when its last request was a READ.
func TestGapAckThenNak(t *testing.T) {
	o := defaultQPOpts()
	for _, tc := range []struct {
		name    string
		warmUp  bool // a message completes first
		read    bool // a READ goes first
		size    int  // of the SEND that loses a packet
		lost    int  // index of its lost packet
		wantAck bool
	}{
		{name: "mid-message", size: 10 * 1024, lost: 3, wantAck: true},
		{name: "message start", warmUp: true, size: 4000, lost: 0, wantAck: true},
		{name: "first request", size: 3000, lost: 0},
		{name: "after a read", read: true, size: 3000, lost: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, testLink(0), EndpointConfig{})
			p := n.newPair(o)
			first := o.psnA
			if tc.warmUp {
				warmUp(t, n, p)
				first = wire.PSNAdd(first, 1)
			}
			if tc.read {
				readable := region(t, n.pb, 100, AccessRemoteRead)
				into := region(t, n.pa, 100, AccessLocalWrite)
				if err := p.a.PostSend(&SendWR{ID: 9, Opcode: WRRDMARead, SGList: []SGE{into.SGE(0, 100)},
					RemoteAddr: readable.Addr(), RKey: readable.RKey()}); err != nil {
					t.Fatal(err)
				}
				first = wire.PSNAdd(first, 1)
			}
			lost := wire.PSNAdd(first, tc.lost)
			n.capture(n.la, dropOnce(func(c *captured) bool { return c.bth.PSN == lost && c.bth.Opcode.IsRequest() }))
			fromB := n.capture(n.lb, nil)
			src, dst := sendSetup(t, n, p, tc.size, true)
			checkDelivered(t, n, p, src, dst)
			var naks []int
			for i, c := range *fromB {
				if c.aeth.IsNak() {
					naks = append(naks, i)
				}
			}
			if len(naks) != 1 {
				t.Fatalf("%d NAKs, want 1", len(naks))
			}
			nak := (*fromB)[naks[0]]
			if nak.aeth.NakCode() != wire.NakPSNSeq || nak.bth.PSN != lost {
				t.Errorf("NAK %#x for psn %#x, want a sequence NAK for %#x", nak.aeth.NakCode(), nak.bth.PSN, lost)
			}
			var prev *captured
			if naks[0] > 0 {
				prev = &(*fromB)[naks[0]-1]
			}
			gotAck := prev != nil && prev.bth.Opcode == wire.OpRCAck && prev.aeth.IsAck() && prev.bth.PSN == wire.PSNAdd(lost, -1)
			if gotAck != tc.wantAck {
				t.Errorf("ACK of psn %#x right before the NAK: %v, want %v (frames %+v)", wire.PSNAdd(lost, -1), gotAck, tc.wantAck, *fromB)
			}
			if sa := p.a.Stats(); sa.NakRetransmits != 1 || sa.Timeouts != 0 {
				t.Errorf("requester: %d NAK go-back-Ns, %d timeouts; want 1 and 0", sa.NakRetransmits, sa.Timeouts)
			}
		})
	}
}

// TestGiveUpTime: on a link that loses everything, a requester whose
// adaptive timer has a round trip of microseconds to go by resends
// early and often, but fails its QP no sooner than before: after
// (RetryCnt + 1) transport timeouts since the request was first sent,
// each of them counted as one retry. A requester that spent a retry on
// every adaptive expiry would give up after a few tens of milliseconds.
func TestGiveUpTime(t *testing.T) {
	for _, tc := range []struct {
		timeout, retry uint8
	}{
		{14, 0}, {14, 2}, {14, 6}, {18, 2}, {10, 3},
	} {
		transport := 4096 * time.Nanosecond << tc.timeout
		t.Run(fmt.Sprintf("timeout%d/retry%d", tc.timeout, tc.retry), func(t *testing.T) {
			n := newTestNet(t, testLink(0), EndpointConfig{})
			o := defaultQPOpts()
			o.timeout, o.retry = tc.timeout, tc.retry
			p := n.newPair(o)
			warmUp(t, n, p)
			fromA := n.capture(n.la, nil)
			n.la.SetFaults(1, 0, 0, 0)
			sendSetup(t, n, p, 3000, true)
			n.run(10_000_000, func() bool { return p.acqs[0].Len() > 0 })
			if len(*fromA) == 0 {
				t.Fatal("nothing sent")
			}
			took := n.now.Sub((*fromA)[0].at)
			want := time.Duration(tc.retry+1) * transport
			if took < want || took > want+time.Millisecond {
				t.Errorf("gave up after %v, want %v: %d transport timeouts of %v", took, want, tc.retry+1, transport)
			}
			if wc := pollOne(t, p.acqs[0]); wc.Status != WCRetryExcErr {
				t.Errorf("completion %+v, want %v", wc, WCRetryExcErr)
			}
			sa := p.a.Stats()
			if sa.RetryTimeouts != uint64(tc.retry)+1 {
				t.Errorf("%d transport timeouts, want %d", sa.RetryTimeouts, tc.retry+1)
			}
			if transport > 2*minRTO && sa.Timeouts <= sa.RetryTimeouts {
				t.Errorf("%d timeouts, %d of them transport: the adaptive timer never resent early", sa.Timeouts, sa.RetryTimeouts)
			}
			t.Logf("%d timeouts, %d transport, %d packets retransmitted", sa.Timeouts, sa.RetryTimeouts, sa.Retransmits)
		})
	}
}
