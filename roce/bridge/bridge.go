// Package bridge relays Ceph's RoCE clients to the Ceph daemons' TCP
// endpoints. A Ceph client in rdma_cm mode (ms_async_rdma_cm) connects
// to the node's address and a Ceph port; the bridge accepts the
// connection only once a kernel TCP connection to the same address and
// port is up, where ceph-mon or ceph-osd listens, and then copies the two
// byte streams both ways through a flow-controlled session.Session. msgr2
// sees the address it dialled, so its identity check passes.
//
// Everything but the TCP dials, reads and writes runs on the goroutine
// that polls the connection manager. A REQ is answered once its dial
// ends (the connection manager's deferred accept), so a daemon slow to
// accept never stalls the poll loop. Each connection has a reader and a
// writer goroutine for its TCP socket, and the bytes cross between them
// and the poll loop in the session's registered buffers, without a copy
// and a batch at a time, with one hand-off each way per batch: the
// writer writes all the receive buffers ready with one gathered write
// (writev), and they are reposted once written; the reader reads
// straight into up to Chunks send buffers the poll loop reserved for
// it, each then one SEND. Its memory is bounded by the session's caps,
// and a slow side stalls the other instead of buffering without end.
// The reader asks for send buffers only once its socket is readable, so
// an idle connection holds none.
//
// The connections' registered buffers are shared, as Ceph's own RDMA
// messenger shares them through an SRQ: one session.Pool holds
// RecvPool receive buffers, all posted on one SRQ, and SendPool send
// buffers; registered memory is fixed whatever the number of
// connections. Flow control stays per connection. Fairness: a connection
// holds at most Session.SendBuffers send buffers and Session.RecvBuffers
// receive buffers (being filled or not yet relayed to TCP), each capped
// at a quarter of its pool, and more receive buffers only while the
// pool lends them (more than half of it free, see session.Pool), so one
// stalled daemon cannot starve the others of receive buffers. A new connection is refused (REJ, counted
// as no_resources) when fewer receive buffers are free than its cap,
// when the pool is at MaxConns, or when no file descriptor is left for
// its TCP side (no_fds); an empty send pool only stalls the senders.
//
// A client that vanishes without a DREQ (a guest killed, a cable
// pulled, the DREQ and its retries lost) is found by its QP: idle, the
// QP probes it every roce.EndpointConfig.IdleProbe, and a QP whose peer
// answers nothing for its retry budget fails with roce.ErrPeerDead. The
// connection manager then reports the connection's end like any QP
// failure, and the bridge reaps it as such (end): the daemon's TCP side
// is reset, the QP destroyed, its buffers returned to the pools, and its
// place under MaxConns freed; Stats.DeadPeers counts it.
//
// The RoCE side never sends an RNR NAK (Ceph's clients allow none): when
// the TCP side lags, a connection at its receive cap takes no more and
// the requests that find none are dropped unanswered. Once the writer
// frees a buffer, one sequence NAK has the client resend (roce's
// QPInitAttr.NoRNR); while none frees, the client's retransmit timer
// paces it.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// Defaults and limits.
const (
	DefaultMaxConns    = 256
	DefaultChunks      = 16
	MaxChunks          = 1024
	DefaultDialTimeout = 2 * time.Second
	DefaultRecvPool    = session.DefaultPoolRecvBuffers
	DefaultSendPool    = session.DefaultPoolSendBuffers
	// MinPool and MaxPool bound RecvPool and SendPool: a connection may
	// hold up to a quarter of each.
	MinPool = 4
	MaxPool = 1 << 16
	// closeTimeout bounds how long an orderly close may wait for the TCP
	// side to take the last bytes.
	closeTimeout = 10 * time.Second
)

// Dialer opens the TCP connection a RoCE connection is bridged to: a
// socket (syscall.Conn), which the bridge reads into registered memory.
type Dialer func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)

