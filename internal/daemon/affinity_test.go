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
		{"unset: not confined", config.EAL{Lcores: "0-3", MainLcore: 0}, []int{2, 3}, nil},
		{"set in the configuration", config.EAL{Lcores: "0-1", MainLcore: 0, RuntimeCPUs: "0,4-5"}, []int{1}, []int{0, 4, 5}},
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
