package session

import (
	"fmt"
	"io"
	"math"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// Defaults, those of Ceph async+rdma.
const (
	DefaultBufferSize  = 128 << 10 // ms_async_rdma_buffer_size
	DefaultSendBuffers = 32
	DefaultRecvBuffers = 32
	DefaultPathMTU     = 1024
	DefaultMinRNRTimer = 0x12 // 5.12 ms
	DefaultTimeout     = 0x12 // 4.096 µs·2^18 ≈ 1.07 s
	DefaultRetryCount  = roce.MaxRetry
	DefaultRNRRetry    = roce.MaxRetry
)

// Limits of the sizes a deployment configures: buffers of
// MinBufferSize..MaxBufferSize bytes, 1..MaxBuffers of them for sending
// and as many for receiving. New itself takes any size up to
// roce.MaxMessage and a memory region.
const (
	MinBufferSize = 64
	MaxBufferSize = 1 << 20
	MaxBuffers    = 4096
)

// finWRID marks the zero-length SEND that closes a session.
const finWRID = math.MaxUint64

// Config sizes a Session and the QP it runs on. Start from
// DefaultConfig: zero integer sizes take their defaults, but the timer
// and retry codes are used as given (0 is meaningful for them).
type Config struct {
	// BufferSize is the size of each registered buffer and so the
	// largest SEND either side may send (Ceph: one chunk).
	BufferSize  int
	SendBuffers int // registered send buffers
	RecvBuffers int // registered receive buffers, all kept posted
	// Allocator provides the buffers' memory (a new roce.HeapAllocator
	// if nil).
	Allocator roce.Allocator
	// Registry, if set, publishes the session's send-buffer figures to
	// other goroutines (metrics) while the session lives.
	Registry *Registry

	// QP settings, used by NewQP, RTRAttr and RTSAttr.
	SendQueueDepth int         // send queue and send CQ depth (SendBuffers+1 if 0: the close needs a slot)
	RecvQueueDepth int         // receive queue and receive CQ depth (RecvBuffers if 0)
	PathMTU        int         // DefaultPathMTU if 0
	Access         roce.Access // remote operations the QP accepts (Ceph: remote write)
	MinRNRTimer    uint8       // RNR NAK timer code the responder sends
	Timeout        uint8       // retransmit timeout code
	RetryCount     uint8       // 7: unlimited
	RNRRetry       uint8       // 7: unlimited
	// NoRNR: a request finding no receive posted is dropped unanswered
	// instead of RNR-NAKed (see roce.QPInitAttr.NoRNR).
	NoRNR bool
	// OnEvent, if set, receives the QP's and CQs' asynchronous events.
	OnEvent func(roce.Event)
	// OnCompletion, if set, is called from the endpoint's Poll when
	// either CQ got completions: the session may have data to Recv or
	// buffers to reap.
	OnCompletion func(*roce.CQ)
}

// DefaultConfig returns Ceph's settings: 128 KiB buffers, path MTU 1024,
// RNR timer 0x12 (5.12 ms), timeout 0x12 (about 1.07 s), unlimited
// retries, remote write access.
func DefaultConfig() Config {
	return Config{
		BufferSize:  DefaultBufferSize,
		SendBuffers: DefaultSendBuffers,
		RecvBuffers: DefaultRecvBuffers,
		PathMTU:     DefaultPathMTU,
		Access:      roce.AccessRemoteWrite,
		MinRNRTimer: DefaultMinRNRTimer,
		Timeout:     DefaultTimeout,
		RetryCount:  DefaultRetryCount,
		RNRRetry:    DefaultRNRRetry,
	}
}

func (c Config) withDefaults() (Config, error) {
	orDefault(&c.BufferSize, DefaultBufferSize)
	orDefault(&c.SendBuffers, DefaultSendBuffers)
	orDefault(&c.RecvBuffers, DefaultRecvBuffers)
	orDefault(&c.SendQueueDepth, c.SendBuffers+1)
	orDefault(&c.RecvQueueDepth, c.RecvBuffers)
	orDefault(&c.PathMTU, DefaultPathMTU)
	if c.Allocator == nil {
		c.Allocator = &roce.HeapAllocator{}
	}
	if err := checkBuffers("", c.BufferSize, c.SendBuffers, c.RecvBuffers); err != nil {
		return c, err
	}
	if c.RecvQueueDepth < c.RecvBuffers {
		return c, fmt.Errorf("session: receive queue depth %d below %d receive buffers: %w", c.RecvQueueDepth, c.RecvBuffers, roce.ErrInvalidArgument)
	}
	return c, nil
}

// checkBuffers checks the buffers of a Config or, with what "pool ", of
// a PoolConfig: size bytes each, send and recv of them.
func checkBuffers(what string, size, send, recv int) error {
	switch {
	case size > roce.MaxMessage:
		return fmt.Errorf("session: %sbuffer size %d exceeds %d: %w", what, size, roce.MaxMessage, roce.ErrInvalidArgument)
	case int64(size)*int64(max(send, recv)) > roce.MaxMRSize:
		return fmt.Errorf("session: %sbuffers of %d×%d bytes exceed a memory region: %w", what, max(send, recv), size, roce.ErrInvalidArgument)
	}
	return nil
}

// NewQP creates, on pd, a QP sized by cfg with a send and a receive CQ
// of its own, and moves it to INIT. After the connection exchange, move
// it on with cfg.RTRAttr and cfg.RTSAttr.
func NewQP(pd *roce.PD, cfg Config) (_ *roce.QP, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	var cqs []*roce.CQ
	defer func() {
		if err != nil {
			for _, cq := range cqs {
				cq.Destroy()
			}
			err = fmt.Errorf("session: new qp: %w", err)
		}
	}()
	e := pd.Endpoint()
	for _, depth := range []int{cfg.SendQueueDepth, cfg.RecvQueueDepth} {
		cq, err := e.NewCQ(roce.CQConfig{Depth: depth, OnEvent: cfg.OnEvent, OnCompletion: cfg.OnCompletion})
		if err != nil {
			return nil, err
		}
		cqs = append(cqs, cq)
	}
	qp, err := pd.CreateQP(&roce.QPInitAttr{
		SendCQ: cqs[0], RecvCQ: cqs[1], OnEvent: cfg.OnEvent,
		Cap: roce.QPCap{MaxSendWR: cfg.SendQueueDepth, MaxRecvWR: cfg.RecvQueueDepth}, NoRNR: cfg.NoRNR,
	})
	if err != nil {
		return nil, err
	}
	if err = qp.Modify(&roce.QPAttr{State: roce.QPStateInit, Access: cfg.Access}, roce.QPAttrState|roce.QPAttrAccessFlags); err != nil {
		qp.Destroy()
		return nil, err
	}
	return qp, nil
}

// RTRAttr returns the attributes that move a session QP to RTR towards
// the remote QP destQPN reached through av, expecting rqPSN first.
func (c Config) RTRAttr(av roce.AddressVector, destQPN, rqPSN uint32) (*roce.QPAttr, roce.QPAttrMask) {
	mtu := c.PathMTU
	if mtu <= 0 {
		mtu = DefaultPathMTU
	}
	return &roce.QPAttr{
			State: roce.QPStateRTR, AV: av, PathMTU: mtu, DestQPN: destQPN, RQPSN: rqPSN,
			MinRNRTimer: c.MinRNRTimer, MaxDestRdAtomic: 1,
		}, roce.QPAttrState | roce.QPAttrAV | roce.QPAttrPathMTU | roce.QPAttrDestQPN | roce.QPAttrRQPSN |
			roce.QPAttrMinRNRTimer | roce.QPAttrMaxDestRdAtomic
}

// RTSAttr returns the attributes that move a session QP to RTS, sending
// from sqPSN.
func (c Config) RTSAttr(sqPSN uint32) (*roce.QPAttr, roce.QPAttrMask) {
	return &roce.QPAttr{
			State: roce.QPStateRTS, SQPSN: sqPSN, Timeout: c.Timeout,
			RetryCnt: c.RetryCount, RNRRetry: c.RNRRetry, MaxRdAtomic: 1,
		}, roce.QPAttrState | roce.QPAttrSQPSN | roce.QPAttrTimeout | roce.QPAttrRetryCnt |
			roce.QPAttrRNRRetry | roce.QPAttrMaxRdAtomic
}

// Session is a flow-controlled byte stream over a QP with Ceph
// async+rdma framing: data travels in SENDs of at most one registered
// buffer, and a zero-length SEND closes the stream. Send and Recv never
// block; the endpoint's Poll moves the data. Like the QP, a Session
// belongs to the goroutine that polls its endpoint; only Stats may be
// called from any goroutine.
//
// The session owns its QP's receive queue and both CQs: nothing else may
// post receives on the QP or poll the CQs. A session from a Pool (shared
// mode) takes its buffers from the pool instead, and the pool owns the
// SRQ and the CQs.
type Session struct {
	qp   *roce.QP
	cfg  Config
	pool *Pool // shared mode
	buffers

	// Send buffers not posted, by index; in shared mode, the pool's
	// buffers this session has posted.
	free  []int32
	ready []readyBuf
	rdHd  int
	rdN   int
	// lent counts the ready buffers from rdHd on that Lend handed out
	// and Return has not taken back: still the session's, not reposted.
	lent int

	// resv are the send buffers Reserve handed out, oldest first from
	// resvHd, not yet posted or given back.
	resv   []int32
	resvHd int

	wcs [32]roce.WorkCompletion
	sge [1]roce.SGE
	swr roce.SendWR
	rwr roce.RecvWR

	closed   bool // the zero-length SEND was posted
	eof      bool // the peer's zero-length SEND was read
	flushed  bool // a receive was flushed: the QP failed after what is ready
	flushWC  roce.WorkCompletion
	released bool
	err      error

	cnt counters // read by Stats and the Registry on other goroutines
}

// readyBuf is a completed receive buffer not yet read out.
type readyBuf struct {
	idx int
	off int
	n   int
	fin bool
}

// New registers cfg's send and receive buffers on the QP's protection
// domain and posts all receive buffers. The QP must be in INIT, RTR or
// RTS with no receives posted, have room for cfg.RecvBuffers receives,
// and CQs deep enough for its queues.
func New(qp *roce.QP, cfg Config) (*Session, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	qc := qp.Cap()
	switch st := qp.State(); {
	case st != roce.QPStateInit && st != roce.QPStateRTR && st != roce.QPStateRTS:
		return nil, fmt.Errorf("session: new on qp %d in %v: %w", qp.QPN(), st, roce.ErrInvalidState)
	case qp.RecvQueueLen() != 0:
		return nil, fmt.Errorf("session: new on qp %d: %d receives already posted: %w", qp.QPN(), qp.RecvQueueLen(), roce.ErrInvalidState)
	case qc.MaxRecvWR < cfg.RecvBuffers:
		return nil, fmt.Errorf("session: new on qp %d: receive queue of %d for %d buffers: %w", qp.QPN(), qc.MaxRecvWR, cfg.RecvBuffers, roce.ErrInvalidArgument)
	case qp.RecvCQ().Cap() < cfg.RecvBuffers || qp.SendCQ().Cap() < qc.MaxSendWR:
		return nil, fmt.Errorf("session: new on qp %d: cq depths %d/%d below queue depths %d/%d: %w",
			qp.QPN(), qp.SendCQ().Cap(), qp.RecvCQ().Cap(), qc.MaxSendWR, cfg.RecvBuffers, roce.ErrInvalidArgument)
	}
	s := &Session{
		qp:    qp,
		cfg:   cfg,
		free:  make([]int32, 0, cfg.SendBuffers),
		ready: make([]readyBuf, cfg.RecvBuffers),
	}
	if err := s.setup(); err != nil {
		s.teardown()
		return nil, fmt.Errorf("session: new on qp %d: %w", qp.QPN(), err)
	}
	s.publish()
	return s, nil
}

func (s *Session) setup() error {
	c := &s.cfg
	if err := s.allocate(c.Allocator, s.qp.PD(), c.SendBuffers*c.BufferSize, c.RecvBuffers*c.BufferSize); err != nil {
		return err
	}
	for i := c.SendBuffers - 1; i >= 0; i-- {
		s.free = append(s.free, int32(i))
	}
	for i := range c.RecvBuffers {
		if err := s.postRecv(i); err != nil {
			return err
		}
	}
	return nil
}

func (s *Session) teardown() {
	s.release(s.cfg.Allocator)
	s.unpublish()
}

// QP returns the session's queue pair.
func (s *Session) QP() *roce.QP { return s.qp }

// Err returns the error that failed the session, if any.
func (s *Session) Err() error { return s.err }

// SendBuffersInUse returns the send buffers posted and not yet reaped.
func (s *Session) SendBuffersInUse() int {
	if s.pool != nil {
		return len(s.free)
	}
	return s.cfg.SendBuffers - len(s.free)
}

// Send sends as much of p as fits in the free send buffers without
// blocking and returns how much that was. When the free buffers hold
// less than what is left of p, it first reaps the send CQ to release the
// buffers of completed SENDs. Each buffer carries one SEND. It returns
// 0 and an error wrapping roce.ErrWouldBlock when nothing could be sent.
func (s *Session) Send(p []byte) (int, error) {
	switch {
	case s.err != nil:
		return 0, s.err
	case s.closed:
		return 0, fmt.Errorf("session: qp %d: send: %w", s.qp.QPN(), ErrClosed)
	case len(p) == 0:
		return 0, nil
	case s.qp.State() == roce.QPStateError:
		return 0, s.fail(s.qpFailed())
	}
	bs := s.cfg.BufferSize
	sent := 0
	for sent < len(p) {
		if s.fits() < len(p)-sent {
			if err := s.reap(); err != nil {
				return sent, err
			}
		}
		if s.freeBufs() == 0 || s.qp.SendQueueFree() == 0 {
			break
		}
		idx := s.peekBuf()
		off := int(idx) * bs
		n := copy(s.sendMem[off:off+bs], p[sent:])
		if err := s.postSend(uint64(idx), off, n); err != nil {
			return sent, s.fail(err)
		}
		s.popBuf()
		sent += n
	}
	s.cnt.sendBufsInUse.Store(int64(s.SendBuffersInUse()))
	if sent == 0 {
		if s.pool != nil && len(s.pool.free) == 0 {
			s.pool.sendStarved++
		}
		return 0, roce.ErrWouldBlock
	}
	return sent, nil
}

// Reserve appends to bufs, for up to n SENDs, a whole free send buffer
// each, and returns bufs: the caller fills them (a socket read straight
// into registered memory, no copy) and sends or gives back each, oldest
// first, with PostReserved. They are taken from the free buffers and
// the send queue's room as Send's would be, so that sends stay bounded
// by the buffers the send CQ frees. It reaps the send CQ when none is
// free, and returns bufs unchanged with roce.ErrWouldBlock when none is.
func (s *Session) Reserve(bufs [][]byte, n int) ([][]byte, error) {
	switch {
	case s.err != nil:
		return bufs, s.err
	case s.closed:
		return bufs, fmt.Errorf("session: qp %d: reserve: %w", s.qp.QPN(), ErrClosed)
	case s.qp.State() == roce.QPStateError:
		return bufs, s.fail(s.qpFailed())
	}
	room := func() int { return min(s.freeBufs(), s.qp.SendQueueFree()-s.Reserved()) }
	if room() < n {
		if err := s.reap(); err != nil {
			return bufs, err
		}
	}
	if s.resvHd == len(s.resv) {
		s.resv, s.resvHd = s.resv[:0], 0
	}
	bs := s.cfg.BufferSize
	k := min(n, room())
	for range k {
		idx := s.peekBuf()
		s.popBuf()
		s.resv = append(s.resv, idx)
		off := int(idx) * bs
		bufs = append(bufs, s.sendMem[off:off+bs])
	}
	s.cnt.sendBufsInUse.Store(int64(s.SendBuffersInUse()))
	if k == 0 {
		if s.pool != nil && len(s.pool.free) == 0 {
			s.pool.sendStarved++
		}
		return bufs, roce.ErrWouldBlock
	}
	return bufs, nil
}

// Reserved returns the send buffers reserved and not yet posted or
// given back.
func (s *Session) Reserved() int { return len(s.resv) - s.resvHd }

// PostReserved sends the first n bytes of the oldest reserved buffer as
// one SEND or, with n 0, gives it back unsent.
func (s *Session) PostReserved(n int) error {
	switch {
	case s.Reserved() == 0:
		return fmt.Errorf("session: qp %d: post of a reserved buffer, none reserved: %w", s.qp.QPN(), roce.ErrInvalidArgument)
	case n < 0 || n > s.cfg.BufferSize:
		return fmt.Errorf("session: qp %d: post of %d bytes from a %d-byte buffer: %w", s.qp.QPN(), n, s.cfg.BufferSize, roce.ErrInvalidArgument)
	}
	idx := s.resv[s.resvHd]
	s.resvHd++
	if n == 0 {
		s.unreserve(idx)
		return nil
	}
	if s.err != nil {
		s.unreserve(idx)
		return s.err
	}
	if err := s.postSend(uint64(idx), int(idx)*s.cfg.BufferSize, n); err != nil {
		s.unreserve(idx)
		return s.fail(err)
	}
	return nil
}

// unreserve gives a reserved send buffer back to the free ones.
func (s *Session) unreserve(idx int32) {
	if p := s.pool; p != nil {
		if i := indexOf(s.free, idx); i >= 0 {
			s.free[i] = s.free[len(s.free)-1]
			s.free = s.free[:len(s.free)-1]
			p.free = append(p.free, idx)
		}
	} else {
		s.free = append(s.free, idx)
	}
	s.cnt.sendBufsInUse.Store(int64(s.SendBuffersInUse()))
}

// Unacknowledged reaps the send CQ and returns how many SENDs the peer
// has not acknowledged yet: 0 means everything sent has arrived.
func (s *Session) Unacknowledged() (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if err := s.reap(); err != nil {
		return 0, err
	}
	return s.SendBuffersInUse(), nil
}

// fits returns how many bytes the free send buffers and queue slots take.
func (s *Session) fits() int {
	return min(s.freeBufs(), s.qp.SendQueueFree()) * s.cfg.BufferSize
}

// freeBufs returns the send buffers the session may post now: its own
// free ones, or in shared mode the pool's free ones up to its cap.
func (s *Session) freeBufs() int {
	if s.pool != nil {
		return min(s.cfg.SendBuffers-len(s.free), len(s.pool.free))
	}
	return len(s.free)
}

// peekBuf returns the send buffer popBuf takes next.
func (s *Session) peekBuf() int32 {
	if s.pool != nil {
		return s.pool.free[len(s.pool.free)-1]
	}
	return s.free[len(s.free)-1]
}

// popBuf takes the send buffer peekBuf returned, now posted.
func (s *Session) popBuf() {
	if p := s.pool; p != nil {
		s.free = append(s.free, p.free[len(p.free)-1])
		p.free = p.free[:len(p.free)-1]
		return
	}
	s.free = s.free[:len(s.free)-1]
}

// sendBufs and recvBufs return how many buffers WRIDs index.
func (s *Session) sendBufs() int {
	if s.pool != nil {
		return s.pool.cfg.SendBuffers
	}
	return s.cfg.SendBuffers
}

func (s *Session) recvBufs() int {
	if s.pool != nil {
		return s.pool.cfg.RecvBuffers
	}
	return s.cfg.RecvBuffers
}

func (s *Session) postSend(id uint64, off, n int) error {
	s.sge[0] = s.sendMR.SGE(off, n)
	s.swr = roce.SendWR{ID: id, Opcode: roce.WRSend, Flags: roce.SendSignaled, SGList: s.sge[:]}
	if n == 0 {
		s.swr.SGList = nil
	}
	return s.qp.PostSend(&s.swr)
}

func (s *Session) postRecv(idx int) error {
	bs := s.cfg.BufferSize
	s.sge[0] = s.recvMR.SGE(idx*bs, bs)
	s.rwr = roce.RecvWR{ID: uint64(idx), SGList: s.sge[:]}
	return s.qp.PostRecv(&s.rwr)
}

// reap polls the send CQ and releases the buffers of completed SENDs.
func (s *Session) reap() error {
	if s.pool != nil {
		s.pool.poll()
		s.cnt.sendBufsInUse.Store(int64(s.SendBuffersInUse()))
		return s.err
	}
	cq := s.qp.SendCQ()
	for {
		n := cq.Poll(s.wcs[:])
		for i := range n {
			if err := s.completeSend(&s.wcs[i]); err != nil {
				return err
			}
		}
		if n < len(s.wcs) {
			s.cnt.sendBufsInUse.Store(int64(s.SendBuffersInUse()))
			return nil
		}
	}
}

// completeSend releases the buffer of a completed SEND. In shared mode
// the buffer goes back to the pool even when the completion fails the
// session.
func (s *Session) completeSend(wc *roce.WorkCompletion) error {
	if wc.WRID == finWRID {
		return s.checkWCFail(wc, "send", roce.WCSend)
	}
	if wc.WRID >= uint64(s.sendBufs()) {
		return s.fail(&CompletionError{QPN: s.qp.QPN(), Queue: "send", WC: *wc, Reason: "unknown work request id"})
	}
	if p := s.pool; p != nil {
		i := indexOf(s.free, int32(wc.WRID))
		if i < 0 {
			return s.fail(&CompletionError{QPN: s.qp.QPN(), Queue: "send", WC: *wc, Reason: "buffer not posted"})
		}
		s.free[i] = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		p.free = append(p.free, int32(wc.WRID))
		return s.checkWCFail(wc, "send", roce.WCSend)
	}
	if err := s.checkWCFail(wc, "send", roce.WCSend); err != nil {
		return err
	}
	s.free = append(s.free, int32(wc.WRID))
	return nil
}

func (s *Session) checkWCFail(wc *roce.WorkCompletion, queue string, op roce.WCOpcode) error {
	if err := s.checkWC(wc, queue, op); err != nil {
		return s.fail(err)
	}
	return nil
}

func indexOf(s []int32, v int32) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// checkWC verifies that wc is a successful completion of op on the
// session's QP.
func (s *Session) checkWC(wc *roce.WorkCompletion, queue string, op roce.WCOpcode) error {
	qpn := s.qp.QPN()
	switch {
	case wc.QPN != qpn:
		return &CompletionError{QPN: qpn, Queue: queue, WC: *wc, Reason: fmt.Sprintf("for qp %d", wc.QPN)}
	case wc.Status != roce.WCSuccess:
		return &CompletionError{QPN: qpn, Queue: queue, WC: *wc, Reason: "status " + wc.Status.String()}
	case wc.Opcode != op:
		return &CompletionError{QPN: qpn, Queue: queue, WC: *wc, Reason: fmt.Sprintf("opcode %v, want %v", wc.Opcode, op)}
	}
	return nil
}

// Recv copies received data into p and returns how much. Buffers read
// out completely are posted again at once. With nothing received it
// polls the receive CQ, checking every completion; one that is not a
// successful SEND on this QP within the buffer size fails the session.
// It returns 0 and roce.ErrWouldBlock when no data is available, and
// io.EOF once the data before the peer's close has been read. When the
// QP has failed (a peer's DREQ moves it to ERROR too), the data that
// arrived before is still returned, then the error.
func (s *Session) Recv(p []byte) (int, error) {
	switch {
	case s.err != nil:
		return 0, s.err
	case s.eof:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	}
	bs := s.cfg.BufferSize
	n := 0
	for n < len(p) {
		if s.rdN == 0 {
			if err := s.pollRecv(); err != nil {
				return n, err
			}
			if s.rdN == 0 {
				if s.flushed && n == 0 {
					return 0, s.fail(s.checkWC(&s.flushWC, "receive", roce.WCRecv))
				}
				if s.pool != nil && n == 0 && s.qp.State() == roce.QPStateError {
					// The QP took no receive from the SRQ to flush.
					return 0, s.fail(s.qpFailed())
				}
				break
			}
		}
		rb := &s.ready[s.rdHd]
		if rb.fin {
			if n > 0 {
				break // return the data first, EOF next time
			}
			s.eof = true
			s.popReady()
			return 0, io.EOF
		}
		base := rb.idx * bs
		k := copy(p[n:], s.recvMem[base+rb.off:base+rb.n])
		n += k
		rb.off += k
		if rb.off == rb.n {
			if err := s.popReady(); err != nil {
				return n, err
			}
		}
	}
	if n == 0 {
		return 0, roce.ErrWouldBlock
	}
	return n, nil
}

// Lend appends to bufs a view of each received buffer not yet read
// or lent, in order, and returns bufs: the caller writes them elsewhere
// (a socket, with one gathered write) without copying them out. The
// buffers stay the session's and are not reposted, so they count
// against its receive cap as unread data does, until Return takes them
// back; a view must not be used after its Return or the session's
// Release. Recv must not be called while buffers are lent. Like Recv it
// polls the receive CQ when nothing new is ready, and returns bufs
// unchanged with roce.ErrWouldBlock when nothing new is there, io.EOF
// once the data before the peer's close has been lent and returned,
// and the session's error once the QP failed and what arrived before is
// lent and returned.
func (s *Session) Lend(bufs [][]byte) ([][]byte, error) {
	switch {
	case s.err != nil:
		return bufs, s.err
	case s.eof:
		return bufs, io.EOF
	}
	if s.rdN == s.lent {
		if err := s.pollRecv(); err != nil {
			return bufs, err
		}
	}
	bs := s.cfg.BufferSize
	k := len(bufs)
	for s.lent < s.rdN {
		rb := &s.ready[(s.rdHd+s.lent)%len(s.ready)]
		if rb.fin {
			if s.lent > 0 {
				break // EOF once the data before it is returned
			}
			s.eof = true
			s.popReady()
			return bufs, io.EOF
		}
		base := rb.idx * bs
		bufs = append(bufs, s.recvMem[base+rb.off:base+rb.n])
		s.lent++
	}
	if len(bufs) > k {
		return bufs, nil
	}
	if s.lent == 0 {
		if s.flushed {
			return bufs, s.fail(s.checkWC(&s.flushWC, "receive", roce.WCRecv))
		}
		if s.pool != nil && s.qp.State() == roce.QPStateError {
			return bufs, s.fail(s.qpFailed())
		}
	}
	return bufs, roce.ErrWouldBlock
}

// Return takes back the k oldest buffers Lend handed out and posts them
// again: their data has been written out.
func (s *Session) Return(k int) error {
	if k > s.lent {
		return fmt.Errorf("session: qp %d: return of %d buffers, %d lent: %w", s.qp.QPN(), k, s.lent, roce.ErrInvalidArgument)
	}
	for range k {
		s.lent--
		if err := s.popReady(); err != nil {
			return err
		}
	}
	return nil
}

// Lent returns the receive buffers lent and not returned.
func (s *Session) Lent() int { return s.lent }

// Readable reports whether Recv would return data, EOF or an error
// without polling the CQ: in shared mode, after the pool's Poll, whether
// Recv has anything to say at all.
func (s *Session) Readable() bool {
	return s.rdN > s.lent || s.err != nil || s.eof || s.flushed || s.pool != nil && s.qp.State() == roce.QPStateError
}

// Buffered returns the received bytes Recv or Lend can return without
// polling: those not lent.
func (s *Session) Buffered() int {
	t := 0
	for i := s.lent; i < s.rdN; i++ {
		rb := &s.ready[(s.rdHd+i)%len(s.ready)]
		t += rb.n - rb.off
	}
	return t
}

// popReady retires the head ready buffer and posts it again.
func (s *Session) popReady() error {
	idx := s.ready[s.rdHd].idx
	s.rdHd = (s.rdHd + 1) % len(s.ready)
	s.rdN--
	if s.pool != nil {
		s.pool.repost(idx)
		s.qp.ReleaseSRQ(1)
		return nil
	}
	if s.flushed || s.qp.State() == roce.QPStateError {
		return nil // nothing more will arrive
	}
	if err := s.postRecv(idx); err != nil {
		return s.fail(err)
	}
	return nil
}

// pollRecv moves receive completions into the ready ring.
func (s *Session) pollRecv() error {
	if s.pool != nil {
		s.pool.poll()
		return s.err
	}
	room := min(len(s.ready)-s.rdN, len(s.wcs))
	k := s.qp.RecvCQ().Poll(s.wcs[:room])
	for i := range k {
		if err := s.deliverRecv(&s.wcs[i]); err != nil {
			return err
		}
	}
	return nil
}

// deliverRecv checks a receive completion and queues its buffer for
// Recv. In shared mode a buffer that is not queued goes back to the SRQ.
func (s *Session) deliverRecv(wc *roce.WorkCompletion) error {
	shared := s.pool != nil
	qpn := s.qp.QPN()
	bad := func(reason string) error {
		if shared && wc.WRID < uint64(s.recvBufs()) {
			s.pool.repost(int(wc.WRID))
			s.qp.ReleaseSRQ(1)
		}
		return s.fail(&CompletionError{QPN: qpn, Queue: "receive", WC: *wc, Reason: reason})
	}
	if wc.Status == roce.WCWRFlushErr && wc.QPN == qpn {
		// The QP failed; what completed before stays readable.
		if !s.flushed {
			s.flushed, s.flushWC = true, *wc
		}
		if shared && wc.WRID < uint64(s.recvBufs()) {
			s.pool.repost(int(wc.WRID))
			s.qp.ReleaseSRQ(1)
		}
		return nil
	}
	if err := s.checkWC(wc, "receive", roce.WCRecv); err != nil {
		return bad(err.(*CompletionError).Reason)
	}
	switch {
	case wc.WRID >= uint64(s.recvBufs()):
		return bad("unknown work request id")
	case int(wc.ByteLen) > s.cfg.BufferSize:
		return bad(fmt.Sprintf("length %d exceeds the %d-byte buffer", wc.ByteLen, s.cfg.BufferSize))
	case s.rdN > 0 && s.ready[(s.rdHd+s.rdN-1)%len(s.ready)].fin:
		return bad("data after the peer closed")
	case s.rdN == len(s.ready) && (!shared || len(s.ready) >= s.pool.cfg.RecvBuffers):
		// The QP's receive queue or SRQ limit was not kept.
		return bad("more buffers than the session's cap")
	case s.rdN == len(s.ready):
		s.growReady() // borrowing from the pool beyond the cap
	}
	s.ready[(s.rdHd+s.rdN)%len(s.ready)] = readyBuf{idx: int(wc.WRID), n: int(wc.ByteLen), fin: wc.ByteLen == 0}
	s.rdN++
	return nil
}

// growReady doubles the ready ring, up to the pool's receive buffers,
// for a session that borrows beyond its cap (see Pool): once per
// doubling in the session's life, not per message.
func (s *Session) growReady() {
	r := make([]readyBuf, min(2*len(s.ready), s.pool.cfg.RecvBuffers))
	for i := range s.rdN {
		r[i] = s.ready[(s.rdHd+i)%len(s.ready)]
	}
	s.ready, s.rdHd = r, 0
}

// Close closes the session for sending: it posts the zero-length SEND
// that tells the peer the stream ended, after the data already sent.
// Recv keeps working until the peer closes. It returns an error wrapping
// roce.ErrWouldBlock when the send queue is full; call it again after
// Poll.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	if s.qp.State() == roce.QPStateError {
		return s.fail(s.qpFailed())
	}
	if s.qp.SendQueueFree() == 0 {
		if err := s.reap(); err != nil {
			return err
		}
		if s.qp.SendQueueFree() == 0 {
			return fmt.Errorf("session: qp %d: close: %w", s.qp.QPN(), roce.ErrWouldBlock)
		}
	}
	if err := s.postSend(finWRID, 0, 0); err != nil {
		return s.fail(err)
	}
	s.closed = true
	return nil
}

