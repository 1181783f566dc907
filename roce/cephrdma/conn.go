package cephrdma

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// connState is where a connection is, as the poll goroutine sees it.
type connState uint8

const (
	stNew       connState = iota // goroutine running, poll side not involved yet
	stSetup                      // QP created; the exchange goes on over TCP
	stResolving                  // waiting for the peer's MAC address
	stUp                         // session up
	stDead                       // torn down
)

// Conn is one Ceph async+rdma connection: a TCP side channel, a QP and
// the session.Session on it. Its methods must be called on the poll
// goroutine.
type Conn struct {
	st     *Stack
	client bool
	addr   string             // Dial's address
	svc    app.SessionService // server side: who gets the session
	dialed func(*Conn, error) // client side: Dial's callback
	reply  chan reply         // poll goroutine → connection goroutine

	// Poll goroutine only, once the connection is registered.
	peer     netip.AddrPort
	tcp      net.Conn
	state    connState
	qp       *roce.QP
	sess     *session.Session
	local    wire.CephQPRecord
	remote   wire.CephQPRecord
	deadline time.Time
	attached bool
	err      error
}

// Session returns the connection's session, nil once it is closed.
// After Close its buffers are released and its methods fail.
func (c *Conn) Session() *session.Session {
	if c.state == stDead {
		return nil
	}
	return c.sess
}

// RemoteAddr returns the peer's TCP address.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.peer }

// Records returns the QP records exchanged: ours and the peer's.
func (c *Conn) Records() (local, remote wire.CephQPRecord) { return c.local, c.remote }

// Closed reports whether the connection has been torn down, by Close or
// because the peer went away (its TCP connection closed).
func (c *Conn) Closed() bool { return c.state == stDead }

// Err returns why the connection ended, nil if it ended normally or
// has not ended.
func (c *Conn) Err() error { return c.err }

// Close tears the connection down: the QP goes to ERROR and is
// destroyed, the session's buffers are freed and the TCP connection is
// closed, which tells a Ceph peer the session is over. To let the peer
// read everything first, close the session (Session().Close) and wait
// until its sends are acknowledged.
func (c *Conn) Close() error {
	c.st.teardown(c, nil)
	return nil
}

// reply is the poll goroutine's answer to a command: the record to send
// next, or why the exchange stops.
type reply struct {
	rec wire.CephQPRecord
	err error
}

// answer sends the goroutine the record to write next. Each command
// that calls gets exactly one answer, so the slot is free; the select
// only guarantees that the poll goroutine never blocks.
func (c *Conn) answer(rec wire.CephQPRecord) {
	select {
	case c.reply <- reply{rec: rec}:
	default:
	}
}

// replyErr answers a waiting goroutine without blocking; a goroutine
// that is not waiting learns from its closed TCP connection instead.
func (c *Conn) replyErr(err error) {
	select {
	case c.reply <- reply{err: err}:
	default:
	}
}

type cmdKind uint8

const (
	cmdSetup cmdKind = iota + 1 // TCP up (and, server, first record valid): create the QP
	cmdPeer                     // client: the server's record is valid: connect the QP
	cmdUp                       // the exchange is complete
	cmdFail                     // the exchange failed (err)
	cmdGone                     // the TCP connection ended after the exchange (err, or nil for a close)
)

// command is what a connection goroutine asks of the poll goroutine.
type command struct {
	kind cmdKind
	c    *Conn
	tcp  net.Conn       // cmdSetup
	peer netip.AddrPort // cmdSetup
	rec  wire.CephQPRecord
	err  error
}

