package testenv

import (
	"fmt"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// Pool makes an mbuf pool of size mbufs whose leak check runs when the
// test ends: registered first, it runs after everything registered later
// (ports, loops, rings) has given its mbufs back. A leak fails the test.
func Pool(tb testing.TB, name string, size int) *mempool.Pool {
	tb.Helper()
	pool, err := mempool.New(mempool.Config{Name: name, Size: size, CacheSize: 0, DataRoom: 2176, Socket: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := pool.Close(); err != nil {
			tb.Errorf("pool %s: %v", name, err)
		}
	})
	return pool
}

// LoopPort hot-plugs net_ring devargs (e.g. "net_ring5") with queues
// queue pairs, started: its RX queue q receives what its TX queue q sent
// (at most 1023 frames waiting). At the end of the test what it still
// holds goes back to the pool and the device is removed.
func LoopPort(tb testing.TB, dev string, pool *mempool.Pool, queues int) *pmd.Port {
	tb.Helper()
	if err := pmd.ProbeDevice(dev); err != nil {
		tb.Fatal(err)
	}
	p, err := pmd.OpenPort(pmd.DeviceName(dev))
	if err != nil {
		pmd.RemoveDevice(dev)
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if b, err := pmd.NewBurst(32); err == nil {
			for q := range queues {
				for b.RxBurst(p.ID(), uint16(q)) > 0 {
					b.FreeAll()
				}
			}
			b.Free()
		}
		p.Stop()
		p.Close()
		pmd.RemoveDevice(dev)
	})
	cfg := pmd.PortConfig{RxQueues: uint16(queues), TxQueues: uint16(queues), RxDescriptors: 256, TxDescriptors: 256}
	if err := p.Configure(cfg, pool.C()); err != nil {
		tb.Fatal(err)
	}
	if err := p.Start(); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Send transmits frames on a port's TX queue q, copied into mbufs from
// pool, failing the test if the queue refuses any.
func Send(tb testing.TB, p *pmd.Port, pool *mempool.Pool, q uint16, frames [][]byte) {
	tb.Helper()
	var scratch pmd.TxScratch
	for len(frames) > 0 {
		n := pmd.TxCopy(p.ID(), q, pool.C(), frames, &scratch)
		if n == 0 {
			tb.Fatalf("tx queue %d refused %d frames", q, len(frames))
		}
		frames = frames[n:]
	}
}

// Lanes makes n rings of size slots named name.0, name.1..., closed (the
// packets left in them freed) when the test ends.
func Lanes(tb testing.TB, name string, n, size int) []*dispatch.Ring {
	tb.Helper()
	var rs []*dispatch.Ring
	for k := range n {
		r, err := dispatch.NewRing(fmt.Sprintf("%s.%d", name, k), size, -1)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { r.Close() })
		rs = append(rs, r)
	}
	return rs
}

// RingSet gathers rings into a set freed when the test ends.
func RingSet(tb testing.TB, rings ...*dispatch.Ring) *dispatch.RingSet {
	tb.Helper()
	s, err := dispatch.NewRingSet(rings)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Free)
	return s
}

// HoldGate holds eal's interrupt-thread gate until the test ends.
func HoldGate(tb testing.TB, eal *pmd.EAL) *pmd.Gate {
	tb.Helper()
	g, err := eal.HoldGate()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := eal.ReleaseGate(); err != nil {
			tb.Error(err)
		}
	})
	return g
}
