package roce

import "fmt"

// Session pool defaults.
const (
	DefaultPoolRecvBuffers = 512
	DefaultPoolSendBuffers = 256
	DefaultPoolSessions    = 1024
)

// PoolConfig sizes a SessionPool.
type PoolConfig struct {
	BufferSize  int // bytes per buffer: the largest SEND (DefaultBufferSize if 0)
	RecvBuffers int // receive buffers, all kept posted on the SRQ
	SendBuffers int // send buffers the sessions share
	// MaxSessions bounds the sessions at once; it sizes the shared send
	// CQ, which must hold every session's closing SEND too.
	MaxSessions int
	// Allocator provides the buffers' memory (a new HeapAllocator if nil).
	Allocator Allocator
	// OnEvent, if set, receives the shared CQs' asynchronous events.
	OnEvent func(Event)
}

func (c PoolConfig) withDefaults() (PoolConfig, error) {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.BufferSize, DefaultBufferSize)
	def(&c.RecvBuffers, DefaultPoolRecvBuffers)
	def(&c.SendBuffers, DefaultPoolSendBuffers)
	def(&c.MaxSessions, DefaultPoolSessions)
	if c.Allocator == nil {
		c.Allocator = &HeapAllocator{}
	}
	switch {
	case c.BufferSize > MaxMessage:
		return c, fmt.Errorf("roce: pool buffer size %d exceeds %d: %w", c.BufferSize, MaxMessage, ErrInvalidArgument)
	case int64(c.BufferSize)*int64(max(c.SendBuffers, c.RecvBuffers)) >= 1<<vaShift:
		return c, fmt.Errorf("roce: pool buffers of %d×%d bytes exceed a memory region: %w", max(c.SendBuffers, c.RecvBuffers), c.BufferSize, ErrInvalidArgument)
	case c.RecvBuffers > MaxQueueDepth || c.SendBuffers+c.MaxSessions > MaxCQDepth:
		return c, fmt.Errorf("roce: pool of %d receive buffers, %d send buffers and %d sessions too large: %w",
			c.RecvBuffers, c.SendBuffers, c.MaxSessions, ErrInvalidArgument)
	}
	return c, nil
}

// SessionPool serves many Sessions from shared, bounded buffers, as
// Ceph's RDMA messenger does with its SRQ: one registered region of
// receive buffers, all posted on a shared receive queue, one region of
// send buffers on a free list, and one send and one receive CQ whose
// completions are dispatched to the sessions by QP number. Registered
// memory is then the pool's, fixed, whatever the number of sessions.
//
// Flow control stays per session. A session holds at most
// SessionConfig.SendBuffers send buffers (posted, not yet acknowledged)
// and at most SessionConfig.RecvBuffers receive buffers (being filled,
// or received and not yet read out, see QP.SetSRQLimit): a connection
// whose reader stalls stops taking receive buffers at its cap, and the
// others keep theirs. When the send pool is empty, Send returns
// ErrWouldBlock like a session out of its own buffers.
//
// Like everything an Endpoint owns, a pool and its sessions belong to
// the goroutine that polls the endpoint.
type SessionPool struct {
	pd       *PD
	cfg      PoolConfig
	srq      *SRQ
	scq, rcq *CQ
	sendMem  []byte
	recvMem  []byte
	sendMR   *MR
	recvMR   *MR
	free     []int32 // send buffers not posted
	sessions map[uint32]*Session

	wcs [32]WorkCompletion
	sge [1]SGE
	rwr RecvWR

	sendStarved uint64 // Sends that found the send pool empty
	refused     uint64 // sessions refused for want of receive buffers
	closed      bool
}

// PoolStats describes a SessionPool.
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

