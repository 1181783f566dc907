package cephnode

import (
	"strings"
	"testing"
)

// guestTC is iproute2's tc in the Soft-RoCE guest: busybox's tc, first
// on the PATH, knows no netem.
const guestTC = "/usr/sbin/tc"

// netemDelayReorder is the guest's egress qdisc for testRoCENetem: every
// frame delayed 5 ms ± 2 ms (uniform: the guest has no tc distribution
// tables), except a quarter (correlated 50%) sent at once, ahead of the
// delayed ones.
const netemDelayReorder = "delay 5ms 2ms reorder 25% 50%"

// testRoCENetem: a 4 MiB put over RoCE while the guest's link delays and
// reorders its frames (netem on its eth0). The daemon's QP sees requests
// ahead of the expected PSN, answers with sequence NAKs and the client
// resends from them; the object reads back byte-identical through a TCP
// client, and no RNR NAK is sent.
func testRoCENetem(t *testing.T, rn *roceNode, logf func(string, ...any)) {
	ctx := rn.ctx
	const name, size = "netem-obj", 4 << 20
	want := rn.shareObject(t, name, size)
	resp0 := endpointResponder(t, rn.d)
	rxe0 := guestRxeCounters(ctx, t, rn)
	stop := make(chan struct{})
	peak := make(chan map[string]float64, 1)
	go func() { peak <- watchQPCounters(rn.d, stop) }()
	// The guest's kernel loads no module by itself.
	qdisc := "modprobe sch_netem && " + guestTC + " qdisc add dev eth0 root netem " + netemDelayReorder
	if out, code, err := rn.g.Run(ctx, qdisc); err != nil || code != 0 {
		t.Fatalf("guest: %s: exit %d, %v\n%s", qdisc, code, err, out)
	}
	rn.rados(t, logf, "-p", rn.cl.Pool(), "put", name, "/mnt/host/"+name)
	stats, _, _ := rn.g.Run(ctx, guestTC+" -s qdisc show dev eth0; "+guestTC+" qdisc del dev eth0 root")
	close(stop)
	qp := <-peak
	resp := endpointResponder(t, rn.d).sub(resp0)
	rxe := guestRxeCounters(ctx, t, rn).sub(rxe0)
	logf("netem %s on the guest's eth0: %s", netemDelayReorder, strings.Join(strings.Fields(stats), " "))
	logf("the 4 MiB put under delay and reordering: the daemon sent %v sequence NAKs, its QPs saw %v requests ahead of sequence and %v duplicates; rxe: %s",
		resp.seqNaks, qp["cephdpdkd_roce_out_of_sequence_total"], qp["cephdpdkd_roce_duplicate_requests_total"], rxe)

	if got, n := rn.tcpGet(ctx, t, name); got != want {
		t.Fatalf("%s put under delay and reordering reads back differently (%d bytes of %d)", name, n, size)
	}
	logf("%s reads back byte-identical through a TCP client", name)
	if qp["cephdpdkd_roce_out_of_sequence_total"] == 0 {
		t.Errorf("no request arrived ahead of sequence: the netem qdisc did not reorder the client's frames")
	}
	if resp.seqNaks == 0 {
		t.Errorf("no sequence NAK sent for the reordered requests: the client recovered on its timer alone")
	}
	if resp.rnrNaks != 0 {
		t.Errorf("the daemon sent %v RNR NAKs", resp.rnrNaks)
	}
}
