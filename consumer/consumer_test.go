package consumer_test

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/internal/roced"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithEAL(m, "consumer", nil))
}

// Test frames are 60 bytes tagged with a service, lane and sequence
// number after the Ethernet header; the classifier of the feeding loops
// has one service, so content does not matter to it.
const frameLen = 60

func frame(svc, lane, seq uint32) []byte {
	f := make([]byte, frameLen)
	binary.BigEndian.PutUint32(f[14:], svc)
	binary.BigEndian.PutUint32(f[18:], lane)
	binary.BigEndian.PutUint32(f[22:], seq)
	return f
}

type tag struct{ svc, lane, seq uint32 }

func readTag(t *testing.T, f []byte) tag {
	t.Helper()
	if len(f) != frameLen {
		t.Fatalf("frame of %d bytes, want %d", len(f), frameLen)
	}
	return tag{binary.BigEndian.Uint32(f[14:]), binary.BigEndian.Uint32(f[18:]), binary.BigEndian.Uint32(f[22:])}
}

// feed puts count frames tagged (svc, lane k, 0..count-1) into each lane
// k of rings the way the data path does: a poll loop per lane receives
// them from a net_ring queue of its own and dispatches them.
func feed(t *testing.T, dev string, pool *mempool.Pool, svc uint32, rings []*dispatch.Ring, count int) {
	t.Helper()
	port := testenv.LoopPort(t, dev, pool, len(rings))
	cls, err := classify.Compile(nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	svcs := []*dispatch.Service{{Name: "s", Rings: rings}}
	var loops []*dispatch.Poller
	for k := range rings {
		p, err := dispatch.NewPoller(dispatch.PollerConfig{Lcore: uint(k + 1), Port: port.ID(), Queues: []uint16{uint16(k)},
			Lane: k, BurstSize: 32, Classifier: cls, Services: svcs})
		if err != nil {
			t.Fatal(err)
		}
		loops = append(loops, p)
		var frames [][]byte
		for i := range count {
			frames = append(frames, frame(svc, uint32(k), uint32(i)))
		}
		testenv.Send(t, port, pool, uint16(k), frames)
	}
	for {
		work := 0
		for _, p := range loops {
			work += p.PollOnce()
		}
		if work == 0 {
			break
		}
	}
	for _, p := range loops {
		p.Free()
	}
	if n := svcs[0].Stats.Packets.Load(); n != uint64(len(rings)*count) {
		t.Fatalf("fed %d packets, want %d (drops %d)", n, len(rings)*count, svcs[0].Stats.Drops.Load())
	}
}

// receive takes every frame waiting on a port's RX queue, in order.
func receive(t *testing.T, p *pmd.Port, q uint16) []tag {
	t.Helper()
	b, err := pmd.NewBurst(32)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	var got []tag
	for b.RxBurst(p.ID(), q) > 0 {
		for i := range b.Len() {
			got = append(got, readTag(t, b.Frame(i)))
		}
		b.FreeAll()
	}
	return got
}

// checkOrder checks that each (service, lane) arrives as 0, 1, 2...
func checkOrder(t *testing.T, got []tag) {
	t.Helper()
	next := map[[2]uint32]uint32{}
	for _, g := range got {
		k := [2]uint32{g.svc, g.lane}
		if g.seq != next[k] {
			t.Fatalf("service %d lane %d: seq %d, want %d", g.svc, g.lane, g.seq, next[k])
		}
		next[k]++
	}
}

func pollUntilIdle(t *testing.T, c dispatch.Consumer) {
	t.Helper()
	for range 10000 {
		if c.Poll() == 0 {
			return
		}
	}
	t.Fatal("the consumer never went idle")
}

// A sink drains every lane of its set, counts, frees, and allocates
// nothing per poll.
func TestSinkCountsAndFrees(t *testing.T) {
	pool := testenv.Pool(t, "cns_sink", 4095)
	rings := testenv.Lanes(t, "cns_sink", 2, 2048)
	feed(t, "net_ring30", pool, 0, rings, 500)
	set := testenv.RingSet(t, rings...)
	sink, err := consumer.NewSink(set, 32)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)
	inUse := pool.InUse()
	if allocs := testing.AllocsPerRun(10, func() { sink.Poll() }); allocs != 0 {
		t.Errorf("Sink.Poll allocates %.1f times", allocs)
	}
	pollUntilIdle(t, sink)
	if n, b := sink.Packets.Load(), sink.Bytes.Load(); n != 1000 || b != 1000*frameLen {
		t.Errorf("sink counted %d packets, %d bytes; want 1000 and %d", n, b, 1000*frameLen)
	}
	if set.Count() != 0 {
		t.Errorf("%d packets left in the lanes", set.Count())
	}
	if freed := inUse - pool.InUse(); freed != 1000 {
		t.Errorf("the sink gave %d mbufs back, want 1000", freed)
	}
}

