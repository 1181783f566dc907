package cm

import (
	"errors"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

// TestDeferredAccept: an AcceptFunc that defers (the bridge, while it
// dials the daemon off the poll loop) answers later with Complete; the
// peer's duplicate REQs meanwhile change nothing.
func TestDeferredAccept(t *testing.T) {
	n := newTestNet(t, testConfig(), testConfig())
	var pending []*Conn
	if err := n.b.m.Listen(testPort, func(req *ConnRequest) (Accept, error) {
		pending = append(pending, req.Conn)
		return Accept{}, ErrDeferred
	}); err != nil {
		t.Fatal(err)
	}
	a := n.a.dial(t, ipB, testPort, nil)
	n.Run(10_000, func() bool { return len(pending) == 1 })
	// Past the peer's first REQ retransmission: still deferred, no answer.
	n.Now = n.Now.Add(testConfig().RetransmitTimeout + time.Millisecond)
	n.Poll()
	if a.connected != 0 || len(pending) != 1 {
		t.Fatalf("before Complete: connected %d, %d requests seen", a.connected, len(pending))
	}
	b := n.b.newApp(t)
	b.echo = true
	if err := n.b.m.Complete(pending[0], Accept{QP: b.qp, Events: b.events()}, nil); err != nil {
		t.Fatal(err)
	}
	if err := n.b.m.Complete(pending[0], Accept{QP: b.qp}, nil); !errors.Is(err, ErrInvalidState) {
		t.Errorf("a second Complete: %v, want ErrInvalidState", err)
	}
	n.Run(10_000, func() bool { return a.connected > 0 && b.connected > 0 })
	if a.connErr != nil || b.connErr != nil {
		t.Fatalf("connect: active %v, passive %v", a.connErr, b.connErr)
	}
	if err := n.a.m.Disconnect(a.conn); err != nil {
		t.Fatal(err)
	}
	n.Settle()
	n.checkClean(n.a, "A")
	n.checkClean(n.b, "B")
}

// TestDeferredAcceptTimesOut: an application that never answers leaves
// the peer with a REJ, not a hang, and its late Complete fails.
func TestDeferredAcceptTimesOut(t *testing.T) {
	n := newTestNet(t, testConfig(), testConfig())
	var pending *Conn
	n.b.m.Listen(testPort, func(req *ConnRequest) (Accept, error) {
		pending = req.Conn
		return Accept{}, ErrDeferred
	})
	a := n.a.dial(t, ipB, testPort, nil)
	n.Run(100_000, func() bool { return a.connected > 0 })
	if !errors.Is(a.connErr, ErrRejected) {
		t.Fatalf("Connected(%v), want a REJ", a.connErr)
	}
	b := n.b.newApp(t)
	if err := n.b.m.Complete(pending, Accept{QP: b.qp, Events: b.events()}, nil); !errors.Is(err, ErrInvalidState) {
		t.Errorf("late Complete: %v, want ErrInvalidState", err)
	}
	// Still the application's: it frees it, as after a failed Connected.
	b.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	b.release()
	n.Settle()
	n.checkClean(n.a, "A")
	n.checkClean(n.b, "B")
}
