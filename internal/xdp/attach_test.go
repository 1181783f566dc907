package xdp

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/logbuf"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// link is a veth pair (testenv.VethNS): host in the root namespace,
// 10.231.N.1/24, and its peer in a namespace of the test's, 10.231.N.2/24.
type link struct {
	ns, host           string
	hostAddr, peerAddr string
	hostIndex          int
}

func newLink(t *testing.T) *link {
	t.Helper()
	if err := requireBPF(); err != nil {
		t.Fatal(err)
	}
	var id [1]byte
	rand.Read(id[:])
	subnet := fmt.Sprintf("10.231.%d.", id[0])
	v := testenv.NewVethNS(t, netip.MustParsePrefix(subnet+"2/24"))
	if err := v.HostAddr(netip.MustParsePrefix(subnet + "1/24")); err != nil {
		t.Fatal(err)
	}
	return &link{ns: v.NS, host: v.HostIf, hostIndex: v.HostIndex, hostAddr: subnet + "1", peerAddr: subnet + "2"}
}

// sendUDP sends n datagrams from the peer's namespace to the host.
func (l *link) sendUDP(t *testing.T, port, n int) {
	t.Helper()
	script := fmt.Sprintf("for i in $(seq %d); do echo roce > /dev/udp/%s/%d; done", n, l.hostAddr, port)
	if out, err := exec.Command("ip", "netns", "exec", l.ns, "bash", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("sending: %v: %s", err, out)
	}
}

func (l *link) ping(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", l.ns, "ping", "-c", "2", "-W", "2", l.hostAddr).CombinedOutput(); err != nil {
		t.Fatalf("ping through the program: %v: %s", err, out)
	}
}

func TestAttachRefuseDetach(t *testing.T) {
	p, l := load(t)
	a, err := Attached(l.hostIndex)
	if err != nil || a.ID != p.ID() || a.Mode != Generic {
		t.Fatalf("Attached = %+v, %v; want id %d generic", a, err, p.ID())
	}
	// Found again by id, as a restarted daemon finds it.
	q, err := Open(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.SetAddress(roceAddr); err != nil {
		t.Fatal(err)
	}
	// A second program is refused, naming the attached one.
	obj, _ := Object()
	_, err = Attach(pmd.LoadXDP, obj, l.hostIndex, Generic, "")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("program %d is attached", p.ID())) {
		t.Fatalf("second Attach = %v, want a refusal naming program %d", err, p.ID())
	}
	if err := Detach(l.hostIndex, Generic); err != nil {
		t.Fatal(err)
	}
	if a, err := Attached(l.hostIndex); err != nil || a.ID != 0 {
		t.Fatalf("after Detach: %+v, %v", a, err)
	}
}

// TestTestpmdAdopts runs Debian's dpdk-testpmd with net_af_xdp on an
// interface that has the program attached: libxdp must adopt it (not
// load its own), RoCE to the address must reach testpmd, other traffic
// the kernel, and after testpmd exits the program must still be
// attached, passing RoCE to the kernel (no_socket). In generic mode on a
// veth net_af_xdp's close leaves a program attached through netlink
// alone (it detaches the interface's default mode's, native there);
// attached natively, only a pinned link keeps it.
func TestTestpmdAdopts(t *testing.T) {
	t.Run("generic", func(t *testing.T) { testTestpmdAdopts(t, Generic, false) })
	t.Run("native, pinned link", func(t *testing.T) { testTestpmdAdopts(t, Native, true) })
}

