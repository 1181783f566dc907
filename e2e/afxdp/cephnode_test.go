package afxdp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/cephcluster"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rocenode"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

// The Ceph node's and its client's addresses: each path between the two
// namespaces carries them in turn.
const (
	cephClientIP = "10.78.1.1"
	cephNodeIP   = "10.78.1.2"
	cephPool     = "test"
	// benchObjects caps a write bench (4 MiB objects): the memstore OSD
	// holds them in RAM, next to e2e/cephnode's cluster.
	benchObjects = "250"
	rounds       = 3
	// mtu is the paths' MTU; each is also measured at jumboMTU, with
	// benches of jumboSecs (benchSecs at mtu) to keep the test short.
	mtu       = 1500
	jumboMTU  = 9000
	benchSecs = 4
	jumboSecs = 3
)

// Jumbo frames on the rebind path (docs/operator/configure.md#jumbo-frames):
// net_af_packet's ring frames hold a 9000-byte MTU's frames (framesz at
// least MTU + 80), and an mbuf a ring frame's data (data_room at least
// framesz + 96), which config.afPacketFrames checks.
const (
	jumboDevargs  = "blocksz=36864,framesz=9216,framecnt=1024"
	jumboDataRoom = 9344
)

// cephNode is a Ceph cluster in a node namespace and a client namespace,
// with two ways between them: a plain veth (direct, and the af_xdp
// mode's interface), and the client's veth whose root end a rebind
// daemon takes (net_af_packet), its kernel path putting the node's
// address into the node namespace.
type cephNode struct {
	t      *testing.T
	t0     time.Time
	bin    string
	client *testenv.VethNS // client namespace; HostIf is the rebind port
	node   *testenv.NetNS
	cliIf  string // the direct veth's end in the client namespace
	nodeIf string // its end in the node namespace
	ceph   *cephcluster.Cluster
}

func (n *cephNode) logf(format string, args ...any) {
	n.t.Helper()
	n.t.Logf("[%6.1fs] %s", time.Since(n.t0).Seconds(), fmt.Sprintf(format, args...))
}

// ip runs each ip(8) command in turn.
func (n *cephNode) ip(cmds ...[]string) {
	n.t.Helper()
	for _, c := range cmds {
		if err := netcmd.IP(c...); err != nil {
			n.t.Fatal(err)
		}
	}
}

// run runs a Ceph client command in the client namespace, within
// timeout, and returns its standard output.
func (n *cephNode) run(ctx context.Context, timeout time.Duration, stdin []byte, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := n.ceph.Command(ctx, n.client.NS, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, out.Bytes(), errOut.Bytes())
	}
	return out.Bytes(), nil
}

// rados is run that fails the test on an error.
func (n *cephNode) rados(ctx context.Context, timeout time.Duration, stdin []byte, args ...string) []byte {
	n.t.Helper()
	out, err := n.run(ctx, timeout, stdin, "rados", args...)
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

// healthOK waits until `ceph -s` from the client answers HEALTH_OK: the
// client reaches the monitor on the path now up.
func (n *cephNode) healthOK(ctx context.Context) {
	n.t.Helper()
	var last []byte
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		last, _ = n.ceph.Command(c, n.client.NS, "ceph", "-s", "--connect-timeout", "5").CombinedOutput()
		cancel()
		if bytes.Contains(last, []byte("HEALTH_OK")) {
			return
		}
	}
	n.t.Fatalf("no HEALTH_OK from the client in 60 s; last ceph -s:\n%s", last)
}

// bench runs one rados bench (write or seq) of secs seconds.
func (n *cephNode) bench(ctx context.Context, secs int, mode string, extra ...string) (cephcluster.Bench, error) {
	args := append([]string{"-p", cephPool, "bench", fmt.Sprint(secs), mode}, extra...)
	out, err := n.run(ctx, time.Duration(secs)*time.Second+60*time.Second, nil, "rados", args...)
	if err != nil {
		return cephcluster.Bench{}, err
	}
	return cephcluster.ParseBench(out)
}

