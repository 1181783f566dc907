package session

import (
	"fmt"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// Pool defaults.
const (
	DefaultPoolRecvBuffers = 512
	DefaultPoolSendBuffers = 256
	DefaultPoolSessions    = 1024
)

// PoolConfig sizes a Pool.
type PoolConfig struct {
	BufferSize  int // bytes per buffer: the largest SEND (DefaultBufferSize if 0)
	RecvBuffers int // receive buffers, all kept posted on the SRQ
	SendBuffers int // send buffers the sessions share
	// MaxSessions bounds the sessions at once; it sizes the shared send
	// CQ, which must hold every session's closing SEND too.
	MaxSessions int
	// Allocator provides the buffers' memory (a new roce.HeapAllocator
	// if nil).
	Allocator roce.Allocator
	// OnEvent, if set, receives the shared CQs' asynchronous events.
	OnEvent func(roce.Event)
}

func (c PoolConfig) withDefaults() (PoolConfig, error) {
	orDefault(&c.BufferSize, DefaultBufferSize)
	orDefault(&c.RecvBuffers, DefaultPoolRecvBuffers)
	orDefault(&c.SendBuffers, DefaultPoolSendBuffers)
	orDefault(&c.MaxSessions, DefaultPoolSessions)
	if c.Allocator == nil {
		c.Allocator = &roce.HeapAllocator{}
	}
	if err := checkBuffers("pool ", c.BufferSize, c.SendBuffers, c.RecvBuffers); err != nil {
		return c, err
	}
	switch {
	case c.RecvBuffers > roce.MaxQueueDepth || c.SendBuffers+c.MaxSessions > roce.MaxCQDepth:
		return c, fmt.Errorf("session: pool of %d receive buffers, %d send buffers and %d sessions too large: %w",
			c.RecvBuffers, c.SendBuffers, c.MaxSessions, roce.ErrInvalidArgument)
	}
	return c, nil
}

// Pool serves many Sessions from shared, bounded buffers, as
// Ceph's RDMA messenger does with its SRQ: one registered region of
// receive buffers, all posted on a shared receive queue, one region of
// send buffers on a free list, and one send and one receive CQ whose
// completions are dispatched to the sessions by QP number. Registered
// memory is then the pool's, fixed, whatever the number of sessions.
//
// Flow control stays per session. A session holds at most
// Config.SendBuffers send buffers (posted, not yet acknowledged) and
// Config.RecvBuffers receive buffers (being filled, or received and not
// yet read out, see roce.QP.SetSRQLimit), and beyond that only while
// more than half the pool's stay free (roce.SRQ.SetLendingReserve): a
// connection whose reader lags a moment borrows the idle pool's slack
// instead of having the client's SENDs dropped, and one whose reader
// stalls stops at half the pool, leaving the others theirs. When the send pool is empty, Send returns
// roce.ErrWouldBlock like a session out of its own buffers.
//
// Like everything a roce.Endpoint owns, a pool and its sessions belong
// to the goroutine that polls the endpoint.
type Pool struct {
	pd       *roce.PD
	cfg      PoolConfig
	srq      *roce.SRQ
	scq, rcq *roce.CQ
	buffers
	free     []int32 // send buffers not posted
	sessions map[uint32]*Session

	wcs [32]roce.WorkCompletion
	sge [1]roce.SGE
	rwr roce.RecvWR

	sendStarved uint64 // Sends that found the send pool empty
	refused     uint64 // sessions refused for want of receive buffers
	closed      bool
}

// PoolStats describes a Pool.
type PoolStats struct {
	Sessions         int
	RecvBuffers      int // receive buffers in the pool
	RecvPosted       int // of those, posted on the SRQ: free for any session
	SendBuffers      int
	SendFree         int
	RegisteredBytes  int    // memory registered for the buffers
	SendStarved      uint64 // Sends that found the send pool empty
	RefusedNoBuffers uint64 // sessions refused: too few receive buffers free
}

// NewPool allocates and registers the pool's buffers on pd, creates its
// SRQ and CQs, and posts every receive buffer.
func NewPool(pd *roce.PD, cfg PoolConfig) (_ *Pool, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	p := &Pool{pd: pd, cfg: cfg, free: make([]int32, 0, cfg.SendBuffers), sessions: map[uint32]*Session{}}
	defer func() {
		if err != nil {
			p.teardown()
			err = fmt.Errorf("session: new pool: %w", err)
		}
	}()
	e := pd.Endpoint()
	if p.rcq, err = e.NewCQ(roce.CQConfig{Depth: cfg.RecvBuffers, OnEvent: cfg.OnEvent}); err != nil {
		return nil, err
	}
	if p.scq, err = e.NewCQ(roce.CQConfig{Depth: cfg.SendBuffers + cfg.MaxSessions, OnEvent: cfg.OnEvent}); err != nil {
		return nil, err
	}
	if p.srq, err = pd.CreateSRQ(&roce.SRQInitAttr{MaxWR: cfg.RecvBuffers}); err != nil {
		return nil, err
	}
	p.srq.SetLendingReserve(cfg.RecvBuffers / 2)
	if err = p.allocate(cfg.Allocator, pd, cfg.SendBuffers*cfg.BufferSize, cfg.RecvBuffers*cfg.BufferSize); err != nil {
		return nil, err
	}
	for i := cfg.SendBuffers - 1; i >= 0; i-- {
		p.free = append(p.free, int32(i))
	}
	for i := range cfg.RecvBuffers {
		if err = p.postRecv(i); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// teardown frees what NewPool made; Close has destroyed the SRQ
// already, checking that no QP still uses it.
func (p *Pool) teardown() {
	if p.srq != nil && !p.closed {
		p.srq.Destroy()
	}
	p.release(p.cfg.Allocator)
	for _, cq := range []*roce.CQ{p.scq, p.rcq} {
		if cq != nil {
			cq.Destroy()
		}
	}
}

// Close frees the pool's buffers, SRQ and CQs. Every session must have
// been released and its QP destroyed.
func (p *Pool) Close() error {
	if p.closed {
		return nil
	}
	if len(p.sessions) > 0 {
		return fmt.Errorf("session: close pool with %d sessions: %w", len(p.sessions), roce.ErrBusy)
	}
	// Fails, wrapping roce.ErrBusy, while a QP still uses the SRQ.
	if err := p.srq.Destroy(); err != nil {
		return fmt.Errorf("session: close pool: %w", err)
	}
	p.closed = true
	p.teardown()
	return nil
}

// Config returns the pool's configuration, defaults applied.
func (p *Pool) Config() PoolConfig { return p.cfg }

// Sessions returns the sessions not yet released.
func (p *Pool) Sessions() int { return len(p.sessions) }

// Stats returns the pool's state; call it on the polling goroutine.
func (p *Pool) Stats() PoolStats {
	return PoolStats{
		Sessions: len(p.sessions), RecvBuffers: p.cfg.RecvBuffers, RecvPosted: p.srq.Len(),
		SendBuffers: p.cfg.SendBuffers, SendFree: len(p.free),
		RegisteredBytes: (p.cfg.RecvBuffers + p.cfg.SendBuffers) * p.cfg.BufferSize,
		SendStarved:     p.sendStarved, RefusedNoBuffers: p.refused,
	}
}

// NewSession creates a QP on the pool's CQs and SRQ, moves it to INIT,
// and returns a session over it; move the QP on with cfg.RTRAttr and
// cfg.RTSAttr. In cfg, SendBuffers and RecvBuffers are the session's
// caps on the pool's buffers, BufferSize, Allocator and OnCompletion are
// ignored, and RecvQueueDepth is unused.
//
// It refuses, with an error wrapping roce.ErrBusy, a session beyond
// MaxSessions, and, with one wrapping roce.ErrNoMemory, a session for
// which fewer receive buffers are free than its cap: the connections
// already there hold so much unread data that a new one would start
// starved.
func (p *Pool) NewSession(cfg Config) (*Session, error) {
	cfg.BufferSize, cfg.Allocator = p.cfg.BufferSize, p.cfg.Allocator
	if cfg.RecvQueueDepth <= 0 {
		cfg.RecvQueueDepth = max(cfg.RecvBuffers, 1)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	switch {
	case p.closed:
		return nil, fmt.Errorf("session: pool session: pool closed: %w", roce.ErrInvalidState)
	case cfg.RecvBuffers > p.cfg.RecvBuffers || cfg.SendBuffers > p.cfg.SendBuffers:
		return nil, fmt.Errorf("session: pool session: caps of %d receive and %d send buffers exceed the pool's %d and %d: %w",
			cfg.RecvBuffers, cfg.SendBuffers, p.cfg.RecvBuffers, p.cfg.SendBuffers, roce.ErrInvalidArgument)
	case len(p.sessions) >= p.cfg.MaxSessions:
		return nil, fmt.Errorf("session: pool session: %d sessions: %w", len(p.sessions), roce.ErrBusy)
	}
	p.poll() // buffers read out since the last poll count as free
	if free := p.srq.Len(); free < cfg.RecvBuffers {
		p.refused++
		return nil, fmt.Errorf("session: pool session: %d of %d receive buffers free, below the session's cap of %d: %w",
			free, p.cfg.RecvBuffers, cfg.RecvBuffers, roce.ErrNoMemory)
	}
	qp, err := p.pd.CreateQP(&roce.QPInitAttr{
		SendCQ: p.scq, RecvCQ: p.rcq, SRQ: p.srq, OnEvent: cfg.OnEvent,
		Cap: roce.QPCap{MaxSendWR: cfg.SendQueueDepth}, NoRNR: cfg.NoRNR,
	})
	if err != nil {
		return nil, fmt.Errorf("session: pool session: %w", err)
	}
	if err := qp.Modify(&roce.QPAttr{State: roce.QPStateInit, Access: cfg.Access}, roce.QPAttrState|roce.QPAttrAccessFlags); err != nil {
		qp.Destroy()
		return nil, fmt.Errorf("session: pool session: %w", err)
	}
	qp.SetSRQLimit(cfg.RecvBuffers)
	s := &Session{
		qp: qp, cfg: cfg, pool: p,
		buffers: p.buffers,
		free:    make([]int32, 0, cfg.SendBuffers), // the buffers posted, in shared mode
		ready:   make([]readyBuf, cfg.RecvBuffers),
	}
	p.sessions[qp.QPN()] = s
	s.publish()
	return s, nil
}

// Poll dispatches the shared CQs' completions to the sessions: after it,
// each session's Buffered counts what arrived. Sessions poll the pool
// themselves in Send, Recv and Unacknowledged.
func (p *Pool) Poll() { p.poll() }

func (p *Pool) poll() {
	p.drain(p.rcq, p.dispatchRecv)
	p.drain(p.scq, p.dispatchSend)
}

// drain hands every completion on cq to dispatch, a batch at a time.
func (p *Pool) drain(cq *roce.CQ, dispatch func(wc *roce.WorkCompletion)) {
	for {
		n := cq.Poll(p.wcs[:])
		for i := range n {
			dispatch(&p.wcs[i])
		}
		if n < len(p.wcs) {
			return
		}
	}
}

func (p *Pool) dispatchRecv(wc *roce.WorkCompletion) {
	s := p.sessions[wc.QPN]
	if s == nil || s.err != nil {
		// Its session is gone or failed: only the buffer matters.
		if wc.WRID < uint64(p.cfg.RecvBuffers) {
			p.repost(int(wc.WRID))
		}
		if s != nil {
			s.qp.ReleaseSRQ(1)
		}
		return
	}
	s.deliverRecv(wc)
}

func (p *Pool) dispatchSend(wc *roce.WorkCompletion) {
	s := p.sessions[wc.QPN]
	if s == nil {
		return // its buffer went back when the session was released
	}
	s.completeSend(wc)
}

// repost puts receive buffer idx back on the SRQ, unless the pool is
// closing.
func (p *Pool) repost(idx int) {
	if p.closed {
		return
	}
	// The SRQ has room for every buffer, so this cannot fail.
	p.postRecv(idx)
}

func (p *Pool) postRecv(idx int) error {
	bs := p.cfg.BufferSize
	p.sge[0] = p.recvMR.SGE(idx*bs, bs)
	p.rwr = roce.RecvWR{ID: uint64(idx), SGList: p.sge[:]}
	return p.srq.PostRecv(&p.rwr)
}
