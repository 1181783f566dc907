package app_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// cmClient is a client connection made through the client's connection
// manager, as librdmacm's rdma_connect does.
type cmClient struct {
	p            *peerQP
	conn         *cm.Conn
	connected    int
	connErr      error
	disconnected int
	discErr      error
}

func (n *testNet) cmDial(tb testing.TB, port uint16, p *peerQP) *cmClient {
	tb.Helper()
	c := &cmClient{p: p}
	var err error
	c.conn, err = n.CliM.Dial(ipSrv, port, p.qp, nil, cm.Events{
		Connected:    func(_ *cm.Conn, err error) { c.connected++; c.connErr = err },
		Disconnected: func(_ *cm.Conn, err error) { c.disconnected++; c.discErr = err },
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// listen serves svc, which its constructor has just returned with err,
// behind app.Listen on port of the server's connection manager.
func (n *testNet) listen(svc app.Server, err error, port uint16) {
	n.TB.Helper()
	n.Serve(svc, err)
	if err := app.Listen(n.SrvM, port, svc); err != nil {
		n.TB.Fatal(err)
	}
}

// TestCMServices runs each service behind app.Listen and a real
// connection manager, with clients connecting through another: the
// whole path rdma_client, ucmatose and rping take, on clean and lossy
// links, and checks that every connection's resources are freed
// however it ends.
func TestCMServices(t *testing.T) {
	for _, link := range []memlink.Config{{}, lossy(0.05)} {
		t.Run(fmt.Sprintf("rdma_client/loss%v", link.Loss), func(t *testing.T) {
			n := newCMNet(t, link)
			alloc := &roce.HeapAllocator{}
			echo, err := app.NewRawEcho(n.Srv, app.RawConfig{MessageSize: 4096, Depth: 4, Allocator: alloc})
			n.listen(echo, err, 7471)
			p := n.newPeer(1, 1, 32)
			p.postRecv(t, 1, 16, 16)
			c := n.cmDial(t, 7471, p)
			n.Run(10_000_000, func() bool { return c.connected > 0 })
			if c.connErr != nil {
				t.Fatal(c.connErr)
			}
			fill(p.mr.Bytes()[:16], 3)
			p.postSend(t, roce.SendWR{Opcode: roce.WRSend, SGList: []roce.SGE{p.mr.SGE(0, 16)}})
			n.Run(10_000_000, func() bool { return p.rcq.Len() > 0 && p.scq.Len() > 0 })
			if wc := roctest.PollOne(t, p.rcq); wc.Status != roce.WCSuccess || wc.ByteLen != 16 ||
				!bytes.Equal(p.mr.Bytes()[16:32], p.mr.Bytes()[:16]) {
				t.Errorf("echo %+v %x", wc, p.mr.Bytes()[:32])
			}
			if err := n.CliM.Disconnect(c.conn); err != nil {
				t.Fatal(err)
			}
			n.Run(10_000_000, func() bool { return c.disconnected > 0 && echo.Stats().Active == 0 })
			p.destroy(t)
			if st := echo.Stats(); st.Completed != 1 || st.MessagesIn != 1 {
				t.Errorf("stats %+v", st)
			}
			roctest.Shutdown(t, echo, alloc)
		})

		t.Run(fmt.Sprintf("ucmatose/loss%v", link.Loss), func(t *testing.T) {
			n := newCMNet(t, link)
			alloc := &roce.HeapAllocator{}
			const count, size, conns = 10, 4096, 3
			tose, err := app.NewCMATose(n.Srv, app.CMAToseConfig{Count: count, Size: size, Allocator: alloc})
			n.listen(tose, err, 7472)
			var cs []*cmClient
			for range conns {
				p := n.newPeer(count, count, size)
				for range count {
					p.postRecv(t, 0, 0, size)
				}
				cs = append(cs, n.cmDial(t, 7472, p))
			}
			replied := make([]bool, conns)
			n.Run(50_000_000, func() bool {
				all := true
				for i, c := range cs {
					if c.connErr != nil {
						t.Fatal(c.connErr)
					}
					if !replied[i] && c.p.rcq.Len() == count {
						replied[i] = true
						for range count {
							c.p.postSend(t, roce.SendWR{Opcode: roce.WRSend, SGList: []roce.SGE{c.p.mr.SGE(0, size)}})
						}
					}
					// cmatose's client waits for the server to disconnect.
					all = all && c.disconnected > 0
				}
				return all && tose.Stats().Active == 0
			})
			for i, c := range cs {
				if c.discErr != nil {
					t.Errorf("connection %d: disconnected with %v", i, c.discErr)
				}
				c.p.destroy(t)
			}
			if st := tose.Stats(); st.Completed != conns || st.MessagesIn != conns*count || st.MessagesOut != conns*count {
				t.Errorf("stats %+v", st)
			}
			roctest.Shutdown(t, tose, alloc)
		})

		t.Run(fmt.Sprintf("rping/loss%v", link.Loss), func(t *testing.T) {
			n := newCMNet(t, link)
			alloc := &roce.HeapAllocator{}
			srv, err := app.NewRPingServer(n.Srv, app.RPingConfig{Allocator: alloc})
			n.listen(srv, err, 7174)
			rc := newRPingClient(t, n, 64)
			c := n.cmDial(t, 7174, rc.p)
			n.Run(10_000_000, func() bool { return c.connected > 0 })
			if c.connErr != nil {
				t.Fatal(c.connErr)
			}
			start := byte(65)
			for round := range 10 {
				rc.ping(round, &start)
			}
			n.CliM.Disconnect(c.conn)
			n.Run(10_000_000, func() bool { return c.disconnected > 0 && srv.Stats().Active == 0 })
			rc.p.destroy(t)
			if st := srv.Stats(); st.RDMAReads != 10 || st.RDMAWrites != 10 || st.Completed != 1 {
				t.Errorf("stats %+v", st)
			}
			roctest.Shutdown(t, srv, alloc)
		})
	}
}

// TestCMRefused: a service that cannot take a connection makes the
// connection manager reject it; the client fails at once.
func TestCMRefused(t *testing.T) {
	n := newCMNet(t, memlink.Config{})
	echo, err := app.NewRawEcho(n.Srv, app.RawConfig{MessageSize: 64, Depth: 1, MaxConns: 1})
	n.listen(echo, err, 7471)
	first := n.cmDial(t, 7471, n.newPeer(1, 1, 64))
	n.Run(10_000_000, func() bool { return first.connected > 0 })
	second := n.cmDial(t, 7471, n.newPeer(1, 1, 64))
	n.Run(10_000_000, func() bool { return second.connected > 0 })
	if first.connErr != nil || second.connErr == nil {
		t.Errorf("first %v, second %v", first.connErr, second.connErr)
	}
	if st := echo.Stats(); st.Accepted != 1 || st.Active != 1 {
		t.Errorf("stats %+v", st)
	}
}
