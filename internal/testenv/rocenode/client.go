//go:build linux

package rocenode

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rxeguest"
)

// Client is a guest booted by BootClient, as a test drives it: each
// rados it runs that fails reports the client's log, the network's state
// and the daemon's.
type Client struct {
	Ctx context.Context
	G   *rxeguest.Guest
	// D is the daemon the guest reaches: the one running now.
	D *daemonproc.Proc
	// NetState says what the network looks like, for a failure report
	// (NetState, the function, for a node's).
	NetState func() string
	// Timeout, if set, bounds each rados (Ctx alone otherwise), so that a
	// stuck client fails its step with time left for the report.
	Timeout time.Duration
}

// Rados runs Debian's rados in the guest and fails the test, with the
// client's log, the network's state and the daemon's, if it fails; logf
// reports how long it took.
func (c *Client) Rados(t harness.TB, logf func(string, ...any), args ...string) string {
	t.Helper()
	start := time.Now()
	ctx := c.Ctx
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	out, code, err := c.G.Rados(ctx, args...)
	if err != nil || code != 0 {
		tailLog, _, _ := c.G.Run(c.Ctx, "tail -n 30 /tmp/ceph/log/*.log")
		t.Fatalf("guest: rados %s: exit %d, %v\n%s\nclient log:\n%s\nnetwork:\n%s\ndaemon log:\n%s\ndaemon's metrics:\n%s",
			strings.Join(args, " "), code, err, out, tailLog, c.NetState(), daemonproc.LogTail(c.D.Log()), FailureMetrics(c.D))
	}
	logf("guest: rados %s: %.2f s", strings.Join(args, " "), time.Since(start).Seconds())
	return out
}

// ShareObject writes size random bytes to the guest's share as name (the
// guest's /mnt/host/name) and returns their sha256.
func (c *Client) ShareObject(t harness.TB, name string, size int) [sha256.Size]byte {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(c.G.ShareDir(), name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// Get gets object name of pool over RoCE into the guest's /tmp and fails
// the test unless it reads back with the sha256 want.
func (c *Client) Get(t harness.TB, logf func(string, ...any), pool, name string, want [sha256.Size]byte) {
	t.Helper()
	c.Rados(t, logf, "-p", pool, "get", name, "/tmp/"+name)
	if sum, err := c.G.SHA256(c.Ctx, "/tmp/"+name); err != nil || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("%s: sha256 in the guest %s (%v); want %x", name, sum, err, want)
	}
	c.G.Run(c.Ctx, "rm -f /tmp/"+name)
}

// StepLog returns t.Logf with each line prefixed by the seconds since
// the call: a RoCE test's steps take seconds to minutes under TCG.
func StepLog(t harness.TB) func(string, ...any) {
	t0 := time.Now()
	return func(format string, args ...any) {
		t.Helper()
		t.Logf("[%6.1fs] %s", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
}

// NetState is what the guest and the node's side of the link say of a
// failure: the guest's (GuestNetState), the node namespace's interface
// ifname and neighbours (did the kernel answer the guest's ARP?), and
// the bridge namespace's.
func NetState(ctx context.Context, g *rxeguest.Guest, nodeNS, ifname, bridgeNS string) string {
	return "guest:\n" + GuestNetState(ctx, g) + "node namespace:\n" + NSNetState(nodeNS, ifname) +
		"bridge namespace:\n" + NSNetState(bridgeNS, "")
}

// FailureMetrics returns the daemon's non-zero metrics for a failure
// report, each with its change over two seconds: what still moves (the
// poll loop's time, the port's counters) tells a stalled loop from a
// silent link or peer.
func FailureMetrics(d *daemonproc.Proc) string {
	const window = 2 * time.Second
	m0, err := d.Metrics()
	if err != nil {
		return err.Error()
	}
	time.Sleep(window)
	m1, err := d.Metrics()
	if err != nil {
		return err.Error()
	}
	var lines []string
	for k, v := range m1 {
		if v == 0 && m0[k] == 0 {
			continue
		}
		line := fmt.Sprintf("%s %v", k, v)
		if dv := v - m0[k]; dv != 0 {
			line += fmt.Sprintf(" (%+g in %v)", dv, window)
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// NSNetState returns a network namespace's links (dev, when set, alone)
// with their counters, and its neighbours with their probe counts.
func NSNetState(ns, dev string) string {
	link := []string{"-n", ns, "-s", "-s", "link", "show"}
	if dev != "" {
		link = append(link, "dev", dev)
	}
	var b strings.Builder
	for _, args := range [][]string{link, {"-n", ns, "-s", "neigh", "show"}} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		b.Write(out)
		if err != nil {
			fmt.Fprintf(&b, "ip %s: %v\n", strings.Join(args, " "), err)
		}
	}
	return b.String()
}

// TraceNeighbours turns on the guest kernel's tracing of its neighbour
// entries and of every ARP frame it queues, sends or frees, for
// GuestNetState's report: RoCE traffic never confirms a neighbour, so the
// guest probes the node every half minute or so, and a probe that goes
// unanswered cuts the client off.
func TraceNeighbours(ctx context.Context, g *rxeguest.Guest) error {
	for _, c := range []string{"mount -t tracefs nodev /sys/kernel/tracing",
		"echo 1 > /sys/kernel/tracing/events/neigh/enable",
		"echo 'protocol == 2054' > /sys/kernel/tracing/events/skb/kfree_skb/filter",
		"echo 1 > /sys/kernel/tracing/events/skb/kfree_skb/enable",
		"echo 'len == 42' > /sys/kernel/tracing/events/net/net_dev_queue/filter",
		"echo 1 > /sys/kernel/tracing/events/net/net_dev_queue/enable",
		"echo 'protocol == 2054' > /sys/kernel/tracing/events/net/net_dev_start_xmit/filter",
		"echo 1 > /sys/kernel/tracing/events/net/net_dev_start_xmit/enable"} {
		if out, code, err := g.Run(ctx, c); err != nil || code != 0 {
			return fmt.Errorf("guest: %s: exit %d, %v\n%s", c, code, err, out)
		}
	}
	return nil
}

// GuestNetState returns what the guest's network and Soft-RoCE device
// say of the failure: rxe's counters (retries, sequence errors, ...),
// its neighbour table with probe counts, its interfaces' counters, the
// neighbour cache's statistics (unresolved discards), eth0's qdisc (a
// backlog that does not drain is a transmit queue that stopped), its
// transmit timeouts, the kernel's last messages, its clock (uptime
// against the test's own time), the last of its neighbour and ARP trace
// (TraceNeighbours turns it on), and both sides' view of eth0's
// virtqueues (which side a stopped transmit queue waits on).
func GuestNetState(ctx context.Context, g *rxeguest.Guest) string {
	out, _, err := g.Run(ctx, "grep -H . /sys/class/infiniband/*/ports/1/hw_counters/* | sed 's|.*/||' | grep -v ':0$'; ip -s neigh; ip -s link; cat /proc/net/stat/arp_cache; "+
		"/usr/sbin/tc -s qdisc show dev eth0; echo tx_timeout $(cat /sys/class/net/eth0/queues/tx-0/tx_timeout); dmesg | tail -n 20; "+
		"echo uptime $(cat /proc/uptime) clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource); "+
		"grep -v '^#' /sys/kernel/tracing/trace | tail -n 60")
	if err != nil {
		return err.Error()
	}
	qs, err := g.Virtqueues(ctx)
	if err != nil {
		return out + "eth0's virtqueues: " + err.Error() + "\n"
	}
	for _, q := range qs {
		out += "eth0's " + q.String() + "\n"
	}
	return out
}
