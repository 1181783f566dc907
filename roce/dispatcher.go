package roce

import (
	"net/netip"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// The endpoint hands what its QPs do not consume to two dispatchers,
// attached once with Attach, as gVisor's link endpoints hand packets to a
// stack.NetworkDispatcher and the network layer to a TransportDispatcher.
// Traffic flows one way: Poll reads a burst, and each frame goes down
// one path, to a QP, the network dispatcher or the transport dispatcher.
// Neither dispatcher polls the endpoint; whoever owns the goroutine
// polls them all, in an order it writes down (internal/roced's Node).

// NetworkDispatcher takes what the endpoint receives below the RoCE
// transport. roce/neigh's Table is one: it answers ARP and keeps the
// neighbour table. Both methods run inside Endpoint.Poll.
type NetworkDispatcher interface {
	// HandleFrame is given every well-formed received frame that is not
	// RoCEv2 (ARP, other IP traffic) and reports whether it took the
	// frame; one it did not take is dropped and counted
	// (EndpointStats.NotRoCE). frame is valid only until it returns.
	HandleFrame(frame []byte, now time.Time) bool
	// Learn is given the source IP and MAC address of every valid
	// RoCEv2 frame addressed to the endpoint. It runs once per received
	// packet, so it must be cheap.
	Learn(ip netip.Addr, mac [6]byte, now time.Time)
}

// TransportDispatcher takes what the endpoint receives at the transport
// level that belongs to no QP of the application: the general services
// interface's MADs and the QPs' and CQs' asynchronous events. The
// connection manager (roce/cm) is one.
type TransportDispatcher interface {
	// DeliverGSI is given every UD packet to QP1 with the GSI Q_Key
	// (connection manager MADs), from inside Poll. p and its payload are
	// valid only until it returns.
	DeliverGSI(p *wire.Packet)
	// DeliverEvent is given every asynchronous event of the endpoint's
	// QPs and CQs, after the QP's or CQ's own handler, at the end of
	// Poll and before the completion handlers; now is the Poll's time.
	DeliverEvent(ev Event, now time.Time)
}

// Attach sets the endpoint's dispatchers; either may be nil, and then
// what it would take is dropped and counted. It may be called once, before
// the first Poll; a second call fails with ErrInvalidState, so two
// connection managers cannot share an endpoint.
func (e *Endpoint) Attach(nd NetworkDispatcher, td TransportDispatcher) error {
	if e.attached {
		return ErrInvalidState
	}
	e.attached = true
	e.nd, e.td = nd, td
	return nil
}
