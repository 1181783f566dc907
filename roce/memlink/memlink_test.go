package memlink

import (
	"bytes"
	"math"
	"testing"
)

func frames(n, size int) [][]byte {
	f := make([][]byte, n)
	for i := range f {
		f[i] = bytes.Repeat([]byte{byte(i)}, size)
	}
	return f
}

func TestDeliveryInOrder(t *testing.T) {
	a, b := New(Config{QueueLen: 8})
	if k := a.SendBurst(frames(10, 60)); k != 8 {
		t.Fatalf("accepted %d of 10 into an 8-frame queue", k)
	}
	out := make([][]byte, 5)
	k := b.RecvBurst(out)
	first := out[:k]
	if k != 5 {
		t.Fatalf("received %d", k)
	}
	for i, f := range first {
		if len(f) != 60 || f[0] != byte(i) {
			t.Errorf("frame %d: %d bytes of %d", i, len(f), f[0])
		}
	}
	// Frames from the last burst stay valid while the queue refills.
	a.SendBurst(frames(5, 60))
	for i, f := range first {
		if f[0] != byte(i) {
			t.Errorf("frame %d overwritten before the next RecvBurst", i)
		}
	}
	if b.Queued() != 8 || a.Queued() != 0 {
		t.Errorf("queued %d/%d", b.Queued(), a.Queued())
	}
	if s := a.Stats(); s.Sent != 13 || s.Delivered != 5 {
		t.Errorf("stats %+v", s)
	}
}

func TestFaultRates(t *testing.T) {
	const n = 20000
	for _, tc := range []struct {
		name  string
		cfg   Config
		count func(Stats) uint64
	}{
		{"loss", Config{Loss: 0.1}, func(s Stats) uint64 { return s.Lost }},
		{"reorder", Config{Reorder: 0.1}, func(s Stats) uint64 { return s.Reordered }},
		{"duplicate", Config{Duplicate: 0.1}, func(s Stats) uint64 { return s.Duplicated }},
		{"corrupt", Config{Corrupt: 0.1}, func(s Stats) uint64 { return s.Corrupted }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Seed = 3
			a, b := New(tc.cfg)
			out := make([][]byte, 64)
			var delivered, damaged, outOfOrder int
			last := -1
			// Bursts of four, so a reordered frame has one to overtake.
			burst := make([][]byte, 4)
			for i := 0; i < n; i += len(burst) {
				for j := range burst {
					burst[j] = []byte{byte((i + j) >> 8), byte(i + j), 0xAA, 0xAA}
				}
				a.SendBurst(burst)
				for k := b.RecvBurst(out); k > 0; k = b.RecvBurst(out) {
					for _, g := range out[:k] {
						delivered++
						if g[2] != 0xAA || g[3] != 0xAA {
							damaged++
							continue
						}
						seq := int(g[0])<<8 | int(g[1])
						if seq < last {
							outOfOrder++
						}
						last = seq
					}
				}
			}
			got := tc.count(a.Stats())
			want := 0.1
			if tc.name == "reorder" {
				want *= 0.75 // a burst's first frame finds the queue empty
			}
			if math.Abs(float64(got)/n-want) > 0.02 {
				t.Errorf("%d of %d frames, want about %.1f%%", got, n, 100*want)
			}
			switch tc.name {
			case "loss":
				if delivered != n-int(got) {
					t.Errorf("delivered %d", delivered)
				}
			case "duplicate":
				if delivered != n+int(got) {
					t.Errorf("delivered %d", delivered)
				}
			case "reorder":
				if outOfOrder == 0 {
					t.Error("nothing arrived out of order")
				}
			}
			if tc.name != "corrupt" && damaged != 0 {
				t.Errorf("%d frames damaged", damaged)
			}
		})
	}
}

func TestSeedReplays(t *testing.T) {
	run := func() Stats {
		a, b := New(Config{Seed: 42, Loss: 0.05, Reorder: 0.05, Duplicate: 0.05, Corrupt: 0.05})
		out := make([][]byte, 8)
		for i := 0; i < 1000; i++ {
			a.SendBurst(frames(4, 100))
			b.RecvBurst(out)
		}
		return a.Stats()
	}
	if s1, s2 := run(), run(); s1 != s2 {
		t.Errorf("same seed, different runs: %+v / %+v", s1, s2)
	}
}

func TestFilterAndOversize(t *testing.T) {
	a, b := New(Config{MaxFrame: 100})
	a.SetFilter(func(f []byte) bool { return f[0] != 1 })
	a.SendBurst(frames(3, 50))
	a.SendBurst([][]byte{make([]byte, 101)})
	out := make([][]byte, 4)
	if k := b.RecvBurst(out); k != 2 || out[0][0] != 0 || out[1][0] != 2 {
		t.Errorf("received %d frames", k)
	}
	if s := a.Stats(); s.Filtered != 1 || s.Oversize != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestNoAllocs(t *testing.T) {
	a, b := New(Config{Seed: 1, Loss: 0.1, Reorder: 0.1, Duplicate: 0.1, Corrupt: 0.1})
	in, out := frames(16, 1500), make([][]byte, 32)
	for range 4 {
		a.SendBurst(in)
		b.RecvBurst(out)
	}
	if n := testing.AllocsPerRun(100, func() {
		a.SendBurst(in)
		b.RecvBurst(out)
	}); n != 0 {
		t.Errorf("%v allocations per burst", n)
	}
}