// NewSessionPool allocates and registers the pool's buffers on pd,
// creates its SRQ and CQs, and posts every receive buffer.
func NewSessionPool(pd *PD, cfg PoolConfig) (_ *SessionPool, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	p := &SessionPool{pd: pd, cfg: cfg, free: make([]int32, 0, cfg.SendBuffers), sessions: map[uint32]*Session{}}
	defer func() {
		if err != nil {
			p.teardown()
			err = fmt.Errorf("roce: new session pool: %w", err)
		}
	}()
	e := pd.ep
	if p.rcq, err = e.NewCQ(CQConfig{Depth: cfg.RecvBuffers, OnEvent: cfg.OnEvent}); err != nil {
		return nil, err
	}
	if p.scq, err = e.NewCQ(CQConfig{Depth: cfg.SendBuffers + cfg.MaxSessions, OnEvent: cfg.OnEvent}); err != nil {
		return nil, err
	}
	if p.srq, err = pd.CreateSRQ(&SRQInitAttr{MaxWR: cfg.RecvBuffers}); err != nil {
		return nil, err
	}
	if p.sendMem, err = cfg.Allocator.Alloc(cfg.SendBuffers * cfg.BufferSize); err != nil {
		return nil, err
	}
	if p.recvMem, err = cfg.Allocator.Alloc(cfg.RecvBuffers * cfg.BufferSize); err != nil {
		return nil, err
	}
	if p.sendMR, err = pd.RegisterMR(p.sendMem, AccessLocalWrite); err != nil {
		return nil, err
	}
	if p.recvMR, err = pd.RegisterMR(p.recvMem, AccessLocalWrite); err != nil {
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

func (p *SessionPool) teardown() {
	if p.srq != nil && !p.srq.destroyed {
		p.srq.Destroy()
	}
	if p.sendMR != nil {
		p.sendMR.Deregister()
	}
	if p.recvMR != nil {
		p.recvMR.Deregister()
	}
	if p.sendMem != nil {
		p.cfg.Allocator.Free(p.sendMem)
	}
	if p.recvMem != nil {
		p.cfg.Allocator.Free(p.recvMem)
	}
	for _, cq := range []*CQ{p.scq, p.rcq} {
		if cq != nil {
			cq.Destroy()
		}
	}
	p.sendMR, p.recvMR, p.sendMem, p.recvMem = nil, nil, nil, nil
}

// Close frees the pool's buffers, SRQ and CQs. Every session must have
// been released and its QP destroyed.
func (p *SessionPool) Close() error {
	if p.closed {
		return nil
	}
	if len(p.sessions) > 0 || p.srq.users > 0 {
		return fmt.Errorf("roce: close session pool with %d sessions and %d qps: %w", len(p.sessions), p.srq.users, ErrBusy)
	}
	p.closed = true
	p.teardown()
	return nil
}

// Config returns the pool's configuration, defaults applied.
func (p *SessionPool) Config() PoolConfig { return p.cfg }

// Sessions returns the sessions not yet released.
func (p *SessionPool) Sessions() int { return len(p.sessions) }

// Stats returns the pool's state; call it on the polling goroutine.
func (p *SessionPool) Stats() PoolStats {
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
// It refuses, with an error wrapping ErrBusy, a session beyond
// MaxSessions, and, with one wrapping ErrNoMemory, a session for which
// fewer receive buffers are free than its cap: the connections already
// there hold so much unread data that a new one would start starved.
func (p *SessionPool) NewSession(cfg SessionConfig) (*Session, error) {
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
		return nil, fmt.Errorf("roce: pool session: pool closed: %w", ErrInvalidState)
	case cfg.RecvBuffers > p.cfg.RecvBuffers || cfg.SendBuffers > p.cfg.SendBuffers:
		return nil, fmt.Errorf("roce: pool session: caps of %d receive and %d send buffers exceed the pool's %d and %d: %w",
			cfg.RecvBuffers, cfg.SendBuffers, p.cfg.RecvBuffers, p.cfg.SendBuffers, ErrInvalidArgument)
	case len(p.sessions) >= p.cfg.MaxSessions:
		return nil, fmt.Errorf("roce: pool session: %d sessions: %w", len(p.sessions), ErrBusy)
	}
	p.poll() // buffers read out since the last poll count as free
	if free := p.srq.Len(); free < cfg.RecvBuffers {
		p.refused++
		return nil, fmt.Errorf("roce: pool session: %d of %d receive buffers free, below the session's cap of %d: %w",
			free, p.cfg.RecvBuffers, cfg.RecvBuffers, ErrNoMemory)
	}
	qp, err := p.pd.CreateQP(&QPInitAttr{
		SendCQ: p.scq, RecvCQ: p.rcq, SRQ: p.srq, OnEvent: cfg.OnEvent,
		Cap: QPCap{MaxSendWR: cfg.SendQueueDepth}, NoRNR: cfg.NoRNR,
	})
	if err != nil {
		return nil, fmt.Errorf("roce: pool session: %w", err)
	}
	if err := qp.Modify(&QPAttr{State: QPStateInit, Access: cfg.Access}, QPAttrState|QPAttrAccessFlags); err != nil {
		qp.Destroy()
		return nil, fmt.Errorf("roce: pool session: %w", err)
	}
	qp.SetSRQLimit(cfg.RecvBuffers)
	s := &Session{
		qp: qp, cfg: cfg, pool: p,
		sendMem: p.sendMem, recvMem: p.recvMem, sendMR: p.sendMR, recvMR: p.recvMR,
		free:  make([]int32, 0, cfg.SendBuffers), // the buffers posted, in shared mode
		ready: make([]readyBuf, cfg.RecvBuffers),
	}
	p.sessions[qp.qpn] = s
	qp.cnt.sendBufTotal.Store(int64(cfg.SendBuffers))
	qp.cnt.sendBufInUse.Store(0)
	return s, nil
}

// Poll dispatches the shared CQs' completions to the sessions: after it,
// each session's Buffered counts what arrived. Sessions poll the pool
// themselves in Send, Recv and Unacknowledged.
func (p *SessionPool) Poll() { p.poll() }

func (p *SessionPool) poll() {
	for {
		n := p.rcq.Poll(p.wcs[:])
		for i := range n {
			p.dispatchRecv(&p.wcs[i])
		}
		if n < len(p.wcs) {
			break
		}
	}
	for {
		n := p.scq.Poll(p.wcs[:])
		for i := range n {
			p.dispatchSend(&p.wcs[i])
		}
		if n < len(p.wcs) {
			break
		}
	}
}

func (p *SessionPool) dispatchRecv(wc *WorkCompletion) {
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

func (p *SessionPool) dispatchSend(wc *WorkCompletion) {
	s := p.sessions[wc.QPN]
	if s == nil {
		return // its buffer went back when the session was released
	}
	s.completeSend(wc)
}

// repost puts receive buffer idx back on the SRQ, unless the pool is
// closing.
func (p *SessionPool) repost(idx int) {
	if p.closed {
		return
	}
	// The SRQ has room for every buffer, so this cannot fail.
	p.postRecv(idx)
}

func (p *SessionPool) postRecv(idx int) error {
	bs := p.cfg.BufferSize
	p.sge[0] = p.recvMR.SGE(idx*bs, bs)
	p.rwr = RecvWR{ID: uint64(idx), SGList: p.sge[:]}
	return p.srq.PostRecv(&p.rwr)
}
