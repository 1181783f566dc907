package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// The steps of Start and Reload that need no DPDK objects, each on its
// own; the daemon's other tests run them all together.

func parse(t *testing.T, extra string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(`
port: {name: p0, device: net_null0}
services:
  - {name: a}
  - {name: b}
  - {name: k, consumer: {type: kernel}}
default_service: a
kernel: {}
` + extra))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEveryKindBuilds(t *testing.T) {
	for _, k := range config.Kinds() {
		if kinds[k.Traits().Name] == nil {
			t.Errorf("consumer kind %q has no builder in kinds", k.Traits().Name)
		}
	}
	if len(kinds) != len(config.Kinds()) {
		t.Errorf("%d builders for %d kinds", len(kinds), len(config.Kinds()))
	}
}

// Only the kernel kind has a task, and only once the path exists.
func TestKindTask(t *testing.T) {
	kc := &consumer.Kernel{}
	for _, tt := range []struct {
		kind   string
		kernel *kernelPath
		want   dispatch.Consumer
	}{
		{config.ConsumerKernel, nil, nil},
		{config.ConsumerKernel, &kernelPath{consumer: kc}, kc},
		{config.ConsumerCount, &kernelPath{consumer: kc}, nil},
		{config.ConsumerRoCE, &kernelPath{consumer: kc}, nil},
		{config.ConsumerProcess, &kernelPath{consumer: kc}, nil},
		{config.ConsumerForward, &kernelPath{consumer: kc}, nil},
	} {
		d := &Daemon{kernel: tt.kernel}
		if got := kinds[tt.kind].task(d); got != tt.want {
			t.Errorf("%s with kernel path %v: task %v, want %v", tt.kind, tt.kernel != nil, got, tt.want)
		}
	}
}

