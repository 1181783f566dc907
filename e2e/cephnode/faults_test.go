package cephnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rxeguest"
)

// putLoop is a Soft-RoCE client writing objects of known content, one
// rados process each, so that a put's exit status is the client's
// acknowledgement of that object. A put stuck across a fault is bounded
// (90 s): Ceph's client retries its op on a new connection, but one that
// never returned would hang the test.
type putLoop struct {
	t      *testing.T
	rn     *roceNode
	prefix string
	sums   [][32]byte // by object number, from 1
	acked  string     // the guest's log of acknowledgements, "ok N" or "fail N"
	proc   *rxeguest.BackgroundCmd
}

func startPutLoop(t *testing.T, rn *roceNode, prefix string, objects, size int) *putLoop {
	t.Helper()
	p := &putLoop{t: t, rn: rn, prefix: prefix, sums: make([][32]byte, objects+1),
		acked: filepath.Join(rn.g.ShareDir(), prefix+"-acked")}
	for i := 1; i <= objects; i++ {
		p.sums[i] = rn.shareObject(t, fmt.Sprintf("%s%d", prefix, i), size)
	}
	var err error
	p.proc, err = rn.g.Start(fmt.Sprintf("for i in $(seq 1 %[1]d); do if timeout 90 rados -p %[2]s put %[3]s$i /mnt/host/%[3]s$i; then echo ok $i; else echo fail $i; fi >> /mnt/host/%[3]s-acked; done",
		objects, rn.cl.Pool(), prefix))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// state returns the acknowledged and failed puts so far, and the last
// line of the log.
func (p *putLoop) state() (ok []int, failed int, last string) {
	b, _ := os.ReadFile(p.acked)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if n, found := strings.CutPrefix(l, "ok "); found {
			i, _ := strconv.Atoi(n)
			ok = append(ok, i)
		} else if strings.HasPrefix(l, "fail ") {
			failed++
		}
		last = l
	}
	return ok, failed, last
}

// waitAcked waits until at least n puts are acknowledged.
func (p *putLoop) waitAcked(ctx context.Context, n int, within time.Duration) {
	p.t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(500 * time.Millisecond) {
		if ok, _, _ := p.state(); len(ok) >= n {
			return
		}
		if time.Now().After(deadline) {
			out, _ := p.proc.Output(ctx)
			p.t.Fatalf("%s: fewer than %d puts acknowledged in %v:\n%s", p.prefix, n, within, out)
		}
	}
}

// finish waits for the loop to end and checks that the client recovered
// from the fault (the last put, and one after okAtFault, succeeded) and
// that every acknowledged object reads back byte-identical through a TCP
// client.
func (p *putLoop) finish(ctx context.Context, logf func(string, ...any), okAtFault int) {
	t := p.t
	t.Helper()
	if code, err := p.proc.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("%s: the writer: exit %d, %v", p.prefix, code, err)
	}
	ok, failed, last := p.state()
	logf("%s: the client acknowledged %d of %d puts, %d failed across the fault; the last: %q", p.prefix, len(ok), len(p.sums)-1, failed, last)
	if !strings.HasPrefix(last, "ok ") {
		t.Errorf("%s: the last put failed (%q): the client did not recover\n%s", p.prefix, last, p.rn.netState())
	}
	if len(ok) <= okAtFault {
		t.Errorf("%s: no put succeeded after the fault (%d acknowledged at the fault, %d at the end)", p.prefix, okAtFault, len(ok))
	}
	for _, i := range ok {
		name := fmt.Sprintf("%s%d", p.prefix, i)
		if got, _ := p.rn.tcpGet(ctx, t, name); got != p.sums[i] {
			t.Errorf("acknowledged object %s reads back differently", name)
		}
	}
	logf("%s: all %d acknowledged objects read back byte-identical", p.prefix, len(ok))
}

