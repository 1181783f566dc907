package cephrdma

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// Defaults.
const (
	DefaultIOTimeout = 10 * time.Second
	DefaultMaxConns  = 256
	DefaultQueueLen  = 64
	// DefaultTOS and DefaultTTL are what Ceph puts in its address
	// vector: traffic class ms_async_rdma_dscp (96) and hop limit 6.
	DefaultTOS = 0x60
	DefaultTTL = 6
	// cmdBudget bounds the commands one Poll handles, so a burst of
	// connections cannot stall the data path.
	cmdBudget = 16
)

// Resolver finds the Ethernet address of a peer: roce/neigh implements
// it over ARP. Resolve is called on the poll goroutine; done must be
// called on the poll goroutine too, exactly once, possibly before
// Resolve returns (a cached entry).
type Resolver interface {
	Resolve(ip netip.Addr, done func(mac [6]byte, err error))
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ip netip.Addr, done func(mac [6]byte, err error))

// Resolve implements Resolver.
func (f ResolverFunc) Resolve(ip netip.Addr, done func(mac [6]byte, err error)) { f(ip, done) }

// Config configures a Stack. Start from DefaultConfig.
type Config struct {
	// Session sizes the sessions and sets their QPs' timers and retry
	// counts (session.DefaultConfig: Ceph's). Its PathMTU must be 0
	// or 1024, the path MTU Ceph fixes.
	Session session.Config
	// Resolver finds peers' MAC addresses (required).
	Resolver Resolver
	// IOTimeout bounds each TCP read and write of the exchange, the TCP
	// connect of Dial, and the neighbour resolution (DefaultIOTimeout if 0).
	IOTimeout time.Duration
	// MaxConns bounds the connections being set up or up at once
	// (DefaultMaxConns if 0).
	MaxConns int
	// QueueLen is the capacity of the command queue from the TCP
	// goroutines to the poll goroutine (DefaultQueueLen if 0). When it is
	// full, TCP goroutines wait; the poll goroutine never does.
	QueueLen int
	// TOS and TTL go into the QPs' address vectors (IPv4 TOS and TTL).
	TOS, TTL uint8
	// NewPSN returns the first PSN of a new QP; its low 24 bits are used
	// (random if nil).
	NewPSN func() uint32
	// Dialer is the template for Dial's TCP connections: set LocalAddr to
	// choose the source address. Its Timeout defaults to IOTimeout.
	Dialer net.Dialer
	// OnError, if set, is called on the poll goroutine for every
	// connection that fails: a refused or broken exchange, or a session
	// that ended with an error. Connections closed by Close are not
	// reported.
	OnError func(peer netip.AddrPort, err error)
}

// DefaultConfig returns Ceph's settings; the caller adds a Resolver.
func DefaultConfig() Config {
	return Config{Session: session.DefaultConfig(), TOS: DefaultTOS, TTL: DefaultTTL}
}

// Stats counts a Stack's connections; safe from any goroutine.
type Stats struct {
	Accepted    uint64 // TCP connections accepted by Serve
	Dialed      uint64 // connections Dial started
	Established uint64 // exchanges completed: sessions up
	Failed      uint64 // connections that ended with an error, in the exchange or later
	Closed      uint64 // registered connections torn down, for any reason
	Active      uint64 // connections holding a QP or in the exchange
}

type counters struct {
	accepted, dialed, established, failed, closed atomic.Uint64
	active                                        atomic.Int64
}

// Stack runs Ceph's QP exchange for one endpoint, on both sides: Serve
// accepts TCP connections and hands each resulting session to a
// service; Dial connects to a Ceph (or cephrdma) server. Each session
// gets a QP and completion queues of its own in the stack's protection
// domain.
type Stack struct {
	ep  *roce.Endpoint
	pd  *roce.PD
	cfg Config
	gid [16]byte

	cmds   chan command
	quit   chan struct{}
	ctx    context.Context // canceled by Close: stops dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines: Serve loops and connections

	// mu guards what Serve and the connection goroutines share with
	// Close; it is never taken on the poll path.
	mu struct {
		sync.Mutex
		closed    bool
		listeners map[net.Listener]struct{}
		tcps      map[net.Conn]struct{}
	}

	// Poll goroutine only.
	conns   map[*Conn]struct{}
	waiting []*Conn // resolving neighbours, with deadlines
	now     time.Time
	closed  bool
	cnt     counters
}

