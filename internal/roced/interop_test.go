package roced_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/roced"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rxeguest"
	"github.com/cephdpdkd/cephdpdkd/pmd"
	"github.com/cephdpdkd/cephdpdkd/roce/pcapcheck"
	"github.com/cephdpdkd/cephdpdkd/roce/ping"
)

var testEAL *pmd.EAL

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("roced tests need root (DPDK, network namespaces, qemu): skipped")
		os.Exit(0)
	}
	os.Exit(testenv.RunWithEAL(m, "roced", &testEAL))
}

const (
	endpointIP = "10.77.0.2"
	g1IP       = "10.77.0.11"
	g2IP       = "10.77.0.12"
)

// roceConfig is the daemon's configuration for the interop test: its
// endpoint's applications on ports the guests' clients connect to.
func roceConfig(hostIf string) string {
	return roceOnlyConfig("rxe", "net_af_packet50,iface="+hostIf, 4096, endpointIP, `
  listen:
    - {port: 7471, app: echo}
    - {port: 7472, app: ucmatose, size: 64}
    - {port: 7473, app: ucmatose, size: 4096}
    - {port: 7474, app: ucmatose, size: 65536}
    - {port: 7475, app: discard}
    - {port: 7174, app: rping}`)
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// capture records RoCEv2 and ARP on the veth with tshark until stopped.
func capture(t *testing.T, iface string) (stop func() string) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Log("tshark not installed: no capture check")
		return func() string { return "" }
	}
	path := filepath.Join(t.TempDir(), "roce.pcapng")
	cmd := exec.Command(tshark, "-q", "-i", iface, "-f", "udp port 4791 or arp", "-w", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	time.Sleep(time.Second) // capture up before traffic
	return func() string {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		return path
	}
}