// Config sizes the bridge.
type Config struct {
	// Session configures each connection's QP. BufferSize is the size of
	// the shared buffers and the largest SEND either side sends: Ceph's
	// ms_async_rdma_buffer_size. SendBuffers and RecvBuffers are the
	// per-connection caps on the shared pools (each at most a quarter
	// of its pool).
	Session session.Config
	// RecvPool and SendPool are the registered buffers all connections
	// share: receive buffers on one SRQ, send buffers on a free list.
	RecvPool, SendPool int
	// Dial connects to the Ceph daemon, on a goroutine of its own,
	// bounded by DialTimeout (which should stay under the connection
	// manager's wait for a deferred answer: three retransmission
	// intervals); it may be called concurrently.
	Dial        Dialer
	DialTimeout time.Duration
	// MaxConns bounds the bridged connections; more are rejected.
	MaxConns int
	// Chunks bounds the send buffers (of Session.BufferSize bytes) one
	// batch of TCP reads fills for a connection, each read straight into
	// a registered buffer and sent as one SEND.
	Chunks int
	Log    *slog.Logger
	// Wake, when set, is called when a TCP side leaves work for Poll (a
	// dial ended, bytes read, a chunk written out), from the goroutine
	// that did it: it ends the poll loop's idle sleep.
	Wake func()
}

// Bridge serves the bridged ports of one connection manager.
type Bridge struct {
	cfg   Config
	m     *cm.Manager
	pd    *roce.PD
	pool  *session.Pool
	conns map[*cm.Conn]*conn
	// live holds conns' values for Poll: a slice walks without a map
	// iterator's cost on every turn of the poll loop.
	live []*conn
	// draining are connections the client closed whose last bytes still
	// go to the daemon before its socket closes.
	draining []*conn
	wg       sync.WaitGroup
	shut     bool
	cnt      counters
	// published is the pool state last copied for Stats.
	published session.PoolStats
	// Dials run off the poll loop: dialing counts those in flight, each
	// ends on dialed; stop cancels them at Shutdown.
	dialing int
	dialed  chan dialed
	ctx     context.Context
	stop    context.CancelFunc
}

// New creates a bridge on m's endpoint.
func New(m *cm.Manager, cfg Config) (*Bridge, error) {
	if cfg.Dial == nil {
		return nil, errors.New("bridge: no dialer")
	}
	orDefault(&cfg.MaxConns, DefaultMaxConns)
	orDefault(&cfg.Chunks, DefaultChunks)
	orDefault(&cfg.DialTimeout, DefaultDialTimeout)
	orDefault(&cfg.Session.BufferSize, session.DefaultBufferSize)
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	orDefault(&cfg.RecvPool, DefaultRecvPool)
	orDefault(&cfg.SendPool, DefaultSendPool)
	capTo := func(v *int, pool int) {
		if *v <= 0 {
			*v = session.DefaultRecvBuffers
		}
		*v = max(1, min(*v, pool/4))
	}
	capTo(&cfg.Session.RecvBuffers, cfg.RecvPool)
	capTo(&cfg.Session.SendBuffers, cfg.SendPool)
	// Ceph's clients allow no RNR NAK.
	cfg.Session.NoRNR = true
	b := &Bridge{cfg: cfg, m: m, pd: m.Endpoint().NewPD(), conns: map[*cm.Conn]*conn{},
		dialed: make(chan dialed, cfg.MaxConns)}
	b.ctx, b.stop = context.WithCancel(context.Background())
	var err error
	b.pool, err = session.NewPool(b.pd, session.PoolConfig{
		BufferSize: cfg.Session.BufferSize, RecvBuffers: cfg.RecvPool, SendBuffers: cfg.SendPool,
		MaxSessions: cfg.MaxConns, Allocator: cfg.Session.Allocator,
	})
	if err != nil {
		b.pd.Dealloc()
		return nil, fmt.Errorf("bridge: %w", err)
	}
	b.publish()
	return b, nil
}

// Listen bridges connections to port.
func (b *Bridge) Listen(port uint16) error {
	return b.m.Listen(port, b.accept)
}