// serveConn runs the server side of the exchange on tcp.
func (st *Stack) serveConn(tcp net.Conn, svc app.SessionService) {
	defer st.wg.Done()
	defer st.untrack(tcp)
	c := &Conn{st: st, svc: svc, reply: make(chan reply, 1)}
	to := st.cfg.IOTimeout
	peer, err := peerAddr(tcp)
	fail := func(step string, err error) {
		tcp.Close()
		st.send(command{kind: cmdFail, c: c, err: fmt.Errorf("cephrdma: server, peer %v: %s: %w", peer, step, err)})
	}
	if err != nil {
		fail("peer address", err)
		return
	}
	c.peer = peer // for a refusal before setup; the poll goroutine reads it after the command
	var buf [wire.CephQPRecordLen]byte
	hello, err := readRecord(tcp, &buf, to)
	if err == nil {
		err = checkHello(&hello, peer.Addr())
	}
	if err != nil {
		fail("read first record", err)
		return
	}
	r, ok := st.call(command{kind: cmdSetup, c: c, tcp: tcp, peer: peer, rec: hello})
	if !ok {
		return // refused or torn down: the poll goroutine has reported it
	}
	if err := writeRecord(tcp, &r.rec, to); err != nil {
		fail("write record", err)
		return
	}
	for dups := 0; ; dups++ {
		ack, err := readRecord(tcp, &buf, to)
		if err != nil {
			fail("read acknowledgement", err)
			return
		}
		dup, err := checkAck(&ack, &hello, r.rec.QPN)
		if dup && dups < maxDuplicateHellos {
			continue
		}
		if dup {
			err = fmt.Errorf("%w: first record repeated %d times", ErrBadRecord, dups+1)
		}
		if err != nil {
			fail("read acknowledgement", err)
			return
		}
		break
	}
	if st.send(command{kind: cmdUp, c: c}) {
		st.watch(c, tcp, peer)
	}
}

// dialConn runs the client side of the exchange toward addr.
func (st *Stack) dialConn(c *Conn, addr string) {
	defer st.wg.Done()
	fail := func(step string, err error) {
		st.send(command{kind: cmdFail, c: c, err: fmt.Errorf("cephrdma: client, server %s: %s: %w", addr, step, err)})
	}
	d := st.cfg.Dialer
	tcp, err := d.DialContext(st.ctx, "tcp", addr)
	if err != nil {
		fail("connect", err)
		return
	}
	if !st.track(tcp) {
		tcp.Close()
		return
	}
	// track counted this goroutine once more.
	defer st.wg.Done()
	defer st.untrack(tcp)
	peer, err := peerAddr(tcp)
	if err != nil {
		fail("peer address", err)
		return
	}
	r, ok := st.call(command{kind: cmdSetup, c: c, tcp: tcp, peer: peer})
	if !ok {
		return
	}
	to := st.cfg.IOTimeout
	if err := writeRecord(tcp, &r.rec, to); err != nil {
		fail("write first record", err)
		return
	}
	var buf [wire.CephQPRecordLen]byte
	srv, err := readRecord(tcp, &buf, to)
	if err == nil {
		err = checkReply(&srv, r.rec.QPN, peer.Addr())
	}
	if err != nil {
		fail("read reply", err)
		return
	}
	if r, ok = st.call(command{kind: cmdPeer, c: c, rec: srv}); !ok {
		return
	}
	if err := writeRecord(tcp, &r.rec, to); err != nil {
		fail("write acknowledgement", err)
		return
	}
	if st.send(command{kind: cmdUp, c: c}) {
		st.watch(c, tcp, peer)
	}
}

func role(c *Conn) string {
	if c.client {
		return "client"
	}
	return "server"
}

// watch waits for the end of the TCP connection of an established
// session. There is no deadline: an idle side channel is the normal
// state for as long as the session lasts, and teardown closes tcp to
// end this read. TCP keep-alive (on by default for Go's connections)
// notices a peer host that vanished.
func (st *Stack) watch(c *Conn, tcp net.Conn, peer netip.AddrPort) {
	if err := tcp.SetReadDeadline(time.Time{}); err != nil {
		st.send(command{kind: cmdGone, c: c, err: err})
		return
	}
	var b [1]byte
	n, err := tcp.Read(b[:])
	switch {
	case n > 0:
		err = fmt.Errorf("cephrdma: %s, peer %v: %w", role(c), peer, ErrUnexpectedData)
	case errors.Is(err, io.EOF):
		err = nil // the peer closed the session
	default:
		err = fmt.Errorf("cephrdma: %s, peer %v: tcp: %w", role(c), peer, err)
	}
	st.send(command{kind: cmdGone, c: c, err: err})
}