// New returns a stack for ep, with a protection domain of its own.
func New(ep *roce.Endpoint, cfg Config) (*Stack, error) {
	switch {
	case ep == nil:
		return nil, fmt.Errorf("cephrdma: new stack: no endpoint: %w", roce.ErrInvalidArgument)
	case cfg.Resolver == nil:
		return nil, fmt.Errorf("cephrdma: new stack: no resolver: %w", roce.ErrInvalidArgument)
	case cfg.Session.PathMTU != 0 && cfg.Session.PathMTU != session.DefaultPathMTU:
		return nil, fmt.Errorf("cephrdma: new stack: path mtu %d, Ceph uses %d: %w",
			cfg.Session.PathMTU, session.DefaultPathMTU, roce.ErrInvalidArgument)
	}
	cfg.Session.PathMTU = session.DefaultPathMTU
	if cfg.Session.Allocator == nil {
		cfg.Session.Allocator = &roce.HeapAllocator{}
	}
	orDefault(&cfg.IOTimeout, DefaultIOTimeout)
	orDefault(&cfg.MaxConns, DefaultMaxConns)
	orDefault(&cfg.QueueLen, DefaultQueueLen)
	if cfg.NewPSN == nil {
		cfg.NewPSN = rand.Uint32
	}
	orDefault(&cfg.Dialer.Timeout, cfg.IOTimeout)
	st := &Stack{
		ep:    ep,
		pd:    ep.NewPD(),
		cfg:   cfg,
		gid:   gidOf(ep.IP()),
		cmds:  make(chan command, cfg.QueueLen),
		quit:  make(chan struct{}),
		conns: make(map[*Conn]struct{}),
	}
	st.ctx, st.cancel = context.WithCancel(context.Background())
	st.mu.listeners = make(map[net.Listener]struct{})
	st.mu.tcps = make(map[net.Conn]struct{})
	return st, nil
}

// Stats returns the stack's counters.
func (st *Stack) Stats() Stats {
	c := &st.cnt
	return Stats{
		Accepted: c.accepted.Load(), Dialed: c.dialed.Load(), Established: c.established.Load(),
		Failed: c.failed.Load(), Closed: c.closed.Load(), Active: uint64(max(c.active.Load(), 0)),
	}
}

// Serve accepts connections on ln until ln fails or the stack is
// closed, runs the exchange for each and hands each session to svc on
// the poll goroutine. The daemon must poll svc itself. Serve may be
// called from any goroutine and blocks; it returns ErrClosed once the
// stack is closed, which also closes ln.
func (st *Stack) Serve(ln net.Listener, svc app.SessionService) error {
	if ln == nil || svc == nil {
		return fmt.Errorf("cephrdma: serve: no listener or no service: %w", roce.ErrInvalidArgument)
	}
	st.mu.Lock()
	if st.mu.closed {
		st.mu.Unlock()
		return fmt.Errorf("cephrdma: serve %v: %w", ln.Addr(), ErrClosed)
	}
	st.mu.listeners[ln] = struct{}{}
	st.wg.Add(1)
	st.mu.Unlock()
	defer st.wg.Done()
	defer func() {
		st.mu.Lock()
		delete(st.mu.listeners, ln)
		st.mu.Unlock()
	}()
	for {
		tcp, err := ln.Accept()
		if err != nil {
			if st.isClosed() {
				return fmt.Errorf("cephrdma: serve %v: %w", ln.Addr(), ErrClosed)
			}
			return fmt.Errorf("cephrdma: serve %v: %w", ln.Addr(), err)
		}
		st.cnt.accepted.Add(1)
		if !st.track(tcp) {
			tcp.Close()
			return fmt.Errorf("cephrdma: serve %v: %w", ln.Addr(), ErrClosed)
		}
		go st.serveConn(tcp, svc)
	}
}

// Dial connects to the Ceph async+rdma server at addr (host:port) and
// calls done on the poll goroutine, from Poll (or Close), exactly once:
// with the connection once its session is up, or with the error that
// ended the attempt. Dial must be called on the poll goroutine; it
// fails at once if the stack is closed or full.
func (st *Stack) Dial(addr string, done func(*Conn, error)) error {
	switch {
	case done == nil:
		return fmt.Errorf("cephrdma: dial %s: no callback: %w", addr, roce.ErrInvalidArgument)
	case st.closed:
		return fmt.Errorf("cephrdma: dial %s: %w", addr, ErrClosed)
	case len(st.conns) >= st.cfg.MaxConns:
		return fmt.Errorf("cephrdma: dial %s: %d connections: %w", addr, len(st.conns), ErrTooManyConns)
	}
	c := &Conn{st: st, client: true, addr: addr, dialed: done, reply: make(chan reply, 1)}
	c.peer, _ = netip.ParseAddrPort(addr) // until connected; zero for a host name
	st.register(c)
	st.cnt.dialed.Add(1)
	st.wg.Add(1)
	go st.dialConn(c, addr)
	return nil
}

