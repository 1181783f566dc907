package roce

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// sendSetup posts a receive of size bytes on b and a signaled SEND of
// size patterned bytes on a.
func sendSetup(t *testing.T, n *testNet, p *qpPair, size int, postRecv bool) (src, dst *MR) {
	t.Helper()
	src = roctest.Region(t, n.pa, size, 0)
	dst = roctest.Region(t, n.pb, size, AccessLocalWrite)
	roctest.Pattern(src.Bytes(), uint64(size))
	if postRecv {
		if err := p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{dst.SGE(0, size)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.a.PostSend(&SendWR{ID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{src.SGE(0, size)}}); err != nil {
		t.Fatal(err)
	}
	return src, dst
}

// naksIn returns the NAKs among frames, dropped ones included.
func naksIn(frames []captured) []captured {
	var naks []captured
	for _, c := range frames {
		if c.aeth.IsNak() {
			naks = append(naks, c)
		}
	}
	return naks
}

// checkDelivered waits for both completions and checks them and the data.
func checkDelivered(t *testing.T, n *testNet, p *qpPair, src, dst *MR) {
	t.Helper()
	n.Run(1_000_000, func() bool { return p.acqs[0].Len() > 0 && p.bcqs[1].Len() > 0 })
	n.Settle()
	if swc := roctest.PollOne(t, p.acqs[0]); swc.Status != WCSuccess {
		t.Errorf("send completion %+v", swc)
	}
	if rwc := roctest.PollOne(t, p.bcqs[1]); rwc.Status != WCSuccess || int(rwc.ByteLen) != src.Len() {
		t.Errorf("recv completion %+v", rwc)
	}
	if k := p.bcqs[1].Len(); k != 0 {
		t.Errorf("%d extra receive completions: a message was delivered twice", k)
	}
	if !bytes.Equal(src.Bytes(), dst.Bytes()) {
		t.Error("data differs")
	}
}

// TestGoBackNMidMessage drops the fourth packet of a 10-packet SEND: the
// responder sends one sequence NAK and drops what follows silently, and
// the requester resends from the lost packet, as a MIDDLE.
func TestGoBackNMidMessage(t *testing.T) {
	n, o, p := newCleanPair(t)
	lost := wire.PSNAdd(o.psnA, 3)
	fromA := n.capture(n.A.Link, dropOnce(func(c *captured) bool { return c.bth.PSN == lost }))
	fromB := n.capture(n.B.Link, nil)
	src, dst := sendSetup(t, n, p, 10*1024, true)
	checkDelivered(t, n, p, src, dst)

	naks := naksIn(*fromB)
	if len(naks) != 1 || naks[0].aeth.NakCode() != wire.NakPSNSeq || naks[0].bth.PSN != lost {
		t.Errorf("responder NAKs %+v, want one sequence NAK for psn %#x", naks, lost)
	}
	sb := p.b.Stats()
	if sb.OutOfSequence != 6 || sb.NaksSent[NakSequence] != 1 {
		t.Errorf("responder: %d out of sequence, %d sequence NAKs; want 6 and 1", sb.OutOfSequence, sb.NaksSent[NakSequence])
	}
	// The first packet after the first transmission is the retransmission.
	re := (*fromA)[10]
	if re.bth.PSN != lost || re.bth.Opcode != wire.OpRCSendMiddle {
		t.Errorf("retransmission starts with %v psn %#x, want SEND_MIDDLE psn %#x", re.bth.Opcode, re.bth.PSN, lost)
	}
	if sa := p.a.Stats(); sa.Retransmits != 7 || sa.NaksReceived[NakSequence] != 1 || sa.Timeouts != 0 {
		t.Errorf("requester: %d retransmits, %d NAKs, %d timeouts; want 7, 1, 0", sa.Retransmits, sa.NaksReceived[NakSequence], sa.Timeouts)
	}
}

// TestLostNakResent drops the fourth packet of a 10-packet SEND and the
// sequence NAK that asks for it, and then every packet the requester
// sends again on its own (its tail-loss probe and adaptive timer, which
// an rxe requester does not have: it waits for its transport timeout,
// 1 s here): the responder, dropping everything past the gap, sends the
// NAK again once shortWaitNoRTT has passed without the packet (no RTT
// measured yet), and the requester goes back N from the lost packet on
// that NAK.
func TestLostNakResent(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	o := defaultQPOpts()
	o.timeout = 18
	p := n.newPair(o)
	lost := wire.PSNAdd(o.psnA, 3)
	var fromB *[]captured
	nakDelivered := func() bool {
		return slices.ContainsFunc(naksIn(*fromB), func(c captured) bool { return !c.dropped })
	}
	dropLost := dropOnce(func(c *captured) bool { return c.bth.PSN == lost })
	fromA := n.capture(n.A.Link, func(c *captured, i int) bool {
		return dropLost(c, i) || i >= 10 && !nakDelivered()
	})
	fromB = n.capture(n.B.Link, dropOnce(func(c *captured) bool { return c.aeth.IsNak() }))
	src, dst := sendSetup(t, n, p, 10*1024, true)
	checkDelivered(t, n, p, src, dst)

	naks := naksIn(*fromB)
	if len(naks) != 2 || !naks[0].dropped || naks[1].bth.PSN != lost || naks[1].aeth.NakCode() != wire.NakPSNSeq {
		t.Fatalf("responder NAKs %+v, want two sequence NAKs for psn %#x, the first lost", naks, lost)
	}
	if wait := naks[1].at.Sub(naks[0].at); wait < shortWaitNoRTT || wait > shortWaitNoRTT+5*time.Millisecond {
		t.Errorf("NAK sent again after %v, want %v", wait, shortWaitNoRTT)
	}
	sb := p.b.Stats()
	if sb.NakResends != 1 || sb.NaksSent[NakSequence] != 2 {
		t.Errorf("responder: %d NAK resends, %d sequence NAKs; want 1, 2", sb.NakResends, sb.NaksSent[NakSequence])
	}
	if es := n.b.Stats(); es.SequenceNakResends != 1 {
		t.Errorf("endpoint: %d sequence NAK resends, want 1", es.SequenceNakResends)
	}
	if sa := p.a.Stats(); sa.NaksReceived[NakSequence] != 1 || sa.RetryTimeouts != 0 {
		t.Errorf("requester: %d sequence NAKs, %d transport timeouts; want 1, 0", sa.NaksReceived[NakSequence], sa.RetryTimeouts)
	}
	// Its frames past the first ten were dropped until a NAK reached it:
	// the first that went through answers the resent NAK.
	for i, c := range (*fromA)[10:] {
		if !c.dropped {
			if c.bth.PSN != lost || c.at.Before(naks[1].at) {
				t.Errorf("frame %d, the first resent that went through, is psn %#x at %v; want %#x after the NAK at %v", 10+i, c.bth.PSN, c.at, lost, naks[1].at)
			}
			break
		}
	}
}

// TestAnsweredNakNotResent drops the fourth packet of a 10-packet SEND
// and every resend of it for twice shortWaitNoRTT: the requester went
// back N on the NAK (the responder sees the packets past the gap again),
// so the NAK reached it and goes no more. rxe would ignore it until its
// timer fired, and take it as a reason to start that timer over.
func TestAnsweredNakNotResent(t *testing.T) {
	n, o, p := newCleanPair(t)
	lost := wire.PSNAdd(o.psnA, 3)
	start := n.Now
	drops := 0
	n.capture(n.A.Link, func(c *captured, _ int) bool {
		if c.bth.PSN == lost && c.at.Sub(start) < 2*shortWaitNoRTT {
			drops++
			return true
		}
		return false
	})
	src, dst := sendSetup(t, n, p, 10*1024, true)
	checkDelivered(t, n, p, src, dst)
	if drops < 2 {
		t.Fatalf("psn %#x dropped %d times, want the first transmission and its resends", lost, drops)
	}
	if sb := p.b.Stats(); sb.NakResends != 0 || sb.NaksSent[NakSequence] != 1 {
		t.Errorf("responder: %d NAK resends, %d sequence NAKs; want 0, 1", sb.NakResends, sb.NaksSent[NakSequence])
	}
}

// TestTimeoutRetransmit drops the whole of a message's first
// transmission: with no RTT measured there is no tail-loss probe, the
// adaptive timer is the transport timeout, and the responder saw nothing
// to NAK, so only the timer can recover it, and the whole message goes
// again.
func TestTimeoutRetransmit(t *testing.T) {
	n, o, p := newCleanPair(t)
	lost := map[uint32]bool{o.psnA: true, wire.PSNAdd(o.psnA, 1): true, wire.PSNAdd(o.psnA, 2): true}
	fromA := n.capture(n.A.Link, func(c *captured, i int) bool { return i < 3 && lost[c.bth.PSN] })
	start := n.Now
	src, dst := sendSetup(t, n, p, 3000, true)
	checkDelivered(t, n, p, src, dst)
	if sa := p.a.Stats(); sa.Timeouts != 1 || sa.Retransmits != 3 {
		t.Errorf("%d timeouts, %d retransmits; want 1 and 3", sa.Timeouts, sa.Retransmits)
	}
	if sb := p.b.Stats(); sb.Duplicates != 0 || sb.NaksSent[NakSequence] != 0 {
		t.Errorf("%d duplicates, %d sequence NAKs; want none", sb.Duplicates, sb.NaksSent[NakSequence])
	}
	re := (*fromA)[3]
	timeout := 4096 * time.Nanosecond << o.timeout
	if re.bth.PSN != o.psnA || re.bth.Opcode != wire.OpRCSendFirst || re.at.Sub(start) < timeout {
		t.Errorf("resent %v psn %#x after %v, want SEND_FIRST psn %#x after at least %v",
			re.bth.Opcode, re.bth.PSN, re.at.Sub(start), o.psnA, timeout)
	}
}

// TestShortMessageNak drops a message's last packet, which nothing
// follows, and the ACK of its first: the responder, holding the start
// of a message whose rest stopped coming, sends an ACK of what it has
// and a sequence NAK for the rest once shortWaitNoRTT has passed (no RTT
// measured yet), and the requester resends the last packet alone, well
// before its transport timeout would have resent the whole message.
func TestShortMessageNak(t *testing.T) {
	n, o, p := newCleanPair(t)
	last := wire.PSNAdd(o.psnA, 2)
	fromA := n.capture(n.A.Link, dropOnce(func(c *captured) bool { return c.bth.PSN == last }))
	fromB := n.capture(n.B.Link, dropOnce(func(c *captured) bool { return c.bth.Opcode == wire.OpRCAck }))
	start := n.Now
	src, dst := sendSetup(t, n, p, 3000, true)
	checkDelivered(t, n, p, src, dst)
	if sa := p.a.Stats(); sa.Timeouts != 0 || sa.Retransmits != 1 || sa.NaksReceived[NakSequence] != 1 {
		t.Errorf("requester: %d timeouts, %d retransmits, %d sequence NAKs; want 0, 1, 1", sa.Timeouts, sa.Retransmits, sa.NaksReceived[NakSequence])
	}
	if sb := p.b.Stats(); sb.ShortNaks != 1 || sb.NaksSent[NakSequence] != 1 || sb.Duplicates != 0 {
		t.Errorf("responder: %d short NAKs, %d sequence NAKs, %d duplicates; want 1, 1, 0", sb.ShortNaks, sb.NaksSent[NakSequence], sb.Duplicates)
	}
	var ack, nak *captured
	for i := range *fromB {
		c := &(*fromB)[i]
		switch {
		case c.dropped:
		case c.aeth.IsNak():
			nak = c
		case nak == nil && c.bth.PSN == wire.PSNAdd(last, -1):
			ack = c
		}
	}
	if nak == nil || nak.bth.PSN != last || ack == nil || ack.at.After(nak.at) {
		t.Fatalf("responder sent ACK %+v and NAK %+v; want an ACK of psn %#x, then a NAK for %#x", ack, nak, wire.PSNAdd(last, -1), last)
	}
	if d := nak.at.Sub(start); d < shortWaitNoRTT || d >= 4096*time.Nanosecond<<o.timeout {
		t.Errorf("NAK after %v, want between %v and the transport timeout", d, shortWaitNoRTT)
	}
	re := (*fromA)[3]
	if re.bth.PSN != last || re.bth.Opcode != wire.OpRCSendLast {
		t.Errorf("resent %v psn %#x, want SEND_LAST psn %#x", re.bth.Opcode, re.bth.PSN, last)
	}
}

// TestLostAck drops the responder's ACK: the requester times out and
// resends, the responder sees a duplicate, acknowledges it again and
// does not deliver the message twice.
func TestLostAck(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	p := n.newPair(defaultQPOpts())
	n.capture(n.B.Link, dropOnce(func(c *captured) bool { return c.bth.Opcode == wire.OpRCAck }))
	src, dst := sendSetup(t, n, p, 5000, true)
	checkDelivered(t, n, p, src, dst)
	if sb := p.b.Stats(); sb.Duplicates == 0 {
		t.Error("responder saw no duplicate")
	}
	if sa := p.a.Stats(); sa.Timeouts != 1 {
		t.Errorf("%d timeouts, want 1", sa.Timeouts)
	}
}

// TestRNRBackoff: with no receive buffer posted the responder NAKs with
// its RNR timer; the requester waits that long before each retry and
// completes once a buffer appears.
func TestRNRBackoff(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	o := defaultQPOpts()
	o.minRNR = 14 // 1.28 ms
	p := n.newPair(o)
	fromA := n.capture(n.A.Link, nil)
	fromB := n.capture(n.B.Link, nil)
	src, dst := sendSetup(t, n, p, 10001, false)
	n.Run(100000, func() bool { return p.a.Stats().RNRNaksReceived >= 3 })
	if p.acqs[0].Len() != 0 || p.bcqs[1].Len() != 0 {
		t.Fatal("completed without a receive buffer")
	}
	for _, c := range *fromB {
		if c.aeth.IsRNRNak() && (c.bth.PSN != o.psnA || c.aeth.RNRTimer() != 14) {
			t.Errorf("RNR NAK psn %#x timer %d, want psn %#x timer 14", c.bth.PSN, c.aeth.RNRTimer(), o.psnA)
		}
	}
	// Every SEND_FIRST after an RNR NAK waits at least the RNR delay.
	for i, gap := range retryGaps(t, *fromA) {
		if gap < wire.RNRDelay(14) {
			t.Errorf("retry %d after %v, want at least %v", i+1, gap, wire.RNRDelay(14))
		}
	}
	if err := p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{dst.SGE(0, dst.Len())}}); err != nil {
		t.Fatal(err)
	}
	checkDelivered(t, n, p, src, dst)
	if sb := p.b.Stats(); sb.RNRNaksSent < 3 {
		t.Errorf("responder sent %d RNR NAKs", sb.RNRNaksSent)
	}
}

