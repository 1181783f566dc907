package cephrdma_test

import (
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
)

// The connection manager resolves neighbours for the stacks.
var _ cephrdma.Resolver = (*cm.Manager)(nil)

// TestStats: both stacks count one connection, accepted on the server,
// dialed on the client, established and active on both (internal/metrics
// checks how these Stats are exported).
func TestStats(t *testing.T) {
	n := newTestNet(t, netOpts{})
	conn := n.mustDial()
	n.run(5*time.Second, func() bool { return n.srvStack.Stats().Established == 1 })
	srv, cli := n.srvStack.Stats(), n.cliStack.Stats()
	for _, tc := range []struct {
		name      string
		got, want uint64
	}{
		{"server accepted", srv.Accepted, 1},
		{"server established", srv.Established, 1},
		{"client dialed", cli.Dialed, 1},
		{"client failed", cli.Failed, 0},
		{"server active", srv.Active, 1},
		{"client active", cli.Active, 1},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	conn.Close()
	n.shutdown()
}

// TestPollIdleNoAllocs: the poll loop calls Stack.Poll every round; when
// there is nothing to do, it must cost no allocation.
func TestPollIdleNoAllocs(t *testing.T) {
	n := newTestNet(t, netOpts{})
	conn := n.mustDial()
	now := time.Now()
	if a := testing.AllocsPerRun(1000, func() { n.srvStack.Poll(now); n.cliStack.Poll(now) }); a != 0 {
		t.Errorf("%v allocations per idle Poll", a)
	}
	conn.Close()
	n.shutdown()
}

// BenchmarkExchange measures connection setup: TCP connect, the three
// records, QPs to RTS on both sides and the session handed to the echo.
func BenchmarkExchange(b *testing.B) {
	n := newTestNet(b, netOpts{})
	b.ReportAllocs()
	for b.Loop() {
		conn := n.mustDial()
		conn.Close()
	}
	b.StopTimer()
	n.run(5*time.Second, func() bool { return n.srvStack.Stats().Active == 0 })
	n.shutdown()
}

// BenchmarkSessionEcho moves 1 MiB through the echo of a connection
// made by the exchange: the data path after setup.
func BenchmarkSessionEcho(b *testing.B) {
	n := newTestNet(b, netOpts{})
	conn := n.mustDial()
	s := conn.Session()
	msg, back := make([]byte, 1<<20), make([]byte, 1<<20)
	b.SetBytes(2 << 20)
	b.ReportAllocs()
	for b.Loop() {
		sent, got := 0, 0
		for got < len(msg) {
			if sent < len(msg) {
				k, _ := s.Send(msg[sent:])
				sent += k
			}
			n.Poll()
			k, _ := s.Recv(back[got:])
			got += k
		}
	}
	b.StopTimer()
	conn.Close()
	n.shutdown()
}
