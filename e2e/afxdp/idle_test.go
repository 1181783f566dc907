package afxdp

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
)

// cpuSeconds is a process's user and system CPU time.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	d, err := daemonproc.CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d.Seconds()
}

var rttMedianRE = regexp.MustCompile(`rtt min/median/max = [^/]+/([^/]+)/`)

// TestIdleCPUXDP measures what an idle daemon in the af_xdp mode costs,
// as the process's CPU time over 10 s, and the RoCE echo round trip at a
// low rate, with the default back-off and spinning. It prints one line a
// setting: `xdp-idle <idle_sleep.max> <CPU % of a core> <median RTT>`.
// It asserts only that the back-off saves CPU against spinning.
func TestIdleCPUXDP(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	cpu := map[string]float64{}
	for _, max := range []string{"default", "0s"} {
		metrics := daemonproc.FreeAddr(t)
		cfg := n.config(t, metrics)
		if max != "default" {
			f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "idle_sleep: {max: %s}\n", max)
			f.Close()
		}
		d := daemonproc.Start(t, n.bin, cfg, metrics)
		time.Sleep(time.Second)
		c0, t0 := cpuSeconds(t, d.Pid()), time.Now()
		time.Sleep(10 * time.Second)
		cpu[max] = 100 * (cpuSeconds(t, d.Pid()) - c0) / time.Since(t0).Seconds()
		rtt := "?"
		if m := rttMedianRE.FindStringSubmatch(n.ping(t, 50)); m != nil {
			rtt = m[1]
		}
		fmt.Printf("xdp-idle %s %.1f %s\n", max, cpu[max], rtt)
		if log, err := d.Stop(10 * time.Second); err != nil || !strings.Contains(log, "all mbufs returned") {
			t.Fatalf("stop: %v\n%s", err, log)
		}
	}
	if cpu["default"] >= cpu["0s"]/4 {
		t.Errorf("idle CPU %.1f%% with the back-off, %.1f%% spinning: want the back-off to save most of it", cpu["default"], cpu["0s"])
	}
}
