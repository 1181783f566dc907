package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
)

const minimal = `
port:
  name: p0
  device: net_null0
services:
  - name: osd
  - name: other
default_service: other
rules:
  - {service: osd, protocol: tcp, dst_ports: ["6800-7568", 3300]}
`

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if c.Burst != DefaultBurst || c.Port.RxDescriptors != DefaultDescriptors || c.Services[0].RingSize != DefaultRingSize {
		t.Errorf("defaults not applied: %+v", c)
	}
	if c.Services[0].Consumer.Type != ConsumerCount || c.Metrics.Listen != DefaultMetricsListen {
		t.Errorf("consumer %q metrics %q", c.Services[0].Consumer.Type, c.Metrics.Listen)
	}
	// Count services run where packets arrive: the one loop owns none.
	if len(c.Pollers) != 1 || c.Pollers[0].Lcore != 1 || len(c.Pollers[0].Services) != 0 || !c.IsLocal(0) {
		t.Errorf("default poller = %+v", c.Pollers)
	}
	r := c.Rules[0]
	if r.Protocol != 6 || len(r.DstPorts) != 2 || r.DstPorts[0] != (PortRange{6800, 7568}) || r.DstPorts[1] != (PortRange{3300, 3300}) {
		t.Errorf("rule = %+v", r)
	}
	if c.EAL.FilePrefix != "cephdpdkd-p0" {
		t.Errorf("file prefix %q", c.EAL.FilePrefix)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"unknown key", minimal + "bogus: 1\n", []string{"line 11", "bogus"}},
		{"unknown nested key", strings.Replace(minimal, "  name: p0", "  name: p0\n  speed: 10", 1), []string{"line 4", "speed"}},
		{"bad port range", strings.Replace(minimal, `"6800-7568"`, `"7568-6800"`, 1), []string{"line 10", "low end above high end"}},
		{"port out of range", strings.Replace(minimal, "3300", "70000", 1), []string{"line 10", "not a port number"}},
		{"bad protocol", strings.Replace(minimal, "tcp", "sctpp", 1), []string{"protocol \"sctpp\""}},
		{"unknown service in rule", strings.Replace(minimal, "{service: osd", "{service: mds", 1), []string{"line 10", "rules[0].service", `"mds" is not a defined service`}},
		{"bad default", strings.Replace(minimal, "default_service: other", "default_service: x", 1), []string{"line 8", "default_service"}},
		{"ring not power of two", strings.Replace(minimal, "  - name: osd", "  - name: osd\n    ring_size: 1000", 1), []string{"line 7", "power of two"}},
		{"duplicate service", strings.Replace(minimal, "  - name: other", "  - name: osd", 1), []string{"defined twice"}},
		{"missing device", strings.Replace(minimal, "  device: net_null0\n", "", 1), []string{"port.device", "required"}},
		{"bad device", strings.Replace(minimal, "net_null0", "eth0", 1), []string{"line 4", "neither a PCI address"}},
		// Accepted before, though no PCI function is past 7: DPDK would
		// probe nothing.
		{"pci function 8", strings.Replace(minimal, "net_null0", `"0000:3b:00.8"`, 1), []string{"line 4", `"0000:3b:00.8" is neither a PCI address`}},
		{"bad device argument", strings.Replace(minimal, "net_null0", `"net_null0,size"`, 1), []string{"line 4", `argument "size" is not key=value`}},
		{"poller on main lcore", minimal + "pollers:\n  - {lcore: 0, rx_queues: [0], services: [osd, other]}\n", []string{"line 12", "main lcore"}},
		{"service not drained", strings.Replace(minimal, "  - name: other", "  - name: other\n    consumer: {type: kernel}", 1) + "kernel: {}\npollers:\n  - {lcore: 1, rx_queues: [0], services: [osd]}\n",
			[]string{`service "other" is not drained`}},
		{"queue twice", minimal + "eal: {lcores: \"0-2\"}\npollers:\n  - {lcore: 1, rx_queues: [0], services: [osd]}\n  - {lcore: 2, rx_queues: [0], services: [other]}\n", []string{"already polled"}},
		{"forward to missing tx queue", strings.Replace(minimal, "  - name: other", "  - name: other\n    consumer: {type: forward, tx_queue: 3}", 1), []string{"tx queue 3 does not exist"}},
		{"bad consumer", strings.Replace(minimal, "  - name: other", "  - name: other\n    consumer: {type: kernel}", 1), []string{`"kernel"`}},
		{"data room small", minimal + "mempool: {data_room: 1024}\n", []string{"mempool.data_room", "frames would span mbufs"}},
		{"bad metrics", minimal + "metrics: {listen: nowhere}\n", []string{"metrics.listen"}},
		{"empty", "", []string{"empty configuration"}},
		{"not yaml", "port: [", []string{"yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			checkErr(t, "Parse", err, tt.want...)
		})
	}
}

