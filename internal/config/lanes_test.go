package config

import (
	"strings"
	"testing"
)

// Two receiving loops and a consumer-only one: every service has two
// lanes; count and forward services no poller lists are local.
func TestLanes(t *testing.T) {
	c, err := Parse([]byte(`
eal: {lcores: "0-3"}
port: {name: p0, device: net_null0, rx_queues: 2, tx_queues: 3}
services:
  - {name: fwd, consumer: {type: forward}}
  - {name: cnt}
  - {name: owned, consumer: {type: forward, tx_queue: 2}}
  - {name: kern, consumer: {type: kernel}}
default_service: cnt
kernel: {tx_queue: 2}
pollers:
  - {lcore: 1, rx_queues: [0]}
  - {lcore: 2, services: [owned, kern]}
  - {lcore: 3, rx_queues: [1]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Lanes(); n != 2 {
		t.Errorf("Lanes() = %d, want 2", n)
	}
	for i, want := range []int{0, -1, 1} {
		if got := c.Lane(i); got != want {
			t.Errorf("Lane(%d) = %d, want %d", i, got, want)
		}
	}
	for i, want := range []bool{true, true, false, false} {
		if got := c.IsLocal(i); got != want {
			t.Errorf("IsLocal(%s) = %v, want %v", c.Services[i].Name, got, want)
		}
	}
	if got := c.RingName("fwd", 0) + " " + c.RingName("fwd", 1); got != "cdd_p0_fwd cdd_p0_fwd.1" {
		t.Errorf("ring names %q", got)
	}
	if q := LocalTxQueue(c.Services[0], 1); q != 1 {
		t.Errorf("lane 1 forwards on tx queue %d, want 1", q)
	}
}

func TestLaneErrors(t *testing.T) {
	const two = `
eal: {lcores: "0-2"}
port: {name: sample, device: net_null0, rx_queues: 2, tx_queues: 2}
services:
  - {name: fwd, consumer: {type: forward}}
  - {name: other}
default_service: other
pollers:
  - {lcore: 1, rx_queues: [0]}
  - {lcore: 2, rx_queues: [1]}
`
	tests := []struct {
		name, from, to string
		want           []string // nil: valid
	}{
		{"valid", "", "", nil},
		{"lane 1 past the tx queues", "type: forward}", "type: forward, tx_queue: 1}",
			[]string{"services[0].consumer.tx_queue", "tx queue 2 does not exist", "pollers[1] is lane 1"}},
		{"one tx queue for two loops", "tx_queues: 2", "tx_queues: 1",
			[]string{"services[0].consumer.tx_queue", "tx queue 1 does not exist"}},
		// Local forwarders with tx_queue 0 and 1: lane 1 of the first and
		// lane 0 of the second both want queue 1, from different loops.
		{"two local forwarders overlap", "  - {name: other}", "  - {name: other}\n  - {name: own, consumer: {type: forward, tx_queue: 1}}",
			[]string{"services[2].consumer.tx_queue", `"own" forwards from pollers[0] (lane 0) on tx queue 1, which pollers[1] uses`}},
		{"ring name with a lane suffix", "name: fwd,", "name: " + strings.Repeat("f", 16) + ",",
			[]string{"services[0].name", `"cdd_sample_ffffffffffffffff.1"`, "2 receiving poll loops", "at most 15"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := strings.Replace(two, tt.from, tt.to, 1)
			_, err := Parse([]byte(y))
			checkErr(t, "Parse", err, tt.want...)
		})
	}
}

// A local forwarder's lane may not transmit on a TX queue an owned
// consumer on another loop uses.
func TestLaneTxQueueConflicts(t *testing.T) {
	for _, tt := range []struct{ name, extra, want string }{
		{"owned forwarder", "  - {name: own, consumer: {type: forward, tx_queue: 1}}\npollers:\n  - {lcore: 1, rx_queues: [0], services: [own]}\n  - {lcore: 2, rx_queues: [1]}\n",
			"forwards from pollers[1] (lane 1) on tx queue 1, which pollers[0] uses"},
		{"kernel path", "  - {name: kern, consumer: {type: kernel}}\nkernel: {tx_queue: 1}\npollers:\n  - {lcore: 1, rx_queues: [0], services: [kern]}\n  - {lcore: 2, rx_queues: [1]}\n",
			"forwards from pollers[1] (lane 1) on tx queue 1, which pollers[0] uses"},
		{"same loop", "  - {name: kern, consumer: {type: kernel}}\nkernel: {tx_queue: 1}\npollers:\n  - {lcore: 1, rx_queues: [0]}\n  - {lcore: 2, rx_queues: [1], services: [kern]}\n",
			""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(`
eal: {lcores: "0-2"}
port: {name: p0, device: net_null0, rx_queues: 2, tx_queues: 2}
default_service: fwd
services:
  - {name: fwd, consumer: {type: forward}}
` + tt.extra))
			checkErr(t, "Parse", err, tt.want)
		})
	}
}
