package roced_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/roced"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/pmd"
	"github.com/cephdpdkd/cephdpdkd/roce/neigh"
	"github.com/cephdpdkd/cephdpdkd/roce/ping"
)

// loopPort is a net_ring port, which receives what it transmits through
// one rte_ring: a TX queue the test can fill, and read back.
type loopPort struct {
	port    *pmd.Port
	pool    *mempool.Pool
	lanes   *dispatch.RingSet // a service lane nothing feeds
	rx      *pmd.Burst
	scratch pmd.TxScratch
}

func newLoopPort(t *testing.T, name, dev string) *loopPort {
	t.Helper()
	pool, err := mempool.New(mempool.Config{Name: "roced_" + name, Size: 4095, CacheSize: 0, DataRoom: 2176, Socket: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := pmd.ProbeDevice(dev); err != nil {
		t.Fatal(err)
	}
	p, err := pmd.OpenPort(dev)
	if err != nil {
		pmd.RemoveDevice(dev)
		t.Fatal(err)
	}
	lp := &loopPort{port: p, pool: pool}
	t.Cleanup(func() {
		lp.drain()
		lp.rx.Free()
		p.Stop()
		p.Close()
		pmd.RemoveDevice(dev)
	})
	if err := p.Configure(pmd.PortConfig{RxQueues: 1, TxQueues: 1, RxDescriptors: 256, TxDescriptors: 256}, pool.C()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if lp.rx, err = pmd.NewBurst(32); err != nil {
		t.Fatal(err)
	}
	ring, err := dispatch.NewRing("cdd_"+name, 64, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ring.Close() })
	if lp.lanes, err = dispatch.NewRingSet([]*dispatch.Ring{ring}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lp.lanes.Free)
	return lp
}

// fill transmits 60-byte frames until the TX queue refuses, leaving room
// frames of room, and returns how many it sent.
func (lp *loopPort) fill(t *testing.T, room int) int {
	t.Helper()
	junk := [][]byte{make([]byte, 60)}
	n := 0
	for pmd.TxCopy(lp.port.ID(), 0, lp.pool.C(), junk, &lp.scratch) == 1 {
		n++
	}
	if n < 64 {
		t.Fatalf("TX queue took %d frames", n)
	}
	// Make room by receiving the oldest.
	if room > 0 {
		b, err := pmd.NewBurst(room)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		if k := b.RxBurst(lp.port.ID(), 0); k != room {
			t.Fatalf("made room for %d frames, want %d", k, room)
		}
	}
	return n - room
}

// recv receives up to 32 frames, copied.
func (lp *loopPort) recv() [][]byte {
	var out [][]byte
	k := lp.rx.RxBurst(lp.port.ID(), 0)
	for i := range k {
		out = append(out, bytes.Clone(lp.rx.Frame(i)))
	}
	lp.rx.FreeAll()
	return out
}

func (lp *loopPort) drain() int {
	n := 0
	for {
		f := lp.recv()
		if len(f) == 0 {
			return n
		}
		n += len(f)
	}
}

// A TX queue that refuses part of a burst leaves the rest with the
// sender, which offers it again, as the RoCE endpoint does: the frames
// all arrive, in order, and none counts as a consumer drop (an mbuf freed
// undelivered); the refusals are counted apart.
func TestRingIOKeepsRefusedFrames(t *testing.T) {
	lp := newLoopPort(t, "keep", "net_ring7")
	io, err := roced.NewRingIO(lp.lanes, lp.port.ID(), 0, lp.pool, 32)
	if err != nil {
		t.Fatal(err)
	}
	defer io.Close()
	const room = 8
	junk := lp.fill(t, room)

	var frames [][]byte
	for i := range 32 {
		frames = append(frames, bytes.Repeat([]byte{byte(i)}, 64+i))
	}
	pending := frames
	refusals := 0
	var got [][]byte
	for len(pending) > 0 {
		k := io.SendBurst(pending)
		if k < len(pending) {
			refusals += len(pending) - k
		}
		pending = pending[k:]
		for _, f := range lp.recv() {
			if len(f) > 60 || f[0] != 0 {
				got = append(got, f)
			} else {
				junk--
			}
		}
	}
	got = append(got, filterJunk(lp, &junk)...)
	if io.Drops.Load() != 0 {
		t.Errorf("consumer drops %d for frames the queue refused and the sender kept", io.Drops.Load())
	}
	if refusals == 0 || io.TxRefused.Load() != uint64(refusals) {
		t.Errorf("TxRefused %d, refusals %d (room for %d of %d)", io.TxRefused.Load(), refusals, room, len(frames))
	}
	if len(got) != len(frames) || junk != 0 {
		t.Fatalf("received %d of %d frames, %d filler frames missing", len(got), len(frames), junk)
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Errorf("frame %d: %d bytes, want %d", i, len(got[i]), len(frames[i]))
		}
	}
}

func filterJunk(lp *loopPort, junk *int) [][]byte {
	var out [][]byte
	for {
		fs := lp.recv()
		if len(fs) == 0 {
			return out
		}
		for _, f := range fs {
			if len(f) > 60 || f[0] != 0 {
				out = append(out, f)
			} else {
				*junk--
			}
		}
	}
}

// The node's frame I/O on a full TX queue: the who-has of a roce-ping is
// refused, counted as refused and not as a consumer drop, and the
// neighbour table's next probe reaches the wire once there is room. The
// node's collectors export the connection manager's counters and the
// refusals.
func TestNodeTxRefusedNotDropped(t *testing.T) {
	lp := newLoopPort(t, "node", "net_ring8")
	y := roceOnlyConfig("txr", "net_ring8", 64, "10.78.0.2", `
  listen:
    - {port: 7471, app: echo}
  max_sessions: 1
  memory_mb: 16`)
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	node, err := roced.New(roced.Config{
		RoCE: cfg.RoCE, Lanes: lp.lanes, Port: lp.port.ID(), Pool: lp.pool,
		PortMAC: net.HardwareAddr{2, 0, 0, 0, 0x78, 2}, Burst: 32, Log: slog.New(slog.NewTextHandler(logWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(node.Collectors()...)

	lp.fill(t, 0)
	peer := netip.MustParseAddr("10.78.0.9")
	done := make(chan ping.Result, 1)
	if err := node.Ping(peer, 7471, ping.Config{Count: 1, Size: 64}, func(r ping.Result) { done <- r }); err != nil {
		t.Fatal(err)
	}
	node.Poll() // dial: the first who-has meets the full queue
	if d := node.Counts().Drops.Load(); d != 0 {
		t.Errorf("consumer drops %d after a refused send", d)
	}
	if v := metric(t, reg, "cephdpdkd_roce_endpoint_tx_refused_total"); v != 1 {
		t.Errorf("tx refused %v, want 1", v)
	}
	lp.drain()

	// The next probe, a second later, goes out: nothing was lost for
	// good. Without an answer the ping fails after the last probe.
	var whoHas int
	var res ping.Result
	deadline := time.Now().Add(10 * time.Second)
wait:
	for {
		node.Poll()
		for _, f := range lp.recv() {
			var a neigh.ARP
			if neigh.ParseARP(f, &a) == nil && a.Op == neigh.OpRequest && a.TargetIP == peer {
				whoHas++
			}
		}
		select {
		case res = <-done:
			break wait
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("roce-ping did not end")
		}
		time.Sleep(200 * time.Microsecond)
	}
	if res.Err == nil || whoHas != neigh.DefaultMaxProbes-1 {
		t.Errorf("ping ended with %v after %d who-has on the wire, want an error after %d", res.Err, whoHas, neigh.DefaultMaxProbes-1)
	}
	if d := node.Counts().Drops.Load(); d != 0 {
		t.Errorf("consumer drops %d", d)
	}
	for name, want := range map[string]float64{
		"cephdpdkd_roce_endpoint_tx_refused_total": 1,
		"cephdpdkd_roce_cm_failed_total":           1,
		"cephdpdkd_roce_cm_connections":            1, // in time-wait
	} {
		if v := metric(t, reg, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

// metric returns the sum of a family's values.
func metric(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	var sum float64
	for _, m := range gatherFamily(t, g, name).GetMetric() {
		sum += value(m)
	}
	return sum
}

// gatherFamily gathers g and returns the family called name.
func gatherFamily(t *testing.T, g prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	panic(fmt.Sprintf("metric %v", m))
}
