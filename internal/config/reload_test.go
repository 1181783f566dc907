package config

import (
	"slices"
	"strings"
	"testing"
)

const reloadBase = `eal: {lcores: "0-2"}
port: {name: p0, device: net_null0, tx_queues: 2}
services:
  - {name: mon}
  - {name: osd, ring_size: 2048}
  - {name: fwd, consumer: {type: forward, tx_queue: 1}}
  - {name: other}
default_service: other
rules:
  - {service: mon, protocol: tcp, dst_ports: [3300]}
  - {service: osd, protocol: tcp, dst_ports: ["6800-7568"]}
pollers:
  - {lcore: 1, rx_queues: [0]}
  - {lcore: 2, services: [fwd]}
`

// edit applies from/to pairs to s, failing if a from is missing.
func edit(t *testing.T, s string, edits ...string) string {
	t.Helper()
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("no %q to edit in:\n%s", edits[i], s)
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	return s
}

func TestCheckReloadLive(t *testing.T) {
	tests := []struct {
		name          string
		edits         []string
		kept          []int
		retired       []int
		rebuilt       []int
		base          string
		kernelChanged bool
	}{
		{name: "unchanged", kept: []int{0, 1, 2, 3}},
		{name: "rules and default", edits: []string{"dst_ports: [3300]", "dst_ports: [3300, 6789]", "default_service: other", "default_service: mon"},
			kept: []int{0, 1, 2, 3}},
		{name: "service added", edits: []string{"  - {name: mon}\n", "  - {name: mds}\n  - {name: mon}\n"},
			kept: []int{-1, 0, 1, 2, 3}},
		{name: "service removed", edits: []string{"  - {name: mon}\n", "", "  - {service: mon, protocol: tcp, dst_ports: [3300]}\n", ""},
			kept: []int{1, 2, 3}, retired: []int{0}},
		{name: "ring size", edits: []string{"ring_size: 2048", "ring_size: 4096"},
			kept: []int{0, -1, 2, 3}, retired: []int{1}, rebuilt: []int{1}},
		{name: "consumer", edits: []string{"  - {name: mon}", "  - {name: mon, consumer: {type: forward}}"},
			kept: []int{-1, 1, 2, 3}, retired: []int{0}, rebuilt: []int{0}},
		{name: "owner", edits: []string{"  - {lcore: 1, rx_queues: [0]}\n  - {lcore: 2, services: [fwd]}", "  - {lcore: 1, rx_queues: [0], services: [fwd]}\n  - {lcore: 2}"},
			kept: []int{0, 1, -1, 3}, retired: []int{2}, rebuilt: []int{2}},
		{name: "priority of a count service", edits: []string{"  - {name: mon}", "  - {name: mon, priority: 7}"},
			kept: []int{0, 1, 2, 3}},
		{name: "shutdown", edits: []string{"pollers:", "shutdown: {drain_timeout: 5s}\npollers:"}, kept: []int{0, 1, 2, 3}},
		{name: "kernel priorities", base: kernelBase, edits: []string{"priority: 1,", "priority: 20,"},
			kept: []int{0, 1, 2}, kernelChanged: true},
		{name: "kernel service added", base: kernelBase, edits: []string{"  - {name: other", "  - {name: mds, consumer: {type: kernel}}\n  - {name: other", "services: [mon, osd, other]", "services: [mon, osd, mds, other]"},
			kept: []int{0, 1, -1, 2}, kernelChanged: true},
		{name: "kernel unchanged", base: kernelBase, edits: []string{"dst_ports: [3300]", "dst_ports: [6789]"}, kept: []int{0, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.base
			if base == "" {
				base = reloadBase
			}
			old, err := Parse([]byte(base))
			if err != nil {
				t.Fatal(err)
			}
			new, err := Parse([]byte(edit(t, base, tt.edits...)))
			if err != nil {
				t.Fatal(err)
			}
			r, err := CheckReload(old, new)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Kept, tt.kept) || !slices.Equal(r.Retired, tt.retired) || !slices.Equal(r.Rebuilt, tt.rebuilt) || r.KernelChanged != tt.kernelChanged {
				t.Errorf("got kept %v retired %v rebuilt %v kernel %v; want %v %v %v %v",
					r.Kept, r.Retired, r.Rebuilt, r.KernelChanged, tt.kept, tt.retired, tt.rebuilt, tt.kernelChanged)
			}
		})
	}
}