// TestNoRNRSilentDrop: a NoRNR responder without a receive posted drops
// the SEND unanswered instead of sending an RNR NAK (which kills a Ceph
// client's QP); the requester's retransmit timer resends it, and it is
// delivered once a buffer is posted.
func TestNoRNRSilentDrop(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	o := defaultQPOpts()
	o.noRNR = true
	o.timeout = 8 // about 1 ms
	p := n.newPair(o)
	src, dst := sendSetup(t, n, p, 3000, false)
	n.Run(100000, func() bool { return p.a.Stats().Timeouts >= 2 })
	if p.bcqs[1].Len() != 0 {
		t.Fatal("completed without a receive buffer")
	}
	sa, sb := p.a.Stats(), p.b.Stats()
	if sa.RNRNaksReceived != 0 || sb.RNRNaksSent != 0 {
		t.Errorf("RNR NAKs: %d sent, %d received; want none", sb.RNRNaksSent, sa.RNRNaksReceived)
	}
	if sb.RNRSilentDrops < 2 {
		t.Errorf("%d silent drops; want one per attempt", sb.RNRSilentDrops)
	}
	if err := p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{dst.SGE(0, dst.Len())}}); err != nil {
		t.Fatal(err)
	}
	checkDelivered(t, n, p, src, dst)
}

