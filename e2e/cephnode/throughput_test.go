package cephnode

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rocenode"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

// TestBridgeThroughput measures the RoCE⇄TCP bridge without a guest: the
// daemon's own active side, `cephdpdkd roce-ping --mode stream` in a
// second DPDK process, streams to a bridged port; the bridge relays the
// stream to a TCP sink on the node's address in the kernel interface's
// namespace. Three links between the processes: a veth pair both drive
// with net_af_packet, carrying 8000-byte jumbo frames so that rows at
// path MTU 4096 (four times fewer frames, each a kernel trip) stand
// beside the 1024 ones; net_memif, shared memory with no kernel on the
// path, at both; and the same veth pair with the daemon in the af_xdp
// mode (link af_xdp-native): its end, with the node's address, is the
// node's own kernel interface, on which the daemon's XDP program,
// native as the mode's default has it, takes only the RoCE, at path MTU
// 1024 and 2048, the mode's most. The same bytes then cross kernel TCP
// between two namespaces, for the ratio. The rows at a 1024-packet
// window, each link at path MTU 1024 and 4096 (af_xdp: 2048), run
// rounds times and print the medians as `bridge-ratio <link>
// <path-mtu> <ratio>` lines, with the
// bridge's costs per byte relayed beside them (`bridge-cost` lines:
// user-space copies per byte, socket system calls and goroutine
// wake-ups per MiB, from its counters, and the daemon's CPU seconds per
// GiB, from /proc: the figure a many-core node, where the client does
// not share the two CPUs, carries over; the client's beside it shows
// when the client bounds a row). "drops" counts the client's SENDs that
// found no receive buffer at the bridge: dropped unanswered, and resent
// when the bridge's sequence NAK follows once a buffer is free.
func TestBridgeThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("two DPDK processes: not in -short")
	}
	testenv.RequireRoot(t)
	bin := buildDaemon(t)
	node := testenv.NewNetNS(t)
	// The link carries jumbo frames, as RoCE networks do, so that path
	// MTU 4096 fits; the 1024 rows send the same ~1 KiB frames as over a
	// 1500-byte link. net_af_packet's ring frames must hold a whole
	// frame, and mbufs must hold a ring frame (one segment each). The
	// ring's blocks are one 8 KiB frame each: with 20 KiB blocks of two
	// 10 KiB frames, for a 9000-byte MTU, frames went missing now and
	// then, and each cost the client a 1-second transport timeout.
	const jumboMTU, jumboDataRoom = 8000, 8192 + 128
	const jumboRing = "blocksz=8192,framesz=8192,framecnt=4096"
	ifDaemon, ifPeer := testenv.NewVethPair(t)
	for _, ifname := range []string{ifDaemon, ifPeer} {
		if err := netcmd.IP("link", "set", "dev", ifname, "mtu", strconv.Itoa(jumboMTU)); err != nil {
			t.Fatal(err)
		}
	}
	sfx := node.Name[len(node.Name)-6:]
	// The EAL leaves its runtime directory behind even after a clean
	// stop: the daemons' and the clients' go once the last daemon has
	// (its cleanup, registered later, runs first).
	t.Cleanup(func() {
		for _, prefix := range []string{"cdd-tp-node-", "cdd-tp-cli-"} {
			os.RemoveAll("/var/run/dpdk/" + prefix + sfx)
		}
	})
	const nodeIP, peerIP, sinkPort = "10.86.0.2", "10.86.0.1", 6800
	const streamBytes = 512 << 20

	// The Ceph daemon's stand-in: a sink on the node's address.
	var ln net.Listener
	if err := node.Do(func() (err error) { ln, err = net.Listen("tcp", fmt.Sprintf(":%d", sinkPort)); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type sunk struct {
		n        int64
		from, to time.Time
	}
	sinks := make(chan sunk, 4)
	// pause, when set for a connection, makes the sink stop reading for
	// that long once it has 16 MiB: a Ceph daemon that stalls.
	pauses := make(chan time.Duration, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			pause := <-pauses
			go func() {
				var s sunk
				buf := make([]byte, 1<<20)
				for {
					k, err := c.Read(buf)
					if k > 0 && s.n == 0 {
						s.from = time.Now()
					}
					if s.n < 16<<20 && s.n+int64(k) >= 16<<20 && pause > 0 {
						time.Sleep(pause)
					}
					s.n += int64(k)
					if err != nil {
						break
					}
				}
				s.to = time.Now()
				c.Close()
				sinks <- s
			}()
		}
	}()

	type result struct {
		name, link       string
		mtu, window      int
		rounds           int
		clientMBps, sink float64 // medians over the rounds
		silentDrops      float64 // SENDs that found no receive
		costs            bridgeCosts
	}
	var results []result
	var stalled string
	type row struct {
		name        string
		mtu, window int
		pause       time.Duration
		rounds      int // 1 if 0; the bridge-ratio rows take ratioRounds
	}
	// The af_xdp rows' attach mode: the config's default, what an
	// operator runs on a NIC.
	const xdpAttach = xdp.Native
	// Single runs here vary by ±20%: the ratio rows are medians.
	const ratioRounds = 3
	// The daemon's services: the RoCE endpoint's, and the rest's, whose
	// settings other gives.
	services := func(other string) string {
		return fmt.Sprintf(`services:
  - {name: roce, ring_size: 4096, consumer: {type: roce}}
  - {name: other%s}
default_service: other`, other)
	}
	// A rebind daemon's port, mempool, services and kernel sections: its
	// DPDK port is port, its kernel interface in the node namespace.
	rebind := func(port string) string {
		return fmt.Sprintf("port: %s\nmempool: {data_room: %d}\n%s\nkernel: {interface: cddt%s, netns: %s, addresses: [%s/24]}",
			port, jumboDataRoom, services(", ring_size: 1024, consumer: {type: kernel}"), sfx, node.Name, nodeIP)
	}
	// The client's port on a net_af_packet link whose MTU is mtu.
	afPacketClient := func(mtu int) string {
		return fmt.Sprintf(`{name: tpcli, device: "net_af_packet2,iface=%s,%s", mtu: %d}`, ifPeer, jumboRing, mtu)
	}
	// Each transport gets a daemon of its own, and the client of each row
	// the same link's other end.
	for _, tr := range []struct {
		name             string
		daemon           string // the daemon's port, mempool, services and kernel sections
		clientPort       string
		roce, bridge     string // extra settings of the daemon's
		netns            string // the daemon's; "" for the test's own
		prepare, started func(t *testing.T)
		rows             []row
	}{{
		name:       "net_af_packet",
		daemon:     rebind(fmt.Sprintf(`{name: tpnode, device: "net_af_packet1,iface=%s,%s", mtu: %d}`, ifDaemon, jumboRing, jumboMTU)),
		clientPort: afPacketClient(jumboMTU),
		prepare:    func(t *testing.T) {},
		// A NIC bound to DPDK has no kernel stack behind it; these veth
		// ends do, and ran every frame addressed to them through IP
		// routing to be discarded (11% of the client's CPU in perf).
		// Frames for a MAC the kernel interface does not own stop at its
		// first check, and net_af_packet still takes them in promiscuous
		// mode: the daemon's interface changes its MAC once the port has
		// its own, and the client's RoCE endpoint (roce.mac) uses one its
		// interface lacks.
		started: func(t *testing.T) {
			if err := netcmd.IP("link", "set", "dev", ifDaemon, "address", "02:cd:d0:00:00:99"); err != nil {
				t.Fatal(err)
			}
		},
		rows: []row{
			{"net_af_packet, path MTU 1024, window 128 packets (Ceph over Soft-RoCE: rxe's limits)", 1024, 128, 0, 0},
			{"net_af_packet, path MTU 1024, window 1024 packets", 1024, 1024, 0, ratioRounds},
			{"net_af_packet, path MTU 4096, window 128 packets", 4096, 128, 0, 0},
			{"net_af_packet, path MTU 4096, window 1024 packets", 4096, 1024, 0, ratioRounds},
			{"net_af_packet, window 1024, the TCP sink stops reading for 3 s after 16 MiB", 1024, 1024, 3 * time.Second, 0},
		},
	}, {
		// Shared memory between the two processes, no kernel on the
		// path. The buffers are the bridge's defaults (32 receive
		// buffers per connection, 16 chunks each way): the client
		// outruns the bridge's TCP writer, which shares the two CPUs
		// with both poll loops, and the SENDs that find no buffer are
		// resent on the bridge's sequence NAK once one is free. memif
		// chains its 8 KiB buffers for nothing here: each frame fits
		// one, and one mbuf.
		name:       "net_memif",
		daemon:     rebind(fmt.Sprintf(`{name: tpnode, device: "net_memif1,role=server,bsize=8192,socket=/tmp/cddtp%s.sock", mtu: %d}`, sfx, jumboMTU)),
		clientPort: fmt.Sprintf(`{name: tpcli, device: "net_memif2,role=client,bsize=8192,socket=/tmp/cddtp%s.sock", mtu: %d}`, sfx, jumboMTU),
		prepare:    func(t *testing.T) {},
		started:    func(t *testing.T) {},
		rows: []row{
			{"net_memif, path MTU 1024, window 128 packets (Ceph over Soft-RoCE: rxe's limits)", 1024, 128, 0, 0},
			{"net_memif, path MTU 1024, window 1024 packets", 1024, 1024, 0, ratioRounds},
			{"net_memif, path MTU 4096, window 128 packets", 4096, 128, 0, 0},
			{"net_memif, path MTU 4096, window 1024 packets", 4096, 1024, 0, ratioRounds},
		},
	}, {
		// The af_xdp mode, last: the veth end the rebind daemons drove
		// moves into the node namespace with the node's address, the
		// node's own interface, and the daemon runs there. Its path MTU
		// stops at 2048 (config.MaxAFXDPRoCEMTU: a frame shares a page
		// with the XDP headroom); the link's MTU is the most native XDP
		// on a veth takes, on both ends (veth checks its peer's).
		name:       "af_xdp-" + xdpAttach.String(),
		daemon:     fmt.Sprintf("port: {name: tpnode, mode: af_xdp, af_xdp: {interface: %s, attach: %s}}\n%s", ifDaemon, xdpAttach, services("")),
		clientPort: afPacketClient(xdp.NativeMaxMTU),
		netns:      node.Name,
		prepare: func(t *testing.T) {
			for _, args := range [][]string{
				{"link", "set", "dev", ifDaemon, "netns", node.Name},
				{"-n", node.Name, "addr", "add", nodeIP + "/24", "dev", ifDaemon},
				{"-n", node.Name, "link", "set", "dev", ifDaemon, "mtu", strconv.Itoa(xdp.NativeMaxMTU), "arp", "on", "promisc", "off", "up"},
				{"link", "set", "dev", ifPeer, "mtu", strconv.Itoa(xdp.NativeMaxMTU)},
			} {
				if err := netcmd.IP(args...); err != nil {
					t.Fatal(err)
				}
			}
		},
		// The rows' link name says how the program runs: it must.
		started: func(t *testing.T) {
			if a, err := rocenode.XDPAttachedIn(node, ifDaemon); err != nil || a.ID == 0 || a.Mode != xdpAttach {
				t.Fatalf("af_xdp daemon up: %+v (%v) attached to %s, want its program in %s mode", a, err, ifDaemon, xdpAttach)
			}
		},
		rows: []row{
			{"af_xdp-" + xdpAttach.String() + ", path MTU 1024, window 1024 packets", 1024, 1024, 0, ratioRounds},
			{"af_xdp-" + xdpAttach.String() + ", path MTU 2048, window 1024 packets", config.MaxAFXDPRoCEMTU, 1024, 0, ratioRounds},
		},
	}} {
		metricsAddr := freePort(t)
		cfgPath := filepath.Join(t.TempDir(), "node.yaml")
		writeFile(t, cfgPath, fmt.Sprintf(`
eal: {lcores: "0-1", no_huge: true, memory_mb: 1024, file_prefix: cdd-tp-node-%[1]s}
%[2]s
roce:
  service: roce
  address: %[3]s
  bridge: {ports: ["%[4]d"], %[7]s}
  %[6]s
metrics: {listen: "%[5]s"}
shutdown: {drain_timeout: 1s}
`, sfx, tr.daemon, nodeIP, sinkPort, metricsAddr, tr.roce, tr.bridge))
		tr.prepare(t)
		if tr.netns != "" {
			daemonproc.RestoreNICAtEnd(t, tr.netns, bin, cfgPath, ifDaemon)
		}
		d := daemonproc.StartIn(t, tr.netns, bin, cfgPath, metricsAddr)
		tr.started(t)
		for i, c := range tr.rows {
			var client, sink, drops []float64
			var costs []bridgeCosts
			for round := range max(1, c.rounds) {
				pauses <- c.pause
				peakRSS := make(chan int64, 1)
				stopRSS := make(chan struct{})
				go func() { peakRSS <- watchRSS(d.Pid(), stopRSS) }()
				// The bridged QP's counters go with the QP: sample them while it
				// lives. The endpoint's sums of its QPs' counters stay, and
				// their change over the row is the row's.
				qpPeak := make(chan map[string]float64, 1)
				go func() { qpPeak <- watchQPCounters(d, stopRSS) }()
				before := endpointResponder(t, d)
				costs0 := scrapeBridgeCosts(t, d)
				pingCfg := filepath.Join(t.TempDir(), fmt.Sprintf("ping%d-%d.yaml", i, round))
				// The client's poll loop runs on lcore 0, the daemon's on 1. Its
				// transport timeout is what rdma_cm gives Ceph's clients over
				// RoCE (code 18, about 1 s): the stalled case rides on it.
				writeFile(t, pingCfg, fmt.Sprintf(`
eal: {lcores: "0-1", main_lcore: 1, no_huge: true, memory_mb: 512, file_prefix: cdd-tp-cli-%[1]s}
port: %[2]s
mempool: {data_room: %[6]d}
services:
  - {name: roce, ring_size: 4096, consumer: {type: roce}}
  - {name: other}
default_service: other
roce: {service: roce, address: %[3]s, mac: "02:cd:d0:00:00:01", mtu: %[4]d, window: %[5]d, timeout: 18, max_sessions: 2, memory_mb: 64}
`, sfx, tr.clientPort, peerIP, c.mtu, c.window, jumboDataRoom))
				cmd := exec.Command(bin, "roce-ping", "--config", pingCfg, "--target", nodeIP, "--port", strconv.Itoa(sinkPort),
					"--mode", "stream", "-n", strconv.Itoa(streamBytes>>17), "-s", strconv.Itoa(1<<17), "--timeout", "120s")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: roce-ping: %v\n%s\ndaemon:\n%s\n%s", c.name, err, out, tail(d.Log()), failureMetrics(d))
				}
				m := regexp.MustCompile(`([0-9.]+) MB/s`).FindSubmatch(out)
				if m == nil {
					t.Fatalf("%s: no figure in\n%s", c.name, out)
				}
				clientMBps, _ := strconv.ParseFloat(string(m[1]), 64)
				var s sunk
				select {
				case s = <-sinks:
				case <-time.After(30 * time.Second):
					t.Fatalf("%s: the sink never saw the stream end", c.name)
				}
				if s.n != streamBytes {
					t.Fatalf("%s: the sink got %d bytes of %d", c.name, s.n, streamBytes)
				}
				close(stopRSS)
				rss, qp := <-peakRSS, <-qpPeak
				bp := endpointResponder(t, d).sub(before)
				cost := scrapeBridgeCosts(t, d).sub(costs0)
				cost.client = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				checkBridgeCosts(t, c.name, cost, streamBytes)
				client, sink, drops = append(client, clientMBps), append(sink, float64(s.n)/s.to.Sub(s.from).Seconds()/1e6), append(drops, bp.silentDrops)
				costs = append(costs, cost)
				t.Logf("%s, round %d: %s; %s", c.name, round+1, strings.TrimSpace(string(out)), cost)
				if bp.rnrNaks != 0 {
					t.Errorf("%s: the bridge sent %v RNR NAKs", c.name, bp.rnrNaks)
				}
				if c.pause > 0 {
					checkBackpressure(t, c.name, bp)
					stalled = fmt.Sprintf("backpressure, the sink stalled %v: the stream completed; the client's SENDs found no receive "+
						"%v times (dropped unanswered, no RNR NAK: %v sent) and came again on its transport timer or on the "+
						"%v sequence NAKs sent once a buffer was free (%v requests seen again, %v ahead of sequence); the daemon's peak RSS %.0f MiB",
						c.pause, bp.silentDrops, bp.rnrNaks, bp.seqNaks,
						qp["cephdpdkd_roce_duplicate_requests_total"], qp["cephdpdkd_roce_out_of_sequence_total"], float64(rss)/(1<<20))
				}
			}
			results = append(results, result{c.name, tr.name, c.mtu, c.window, len(sink), median(client), median(sink), median(drops),
				medianCosts(costs)})
		}
		if v := endpointResponder(t, d).rnrNaks; v != 0 {
			t.Errorf("%s: the bridge sent %v RNR NAKs", tr.name, v)
		}
		if log, err := d.Stop(20 * time.Second); err != nil || !strings.Contains(log, "all mbufs returned") {
			t.Fatalf("%s: stop: %v\n%s", tr.name, err, tail(log))
		}
	}
	var kernels []float64
	for range ratioRounds {
		kernels = append(kernels, testenv.KernelTCPThroughput(t, streamBytes))
	}
	kernel := median(kernels)

	var b strings.Builder
	fmt.Fprintf(&b, "FIGURES bridge throughput, %d MiB each, one run; medians of the rounds:\n", streamBytes>>20)
	fmt.Fprintf(&b, "  %-88s %6s %10s %10s %7s %6s  %s\n", "", "rounds", "client", "TCP sink", "÷kernel", "drops", "bridge costs to_tcp")
	for _, r := range results {
		fmt.Fprintf(&b, "  %-88s %6d %7.1f MB/s %7.1f MB/s %6.2f %6.0f  %s\n", r.name, r.rounds, r.clientMBps, r.sink, r.sink/kernel, r.silentDrops, r.costs)
	}
	fmt.Fprintf(&b, "  %-88s %6d %18.1f MB/s (rounds %.0f)\n", "kernel TCP over a veth pair between two namespaces", ratioRounds, kernel, kernels)
	fmt.Fprintf(&b, "  %s\n", stalled)
	t.Log(b.String())
	// The figure lines, on stdout at the start of a line, as checks read
	// them (t.Log indents).
	for _, r := range results {
		if r.rounds >= ratioRounds {
			fmt.Printf("bridge-ratio %s %d %.2f\n", r.link, r.mtu, r.sink/kernel)
			fmt.Printf("bridge-cost %s %d %s\n", r.link, r.mtu, r.costs)
		}
	}
}

