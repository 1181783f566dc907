package roce

import (
	"sync/atomic"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// NakClass indexes the per-code NAK counters.
type NakClass int

// NAK classes, by AETH syndrome.
const (
	NakSequence          NakClass = iota // 0x60 PSN sequence error
	NakInvalidRequest                    // 0x61
	NakRemoteAccess                      // 0x62
	NakRemoteOperational                 // 0x63 and reserved codes
	numNakClasses
)

var nakClassNames = [numNakClasses]string{"psn_sequence", "invalid_request", "remote_access", "remote_operational"}

func (c NakClass) String() string { return enumName(nakClassNames[:], c, "nak") }

// nakIndex returns the class of a NAK code. The IBA numbers the
// sequence, invalid request and remote access NAKs 0x60 to 0x62, in the
// order of the classes; any other code counts as remote operational.
func nakIndex(code uint8) NakClass {
	if c := NakClass(code) - NakClass(wire.NakPSNSeq); c >= NakSequence && c < NakRemoteOperational {
		return c
	}
	return NakRemoteOperational
}

// qpCounters are written by the polling goroutine and read by metrics
// collectors on others, hence atomics.
type qpCounters struct {
	txPackets, txBytes, rxPackets, rxBytes atomic.Uint64
	retransmits, timeouts                  atomic.Uint64
	rnrNakSent, rnrNakRecv                 atomic.Uint64
	rnrSilent                              atomic.Uint64
	nakSent, nakRecv                       [numNakClasses]atomic.Uint64
	icrcErrors, dropped                    atomic.Uint64
	duplicates, outOfSequence              atomic.Uint64
	staleResponses                         atomic.Uint64
	state                                  atomic.Int32
	nakRetransmits, tailProbes             atomic.Uint64
	retryTimeouts, spuriousTimeouts        atomic.Uint64
	shortNaks, nakResends                  atomic.Uint64
	idleProbes, deadPeers                  atomic.Uint64
}

// QPStats is a snapshot of a QP's counters.
type QPStats struct {
	QPN   uint32
	State QPState

	TxPackets, TxBytes uint64 // frames built, Ethernet bytes
	RxPackets, RxBytes uint64 // frames accepted for the QP
	Retransmits        uint64 // request packets sent again
	Timeouts           uint64 // retransmit timer expiries (adaptive or transport timeout)
	RNRNaksSent        uint64
	RNRNaksReceived    uint64
	RNRSilentDrops     uint64                // requests dropped unanswered with no receive posted (NoRNR)
	NaksSent           [numNakClasses]uint64 // indexed by NakClass
	NaksReceived       [numNakClasses]uint64
	ICRCErrors         uint64 // frames for this QP dropped for a bad ICRC
	Dropped            uint64 // frames for this QP dropped (state, address, P_Key)
	Duplicates         uint64 // duplicate requests (re-acknowledged)
	OutOfSequence      uint64 // requests ahead of the expected PSN
	StaleResponses     uint64 // responses for PSNs already acknowledged
	// Fast retransmissions, besides Timeouts: go-back-N rounds a
	// sequence NAK (or a gap in READ responses) started, and tail-loss
	// probes (the last packet sent again after a short silence).
	NakRetransmits uint64
	TailProbes     uint64
	// RetryTimeouts are the Timeouts that were whole transport timeouts
	// (QPAttr.Timeout) without progress, each spending one of RetryCnt;
	// the others came from the adaptive timer, which spends none.
	RetryTimeouts uint64
	// SpuriousTimeouts are the adaptive Timeouts found spurious: the
	// one packet resent was answered by an acknowledgement of packets
	// after it, which the peer had had all along.
	SpuriousTimeouts uint64
	// ShortNaks are the NaksSent[NakSequence] that asked for the rest of
	// a message that stopped coming, with no later packet to show a gap.
	ShortNaks uint64
	// NakResends are the NaksSent[NakSequence] that went again because
	// what the first asked for did not come (a lost NAK).
	NakResends uint64
	// IdleProbes are the idle probes sent, first transmissions and
	// resends (see EndpointConfig.IdleProbe); DeadPeers is 1 once the QP
	// gave up on a peer that answered nothing for its whole retry budget
	// (an error wrapping ErrPeerDead), whether for requests or probes.
	IdleProbes, DeadPeers uint64

	SendCQDepth, RecvCQDepth int // completions waiting
}

func (c *qpCounters) snapshot(qpn uint32, sendCQ, recvCQ *CQ) QPStats {
	s := QPStats{
		QPN:              qpn,
		State:            QPState(c.state.Load()),
		TxPackets:        c.txPackets.Load(),
		TxBytes:          c.txBytes.Load(),
		RxPackets:        c.rxPackets.Load(),
		RxBytes:          c.rxBytes.Load(),
		Retransmits:      c.retransmits.Load(),
		Timeouts:         c.timeouts.Load(),
		RNRNaksSent:      c.rnrNakSent.Load(),
		RNRSilentDrops:   c.rnrSilent.Load(),
		RNRNaksReceived:  c.rnrNakRecv.Load(),
		ICRCErrors:       c.icrcErrors.Load(),
		Dropped:          c.dropped.Load(),
		Duplicates:       c.duplicates.Load(),
		OutOfSequence:    c.outOfSequence.Load(),
		StaleResponses:   c.staleResponses.Load(),
		NakRetransmits:   c.nakRetransmits.Load(),
		TailProbes:       c.tailProbes.Load(),
		RetryTimeouts:    c.retryTimeouts.Load(),
		SpuriousTimeouts: c.spuriousTimeouts.Load(),
		ShortNaks:        c.shortNaks.Load(),
		NakResends:       c.nakResends.Load(),
		IdleProbes:       c.idleProbes.Load(),
		DeadPeers:        c.deadPeers.Load(),
		SendCQDepth:      int(sendCQ.depth.Load()),
		RecvCQDepth:      int(recvCQ.depth.Load()),
	}
	for i := range c.nakSent {
		s.NaksSent[i] = c.nakSent[i].Load()
		s.NaksReceived[i] = c.nakRecv[i].Load()
	}
	return s
}

// Stats returns a snapshot of the QP's counters. Unlike the rest of the
// QP's methods it may be called from any goroutine.
func (qp *QP) Stats() QPStats { return qp.cnt.snapshot(qp.qpn, qp.sendCQ, qp.recvCQ) }

// statsEntry is what EachQPStats needs of a QP; its fields never change,
// so it can be read without touching the QP.
type statsEntry struct {
	qpn            uint32
	cnt            *qpCounters
	sendCQ, recvCQ *CQ
}

type endpointCounters struct {
	rxFrames, txFrames     atomic.Uint64
	icrcErrors, malformed  atomic.Uint64
	notLocal, noQP, unsupp atomic.Uint64
	tooManyVLANs, notRoCE  atomic.Uint64
	gsiReceived, gsiSent   atomic.Uint64
	txBusy                 atomic.Uint64
	// The endpoint's share of its QPs' responder counters, kept here
	// too so that they outlive the QPs (see QP.countRNRNakSent and the
	// like).
	rnrNaksSent, rnrSilent, seqNaksSent atomic.Uint64
	seqNakResends, spuriousTimeouts     atomic.Uint64
	idleProbes, deadPeers               atomic.Uint64
}

// EndpointStats is a snapshot of an endpoint's frame counters, and of
// the responder counters of all the QPs it has had: unlike QPStats these
// are not lost with a destroyed QP.
type EndpointStats struct {
	RxFrames, TxFrames uint64
	ICRCErrors         uint64 // dropped: bad ICRC
	Malformed          uint64 // dropped: not a valid RoCEv2 frame
	NotLocal           uint64 // dropped: another MAC or IP address
	NoQP               uint64 // dropped: no such QP
	Unsupported        uint64 // dropped: UC, CNP and other transports
	TooManyVLANs       uint64 // dropped: more VLAN tags than header.MaxVLANs
	NotRoCE            uint64 // dropped: well formed, not RoCEv2, not taken by the network dispatcher (ARP)
	GSIReceived        uint64 // handed to the transport dispatcher
	GSISent            uint64
	TxBusy             uint64 // polls that left frames unsent because the link was full

	// RNRNaksSent counts the RNR NAKs the endpoint's QPs have sent, over
	// the endpoint's life: the sum of QPStats.RNRNaksSent, destroyed
	// QPs included. A NoRNR QP (QPInitAttr.NoRNR) never sends one.
	RNRNaksSent uint64
	// RNRSilentDrops counts the requests that consume a receive (SENDs,
	// WRITEs with immediate) that NoRNR QPs dropped unanswered because
	// no receive was posted, over the endpoint's life: the sum of
	// QPStats.RNRSilentDrops, destroyed QPs included. It is how a
	// receiver that holds back its receive buffers (backpressure) shows.
	RNRSilentDrops uint64
	// SequenceNaksSent counts the PSN sequence error NAKs the endpoint's
	// QPs have sent, over the endpoint's life: the sum of
	// QPStats.NaksSent[NakSequence], destroyed QPs included. A NoRNR QP
	// sends one after silent drops once a receive is posted again, and
	// any QP on a request ahead of the expected PSN (a lost packet).
	SequenceNaksSent uint64
	// SequenceNakResends counts the SequenceNaksSent that went again
	// because what the first asked for did not come within a few round
	// trips (a lost NAK): the sum of QPStats.NakResends, destroyed QPs
	// included.
	SequenceNakResends uint64
	// SpuriousTimeouts counts the requesters' adaptive timeouts that
	// proved spurious (see QPStats.SpuriousTimeouts): a slow peer's
	// late acknowledgement, not a loss, for which only one packet went
	// again instead of the whole window. It is the sum of
	// QPStats.SpuriousTimeouts, destroyed QPs included.
	SpuriousTimeouts uint64
	// IdleProbes counts the idle probes the endpoint's QPs have sent,
	// and DeadPeers the QPs that gave up on a silent peer (ErrPeerDead),
	// over the endpoint's life: the sums of QPStats.IdleProbes and
	// DeadPeers, destroyed QPs included.
	IdleProbes, DeadPeers uint64
}

// Stats returns a snapshot of the endpoint's counters; it may be called
// from any goroutine.
func (e *Endpoint) Stats() EndpointStats {
	c := &e.cnt
	return EndpointStats{
		RxFrames: c.rxFrames.Load(), TxFrames: c.txFrames.Load(),
		ICRCErrors: c.icrcErrors.Load(), Malformed: c.malformed.Load(),
		NotLocal: c.notLocal.Load(), NoQP: c.noQP.Load(), Unsupported: c.unsupp.Load(),
		TooManyVLANs: c.tooManyVLANs.Load(), NotRoCE: c.notRoCE.Load(),
		GSIReceived: c.gsiReceived.Load(), GSISent: c.gsiSent.Load(), TxBusy: c.txBusy.Load(),
		RNRNaksSent: c.rnrNaksSent.Load(), RNRSilentDrops: c.rnrSilent.Load(), SequenceNaksSent: c.seqNaksSent.Load(),
		SequenceNakResends: c.seqNakResends.Load(),
		SpuriousTimeouts:   c.spuriousTimeouts.Load(),
		IdleProbes:         c.idleProbes.Load(), DeadPeers: c.deadPeers.Load(),
	}
}

// The responder counters that are kept per QP and per endpoint are
// counted only through these, so that the endpoint's figure is the sum
// of its QPs', destroyed ones included.

// countRNRNakSent counts an RNR NAK sent.
func (qp *QP) countRNRNakSent() { countBoth(&qp.cnt.rnrNakSent, &qp.ep.cnt.rnrNaksSent) }

// countRNRSilent counts a request dropped unanswered for want of a
// receive (NoRNR).
func (qp *QP) countRNRSilent() { countBoth(&qp.cnt.rnrSilent, &qp.ep.cnt.rnrSilent) }

// countNakSent counts a NAK of class c sent.
func (qp *QP) countNakSent(c NakClass) {
	qp.cnt.nakSent[c].Add(1)
	if c == NakSequence {
		qp.ep.cnt.seqNaksSent.Add(1)
	}
}

// countIdleProbe counts an idle probe sent.
func (qp *QP) countIdleProbe() { countBoth(&qp.cnt.idleProbes, &qp.ep.cnt.idleProbes) }

// countSpuriousTimeout counts an adaptive timeout found spurious.
func (qp *QP) countSpuriousTimeout() {
	countBoth(&qp.cnt.spuriousTimeouts, &qp.ep.cnt.spuriousTimeouts)
}

// countDeadPeer counts the QP's giving up on a silent peer.
func (qp *QP) countDeadPeer() { countBoth(&qp.cnt.deadPeers, &qp.ep.cnt.deadPeers) }

// countBoth counts one in a QP's counter and in its endpoint's.
func countBoth(qpCounter, epCounter *atomic.Uint64) {
	qpCounter.Add(1)
	epCounter.Add(1)
}

// EachQPStats calls f with a snapshot of the counters of every QP of the
// endpoint. Unlike the endpoint's other methods it may be called from any
// goroutine while the endpoint is polled: it reads only the endpoint's
// registry of QPs, under its mutex, and atomics. f runs outside that
// mutex; a QP created or destroyed meanwhile may or may not be visited.
func (e *Endpoint) EachQPStats(f func(QPStats)) {
	for _, se := range e.statsEntries() {
		f(se.cnt.snapshot(se.qpn, se.sendCQ, se.recvCQ))
	}
}
