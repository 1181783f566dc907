package config

import (
	"strings"
	"testing"
)

const withProcess = `
eal: {huge_dir: /dev/hugepages}
port: {name: p0, device: net_null0, tx_queues: 2}
burst_size: 32
services:
  - {name: osd, consumer: {type: process, tx_queue: 1}}
  - {name: other}
default_service: other
`

func TestProcessService(t *testing.T) {
	c, err := Parse([]byte(withProcess))
	if err != nil {
		t.Fatal(err)
	}
	// The default poll loop owns the process service: it serves its
	// rings and transmits on its queue.
	if got := c.Pollers[0].Services; len(got) != 1 || got[0] != "osd" {
		t.Errorf("default poller services %q, want [osd]", got)
	}
	if c.IsLocal(0) {
		t.Error("a process service runs on every loop")
	}
	if got := c.ProcessRingName("osd", "tx"); got != "cdd_p0_osd.tx" {
		t.Errorf("tx ring %q", got)
	}
	if got, want := c.ProcessRingSize(), 128; got != want {
		t.Errorf("ring size %d, want %d", got, want)
	}
	if got, want := c.ProcessMbufs(), 3*127+3*32; got != want {
		t.Errorf("mbufs %d, want %d", got, want)
	}
	for _, tt := range []struct{ from, to, want string }{
		{"tx_queue: 1", "tx_queue: 2", "tx queue 2 does not exist"},
		{"huge_dir: /dev/hugepages", "no_huge: true", "needs hugepages"},
		{"huge_dir: /dev/hugepages", "hugepages: {pages: 64, size: 2M}", "use eal.huge_dir"},
		{"name: osd,", "name: osd-with-a-long-name,", "ring name \"cdd_p0_osd-with-a-long-name.ret\""},
		{"type: process", "type: proces", `"proces": want`},
	} {
		_, err := Parse([]byte(strings.Replace(withProcess, tt.from, tt.to, 1)))
		checkErr(t, tt.from+"→"+tt.to, err, tt.want)
	}
}