func TestParseLcores(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		err  bool
	}{
		{"0-1", []int{0, 1}, false},
		{"0,2-3,2", []int{0, 2, 3}, false},
		{"3-1", nil, true},
		{"a", nil, true},
		{"", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseLcores(tt.in)
		if (err != nil) != tt.err || (!tt.err && !equalInts(got, tt.want)) {
			t.Errorf("ParseLcores(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Every configuration the project ships must validate.
func TestShippedConfigs(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	more, _ := filepath.Glob("../../configs/examples/*.yaml")
	files = append(files, more...)
	if len(files) < 3 {
		t.Fatalf("found %d shipped configs", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	if b, err := os.ReadFile("../../configs/cephdpdkd.yaml"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err == nil && (c.DefaultService == "" || len(c.Services) == 0 || len(c.Pollers) == 0) {
			t.Fatalf("accepted an unusable configuration: %+v", c)
		}
	})
}

const withRoCE = `
port: {name: p0, device: net_null0}
services:
  - {name: roce, consumer: {type: roce}}
  - {name: other}
default_service: other
roce:
  service: roce
  address: 10.99.0.1
  listen:
    - {port: 7174, app: echo}
    - {port: 7471, app: rping}
  ceph_tcp:
    - {listen: "127.0.0.1:6800", app: echo}
`

func TestRoCESection(t *testing.T) {
	c, err := Parse([]byte(withRoCE))
	if err != nil {
		t.Fatal(err)
	}
	r := c.RoCE
	if r.MTU != 1024 || r.RNRTimer != 0x0e || r.BufferSize != 128<<10 || r.RetryCount != 7 ||
		r.IdleProbeInterval() != roce.DefaultIdleProbe {
		t.Errorf("defaults: %+v", r)
	}
	for _, tt := range []struct {
		yaml string
		want time.Duration
	}{{"idle_probe: 0s", 0}, {"idle_probe: 1s", time.Second}, {"idle_probe: 1h", time.Hour}, {"idle_probe: 2m30s", 150 * time.Second}} {
		c, err := Parse([]byte(strings.Replace(withRoCE, "  listen:\n", "  "+tt.yaml+"\n  listen:\n", 1)))
		if err != nil || c.RoCE.IdleProbeInterval() != tt.want {
			t.Errorf("%s: %v, %v", tt.yaml, c, err)
		}
	}
	rules := c.RoCERules()
	if len(rules) != 2 || rules[0].DstPorts[0] != (PortRange{4791, 4791}) || rules[1].EtherType != 0x0806 ||
		rules[1].DstCIDRs[0].String() != "10.99.0.1/32" {
		t.Errorf("RoCE rules: %+v", rules)
	}
	for _, tt := range []struct{ from, to, want string }{
		{"address: 10.99.0.1", "address: fd00::1", "roce.address"},
		{"{type: roce}", "{type: count}", "must have consumer type"},
		{"service: roce\n  address", "service: other\n  address", "must have consumer type"},
		{"app: rping", "app: ftp", `"ftp"`},
		{"port: 7471", "port: 7174", "listed twice"},
		{`listen: "127.0.0.1:6800"`, `listen: "6800"`, "host:port"},
		{"  listen:\n", "  mtu: 1000\n  listen:\n", "roce.mtu"},
		{"  listen:\n", "  window: -1\n  listen:\n", "roce.window"},
		{"  listen:\n", "  window: 65537\n  listen:\n", "roce.window"},
		{"  listen:\n", "  memory_mb: 1\n  listen:\n", "cannot hold"},
		{"  listen:\n", "  idle_probe: 500ms\n  listen:\n", "roce.idle_probe"},
		{"  listen:\n", "  idle_probe: 2h\n  listen:\n", "roce.idle_probe"},
		{"  listen:\n", "  idle_probe: -1s\n  listen:\n", "roce.idle_probe"},
		{"  listen:\n", "  idle_probe: 15\n  listen:\n", "time.Duration"},
	} {
		_, err := Parse([]byte(strings.Replace(withRoCE, tt.from, tt.to, 1)))
		checkErr(t, tt.from+"→"+tt.to, err, tt.want)
	}
}