// accept runs for a REQ: it takes the connection's place in the shared
// pools and starts dialing the daemon at the address and port the client
// targeted; the answer (a REP, or a REJ when nothing listens there) goes
// out from Poll once the dial ends. A dial never blocks the poll loop: a
// daemon with a full accept backlog delays only its own clients.
func (b *Bridge) accept(req *cm.ConnRequest) (cm.Accept, error) {
	target := netip.AddrPortFrom(req.LocalAddr, req.Port)
	switch {
	case b.shut:
		return cm.Accept{}, cm.Reject(cm.RejConsumerDefined, nil)
	case len(b.conns)+b.dialing >= b.cfg.MaxConns:
		b.cnt.refused[refusedMaxConns].Add(1)
		b.cfg.Log.Warn("bridge: refusing a connection: at max_sessions", "peer", req.RemoteAddr, "target", target, "max", b.cfg.MaxConns)
		return cm.Accept{}, fmt.Errorf("bridge: %d connections: %w", len(b.conns)+b.dialing, roce.ErrBusy)
	}
	// The shared buffers first: a refusal costs the daemon nothing.
	sess, err := b.pool.NewSession(b.cfg.Session)
	if err != nil {
		b.cnt.refused[refusedNoResources].Add(1)
		st := b.pool.Stats()
		b.cfg.Log.Warn("bridge: refusing a connection: shared buffer pools cannot admit it",
			"peer", req.RemoteAddr, "target", target, "conns", len(b.conns),
			"recv_free", st.RecvPosted, "recv_pool", st.RecvBuffers, "recv_cap", b.cfg.Session.RecvBuffers,
			"send_free", st.SendFree, "send_pool", st.SendBuffers, "err", err)
		return cm.Accept{}, cm.Reject(cm.RejNoResources, nil)
	}
	b.dialing++
	b.wg.Add(1)
	// req is the Manager's to reuse once accept returns.
	d := dialed{cc: req.Conn, peer: req.RemoteAddr, target: target, sess: sess}
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.DialTimeout)
		d.nc, d.err = b.cfg.Dial(ctx, d.target)
		cancel()
		// Never blocks: room for every dial in flight.
		b.dialed <- d
		b.wake()
	}()
	return cm.Accept{}, cm.ErrDeferred
}

// dialed is the end of a dial accept started.
type dialed struct {
	cc     *cm.Conn
	peer   netip.AddrPort
	target netip.AddrPort
	sess   *session.Session
	nc     net.Conn
	err    error
}

// completeDials answers the REQs whose dials ended.
func (b *Bridge) completeDials() int {
	work := 0
	for {
		select {
		case d := <-b.dialed:
			b.dialing--
			b.completeDial(d)
			work++
		default:
			return work
		}
	}
}

func (b *Bridge) completeDial(d dialed) {
	nc, err, sess, target := d.nc, d.err, d.sess, d.target
	if err != nil {
		releaseSession(sess)
		reason := refusedDialFailed
		if errors.Is(err, syscall.ECONNREFUSED) {
			reason = refusedNoListener
		} else if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			reason = refusedNoFDs
		}
		b.cnt.refused[reason].Add(1)
		if reason == refusedNoFDs {
			b.cfg.Log.Warn("bridge: refusing a connection: out of file descriptors (raise RLIMIT_NOFILE)",
				"peer", d.peer, "target", target, "conns", len(b.conns), "err", err)
		} else {
			b.cfg.Log.Warn("bridge: refusing a connection: cannot reach the daemon", "peer", d.peer, "target", target, "err", err)
		}
		// The client fails at once instead of after its retries. The
		// Manager may have given up on the request already.
		b.m.Complete(d.cc, cm.Accept{}, cm.Reject(cm.RejInvalidServiceID, nil))
		return
	}
	c := b.newConn(target, sess, nc)
	c.cc, c.idx = d.cc, len(b.live)
	b.conns[d.cc] = c
	b.live = append(b.live, c)
	b.cnt.accepted.Add(1)
	b.cnt.active.Add(1)
	err = b.m.Complete(d.cc, cm.Accept{QP: c.qp, Events: cm.Events{
		Connected: func(cc *cm.Conn, err error) {
			if err != nil {
				b.end(cc, fmt.Errorf("connection attempt: %w", err))
				return
			}
			c.up = true
		},
		Disconnected: func(cc *cm.Conn, err error) { b.end(cc, err) },
	}}, nil)
	if err != nil {
		// The Manager rejected the client while the dial ran.
		b.cnt.errors[errQP].Add(1)
		b.cfg.Log.Info("bridge: connection failed", "target", target, "peer", d.peer, "err", err)
		delete(b.conns, d.cc)
		b.unlist(c)
		b.cnt.active.Add(-1)
		b.cnt.closed.Add(1)
		c.close(true)
	}
}

