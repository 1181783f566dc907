package app

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrProtocol: the peer broke the protocol the service speaks (a
	// message of the wrong size, an unexpected completion).
	ErrProtocol = errors.New("app: protocol violation")
	// ErrStalled: a connection with work outstanding made no progress
	// for the configured stall timeout.
	ErrStalled = errors.New("app: connection stalled")
	// ErrUnknown: the QP or session is not served by this service.
	ErrUnknown = errors.New("app: unknown connection")
)

// Server serves connections at the QP level on one endpoint, in a
// protection domain of its own. The connection manager's accept handler
// calls Accept for each connection request it takes; the daemon then
// calls Established when the connection manager reports the connection
// established, and Close once the connection is over (the peer
// disconnected, the connection manager gave up, or the service reported
// done and the daemon disconnected).
type Server interface {
	// Accept creates a QP for a new connection, with its completion
	// queues and buffers, moves it to INIT and posts its receives, so
	// that the connection manager can take it to RTR and RTS. done is
	// called, from Poll and at most once, when the service has finished
	// with the connection on its own: its protocol completed (err nil) or
	// the connection failed. The daemon should then disconnect and Close.
	Accept(done func(err error)) (*roce.QP, error)
	// Established tells the service the connection on qp is established
	// (qp is in RTS): it may start sending.
	Established(qp *roce.QP) error
	// Close moves qp to ERROR, destroys it and its completion queues and
	// frees the connection's buffers. Call it after the connection
	// manager no longer uses qp.
	Close(qp *roce.QP) error
	// Poll does the work that can be done at time now for every
	// connection and returns a measure of it (0 when idle).
	Poll(now time.Time) int
	// Stats returns the service's counters; safe from any goroutine.
	Stats() Stats
	// Shutdown closes every connection and releases the protection
	// domain; the service accepts nothing afterwards.
	Shutdown() error
}

// SessionService serves session.Session byte streams.
type SessionService interface {
	// Attach starts serving s. done is called, from Poll and at most
	// once, when the service has finished with s: the stream ended both
	// ways (err nil) or failed. After done the service no longer touches
	// s; its owner tears it down.
	Attach(s *session.Session, done func(err error)) error
	// Detach stops serving s at once, without calling done: its owner is
	// tearing it down (the peer went away). Detaching a session the
	// service does not hold does nothing.
	Detach(s *session.Session)
	// Poll does the work that can be done at time now for every session
	// and returns a measure of it (0 when idle).
	Poll(now time.Time) int
	// Stats returns the service's counters; safe from any goroutine.
	Stats() Stats
}

// Stats counts a service's work.
type Stats struct {
	Accepted  uint64 // connections or sessions taken on
	Active    uint64 // taken on and not yet closed or detached
	Completed uint64 // finished after their protocol ended normally
	Failed    uint64 // finished with an error
	// Messages and bytes received and sent. For sessions a message is a
	// Recv or Send call that moved data.
	MessagesIn, MessagesOut uint64
	BytesIn, BytesOut       uint64
	// RDMA operations issued as requester (RPingServer) and their bytes.
	RDMAReads, RDMAWrites uint64
	RDMABytes             uint64
}

// counters back Stats: written by the polling goroutine, read by
// metrics collectors on others, hence atomics.
type counters struct {
	accepted, closed, completed, failed  atomic.Uint64
	msgsIn, msgsOut, bytesIn, bytesOut   atomic.Uint64
	rdmaReads, rdmaWrites, rdmaBytesDone atomic.Uint64
}

func (c *counters) snapshot() Stats {
	acc, cl := c.accepted.Load(), c.closed.Load()
	return Stats{
		Accepted: acc, Active: acc - min(cl, acc),
		Completed: c.completed.Load(), Failed: c.failed.Load(),
		MessagesIn: c.msgsIn.Load(), MessagesOut: c.msgsOut.Load(),
		BytesIn: c.bytesIn.Load(), BytesOut: c.bytesOut.Load(),
		RDMAReads: c.rdmaReads.Load(), RDMAWrites: c.rdmaWrites.Load(),
		RDMABytes: c.rdmaBytesDone.Load(),
	}
}

func (c *counters) in(n int) {
	c.msgsIn.Add(1)
	c.bytesIn.Add(uint64(n))
}

func (c *counters) out(n int) {
	c.msgsOut.Add(1)
	c.bytesOut.Add(uint64(n))
}

func (c *counters) finished(err error) {
	if err != nil {
		c.failed.Add(1)
	} else {
		c.completed.Add(1)
	}
}