// TestNoRNRSequenceNAK: once a NoRNR responder that dropped a SEND for
// want of a receive has one again, a single sequence NAK has the
// requester resend at once instead of on its transport timer (about a
// second for Ceph's clients), and none goes out while it still has none.
func TestNoRNRSequenceNAK(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	o := defaultQPOpts()
	o.noRNR = true
	o.timeout = 8 // about 1 ms
	timer := 4096 * time.Nanosecond << o.timeout
	p := n.newPair(o)
	fromA := n.capture(n.A.Link, nil)
	src, dst := sendSetup(t, n, p, 3000, false)
	n.Run(100000, func() bool { return p.b.Stats().RNRSilentDrops > 0 })
	for range 100 {
		n.Poll()
	}
	if sb := p.b.Stats(); sb.NaksSent[NakSequence] != 0 || p.a.Stats().Timeouts != 0 {
		t.Fatalf("before a receive is posted: %d sequence NAKs sent, %d timeouts", sb.NaksSent[NakSequence], p.a.Stats().Timeouts)
	}
	posted := n.Now
	if err := p.b.PostRecv(&RecvWR{ID: 1, SGList: []SGE{dst.SGE(0, dst.Len())}}); err != nil {
		t.Fatal(err)
	}
	checkDelivered(t, n, p, src, dst)
	if k := p.b.Stats().NaksSent[NakSequence]; k != 1 {
		t.Errorf("%d sequence NAKs sent, want 1", k)
	}
	if k := p.a.Stats().Timeouts; k != 0 {
		t.Errorf("%d timeouts: the requester waited for its timer", k)
	}
	var resent time.Time
	for _, c := range *fromA {
		if c.bth.Opcode == wire.OpRCSendFirst && c.at.After(posted) {
			resent = c.at
			break
		}
	}
	if resent.IsZero() || resent.Sub(posted) >= timer/2 {
		t.Errorf("resent %v after the receive was posted; want well within the %v timer", resent.Sub(posted), timer)
	}
}

