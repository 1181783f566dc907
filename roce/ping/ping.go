package ping

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// Mode is what the client expects of the server.
type Mode int

const (
	ModeEcho   Mode = iota // each message comes back unchanged before the next is sent
	ModeTose               // Count messages each way, concurrently (ucmatose)
	ModeReply              // each message is answered by one of the same size, content unchecked (rdma_server)
	ModeStream             // Count×Size bytes as one flow-controlled byte stream, as Ceph sends (a bridged sink)
)

// ErrMismatch is returned when an echoed message differs from what was sent.
var ErrMismatch = errors.New("ping: echoed message differs")

// Config describes a run.
type Config struct {
	Count     int
	Size      int
	Mode      Mode
	Allocator roce.Allocator // buffer memory (a HeapAllocator if nil)
	// Timeout bounds the whole run after the connection is up.
	Timeout time.Duration
	// Session sizes the stream's session and QP (ModeStream only); its
	// Allocator is the run's.
	Session session.Config
}

// Result is what a run measured.
type Result struct {
	Setup     time.Duration // Dial to established
	Elapsed   time.Duration // established to the last message
	Sent      int
	Received  int
	Bytes     int64 // payload bytes received
	RTTs      []time.Duration
	Err       error
	QPN       uint32
	RemoteQPN uint32
}

// RTT returns the minimum, median and maximum round-trip time.
func (r Result) RTT() (lo, mid, hi time.Duration) {
	if len(r.RTTs) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), r.RTTs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[0], s[len(s)/2], s[len(s)-1]
}

// Throughput returns received payload bytes per second.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds()
}

// Client is one run.
type Client struct {
	cfg  Config
	m    *cm.Manager
	conn *cm.Conn
	done func(Result)

	mem      []byte
	mr       *roce.MR
	scq, rcq *roce.CQ
	qp       *roce.QP
	wc       []roce.WorkCompletion

	dialAt, upAt, sentAt time.Time
	lastNow              time.Time
	deadline             time.Time
	up, finished         bool
	inflight             int // sends posted, not completed
	res                  Result

	stream *session.Session // ModeStream
	left   int64            // stream bytes not yet handed to the session
}

