package app

import (
	"fmt"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// CMATose defaults, those of librdmacm's cmatose.
const (
	DefaultToseCount = 10
	DefaultToseSize  = 100
	// maxToseSendDepth bounds the send queue: sends are posted as slots
	// free up, so the queue need not hold all Count messages.
	maxToseSendDepth = 128
)

// CMAToseConfig configures a CMATose server. Count and Size must match
// the client's -C and -S, as they must between two cmatose processes:
// the protocol carries neither.
type CMAToseConfig struct {
	Count int // messages each way (cmatose -C; DefaultToseCount if 0)
	Size  int // bytes in each message sent (cmatose -S; DefaultToseSize if 0)
	// RecvSize is the largest message accepted from the client (Size if 0).
	RecvSize int

	Allocator    roce.Allocator // buffer memory (a HeapAllocator if nil)
	MaxConns     int            // connections at once (DefaultMaxConns if 0)
	StallTimeout time.Duration  // fail a connection that makes no progress this long (0: never)
}

// CMATose plays the server half of librdmacm's cmatose (ucmatose) test.
// A cmatose client posts Count receives of Size bytes, connects, and
// waits for Count messages before it sends Count replies of its own; it
// then waits for the server to disconnect. So once the connection is
// established CMATose sends Count messages of Size bytes, counts Count
// replies into receives posted at accept, and reports the connection
// done, for the daemon to disconnect. An echo cannot serve this client:
// it sends nothing until the server has.
//
// The payload is a fixed byte pattern; cmatose checks only that every
// work request completes.
type CMATose struct {
	cfg     CMAToseConfig
	*server // Established, Close, Poll, Stats, Shutdown
}

var _ Server = (*CMATose)(nil)

// NewCMATose returns a CMATose server for connections on ep.
func NewCMATose(ep *roce.Endpoint, cfg CMAToseConfig) (*CMATose, error) {
	orDefault(&cfg.Count, DefaultToseCount)
	orDefault(&cfg.Size, DefaultToseSize)
	orDefault(&cfg.RecvSize, cfg.Size)
	switch {
	case cfg.Count > roce.MaxQueueDepth:
		return nil, fmt.Errorf("app: new cmatose: count %d exceeds %d: %w", cfg.Count, roce.MaxQueueDepth, roce.ErrInvalidArgument)
	case int64(cfg.Size)+int64(cfg.RecvSize) > roce.MaxMessage:
		return nil, fmt.Errorf("app: new cmatose: sizes %d/%d too large: %w", cfg.Size, cfg.RecvSize, roce.ErrInvalidArgument)
	}
	srv, err := newServer("cmatose", ep, cfg.Allocator, cfg.MaxConns, cfg.StallTimeout)
	if err != nil {
		return nil, err
	}
	return &CMATose{cfg: cfg, server: srv}, nil
}

// Accept implements Service.
func (t *CMATose) Accept(done func(error)) (*roce.QP, error) {
	cfg := &t.cfg
	qc := roce.QPCap{MaxSendWR: min(cfg.Count, maxToseSendDepth), MaxRecvWR: cfg.Count}
	return t.server.accept(done, cfg.Size+cfg.RecvSize, qc, func(res *qpResources) (protocol, error) {
		c := &toseConn{res: res, cfg: cfg, cnt: &t.server.cnt}
		for i := range res.mem[:cfg.Size] {
			res.mem[i] = byte(i)
		}
		// Every receive lands in the same buffer, as in cmatose: the
		// content is never looked at.
		c.sge[0] = res.mr.SGE(cfg.Size, cfg.RecvSize)
		c.rwr = roce.RecvWR{SGList: c.sge[:]}
		for i := range cfg.Count {
			c.rwr.ID = uint64(i)
			if err := res.qp.PostRecv(&c.rwr); err != nil {
				return nil, err
			}
		}
		return c, nil
	})
}

type toseConn struct {
	res     *qpResources
	cfg     *CMAToseConfig
	cnt     *counters
	started bool
	posted  int // sends posted
	sent    int // sends completed
	recvd   int // replies received

	wcs [16]roce.WorkCompletion
	sge [1]roce.SGE
	swr roce.SendWR
	rwr roce.RecvWR
}

func (c *toseConn) start() error {
	c.started = true
	return nil
}

func (c *toseConn) busy() bool { return c.started && (c.sent < c.posted || c.recvd < c.cfg.Count) }

// drain takes the completions on cq, which must be successful ones of
// op (named what in the error), counting them in *done and their bytes
// with count.
func (c *toseConn) drain(cq *roce.CQ, op roce.WCOpcode, what string, done *int, count func(n int)) (int, error) {
	return drain(cq, c.wcs[:], func(wc *roce.WorkCompletion) error {
		if wc.Status != roce.WCSuccess || wc.Opcode != op {
			return wcError(c.res.qp, wc, what)
		}
		*done++
		count(int(wc.ByteLen))
		return nil
	})
}

func (c *toseConn) poll(time.Time) (int, bool, error) {
	qp := c.res.qp
	work, err := c.drain(c.res.scq, roce.WCSend, "send", &c.sent, c.cnt.out)
	if err != nil {
		return work, false, err
	}
	n, err := c.drain(c.res.rcq, roce.WCRecv, "receive", &c.recvd, c.cnt.in)
	if work += n; err != nil {
		return work, false, err
	}
	if c.started && qp.State() == roce.QPStateRTS {
		c.sge[0] = c.res.mr.SGE(0, c.cfg.Size)
		c.swr = roce.SendWR{Opcode: roce.WRSend, Flags: roce.SendSignaled, SGList: c.sge[:]}
		for c.posted < c.cfg.Count && qp.SendQueueFree() > 0 {
			c.swr.ID = uint64(c.posted)
			if err := qp.PostSend(&c.swr); err != nil {
				return work, false, err
			}
			c.posted++
			work++
		}
	}
	return work, c.sent == c.cfg.Count && c.recvd == c.cfg.Count, nil
}