func (n *cephNode) mustBench(ctx context.Context, secs int, mode string, extra ...string) cephcluster.Bench {
	n.t.Helper()
	b, err := n.bench(ctx, secs, mode, extra...)
	if err != nil {
		n.t.Fatal(err)
	}
	return b
}

// cleanup removes the bench objects: the OSD keeps them in RAM.
func (n *cephNode) cleanup(ctx context.Context) {
	n.t.Helper()
	n.rados(ctx, 60*time.Second, nil, "-p", cephPool, "cleanup", "--prefix", "benchmark_data")
}

// pathFigures is what the rounds on one path measured.
type pathFigures struct {
	write, seq float64 // median MB/s
	bytes      int64   // moved by every bench, both ways
}

// measure runs the rounds of write then seq benches on the path now up,
// whose MTU is mtu, and prints its figure line.
func (n *cephNode) measure(ctx context.Context, mode string, mtu int) pathFigures {
	n.t.Helper()
	secs := benchSecs
	if mtu == jumboMTU {
		secs = jumboSecs
	}
	var w, s []float64
	var f pathFigures
	for range rounds {
		wb := n.mustBench(ctx, secs, "write", "--no-cleanup", "--max-objects", benchObjects)
		sb := n.mustBench(ctx, secs, "seq")
		n.cleanup(ctx)
		w, s = append(w, wb.MBps), append(s, sb.MBps)
		f.bytes += wb.Bytes + sb.Bytes
	}
	f.write, f.seq = median(w), median(s)
	n.logf("%s: write %v MB/s, seq %v MB/s", mode, w, s)
	fmt.Printf("tcp-path %s %d %.1f %.1f\n", mode, mtu, f.write, f.seq)
	return f
}

// measureDaemon is measure with the CPU time daemon pid used meanwhile,
// per GiB the benches moved.
func (n *cephNode) measureDaemon(ctx context.Context, mode string, mtu, pid int) pathFigures {
	n.t.Helper()
	c0 := n.cpu(pid)
	f := n.measure(ctx, mode, mtu)
	cpu := n.cpu(pid) - c0
	fmt.Printf("tcp-path-cpu %s %d %.2f\n", mode, mtu, cpu.Seconds()/(float64(f.bytes)/(1<<30)))
	return f
}

