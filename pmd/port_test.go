package pmd_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

var testEAL *pmd.EAL

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithEAL(m, "pmd", &testEAL))
}

// openPort hot-plugs a vdev and configures it with one queue pair.
func openPort(t *testing.T, devargs string, pool *mempool.Pool) *pmd.Port {
	t.Helper()
	if err := pmd.ProbeDevice(devargs); err != nil {
		t.Fatal(err)
	}
	p, err := pmd.OpenPort(pmd.DeviceName(devargs))
	if err != nil {
		pmd.RemoveDevice(devargs)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		if err := pmd.RemoveDevice(devargs); err != nil {
			t.Error(err)
		}
	})
	cfg := pmd.PortConfig{RxQueues: 1, TxQueues: 1, RxDescriptors: 256, TxDescriptors: 256, Promiscuous: true}
	if err := p.Configure(cfg, pool.C()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func newPool(t *testing.T, name string) *mempool.Pool {
	t.Helper()
	pool, err := mempool.New(mempool.Config{Name: name, Size: 2047, CacheSize: 32, DataRoom: 2176, Socket: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Registered first so it runs last, after the port gave its mbufs back.
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
	})
	return pool
}

// net_ring without arguments receives what it transmits: a loopback that
// checks TxCopy, RxBurst and Frame move bytes intact.
func TestRingLoopback(t *testing.T) {
	pool := newPool(t, "pmd_ring")
	port := openPort(t, "net_ring0", pool)
	info, err := port.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "net_ring" {
		t.Errorf("driver = %q", info.Driver)
	}
	if l, err := port.Link(); err != nil || !l.Up {
		t.Errorf("link = %v, %v; want up", l, err)
	}

	var frames [][]byte
	for i := range 40 {
		f := bytes.Repeat([]byte{byte(i)}, 60+i*20)
		frames = append(frames, f)
	}
	var scratch pmd.TxScratch
	if n := pmd.TxCopy(port.ID(), 0, pool.C(), frames, &scratch); n != len(frames) {
		t.Fatalf("TxCopy sent %d of %d", n, len(frames))
	}
	b, err := pmd.NewBurst(32)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	var got [][]byte
	for len(got) < len(frames) {
		n := b.RxBurst(port.ID(), 0)
		if n == 0 {
			t.Fatalf("received %d of %d frames", len(got), len(frames))
		}
		for i := range n {
			got = append(got, bytes.Clone(b.Frame(i)))
		}
		b.FreeAll()
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Errorf("frame %d: got %d bytes %x..., want %d bytes", i, len(got[i]), got[i][:4], len(frames[i]))
		}
	}
	st, err := port.Stats(1)
	if err != nil {
		t.Fatal(err)
	}
	if st.RxPackets != uint64(len(frames)) || st.TxPackets != uint64(len(frames)) {
		t.Errorf("stats rx %d tx %d, want %d each", st.RxPackets, st.TxPackets, len(frames))
	}
	if _, err := port.XStats(); err != nil {
		t.Error(err)
	}
	if pool.InUse() > 256 {
		t.Errorf("%d mbufs in use after the frames were freed; only RX descriptors should hold any", pool.InUse())
	}
}

// net_null produces packets on every poll; a burst must fill and its
// frames must have the device's packet size.
func TestNullBurst(t *testing.T) {
	pool := newPool(t, "pmd_null")
	port := openPort(t, "net_null0,size=128", pool)
	b, err := pmd.NewBurst(64)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	n := b.RxBurst(port.ID(), 0)
	if n != 64 {
		t.Fatalf("burst of %d, want 64", n)
	}
	if len(b.Frame(0)) != 128 || b.Bytes() != 64*128 {
		t.Errorf("frame %d bytes, burst %d bytes", len(b.Frame(0)), b.Bytes())
	}
	b.FreeAll()
	if b.Len() != 0 {
		t.Errorf("Len after FreeAll = %d", b.Len())
	}
}

func TestOpenPortMissing(t *testing.T) {
	if _, err := pmd.OpenPort("net_nothere9"); err == nil {
		t.Fatal("OpenPort of a missing device succeeded")
	}
	if err := pmd.ProbeDevice("net_bogusdriver0"); err == nil {
		t.Fatal("probe of an unknown driver succeeded")
	}
	if _, err := pmd.NewBurst(pmd.MaxBurst + 1); err == nil {
		t.Fatal("oversized burst accepted")
	}
}

// SetTapTxMTU writes through a pointer in net_tap's private TX queue: on
// another driver's queue the pointer is not the port's MTU, and it must
// refuse rather than write.
func TestSetTapTxMTURefusesOtherDrivers(t *testing.T) {
	pool := newPool(t, "pmd_tapmtu")
	port := openPort(t, "net_null1,size=64", pool)
	err := port.SetTapTxMTU(9000)
	if err == nil || !strings.Contains(err.Error(), "not the port's") {
		t.Fatalf("SetTapTxMTU on net_null: %v; want a refusal", err)
	}
}
