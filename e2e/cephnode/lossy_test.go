package cephnode

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lossTable is the nftables table that drops frames on the guest's link,
// in the bridge namespace: a bridge table's forward chain sees every
// frame between the guest's tap and the daemon's veth, both ways.
const lossTable = "cddloss"

// setLoss replaces the link's loss rule with rule (an nft statement list
// ending in drop), or removes it when rule is empty.
func setLoss(t *testing.T, ns, rule string) {
	t.Helper()
	script := fmt.Sprintf("table bridge %[1]s\ndelete table bridge %[1]s\n", lossTable)
	if rule != "" {
		script += fmt.Sprintf("table bridge %s {\n\tchain forward {\n\t\ttype filter hook forward priority 0; policy accept;\n\t\t%s\n\t}\n}\n", lossTable, rule)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v\n%s\n%s", ns, err, out, script)
	}
}

// lossDropped returns the frames the loss rule's counter dropped.
func lossDropped(t *testing.T, ns string) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "bridge", lossTable).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list in %s: %v\n%s", ns, err, out)
	}
	m := regexp.MustCompile(`counter packets (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no counter in the loss table:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// testRoCELossy: Debian's rados over Soft-RoCE through the bridge
// on a link that drops 1% of the frames each way, then on one that loses
// a burst of 50 consecutive frames. Every object reads back byte-
// identical, the daemon sends no RNR NAK and leaves no QP or bridged
// connection behind, and the loss is recovered by retransmission: the
// test prints
//
//	lossy-ratio <bench write MB/s lossy/lossless> <16 MiB put time lossless/lossy>
//
// measured in one run (speed is reported, not asserted).
func testRoCELossy(t *testing.T, rn *roceNode, logf func(string, ...any)) {
	ctx := rn.ctx
	pool := rn.cl.Pool()

	const objSize = 16 << 20
	want := rn.shareObject(t, "lossy-obj", objSize)
	// round puts the object under name, reads it back and checks it, and
	// runs a 10 s bench of 64 KiB writes, 16 in flight.
	round := func(name string) (putSecs, benchMBs float64) {
		t.Helper()
		start := time.Now()
		rn.rados(t, logf, "-p", pool, "put", name, "/mnt/host/lossy-obj")
		putSecs = time.Since(start).Seconds()
		rn.guestGet(t, logf, name, want)
		out := rn.rados(t, logf, "-p", pool, "bench", "10", "write", "-b", "65536", "-t", "16", "--no-cleanup")
		m := bwRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("rados bench: no bandwidth in\n%s", out)
		}
		benchMBs, _ = strconv.ParseFloat(m[1], 64)
		return putSecs, benchMBs
	}

	// The daemon's own go-back-N toward the guest shows in the guest's
	// rxe as duplicate requests; a timeout the guest's late answer made
	// spurious costs one, not a window.
	const spurious = "cephdpdkd_roce_endpoint_spurious_timeouts_total"
	rxeL := guestRxeCounters(ctx, t, rn)
	spur0 := mustScrape(t, rn.d, "")(spurious)
	put0, bench0 := round("lossless")
	rxe0 := guestRxeCounters(ctx, t, rn)
	spur1 := mustScrape(t, rn.d, "")(spurious)
	logf("lossless: 16 MiB put %.2f s, bench write %.2f MB/s; the daemon found %v timeouts spurious; rxe: %s",
		put0, bench0, spur1-spur0, rxe0.sub(rxeL))

	resp0 := endpointResponder(t, rn.d)
	setLoss(t, rn.br.NS, "numgen random mod 100 < 1 counter drop")
	put1, bench1 := round("lossy")
	dropped := lossDropped(t, rn.br.NS)
	setLoss(t, rn.br.NS, "")
	resp := endpointResponder(t, rn.d).sub(resp0)
	rxe := guestRxeCounters(ctx, t, rn).sub(rxe0)
	spur2 := mustScrape(t, rn.d, "")(spurious)
	// The client's share of the cost: rxe goes back N from each NAK, so
	// every loss of its packets has it send the rest of its window again.
	payload := float64(objSize) + bench1*10e6
	logf("1%% loss each way: 16 MiB put %.2f s, bench write %.2f MB/s; %d frames dropped; the daemon sent %v sequence NAKs and found %v timeouts spurious; "+
		"the guest's rxe sent %.2f packets per KiB written (its go-back-N resends); rxe: %s",
		put1, bench1, dropped, resp.seqNaks, spur2-spur1, float64(rxe["sent_pkts"])/(payload/1024), rxe)
	if dropped == 0 {
		t.Fatal("the loss rule dropped nothing: the lossy round measured a clean link")
	}
	if resp.rnrNaks != 0 {
		t.Errorf("the daemon sent %v RNR NAKs under loss", resp.rnrNaks)
	}
	fmt.Printf("lossy-ratio %.3f %.3f\n", bench1/bench0, put0/put1)
	logf("lossy-ratio %.3f %.3f", bench1/bench0, put0/put1)

	// A burst: the next 50 frames on the link, whichever way, are lost,
	// in the middle of a put (on a quiet link they would be the client's
	// connection attempts, spread over a minute).
	resp0 = endpointResponder(t, rn.d)
	m0, err := rn.d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	const toTCP = "cephdpdkd_roce_bridge_bytes_total{direction=to_tcp}"
	start := time.Now()
	put, err := rn.g.Start(fmt.Sprintf("rados -p %s put burst /mnt/host/lossy-obj", pool))
	if err != nil {
		t.Fatal(err)
	}
	waitMetric(t, rn.d, toTCP, func(v float64) bool { return v >= m0[toTCP]+4<<20 }, 2*time.Minute)
	setLoss(t, rn.br.NS, "numgen inc mod 1000000000 < 50 counter drop")
	if code, err := put.Wait(ctx); err != nil || code != 0 {
		out, _ := put.Output(ctx)
		t.Fatalf("the put across a burst of loss: exit %d, %v\n%s\nnetwork:\n%s\ndaemon's metrics:\n%s", code, err, out, rn.netState(), failureMetrics(rn.d))
	}
	dropped = lossDropped(t, rn.br.NS)
	setLoss(t, rn.br.NS, "")
	rn.guestGet(t, logf, "burst", want)
	resp = endpointResponder(t, rn.d).sub(resp0)
	logf("a burst of %d frames lost: the 16 MiB put took %.2f s and reads back byte-identical; %v sequence NAKs sent",
		dropped, time.Since(start).Seconds(), resp.seqNaks)
	if dropped != 50 {
		t.Errorf("the burst rule dropped %d frames, want 50", dropped)
	}

}

// rxeCounters are a guest's rxe hardware counters by name.
type rxeCounters map[string]int64

func (c rxeCounters) sub(c0 rxeCounters) rxeCounters {
	d := rxeCounters{}
	for k, v := range c {
		if v != c0[k] {
			d[k] = v - c0[k]
		}
	}
	return d
}

func (c rxeCounters) String() string {
	var parts []string
	for _, k := range []string{"sent_pkts", "rcvd_pkts", "rcvd_seq_err", "retry_exceeded_err", "retry_rnr_exceeded_err",
		"completer_retry_err", "send_rnr_err", "duplicate_request", "out_of_seq_request", "ack_deferred", "rcvd_rnr_err"} {
		if v, ok := c[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

func guestRxeCounters(ctx context.Context, t *testing.T, rn *roceNode) rxeCounters {
	t.Helper()
	out, _, err := rn.g.Run(ctx, "grep -H . /sys/class/infiniband/*/ports/1/hw_counters/* | sed 's|.*/||'")
	if err != nil {
		t.Fatal(err)
	}
	c := rxeCounters{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			c[k] = n
		}
	}
	return c
}