// Poll handles the commands the TCP goroutines queued and expires
// neighbour resolutions, at time now. It returns the work done (0 when
// idle) and allocates nothing when idle.
func (st *Stack) Poll(now time.Time) int {
	if st.closed {
		return 0
	}
	st.now = now
	work := 0
loop:
	for work < cmdBudget {
		select {
		case cmd := <-st.cmds:
			st.handle(&cmd)
			work++
		default:
			break loop
		}
	}
	for i := 0; i < len(st.waiting); {
		c := st.waiting[i]
		if now.Before(c.deadline) {
			i++
			continue
		}
		// teardown removes c from waiting.
		st.teardown(c, fmt.Errorf("cephrdma: %v: neighbour resolution: %w", c.peer, ErrTimeout))
		work++
	}
	return work
}

// Close tears every connection down, closes the listeners Serve runs on
// and waits for the stack's goroutines to end. It must be called on the
// poll goroutine; the stack is unusable afterwards.
func (st *Stack) Close() error {
	if st.closed {
		return nil
	}
	st.closed = true
	st.mu.Lock()
	st.mu.closed = true
	for ln := range st.mu.listeners {
		ln.Close()
	}
	for tcp := range st.mu.tcps {
		tcp.Close()
	}
	st.mu.Unlock()
	close(st.quit)
	st.cancel()
	for c := range st.conns {
		st.teardown(c, ErrClosed)
	}
	st.wg.Wait()
	for {
		select {
		case cmd := <-st.cmds:
			if cmd.tcp != nil {
				cmd.tcp.Close()
			}
			continue
		default:
		}
		break
	}
	if err := st.pd.Dealloc(); err != nil {
		return fmt.Errorf("cephrdma: close: %w", err)
	}
	return nil
}

func (st *Stack) isClosed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.closed
}

// track registers a TCP connection and its goroutine, so that Close can
// end both; it reports false when the stack is closed.
func (st *Stack) track(tcp net.Conn) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.closed {
		return false
	}
	st.mu.tcps[tcp] = struct{}{}
	st.wg.Add(1)
	return true
}

func (st *Stack) untrack(tcp net.Conn) {
	st.mu.Lock()
	delete(st.mu.tcps, tcp)
	st.mu.Unlock()
	tcp.Close()
}

// send queues cmd for the poll goroutine; false means the stack closed.
func (st *Stack) send(cmd command) bool {
	select {
	case st.cmds <- cmd:
		return true
	case <-st.quit:
		return false
	}
}

// call queues cmd and waits for the poll goroutine's reply.
func (st *Stack) call(cmd command) (reply, bool) {
	if !st.send(cmd) {
		return reply{}, false
	}
	select {
	case r := <-cmd.c.reply:
		return r, r.err == nil
	case <-st.quit:
		return reply{}, false
	}
}

func (st *Stack) register(c *Conn) {
	st.conns[c] = struct{}{}
	st.cnt.active.Add(1)
}

// report counts a failure and passes it to OnError; the stack's own
// Close is not a failure.
func (st *Stack) report(peer netip.AddrPort, err error) {
	if errors.Is(err, ErrClosed) {
		return
	}
	st.cnt.failed.Add(1)
	if st.cfg.OnError != nil {
		st.cfg.OnError(peer, err)
	}
}

// handle runs one command on the poll goroutine.
func (st *Stack) handle(cmd *command) {
	c := cmd.c
	if _, ok := st.conns[c]; !ok && cmd.kind != cmdSetup {
		// A connection never registered (refused before setup) or
		// already torn down: only a first failure is news.
		if cmd.kind == cmdFail && c.state == stNew {
			c.state = stDead
			st.report(c.peer, cmd.err)
		}
		return
	}
	switch cmd.kind {
	case cmdSetup:
		st.setup(c, cmd)
	case cmdPeer:
		c.remote = cmd.rec
		st.resolve(c)
	case cmdUp:
		st.up(c)
	case cmdFail, cmdGone:
		st.teardown(c, cmd.err)
	}
}

// setup creates the connection's QP and session. The server answers
// once the client's neighbour is resolved; the client sends its record
// at once.
func (st *Stack) setup(c *Conn, cmd *command) {
	if c.state == stDead {
		// A dial torn down (Close) while it connected.
		cmd.tcp.Close()
		c.replyErr(ErrClosed)
		return
	}
	c.tcp, c.peer = cmd.tcp, cmd.peer
	if !c.client {
		if len(st.conns) >= st.cfg.MaxConns {
			c.state = stDead
			cmd.tcp.Close()
			err := fmt.Errorf("cephrdma: %v: %d connections: %w", c.peer, len(st.conns), ErrTooManyConns)
			c.replyErr(err)
			st.report(c.peer, err)
			return
		}
		st.register(c)
		c.remote = cmd.rec
	}
	c.state = stSetup
	qp, err := session.NewQP(st.pd, st.cfg.Session)
	if err != nil {
		st.teardown(c, fmt.Errorf("cephrdma: %v: %w", c.peer, err))
		return
	}
	c.qp = qp
	if c.sess, err = session.New(qp, st.cfg.Session); err != nil {
		st.teardown(c, fmt.Errorf("cephrdma: %v: %w", c.peer, err))
		return
	}
	c.local = wire.CephQPRecord{QPN: qp.QPN(), PSN: st.cfg.NewPSN() & wire.PSNMask, GID: st.gid}
	if c.client {
		c.answer(c.local)
		return
	}
	c.local.PeerQPN = c.remote.QPN
	st.resolve(c)
}

