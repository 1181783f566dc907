package cephrdma_test

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// cephQP is a session QP set up the way Ceph's RDMAConnectedSocketImpl
// does, on one of the test endpoints, outside any Stack.
type cephQP struct {
	pd    *roce.PD
	qp    *roce.QP
	sess  *session.Session
	cfg   session.Config
	alloc *roce.HeapAllocator
	psn   uint32
}

func newCephQP(tb testing.TB, ep *roce.Endpoint, psn uint32) *cephQP {
	tb.Helper()
	c := &cephQP{pd: ep.NewPD(), cfg: testSessions(), alloc: &roce.HeapAllocator{}, psn: psn}
	c.cfg.Allocator = c.alloc
	var err error
	if c.qp, err = session.NewQP(c.pd, c.cfg); err != nil {
		tb.Fatal(err)
	}
	if c.sess, err = session.New(c.qp, c.cfg); err != nil {
		tb.Fatal(err)
	}
	return c
}

// activate is Ceph's activate(): RTR toward the peer's record, RTS.
func (c *cephQP) activate(tb testing.TB, mac [6]byte, ip netip.Addr, peer wire.CephQPRecord) {
	tb.Helper()
	av := roce.AddressVector{DstMAC: mac, DstIP: ip, TOS: 0x60, TTL: 6}
	if err := c.qp.Modify(c.cfg.RTRAttr(av, peer.QPN, peer.PSN)); err != nil {
		tb.Fatal(err)
	}
	if err := c.qp.Modify(c.cfg.RTSAttr(c.psn)); err != nil {
		tb.Fatal(err)
	}
}

// toDead is Ceph's close: QP to ERROR, then everything freed.
func (c *cephQP) toDead(tb testing.TB) {
	tb.Helper()
	c.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	scq, rcq := c.qp.SendCQ(), c.qp.RecvCQ()
	for _, err := range []error{c.sess.Release(), c.qp.Destroy(), scq.Destroy(), rcq.Destroy(), c.pd.Dealloc()} {
		if err != nil {
			tb.Fatal(err)
		}
	}
	if c.alloc.InUse() != 0 {
		tb.Errorf("%d bytes left", c.alloc.InUse())
	}
}

// TestCephClient: a client that behaves as Ceph's does (its own
// sprintf/sscanf records, activate, acknowledgement, close by fin then
// QP to ERROR and TCP closed) gets an echo from our server. In the
// abrupt variant it closes while the echo still has data to send.
func TestCephClient(t *testing.T) {
	for _, abrupt := range []bool{false, true} {
		name := map[bool]string{false: "orderly", true: "abrupt"}[abrupt]
		t.Run(name, func(t *testing.T) {
			n := newTestNet(t, netOpts{})
			ceph := newCephQP(t, n.Cli, 0x0BCDEF)
			qpn := ceph.qp.QPN()
			replies, ack, closeTCP := make(chan wire.CephQPRecord, 1), make(chan struct{}), make(chan struct{})
			res := n.rawClient(func(c net.Conn) error {
				if _, err := c.Write(cephRecord(0, qpn, 0x0BCDEF, 0, mapped(ipCli))); err != nil {
					return err
				}
				srv, err := readReply(t, c)
				if err != nil {
					return err
				}
				replies <- srv
				<-ack
				if _, err := c.Write(cephRecord(0, qpn, 0x0BCDEF, srv.QPN, mapped(ipCli))); err != nil {
					return err
				}
				<-closeTCP
				return nil
			})
			var srv wire.CephQPRecord
			n.run(5*time.Second, roctest.Received(replies, &srv))
			if srv.PeerQPN != qpn || srv.GID != mapped(ipSrv) || srv.LID != 0 {
				t.Errorf("server record %+v", srv)
			}
			ceph.activate(t, macSrv, ipSrv, srv)
			close(ack)
			n.run(5*time.Second, func() bool { return n.srvStack.Stats().Established == 1 })
			if abrupt {
				if _, err := ceph.sess.Send(make([]byte, 100_000)); err != nil {
					t.Fatal(err)
				}
				n.run(5*time.Second, func() bool { return n.svc.Stats().BytesIn > 0 })
				ceph.sess.Close()
				for range 10 {
					n.Poll()
				}
			} else {
				echoStream(t, n, ceph.sess, 1<<20, 7)
			}
			ceph.toDead(t)
			close(closeTCP)
			if err := <-res; err != nil {
				t.Fatal(err)
			}
			n.run(5*time.Second, func() bool { return n.srvStack.Stats().Active == 0 })
			if e := n.srvErrs.get(); len(e) != 0 {
				t.Errorf("server reported %v", e)
			}
			n.shutdown()
		})
	}
}

// TestDialCephServer: our client against a server that behaves as
// Ceph's does, which leaves peer_qpn 0 in its reply and keeps the TCP
// connection open until the session ends.
func TestDialCephServer(t *testing.T) {
	n := newTestNet(t, netOpts{noServe: true})
	ceph := newCephQP(t, n.Srv, 0x00AB12)
	qpn := ceph.qp.QPN()
	hellos, acks, reply, eof := make(chan wire.CephQPRecord, 1), make(chan wire.CephQPRecord, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		c, err := n.ln.Accept()
		if err != nil {
			eof <- err
			return
		}
		defer c.Close()
		hello, err := readReply(t, c)
		if err != nil {
			eof <- err
			return
		}
		hellos <- hello
		<-reply
		c.Write(cephRecord(0, qpn, 0x00AB12, 0, mapped(ipSrv)))
		ack, err := readReply(t, c)
		if err != nil {
			eof <- err
			return
		}
		acks <- ack
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadAll(c) // until our client closes
		eof <- err
	}()
	var (
		conn  *cephrdma.Conn
		derr  error
		hello wire.CephQPRecord
	)
	dialed := false
	if err := n.cliStack.Dial(n.addr(), func(c *cephrdma.Conn, err error) { conn, derr, dialed = c, err, true }); err != nil {
		t.Fatal(err)
	}
	n.run(5*time.Second, roctest.Received(hellos, &hello))
	if hello.PeerQPN != 0 || hello.GID != mapped(ipCli) || hello.LID != 0 || hello.QPN < 2 {
		t.Errorf("client's first record %+v", hello)
	}
	ceph.activate(t, macCli, ipCli, hello)
	close(reply)
	n.run(5*time.Second, func() bool { return dialed })
	if derr != nil {
		t.Fatal(derr)
	}
	ack := <-acks
	if ack.PeerQPN != qpn || ack.QPN != hello.QPN || ack.PSN != hello.PSN || ack.GID != hello.GID {
		t.Errorf("acknowledgement %+v for first record %+v", ack, hello)
	}
	echo := app.NewEcho(app.EchoConfig{})
	if err := echo.Attach(ceph.sess, nil); err != nil {
		t.Fatal(err)
	}
	n.AddFunc(echo.Poll)
	echoStream(t, n, conn.Session(), 2<<20, 9)
	conn.Close()
	if err := <-eof; err != nil {
		t.Errorf("ceph server: %v", err)
	}
	echo.Detach(ceph.sess)
	ceph.toDead(t)
	n.shutdown()
}
