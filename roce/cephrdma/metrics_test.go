package cephrdma_test

import (
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce/cephrdma"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/prometheus/client_golang/prometheus"
)

// The connection manager resolves neighbours for the stacks.
var _ cephrdma.Resolver = (*cm.Manager)(nil)

func TestCollector(t *testing.T) {
	n := newTestNet(t, netOpts{})
	conn, err := n.dial(n.addr())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(cephrdma.NewCollector(map[string]*cephrdma.Stack{"server": n.srvStack, "client": n.cliStack})); err != nil {
		t.Fatal(err)
	}
	n.run(5*time.Second, func() bool { return n.srvStack.Stats().Established == 1 })
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			key := f.GetName()
			for _, l := range m.Label {
				key += "," + l.GetValue()
			}
			if m.Counter != nil {
				got[key] = m.Counter.GetValue()
			} else {
				got[key] = m.Gauge.GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"cephdpdkd_roce_ceph_connections_total,accepted,server":    1,
		"cephdpdkd_roce_ceph_connections_total,established,server": 1,
		"cephdpdkd_roce_ceph_connections_total,dialed,client":      1,
		"cephdpdkd_roce_ceph_connections_total,failed,client":      0,
		"cephdpdkd_roce_ceph_connections_active,server":            1,
		"cephdpdkd_roce_ceph_connections_active,client":            1,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	conn.Close()
	n.shutdown()
}

// TestPollIdleNoAllocs: the poll loop calls Stack.Poll every round; when
// there is nothing to do, it must cost no allocation.
func TestPollIdleNoAllocs(t *testing.T) {
	n := newTestNet(t, netOpts{})
	conn, err := n.dial(n.addr())
	if err != nil {
		t.Fatal(err)
	}
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
		conn, err := n.dial(n.addr())
		if err != nil {
			b.Fatal(err)
		}
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
	conn, err := n.dial(n.addr())
	if err != nil {
		b.Fatal(err)
	}
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
			n.poll()
			k, _ := s.Recv(back[got:])
			got += k
		}
	}
	b.StopTimer()
	conn.Close()
	n.shutdown()
}
