package mempool

import (
	"errors"
	"strings"
	"testing"
)

func TestSize(t *testing.T) {
	d := Demand{RxDescriptors: 1024, TxDescriptors: 1024, RingSlots: 4095, Lcores: 2, CacheSize: 256, InFlight: 64, Headroom: 100}
	need := 1024 + 1024 + 4095 + 2*256*3/2 + 64 + 100
	if d.Need() != need {
		t.Fatalf("Need = %d, want %d", d.Need(), need)
	}
	tests := []struct {
		want    int
		size    int
		tooFew  bool
		mention []string
	}{
		{want: 0, size: 8191},
		{want: need, size: need},
		{want: 100000, size: 100000},
		{want: need - 1, tooFew: true, mention: []string{"7074 configured", "7075 needed", "rx descriptors 1024", "ring slots 4095", "caches 2×256×1.5"}},
	}
	for _, tt := range tests {
		got, err := Size(tt.want, d)
		if tt.tooFew {
			if !errors.Is(err, ErrTooSmall) {
				t.Fatalf("Size(%d): err = %v, want ErrTooSmall", tt.want, err)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			continue
		}
		if err != nil || got != tt.size {
			t.Errorf("Size(%d) = %d, %v; want %d", tt.want, got, err, tt.size)
		}
	}
}