// stallClock tracks whether a connection with work outstanding keeps
// making progress.
type stallClock struct {
	last time.Time
}

// check reports ErrStalled when busy and nothing progressed for limit.
// progress says whether something moved since the last call.
func (c *stallClock) check(now time.Time, limit time.Duration, busy, progress bool) error {
	if progress || !busy || c.last.IsZero() {
		c.last = now
		return nil
	}
	if limit > 0 && now.Sub(c.last) >= limit {
		return fmt.Errorf("no progress for %v: %w", now.Sub(c.last), ErrStalled)
	}
	return nil
}

// qpResources are what a QP-level connection owns: the QP, its two
// completion queues and one registered region holding all its buffers.
type qpResources struct {
	qp       *roce.QP
	scq, rcq *roce.CQ
	mem      []byte
	mr       *roce.MR
	alloc    roce.Allocator
}

// newQPResources allocates memSize bytes from alloc, registers them for
// local write on pd, creates a QP with queues of qc and completion
// queues as deep, and moves it to INIT.
func newQPResources(ep *roce.Endpoint, pd *roce.PD, alloc roce.Allocator, memSize int, qc roce.QPCap) (*qpResources, error) {
	r := &qpResources{alloc: alloc}
	err := r.setup(ep, pd, memSize, qc)
	if err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

func (r *qpResources) setup(ep *roce.Endpoint, pd *roce.PD, memSize int, qc roce.QPCap) error {
	var err error
	qc.MaxSendWR++ // a slot of its own for liveness probes (server.probe)
	if r.mem, err = r.alloc.Alloc(memSize); err != nil {
		return err
	}
	if r.mr, err = pd.RegisterMR(r.mem, roce.AccessLocalWrite); err != nil {
		return err
	}
	if r.scq, err = ep.NewCQ(roce.CQConfig{Depth: qc.MaxSendWR}); err != nil {
		return err
	}
	if r.rcq, err = ep.NewCQ(roce.CQConfig{Depth: qc.MaxRecvWR}); err != nil {
		return err
	}
	if r.qp, err = pd.CreateQP(&roce.QPInitAttr{SendCQ: r.scq, RecvCQ: r.rcq, Cap: qc}); err != nil {
		return err
	}
	return r.qp.Modify(&roce.QPAttr{State: roce.QPStateInit}, roce.QPAttrState)
}

// drain polls cq in batches of len(wcs) until a batch comes back short,
// handing each completion to f, and returns the number of completions
// taken. It stops at the first error of f, returning the completions of
// the batches before.
func drain(cq *roce.CQ, wcs []roce.WorkCompletion, f func(wc *roce.WorkCompletion) error) (int, error) {
	work := 0
	for {
		n := cq.Poll(wcs)
		for i := range n {
			if err := f(&wcs[i]); err != nil {
				return work, err
			}
		}
		work += n
		if n < len(wcs) {
			return work, nil
		}
	}
}

// release tears down whatever setup created, in reverse order: the QP
// first, so that nothing touches the memory any more.
func (r *qpResources) release() {
	if r.qp != nil {
		r.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		r.qp.Destroy()
		r.qp = nil
	}
	for _, cq := range []**roce.CQ{&r.scq, &r.rcq} {
		if *cq != nil {
			(*cq).Destroy()
			*cq = nil
		}
	}
	if r.mr != nil {
		r.mr.Deregister()
		r.mr = nil
	}
	if r.mem != nil {
		r.alloc.Free(r.mem)
		r.mem = nil
	}
}

// qpFailed returns why qp is in ERROR, or nil if it is not.
func qpFailed(qp *roce.QP) error {
	if qp.State() != roce.QPStateError {
		return nil
	}
	if err := qp.Err(); err != nil {
		return fmt.Errorf("qp %d in ERROR: %w", qp.QPN(), err)
	}
	return fmt.Errorf("qp %d in ERROR: %w", qp.QPN(), roce.ErrFlushed)
}

// wcError describes a failed or unexpected work completion.
func wcError(qp *roce.QP, wc *roce.WorkCompletion, what string) error {
	if err := wc.Status.Err(); err != nil {
		return fmt.Errorf("qp %d: %s completion (wr %d): %w", qp.QPN(), what, wc.WRID, err)
	}
	return fmt.Errorf("qp %d: unexpected %v completion (wr %d, %d bytes) for %s: %w",
		qp.QPN(), wc.Opcode, wc.WRID, wc.ByteLen, what, ErrProtocol)
}

// orDefault sets *v to d when it is not positive: not set.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
