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
)

// rttEstimator keeps the smoothed round-trip time and its variation
// (RFC 6298) of a requester's path, from samples of packets sent once
// (Karn's rule).
type rttEstimator struct {
	srtt, rttvar time.Duration // srtt 0: no sample yet
}

// sample adds a round-trip time.
func (e *rttEstimator) sample(r time.Duration) {
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