// Poll moves what can be moved on every connection and returns the work
// done.
func (b *Bridge) Poll(now time.Time) int {
	// Dispatch the shared CQs: each session's Readable is then current.
	b.pool.Poll()
	work := b.completeDials() + b.drain(now)
	// end, called from disconnect, removes from live: walk it backwards.
	for i := len(b.live) - 1; i >= 0; i-- {
		c := b.live[i]
		cc := c.cc
		if !c.up || c.disconnecting {
			continue
		}
		n, err := c.pump()
		work += n
		switch {
		case err != nil:
			// The QP or the session failed: RST the daemon's side; the
			// connection manager reports the end and frees the rest.
			b.cnt.errors[errQP].Add(1)
			c.rst = true
			b.disconnect(cc, c, err)
		case c.tcpDone && c.rOut == 0:
			// The daemon closed (FIN or RST): once the client has
			// acknowledged everything it sent, DREQ.
			if left, err := c.sess.Unacknowledged(); err != nil || left == 0 {
				b.disconnect(cc, c, err)
			}
		}
	}
	b.publish()
	return work
}

// publish copies the pool's state to the counters Stats reads, storing
// only what changed: an idle bridge's turn of the poll loop then costs
// loads, not locked stores.
func (b *Bridge) publish() {
	st := b.pool.Stats()
	if st == b.published {
		return
	}
	b.published = st
	b.cnt.recvFree.Store(int64(st.RecvPosted))
	b.cnt.sendFree.Store(int64(st.SendFree))
	b.cnt.registered.Store(int64(st.RegisteredBytes))
	b.cnt.sendStarved.Store(st.SendStarved)
}

func (b *Bridge) disconnect(cc *cm.Conn, c *conn, cause error) {
	c.disconnecting = true
	if cause != nil {
		c.cause = cause
	}
	if err := b.m.Disconnect(cc); err != nil {
		b.end(cc, err)
	}
}

// end tears a connection down once the connection manager is done with
// it: an orderly end closes the TCP side after the bytes already
// received from the client, a failure resets it.
func (b *Bridge) end(cc *cm.Conn, err error) {
	c, ok := b.conns[cc]
	if !ok {
		return
	}
	delete(b.conns, cc)
	b.unlist(c)
	b.cnt.active.Add(-1)
	if err == nil {
		err = c.cause
	}
	switch {
	case err != nil || c.rst:
		if err != nil && !c.rst {
			b.cnt.errors[errQP].Add(1)
		}
		msg := "bridge: connection failed"
		if errors.Is(c.qp.Err(), roce.ErrPeerDead) {
			b.cnt.deadPeers.Add(1)
			msg = "bridge: client stopped answering: connection reaped"
		}
		b.cfg.Log.Info(msg, "target", c.target, "peer", cc.RemoteAddr(), "err", err)
		c.close(true)
	case c.up:
		// What the client sent before its DREQ is in the session's
		// buffers: it goes to the daemon before the FIN.
		c.drainSince = time.Now()
		b.draining = append(b.draining, c)
	default:
		c.close(false)
	}
	b.cnt.closed.Add(1)
}

// drain moves the last bytes of connections the client closed to their
// daemons, and closes each once its session is empty.
func (b *Bridge) drain(now time.Time) int {
	work := 0
	live := b.draining[:0]
	for _, c := range b.draining {
		n, err := c.pumpToTCP()
		work += n
		switch {
		case err != nil && !errors.Is(err, roce.ErrFlushed):
			c.close(true)
		case err != nil:
			c.close(false) // everything before the QP's end went out
		case now.Sub(c.drainSince) > closeTimeout:
			c.close(true)
		default:
			live = append(live, c)
		}
	}
	clear(b.draining[len(live):])
	b.draining = live
	return work
}

// Stats returns the bridge's counters; safe from any goroutine.
func (b *Bridge) Stats() Stats { return b.cnt.snapshot() }

// Conns returns the bridged connections; call it on the polling goroutine.
func (b *Bridge) Conns() int { return len(b.conns) }

