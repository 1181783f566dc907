package daemon

import (
	"slices"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
)

func TestRuntimeCPUs(t *testing.T) {
	for _, tt := range []struct {
		name    string
		eal     config.EAL
		pollers []int
		want    []int
	}{
		{"the lcores without a loop", config.EAL{Lcores: "0-3", MainLcore: 0}, []int{2, 3}, []int{0, 1}},
		{"only the main lcore left", config.EAL{Lcores: "0-1", MainLcore: 0}, []int{1}, []int{0}},
		{"main lcore not the first", config.EAL{Lcores: "0-1", MainLcore: 1}, []int{0}, []int{1}},
		{"set in the configuration", config.EAL{Lcores: "0-1", MainLcore: 0, RuntimeCPUs: "0-1,4"}, []int{1}, []int{0, 1, 4}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{EAL: tt.eal}
			for _, l := range tt.pollers {
				cfg.Pollers = append(cfg.Pollers, config.Poller{Lcore: l})
			}
			got, err := runtimeCPUs(cfg)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("runtimeCPUs = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
