package app

import (
	"fmt"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// RawEcho defaults.
const (
	DefaultMessageSize = 64 << 10
	DefaultDepth       = 16
)

// RawConfig configures a RawEcho.
type RawConfig struct {
	// MessageSize is the largest message accepted: the size of each
	// receive buffer (DefaultMessageSize if 0). A larger SEND fails the
	// connection with a length error, as it would on any verbs server.
	MessageSize int
	// Depth is the number of receive buffers kept posted, and so the
	// messages a peer may have outstanding before it sees RNR NAKs
	// (DefaultDepth if 0).
	Depth int
	// Discard drops messages instead of echoing them.
	Discard bool

	Allocator    roce.Allocator // buffer memory (a HeapAllocator if nil)
	MaxConns     int            // connections at once (DefaultMaxConns if 0)
	StallTimeout time.Duration  // fail a connection whose echoes make no progress this long (0: never)
}

// RawEcho is a QP-level echo (or discard) server: each message received
// is sent back as one SEND of the same length, with the same immediate
// data if it carried one, from the very buffer it arrived in. A buffer is
// posted for receive again when its echo completes, so a peer that sends
// faster than it takes echoes back runs into RNR NAKs: the back-pressure
// of verbs. It serves librdmacm's rdma_client (16 bytes each way) and
// roce-ping.
type RawEcho struct {
	cfg     RawConfig
	*server // Established, Close, Poll, Stats, Shutdown
}

var _ Server = (*RawEcho)(nil)

// NewRawEcho returns a RawEcho serving connections on ep.
func NewRawEcho(ep *roce.Endpoint, cfg RawConfig) (*RawEcho, error) {
	orDefault(&cfg.MessageSize, DefaultMessageSize)
	orDefault(&cfg.Depth, DefaultDepth)
	name := "rawecho"
	if cfg.Discard {
		name = "rawdiscard"
	}
	switch {
	case cfg.Depth > roce.MaxQueueDepth:
		return nil, fmt.Errorf("app: new %s: depth %d exceeds %d: %w", name, cfg.Depth, roce.MaxQueueDepth, roce.ErrInvalidArgument)
	case int64(cfg.MessageSize)*int64(cfg.Depth) > roce.MaxMessage:
		return nil, fmt.Errorf("app: new %s: %d buffers of %d bytes too large: %w", name, cfg.Depth, cfg.MessageSize, roce.ErrInvalidArgument)
	}
	srv, err := newServer(name, ep, cfg.Allocator, cfg.MaxConns, cfg.StallTimeout)
	if err != nil {
		return nil, err
	}
	return &RawEcho{cfg: cfg, server: srv}, nil
}

// Accept implements Service.
func (e *RawEcho) Accept(done func(error)) (*roce.QP, error) {
	d := e.cfg.Depth
	return e.server.accept(done, d*e.cfg.MessageSize, roce.QPCap{MaxSendWR: d, MaxRecvWR: d},
		func(res *qpResources) (protocol, error) {
			c := &rawConn{res: res, size: e.cfg.MessageSize, discard: e.cfg.Discard, cnt: &e.server.cnt, pend: make([]rawMsg, d)}
			for i := range d {
				if err := c.postRecv(i); err != nil {
					return nil, err
				}
			}
			return c, nil
		})
}

// rawMsg is a received message waiting for its echo to be posted.
type rawMsg struct {
	idx     int
	n       uint32
	imm     uint32
	withImm bool
}

// rawConn is one RawEcho connection. Buffer i of the region is receive
// buffer i; its echo is sent from it with work request ID i.
type rawConn struct {
	res     *qpResources
	size    int
	discard bool
	cnt     *counters

	pend        []rawMsg // ring of messages to echo, one slot per buffer
	pHead, pLen int

	wcs [16]roce.WorkCompletion
	sge [1]roce.SGE
	swr roce.SendWR
	rwr roce.RecvWR
}

func (c *rawConn) postRecv(i int) error {
	c.sge[0] = c.res.mr.SGE(i*c.size, c.size)
	c.rwr = roce.RecvWR{ID: uint64(i), SGList: c.sge[:]}
	return c.res.qp.PostRecv(&c.rwr)
}

func (c *rawConn) start() error { return nil }

func (c *rawConn) busy() bool {
	qp := c.res.qp
	return c.pLen > 0 || qp.SendQueueFree() < qp.Cap().MaxSendWR
}

func (c *rawConn) poll(time.Time) (int, bool, error) {
	qp := c.res.qp
	// Completed echoes free their buffers for new receives.
	work, err := drain(c.res.scq, c.wcs[:], func(wc *roce.WorkCompletion) error {
		if wc.Status != roce.WCSuccess || wc.Opcode != roce.WCSend || wc.WRID >= uint64(len(c.pend)) {
			return wcError(qp, wc, "echo")
		}
		if err := c.postRecv(int(wc.WRID)); err != nil {
			return err
		}
		c.cnt.out(int(wc.ByteLen))
		return nil
	})
	if err != nil {
		return work, false, err
	}
	n, err := drain(c.res.rcq, c.wcs[:], func(wc *roce.WorkCompletion) error {
		if wc.Status != roce.WCSuccess || wc.Opcode != roce.WCRecv || wc.WRID >= uint64(len(c.pend)) {
			return wcError(qp, wc, "receive")
		}
		c.cnt.in(int(wc.ByteLen))
		if c.discard {
			return c.postRecv(int(wc.WRID))
		}
		c.pend[(c.pHead+c.pLen)%len(c.pend)] = rawMsg{
			idx: int(wc.WRID), n: wc.ByteLen, imm: wc.Imm, withImm: wc.Flags&roce.WCWithImm != 0,
		}
		c.pLen++
		return nil
	})
	if work += n; err != nil {
		return work, false, err
	}
	for c.pLen > 0 && qp.State() == roce.QPStateRTS && qp.SendQueueFree() > 0 {
		m := &c.pend[c.pHead]
		c.sge[0] = c.res.mr.SGE(m.idx*c.size, int(m.n))
		c.swr = roce.SendWR{ID: uint64(m.idx), Opcode: roce.WRSend, Flags: roce.SendSignaled, SGList: c.sge[:]}
		if m.n == 0 {
			c.swr.SGList = nil
		}
		if m.withImm {
			c.swr.Opcode, c.swr.Imm = roce.WRSendWithImm, m.imm
		}
		if err := qp.PostSend(&c.swr); err != nil {
			return work, false, err
		}
		c.pHead = (c.pHead + 1) % len(c.pend)
		c.pLen--
		work++
	}
	return work, false, nil
}