// Release deregisters and frees the session's buffers, or gives them
// back to its pool. The QP must be in ERROR or RESET (or destroyed, which
// leaves it in RESET) first, so that nothing still reads or writes them.
func (s *Session) Release() error {
	if s.released {
		return nil
	}
	if st := s.qp.State(); st != roce.QPStateError && st != roce.QPStateReset {
		return fmt.Errorf("session: release on qp %d in %v: %w", s.qp.QPN(), st, roce.ErrInvalidState)
	}
	if s.pool != nil {
		s.releaseShared()
	} else {
		s.teardown()
	}
	s.released = true
	if s.err == nil {
		s.err = fmt.Errorf("session: qp %d: released: %w", s.qp.QPN(), ErrClosed)
	}
	return nil
}

// qpFailed describes why the session's QP is in ERROR.
func (s *Session) qpFailed() error {
	cause := s.qp.Err()
	if cause == nil {
		cause = roce.ErrFlushed
	}
	return fmt.Errorf("session: qp %d in ERROR: %w", s.qp.QPN(), cause)
}

func (s *Session) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// releaseShared gives the session's buffers back to its pool: the flushed
// ones through the pool's CQs, the unread ones to the SRQ, and the send
// buffers a reset discarded without completions to the free list.
func (s *Session) releaseShared() {
	p := s.pool
	p.poll()
	// Lent buffers too: the caller is done with them by now (Lend).
	s.lent = 0
	for s.rdN > 0 {
		p.repost(s.ready[s.rdHd].idx)
		s.rdHd = (s.rdHd + 1) % len(s.ready)
		s.rdN--
	}
	p.free = append(p.free, s.free...)
	s.free = s.free[:0]
	delete(p.sessions, s.qp.QPN())
	s.qp.SetSRQLimit(0)
	s.qp.ReleaseSRQ(s.qp.SRQHeld())
	s.unpublish()
}

// orDefault sets *v to d when it is not positive: not set.
func orDefault(v *int, d int) {
	if *v <= 0 {
		*v = d
	}
}
