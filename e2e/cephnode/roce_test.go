package cephnode

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/cephcluster"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rocenode"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rxeguest"
)

const (
	roceNodeIP  = rocenode.NodeIP
	roceGuestIP = rocenode.GuestIP
)

// TestCephOverRoCE runs the RoCE tests on one node (startRoCENode: a
// cluster, the daemon and a booted Soft-RoCE guest), one subtest each,
// in order, rather than set up a node for each. Each subtest starts from
// a clean node (prepare: the daemon running, the OSD and monitor up, no
// loss rule or netem qdisc, no bridged connection) and ends by checking
// that it left the node clean (finish: no QP, bridged connection or TCP
// socket of the bridge's, no RNR NAK, no fd or goroutine leaked, and
// every mbuf back when the daemon stops). `-run TestCephOverRoCE/Lossy`
// sets up the node and runs one.
func TestCephOverRoCE(t *testing.T) {
	requireTools(t)
	if err := rxeguest.CephAvailable(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft (Debian's nftables, installed by scripts/deps.sh): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 24*time.Minute)
	defer cancel()
	rn := startRoCENode(ctx, t, stepLog(t))
	for _, sub := range []struct {
		name string
		run  func(*testing.T, *roceNode, func(string, ...any))
	}{
		{"Bridge", testRoCEBridge},
		{"Faults", testRoCEFaults},
		{"MonRestart", testRoCEMonRestart},
		{"Lossy", testRoCELossy},
		// Last: once, Lossy's burst of loss failed the client's
		// connection (ETIMEDOUT) right after this.
		{"Netem", testRoCENetem},
	} {
		t.Run(sub.name, func(t *testing.T) {
			logf := stepLog(t)
			rn.prepare(t, logf)
			sub.run(t, rn, logf)
			rn.finish(t, logf)
		})
	}
}

// testRoCEBridge: Debian's unmodified rados, in a Soft-RoCE guest in
// rdma_cm mode, reads and writes a real cluster whose daemons speak TCP
// on the node's kernel interface: cephdpdkd terminates the client's RoCE
// connections on its DPDK port and bridges each to the daemon's TCP
// endpoint at the same address. A TCP client uses the same cluster at
// the same time.
func testRoCEBridge(t *testing.T, rn *roceNode, logf func(string, ...any)) {
	ctx := rn.ctx
	d, cl, g, node := rn.d, rn.cl, rn.g, rn.node
	netState := rn.netState

	rados := func(args ...string) string {
		t.Helper()
		return rn.rados(t, logf, args...)
	}

	if out := rados("lspools"); !strings.Contains(out, cl.Pool()) {
		t.Fatalf("lspools: %q lacks pool %s", out, cl.Pool())
	}
	sums := make(map[string][sha256.Size]byte)
	for _, size := range []int{1 << 20, 4 << 20, 64 << 20} {
		name := fmt.Sprintf("roce-%d", size)
		want := rn.shareObject(t, name, size)
		sums[name] = want
		rados("-p", cl.Pool(), "put", name, "/mnt/host/"+name)
		rn.guestGet(t, logf, name, want)
		// The same object through a TCP client: one cluster, both kinds.
		if got, _ := rn.tcpGet(ctx, t, name); got != want {
			t.Fatalf("TCP client read %s back differently", name)
		}
		logf("%s: %d MiB put and got over RoCE, byte-identical; read back by a TCP client too", name, size>>20)
	}

	bench := rados("-p", cl.Pool(), "bench", "10", "write", "--no-cleanup")
	for i := 1; i < benchRepeat(); i++ {
		rados("-p", cl.Pool(), "bench", "10", "write", "--no-cleanup")
	}
	bw, lat := bwRE.FindStringSubmatch(bench), latRE.FindStringSubmatch(bench)
	if bw == nil || lat == nil {
		t.Fatalf("rados bench: no figures in\n%s", bench)
	}
	logf("FIGURES rados bench 10 write over RoCE from a TCG guest through cephdpdkd: %s MB/s, average latency %s s", bw[1], lat[1])

	// The monitor sees the RoCE client's session. The client is polled
	// for while it runs: a TCG guest under load takes seconds to start it.
	bg, err := g.Start(fmt.Sprintf("rados -p %s bench 10 write --no-cleanup", cl.Pool()))
	if err != nil {
		t.Fatal(err)
	}
	var sessions []byte
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(time.Second) {
		sessions, err = cl.Command(ctx, node.Name, "ceph", "tell", "mon.a", "sessions").CombinedOutput()
		if err != nil {
			t.Fatalf("ceph tell mon.a sessions: %v\n%s", err, sessions)
		}
		// The client's address as the monitor sees it is the bridge's
		// TCP source, the node's own; the session carries the guest's
		// hostname.
		if strings.Contains(string(sessions), `"remote_host": "c1"`) {
			logf("the monitor lists the RoCE client's session (remote_host c1)")
			break
		}
		if time.Now().After(deadline) {
			out, _ := bg.Output(ctx)
			t.Errorf("the monitor's sessions do not show the RoCE client (host c1):\n%s\nclient:\n%s", sessions, out)
			break
		}
	}
	bg.Wait(ctx)

	// A Ceph daemon that stalls: the OSD is stopped in the middle of a
	// 64 MiB put, written as one op (-b) so that the client has more
	// in flight than the bridge and the OSD's socket buffer take (rados
	// put's default is 4 MiB ops, each waiting for its reply). The
	// bridge's TCP writer blocks, its chunks and the
	// connection's receive buffers fill, and the client's SENDs that find
	// none are dropped unanswered (never an RNR NAK); once the OSD reads
	// again, a sequence NAK (or the client's own timer) has them resent,
	// and the object arrives whole. How long the stall must last for the
	// client to feel it depends on how fast the client writes (a TCG guest
	// on a loaded machine fills the socket buffer slowly), so the OSD stays
	// stopped until the first SEND is dropped, plus a second, and at most
	// a minute. The endpoint's counters must show both the drops and the
	// sequence NAKs: without them the stall did not test backpressure.
	osd := cl.OSDPid()
	if osd == 0 {
		t.Fatal("no OSD running")
	}
	m0, err := d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	const toTCP = "cephdpdkd_roce_bridge_bytes_total{direction=to_tcp}"
	bytes0 := m0[toTCP]
	// The connection's QP goes with its counters; the endpoint's sums of
	// them stay, and their change over the stall is the stall's.
	resp0 := endpointResponder(t, d)
	const stalledObj, maxStall = "roce-67108864", time.Minute
	putStart := time.Now()
	stalledPut, err := g.Start(fmt.Sprintf("rados -p %s -b %d put stalled /mnt/host/%s", cl.Pool(), 64<<20, stalledObj))
	if err != nil {
		t.Fatal(err)
	}
	waitMetric(t, d, toTCP, func(v float64) bool { return v >= bytes0+8<<20 }, 60*time.Second)
	stopRSS := make(chan struct{})
	peakRSS := make(chan int64, 1)
	go func() { peakRSS <- watchRSS(d.Pid(), stopRSS) }()
	if err := syscall.Kill(osd, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stallStart := time.Now()
	for time.Since(stallStart) < maxStall && endpointResponder(t, d).silentDrops == resp0.silentDrops {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if err := syscall.Kill(osd, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stallFor := time.Since(stallStart).Round(100 * time.Millisecond)
	logf("the OSD was stopped for %v in the middle of a 64 MiB put", stallFor)
	if code, err := stalledPut.Wait(ctx); err != nil || code != 0 {
		out, _ := stalledPut.Output(ctx)
		t.Fatalf("the put across the OSD's stall: exit %d, %v\n%s\nnetwork:\n%s\ndaemon's metrics:\n%s", code, err, out, netState(), failureMetrics(d))
	}
	close(stopRSS)
	rss := <-peakRSS
	bp := endpointResponder(t, d).sub(resp0)
	checkBackpressure(t, fmt.Sprintf("the OSD stopped %v mid-put", stallFor), bp)
	if got, n := rn.tcpGet(ctx, t, "stalled"); got != sums[stalledObj] {
		t.Fatalf("the object put across the OSD's stall reads back differently (%d bytes of %d)", n, 64<<20)
	}
	logf("FIGURES backpressure, the OSD stopped %v mid-put: the put took %.1f s and is byte-identical; the client's SENDs "+
		"found no receive %v times (dropped unanswered, no RNR NAK: %v sent), %v sequence NAKs sent once a buffer was free; "+
		"the daemon's peak RSS %.0f MiB",
		stallFor, time.Since(putStart).Seconds(), bp.silentDrops, bp.rnrNaks, bp.seqNaks, float64(rss)/(1<<20))

	// A client killed mid-write leaves nothing behind.
	if _, err := g.Start(fmt.Sprintf("rados -p %s put killed /mnt/host/roce-%d", cl.Pool(), 64<<20)); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, d, "cephdpdkd_roce_bridge_connections", func(v float64) bool { return v >= 2 }, 30*time.Second)
	time.Sleep(time.Second)
	// The guest's busybox has killall, not pkill.
	if out, code, err := g.Run(ctx, "killall -9 rados"); err != nil || code != 0 {
		t.Fatalf("guest: killall -9 rados: exit %d, %v\n%s", code, err, out)
	}
	logf("rados killed mid-write")
	waitMetric(t, d, "cephdpdkd_roce_bridge_connections", func(v float64) bool { return v == 0 }, 60*time.Second)
	m, _ := d.Metrics()
	if qps := countSeries(m, "cephdpdkd_roce_qp_state{"); qps != 0 {
		t.Errorf("%d QPs left after the killed client", qps)
	}
	logf("after the kill: no bridged connection or QP left; bridge %v accepted, %v refused, errors %v",
		sum(m, "cephdpdkd_roce_bridge_accepted_total"), sum(m, "cephdpdkd_roce_bridge_refused_total"), sum(m, "cephdpdkd_roce_bridge_errors_total"))
	// The QPs are gone with their counters: the endpoint's sums of them
	// cover the daemon's whole run.
	total := endpointResponder(t, d)
	logf("over the daemon's run: %v RNR NAKs sent, %v SENDs dropped unanswered for want of a receive buffer, %v sequence NAKs sent",
		total.rnrNaks, total.silentDrops, total.seqNaks)
	if total.rnrNaks != 0 {
		t.Errorf("the daemon sent %v RNR NAKs to a Ceph client", total.rnrNaks)
	}

}

// roceNode is a real Ceph cluster (mon and memstore OSD on TCP) in the
// node namespace behind cephdpdkd, whose DPDK port (net_af_packet on a
// veth) sits on a bridge with a Soft-RoCE guest configured as a Ceph
// client in rdma_cm mode: the RoCE tests' common ground.
type roceNode struct {
	d      *daemonProc
	cl     *cephcluster.Cluster
	g      *rxeguest.Guest
	br     *rxeguest.Switch
	node   *testenv.NetNS
	ifname string
	ctx    context.Context

	// t is the test that owns the node: what it starts lives until that
	// test ends, past the subtest that started it.
	t                         *testing.T
	bin, cfgPath, metricsAddr string // to start the daemon again
	// base is the daemon's scrape when it started, before any client:
	// what checkIdle measures leaks against.
	base map[string]float64
}

func startRoCENode(ctx context.Context, t *testing.T, logf func(string, ...any)) *roceNode {
	t.Helper()
	n := rocenode.Start(t, buildDaemon(t), logf)
	// Before any RoCE client: what checkIdle measures leaks against.
	base, err := n.Daemon.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	g, err := n.BootClient(ctx, t, "c1")
	if err != nil {
		t.Fatal(err)
	}
	logf("guest c1 (%s) up with the rdma_cm client conf", roceGuestIP)
	// The guest's kernel traces its neighbour entries and ARP frames, for a
	// failure report.
	if err := rocenode.TraceNeighbours(ctx, g); err != nil {
		t.Fatal(err)
	}
	return &roceNode{d: n.Daemon, cl: n.Cluster, g: g, br: n.Bridge, node: n.NS, ifname: n.Ifname, ctx: ctx,
		t: t, bin: n.Bin, cfgPath: n.ConfigPath, metricsAddr: n.MetricsAddr, base: base}
}

// startDaemon starts the daemon again, as systemd would after it died or
// was stopped, and takes its base scrape. It belongs to the node's test,
// not to the subtest that calls it.
func (rn *roceNode) startDaemon(t *testing.T) {
	t.Helper()
	rn.d = startDaemon(rn.t, rn.bin, rn.cfgPath, rn.metricsAddr)
	var err error
	if rn.base, err = rn.d.Metrics(); err != nil {
		t.Fatal(err)
	}
}

// prepare gives a subtest a clean node whatever the one before it left:
// the daemon running, the OSD and the monitor up, the guest's link
// without loss or netem, no client of the guest's running and no
// bridged connection left.
func (rn *roceNode) prepare(t *testing.T, logf func(string, ...any)) {
	t.Helper()
	setLoss(t, rn.br.NS, "")
	if _, _, err := rn.g.Run(rn.ctx, "killall -9 rados cmtime 2>/dev/null; "+guestTC+" qdisc del dev eth0 root 2>/dev/null; true"); err != nil {
		t.Fatal(err)
	}
	if rn.cl.OSDPid() == 0 {
		if err := rn.cl.StartOSD(rn.ctx); err != nil {
			t.Fatal(err)
		}
		logf("prepare: the OSD was down; started again")
	}
	if rn.cl.MonPid() == 0 {
		if err := rn.cl.RestartMon(rn.ctx); err != nil {
			t.Fatal(err)
		}
		logf("prepare: the monitor was down; started again")
	}
	select {
	case <-rn.d.Exited():
		rn.startDaemon(t)
		logf("daemon started")
	default:
		waitMetric(t, rn.d, "cephdpdkd_roce_bridge_connections", func(v float64) bool { return v == 0 }, 60*time.Second)
	}
}

// finish checks that a subtest left the node clean (checkIdle), then
// stops the daemon and checks that every mbuf came back.
func (rn *roceNode) finish(t *testing.T, logf func(string, ...any)) {
	t.Helper()
	select {
	case <-rn.d.Exited():
		log, err := rn.d.Stop(0)
		t.Fatalf("the daemon is not running: %v\n%s", err, tail(log))
	default:
	}
	rn.checkIdle(t, rn.base)
	// The benches' objects go: the memstore OSD keeps them in RAM, and
	// the next subtests write theirs.
	cctx, cancel := context.WithTimeout(rn.ctx, 2*time.Minute)
	defer cancel()
	if out, err := rn.cl.Command(cctx, rn.br.NS, "rados", "-p", rn.cl.Pool(), "cleanup", "--prefix", "benchmark_data").CombinedOutput(); err != nil {
		t.Errorf("rados cleanup: %v\n%s", err, out)
	}
	log, err := rn.d.Stop(20 * time.Second)
	if err != nil || !strings.Contains(log, "all mbufs returned") {
		t.Fatalf("stop: %v\n%s", err, tail(log))
	}
	logf("the node is idle; daemon stopped: all mbufs returned")
}

// netState is what the guest and the node's side of the link say of a
// failure (rocenode.NetState).
func (rn *roceNode) netState() string {
	return rocenode.NetState(rn.ctx, rn.g, rn.node.Name, rn.ifname, rn.br.NS)
}

// client is the guest as rocenode drives it, reaching the daemon running
// now.
func (rn *roceNode) client() *rocenode.Client {
	return &rocenode.Client{Ctx: rn.ctx, G: rn.g, D: rn.d, NetState: rn.netState}
}

// stepLog returns t.Logf with each line prefixed by the seconds since
// the call (rocenode.StepLog).
func stepLog(t *testing.T) func(string, ...any) { return rocenode.StepLog(t) }

// rados runs Debian's rados in the guest (rocenode.Client.Rados).
func (rn *roceNode) rados(t *testing.T, logf func(string, ...any), args ...string) string {
	t.Helper()
	return rn.client().Rados(t, logf, args...)
}

// shareObject writes size random bytes to the guest's share as name (the
// guest's /mnt/host/name) and returns their sha256.
func (rn *roceNode) shareObject(t *testing.T, name string, size int) [sha256.Size]byte {
	t.Helper()
	return rn.client().ShareObject(t, name, size)
}

// guestGet gets object name over RoCE into the guest's /tmp and fails the
// test unless it reads back with the sha256 want.
func (rn *roceNode) guestGet(t *testing.T, logf func(string, ...any), name string, want [sha256.Size]byte) {
	t.Helper()
	rn.client().Get(t, logf, rn.cl.Pool(), name, want)
}

// tcpGet gets object name through a TCP client in the bridge namespace
// and returns its sha256 and size; it fails the test if the get fails.
func (rn *roceNode) tcpGet(ctx context.Context, t *testing.T, name string) (sum [sha256.Size]byte, size int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	if b, err := rn.cl.Command(ctx, rn.br.NS, "rados", "-p", rn.cl.Pool(), "get", name, out).CombinedOutput(); err != nil {
		t.Fatalf("TCP client get %s: %v\n%s", name, err, b)
	}
	got, _ := os.ReadFile(out)
	return sha256.Sum256(got), len(got)
}

// waitMetric polls the daemon's metrics until name satisfies ok.
func waitMetric(t *testing.T, d *daemonProc, name string, ok func(float64) bool, within time.Duration) {
	t.Helper()
	d.WaitMetric(t, name, ok, within)
}

var (
	countSeries    = daemonproc.CountSeries
	failureMetrics = rocenode.FailureMetrics
)

func benchRepeat() int {
	n, _ := strconv.Atoi(os.Getenv("CDD_BENCH_REPEAT"))
	return max(n, 1)
}

// guestRadosPid returns the pid of the guest's rados whose command line
// contains args, and whether there is one.
func guestRadosPid(t *testing.T, rn *roceNode, args string) (int, bool) {
	t.Helper()
	// The guest's busybox has no pgrep.
	cmd := fmt.Sprintf(`for p in $(pidof rados); do tr '\0' ' ' </proc/$p/cmdline | grep -qF -- %s && echo $p; done`, qemuvm.ShellQuote(args))
	out, _, err := rn.g.Run(rn.ctx, cmd)
	if err != nil {
		t.Fatalf("guest: %s: %v", cmd, err)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(out))
	return pid, perr == nil
}

// cmIDRE matches a connected rdma_cm ID of `rdma resource show cm_id` to
// the node: the thread that made it, its source port and destination
// port.
var cmIDRE = regexp.MustCompile(`pid (\d+) .*src-addr [0-9.]+:(\d+) dst-addr ` + regexp.QuoteMeta(roceNodeIP) + `:(\d+)`)

// guestConns returns the source ports of process pid's rdma_cm
// connections to the node (to port, or to any port if port is 0), as
// the guest's rdma tool lists them: by thread (rados's messenger
// threads make them), so pid's threads are looked up too. A process that
// is gone has none.
func guestConns(t *testing.T, rn *roceNode, pid, port int) []int {
	t.Helper()
	cmd := fmt.Sprintf("ls /proc/%d/task 2>/dev/null; echo ---; rdma resource show cm_id", pid)
	out, code, err := rn.g.Run(rn.ctx, cmd)
	tasks, cmIDs, found := strings.Cut(out, "---")
	if err != nil || code != 0 || !found {
		t.Fatalf("guest: %s: exit %d, %v\n%s", cmd, code, err, out)
	}
	threads := strings.Fields(tasks)
	var ports []int
	for _, m := range cmIDRE.FindAllStringSubmatch(cmIDs, -1) {
		src, _ := strconv.Atoi(m[2])
		dst, _ := strconv.Atoi(m[3])
		if slices.Contains(threads, m[1]) && (port == 0 || dst == port) {
			ports = append(ports, src)
		}
	}
	return ports
}