// checkIdle checks that the daemon, its clients gone, holds nothing for
// them: no bridged connection or QP, no RNR NAK sent, and no fd or
// goroutine more than in base (give or take the scrape's own).
func (rn *roceNode) checkIdle(t *testing.T, base map[string]float64) {
	t.Helper()
	waitMetric(t, rn.d, "cephdpdkd_roce_bridge_connections", func(v float64) bool { return v == 0 }, 60*time.Second)
	m, err := rn.d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if n := countSeries(m, "cephdpdkd_roce_qp_state{"); n != 0 {
		t.Errorf("%d QPs left after the clients exited", n)
	}
	if v := endpointResponder(t, rn.d).rnrNaks; v != 0 {
		t.Errorf("the daemon sent %v RNR NAKs", v)
	}
	for _, k := range []string{"process_open_fds", "go_goroutines"} {
		if v, v0 := m[k], base[k]; v > v0+2 {
			t.Errorf("%s: %v with the clients gone, %v before they connected", k, v, v0)
		}
	}
	if socks := rn.bridgeSockets(t, ""); len(socks) != 0 {
		t.Errorf("the bridge holds %d TCP connections to the Ceph daemons with no client left (half-open sessions):\n%s",
			len(socks), strings.Join(socks, "\n"))
	}
}

// bridgeSockets lists the daemon's TCP sockets in the node namespace,
// the bridge's side of its sessions with the Ceph daemons, that are not
// listening; with port set, only those to that port of the node.
func (rn *roceNode) bridgeSockets(t *testing.T, port string) []string {
	t.Helper()
	args := []string{"netns", "exec", rn.node.Name, "ss", "-Htanp", "state", "all", "exclude", "listening"}
	if port != "" {
		args = append(args, "dport", "= :"+port)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ss in %s: %v\n%s", rn.node.Name, err, out)
	}
	owner := fmt.Sprintf("pid=%d,", rn.d.Pid())
	var socks []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, owner) {
			socks = append(socks, strings.Join(strings.Fields(line), " "))
		}
	}
	return socks
}

