package config

import (
	"fmt"
	"strings"
	"testing"
)

// base is a valid configuration the limit tests edit; every setting they
// touch sits on a known line.
const base = `eal:
  lcores: "0-1"
  extra_args: []
port:
  name: sample
  device: net_null0
mempool: {mbufs: 0}
services:
  - name: mon
  - name: other
default_service: other
`

const baseRoCE = `port: {name: p0, device: net_null0, tx_queues: 2}
eal: {lcores: "0-2"}
services:
  - {name: roce, consumer: {type: roce}}
  - {name: fwd, consumer: {type: forward, tx_queue: 1}}
  - {name: other}
default_service: other
roce:
  service: roce
  address: 10.99.0.1
  max_sessions: 16
  memory_mb: 256
  ceph_tcp:
    - {listen: "127.0.0.1:6800", app: echo}
pollers:
  - {lcore: 1, rx_queues: [0], services: [roce, other]}
  - {lcore: 2, services: [fwd]}
`

// Settings that DPDK or the daemon refuse at start must fail validation,
// naming the line and the limit.
func TestValidateLimits(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		from, to string
		want     []string // substrings of the error; nil: valid
	}{
		{"29-char port name", base, "name: sample", "name: " + strings.Repeat("p", 29),
			[]string{"line 5: port.name:", "RTE_MEMPOOL_NAMESIZE", "limit of 25", "at most 21"}},
		{"21-char port name", strings.NewReplacer("name: mon", "name: m", "name: other", "name: o", "service: other", "service: o").Replace(base),
			"name: sample", "name: " + strings.Repeat("p", 21), nil},
		{"port name with a space", base, "name: sample", `name: "my port"`, []string{"line 5: port.name:", "lower-case letters"}},
		{"port name with a slash", base, "name: sample", "name: a/b", []string{"line 5: port.name:", "lower-case letters"}},
		{"upper-case port name", base, "name: sample", "name: Sample", []string{"line 5: port.name:"}},
		{"ring name too long", base, "name: mon", "name: " + strings.Repeat("m", 18),
			[]string{"line 9: services[0].name:", `ring name "cdd_sample_mmm`, "RTE_RING_NAMESIZE", "limit of 28", "at most 17"}},
		{"ring name at the limit", base, "name: mon", "name: " + strings.Repeat("m", 17), nil},
		{"long port, short service", base, "name: sample", "name: " + strings.Repeat("p", 21),
			[]string{"line 9: services[0].name:", `"mon" makes the ring name`, "RTE_RING_NAMESIZE", "at most 2"}},
		{"lcore above RTE_MAX_LCORE", base, `lcores: "0-1"`, `lcores: "0,200"`, []string{"line 2: eal.lcores:", "RTE_MAX_LCORE"}},
		{"mbufs past the ring limit", base, "mbufs: 0", "mbufs: 4294967297", []string{"line 7: mempool.mbufs:", "1073741823"}},
		{"eal memory overflow", base, "  extra_args: []", "  memory_mb: 4611686018427387904", []string{"line 3: eal.memory_mb:"}},
		{"extra -l", base, "extra_args: []", `extra_args: ["-l", "0-3"]`, []string{"line 3: eal.extra_args[0]:", "eal.lcores"}},
		{"extra -l glued", base, "extra_args: []", `extra_args: ["-l0-3"]`, []string{"eal.extra_args[0]:", "eal.lcores"}},
		{"extra --file-prefix", base, "extra_args: []", `extra_args: ["--log-level=*:info", "--file-prefix=x"]`, []string{"eal.extra_args[1]:", "eal.file_prefix"}},
		{"extra --socket-mem", base, "extra_args: []", `extra_args: ["--socket-mem=1024"]`, []string{"eal.extra_args[0]:", "eal.memory_mb"}},
		{"extra log level", base, "extra_args: []", `extra_args: ["--log-level=*:info", "--in-memory"]`, nil},

		{"roce valid", baseRoCE, "", "", nil},
		{"negative max_sessions", baseRoCE, "max_sessions: 16", "max_sessions: -5", []string{"line 11: roce.max_sessions:", fmt.Sprintf("outside 1..%d", MaxRoCESessions)}},
		{"huge max_sessions", baseRoCE, "max_sessions: 16", "max_sessions: 4611686018427387904", []string{"line 11: roce.max_sessions:", fmt.Sprintf("outside 1..%d", MaxRoCESessions)}},
		{"max_sessions over the bound", baseRoCE, "max_sessions: 16", fmt.Sprintf("max_sessions: %d", MaxRoCESessions+1), []string{"line 11: roce.max_sessions:"}},
		{"negative roce memory", baseRoCE, "memory_mb: 256", "memory_mb: -1", []string{"line 12: roce.memory_mb:", "outside"}},
		{"huge roce memory", baseRoCE, "memory_mb: 256", "memory_mb: 4611686018427387904", []string{"line 12: roce.memory_mb:", "outside"}},
		// The endpoint transmits on roce.tx_queue 0 from pollers[0].
		{"roce and a forwarder share a tx queue", baseRoCE, "tx_queue: 1", "tx_queue: 0",
			[]string{"line 17: pollers[1].services[0]:", "tx queue 0 is already used by pollers[0]"}},
		{"ceph_tcp listed twice", baseRoCE, `    - {listen: "127.0.0.1:6800", app: echo}`,
			"    - {listen: \"127.0.0.1:6800\", app: echo}\n    - {listen: \"127.0.0.1:6800\", app: discard}",
			[]string{"line 15: roce.ceph_tcp[1].listen:", "already listened on"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := tt.yaml
			if tt.from != "" {
				if !strings.Contains(y, tt.from) {
					t.Fatalf("base lacks %q", tt.from)
				}
				y = strings.Replace(y, tt.from, tt.to, 1)
			}
			_, err := Parse([]byte(y))
			checkErr(t, "Parse", err, tt.want...)
		})
	}
}