func (n *cephNode) cpu(pid int) time.Duration {
	n.t.Helper()
	d, err := daemonproc.CPUTime(pid)
	if err != nil {
		n.t.Fatal(err)
	}
	return d
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// putGet writes a random 8 MiB object and fails the test unless it reads
// back identical.
func (n *cephNode) putGet(ctx context.Context, name string) {
	n.t.Helper()
	data := make([]byte, 8<<20)
	rand.Read(data)
	n.rados(ctx, 60*time.Second, data, "-p", cephPool, "put", name, "-")
	back := n.rados(ctx, 60*time.Second, nil, "-p", cephPool, "get", name, "-")
	if sha256.Sum256(back) != sha256.Sum256(data) {
		n.t.Fatalf("%s: %d bytes back of %d, sha256 differs", name, len(back), len(data))
	}
	n.logf("%s: 8 MiB read back identical (sha256 %x…)", name, sha256.Sum256(data))
}

// attached reports the XDP program on the af_xdp interface, in the node
// namespace.
func (n *cephNode) attached() xdp.Attachment {
	n.t.Helper()
	a, err := rocenode.XDPAttachedIn(n.node, n.nodeIf)
	if err != nil {
		n.t.Fatal(err)
	}
	return a
}

// config writes a daemon configuration: the EAL's and metrics' sections
// around body. The EAL's runtime directory, which even a clean stop
// leaves, goes when the test ends.
func (n *cephNode) config(name, body string) (path, metrics string) {
	n.t.Helper()
	prefix := "cdd-tp" + name + "-" + n.node.Name[len(n.node.Name)-6:]
	n.t.Cleanup(func() { os.RemoveAll("/var/run/dpdk/" + prefix) })
	path, metrics = filepath.Join(n.t.TempDir(), name+".yaml"), daemonproc.FreeAddr(n.t)
	write(n.t, path, fmt.Sprintf(`eal: {lcores: "0-1", no_huge: true, memory_mb: 512, file_prefix: %s}
%s
metrics: {listen: "%s"}
shutdown: {drain_timeout: 1s}
`, prefix, body, metrics))
	return path, metrics
}

// setMTU sets each interface's MTU: "ns/name", or a name in the test's
// own namespace.
func (n *cephNode) setMTU(mtu int, ifs ...string) {
	n.t.Helper()
	for _, ifc := range ifs {
		args := []string{"link", "set", "dev", ifc, "mtu", fmt.Sprint(mtu)}
		if ns, name, ok := strings.Cut(ifc, "/"); ok {
			args = []string{"-n", ns, "link", "set", "dev", name, "mtu", fmt.Sprint(mtu)}
		}
		n.ip(args)
	}
}

// pingFull fails the test unless an unfragmentable ping of a whole mtu
// goes from the client to the node and back: a path that cut or dropped
// full-sized frames would still carry TCP, at a smaller MSS.
func (n *cephNode) pingFull(mtu int) {
	n.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", n.client.NS, "ping", "-n", "-c", "1", "-W", "2", "-M", "do",
		"-s", fmt.Sprint(mtu-28), cephNodeIP).CombinedOutput()
	if err != nil {
		n.t.Fatalf("ping of %d bytes (MTU %d) from the client to the node: %v\n%s", mtu-28, mtu, err, out)
	}
}

// rebindConfig writes the rebind daemon's configuration for a port MTU:
// at jumboMTU, with the ring frames and mbufs a jumbo frame needs and the
// kernel interface at the port's MTU (kernel.mtu's default).
func (n *cephNode) rebindConfig(mtu int) (path, metrics string) {
	n.t.Helper()
	sfx := n.node.Name[len(n.node.Name)-6:]
	ring, jumbo := "blocksz=4096,framesz=2048,framecnt=2048", ""
	if mtu == jumboMTU {
		ring = jumboDevargs
		jumbo = fmt.Sprintf("  mtu: %d\nmempool: {data_room: %d}\n", mtu, jumboDataRoom)
	}
	return n.config(fmt.Sprint("r", mtu), fmt.Sprintf(`port:
  name: rnode
  device: "net_af_packet0,iface=%s,%s"
  rx_descriptors: 1024
  tx_descriptors: 1024
%s%s
%s
kernel: {interface: cddk%s, netns: %s, addresses: [%s/24]}`,
		n.client.HostIf, ring, jumbo, cephcluster.KernelServicesYAML, cephcluster.ClassifyYAML, sfx, n.node.Name, cephNodeIP))
}

// rebind runs the rebind daemon at a port MTU, measures its path and
// stops it cleanly.
func (n *cephNode) rebind(ctx context.Context, mtu int, dir pathFigures) {
	n.t.Helper()
	cfg, metrics := n.rebindConfig(mtu)
	d := daemonproc.Start(n.t, n.bin, cfg, metrics)
	n.healthOK(ctx)
	n.pingFull(mtu)
	n.putGet(ctx, fmt.Sprint("rebind-", mtu))
	rf := n.measureDaemon(ctx, "rebind", mtu, d.Pid())
	n.logf("rebind / direct at MTU %d: write %.2f, seq %.2f", mtu, rf.write/dir.write, rf.seq/dir.seq)
	if log, err := d.Stop(20 * time.Second); err != nil || !strings.Contains(log, "all mbufs returned") {
		n.t.Fatalf("rebind stop at MTU %d: %v\n%s", mtu, err, log)
	}
}