// testRoCEFaults: a Soft-RoCE client writes objects through the
// bridge while
//   - the daemon is killed (SIGKILL) and started again, as systemd would:
//     the client's connections die with it, and it reconnects to the new
//     one;
//   - the OSD is stopped cleanly and started again: the bridge's TCP side
//     sees the resets, and the client's ops resume on the new OSD;
//   - a reconnect storm: 2 × 200 rdma_cm connects at once to the OSD's
//     port and their disconnects; every REQ is answered or refused with
//     a counted REJ;
//   - a client that vanishes mid-connection with its DREQ lost: the
//     daemon's idle probes find it dead and the bridge reaps its
//     sessions.
//
// After each, the writes succeed again and every object the client was
// told was written reads back byte-identical; the daemon ends with no QP
// or bridged connection, no RNR NAK, every mbuf back and no fd or
// goroutine more than it started with.
func testRoCEFaults(t *testing.T, rn *roceNode, logf func(string, ...any)) {
	ctx := rn.ctx
	// The daemon killed mid-write, and started again.
	w := startPutLoop(t, rn, "dk", 10, 256<<10)
	w.waitAcked(ctx, 3, 3*time.Minute)
	rn.killDaemon(t)
	ok, _, _ := w.state()
	logf("daemon killed (SIGKILL) after %d acknowledged puts", len(ok))
	time.Sleep(2 * time.Second)
	rn.startDaemon(t)
	base := rn.base
	logf("daemon started again")
	w.finish(ctx, logf, len(ok))
	rn.checkIdle(t, base)

	// The OSD stopped mid-write, and started again.
	w = startPutLoop(t, rn, "os", 8, 256<<10)
	w.waitAcked(ctx, 3, 3*time.Minute)
	reset0, _ := rn.d.Metrics()
	if err := rn.cl.StopOSD(); err != nil {
		t.Fatal(err)
	}
	ok, _, _ = w.state()
	logf("OSD stopped after %d acknowledged puts", len(ok))
	time.Sleep(3 * time.Second)
	if err := rn.cl.StartOSD(ctx); err != nil {
		t.Fatal(err)
	}
	logf("OSD started again")
	w.finish(ctx, logf, len(ok))
	rn.checkIdle(t, base)
	m, _ := rn.d.Metrics()
	delta := func(k string) float64 { return sum(m, k) - sum(reset0, k) }
	logf("bridge across the OSD's restart: %v connections accepted, %v closed, %v failed on the TCP side, %v on the RoCE side",
		delta("cephdpdkd_roce_bridge_accepted_total"), delta("cephdpdkd_roce_bridge_closed_total"),
		sum(m, "cephdpdkd_roce_bridge_errors_total", "side=tcp")-sum(reset0, "cephdpdkd_roce_bridge_errors_total", "side=tcp"),
		sum(m, "cephdpdkd_roce_bridge_errors_total", "side=roce")-sum(reset0, "cephdpdkd_roce_bridge_errors_total", "side=roce"))

	// A reconnect storm while the client writes: rdma-core's cmtime
	// connects 200 QPs at once to the OSD's port, which the bridge dials
	// over TCP for each, and drops them all, twice (the soak storms on,
	// in rounds of its own). Each REQ is answered or refused with a
	// counted REJ (the node's max_sessions is 16), the client's puts keep
	// working, and nothing is left.
	w = startPutLoop(t, rn, "st", 8, 64<<10)
	w.waitAcked(ctx, 2, 3*time.Minute)
	storm0, _ := rn.d.Metrics()
	const storms, perStorm = 2, 200
	rn.reconnectStorm(t, logf, storms, perStorm)
	ok, _, _ = w.state()
	w.finish(ctx, logf, len(ok)-1)
	rn.checkIdle(t, base)
	m, _ = rn.d.Metrics()
	reqs := sum(m, "cephdpdkd_roce_cm_messages_total", "direction=received", "message=req") - sum(storm0, "cephdpdkd_roce_cm_messages_total", "direction=received", "message=req")
	est := sum(m, "cephdpdkd_roce_cm_established_total", "role=passive") - sum(storm0, "cephdpdkd_roce_cm_established_total", "role=passive")
	rej := sum(m, "cephdpdkd_roce_cm_rejects_total", "direction=sent") - sum(storm0, "cephdpdkd_roce_cm_rejects_total", "direction=sent")
	failed := sum(m, "cephdpdkd_roce_cm_failed_total") - sum(storm0, "cephdpdkd_roce_cm_failed_total")
	logf("reconnect storm: %v REQs received, %v connections established, %v REJs sent, %v failed after being taken on; the daemon holds %v fds (%v before its first client)",
		reqs, est, rej, failed, m["process_open_fds"], base["process_open_fds"])
	if reqs < storms*perStorm {
		t.Errorf("the daemon saw %v REQs from %d connects", reqs, storms*perStorm)
	}
	if est+rej+failed < storms*perStorm {
		t.Errorf("of %d connects, %v were established, %v rejected and %v failed: some REQs went unanswered", storms*perStorm, est, rej, failed)
	}
	if rej == 0 {
		t.Errorf("no REJ sent for %d connects at once against max_sessions 16", perStorm)
	}

	// A client that vanishes mid-connection, its DREQ lost: every frame
	// from the guest is dropped (nftables in the bridge's namespace), and
	// then its rados is killed. Nothing tells the daemon; its idle probes
	// (roce.idle_probe, 15 s) go unanswered, the QP gives up, and the
	// bridge reaps the session and resets the OSD's TCP connection,
	// instead of holding it until the OSD's idle timeout (15 minutes).
	dead0, _ := rn.d.Metrics()
	reaped := rn.vanishClient(t, logf)
	m, _ = rn.d.Metrics()
	deadPeers := sum(m, "cephdpdkd_roce_bridge_dead_peers_total") - sum(dead0, "cephdpdkd_roce_bridge_dead_peers_total")
	logf("the vanished client's sessions reaped %.1f s after it went: %v dead peers, %v idle probes sent",
		reaped.Seconds(), deadPeers, sum(m, "cephdpdkd_roce_endpoint_idle_probes_total")-sum(dead0, "cephdpdkd_roce_endpoint_idle_probes_total"))
	if deadPeers == 0 {
		t.Errorf("no dead peer counted for a client that vanished")
	}
}