// watchRSS samples a process's resident memory every 50 ms until stop and
// returns the peak, in bytes.
func watchRSS(pid int, stop <-chan struct{}) int64 {
	var peak int64
	for {
		if rss, err := daemonproc.RSS(pid); err == nil {
			peak = max(peak, rss)
		}
		select {
		case <-stop:
			return peak
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// watchQPCounters scrapes the daemon every 100 ms until stop and returns,
// for the per-QP counters that have no endpoint-level sum (duplicate and
// out-of-sequence requests), the largest sum over the QPs seen in one
// scrape: the series go with their QP.
func watchQPCounters(d *daemonProc, stop <-chan struct{}) map[string]float64 {
	peak := map[string]float64{}
	for {
		if m, err := d.Metrics(); err == nil {
			for _, k := range []string{"cephdpdkd_roce_duplicate_requests_total", "cephdpdkd_roce_out_of_sequence_total"} {
				peak[k] = max(peak[k], sum(m, k))
			}
		}
		select {
		case <-stop:
			return peak
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// responderCounters are the daemon's RoCE endpoint counters that show
// how its QPs answered requests that found no receive buffer. They are
// the sums of the per-QP counters over every QP the endpoint has had, so
// a figure taken after the QPs are gone still holds what they counted.
type responderCounters struct {
	rnrNaks     float64 // RNR NAKs sent (a Ceph client's QP dies of one)
	silentDrops float64 // SENDs dropped unanswered for want of a receive buffer
	seqNaks     float64 // sequence NAKs sent, once a buffer is free again (and on loss)
}

// endpointResponder scrapes the daemon's endpoint-level responder
// counters; a counter missing from the scrape fails the test rather than
// read as 0.
func endpointResponder(t *testing.T, d *daemonProc) responderCounters {
	t.Helper()
	get := mustScrape(t, d, "")
	return responderCounters{
		rnrNaks:     get("cephdpdkd_roce_endpoint_rnr_naks_sent_total"),
		silentDrops: get("cephdpdkd_roce_endpoint_rnr_silent_drops_total"),
		seqNaks:     get("cephdpdkd_roce_endpoint_sequence_naks_sent_total"),
	}
}

// sub returns the change from b to c.
func (c responderCounters) sub(b responderCounters) responderCounters {
	return responderCounters{c.rnrNaks - b.rnrNaks, c.silentDrops - b.silentDrops, c.seqNaks - b.seqNaks}
}

// checkBackpressure fails the test unless d, the change of the endpoint's
// responder counters over a scenario whose Ceph side stalls, shows the
// backpressure happening as a Ceph client needs it: SENDs that found the
// bridge's receive buffers full were dropped unanswered, sequence NAKs
// had them resent once buffers were free, and no RNR NAK went out.
func checkBackpressure(t *testing.T, scenario string, d responderCounters) {
	t.Helper()
	if d.rnrNaks != 0 {
		t.Errorf("%s: %v RNR NAKs sent to a Ceph client", scenario, d.rnrNaks)
	}
	if d.silentDrops <= 0 {
		t.Errorf("%s: no SEND found the receive buffers full (%v dropped): the stall exerted no backpressure", scenario, d.silentDrops)
	}
	if d.seqNaks <= 0 {
		t.Errorf("%s: no sequence NAK sent (%v) after SENDs were dropped: the client could only resend on its transport timer", scenario, d.seqNaks)
	}
}

// bridgeCosts are the bridge's per-byte costs over a row, RoCE→TCP (the
// direction the test streams), from its counters and the daemon's CPU
// time.
type bridgeCosts struct {
	bytes, copied, syscalls, wakeups float64
	cpu                              time.Duration // the daemon's, all threads
	client                           time.Duration // the test's client's (roce-ping)
}

// scrapeBridgeCosts reads the daemon's to_tcp counters and CPU time; a
// counter missing from the scrape fails the test rather than read as 0.
func scrapeBridgeCosts(t *testing.T, d *daemonProc) bridgeCosts {
	t.Helper()
	get := mustScrape(t, d, "direction=to_tcp")
	cpu, err := daemonproc.CPUTime(d.Pid())
	if err != nil {
		t.Fatal(err)
	}
	return bridgeCosts{
		bytes:    get("cephdpdkd_roce_bridge_bytes_total"),
		copied:   get("cephdpdkd_roce_bridge_copied_bytes_total"),
		syscalls: get("cephdpdkd_roce_bridge_syscalls_total"),
		wakeups:  get("cephdpdkd_roce_bridge_wakeups_total"),
		cpu:      cpu,
	}
}

func (c bridgeCosts) sub(b bridgeCosts) bridgeCosts {
	return bridgeCosts{c.bytes - b.bytes, c.copied - b.copied, c.syscalls - b.syscalls, c.wakeups - b.wakeups, c.cpu - b.cpu, c.client - b.client}
}

func (c bridgeCosts) copiesPerByte() float64    { return c.copied / c.bytes }
func (c bridgeCosts) syscallsPerMiB() float64   { return c.syscalls / (c.bytes / (1 << 20)) }
func (c bridgeCosts) wakeupsPerMiB() float64    { return c.wakeups / (c.bytes / (1 << 20)) }
func (c bridgeCosts) cpuSecondsPerGiB() float64 { return c.cpu.Seconds() / (c.bytes / (1 << 30)) }
func (c bridgeCosts) clientSecondsPerGiB() float64 {
	return c.client.Seconds() / (c.bytes / (1 << 30))
}

func (c bridgeCosts) String() string {
	return fmt.Sprintf("copies/byte %.2f syscalls/MiB %.1f wakeups/MiB %.1f daemon-cpu-s/GiB %.2f client-cpu-s/GiB %.2f",
		c.copiesPerByte(), c.syscallsPerMiB(), c.wakeupsPerMiB(), c.cpuSecondsPerGiB(), c.clientSecondsPerGiB())
}

// checkBridgeCosts fails the test unless the counters saw the row's
// bytes relayed, each through at least one system call.
func checkBridgeCosts(t *testing.T, row string, c bridgeCosts, want int) {
	t.Helper()
	if c.bytes != float64(want) {
		t.Errorf("%s: the bridge counted %.0f bytes to TCP, the sink got %d", row, c.bytes, want)
	}
	if c.syscalls <= 0 {
		t.Errorf("%s: the bridge counted no system call for %.0f bytes", row, c.bytes)
	}
}

// medianCosts returns the median of each figure over rounds.
func medianCosts(cs []bridgeCosts) bridgeCosts {
	pick := func(f func(bridgeCosts) float64) float64 {
		v := make([]float64, len(cs))
		for i, c := range cs {
			v[i] = f(c)
		}
		return median(v)
	}
	// Stored as per-byte figures over one byte: String divides by bytes.
	return bridgeCosts{
		bytes:    1 << 30,
		copied:   pick(bridgeCosts.copiesPerByte) * (1 << 30),
		syscalls: pick(bridgeCosts.syscallsPerMiB) * (1 << 10),
		wakeups:  pick(bridgeCosts.wakeupsPerMiB) * (1 << 10),
		cpu:      time.Duration(pick(bridgeCosts.cpuSecondsPerGiB) * float64(time.Second)),
		client:   time.Duration(pick(bridgeCosts.clientSecondsPerGiB) * float64(time.Second)),
	}
}

// median returns the middle value of v (the mean of the two middle ones
// for an even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// mustScrape scrapes d and returns what sums a metric's series, only
// those whose one label is label when it is set; a metric with no such
// series fails the test rather than read as 0.
func mustScrape(t *testing.T, d *daemonProc, label string) func(name string) float64 {
	t.Helper()
	m, err := d.Metrics()
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return func(name string) float64 {
		t.Helper()
		prefix, want := name+"{", []string(nil)
		if label != "" {
			prefix, want = name+"{"+label+"}", []string{label}
		}
		if countSeries(m, prefix) == 0 {
			t.Fatalf("the daemon exports no %s", strings.TrimSuffix(prefix, "{"))
		}
		return sum(m, name, want...)
	}
}
