package roce

import "time"

// Loss recovery constants of the requester (see reqTimers).
const (
	// minRTO floors the adaptive retransmit timeout: a few milliseconds,
	// so that a peer answering from a slow guest is not flooded with
	// go-back-N rounds for what is only scheduling delay.
	minRTO = 5 * time.Millisecond
	// minPTO floors the tail-loss probe's silence.
	minPTO = 2 * time.Millisecond
	// rttGranularity is the G of RFC 6298: RTTVAR's floor in the RTO.
	rttGranularity = 100 * time.Microsecond
	// maxBackoff bounds the doubling of the RTO on consecutive expiries
	// (the RTO is capped at the transport timeout anyway).
	maxBackoff = 16
	// baseRTTEpoch is how long a minimum RTT is remembered: the base RTT
	// is the least sample of this epoch and the one before, so that a
	// path that got slower is learnt within two epochs.
	baseRTTEpoch = 10 * time.Second
	// minWindowPSNs floors the delay-based window; windowHeadroom is the
	// queue, in packets, the window aims to keep at the bottleneck.
	minWindowPSNs  = 16
	windowHeadroom = 8
)

// rttEstimator keeps the smoothed round-trip time and its variation
// (RFC 6298) and the base (least recent) RTT of a requester's path,
// from samples of packets sent once (Karn's rule).
type rttEstimator struct {
	srtt, rttvar time.Duration // srtt 0: no sample yet
	minCur       time.Duration // least sample of the current epoch, 0 if none
	minPrev      time.Duration // of the epoch before, 0 if none
	epoch        time.Time     // start of the current epoch
}

// sample adds a round-trip time measured at now.
func (e *rttEstimator) sample(r time.Duration, now time.Time) {
	r = max(r, time.Nanosecond)
	if e.srtt == 0 {
		e.srtt, e.rttvar = r, r/2
	} else {
		d := e.srtt - r
		if d < 0 {
			d = -d
		}
		e.rttvar = (3*e.rttvar + d) / 4
		e.srtt = (7*e.srtt + r) / 8
	}
	if e.epoch.IsZero() {
		e.epoch = now
	}
	if now.Sub(e.epoch) >= baseRTTEpoch {
		e.minPrev, e.minCur, e.epoch = e.minCur, 0, now
	}
	if e.minCur == 0 || r < e.minCur {
		e.minCur = r
	}
}

// base returns the least RTT seen lately, 0 with no sample.
func (e *rttEstimator) base() time.Duration {
	if e.minPrev != 0 && e.minPrev < e.minCur {
		return e.minPrev
	}
	return e.minCur
}

// rto returns the adaptive retransmit timeout after backoff consecutive
// expiries, never more than limit (the transport timeout), and limit
// itself before the first sample.
func (e *rttEstimator) rto(backoff uint8, limit time.Duration) time.Duration {
	if e.srtt == 0 {
		return limit
	}
	d := max(minRTO, e.srtt+max(rttGranularity, 4*e.rttvar))
	for range backoff {
		if d >= limit {
			break
		}
		d *= 2
	}
	return min(d, limit)
}

// pto returns the silence after which the tail-loss probe goes out, 0
// when there is no RTT sample to base it on.
func (e *rttEstimator) pto() time.Duration {
	if e.srtt == 0 {
		return 0
	}
	return max(minPTO, 2*e.srtt)
}

// nextWindow returns the delay-based window after an RTT sample r, from
// the current window w, within [minWindowPSNs, limit]. It is the FAST
// TCP update with γ = 1/2: w ← (w + w·base/r + headroom) / 2, whose
// fixed point is the path's bandwidth-delay product plus the headroom.
// Go-back-N resends everything sent past a loss, so a window that keeps
// only a short queue at the bottleneck is what bounds the packets each
// loss costs; on an idle or fast path the samples stay at the base RTT
// and the window grows back to limit by headroom/2 per sample.
func (e *rttEstimator) nextWindow(w int, r time.Duration, limit int) int {
	b := e.base()
	if b <= 0 || r <= 0 {
		return w
	}
	target := float64(w)*float64(b)/float64(r) + windowHeadroom
	nw := int((float64(w) + target) / 2)
	return max(min(nw, limit), min(minWindowPSNs, limit))
}