// killDaemon kills the daemon with SIGKILL, as a crash would, and waits
// until it is gone; startDaemon starts it again.
func (rn *roceNode) killDaemon(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-rn.d.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-rn.d.Exited()
}

// reconnectStorm has rdma-core's cmtime connect perStorm QPs at once to
// the OSD's port, which the bridge dials over TCP for each, and drop them
// all, storms times.
func (rn *roceNode) reconnectStorm(t *testing.T, logf func(string, ...any), storms, perStorm int) {
	t.Helper()
	for i := 0; i < storms; i++ {
		out, code, err := rn.g.Run(rn.ctx, fmt.Sprintf("timeout 120 cmtime -s %s -p 6800 -c %d 2>&1 | tail -n 3", roceNodeIP, perStorm))
		if err != nil {
			t.Fatalf("cmtime: %v", err)
		}
		logf("storm %d: cmtime exit %d: %s", i+1, code, strings.Join(strings.Fields(out), " "))
	}
}

// vanishClient makes the guest's Ceph clients vanish mid-connection, their
// DREQs lost: a bench is started and, once it is connected, every frame
// from the guest is dropped (nftables in the bridge's namespace) and every
// rados in the guest killed. Nothing tells the daemon; its idle probes
// (roce.idle_probe, 15 s) go unanswered, the QPs give up, and the bridge
// reaps the sessions and resets their TCP connections. It returns how
// long the reaping took, once the guest's frames pass again.
func (rn *roceNode) vanishClient(t *testing.T, logf func(string, ...any)) time.Duration {
	t.Helper()
	const benchCmd = "bench 60 write -b 65536 -t 4 --no-cleanup"
	hold, err := rn.g.Start(fmt.Sprintf("rados -p %s %s", rn.cl.Pool(), benchCmd))
	if err != nil {
		t.Fatal(err)
	}
	// Connected: a session with the monitor and one with the OSD.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if pid, ok := guestRadosPid(t, rn, benchCmd); ok && len(guestConns(t, rn, pid, 0)) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			out, _ := hold.Output(rn.ctx)
			t.Fatalf("the bench did not connect to the monitor and the OSD in 2 minutes:\n%s", out)
		}
	}
	time.Sleep(2 * time.Second)
	setLoss(t, rn.br.NS, fmt.Sprintf("ether saddr %s counter drop", rn.g.MAC))
	vanished := time.Now()
	if out, code, err := rn.g.Run(rn.ctx, "killall -9 rados"); err != nil || code != 0 {
		t.Fatalf("guest: killall -9 rados: exit %d, %v\n%s", code, err, out)
	}
	logf("client vanished: its frames dropped, its rados killed")
	waitMetric(t, rn.d, "cephdpdkd_roce_bridge_connections", func(v float64) bool { return v == 0 }, 2*time.Minute)
	reaped := time.Since(vanished)
	// Only then do its frames pass again, and is the killed rados waited
	// for: it lingers in the guest's kernel while its rdma_cm
	// disconnects go unanswered (two minutes under TCG when the wait
	// came first, with the frames still dropped).
	setLoss(t, rn.br.NS, "")
	hold.Wait(rn.ctx)
	logf("the killed client is gone from the guest %.1f s after the reaping", time.Since(vanished.Add(reaped)).Seconds())
	return reaped
}