const kernelBase = `eal: {lcores: "0-1"}
port: {name: node0, device: "net_af_packet0,iface=veth0"}
services:
  - {name: mon, priority: 10, consumer: {type: kernel}}
  - {name: osd, priority: 1, consumer: {type: kernel}}
  - {name: other, priority: 5, consumer: {type: kernel}}
default_service: other
rules:
  - {service: mon, protocol: tcp, dst_ports: [3300]}
kernel: {addresses: [10.0.0.5/24]}
pollers:
  - {lcore: 1, rx_queues: [0], services: [mon, osd, other]}
`

func TestCheckReloadRefuses(t *testing.T) {
	checkReloads(t, reloadBase, []reloadCase{
		{"mtu", []string{"tx_queues: 2}", "tx_queues: 2, mtu: 1400}"}, []string{"line 2: port.mtu: cannot change while the daemon runs"}},
		{"device", []string{"device: net_null0", "device: net_null1"}, []string{"line 2: port.device"}},
		{"lcores", []string{`lcores: "0-2"`, `lcores: "0-3"`}, []string{"line 1: eal.lcores"}},
		{"mempool", []string{"pollers:", "mempool: {mbufs: 100000}\npollers:"}, []string{"line 12: mempool.mbufs"}},
		{"burst", []string{"pollers:", "burst_size: 64\npollers:"}, []string{"line 12: burst_size"}},
		{"metrics", []string{"pollers:", "metrics: {listen: \"127.0.0.1:1\"}\npollers:"}, []string{"metrics.listen"}},
		{"log", []string{"pollers:", "log: {level: debug}\npollers:"}, []string{"log.level"}},
		{"rx queues", []string{"tx_queues: 2}", "tx_queues: 2, rx_queues: 2}", "rx_queues: [0]", "rx_queues: [0, 1]"},
			[]string{"port.rx_queues", "line 13: pollers[0].rx_queues"}},
		{"poll loop added", []string{`"0-2"`, `"0-3"`, "services: [fwd]}", "services: [fwd]}\n  - {lcore: 3}"},
			[]string{"eal.lcores", "pollers: 3 poll loops instead of 2"}},
		{"lcore moved", []string{`"0-2"`, `"0-3"`, "lcore: 2,", "lcore: 3,"}, []string{"pollers[1].lcore"}},
	})
}

// reloadCase edits a base configuration; want are substrings of
// CheckReload's error, none when it accepts the change.
type reloadCase struct {
	name  string
	edits []string
	want  []string
}

// checkReloads checks CheckReload from base to each case's edit of it.
func checkReloads(t *testing.T, base string, cases []reloadCase) {
	t.Helper()
	old, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			new, err := Parse([]byte(edit(t, base, tt.edits...)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = CheckReload(old, new)
			checkErr(t, "CheckReload", err, tt.want...)
		})
	}
}

// TestCheckReloadProcessServices: a service process attaches to its
// service's rings by name, so such a service stays as it started; the
// others around it may change.
func TestCheckReloadProcessServices(t *testing.T) {
	const osd = "  - {name: osd, consumer: {type: process, tx_queue: 1}}\n"
	checkReloads(t, withProcess, []reloadCase{
		{"others change", []string{"  - {name: other}", "  - {name: mon}\n  - {name: other}"}, nil},
		{"added", []string{"  - {name: other}", "  - {name: mon, consumer: {type: process, tx_queue: 1}}\n  - {name: other}"}, []string{"line 7: services[1]: a new service with a process consumer cannot be added"}},
		{"removed", []string{osd, ""}, []string{"removing osd, a service with a process consumer"}},
		{"ring size", []string{"{name: osd,", "{name: osd, ring_size: 2048,"}, []string{"line 6: services[0]: a service with a process consumer cannot be added, removed or changed"}},
		{"to count", []string{"{type: process, tx_queue: 1}", "{type: count}"}, []string{"services[0]: a service with a process consumer"}},
	})
}
