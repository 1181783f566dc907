package app

import (
	"fmt"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// Defaults shared by the QP-level services.
const (
	DefaultMaxConns = 64
	// DefaultStallTimeout is the StallTimeout of a service that must not
	// hold a stuck client's buffers for ever, as cephdpdkd's listeners;
	// a zero StallTimeout never fails a connection.
	DefaultStallTimeout = 30 * time.Second
)

// protocol is the service-specific half of a QP-level connection.
type protocol interface {
	// start runs when the connection is established.
	start() error
	// poll makes progress at time now. It returns the work done and
	// whether the protocol has completed, or the error that ended it.
	poll(now time.Time) (work int, complete bool, err error)
	// busy reports work outstanding that the peer must answer, for
	// stall detection.
	busy() bool
}

// server is the connection table every QP-level service runs on: it
// owns the protection domain, creates and destroys connections' QPs and
// buffers, polls the protocols and reports their ends.
type server struct {
	name     string
	ep       *roce.Endpoint
	pd       *roce.PD
	alloc    roce.Allocator
	maxConns int
	stall    time.Duration

	conns []*conn
	ended []*conn // finished, done not yet called
	cnt   counters
	shut  bool
}

type conn struct {
	res    *qpResources
	proto  protocol
	done   func(error)
	up     bool // established
	over   bool // finished: no more polling
	closed bool
	err    error
	stall  stallClock
	// quietSince is when the connection last made progress; a connection
	// quiet for probeInterval gets a liveness probe.
	quietSince time.Time
}

// probeInterval is how long a connection may be quiet before the server
// checks that its peer is still there. RDMA has no keepalive: a server
// waiting for a peer that vanished would wait forever, holding the QP and
// its buffers. A zero-length RDMA WRITE touches no memory and needs no
// R_Key (IBA C9-88), consumes no receive at the peer, and is
// acknowledged; from a vanished peer it is not, the transport's retry
// limit fails the QP, and the connection is torn down.
const probeInterval = 2 * time.Second

// probeWRID marks liveness probes; they are unsignaled, so only a
// failure completes them.
const probeWRID = ^uint64(0)

func newServer(name string, ep *roce.Endpoint, alloc roce.Allocator, maxConns int, stall time.Duration) (*server, error) {
	if ep == nil {
		return nil, fmt.Errorf("app: new %s: no endpoint: %w", name, roce.ErrInvalidArgument)
	}
	if alloc == nil {
		alloc = &roce.HeapAllocator{}
	}
	orDefault(&maxConns, DefaultMaxConns)
	return &server{name: name, ep: ep, pd: ep.NewPD(), alloc: alloc, maxConns: maxConns, stall: max(stall, 0)}, nil
}

// accept creates a connection with memSize bytes of buffers and queues
// of qc; newProto builds its protocol state over the resources (and may
// post receives).
func (s *server) accept(done func(error), memSize int, qc roce.QPCap, newProto func(*qpResources) (protocol, error)) (*roce.QP, error) {
	switch {
	case s.shut:
		return nil, fmt.Errorf("app: %s: accept after shutdown: %w", s.name, roce.ErrInvalidState)
	case len(s.conns) >= s.maxConns:
		return nil, fmt.Errorf("app: %s: accept: %d connections already: %w", s.name, len(s.conns), roce.ErrBusy)
	}
	res, err := newQPResources(s.ep, s.pd, s.alloc, memSize, qc)
	if err != nil {
		return nil, fmt.Errorf("app: %s: accept: %w", s.name, err)
	}
	p, err := newProto(res)
	if err != nil {
		res.release()
		return nil, fmt.Errorf("app: %s: accept on qp %d: %w", s.name, res.qp.QPN(), err)
	}
	s.conns = append(s.conns, &conn{res: res, proto: p, done: done})
	s.cnt.accepted.Add(1)
	return res.qp, nil
}

func (s *server) find(qp *roce.QP) int {
	for i, c := range s.conns {
		if c.res.qp == qp {
			return i
		}
	}
	return -1
}

// Established implements Service: the connection's protocol starts.
func (s *server) Established(qp *roce.QP) error {
	i := s.find(qp)
	if i < 0 {
		return fmt.Errorf("app: %s: established: %w", s.name, ErrUnknown)
	}
	c := s.conns[i]
	if c.up || c.over {
		return nil
	}
	c.up = true
	if err := c.proto.start(); err != nil {
		s.finish(c, err)
		return fmt.Errorf("app: %s: start on qp %d: %w", s.name, qp.QPN(), err)
	}
	return nil
}

// finish ends c's protocol; its done callback runs in the next Poll.
func (s *server) finish(c *conn, err error) {
	if c.over {
		return
	}
	c.over, c.err = true, err
	s.cnt.finished(err)
	s.ended = append(s.ended, c)
}

// Close implements Service: the QP is destroyed and its buffers freed.
func (s *server) Close(qp *roce.QP) error {
	i := s.find(qp)
	if i < 0 {
		return fmt.Errorf("app: %s: close: %w", s.name, ErrUnknown)
	}
	c := s.conns[i]
	last := len(s.conns) - 1
	s.conns[i] = s.conns[last]
	s.conns[last] = nil
	s.conns = s.conns[:last]
	c.closed = true
	if !c.over {
		// The peer ended the connection while the protocol ran: normal
		// for servers whose clients decide when to stop.
		c.over = true
		s.cnt.finished(nil)
	}
	c.res.release()
	s.cnt.closed.Add(1)
	return nil
}

// Poll implements Service.
func (s *server) Poll(now time.Time) int {
	work := 0
	for _, c := range s.conns {
		if c.over {
			continue
		}
		if err := qpFailed(c.res.qp); err != nil {
			s.finish(c, err)
			continue
		}
		if !c.up && c.res.qp.State() != roce.QPStateRTS {
			// Not connected yet: receives may complete but nothing may
			// be sent; protocols wait for Established or RTS.
			continue
		}
		n, complete, err := c.proto.poll(now)
		work += n
		if n > 0 || c.quietSince.IsZero() {
			c.quietSince = now
		} else if now.Sub(c.quietSince) >= probeInterval && c.res.qp.State() == roce.QPStateRTS {
			c.quietSince = now
			s.probe(c)
		}
		switch {
		case err != nil:
			s.finish(c, fmt.Errorf("app: %s on qp %d: %w", s.name, c.res.qp.QPN(), err))
		case complete:
			s.finish(c, nil)
		default:
			if err := c.stall.check(now, s.stall, c.proto.busy(), n > 0); err != nil {
				s.finish(c, fmt.Errorf("app: %s on qp %d: %w", s.name, c.res.qp.QPN(), err))
			}
		}
	}
	// Callbacks last: they may close connections, or end others.
	for i := 0; i < len(s.ended); i++ {
		c := s.ended[i]
		s.ended[i] = nil
		if c.done != nil && !c.closed {
			c.done(c.err)
		}
		work++
	}
	s.ended = s.ended[:0]
	return work
}

// probe posts a liveness probe on c's reserved send slot.
func (s *server) probe(c *conn) {
	if c.res.qp.SendQueueFree() == 0 {
		return // traffic in flight: the transport is watching the peer
	}
	// An error means the QP is failing, which the next poll sees.
	c.res.qp.PostSend(&roce.SendWR{ID: probeWRID, Opcode: roce.WRRDMAWrite})
}

// Stats implements Service.
func (s *server) Stats() Stats { return s.cnt.snapshot() }

// Shutdown implements Service: every connection is closed.
func (s *server) Shutdown() error {
	for len(s.conns) > 0 {
		s.Close(s.conns[0].res.qp)
	}
	clear(s.ended)
	s.ended = s.ended[:0]
	if s.shut {
		return nil
	}
	s.shut = true
	if err := s.pd.Dealloc(); err != nil {
		return fmt.Errorf("app: %s: shutdown: %w", s.name, err)
	}
	return nil
}