// TestMaxRNRWait: a responder advertising RNR timer 0 (655 ms, what
// rdma_cm leaves Linux peers with) is retried after MaxRNRWait instead.
func TestMaxRNRWait(t *testing.T) {
	const limit = 2 * time.Millisecond
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{MaxRNRWait: limit})
	o := defaultQPOpts()
	o.minRNR = 0
	p := n.newPair(o)
	fromA := n.capture(n.A.Link, nil)
	sendSetup(t, n, p, 3000, false)
	n.Run(100000, func() bool { return p.a.Stats().RNRNaksReceived >= 3 })
	for i, gap := range retryGaps(t, *fromA) {
		if gap < limit || gap > 100*time.Millisecond {
			t.Errorf("retry %d after %v, want %v (not 655 ms)", i+1, gap, limit)
		}
	}
}

// retryGaps returns the time between each SEND FIRST in frames and the
// one before; it fails the test unless there were at least three.
func retryGaps(t *testing.T, frames []captured) []time.Duration {
	t.Helper()
	var firsts []time.Time
	for _, c := range frames {
		if c.bth.Opcode == wire.OpRCSendFirst {
			firsts = append(firsts, c.at)
		}
	}
	if len(firsts) < 3 {
		t.Fatalf("%d attempts", len(firsts))
	}
	gaps := make([]time.Duration, len(firsts)-1)
	for i := range gaps {
		gaps[i] = firsts[i+1].Sub(firsts[i])
	}
	return gaps
}

