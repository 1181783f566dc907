package cm

import (
	"errors"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// FuzzCMInput feeds arbitrary MADs, up to four in a row, to a listening
// Manager: it must not panic, must keep its connections within MaxConns,
// and must end with nothing left once its timers ran out and whatever
// got established was disconnected.
func FuzzCMInput(f *testing.F) {
	mad := func(tid uint64, m wire.CMMessage) []byte {
		b := make([]byte, wire.MADLen)
		wire.EncodeCM(b, tid, m)
		return b
	}
	req := wire.CMReq{
		LocalCommID: 0x1111, ServiceID: wire.ServiceID(wire.PSTCP, testPort), LocalQPN: 0x11,
		TransportType: wire.CMTransportRC, StartingPSN: 0x123, RetryCount: 7, PKey: 0xFFFF, PathMTU: 3,
		RNRRetry: 7, MaxCMRetries: 15, HopLimit: 64, LocalACKTimeout: 18, ResponderResources: 1, InitiatorDepth: 1,
	}
	cma := wire.CMAHeader{IPVersion: 4, SrcPort: 40000, SrcAddr: ipA, DstAddr: ipB}
	cma.Encode(req.PrivateData[:])
	reqMAD := mad(1, &req)
	f.Add(reqMAD)
	f.Add(append(append([]byte(nil), reqMAD...), reqMAD...))
	f.Add(append(append([]byte(nil), reqMAD...), mad(1, &wire.CMRtu{LocalCommID: 0x1111})...))
	f.Add(append(append([]byte(nil), reqMAD...), mad(2, &wire.CMDreq{LocalCommID: 0x1111, RemoteQPN: 0x11})...))
	f.Add(mad(3, &wire.CMRej{LocalCommID: 5, Reason: RejTimeout, ARILen: 8}))
	f.Add(mad(4, &wire.CMMra{RemoteCommID: 6, ServiceTimeout: 31}))
	f.Add(mad(5, &wire.CMRep{RemoteCommID: 7, LocalQPN: 0x11}))
	f.Add(mad(6, &wire.CMDrep{RemoteCommID: 8}))
	f.Add([]byte{1, 7, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg := testConfig()
		cfg.MaxConns = 3
		n := newTestNetLink(t, memlink.Config{QueueLen: 64, MaxFrame: 1024}, testConfig(), cfg)
		n.b.listen(t, testPort)
		av := roce.AddressVector{DstMAC: macB, DstIP: ipB}
		for i := 0; i < 4 && len(in) > 0; i++ {
			k := min(len(in), wire.MADLen)
			if err := n.a.ep.SendGSI(&av, in[:k]); err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatal(err)
			}
			in = in[k:]
			n.Quiesce()
			if c := n.b.m.NumConns(); c > cfg.MaxConns {
				t.Fatalf("%d connections, max %d", c, cfg.MaxConns)
			}
		}
		n.Settle()
		for _, a := range n.b.apps {
			if a.conn != nil && a.conn.State() == StateEstablished {
				n.b.m.Disconnect(a.conn)
			}
		}
		n.Settle()
		n.checkClean(n.b, "B")
		checkStats(t, n.b.m.Stats())
	})
}

// checkStats checks what the counters of Stats must agree on.
func checkStats(t *testing.T, st Stats) {
	t.Helper()
	var rx, tx uint64
	for m := range NumMessages {
		rx += st.Received[m]
		tx += st.Sent[m]
		if st.RetransmitsOf[m] > st.Sent[m] {
			t.Errorf("%v: %d retransmitted, %d sent", m, st.RetransmitsOf[m], st.Sent[m])
		}
	}
	if rx > st.MADsReceived || tx != st.MADsSent || st.RejectsSent != st.Sent[MsgREJ] ||
		st.Requests+st.DupRequests > st.Received[MsgREQ] ||
		st.Refused[LimitSessions]+st.Refused[LimitConns] > st.RejectsSent ||
		st.Established != st.EstablishedPassive+st.EstablishedActive {
		t.Errorf("inconsistent stats %+v", st)
	}
}
