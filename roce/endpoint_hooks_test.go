package roce

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// arpRequest is a broadcast who-has for ipB from A.
func arpRequest() []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
	copy(f[6:12], macA[:])
	f[12], f[13] = 0x08, 0x06
	copy(f[14:22], []byte{0, 1, 8, 0, 6, 4, 0, 1})
	copy(f[22:28], macA[:])
	a4, b4 := ipA.As4(), ipB.As4()
	copy(f[28:32], a4[:])
	copy(f[38:42], b4[:])
	return f
}

// dispatcher is a NetworkDispatcher and a TransportDispatcher made of
// functions; a nil one is not called.
type dispatcher struct {
	frame func(frame []byte, now time.Time) bool
	learn func(ip netip.Addr, mac [6]byte, now time.Time)
	gsi   func(p *wire.Packet)
	event func(ev Event, now time.Time)
}

func (d *dispatcher) HandleFrame(f []byte, now time.Time) bool {
	return d.frame != nil && d.frame(f, now)
}

func (d *dispatcher) Learn(ip netip.Addr, mac [6]byte, now time.Time) {
	if d.learn != nil {
		d.learn(ip, mac, now)
	}
}

func (d *dispatcher) DeliverGSI(p *wire.Packet) {
	if d.gsi != nil {
		d.gsi(p)
	}
}

func (d *dispatcher) DeliverEvent(ev Event, now time.Time) {
	if d.event != nil {
		d.event(ev, now)
	}
}

func TestAttachOnce(t *testing.T) {
	n := newTestNet(t, memlink.Config{}, EndpointConfig{})
	d := &dispatcher{}
	if err := n.a.Attach(d, d); err != nil {
		t.Fatal(err)
	}
	if err := n.a.Attach(d, d); !errors.Is(err, ErrInvalidState) {
		t.Errorf("second Attach = %v, want ErrInvalidState", err)
	}
	// Nil dispatchers are allowed, and count as attached.
	if err := n.b.Attach(nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := n.b.Attach(d, d); !errors.Is(err, ErrInvalidState) {
		t.Errorf("Attach after Attach(nil, nil) = %v, want ErrInvalidState", err)
	}
}

func TestNetworkDispatcher(t *testing.T) {
	for _, tc := range []struct {
		name               string
		handler, takes     bool
		notRoCE, malformed uint64
	}{
		{"no handler", false, false, 1, 1},
		{"handler takes", true, true, 0, 1},
		{"handler refuses", true, false, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, memlink.Config{}, EndpointConfig{})
			var got [][]byte
			var at time.Time
			if tc.handler {
				n.b.Attach(&dispatcher{frame: func(f []byte, now time.Time) bool {
					got = append(got, append([]byte(nil), f...))
					at = now
					return tc.takes
				}}, nil)
			}
			if n.A.Link.SendBurst([][]byte{arpRequest(), {1, 2, 3}}) != 2 {
				t.Fatal("link full")
			}
			n.Poll()
			st := n.b.Stats()
			if tc.handler && (len(got) != 1 || len(got[0]) != 60 || !at.Equal(n.Now)) {
				t.Errorf("handler saw %d frames at %v", len(got), at)
			}
			// The 3-byte frame is malformed; the ARP frame is not RoCE,
			// and dropped unless the handler takes it.
			if st.Malformed != tc.malformed || st.NotRoCE != tc.notRoCE {
				t.Errorf("malformed %d, not RoCE %d; want %d, %d", st.Malformed, st.NotRoCE, tc.malformed, tc.notRoCE)
			}
		})
	}
}

func TestSendFrame(t *testing.T) {
	n := newTestNet(t, memlink.Config{QueueLen: 1}, EndpointConfig{})
	if err := n.a.SendFrame(arpRequest()); err != nil {
		t.Fatal(err)
	}
	if err := n.a.SendFrame(arpRequest()); !errors.Is(err, ErrWouldBlock) {
		t.Errorf("SendFrame into a full link = %v", err)
	}
	frames := make([][]byte, 4)
	if k := n.B.Link.RecvBurst(frames); k != 1 || len(frames[0]) != 60 || frames[0][13] != 0x06 {
		t.Errorf("received %d frames", k)
	}
	if st := n.a.Stats(); st.TxFrames != 1 {
		t.Errorf("tx frames %d", st.TxFrames)
	}
}

func TestNeighbourAndEventDispatch(t *testing.T) {
	n := newTestNet(t, memlink.Config{}, EndpointConfig{})
	type seen struct {
		ip  netip.Addr
		mac [6]byte
	}
	var learned []seen
	var tapped []Event
	var tappedAt time.Time
	d := &dispatcher{
		learn: func(ip netip.Addr, mac [6]byte, now time.Time) { learned = append(learned, seen{ip, mac}) },
		event: func(ev Event, now time.Time) { tapped, tappedAt = append(tapped, ev), now },
	}
	if err := n.b.Attach(d, d); err != nil {
		t.Fatal(err)
	}

	o := defaultQPOpts()
	var aEvents []Event
	qa, _ := n.newQP(n.pa, o, &aEvents)
	// B's QP has no event handler of its own: the tap still sees its events.
	scq, _ := n.b.NewCQ(CQConfig{Depth: 16})
	rcq, _ := n.b.NewCQ(CQConfig{Depth: 16})
	qb, err := n.pb.CreateQP(&QPInitAttr{SendCQ: scq, RecvCQ: rcq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if qb.Endpoint() != n.b || qa.Endpoint() != n.a || n.b.NumQPs() != 1 {
		t.Fatalf("Endpoint/NumQPs wrong: %d qps", n.b.NumQPs())
	}
	qb.Modify(&QPAttr{State: QPStateInit}, QPAttrState)
	mr := roctest.Region(t, n.pb, 64, AccessLocalWrite)
	qb.PostRecv(&RecvWR{ID: 1, SGList: []SGE{mr.SGE(0, 64)}})
	connectQP(t, qa, o, macB, ipB, qb.QPN(), o.psnB, o.psnA)
	// B stays in RTR: its first packet raises EventCommEstablished.
	if err := qb.Modify(&QPAttr{
		State: QPStateRTR, AV: AddressVector{DstMAC: macA, DstIP: ipA}, PathMTU: o.mtu, DestQPN: qa.QPN(), RQPSN: o.psnA,
	}, QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN); err != nil {
		t.Fatal(err)
	}
	src := roctest.Region(t, n.pa, 64, 0)
	if err := qa.PostSend(&SendWR{ID: 9, Opcode: WRSend, SGList: []SGE{src.SGE(0, 16)}}); err != nil {
		t.Fatal(err)
	}
	n.Run(1000, func() bool { return len(tapped) > 0 })
	// The event came in the last, busy, round, after which run moved the
	// clock on by a microsecond.
	if tapped[0].Type != EventCommEstablished || tapped[0].QPN != qb.QPN() || !tappedAt.Equal(n.Now.Add(-time.Microsecond)) {
		t.Errorf("tap saw %+v at %v", tapped, tappedAt)
	}
	if len(learned) == 0 || learned[0] != (seen{ipA, macA}) {
		t.Errorf("neighbour handler saw %+v", learned)
	}
	qb.Destroy()
	if n.b.NumQPs() != 0 {
		t.Errorf("%d qps after destroy", n.b.NumQPs())
	}
}