// Unmodified Linux Soft-RoCE clients in a qemu guest connect to
// cephdpdkd's userspace RoCE endpoint over its DPDK port and exchange
// data with it; cephdpdkd's active side connects to servers in the guest.
func TestRxeInterop(t *testing.T) {
	if err := rxeguest.Available(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b := rxeguest.NewSwitch(t, netip.MustParsePrefix("10.77.0.1/24"))
	hostIf, err := b.AddVeth(t)
	if err != nil {
		t.Fatal(err)
	}
	var g1, g2 *rxeguest.Guest
	var wg sync.WaitGroup
	var err1, err2 error
	wg.Add(2)
	go func() { defer wg.Done(); g1, err1 = rxeguest.Boot(ctx, t, b, "g1", netip.MustParsePrefix(g1IP+"/24")) }()
	go func() { defer wg.Done(); g2, err2 = rxeguest.Boot(ctx, t, b, "g2", netip.MustParsePrefix(g2IP+"/24")) }()
	wg.Wait()
	if err1 != nil || err2 != nil {
		t.Fatalf("boot: %v / %v", err1, err2)
	}
	stopCapture := capture(t, hostIf)

	d, stop := startDaemon(t, newPlan(t, roceConfig(hostIf)), slog.New(slog.NewTextHandler(logWriter{t}, nil)))
	node := d.RoCE()

	run := func(g *rxeguest.Guest, cmd string) string {
		t.Helper()
		start := time.Now()
		out, code, err := g.Run(ctx, cmd)
		if err != nil || code != 0 {
			t.Errorf("%s: %s: exit %d, %v\n%s", g.Name, cmd, code, err, out)
		}
		t.Logf("%s: %s: %v", g.Name, cmd, time.Since(start).Round(time.Millisecond))
		return out
	}

	t.Run("rdma_client", func(t *testing.T) {
		out := run(g1, "time -p rdma_client -s "+endpointIP+" -p 7471")
		if d, err := rxeguest.ParseTimeP(out); err == nil {
			t.Logf("rdma_client against cephdpdkd: %v (resolve, connect, 16 B each way, disconnect)", d)
		}
	})
	t.Run("ucmatose", func(t *testing.T) {
		for _, c := range []struct {
			port  int
			size  int
			conns int
		}{{7472, 64, 1}, {7473, 4096, 1}, {7474, 65536, 1}, {7473, 4096, 2}} {
			out := run(g1, fmt.Sprintf("time -p ucmatose -s %s -p %d -S %d -c %d", endpointIP, c.port, c.size, c.conns))
			if d, err := rxeguest.ParseTimeP(out); err == nil {
				mb := float64(2*10*c.size*c.conns) / d.Seconds() / 1e6
				t.Logf("ucmatose -S %d -c %d against cephdpdkd: %v, %.2f MB/s both ways", c.size, c.conns, d, mb)
			}
		}
	})
	t.Run("rping", func(t *testing.T) {
		run(g1, "rping -c -a "+endpointIP+" -C 10 -v")
	})
	t.Run("reject unknown port at once", func(t *testing.T) {
		start := time.Now()
		out, code, err := g1.Run(ctx, "rdma_client -s "+endpointIP+" -p 9999")
		if err != nil || code == 0 {
			t.Errorf("rdma_client to an unlistened port: exit %d, %v\n%s", code, err, out)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("rejection took %v; a REJ must end it at once, not after REQ retries", took)
		}
	})
	t.Run("roce-ping to rdma_server", func(t *testing.T) {
		srv, err := g1.Start("rdma_server -p 7481")
		if err != nil {
			t.Fatal(err)
		}
		if err := g1.WaitListen(ctx, 7481); err != nil {
			t.Fatal(err)
		}
		res := pingGuest(t, node, g1IP, 7481, ping.Config{Count: 1, Size: 16, Mode: ping.ModeReply})
		if code, err := srv.Wait(ctx); err != nil || code != 0 {
			out, _ := srv.Output(ctx)
			t.Errorf("rdma_server: exit %d, %v\n%s", code, err, out)
		}
		t.Logf("roce-ping → rdma_server: connected in %v", res.Setup)
	})
	t.Run("roce-ping to ucmatose", func(t *testing.T) {
		srv, err := g1.Start("ucmatose -p 7482 -S 4096")
		if err != nil {
			t.Fatal(err)
		}
		if err := g1.WaitListen(ctx, 7482); err != nil {
			t.Fatal(err)
		}
		res := pingGuest(t, node, g1IP, 7482, ping.Config{Count: 10, Size: 4096, Mode: ping.ModeTose})
		if code, err := srv.Wait(ctx); err != nil || code != 0 {
			out, _ := srv.Output(ctx)
			t.Errorf("ucmatose server: exit %d, %v\n%s", code, err, out)
		}
		t.Logf("roce-ping → ucmatose: %d messages each way in %v", res.Received, res.Elapsed)
	})
	t.Run("cephdpdkd roce-ping CLI to rdma_server", func(t *testing.T) {
		// The operator's tool as a process of its own: its own EAL and
		// af_packet port on the same veth, its own endpoint address.
		bin := daemonproc.BuildDaemon(t)
		cfg := fmt.Sprintf(`
eal: {lcores: "0-1", no_huge: true, memory_mb: 256, file_prefix: cdd-roceping-%d}
port: {name: ping, device: "net_af_packet0,iface=%s"}
services:
  - {name: roce, consumer: {type: roce}}
  - {name: unclaimed}
default_service: unclaimed
roce: {service: roce, address: 10.77.0.3, max_sessions: 2}
log: {level: warn}
`, os.Getpid(), hostIf)
		path := filepath.Join(t.TempDir(), "ping.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		srv, err := g1.Start("rdma_server -p 7483")
		if err != nil {
			t.Fatal(err)
		}
		if err := g1.WaitListen(ctx, 7483); err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(ctx, time.Minute)
		defer ccancel()
		out, err := exec.CommandContext(cctx, bin, "roce-ping", "--config", path, "--target", g1IP, "--port", "7483",
			"-n", "1", "-s", "16", "--mode", "reply").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "1 sent, 1 received") {
			t.Errorf("roce-ping: %v\n%s", err, out)
		}
		if code, err := srv.Wait(ctx); err != nil || code != 0 {
			t.Errorf("rdma_server: exit %d, %v", code, err)
		}
		t.Logf("roce-ping CLI:\n%s", out)
	})
	t.Run("reference rxe to rxe", func(t *testing.T) {
		srv, err := g2.Start("rdma_server -p 7489")
		if err != nil {
			t.Fatal(err)
		}
		if err := g2.WaitListen(ctx, 7489); err != nil {
			t.Fatal(err)
		}
		out := run(g1, "time -p rdma_client -s "+g2IP+" -p 7489")
		srv.Wait(ctx)
		if d, err := rxeguest.ParseTimeP(out); err == nil {
			t.Logf("reference rdma_client rxe→rxe: %v", d)
		}
		for _, size := range []int{4096, 65536} {
			port := 7490 + size%7
			srv, err := g2.Start(fmt.Sprintf("ucmatose -p %d -S %d", port, size))
			if err != nil {
				t.Fatal(err)
			}
			if err := g2.WaitListen(ctx, port); err != nil {
				t.Fatal(err)
			}
			out := run(g1, fmt.Sprintf("time -p ucmatose -s %s -p %d -S %d", g2IP, port, size))
			srv.Wait(ctx)
			if d, err := rxeguest.ParseTimeP(out); err == nil {
				t.Logf("reference ucmatose -S %d rxe→rxe: %v, %.2f MB/s both ways", size, d, float64(2*10*size)/d.Seconds()/1e6)
			}
		}
	})
	t.Run("guest vanishes mid-transfer", func(t *testing.T) {
		before, err := node.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g2.Start("rping -c -a " + endpointIP + " -C 1000000 -S 4096"); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			st, _ := node.Status(ctx)
			if s := st.Services[7174]; s.RDMAReads > before.Services[7174].RDMAReads+20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("rping from g2 never got going")
			}
			time.Sleep(100 * time.Millisecond)
		}
		g2.Close() // the peer vanishes: no DREQ, no more ACKs
		deadline = time.Now().Add(60 * time.Second)
		var st roced.Status
		for {
			st, _ = node.Status(ctx)
			if st.QPs == 0 && st.MemoryInUse == 0 && st.Services[7174].Active == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the peer vanished: %+v", st)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("vanished peer cleaned up: %+v", st)
	})

	stop()
	path := stopCapture()
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := pcapcheck.Check(f)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	rep.WriteTo(&sb)
	if rep.Bad() > 0 || rep.RoCEFrames == 0 {
		t.Errorf("pcap-check: %d bad of %d RoCE frames:\n%s", rep.Bad(), rep.RoCEFrames, sb.String())
	}
	t.Logf("pcap-check: %d RoCE frames, none bad", rep.RoCEFrames)
	out, err := exec.Command("tshark", "-r", path, "-Y", "_ws.malformed || _ws.expert.severity >= error").Output()
	if err != nil {
		t.Errorf("tshark: %v\n%s", err, out)
	} else if lines := strings.TrimSpace(string(out)); lines != "" {
		t.Errorf("tshark reports malformed frames:\n%s", lines)
	}
}

func pingGuest(t *testing.T, node interface {
	Ping(netip.Addr, uint16, ping.Config, func(ping.Result)) error
}, ip string, port uint16, cfg ping.Config) ping.Result {
	t.Helper()
	done := make(chan ping.Result, 1)
	cfg.Timeout = 30 * time.Second
	if err := node.Ping(netip.MustParseAddr(ip), port, cfg, func(r ping.Result) { done <- r }); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.Err != nil || r.Received != cfg.Count {
			t.Fatalf("roce-ping %s:%d: %+v", ip, port, r)
		}
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("roce-ping: no result")
	}
	return ping.Result{}
}
