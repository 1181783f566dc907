package cephnode

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/cephcluster"
)

// testRoCEMonRestart: the monitor is restarted (SIGTERM, started again
// with its store) while a `rados bench` over RoCE runs and a Soft-RoCE
// client writes objects of known content. The bridge's TCP connection to
// the old monitor ends (its socket is gone), the bench's client hunts
// for the monitor again and reaches the new one through the bridge on a
// new rdma_cm connection, the bench completes, the writes go on, every
// acknowledged object reads back byte-identical, and finish finds no
// session left half-open.
func testRoCEMonRestart(t *testing.T, rn *roceNode, logf func(string, ...any)) {
	ctx := rn.ctx
	pool := rn.cl.Pool()
	bench, err := rn.g.Start(fmt.Sprintf("rados -p %s bench 40 write -b 65536 -t 4 --no-cleanup", pool))
	if err != nil {
		t.Fatal(err)
	}
	w := startPutLoop(t, rn, "mr", 8, 256<<10)
	w.waitAcked(ctx, 2, 3*time.Minute)
	benchPid, found := guestRadosPid(t, rn, "bench 40 write")
	if !found {
		out, _ := bench.Output(ctx)
		t.Fatalf("no bench running in the guest:\n%s", out)
	}
	before := guestConns(t, rn, benchPid, cephcluster.MonV2Port)
	if len(before) == 0 {
		out, _, _ := rn.g.Run(ctx, "rdma resource show cm_id")
		t.Fatalf("the bench (pid %d) has no rdma_cm connection to the monitor:\n%s", benchPid, out)
	}
	bridged := rn.bridgeSockets(t, strconv.Itoa(cephcluster.MonV2Port))
	if len(bridged) == 0 {
		t.Fatal("the bridge has no TCP connection to the monitor while its clients run")
	}
	m0, err := rn.d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	ok, _, _ := w.state()
	restart := time.Now()
	if err := rn.cl.RestartMon(ctx); err != nil {
		t.Fatal(err)
	}
	logf("monitor restarted in %.1f s, after %d acknowledged puts; the bench's rdma_cm connections to it were from ports %v",
		time.Since(restart).Seconds(), len(ok), before)

	// The bridge's side: its connections to the old monitor are gone
	// (the monitor's exit reset them and the bridge closed its end).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		now := rn.bridgeSockets(t, strconv.Itoa(cephcluster.MonV2Port))
		left := slices.DeleteFunc(slices.Clone(bridged), func(old string) bool {
			return !slices.ContainsFunc(now, func(s string) bool { return sameSocket(s, old) })
		})
		if len(left) == 0 {
			logf("the bridge's TCP connections to the old monitor (%d) are gone", len(bridged))
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("10 s after the monitor's restart, the bridge still holds connections to the old one:\n%s\nnow:\n%s",
				strings.Join(left, "\n"), strings.Join(now, "\n"))
			break
		}
	}
	// The client's side: the bench reaches the new monitor on a new
	// rdma_cm connection, bridged to its TCP endpoint.
	var after []int
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		after = guestConns(t, rn, benchPid, cephcluster.MonV2Port)
		if slices.ContainsFunc(after, func(p int) bool { return !slices.Contains(before, p) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bench did not reconnect to the monitor within 60 s (its connections from ports %v, before %v)\n%s",
				after, before, rn.netState())
		}
	}
	logf("the bench reconnected to the new monitor %.1f s after the restart began (from ports %v)", time.Since(restart).Seconds(), after)
	if code, err := bench.Wait(ctx); err != nil || code != 0 {
		out, _ := bench.Output(ctx)
		t.Fatalf("the bench across the monitor's restart: exit %d, %v\n%s", code, err, out)
	}
	out, _ := bench.Output(ctx)
	if bw := bwRE.FindStringSubmatch(out); bw == nil {
		t.Errorf("the bench did not complete:\n%s", out)
	} else {
		logf("the bench across the monitor's restart completed: %s MB/s", bw[1])
	}
	w.finish(ctx, logf, len(ok))
	m, _ := rn.d.Metrics()
	delta := func(k string, labels ...string) float64 { return sum(m, k, labels...) - sum(m0, k, labels...) }
	logf("bridge across the monitor's restart: %v connections accepted, %v closed, %v failed on the TCP side, %v on the RoCE side",
		delta("cephdpdkd_roce_bridge_accepted_total"), delta("cephdpdkd_roce_bridge_closed_total"),
		delta("cephdpdkd_roce_bridge_errors_total", "side=tcp"), delta("cephdpdkd_roce_bridge_errors_total", "side=roce"))
}

// sameSocket reports whether two of bridgeSockets' lines are the same
// connection (local and peer address), whatever its state and queues.
func sameSocket(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	return len(fa) > 4 && len(fb) > 4 && fa[3] == fb[3] && fa[4] == fb[4]
}