// TestCephNodeXDP measures a Ceph client's TCP to a real cluster on three
// paths between the same namespaces: a direct veth, the same veth with
// the daemon in the af_xdp mode on the node's end (TCP passes the XDP
// program to the kernel), and the daemon in the rebind mode (TCP crosses
// it and its kernel exception path); each also at MTU 9000.
// It asserts only that what is written reads back identical (at MTU 9000
// with full-sized frames both ways); the figures are printed. In the af_xdp
// mode it then SIGKILLs the daemon during a bench, which must go on, and
// checks the program stays, is taken back by a restart and is detached
// by restore-nic.
func TestCephNodeXDP(t *testing.T) {
	testenv.RequireRoot(t)
	harness.RequireCommands(t, "scripts/deps.sh installs it", "ceph-mon", "ceph-osd", "ceph", "rados")
	n := &cephNode{t: t, t0: time.Now(), bin: daemonproc.BuildDaemon(t)}
	n.client = testenv.NewVethNS(t, netip.Prefix{})
	n.node = testenv.NewNetNS(t)
	sfx := n.node.Name[len(n.node.Name)-6:]
	n.cliIf, n.nodeIf = "cddx"+sfx, "cddy"+sfx
	n.ip([]string{"link", "add", n.cliIf, "mtu", fmt.Sprint(mtu), "type", "veth", "peer", "name", n.nodeIf, "mtu", fmt.Sprint(mtu)},
		[]string{"link", "set", n.cliIf, "netns", n.client.NS},
		[]string{"link", "set", n.nodeIf, "netns", n.node.Name})
	direct := [][]string{
		{"-n", n.client.NS, "addr", "add", cephClientIP + "/24", "dev", n.cliIf},
		{"-n", n.node.Name, "addr", "add", cephNodeIP + "/24", "dev", n.nodeIf},
		{"-n", n.client.NS, "link", "set", "dev", n.cliIf, "up"},
		{"-n", n.node.Name, "link", "set", "dev", n.nodeIf, "up"},
	}
	n.ip(direct...)
	n.ceph = cephcluster.Start(t, cephcluster.Options{NetNS: n.node.Name, IP: netip.MustParseAddr(cephNodeIP), Pool: cephPool,
		MemstoreBytes: 4 << 30})
	n.logf("cluster up at %s in %s", cephNodeIP, n.node.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	n.healthOK(ctx)
	n.putGet(ctx, "direct")
	dir := n.measure(ctx, "direct", mtu)
	directIfs := []string{n.client.NS + "/" + n.cliIf, n.node.Name + "/" + n.nodeIf}
	n.setMTU(jumboMTU, directIfs...)
	n.pingFull(jumboMTU)
	n.putGet(ctx, "direct-9000")
	dirJumbo := n.measure(ctx, "direct", jumboMTU)
	n.setMTU(mtu, directIfs...)

	xcfg, xmetrics := n.config("x", xdpNodeYAML(n.nodeIf, cephNodeIP)+"\n  bridge: {}")
	restoreNIC := func() ([]byte, error) {
		return exec.Command("ip", "netns", "exec", n.node.Name, n.bin, "restore-nic", "--config", xcfg).CombinedOutput()
	}
	daemonproc.RestoreNICAtEnd(t, n.node.Name, n.bin, xcfg, n.nodeIf)
	d := daemonproc.StartIn(t, n.node.Name, n.bin, xcfg, xmetrics)
	prog := n.attached()
	if prog.ID == 0 || prog.Mode != xdp.Generic {
		t.Fatalf("af_xdp daemon up: %+v attached, want its program in generic mode", prog)
	}
	n.logf("af_xdp daemon up, program %d on %s", prog.ID, n.nodeIf)
	n.putGet(ctx, "af_xdp")
	xf := n.measureDaemon(ctx, "af_xdp-generic", mtu, d.Pid())
	n.logf("af_xdp-generic / direct: write %.2f, seq %.2f (target >= 0.9)", xf.write/dir.write, xf.seq/dir.seq)
	// Generic XDP takes any MTU (native XDP at 9000 would need a
	// frags-aware program).
	n.setMTU(jumboMTU, directIfs...)
	n.pingFull(jumboMTU)
	xfJumbo := n.measureDaemon(ctx, "af_xdp-generic", jumboMTU, d.Pid())
	n.logf("af_xdp-generic / direct at MTU %d: write %.2f, seq %.2f", jumboMTU, xfJumbo.write/dirJumbo.write, xfJumbo.seq/dirJumbo.seq)
	n.setMTU(mtu, directIfs...)

	n.killDuringBench(ctx, d)
	if a := n.attached(); a != prog {
		t.Fatalf("after SIGKILL: %+v attached, want %+v kept", a, prog)
	}
	d = daemonproc.StartIn(t, n.node.Name, n.bin, xcfg, xmetrics)
	if want := fmt.Sprintf(`msg="XDP program taken back from the last run" interface=%s program=%d`, n.nodeIf, prog.ID); !strings.Contains(d.Log(), want) {
		t.Errorf("restart after SIGKILL: no %q in\n%s", want, d.Log())
	}
	n.putGet(ctx, "af_xdp-restarted")
	if log, err := d.Stop(10 * time.Second); err != nil || !strings.Contains(log, "all mbufs returned") {
		t.Fatalf("stop: %v\n%s", err, log)
	}
	if out, err := restoreNIC(); err != nil || !strings.Contains(string(out), "XDP program detached from "+n.nodeIf) {
		t.Fatalf("restore-nic: %v\n%s", err, out)
	}
	if a := n.attached(); a.ID != 0 {
		t.Fatalf("after restore-nic: program %d still attached", a.ID)
	}
	n.logf("af_xdp: killed, taken back, stopped cleanly, detached")

	// The rebind path: the direct veth goes down and gives up the
	// addresses; the daemon's kernel interface takes the node's.
	n.ip([]string{"-n", n.client.NS, "link", "set", "dev", n.cliIf, "down"},
		[]string{"-n", n.node.Name, "link", "set", "dev", n.nodeIf, "down"},
		[]string{"-n", n.client.NS, "addr", "flush", "dev", n.cliIf},
		[]string{"-n", n.node.Name, "addr", "flush", "dev", n.nodeIf},
		[]string{"-n", n.client.NS, "addr", "add", cephClientIP + "/24", "dev", n.client.PeerIf})
	n.rebind(ctx, mtu, dir)
	// The client's veth, both ends, carries the jumbo frames; the daemon
	// gives its kernel interface the port's MTU.
	n.setMTU(jumboMTU, n.client.HostIf, n.client.NS+"/"+n.client.PeerIf)
	n.rebind(ctx, jumboMTU, dirJumbo)
}

// killDuringBench SIGKILLs the af_xdp daemon d during a write bench,
// which must end without an error: the node's TCP never crosses the
// daemon.
func (n *cephNode) killDuringBench(ctx context.Context, d *daemonproc.Proc) {
	n.t.Helper()
	type result struct {
		b   cephcluster.Bench
		err error
	}
	done := make(chan result, 1)
	go func() {
		// More objects than the measuring rounds write: a fast node must
		// not reach the cap before the kill.
		b, err := n.bench(ctx, 8, "write", "--no-cleanup", "--max-objects", "600")
		done <- result{b, err}
	}()
	time.Sleep(2 * time.Second)
	select {
	case r := <-done:
		n.t.Fatalf("the bench ended before the kill: %v", r.err)
	default:
	}
	if err := syscall.Kill(d.Pid(), syscall.SIGKILL); err != nil {
		n.t.Fatal(err)
	}
	<-d.Exited()
	n.logf("af_xdp daemon SIGKILLed during a rados bench 8 write")
	r := <-done
	if r.err != nil {
		n.t.Fatalf("the bench failed after the daemon was killed: %v", r.err)
	}
	n.logf("the bench went on: %.1f MB/s", r.b.MBps)
	n.cleanup(ctx)
}
