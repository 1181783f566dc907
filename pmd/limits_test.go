package pmd

import (
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
)

// Validation refuses names and lcores by internal/config's copies of
// DPDK's limits; they must match the headers the daemon is built with.
func TestConfigLimitsMatchDPDK(t *testing.T) {
	memzone, ring, mempool, maxLcore := nameLimits()
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"RingNameMax", config.RingNameMax, ring - 1},
		{"MempoolNameMax", config.MempoolNameMax, mempool - 1},
		{"MaxLcores", config.MaxLcores, maxLcore},
		{"MaxBurst", config.MaxBurst, maxBurst},
		// A pool's chunk memzones are "MP_<pool>_<n>": room for n < 100.
		{"memzone room for MP_<pool>_99", config.MempoolNameMax + len("MP__99"), memzone - 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, DPDK's headers say %d", c.name, c.got, c.want)
		}
	}
}
