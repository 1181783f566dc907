package cm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/cephdpdkd/cephdpdkd/header"
	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// ConnState is the state of a connection.
type ConnState uint8

// Connection states.
const (
	StateResolving     ConnState = iota + 1 // active: waiting for ARP
	StateReqSent                            // active: REQ sent, waiting for the REP
	StateReqRcvd                            // passive: the AcceptFunc is deciding
	StateRepSent                            // passive: REP sent, waiting for the RTU
	StateEstablished                        // both: connected
	StateDisconnecting                      // DREQ sent, waiting for the DREP
	StateTimeWait                           // closed; kept to answer late duplicates
	StateClosed                             // forgotten by the Manager
)

// connStateNames is indexed by ConnState, which starts at 1.
var connStateNames = [...]string{"", "resolving", "req-sent", "req-rcvd", "rep-sent", "established", "disconnecting", "time-wait", "closed"}

func (s ConnState) String() string { return enumName(connStateNames[:], s, "state") }

// Events are a connection's callbacks. They run from Manager.Poll, on the
// polling goroutine, and may call the Manager (Disconnect, Dial, ...).
type Events struct {
	// Connected runs once when the connection attempt ends: err is nil
	// when the connection is established (passive: RTU or first packet
	// received; active: REP received and RTU sent), otherwise it says why
	// the attempt failed, and the QP has been moved to ERROR.
	Connected func(c *Conn, err error)
	// Disconnected runs once when an established connection ends, after
	// its QP was moved to ERROR: err is nil when either side disconnected
	// in order (DREQ answered, or the peer's DREQ), otherwise why (QP
	// failure, REJ, DREQ unanswered).
	Disconnected func(c *Conn, err error)
}

// AcceptFunc decides on a connection request for a listened port; it
// runs from Poll. To accept, it returns a QP in INIT created on a PD of
// the Manager's endpoint; to reject, an error (see Reject).
type AcceptFunc func(req *ConnRequest) (Accept, error)

// deferredReq is what answering a deferred REQ needs of it.
type deferredReq struct {
	req wire.CMReq
	mtu int
}

// Accept is an AcceptFunc's answer.
type Accept struct {
	QP *roce.QP
	// PrivateData goes into the REP (up to MaxRepPrivateData bytes); the
	// active side's application receives it unchanged.
	PrivateData []byte
	Events      Events
}

// Private data limits.
const (
	MaxReqPrivateData  = wire.CMAMaxUserPrivateData // after the rdma_cm header: 56
	MaxRepPrivateData  = len(wire.CMRep{}.PrivateData)
	MaxRejPrivateData  = len(wire.CMRej{}.PrivateData)
	maxPeerPrivateData = MaxRepPrivateData
)

// ConnRequest describes a received REQ. It is valid only during the
// AcceptFunc call, except PrivateData and Conn, which live as long as the
// connection.
type ConnRequest struct {
	Conn *Conn
	// Port is the listened port, from the service ID.
	Port uint16
	// RemoteAddr is the peer's address (the REQ's source IP) and the
	// source port its rdma_cm bound.
	RemoteAddr netip.AddrPort
	LocalAddr  netip.Addr
	RemoteMAC  [6]byte

	RemoteQPN    uint32
	RemoteCommID uint32
	RemoteCAGUID uint64
	// StartingPSN is the first PSN the peer sends: the QP's send PSN.
	StartingPSN uint32
	PathMTU     int // bytes
	// ResponderResources are the READs the peer serves at once (bounding
	// ours); InitiatorDepth those it issues (bounding what we serve).
	ResponderResources, InitiatorDepth uint8
	RetryCount, RNRRetry               uint8
	LocalACKTimeout                    uint8 // the peer's transport timeout code, used for our QP
	TrafficClass, HopLimit             uint8
	// PrivateData is the user private data after the 36-byte rdma_cm
	// header: always MaxReqPrivateData bytes, zero-padded (REQs carry no
	// length).
	PrivateData []byte
}

// Conn is one connection. Its methods, like the Manager's, must be called
// on the polling goroutine.
type Conn struct {
	// deferred holds a REQ whose AcceptFunc deferred the answer, until
	// Complete.
	deferred *deferredReq
	m        *Manager
	state    ConnState
	passive  bool
	qp       *roce.QP
	qpn      uint32
	owned    bool // the Manager still drives the QP (not yet reported)
	ev       Events

	localID, remoteID uint32
	localAddr         netip.AddrPort
	remoteAddr        netip.AddrPort
	remoteMAC         [6]byte
	remoteQPN         uint32
	remoteGUID        uint64
	vlans             header.VLANs // the REQ's: the passive side answers in its tags
	tos, ttl          uint8
	tid               uint64 // of the REQ: REP, RTU and REJ reuse it
	dreqTID           uint64

	// QP parameters decided at REQ/REP time.
	sendPSN, recvPSN uint32
	pathMTU          int
	timeout          uint8
	retryCnt         uint8
	rnrRetry         uint8
	rdAtomic         int // READs we issue
	destRdAtomic     int // READs we serve

	retries    int
	maxRetries int
	deadline   time.Time // zero: no timer
	mad        [wire.MADLen]byte
	priv       [maxPeerPrivateData]byte
	privLen    int
}

// QP returns the connection's QP.
func (c *Conn) QP() *roce.QP { return c.qp }

// State returns the connection's state.
func (c *Conn) State() ConnState { return c.state }

// Passive reports whether the peer connected to us.
func (c *Conn) Passive() bool { return c.passive }

// LocalAddr returns our address and port: the listened port (passive) or
// the source port put in the rdma_cm header (active).
func (c *Conn) LocalAddr() netip.AddrPort { return c.localAddr }

// RemoteAddr returns the peer's address and port: the dialed port
// (active) or the peer's rdma_cm source port (passive).
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remoteAddr }

// RemoteMAC returns the peer's MAC address.
func (c *Conn) RemoteMAC() [6]byte { return c.remoteMAC }

// RemoteQPN returns the peer's QP number, once known.
func (c *Conn) RemoteQPN() uint32 { return c.remoteQPN }

// RemoteCAGUID returns the peer's CA GUID, once known.
func (c *Conn) RemoteCAGUID() uint64 { return c.remoteGUID }

// LocalCommID returns our communication ID.
func (c *Conn) LocalCommID() uint32 { return c.localID }

// RemoteCommID returns the peer's communication ID, once known.
func (c *Conn) RemoteCommID() uint32 { return c.remoteID }

// PrivateData returns the peer's private data: the REQ's user private
// data (passive, 56 bytes) or the REP's (active, 196 bytes), zero-padded.
func (c *Conn) PrivateData() []byte { return c.priv[:c.privLen] }

func (c *Conn) String() string {
	role := "active"
	if c.passive {
		role = "passive"
	}
	return fmt.Sprintf("cm conn %#08x (%s, qp %d, %v→%v, %v)", c.localID, role, c.qpn, c.localAddr, c.remoteAddr, c.state)
}

// pending returns the message the connection waits for an answer to: the
// one its retransmission timer sends again.
func (c *Conn) pending() Message {
	switch c.state {
	case StateReqSent:
		return MsgREQ
	case StateRepSent:
		return MsgREP
	}
	return MsgDREQ
}

// gsiAV returns where the connection's MADs go.
func (c *Conn) gsiAV() roce.AddressVector {
	return roce.AddressVector{
		DstMAC: c.remoteMAC, DstIP: c.remoteAddr.Addr(), SrcIP: c.localAddr.Addr(),
		TOS: c.tos, TTL: c.ttl, VLANs: c.vlans,
	}
}
