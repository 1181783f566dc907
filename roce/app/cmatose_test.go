package app_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/app"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
)

// toseClient is one connection of a cmatose client (cmatose.c
// run_client): count receives of size bytes posted before connecting,
// wait for count messages, then post count sends, then wait for the
// server to disconnect.
type toseClient struct {
	p       *peerQP
	sqp     *roce.QP
	done    doneRecorder
	recvd   int
	replied bool
	sent    int
}

// TestCMAToseClients runs several cmatose-like clients at once against
// CMATose, at cmatose's default and at the message sizes the interop
// test uses, on a clean and on a lossy link.
func TestCMAToseClients(t *testing.T) {
	for _, tc := range []struct {
		size, count, conns int
		link               memlink.Config
	}{
		{100, 10, 1, memlink.Config{}}, // cmatose defaults
		{64, 10, 3, memlink.Config{}},
		{4096, 10, 3, lossy(0.05)},
		{64 << 10, 4, 2, lossy(0.02)},
		{1000, 500, 2, roctest.Faulty(3, 0.01)},
	} {
		t.Run(fmt.Sprintf("S%d/C%d/c%d/loss%v", tc.size, tc.count, tc.conns, tc.link.Loss), func(t *testing.T) {
			n := newTestNet(t, tc.link)
			alloc := &roce.HeapAllocator{}
			tose, err := app.NewCMATose(n.Srv, app.CMAToseConfig{Count: tc.count, Size: tc.size, Allocator: alloc})
			n.Serve(tose, err)
			clients := make([]*toseClient, tc.conns)
			for i := range clients {
				c := &toseClient{}
				if c.sqp, err = tose.Accept(c.done.done); err != nil {
					t.Fatal(err)
				}
				c.p = n.newPeer(tc.count, tc.count, tc.size)
				for range tc.count {
					c.p.postRecv(t, 0, 0, tc.size)
				}
				n.connect(c.sqp, c.p.qp, defaultCM())
				clients[i] = c
			}
			// cmatose's server starts sending once every connection is
			// established; ours starts per connection.
			for _, c := range clients {
				if err := tose.Established(c.sqp); err != nil {
					t.Fatal(err)
				}
			}
			var wcs [16]roce.WorkCompletion
			n.Run(50_000_000, func() bool {
				all := true
				for _, c := range clients {
					// Drain the CQs: one acknowledgement may complete
					// more sends than a poll takes, and nothing may follow.
					for k := c.p.rcq.Poll(wcs[:]); k > 0; k = c.p.rcq.Poll(wcs[:]) {
						for _, wc := range wcs[:k] {
							if wc.Status != roce.WCSuccess || int(wc.ByteLen) != tc.size {
								t.Fatalf("client receive %+v", wc)
							}
						}
						c.recvd += k
					}
					if c.recvd == tc.count && !c.replied {
						c.replied = true
						for range tc.count {
							c.p.postSend(t, roce.SendWR{Opcode: roce.WRSend, SGList: []roce.SGE{c.p.mr.SGE(0, tc.size)}})
						}
					}
					for k := c.p.scq.Poll(wcs[:]); k > 0; k = c.p.scq.Poll(wcs[:]) {
						for _, wc := range wcs[:k] {
							if wc.Status != roce.WCSuccess {
								t.Fatalf("client send %+v", wc)
							}
						}
						c.sent += k
					}
					all = all && c.done.calls > 0 && c.sent == tc.count
				}
				return all
			})
			for i, c := range clients {
				if c.done.calls != 1 || c.done.err != nil {
					t.Errorf("connection %d: done %d times, %v", i, c.done.calls, c.done.err)
				}
				if c.recvd != tc.count {
					t.Errorf("connection %d: client received %d messages, want %d", i, c.recvd, tc.count)
				}
				// The daemon disconnects; the client sees DISCONNECTED
				// and tears down.
				if err := tose.Close(c.sqp); err != nil {
					t.Fatal(err)
				}
				c.p.destroy(t)
			}
			want := uint64(tc.count * tc.conns)
			st := tose.Stats()
			if st.MessagesIn != want || st.MessagesOut != want || st.BytesOut != want*uint64(tc.size) ||
				st.Completed != uint64(tc.conns) || st.Active != 0 {
				t.Errorf("stats %+v", st)
			}
			roctest.Shutdown(t, tose, alloc)
		})
	}
}

// TestCMAToseWaitsForEstablished: nothing is sent before the connection
// manager reports the connection established, even with the QP in RTS
// (Linux moves the passive QP to RTS before sending the REP).
func TestCMAToseWaitsForEstablished(t *testing.T) {
	n := newTestNet(t, memlink.Config{})
	tose, err := app.NewCMATose(n.Srv, app.CMAToseConfig{})
	n.Serve(tose, err)
	sqp, err := tose.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := n.newPeer(10, 10, 100)
	for range 10 {
		p.postRecv(t, 0, 0, 100)
	}
	n.connect(sqp, p.qp, defaultCM())
	for range 100 {
		n.Poll()
	}
	if p.rcq.Len() != 0 || sqp.Stats().TxPackets != 0 {
		t.Fatalf("sent before established: %d messages", p.rcq.Len())
	}
	tose.Established(sqp)
	n.Run(100_000, func() bool { return p.rcq.Len() == 10 })
}

// TestCMAToseClientTooBig: a reply larger than RecvSize fails the
// connection with a length error.
func TestCMAToseClientTooBig(t *testing.T) {
	n := newTestNet(t, memlink.Config{})
	tose, err := app.NewCMATose(n.Srv, app.CMAToseConfig{Count: 2, Size: 64})
	sqp, d := n.serveAccept(tose, err)
	p := n.newPeer(2, 2, 4096)
	p.postRecv(t, 0, 0, 4096)
	p.postRecv(t, 0, 0, 4096)
	n.connect(sqp, p.qp, defaultCM())
	tose.Established(sqp)
	n.Run(100_000, func() bool { return p.rcq.Len() == 2 })
	p.postSend(t, roce.SendWR{Opcode: roce.WRSend, SGList: []roce.SGE{p.mr.SGE(0, 4096)}})
	n.Run(100_000, func() bool { return d.calls > 0 })
	if !errors.Is(d.err, roce.ErrLocalLength) {
		t.Errorf("done with %v", d.err)
	}
	tose.Close(sqp)
	p.destroy(t)
}