func TestRetryExhaustion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rnr    bool
		status WCStatus
		err    error
	}{
		{"rnr", true, WCRNRRetryExcErr, ErrRNRRetryExceeded},
		{"timeout", false, WCRetryExcErr, ErrRetryExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
			o := defaultQPOpts()
			o.retry, o.rnrRetry = 2, 2
			p := n.newPair(o)
			if !tc.rnr {
				n.A.Link.SetFaults(1, 0, 0, 0) // the link loses everything
			}
			sendSetup(t, n, p, 2000, false)
			// A second request gets flushed when the first fails.
			p.a.PostSend(&SendWR{ID: 3, Opcode: WRSend, Flags: SendSignaled})
			n.Run(1_000_000, func() bool { return p.acqs[0].Len() == 2 })
			wc := roctest.PollOne(t, p.acqs[0])
			if wc.WRID != 2 || wc.Status != tc.status || !errors.Is(wc.Status.Err(), tc.err) {
				t.Errorf("completion %+v, want status %v", wc, tc.status)
			}
			if wc := roctest.PollOne(t, p.acqs[0]); wc.WRID != 3 || wc.Status != WCWRFlushErr {
				t.Errorf("second completion %+v, want flushed", wc)
			}
			if p.a.State() != QPStateError || !errors.Is(p.a.Err(), tc.err) {
				t.Errorf("qp %v, err %v", p.a.State(), p.a.Err())
			}
			if len(p.aEvents) != 1 || p.aEvents[0].Type != EventQPFatal || !errors.Is(p.aEvents[0].Err, tc.err) {
				t.Errorf("events %+v", p.aEvents)
			}
			sa, sb := p.a.Stats(), p.b.Stats()
			if tc.rnr && (sb.RNRNaksSent != 3 || sa.RNRNaksReceived != 3) {
				t.Errorf("%d RNR NAKs sent, %d received; want 3 (first try and 2 retries)", sb.RNRNaksSent, sa.RNRNaksReceived)
			}
			if !tc.rnr && sa.Timeouts != 3 {
				t.Errorf("%d timeouts, want 3", sa.Timeouts)
			}
		})
	}
}

