package cephnode

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/cephcluster"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rxeguest"
)

// scratch: not for commit.
func TestStallDiag(t *testing.T) {
	if os.Getenv("CDD_STALL_DIAG") == "" {
		t.Skip("scratch")
	}
	requireTools(t)
	t0 := time.Now()
	logf := func(format string, args ...any) {
		t.Helper()
		t.Logf("[%6.1fs] %s", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	br := rxeguest.NewBridge(t, netip.MustParsePrefix(roceBridgeIP+"/24"))
	hostIf, err := br.AddVeth(t)
	if err != nil {
		t.Fatal(err)
	}
	node := testenv.NewNetNS(t)
	ifname := "cddr" + node.Name[len(node.Name)-6:]
	metricsAddr := freePort(t)
	cfgPath := filepath.Join(t.TempDir(), "roce-node.yaml")
	writeFile(t, cfgPath, fmt.Sprintf(`
eal: {lcores: "0-1", no_huge: true, memory_mb: 1024, file_prefix: cdd-e2e-roce-%[1]s}
port:
  name: rnode
  device: "net_af_packet1,iface=%[2]s,blocksz=4096,framesz=2048,framecnt=2048"
services:
  - {name: mon, ring_size: 1024, priority: 200, consumer: {type: kernel}}
  - {name: osd, ring_size: 2048, priority: 100, consumer: {type: kernel}}
  - {name: roce, ring_size: 4096, consumer: {type: roce}}
  - {name: other, ring_size: 1024, priority: 150, consumer: {type: kernel}}
default_service: other
rules:
  - {service: mon, protocol: tcp, dst_ports: [3300, 6789]}
  - {service: mon, protocol: tcp, src_ports: [3300, 6789]}
  - {service: osd, protocol: tcp, dst_ports: ["6800-7568"]}
  - {service: osd, protocol: tcp, src_ports: ["6800-7568"]}
kernel: {interface: %[3]s, netns: %[4]s, addresses: [%[5]s/24]}
roce:
  service: roce
  address: %[5]s
  send_buffers: 32
  recv_buffers: 64
  max_sessions: 16
  memory_mb: 256
  bridge: {}
metrics: {listen: "%[6]s"}
shutdown: {drain_timeout: 1s}
`, node.Name[len(node.Name)-6:], hostIf, ifname, node.Name, roceNodeIP, metricsAddr))
	d := startDaemon(t, buildDaemon(t), cfgPath, metricsAddr)
	cl := cephcluster.Start(t, cephcluster.Options{NetNS: node.Name, IP: netip.MustParseAddr(roceNodeIP)})
	g, err := rxeguest.Boot(ctx, t, br, "c1", netip.MustParsePrefix(roceGuestIP+"/24"), rxeguest.WithCeph())
	if err != nil {
		t.Fatal(err)
	}
	conf, err := rxeguest.CephClientFromFiles(cl.ConfPath(), cl.KeyringPath(), rxeguest.CephRDMA)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetupCeph(ctx, conf); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		out, code, err := g.Run(ctx, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		_ = code
		return out
	}
	for _, c := range []string{"mount -t tracefs nodev /sys/kernel/tracing", "echo 16384 > /sys/kernel/tracing/buffer_size_kb",
		"echo 1 > /sys/kernel/tracing/events/neigh/enable",
		"echo 'protocol == 2054' > /sys/kernel/tracing/events/skb/kfree_skb/filter", "echo 1 > /sys/kernel/tracing/events/skb/kfree_skb/enable",
		"echo 'len == 42' > /sys/kernel/tracing/events/net/net_dev_queue/filter", "echo 1 > /sys/kernel/tracing/events/net/net_dev_queue/enable",
		"echo 'protocol == 2054' > /sys/kernel/tracing/events/net/net_dev_start_xmit/filter", "echo 1 > /sys/kernel/tracing/events/net/net_dev_start_xmit/enable",
		"echo 1 > /sys/kernel/tracing/tracing_on"} {
		logf("%s: %s", c, run(c))
	}
	if v := os.Getenv("CDD_FAST_NEIGH"); v != "" {
		logf("fast neigh: %s", run("echo "+v+" > /proc/sys/net/ipv4/neigh/eth0/base_reachable_time_ms; echo 1 > /proc/sys/net/ipv4/neigh/eth0/delay_first_probe_time; sysctl -a 2>/dev/null | grep 'neigh.eth0' "))
	}
	run("(while :; do echo \"$(cut -d' ' -f1 /proc/uptime) $(ip -s neigh show 10.78.0.5) tx=$(cat /sys/class/net/eth0/statistics/tx_packets)\"; sleep 1; done) > /tmp/neigh.log 2>&1 &")
	if n := os.Getenv("CDD_HOG"); n != "" {
		stop := make(chan struct{})
		defer close(stop)
		var k int
		fmt.Sscan(n, &k)
		for i := 0; i < k; i++ {
			go func() {
				runtime.LockOSThread()
				for {
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		logf("hogging %d threads", k)
	}
	dump := func(tag string) {
		out := run("cp /sys/kernel/tracing/trace /mnt/host/trace.txt; cp /tmp/neigh.log /mnt/host/neigh.log; /usr/sbin/tc -s qdisc show dev eth0; ip -s neigh; cat /proc/net/stat/arp_cache; grep -H . /sys/class/infiniband/*/ports/1/hw_counters/* | sed 's|.*/||' | grep -v ':0$'; ip -s link show eth0; cat /sys/class/net/eth0/queues/tx-0/tx_timeout; dmesg | tail -n 15")
		b, _ := os.ReadFile(filepath.Join(g.ShareDir(), "trace.txt"))
		os.WriteFile("/tmp/scratch/trace-"+tag+".txt", b, 0o644)
		b, _ = os.ReadFile(filepath.Join(g.ShareDir(), "neigh.log"))
		os.WriteFile("/tmp/scratch/neigh-"+tag+".log", b, 0o644)
		m, _ := d.Metrics()
		var ms []string
		for k, v := range m {
			if strings.Contains(k, "service=\"other\"") || strings.Contains(k, "service=other") {
				ms = append(ms, fmt.Sprintf("%s %v", k, v))
			}
		}
		logf("%s:\n%s\n%s\nnode:\n%s", tag, out, strings.Join(ms, "\n"), nsNetState(node.Name, ifname))
	}
	secs := os.Getenv("CDD_BENCH_SECS")
	if secs == "" {
		secs = "60"
	}
	for i := 0; i < 12; i++ {
		out, code, err := g.Rados(ctx, "-p", cl.Pool(), "bench", secs, "write", "--no-cleanup")
		logf("bench %d: exit %d %v\n%s", i, code, err, lastLines([]byte(out), 12))
		dump(fmt.Sprint("b", i))
		if code != 0 || err != nil {
			t.Fatal("bench failed")
		}
	}
}