// Shutdown resets every connection, frees their QPs and buffers, and
// waits for their goroutines. Call it after the last Poll.
func (b *Bridge) Shutdown() error {
	b.shut = true
	for cc, c := range b.conns {
		delete(b.conns, cc)
		b.cnt.active.Add(-1)
		c.close(true)
	}
	clear(b.live)
	b.live = b.live[:0]
	for _, c := range b.draining {
		c.close(true)
	}
	b.draining = nil
	b.stop()
	b.wg.Wait()
	for b.dialing > 0 {
		d := <-b.dialed
		b.dialing--
		if d.nc != nil {
			d.nc.Close()
		}
		releaseSession(d.sess)
	}
	if err := b.pool.Close(); err != nil {
		return fmt.Errorf("bridge: shutdown: %w", err)
	}
	b.publish()
	if err := b.pd.Dealloc(); err != nil {
		return fmt.Errorf("bridge: shutdown: %w", err)
	}
	return nil
}

// unlist removes c from live, moving the last connection into its slot.
func (b *Bridge) unlist(c *conn) {
	last := len(b.live) - 1
	b.live[c.idx] = b.live[last]
	b.live[c.idx].idx = c.idx
	b.live[last] = nil
	b.live = b.live[:last]
}

// conn is one bridged connection.
type conn struct {
	b      *Bridge
	cc     *cm.Conn
	idx    int // in b.live
	target netip.AddrPort
	qp     *roce.QP
	sess   *session.Session
	tcp    net.Conn

	up            bool // established: data may flow
	disconnecting bool
	rst           bool  // end with a TCP reset
	cause         error // why the bridge disconnected

	// TCP → RoCE, no copy: once the socket is readable the reader asks
	// for send buffers (want); the poll loop reserves up to Chunks of the
	// session's free send buffers (rviews, views into the registered
	// send memory) and hands them over (give); the reader reads straight
	// into them, as many as the socket fills without waiting, and hands
	// them back (filled, with rlens and rErr); the poll loop posts each
	// filled one as one SEND and gives the rest back. An idle connection
	// holds no buffer: the reader asks only once there is data.
	want, give, filled chan struct{}
	rviews             [][]byte
	rlens              []int
	rFilled            int
	rErr               error
	rOut               int  // buffers with the reader: 0 when it has none
	wanted             bool // a want not yet served
	tcpDone            bool // the reader ended
	fill               func(fd uintptr) bool

	// RoCE → TCP, no copy and one gathered write per batch: the poll
	// loop lends the writer every received buffer ready (wviews, views
	// into the registered receive memory) and signals toTCP; the writer
	// writes them with one writev (wbuf) and signals written; the poll
	// loop then returns them to the session, which reposts them, and
	// lends the next batch: what arrived meanwhile. One batch at a time,
	// so the wake-ups are two per batch, however many SENDs it holds.
	// wviews and wbuf belong to the writer between the two signals.
	toTCP   chan struct{}
	written chan struct{}
	wviews  [][]byte
	wbuf    net.Buffers
	wOut    int // buffers lent to the writer: 0 when it has none

	stalled    [numStalls]bool // a stall is counted when it starts
	drainSince time.Time

	quit     chan struct{}
	released bool
	peek     [1]byte // the reader's readiness probe
}

func (b *Bridge) newConn(target netip.AddrPort, sess *session.Session, nc net.Conn) *conn {
	k := b.cfg.Chunks
	c := &conn{b: b, target: target, tcp: nc, sess: sess, qp: sess.QP(),
		want: make(chan struct{}, 1), give: make(chan struct{}, 1), filled: make(chan struct{}, 1),
		rviews: make([][]byte, 0, k), rlens: make([]int, k),
		toTCP: make(chan struct{}, 1), written: make(chan struct{}, 1),
		quit: make(chan struct{}),
	}
	c.fill = c.fillBuffers
	b.wg.Add(2)
	go c.read()
	go c.write()
	return c
}

// pump moves data both ways without blocking and returns the bytes moved.
func (c *conn) pump() (int, error) {
	moved, err := c.pumpToTCP()
	if err != nil {
		return moved, err
	}
	n, err := c.pumpToRoCE()
	return moved + n, err
}