func TestEALConfig(t *testing.T) {
	for _, tt := range []struct {
		name, extra string
		want        pmd.EALConfig
	}{
		{"defaults", "", pmd.EALConfig{Lcores: "0-1", MemoryMB: config.DefaultMemoryMB, FilePrefix: "cephdpdkd-p0", Devices: []string{"dev"}}},
		{"huge dir", `eal: {lcores: "2-3", main_lcore: 2, huge_dir: /mnt/h, extra_args: [--x]}`,
			pmd.EALConfig{Lcores: "2-3", MainLcore: 2, MemoryMB: config.DefaultMemoryMB, HugeDir: "/mnt/h", FilePrefix: "cephdpdkd-p0", Devices: []string{"dev"}, ExtraArgs: []string{"--x"}}},
		{"no huge", `eal: {no_huge: true, memory_mb: 256}`,
			pmd.EALConfig{Lcores: "0-1", MemoryMB: 256, NoHuge: true, FilePrefix: "cephdpdkd-p0", Devices: []string{"dev"}}},
	} {
		got := ealConfig(parse(t, tt.extra), "dev")
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// A jumbo MTU on a vdev that carries it anyway is left to the driver.
func TestPortConfig(t *testing.T) {
	c := parse(t, "mempool: {data_room: 10240}\n")
	for device, mtus := range map[string][2]int{
		"net_null0":              {9000, 9000},
		"net_af_packet0,iface=v": {1500, 1500},
		"net_af_packet0,iface=w": {9000, 0},
		"net_memif0,role=server": {4000, 0},
	} {
		c.Port.MTU = mtus[0]
		pc, jumbo := portConfig(c, device)
		if int(pc.MTU) != mtus[1] || (jumbo != "") != (mtus[1] == 0) || jumbo != "" && !strings.HasPrefix(device, jumbo) || pc.RxQueues != 1 || !pc.Promiscuous {
			t.Errorf("%s MTU %d: %+v, %q; want MTU %d", device, mtus[0], pc, jumbo, mtus[1])
		}
	}
}

func TestCheckPool(t *testing.T) {
	for _, tt := range []struct {
		need, have int
		refused    bool
	}{{100, 100, false}, {99, 100, false}, {101, 100, true}} {
		err := checkPool(&Plan{Config: parse(t, ""), PoolSize: tt.need}, tt.have)
		if errors.Is(err, ErrReloadRefused) != tt.refused || tt.refused && !strings.Contains(err.Error(), "cannot grow while the daemon runs") {
			t.Errorf("need %d, have %d: %v", tt.need, tt.have, err)
		}
	}
}

// stage keeps what runs and closes what is rebuilt; a kept service
// brings its consumers' counts along.
func TestStage(t *testing.T) {
	old := parse(t, "")
	d := &Daemon{plan: &Plan{Config: old}}
	for _, s := range old.Services {
		d.add(builtService{svc: &dispatch.Service{Name: s.Name}, counts: []*consumer.Counts{{}}}, s.Consumer.Type)
	}
	for _, tt := range []struct {
		name            string
		kept, rebuilt   []int
		retired         []int
		wantKept, wantR int
	}{
		{"all kept", []int{0, 1, 2}, nil, nil, 3, 0},
		{"one rebuilt", []int{0, -1, 2}, []int{1}, []int{1}, 2, 1},
		{"reordered", []int{1, 0, 2}, nil, nil, 3, 0},
	} {
		r := &config.Reload{Kept: tt.kept, Rebuilt: tt.rebuilt, Retired: tt.retired}
		tab, st, err := d.stage(old, r)
		if err != nil || st.Kept != tt.wantKept || st.Rebuilt != tt.wantR || st.Added != 0 {
			t.Errorf("%s: %+v, %v", tt.name, st, err)
			continue
		}
		for i, j := range tt.kept {
			switch {
			case j >= 0 && (tab.services[i] != d.services[j] || tab.counts[i][0] != d.counts[j][0]):
				t.Errorf("%s: service %d does not keep old %d", tt.name, i, j)
			case j < 0 && (slices.Contains(d.services, tab.services[i]) || tab.counts[i] != nil):
				t.Errorf("%s: rebuilt service %d is not a closed placeholder", tt.name, i)
			}
		}
		if got := d.retiring(r); len(got) != len(tt.retired) {
			t.Errorf("%s: retiring %d services, want %d", tt.name, len(got), len(tt.retired))
		}
	}
}

// carryDrops moves what a closed placeholder dropped to the new service.
func TestCarryDrops(t *testing.T) {
	staged := []*dispatch.Service{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	staged[1].Stats.Drops.Add(7)
	staged[2].Stats.Drops.Add(5)
	final := slices.Clone(staged)
	final[1] = &dispatch.Service{Name: "b"}
	// Service 2 failed to rebuild: it stays the placeholder.
	if closed := carryDrops(staged, final, []int{1, 2}); closed != 7 || final[1].Stats.Drops.Load() != 7 || final[2].Stats.Drops.Load() != 5 {
		t.Errorf("closed %d, drops %d and %d", closed, final[1].Stats.Drops.Load(), final[2].Stats.Drops.Load())
	}
}

// drain returns at once with nothing queued, and when ctx ends.
func TestDrain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name     string
		ctx      context.Context
		retiring []retiree
	}{
		{"nothing", context.Background(), nil},
		{"empty service", context.Background(), []retiree{{svc: &dispatch.Service{Name: "x"}, owner: -1}}},
		{"cancelled", ctx, nil},
	} {
		start := time.Now()
		drain(tt.ctx, tt.retiring, time.Minute)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: took %v", tt.name, took)
		}
	}
}

// initEAL confines the runtime's threads to eal.runtime_cpus, if set.
func TestRuntimeCPUs(t *testing.T) {
	unset := &config.Config{EAL: config.EAL{Lcores: "0-3"}, Pollers: []config.Poller{{Lcore: 2}, {Lcore: 3}}}
	set := &config.Config{EAL: config.EAL{Lcores: "0-1", RuntimeCPUs: "0,4-5"}, Pollers: []config.Poller{{Lcore: 1}}}
	for cfg, want := range map[*config.Config][]int{unset: nil, set: {0, 4, 5}} {
		got, err := runtimeCPUs(cfg)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("runtimeCPUs(%+v) = %v, %v; want %v", cfg.EAL, got, err, want)
		}
	}
}