// resolve looks the peer's MAC address up, then connects the QP.
func (st *Stack) resolve(c *Conn) {
	c.state = stResolving
	c.deadline = st.now.Add(st.cfg.IOTimeout)
	st.waiting = append(st.waiting, c)
	ip := c.peer.Addr()
	st.cfg.Resolver.Resolve(ip, func(mac [6]byte, err error) { st.resolved(c, mac, err) })
}

func (st *Stack) resolved(c *Conn, mac [6]byte, err error) {
	if c.state != stResolving {
		return // timed out or torn down meanwhile
	}
	st.unwait(c)
	if err != nil {
		st.teardown(c, fmt.Errorf("cephrdma: %v: resolve: %w", c.peer, err))
		return
	}
	if err := st.connect(c, mac); err != nil {
		st.teardown(c, fmt.Errorf("cephrdma: %v: %w", c.peer, err))
		return
	}
	c.state = stSetup
	if c.client {
		c.local.PeerQPN = c.remote.QPN // the acknowledgement
	}
	c.answer(c.local)
}

// connect moves the QP to RTR and RTS toward the peer's record.
func (st *Stack) connect(c *Conn, mac [6]byte) error {
	av := roce.AddressVector{DstMAC: mac, DstIP: c.peer.Addr(), TOS: st.cfg.TOS, TTL: st.cfg.TTL}
	if err := c.qp.Modify(st.cfg.Session.RTRAttr(av, c.remote.QPN, c.remote.PSN)); err != nil {
		return err
	}
	return c.qp.Modify(st.cfg.Session.RTSAttr(c.local.PSN))
}

// up marks the exchange complete and hands the session over.
func (st *Stack) up(c *Conn) {
	if c.state != stSetup || c.qp.State() != roce.QPStateRTS {
		st.teardown(c, fmt.Errorf("cephrdma: %v: exchange completed in state %d: %w", c.peer, c.state, roce.ErrInvalidState))
		return
	}
	c.state = stUp
	st.cnt.established.Add(1)
	if c.client {
		c.dialed(c, nil)
		return
	}
	if err := c.svc.Attach(c.sess, func(err error) { st.serviceDone(c, err) }); err != nil {
		st.teardown(c, fmt.Errorf("cephrdma: %v: %w", c.peer, err))
		return
	}
	c.attached = true
}

// serviceDone ends a connection whose service has finished with it.
func (st *Stack) serviceDone(c *Conn, err error) {
	c.attached = false
	st.teardown(c, err)
}

func (st *Stack) unwait(c *Conn) {
	for i, w := range st.waiting {
		if w == c {
			last := len(st.waiting) - 1
			st.waiting[i] = st.waiting[last]
			st.waiting[last] = nil
			st.waiting = st.waiting[:last]
			return
		}
	}
}

// teardown ends c: the service lets go of the session, the QP is
// destroyed with its completion queues, the buffers are freed and the
// TCP connection is closed, which ends its goroutine.
func (st *Stack) teardown(c *Conn, err error) {
	if c.state == stDead {
		return
	}
	wasUp := c.state == stUp
	if c.state == stResolving {
		st.unwait(c)
	}
	c.state, c.err = stDead, err
	if c.attached {
		c.attached = false
		c.svc.Detach(c.sess)
	}
	if c.qp != nil {
		c.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
		if c.sess != nil {
			c.sess.Release()
		}
		scq, rcq := c.qp.SendCQ(), c.qp.RecvCQ()
		c.qp.Destroy()
		scq.Destroy()
		rcq.Destroy()
		c.qp = nil
	}
	if c.tcp != nil {
		c.tcp.Close()
	}
	c.replyErr(errOr(err, ErrClosed))
	delete(st.conns, c)
	st.cnt.active.Add(-1)
	st.cnt.closed.Add(1)
	if err != nil {
		st.report(c.peer, err)
	}
	if c.client && !wasUp {
		c.dialed(nil, errOr(err, ErrClosed))
	}
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// orDefault sets *v to d when it is not positive: not set.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