func testTestpmdAdopts(t *testing.T, m Mode, pinned bool) {
	if _, err := exec.LookPath("dpdk-testpmd"); err != nil {
		t.Fatal("dpdk-testpmd is missing: run scripts/deps.sh")
	}
	pin := ""
	if pinned {
		pin = bpffs(t) + "/link"
	}
	p, l := loadMode(t, m, pin)
	if err := p.SetAddress(mustAddr(t, l.hostAddr)); err != nil {
		t.Fatal(err)
	}
	prefix := "cddx-" + l.host[len("cddh-"):]
	t.Cleanup(func() { os.RemoveAll("/var/run/dpdk/" + prefix) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out logbuf.Buffer
	cmd := exec.CommandContext(ctx, "dpdk-testpmd", "-l", "0-1", "--no-huge", "-m", "512",
		"--file-prefix", prefix, "--no-pci", "--log-level", "pmd.net.af_xdp:info",
		"--vdev", "net_af_xdp0,iface="+l.host+",start_queue=0,queue_count=1",
		"--", "--forward-mode=rxonly", "--no-mlockall", "--total-num-mbufs=4096", "--stats-period", "1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Wait for the port to start (its first stats block).
	for !strings.Contains(out.String(), "RX-packets") {
		select {
		case err := <-exited:
			t.Fatalf("testpmd exited (%v) before it started:\n%s", err, out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if a, _ := Attached(l.hostIndex); a.ID != p.ID() {
		t.Fatalf("with testpmd running, program %d is attached, want ours (%d): libxdp replaced it\n%s", a.ID, p.ID(), out.String())
	}
	before, _ := p.Stats()
	l.sendUDP(t, 4791, 10)
	l.ping(t)
	time.Sleep(1500 * time.Millisecond)
	mid, _ := p.Stats()
	if d := mid[Redirected] - before[Redirected]; d != 10 {
		t.Errorf("redirected %d of 10 RoCE datagrams", d)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := <-exited; err != nil {
		t.Errorf("testpmd: %v (context: %v)\n%s", err, ctx.Err(), out.String())
	}
	if !strings.Contains(out.String(), "RX-total: 10") {
		t.Errorf("testpmd did not report the 10 datagrams:\n%s", out.String())
	}
	if a, _ := Attached(l.hostIndex); a.ID != p.ID() {
		t.Fatalf("after testpmd exited, attached program %d, want ours (%d) kept", a.ID, p.ID())
	}
	l.sendUDP(t, 4791, 3)
	l.ping(t)
	after, _ := p.Stats()
	if d := after[PassNoSocket] - mid[PassNoSocket]; d != 3 {
		t.Errorf("after testpmd exited, %d of 3 RoCE datagrams passed for want of a socket", d)
	}
	if !pinned {
		if err := Detach(l.hostIndex, m); err != nil {
			t.Fatal(err)
		}
		return
	}
	// Netlink cannot detach a program a link holds (net_af_xdp's close
	// tries, and fails); removing the pin detaches it.
	if err := Detach(l.hostIndex, m); err == nil {
		t.Fatal("netlink detached a program attached through a pinned link")
	}
	if err := Unpin(pin, l.hostIndex); err != nil {
		t.Fatal(err)
	}
	if a, _ := Attached(l.hostIndex); a.ID != 0 {
		t.Fatalf("after Unpin: program %d still attached", a.ID)
	}
}

// TestNativeMaxMTU attaches the program natively to a veth at
// NativeMaxMTU, which works, and finds the kernel refusing it one byte
// above: the limit the af_xdp mode's host check holds a native attach
// to is the kernel's, not a guess on either side.
func TestNativeMaxMTU(t *testing.T) {
	if err := requireBPF(); err != nil {
		t.Fatal(err)
	}
	obj, err := Object()
	if err != nil {
		t.Fatal(err)
	}
	v := testenv.NewVethNS(t, netip.Prefix{})
	// veth checks its peer's MTU; a node's veth pair has one MTU.
	setMTU := func(mtu int) {
		t.Helper()
		if err := netcmd.IP("link", "set", "dev", v.HostIf, "mtu", strconv.Itoa(mtu)); err != nil {
			t.Fatal(err)
		}
		if out, err := v.Exec(context.Background(), "ip", "link", "set", "dev", v.PeerIf, "mtu", strconv.Itoa(mtu)); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	setMTU(NativeMaxMTU + 1)
	if p, err := Attach(pmd.LoadXDP, obj, v.HostIndex, Native, ""); err == nil {
		p.Close()
		Detach(v.HostIndex, Native)
		t.Fatalf("native attach at MTU %d succeeded; want the kernel's refusal", NativeMaxMTU+1)
	}
	setMTU(NativeMaxMTU)
	p, err := Attach(pmd.LoadXDP, obj, v.HostIndex, Native, "")
	if err != nil {
		t.Fatalf("native attach at MTU %d: %v", NativeMaxMTU, err)
	}
	defer p.Close()
	defer Detach(v.HostIndex, Native)
	if a, err := Attached(v.HostIndex); err != nil || a.ID != p.ID() || a.Mode != Native {
		t.Fatalf("Attached = %+v, %v; want program %d native", a, err, p.ID())
	}
}