// A forwarder transmits its lanes' packets in order. What the TX queue
// refuses it keeps and offers again, taking nothing more from the lanes
// (which back up and drop at dispatch instead); Close frees what it still
// holds and counts it as drops.
func TestForwarderKeepsOrderAndHoldsRefused(t *testing.T) {
	pool := testenv.Pool(t, "cns_fwd", 4095)
	out := testenv.LoopPort(t, "net_ring31", pool, 1)
	rings := testenv.Lanes(t, "cns_fwd", 2, 2048)
	feed(t, "net_ring32", pool, 0, rings, 100)
	fwd, err := consumer.NewForwarder(testenv.RingSet(t, rings...), out.ID(), 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			fwd.Close()
		}
	})
	pollUntilIdle(t, fwd)
	got := receive(t, out, 0)
	if len(got) != 200 || fwd.Packets.Load() != 200 || fwd.Bytes.Load() != 200*frameLen {
		t.Fatalf("out port got %d, forwarder counted %d packets %d bytes; want 200, 200, %d",
			len(got), fwd.Packets.Load(), fwd.Bytes.Load(), 200*frameLen)
	}
	checkOrder(t, got)

	// Fill the out port's ring: the TX queue refuses everything.
	junk := [][]byte{frame(9, 9, 9)}
	var scratch pmd.TxScratch
	queued := 0
	for pmd.TxCopy(out.ID(), 0, pool.C(), junk, &scratch) == 1 {
		queued++
	}
	feed(t, "net_ring33", pool, 1, rings[:1], 40)
	if n := fwd.Poll(); n != 0 {
		t.Fatalf("forwarded %d into a full queue", n)
	}
	fwd.Poll()
	if c := rings[0].Count(); c != 8 {
		t.Errorf("lane holds %d, want 8: the forwarder holds one burst (32) and takes no more", c)
	}
	// Room for 4: the 4 oldest held packets go.
	b, _ := pmd.NewBurst(4)
	if b.RxBurst(out.ID(), 0) != 4 {
		t.Fatal("could not make room")
	}
	b.FreeAll()
	b.Free()
	if n := fwd.Poll(); n != 4 {
		t.Fatalf("forwarded %d with room for 4", n)
	}
	fwd.Close()
	closed = true
	if d := fwd.Drops.Load(); d != 28 {
		t.Errorf("Close dropped %d, want the 28 held (32 taken, 4 sent)", d)
	}
	got = receive(t, out, 0)
	if len(got) != queued {
		t.Fatalf("out port holds %d, want %d (full)", len(got), queued)
	}
	var sent []tag
	for _, g := range got {
		if g.svc != 9 {
			sent = append(sent, g)
		}
	}
	if len(sent) != 4 {
		t.Fatalf("%d forwarded frames in the out port, want 4", len(sent))
	}
	checkOrder(t, sent)
}

// The exception path drains its services in priority order, each
// across all its lanes, at most its budget per poll, and sends what the
// kernel interface gives back out the port.
func TestKernelPriorityAcrossLanes(t *testing.T) {
	pool := testenv.Pool(t, "cns_kern", 4095)
	ifPort := testenv.LoopPort(t, "net_ring35", pool, 1) // the "kernel" echoes what it is given
	out := testenv.LoopPort(t, "net_ring36", pool, 1)
	mon, osd := testenv.Lanes(t, "cns_kmon", 2, 2048), testenv.Lanes(t, "cns_kosd", 2, 2048)
	feed(t, "net_ring37", pool, 0, mon, 10)
	feed(t, "net_ring38", pool, 1, osd, 10)
	k, err := consumer.NewKernel(consumer.KernelConfig{
		Services: []*dispatch.RingSet{testenv.RingSet(t, mon...), testenv.RingSet(t, osd...)},
		IfPort:   ifPort.ID(), Port: out.ID(), TxQueue: 0, Budget: 8, Burst: 32,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	k.Poll()
	if m, o := k.Services[0].Packets.Load(), k.Services[1].Packets.Load(); m != 8 || o != 0 {
		t.Errorf("first poll: mon %d, osd %d; want 8 and 0 (budget 8, mon first)", m, o)
	}
	for range 100 {
		k.Poll()
	}
	if m, o := k.Services[0].Packets.Load(), k.Services[1].Packets.Load(); m != 20 || o != 20 {
		t.Errorf("mon %d, osd %d; want 20 each", m, o)
	}
	if n := k.FromKernel.Packets.Load(); n != 40 {
		t.Errorf("from the kernel: %d, want 40", n)
	}
	got := receive(t, out, 0)
	if len(got) != 40 {
		t.Fatalf("out port got %d, want 40", len(got))
	}
	for i, g := range got {
		if (i < 20) != (g.svc == 0) {
			t.Fatalf("frame %d is service %d: every mon frame must go before any osd frame", i, g.svc)
		}
	}
	checkOrder(t, got)
}

// RingIO (internal/roced, its only user) hands an endpoint the frames of
// all its lanes and transmits what it sends: tested here, with this
// file's lane helpers.
func TestRingIOReadsEveryLane(t *testing.T) {
	pool := testenv.Pool(t, "cns_rio", 4095)
	out := testenv.LoopPort(t, "net_ring39", pool, 1)
	rings := testenv.Lanes(t, "cns_rio", 3, 2048)
	feed(t, "net_ring40", pool, 0, rings, 20)
	io, err := roced.NewRingIO(testenv.RingSet(t, rings...), out.ID(), 0, pool, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(io.Close)
	frames := make([][]byte, 16)
	var got []tag
	for {
		n := io.RecvBurst(frames)
		if n == 0 {
			break
		}
		for _, f := range frames[:n] {
			got = append(got, readTag(t, f))
		}
		if s := io.SendBurst(frames[:n]); s != n {
			t.Fatalf("sent %d of %d", s, n)
		}
	}
	if len(got) != 60 || io.Packets.Load() != 60 {
		t.Fatalf("received %d (counted %d), want 60", len(got), io.Packets.Load())
	}
	checkOrder(t, got)
	sent := receive(t, out, 0)
	if len(sent) != 60 {
		t.Fatalf("out port got %d, want 60", len(sent))
	}
	checkOrder(t, sent)
}
