package config

import (
	"errors"
	"testing"
	"time"
)

// stepsBase is a valid configuration with a service of each kind the
// steps check: a local forwarder, the RoCE endpoint's and a kernel one.
const stepsBase = `
eal: {lcores: "0-2"}
port: {name: p0, device: net_null0, tx_queues: 4}
services:
  - {name: osd, consumer: {type: forward, tx_queue: 1}}
  - {name: rdma, consumer: {type: roce}}
  - {name: node, consumer: {type: kernel}}
  - {name: other}
default_service: other
rules:
  - {service: osd, protocol: tcp, dst_ports: [6800]}
roce: {service: rdma, address: 10.0.0.5, tx_queue: 2}
kernel: {addresses: [10.0.0.6/24], tx_queue: 3}
`

func parseStepsBase(t *testing.T) *Config {
	t.Helper()
	c, err := Parse([]byte(stepsBase))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runStep runs Validate's steps up to the named one and returns the
// problems that one alone found.
func runStep(t *testing.T, c *Config, name string) error {
	t.Helper()
	v := &validation{c: c}
	for _, step := range validationSteps {
		if step.name == name {
			v.errs = nil
			step.run(v)
			return errors.Join(v.errs...)
		}
		step.run(v)
	}
	t.Fatalf("Validate has no step %q", name)
	return nil
}

func TestValidationStepsPassBase(t *testing.T) {
	for _, step := range validationSteps {
		if err := runStep(t, parseStepsBase(t), step.name); err != nil {
			t.Errorf("step %s: %v", step.name, err)
		}
	}
}

func TestValidationSteps(t *testing.T) {
	for _, tt := range []struct {
		step, name string
		mutate     func(c *Config)
		want       string
	}{
		{"eal", "main lcore", func(c *Config) { c.EAL.MainLcore = 5 }, `lcore 5 is not in eal.lcores "0-2"`},
		{"eal", "runtime cpus", func(c *Config) { c.EAL.RuntimeCPUs = "x" }, "eal.runtime_cpus"},
		{"eal", "memory", func(c *Config) { c.EAL.MemoryMB = 32 }, "32 MB is too little"},
		{"port", "device", func(c *Config) { c.Port.Device = "" }, "required: a PCI address"},
		{"port", "rx queues", func(c *Config) { c.Port.RxQueues = 0 }, "port.rx_queues: 0 is outside 1..64"},
		{"mempool", "data room", func(c *Config) { c.Mempool.DataRoom = 1024 }, "frames would span mbufs"},
		{"mempool", "mbufs", func(c *Config) { c.Mempool.Mbufs = -1 }, "outside 0 (computed)"},
		{"burst", "zero", func(c *Config) { c.Burst = 0 }, "burst_size: 0 is outside"},
		{"services", "unknown kind", func(c *Config) { c.Services[3].Consumer.Type = "bogus" },
			`"bogus": want "count", "forward", "roce", "kernel" or "process"`},
		{"services", "forward tx queue", func(c *Config) { c.Services[0].Consumer.TxQueue = 9 }, "services[0].consumer.tx_queue: tx queue 9 does not exist"},
		{"services", "kernel without section", func(c *Config) { c.Kernel = nil }, `a "kernel" consumer needs a kernel section`},
		{"services", "roce without section", func(c *Config) { c.RoCE.Service = "osd" }, "needs a roce section with service: rdma"},
		{"services", "twice", func(c *Config) { c.Services[3].Name = "osd" }, `service "osd" is defined twice`},
		{"services", "default", func(c *Config) { c.DefaultService = "x" }, `default_service: "x" is not a defined service`},
		{"roce", "mtu", func(c *Config) { c.RoCE.MTU = 100 }, "roce.mtu"},
		{"rules", "service", func(c *Config) { c.Rules[0].Service = "x" }, `rules[0].service: "x" is not a defined service`},
		{"rules", "ports without tcp", func(c *Config) { c.Rules[0].Protocol = 1 }, "ports need tcp or udp"},
		{"pollers", "main lcore", func(c *Config) { c.Pollers[0].Lcore = 0 }, "is the main lcore"},
		{"pollers", "queue twice", func(c *Config) { c.Pollers[0].RxQueues = []int{0, 0} }, "rx queue 0 is already polled by pollers[0]"},
		{"pollers", "shared tx queue", func(c *Config) {
			c.RoCE.TxQueue = 1
			c.Pollers[0].Services = []string{"node", "osd"}
			c.Pollers = append(c.Pollers, Poller{Lcore: 2, Services: []string{"rdma"}})
		}, "tx queue 1 is already used by pollers[0]"},
		{"coverage", "queue", func(c *Config) { c.Pollers[0].RxQueues = nil }, "rx queue 0 is not polled"},
		{"coverage", "owned service", func(c *Config) { c.Pollers[0].Services = []string{"node"} }, `service "rdma" is not drained`},
		{"kernel", "tx queue", func(c *Config) { c.Kernel.TxQueue = 9 }, "kernel.tx_queue: tx queue 9 does not exist"},
		{"kernel", "priority", func(c *Config) { c.Services[2].Priority = 300 }, "services[2].priority: 300 is outside 0..255"},
		{"local tx queues", "roce's", func(c *Config) {
			c.Port.RxQueues = 2
			c.Pollers = append(c.Pollers, Poller{Lcore: 2, RxQueues: []int{1}})
		}, `service "osd" forwards from pollers[1] (lane 1) on tx queue 2, which pollers[0] uses`},
		{"local tx queues", "past the port", func(c *Config) { c.Services[0].Consumer.TxQueue = 4 }, "tx queue 4 does not exist: service \"osd\" forwards on every receiving poll loop"},
		{"metrics", "address", func(c *Config) { c.Metrics.Listen = "nope" }, "want host:port"},
		{"metrics", "off", func(c *Config) { c.Metrics.Listen = MetricsOff }, ""},
		{"shutdown", "long", func(c *Config) { c.Shutdown.DrainTimeout = 2 * time.Minute }, "shutdown.drain_timeout: 2m0s is outside 0..1m"},
		{"logging", "level", func(c *Config) { c.Log.Level = "loud" }, `log.level: "loud"`},
		{"logging", "format", func(c *Config) { c.Log.Format = "xml" }, `log.format: "xml"`},
	} {
		t.Run(tt.step+"/"+tt.name, func(t *testing.T) {
			c := parseStepsBase(t)
			tt.mutate(c)
			checkErr(t, "step "+tt.step, runStep(t, c, tt.step), tt.want)
		})
	}
}