// pumpToTCP lends the writer what the client sent, a batch at a time:
// once the writer has written the last batch, it takes those receive
// buffers back (reposting them) and lends the writer all that is ready.
func (c *conn) pumpToTCP() (int, error) {
	cnt := &c.b.cnt
	if c.wOut > 0 {
		select {
		case <-c.written:
		default:
			if c.sess.Buffered() > 0 && !c.stalled[stallTCPWrite] {
				c.stalled[stallTCPWrite] = true
				cnt.stalls[stallTCPWrite].Add(1)
			}
			return 0, nil
		}
		c.stalled[stallTCPWrite] = false
		k := c.wOut
		c.wOut = 0
		if err := c.sess.Return(k); err != nil {
			return 0, err
		}
	}
	if !c.sess.Readable() {
		return 0, nil
	}
	// The views' array is reused: it grows to the most buffers a batch
	// held, once.
	views, err := c.sess.Lend(c.wviews[:0])
	c.wviews = views
	if len(views) > 0 {
		moved := 0
		for _, v := range views {
			moved += len(v)
		}
		c.wOut = len(views)
		c.toTCP <- struct{}{} // never blocks: one batch at a time
		cnt.wakeups[dirToTCP].Add(1)
		cnt.toTCP.Add(uint64(moved))
		return moved, nil
	}
	switch {
	case errors.Is(err, roce.ErrWouldBlock):
		return 0, nil
	case errors.Is(err, io.EOF):
		return 0, fmt.Errorf("bridge: unexpected zero-length SEND from the client: %w", err)
	}
	return 0, err
}

// pumpToRoCE posts what the reader read into the send buffers, one
// SEND each, and answers the reader's request for more with what the
// session's free send buffers allow.
func (c *conn) pumpToRoCE() (int, error) {
	cnt := &c.b.cnt
	moved := 0
	if c.rOut > 0 {
		select {
		case <-c.filled:
		default:
			return 0, nil
		}
		k := c.rOut
		c.rOut = 0
		var err error
		for i := range k {
			n := 0
			if i < c.rFilled {
				n = c.rlens[i]
			}
			if e := c.sess.PostReserved(n); e != nil && err == nil {
				err = e
			}
			moved += n
		}
		cnt.toRoCE.Add(uint64(moved))
		if err != nil {
			return moved, err
		}
		if c.rErr != nil {
			c.tcpDone = true
			if !errors.Is(c.rErr, io.EOF) && !errors.Is(c.rErr, net.ErrClosed) && !errors.Is(c.rErr, os.ErrDeadlineExceeded) {
				cnt.errors[errTCPRead].Add(1)
			}
		}
	}
	if c.tcpDone {
		return moved, nil
	}
	if !c.wanted {
		select {
		case <-c.want:
			c.wanted = true
		default:
			return moved, nil
		}
	}
	views, err := c.sess.Reserve(c.rviews[:0], cap(c.rviews))
	c.rviews = views
	if len(views) == 0 {
		if errors.Is(err, roce.ErrWouldBlock) {
			if !c.stalled[stallRoCESend] {
				c.stalled[stallRoCESend] = true
				cnt.stalls[stallRoCESend].Add(1)
			}
			return moved, nil
		}
		return moved, err
	}
	c.stalled[stallRoCESend] = false
	c.wanted = false
	c.rOut = len(views)
	c.give <- struct{}{} // never blocks: one batch at a time
	cnt.wakeups[dirToRoCE].Add(1)
	return moved, nil
}

// read waits for the daemon's bytes, asks the poll loop for send
// buffers, and reads the bytes straight into them. Waiting for buffers
// is the backpressure on the daemon: its TCP window closes. It asks
// only once the socket is readable, so that idle connections hold none.
func (c *conn) read() {
	defer c.b.wg.Done()
	var rc syscall.RawConn
	sc, ok := c.tcp.(syscall.Conn)
	err := errors.New("bridge: the daemon's connection is not a socket")
	if ok {
		rc, err = sc.SyscallConn()
	}
	for {
		if rc != nil {
			c.waitReadable(rc)
		}
		c.want <- struct{}{} // never blocks: one request at a time
		c.b.wake()
		c.b.cnt.wakeups[dirToRoCE].Add(1)
		select {
		case <-c.give:
		case <-c.quit:
			return
		}
		c.rFilled, c.rErr = 0, err
		if rc != nil {
			if err := rc.Read(c.fill); err != nil && c.rErr == nil {
				c.rErr = err
			}
		}
		done := c.rErr != nil
		c.filled <- struct{}{} // never blocks: one batch at a time
		c.b.wake()
		c.b.cnt.wakeups[dirToRoCE].Add(1)
		if done {
			return
		}
	}
}

