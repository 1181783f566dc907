package ping

import (
	"errors"
	"fmt"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// setupStream creates the stream's QP and session: the flow-controlled
// byte stream of Ceph's RDMA messenger, sized by cfg.Session.
func (c *Client) setupStream() error {
	sc := c.cfg.Session
	sc.Allocator = c.cfg.Allocator
	pd := c.m.Endpoint().NewPD()
	qp, err := session.NewQP(pd, sc)
	if err != nil {
		pd.Dealloc()
		return fmt.Errorf("ping: stream qp: %w", err)
	}
	s, err := session.New(qp, sc)
	if err != nil {
		destroySessionQP(qp)
		pd.Dealloc()
		return fmt.Errorf("ping: stream session: %w", err)
	}
	c.qp, c.stream = qp, s
	c.left = int64(c.cfg.Count) * int64(c.cfg.Size)
	// One message's worth of a fixed pattern, sent again and again.
	c.mem = make([]byte, c.cfg.Size)
	for i := range c.mem {
		c.mem[i] = byte(i*31 + 7)
	}
	c.res.QPN = qp.QPN()
	return nil
}

// pollStream hands the session what its free buffers take and ends the
// run once the peer has acknowledged every byte.
func (c *Client) pollStream(now time.Time) int {
	work := 0
	for c.left > 0 {
		off := int(c.res.Bytes % int64(c.cfg.Size))
		p := c.mem[off:]
		p = p[:min(int64(len(p)), c.left)]
		n, err := c.stream.Send(p)
		if n > 0 {
			c.left -= int64(n)
			c.res.Bytes += int64(n)
			work += n
		}
		if errors.Is(err, roce.ErrWouldBlock) || n == 0 && err == nil {
			break
		}
		if err != nil {
			c.finish(fmt.Errorf("ping: stream send: %w", err))
			return work + 1
		}
	}
	if c.left == 0 {
		left, err := c.stream.Unacknowledged()
		switch {
		case err != nil:
			c.finish(fmt.Errorf("ping: stream: %w", err))
			return work + 1
		case left == 0:
			c.res.Sent, c.res.Received = c.cfg.Count, c.cfg.Count
			c.res.Elapsed = now.Sub(c.upAt)
			c.finish(nil)
			return work + 1
		}
	}
	if now.After(c.deadline) {
		c.finish(fmt.Errorf("ping: stream timed out after %v: %d of %d bytes acknowledged or in flight",
			c.cfg.Timeout, c.res.Bytes, int64(c.cfg.Count)*int64(c.cfg.Size)))
	}
	return work
}

func (c *Client) releaseStream() {
	c.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	c.stream.Release()
	destroySessionQP(c.qp)
	c.qp, c.stream, c.mem = nil, nil, nil
}

// destroySessionQP destroys a QP made by session.NewQP and its CQs.
func destroySessionQP(qp *roce.QP) {
	scq, rcq := qp.SendCQ(), qp.RecvCQ()
	pd := qp.PD()
	qp.Destroy()
	scq.Destroy()
	rcq.Destroy()
	if pd != nil {
		pd.Dealloc()
	}
}
