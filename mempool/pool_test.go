package mempool_test

import (
	"bytes"
	"errors"
	"hash/crc32"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/pmd"
	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithEAL(m, "mempool", nil))
}

func TestPoolCountsAndLeakCheck(t *testing.T) {
	pool, err := mempool.New(mempool.Config{Name: "mp_leak", Size: 1023, CacheSize: 0, DataRoom: 2176, Socket: -1})
	if err != nil {
		t.Fatal(err)
	}
	if pool.Available() != 1023 || pool.InUse() != 0 {
		t.Fatalf("fresh pool: available %d, in use %d", pool.Available(), pool.InUse())
	}
	const dev = "net_null40,size=64"
	if err := pmd.ProbeDevice(dev); err != nil {
		t.Fatal(err)
	}
	port, err := pmd.OpenPort("net_null40")
	if err != nil {
		t.Fatal(err)
	}
	if err := port.Configure(pmd.PortConfig{RxQueues: 1, TxQueues: 1, RxDescriptors: 128, TxDescriptors: 128}, pool.C()); err != nil {
		t.Fatal(err)
	}
	if err := port.Start(); err != nil {
		t.Fatal(err)
	}
	b, err := pmd.NewBurst(16)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.RxBurst(port.ID(), 0); n != 16 {
		t.Fatalf("burst %d", n)
	}
	if pool.InUse() < 16 {
		t.Errorf("in use %d with a burst of 16 held", pool.InUse())
	}
	port.Stop()
	port.Close()
	pmd.RemoveDevice(dev)
	// The burst still holds 16 mbufs: the check must catch them.
	err = pool.Close()
	if !errors.Is(err, mempool.ErrLeak) {
		t.Fatalf("Close with 16 mbufs out: %v, want ErrLeak", err)
	}
	t.Log(err)
	b.SetLen(0) // the pool is gone; do not free into it
	b.Free()
}

func TestPoolRejectsBadConfig(t *testing.T) {
	for _, c := range []mempool.Config{
		{Name: "mp_bad1", Size: 0, DataRoom: 2176},
		{Name: "mp_bad2", Size: 100, DataRoom: 64},
		{Name: "mp_bad3", Size: 100, DataRoom: 70000},
	} {
		if p, err := mempool.New(c); err == nil {
			p.Close()
			t.Errorf("New(%+v) succeeded", c)
		}
	}
}

func TestMemoryLimitAndFree(t *testing.T) {
	m := mempool.NewMemory("mp_mem", 1<<20)
	defer m.Close()
	a, err := m.Alloc(600 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a[:64], make([]byte, 64)) {
		t.Error("memory not zeroed")
	}
	if _, err := m.Alloc(600 << 10); !errors.Is(err, mempool.ErrNoMemory) {
		t.Fatalf("allocation over the limit: %v", err)
	}
	m.Free(a)
	if m.InUse() != 0 {
		t.Fatalf("in use %d after free", m.InUse())
	}
	if _, err := m.Alloc(600 << 10); err != nil {
		t.Fatal(err)
	}
	if n := m.Close(); n != 600<<10 {
		t.Errorf("Close freed %d bytes", n)
	}
}

// A RoCE session whose registered buffers live in DPDK memory moves a
// checksummed stream over a lossy in-memory link, and gives the memory
// back when released.
func TestRoCESessionOnDPDKMemory(t *testing.T) {
	memA, memB := mempool.NewMemory("mp_roce_a", 64<<20), mempool.NewMemory("mp_roce_b", 64<<20)
	defer memA.Close()
	defer memB.Close()
	la, lb := memlink.New(memlink.Config{Seed: 3, Loss: 0.005, Reorder: 0.005})
	macA, macB := [6]byte{2, 0, 0, 0, 0, 0xa}, [6]byte{2, 0, 0, 0, 0, 0xb}
	ipA, ipB := netip.MustParseAddr("10.99.0.10"), netip.MustParseAddr("10.99.0.11")
	epA, err := roce.NewEndpoint(roce.EndpointConfig{MAC: macA, IP: ipA, IO: la})
	if err != nil {
		t.Fatal(err)
	}
	epB, err := roce.NewEndpoint(roce.EndpointConfig{MAC: macB, IP: ipB, IO: lb})
	if err != nil {
		t.Fatal(err)
	}
	cfg := session.DefaultConfig()
	cfg.SendBuffers, cfg.RecvBuffers = 8, 16
	cfg.Timeout = 10
	ca, cb := cfg, cfg
	ca.Allocator, cb.Allocator = memA, memB
	qa, err := session.NewQP(epA.NewPD(), ca)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := session.NewQP(epB.NewPD(), cb)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := session.New(qa, ca)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := session.New(qb, cb)
	if err != nil {
		t.Fatal(err)
	}
	if memA.InUse() < 8*cfg.BufferSize || memB.InUse() < 16*cfg.BufferSize {
		t.Fatalf("buffers not in DPDK memory: %d / %d bytes", memA.InUse(), memB.InUse())
	}
	for _, step := range []struct {
		qp   *roce.QP
		attr func() (*roce.QPAttr, roce.QPAttrMask)
	}{
		{qa, func() (*roce.QPAttr, roce.QPAttrMask) {
			return cfg.RTRAttr(roce.AddressVector{DstMAC: macB, DstIP: ipB}, qb.QPN(), 500)
		}},
		{qb, func() (*roce.QPAttr, roce.QPAttrMask) {
			return cfg.RTRAttr(roce.AddressVector{DstMAC: macA, DstIP: ipA}, qa.QPN(), 900)
		}},
		{qa, func() (*roce.QPAttr, roce.QPAttrMask) { return cfg.RTSAttr(900) }},
		{qb, func() (*roce.QPAttr, roce.QPAttrMask) { return cfg.RTSAttr(500) }},
	} {
		if err := step.qp.Modify(step.attr()); err != nil {
			t.Fatal(err)
		}
	}

	const size = 8 << 20
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*7 + i>>9)
	}
	want := crc32.ChecksumIEEE(src)
	got := crc32.NewIEEE()
	buf := make([]byte, 64<<10)
	sent, recvd := 0, 0
	now := time.Unix(0, 0)
	for rounds := 0; recvd < size; rounds++ {
		if rounds > 2_000_000 {
			t.Fatalf("stalled: sent %d received %d", sent, recvd)
		}
		if sent < size {
			n, err := sa.Send(src[sent:min(size, sent+200_000)])
			if err != nil && !errors.Is(err, roce.ErrWouldBlock) {
				t.Fatal(err)
			}
			sent += n
		}
		epA.Poll(now)
		epB.Poll(now)
		for {
			n, err := sb.Recv(buf)
			if errors.Is(err, roce.ErrWouldBlock) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got.Write(buf[:n])
			recvd += n
		}
		now = now.Add(50 * time.Microsecond)
	}
	if got.Sum32() != want {
		t.Fatalf("stream checksum %08x, want %08x", got.Sum32(), want)
	}
	for _, x := range []struct {
		qp *roce.QP
		s  *session.Session
	}{{qa, sa}, {qb, sb}} {
		if err := x.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState); err != nil {
			t.Fatal(err)
		}
		if err := x.s.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if memA.InUse() != 0 || memB.InUse() != 0 {
		t.Errorf("DPDK memory still in use after release: %d / %d bytes", memA.InUse(), memB.InUse())
	}
}