// fillBuffers reads the socket into the lent send buffers, a buffer per
// read, until a read leaves its buffer short (the socket is drained) or
// all are full; it has the runtime wait for readiness only while it has
// read nothing. As the callback of syscall.RawConn.Read it runs on the
// reader's goroutine.
func (c *conn) fillBuffers(fd uintptr) bool {
	for c.rFilled < len(c.rviews) {
		buf := c.rviews[c.rFilled]
		n, err := syscall.Read(int(fd), buf)
		c.b.cnt.syscalls[dirToRoCE].Add(1)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return c.rFilled > 0
		case err != nil:
			c.rErr = err
			return true
		case n == 0:
			c.rErr = io.EOF
			return true
		}
		c.rlens[c.rFilled] = n
		c.rFilled++
		if n < len(buf) {
			return true
		}
	}
	return true
}

// write sends the client's bytes to the daemon, each batch the poll
// loop lends it with one gathered write, until toTCP is closed; then it
// closes the socket.
func (c *conn) write() {
	defer c.b.wg.Done()
	failed := false
	for range c.toTCP {
		if !failed {
			// WriteTo consumes what it writes: it gets a copy of the
			// views' headers, in an array reused batch after batch.
			c.wbuf = append(c.wbuf[:0], c.wviews...)
			_, err := c.wbuf.WriteTo(c.tcp)
			c.b.cnt.syscalls[dirToTCP].Add(1)
			if err != nil {
				failed = true
				if !errors.Is(err, net.ErrClosed) {
					c.b.cnt.errors[errTCPWrite].Add(1)
				}
			}
		}
		c.written <- struct{}{} // never blocks: one batch at a time
		c.b.wake()
		c.b.cnt.wakeups[dirToTCP].Add(1)
	}
	c.tcp.Close()
}

// wake tells the poll loop that a TCP side left it work (Config.Wake).
func (b *Bridge) wake() {
	if b.cfg.Wake != nil {
		b.cfg.Wake()
	}
}

// waitReadable blocks until the TCP socket has data, EOF or an error,
// without a buffer: a one-byte MSG_PEEK through the runtime's poller.
func (c *conn) waitReadable(rc syscall.RawConn) {
	rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), c.peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		c.b.cnt.syscalls[dirToRoCE].Add(1)
		return err != syscall.EAGAIN && err != syscall.EINTR
	})
}

// close ends the TCP side (a reset, or a close after the last bytes) and
// frees the RoCE side. The connection manager no longer uses the QP.
func (c *conn) close(reset bool) {
	if c.released {
		return
	}
	c.released = true
	// The reader's buffers are views of the session's send buffers: they
	// go back to the pool only once it is done with them, at once now
	// that its read times out.
	if c.rOut > 0 {
		c.tcp.SetReadDeadline(time.Now())
		<-c.filled
		c.rOut = 0
	}
	if reset {
		if tc, ok := c.tcp.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.tcp.Close()
		// The writer's batch is views of the session's receive buffers:
		// they go back to the pool only once it is done with them, at
		// once now that the socket is closed.
		if c.wOut > 0 {
			<-c.written
			c.wOut = 0
		}
	} else {
		c.tcp.SetWriteDeadline(time.Now().Add(closeTimeout))
	}
	close(c.quit)
	close(c.toTCP)
	c.releaseRoCE()
}

func (c *conn) releaseRoCE() { releaseSession(c.sess) }

// releaseSession gives a session's QP and shared buffers back.
func releaseSession(s *session.Session) {
	qp := s.QP()
	qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	s.Release()
	qp.Destroy()
}

// Pool returns the shared buffer pool; use it on the polling goroutine.
func (b *Bridge) Pool() *session.Pool { return b.pool }

// orDefault sets *v to d when it is not positive: not set.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