// TestICRCDrop corrupts every frame for a while: the responder drops them
// silently (no NAK), counts them, and the requester recovers by timeout.
func TestICRCDrop(t *testing.T) {
	n := newTestNet(t, roctest.Faulty(1, 0), EndpointConfig{})
	p := n.newPair(defaultQPOpts())
	fromB := n.capture(n.B.Link, nil)
	n.A.Link.SetFaults(0, 0, 0, 1)
	src, dst := sendSetup(t, n, p, 4000, true)
	for range 50 {
		n.Poll()
	}
	if len(*fromB) != 0 {
		t.Errorf("responder answered %d corrupted frames", len(*fromB))
	}
	es := n.b.Stats()
	if es.ICRCErrors+es.Malformed+es.NotLocal != 4 || es.ICRCErrors == 0 {
		t.Errorf("endpoint stats %+v, want the 4 frames dropped, mostly for their ICRC", es)
	}
	n.A.Link.SetFaults(0, 0, 0, 0)
	checkDelivered(t, n, p, src, dst)
	if p.a.Stats().Timeouts == 0 {
		t.Error("recovered without a timeout")
	}
}

// TestSpuriousTimeoutResendsOne loses every answer to a 20-packet SEND
// until the requester's adaptive timer fires, as a slow peer's late
// acknowledgements would: the requester resends only the oldest
// unacknowledged packet, and the acknowledgement of the whole message
// that answers it shows the timeout was spurious, so the other 19 do not
// go again.
func TestSpuriousTimeoutResendsOne(t *testing.T) {
	n, _, p := newCleanPair(t)
	src, dst := sendSetup(t, n, p, 1024, true) // an RTT sample first
	checkDelivered(t, n, p, src, dst)
	before := p.a.Stats()
	n.capture(n.B.Link, func(*captured, int) bool { return p.a.Stats().Timeouts == before.Timeouts })
	fromA := n.capture(n.A.Link, nil)
	src, dst = sendSetup(t, n, p, 20*1024, true)
	checkDelivered(t, n, p, src, dst)

	sa, sb := p.a.Stats(), p.b.Stats()
	if d := sa.Timeouts - before.Timeouts; d != 1 {
		t.Errorf("requester: %d timeouts, want 1", d)
	}
	if sa.SpuriousTimeouts != 1 || n.a.Stats().SpuriousTimeouts != 1 {
		t.Errorf("spurious timeouts: %d on the QP, %d on the endpoint; want 1", sa.SpuriousTimeouts, n.a.Stats().SpuriousTimeouts)
	}
	// The tail-loss probe (the last packet, its answer lost too) and the
	// one packet the timeout resent.
	if d := sa.Retransmits - before.Retransmits; d != 2 || sb.Duplicates != 2 {
		t.Errorf("%d retransmits, %d duplicates at the responder; want 2, 2 (the probe and the timed-out packet)", d, sb.Duplicates)
	}
	var resent []uint32
	seen := map[uint32]bool{}
	for _, c := range *fromA {
		if seen[c.bth.PSN] {
			resent = append(resent, c.bth.PSN)
		}
		seen[c.bth.PSN] = true
	}
	first := wire.PSNAdd(p.opts.psnA, 1)
	if len(resent) != 2 || resent[1] != first || !(*fromA)[len(*fromA)-1].bth.AckReq {
		t.Errorf("resent PSNs %#x, want the last one (the probe), then %#x with AckReq", resent, first)
	}
}

// TestTimeoutAfterWholeLoss loses the whole first transmission of a
// 20-packet SEND, after an RTT sample, and the tail-loss probe: the
// packet the adaptive timeout resends is the first, its acknowledgement
// goes no further, so the timeout was real and the rest goes again at
// once, without waiting for another timer.
func TestTimeoutAfterWholeLoss(t *testing.T) {
	n, _, p := newCleanPair(t)
	src, dst := sendSetup(t, n, p, 1024, true)
	checkDelivered(t, n, p, src, dst)
	before := p.a.Stats()
	var lost int
	n.capture(n.A.Link, func(c *captured, _ int) bool {
		lost++
		return lost <= 21 // 20 packets and the probe
	})
	src, dst = sendSetup(t, n, p, 20*1024, true)
	checkDelivered(t, n, p, src, dst)
	sa := p.a.Stats()
	if d := sa.Timeouts - before.Timeouts; sa.SpuriousTimeouts != 0 || d != 1 || sa.RetryTimeouts != 0 {
		t.Errorf("requester: %d timeouts (%d transport), %d spurious; want 1, 0, 0", d, sa.RetryTimeouts, sa.SpuriousTimeouts)
	}
	if d := sa.Retransmits - before.Retransmits; d != 21 {
		t.Errorf("%d retransmits, want 21 (the probe, then all 20)", d)
	}
}