// Start creates the QP and buffers and dials raddr:port. now must be the
// time of the Manager's latest Poll. done is called once, from Poll.
func Start(m *cm.Manager, raddr netip.Addr, port uint16, cfg Config, now time.Time, done func(Result)) (*Client, error) {
	if cfg.Count < 1 || cfg.Size < 1 || cfg.Size > roce.MaxMessage {
		return nil, fmt.Errorf("ping: count %d, size %d: want count ≥ 1 and size 1..%d", cfg.Count, cfg.Size, roce.MaxMessage)
	}
	if cfg.Allocator == nil {
		cfg.Allocator = &roce.HeapAllocator{}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	c := &Client{cfg: cfg, m: m, done: done, dialAt: now}
	setup := c.setup
	if cfg.Mode == ModeStream {
		setup = c.setupStream
	}
	if err := setup(); err != nil {
		c.release()
		return nil, err
	}
	conn, err := m.Dial(raddr, port, c.qp, nil, cm.Events{Connected: c.connected, Disconnected: c.disconnected})
	if err != nil {
		c.release()
		return nil, fmt.Errorf("ping: dial %v:%d: %w", raddr, port, err)
	}
	c.conn = conn
	return c, nil
}

// recvDepth is how many receives stay posted: one per expected message in
// tose mode (the server sends them all at once), two in echo mode.
func (c *Client) recvDepth() int {
	if c.cfg.Mode == ModeTose {
		return c.cfg.Count
	}
	return 2
}

func (c *Client) sendDepth() int {
	if c.cfg.Mode == ModeTose {
		return min(c.cfg.Count, 64)
	}
	return 2
}

// Memory layout: one send buffer, then recvDepth receive buffers.
func (c *Client) setup() error {
	ep := c.m.Endpoint()
	var err error
	if c.mem, err = c.cfg.Allocator.Alloc((1 + c.recvDepth()) * c.cfg.Size); err != nil {
		return fmt.Errorf("ping: buffers: %w", err)
	}
	for i := range c.cfg.Size {
		c.mem[i] = byte(i*31 + 7)
	}
	pd := ep.NewPD()
	if c.mr, err = pd.RegisterMR(c.mem, roce.AccessLocalWrite); err != nil {
		return err
	}
	if c.scq, err = ep.NewCQ(roce.CQConfig{Depth: c.sendDepth()}); err != nil {
		return err
	}
	if c.rcq, err = ep.NewCQ(roce.CQConfig{Depth: c.recvDepth()}); err != nil {
		return err
	}
	if c.qp, err = pd.CreateQP(&roce.QPInitAttr{SendCQ: c.scq, RecvCQ: c.rcq,
		Cap: roce.QPCap{MaxSendWR: c.sendDepth(), MaxRecvWR: c.recvDepth()}, SigAll: true}); err != nil {
		return err
	}
	// Remote write as rdma_cm grants it: servers probe idle peers with
	// zero-length RDMA WRITEs.
	if err = c.qp.Modify(&roce.QPAttr{State: roce.QPStateInit, Access: roce.AccessRemoteWrite},
		roce.QPAttrState|roce.QPAttrAccessFlags); err != nil {
		return err
	}
	for i := range c.recvDepth() {
		if err := c.postRecv(i); err != nil {
			return err
		}
	}
	c.wc = make([]roce.WorkCompletion, max(c.sendDepth(), c.recvDepth()))
	c.res.QPN = c.qp.QPN()
	return nil
}

func (c *Client) postRecv(slot int) error {
	return c.qp.PostRecv(&roce.RecvWR{ID: uint64(slot), SGList: []roce.SGE{c.mr.SGE((1+slot)*c.cfg.Size, c.cfg.Size)}})
}

func (c *Client) postSend(now time.Time) error {
	// Each message carries its sequence number so a stale echo shows.
	seq := c.res.Sent
	c.mem[0], c.mem[1], c.mem[2], c.mem[3] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	if c.cfg.Size < 4 {
		c.mem[0] = byte(seq)
	}
	err := c.qp.PostSend(&roce.SendWR{ID: uint64(seq), Opcode: roce.WRSend, Flags: roce.SendSignaled,
		SGList: []roce.SGE{c.mr.SGE(0, c.cfg.Size)}})
	if err != nil {
		return err
	}
	c.res.Sent++
	c.inflight++
	c.sentAt = now
	return nil
}

func (c *Client) connected(conn *cm.Conn, err error) {
	if err != nil {
		c.finish(fmt.Errorf("ping: connect: %w", err))
		return
	}
	c.up = true
	c.res.RemoteQPN = conn.RemoteQPN()
}

func (c *Client) disconnected(_ *cm.Conn, err error) {
	c.up = false // nothing left to disconnect
	if !c.finished {
		switch {
		case err == nil && c.res.Sent == c.cfg.Count && c.res.Received == c.cfg.Count:
			// Servers such as ucmatose and rdma_server disconnect as soon
			// as they have what they expect, which can be before the ACKs
			// of our last sends arrive: every reply is in, so every
			// message reached them.
			c.res.Elapsed = c.lastNow.Sub(c.upAt)
		case err == nil:
			err = errors.New("ping: server disconnected before the run ended")
		}
		c.finish(err)
	}
	c.release()
}

// Poll advances the run. It returns the work done.
func (c *Client) Poll(now time.Time) int {
	if c.finished || !c.up {
		return 0
	}
	c.lastNow = now
	if c.upAt.IsZero() {
		c.upAt = now
		c.res.Setup = now.Sub(c.dialAt)
		c.deadline = now.Add(c.cfg.Timeout)
		if c.stream != nil {
			return c.pollStream(now)
		}
		if err := c.sendMore(now); err != nil {
			c.finish(err)
			return 1
		}
	}
	if c.stream != nil {
		return c.pollStream(now)
	}
	work := 0
	n := c.scq.Poll(c.wc)
	for _, wc := range c.wc[:n] {
		if wc.Status != roce.WCSuccess {
			c.finish(fmt.Errorf("ping: send %d: %w", wc.WRID, wc.Status.Err()))
			return work + 1
		}
		c.inflight--
	}
	work += n
	n = c.rcq.Poll(c.wc)
	for _, wc := range c.wc[:n] {
		if err := c.received(&wc, now); err != nil {
			c.finish(err)
			return work + 1
		}
	}
	work += n
	if c.res.Received == c.cfg.Count && c.res.Sent == c.cfg.Count && c.inflight == 0 {
		c.res.Elapsed = now.Sub(c.upAt)
		c.finish(nil)
		return work + 1
	}
	if err := c.sendMore(now); err != nil {
		c.finish(err)
		return work + 1
	}
	if now.After(c.deadline) {
		c.finish(fmt.Errorf("ping: timed out after %v: sent %d, received %d", c.cfg.Timeout, c.res.Sent, c.res.Received))
	}
	return work
}

func (c *Client) received(wc *roce.WorkCompletion, now time.Time) error {
	if wc.Status != roce.WCSuccess {
		return fmt.Errorf("ping: receive: %w", wc.Status.Err())
	}
	if wc.Opcode != roce.WCRecv || int(wc.ByteLen) != c.cfg.Size {
		return fmt.Errorf("ping: received %v of %d bytes, want a %d-byte SEND: %w", wc.Opcode, wc.ByteLen, c.cfg.Size, ErrMismatch)
	}
	slot := int(wc.WRID)
	got := c.mem[(1+slot)*c.cfg.Size : (2+slot)*c.cfg.Size]
	if c.cfg.Mode == ModeEcho && string(got) != string(c.mem[:c.cfg.Size]) {
		return fmt.Errorf("ping: message %d: %w", c.res.Received, ErrMismatch)
	}
	if c.cfg.Mode != ModeTose {
		c.res.RTTs = append(c.res.RTTs, now.Sub(c.sentAt))
	}
	c.res.Received++
	c.res.Bytes += int64(wc.ByteLen)
	if c.res.Received+c.recvDepth() <= c.cfg.Count || c.cfg.Mode != ModeTose {
		return c.postRecv(slot)
	}
	return nil
}

// sendMore posts what the mode allows now: in echo mode the next message
// once the previous came back, in tose mode as many as the queue takes.
func (c *Client) sendMore(now time.Time) error {
	for c.res.Sent < c.cfg.Count && c.inflight < c.sendDepth() {
		if c.cfg.Mode != ModeTose && c.res.Received < c.res.Sent {
			return nil
		}
		if err := c.postSend(now); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) finish(err error) {
	if c.finished {
		return
	}
	c.finished = true
	c.res.Err = err
	if c.conn != nil && c.up {
		c.m.Disconnect(c.conn)
	} else {
		c.release()
	}
	if c.done != nil {
		c.done(c.res)
	}
}

// release frees the QP and buffers; the connection manager no longer
// touches the QP after Connected failed or Disconnected.
func (c *Client) release() {
	if c.stream != nil && c.qp != nil {
		c.releaseStream()
		return
	}
	if c.qp != nil {
		c.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		c.qp.Destroy()
		c.qp = nil
	}
	for _, cq := range []*roce.CQ{c.scq, c.rcq} {
		if cq != nil {
			cq.Destroy()
		}
	}
	c.scq, c.rcq = nil, nil
	if c.mr != nil {
		c.mr.Deregister()
		c.mr = nil
	}
	if c.mem != nil {
		c.cfg.Allocator.Free(c.mem)
		c.mem = nil
	}
}

// Done reports whether the run has ended and its resources are freed.
func (c *Client) Done() bool { return c.finished && c.qp == nil }
