package daemon_test

import (
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/configs"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
)

// Without hugepages the EAL has eal.memory_mb and no more: a pool and
// rings that cannot fit are refused by the plan, which check-config shares,
// instead of failing mempool creation at start.
func TestPlanNoHugeMemory(t *testing.T) {
	tests := []struct {
		name, from, to string
		want           string // "": fits
	}{
		{"default", "", "", ""},
		{"rings too big", "    ring_size: 4096", "    ring_size: 16777216",
			"line 13: eal.memory_mb: 512 MB cannot hold the mbuf pool (33554431 mbufs × 2304 bytes"},
		{"hugepages grow past -m", "no_huge: true", "no_huge: false\n  huge_dir: /x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := string(configs.Default)
			if tt.from != "" {
				if !strings.Contains(y, tt.from) {
					t.Fatalf("default config lacks %q", tt.from)
				}
				y = strings.Replace(y, tt.from, tt.to, 1)
			}
			cfg, err := config.Parse([]byte(y))
			if err != nil {
				t.Fatal(err)
			}
			_, err = daemon.NewPlan(cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("NewPlan: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("NewPlan: %v, want an error with %q", err, tt.want)
			}
		})
	}
}
