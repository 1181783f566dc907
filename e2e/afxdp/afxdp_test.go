package afxdp

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"

	"github.com/cephdpdkd/cephdpdkd/internal/afxdp"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/statefile"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

// node is a veth whose root-namespace end is the node's interface, with
// the node's address, and whose other end is a RoCE client's, in a
// namespace.
type node struct {
	v          *testenv.VethNS
	ip, peerIP string
	bin, dir   string
}

func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{bin: daemonproc.BuildDaemon(t), dir: t.TempDir()}
	sub := 100 + os.Getpid()%100
	n.ip, n.peerIP = fmt.Sprintf("10.79.%d.1", sub), fmt.Sprintf("10.79.%d.2", sub)
	n.v = testenv.NewVethNS(t, netip.MustParsePrefix(n.peerIP+"/24"))
	if err := n.v.HostAddr(netip.MustParsePrefix(n.ip + "/24")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Where the machine has a BPF file system, the daemon attached
		// through a link pinned there: a test that ends without
		// restore-nic must not leave the pin (and the link) behind, nor
		// the records of an interface about to be deleted (the program's,
		// which a stop keeps, and the lock file) in the machine's run
		// directory.
		os.Remove(afxdp.PinPath(config.DefaultBPFFS, n.v.HostIf))
		xdp.Detach(n.v.HostIndex, xdp.Generic)
		for _, kind := range []string{"xdp", "lock"} {
			os.Remove(statefile.Path("", n.v.HostIf, kind))
		}
	})
	return n
}

// config writes the node's af_xdp configuration: an echo listener on
// 7471, and the metrics at addr.
func (n *node) config(t *testing.T, metrics string) string {
	t.Helper()
	path := filepath.Join(n.dir, "node.yaml")
	sfx := n.v.HostIf[len("cddh-"):]
	write(t, path, fmt.Sprintf(`
eal: {lcores: "0-1", no_huge: true, memory_mb: 512, file_prefix: cdd-xn-%s}
%s
  listen: [{port: 7471, app: echo}]
metrics: {listen: "%s"}
shutdown: {drain_timeout: 1s}
`, sfx, xdpNodeYAML(n.v.HostIf, n.ip), metrics))
	return path
}

// xdpNodeYAML is the port, services and roce sections of a node in the
// af_xdp mode on iface (generic attach), its RoCE endpoint at addr; the
// roce section's last, so that the caller can add to it.
func xdpNodeYAML(iface, addr string) string {
	return fmt.Sprintf(`port:
  name: xnode
  mode: af_xdp
  af_xdp: {interface: %s, attach: generic}
%s`, iface, roceYAML(addr))
}

// roceYAML is the services and roce sections of a RoCE endpoint at
// addr; the roce section's last, so that the caller can add to it.
func roceYAML(addr string) string {
	return fmt.Sprintf(`services:
  - {name: roce, ring_size: 4096, consumer: {type: roce}}
  - {name: other}
default_service: other
roce:
  service: roce
  address: %s`, addr)
}

// daemonConfig is config with free metrics address, for a test that
// runs the daemon: restore-nic detaches its program when the test ends,
// and the interface's lock file goes with it.
func (n *node) daemonConfig(t *testing.T) (cfg, metrics string) {
	t.Helper()
	metrics = daemonproc.FreeAddr(t)
	cfg = n.config(t, metrics)
	daemonproc.RestoreNICAtEnd(t, "", n.bin, cfg, n.v.HostIf)
	return cfg, metrics
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ping runs roce-ping from the namespace against the daemon's echo: a
// DPDK client on net_af_packet, which resolves the node through the
// node's kernel (ARP passes the program).
func (n *node) ping(t *testing.T, count int) string {
	t.Helper()
	out, err := n.pingCmd(t, count).CombinedOutput()
	if err := pingResult(count, out, err); err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// pingCmd is ping's roce-ping command, for a test that runs it alongside
// something else.
func (n *node) pingCmd(t *testing.T, count int) *exec.Cmd {
	t.Helper()
	sfx := n.v.HostIf[len("cddh-"):]
	cfg := filepath.Join(n.dir, "ping.yaml")
	write(t, cfg, fmt.Sprintf(`
eal: {lcores: "0-1", main_lcore: 1, no_huge: true, memory_mb: 512, file_prefix: cdd-xc-%s}
port: {name: xcli, device: "net_af_packet9,iface=%s"}
services:
  - {name: roce, ring_size: 4096, consumer: {type: roce}}
  - {name: other}
default_service: other
roce: {service: roce, address: %s, max_sessions: 2, memory_mb: 64}
`, sfx, n.v.PeerIf, n.peerIP))
	return exec.Command("ip", "netns", "exec", n.v.NS, n.bin, "roce-ping", "--config", cfg,
		"--target", n.ip, "--port", "7471", "-n", strconv.Itoa(count), "-s", "1000", "--timeout", "30s")
}

// pingResult checks roce-ping's output: every message answered.
func pingResult(count int, out []byte, err error) error {
	if err != nil {
		return fmt.Errorf("roce-ping: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("%d sent, %d received", count, count); !strings.Contains(string(out), want) {
		return fmt.Errorf("roce-ping: want %q:\n%s", want, out)
	}
	return nil
}

// kernelPing checks that the node's kernel still answers: ICMP and ARP
// pass the program.
func (n *node) kernelPing(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", n.v.NS, "ping", "-c", "3", "-W", "2", n.ip).CombinedOutput(); err != nil {
		t.Fatalf("ping to the node's kernel: %v\n%s", err, out)
	}
}

func (n *node) attached(t *testing.T) xdp.Attachment {
	t.Helper()
	a, err := xdp.Attached(n.v.HostIndex)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRoCEXDP runs the daemon in the af_xdp mode on a veth the kernel
// keeps: RoCE reaches its echo while the node's kernel answers ping; a
// stop leaves the program attached and every mbuf back; a restart takes
// the same program back; restore-nic detaches it.
func TestRoCEXDP(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	cfg, metrics := n.daemonConfig(t)

	d := daemonproc.Start(t, n.bin, cfg, metrics)
	first := n.attached(t)
	if first.ID == 0 || first.Mode != xdp.Generic {
		t.Fatalf("after start: %+v, want the daemon's program in generic mode", first)
	}
	t.Log(n.ping(t, 200))
	n.kernelPing(t)
	m, err := d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	iface := "interface=" + n.v.HostIf
	if r := daemonproc.Sum(m, "cephdpdkd_xdp_redirected_total", iface); r < 400 {
		t.Errorf("cephdpdkd_xdp_redirected_total = %v, want at least the 200 requests and their CM", r)
	}
	if p := daemonproc.Sum(m, "cephdpdkd_xdp_passed_total", iface, "reason=not_roce"); p < 3 {
		t.Errorf("passed not_roce = %v, want the 3 pings at least", p)
	}
	if p := daemonproc.Sum(m, "cephdpdkd_xdp_passed_total", iface, "reason=no_socket"); p != 0 {
		t.Errorf("passed no_socket = %v while the daemon ran", p)
	}
	log, err := d.Stop(10 * time.Second)
	if err != nil || !strings.Contains(log, "all mbufs returned") {
		t.Fatalf("stop: %v\n%s", err, log)
	}
	if a := n.attached(t); a != first {
		t.Fatalf("after a stop: %+v, want %+v kept", a, first)
	}
	// With the daemon gone the program passes RoCE to the kernel.
	n.kernelPing(t)

	d = daemonproc.Start(t, n.bin, cfg, metrics)
	if !strings.Contains(d.Log(), fmt.Sprintf(`msg="XDP program taken back from the last run" interface=%s program=%d`, n.v.HostIf, first.ID)) {
		t.Errorf("restart did not take program %d back:\n%s", first.ID, d.Log())
	}
	n.ping(t, 20)
	if log, err := d.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, log)
	}
	out, err := exec.Command(n.bin, "restore-nic", "--config", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "XDP program detached from "+n.v.HostIf) {
		t.Fatalf("restore-nic: %v\n%s", err, out)
	}
	if a := n.attached(t); a.ID != 0 {
		t.Errorf("after restore-nic: program %d still attached", a.ID)
	}
}

// TestForeignProgramXDP: a program on the interface that is not the
// daemon's is refused by check-config and run, named, and left alone.
func TestForeignProgramXDP(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "someone_elses", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, 2, asm.DWord), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	link, err := netlink.LinkByIndex(n.v.HostIndex)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetXdpFdWithFlags(link, prog.FD(), 2 /* XDP_FLAGS_SKB_MODE */); err != nil {
		t.Fatal(err)
	}
	foreign := n.attached(t)
	cfg := n.config(t, daemonproc.FreeAddr(t))
	want := fmt.Sprintf(`another XDP program is attached (id %d, name "someone_elses")`, foreign.ID)
	for _, args := range [][]string{{"check-config", cfg}, {"run", "--config", cfg, "--status=off", "--duration", "5s"}} {
		out, err := exec.Command(n.bin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %v, want a refusal with %q:\n%s", args[0], err, want, out)
		}
	}
	if a := n.attached(t); a != foreign {
		t.Errorf("after the refusals: %+v, want the foreign %+v left alone", a, foreign)
	}
}

// TestNativeMTUXDP: a native attach on an interface whose MTU the
// program (not frags-aware) cannot take is refused by check-config and
// run, naming the limit and the ways out, before anything is attached.
func TestNativeMTUXDP(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	// Both ends, as a node's veth pair has them: veth refuses native
	// XDP on its peer's MTU.
	mtu := strconv.Itoa(xdp.NativeMaxMTU + 1)
	if out, err := exec.Command("ip", "link", "set", "dev", n.v.HostIf, "mtu", mtu).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := exec.Command("ip", "netns", "exec", n.v.NS, "ip", "link", "set", "dev", n.v.PeerIf, "mtu", mtu).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	b, err := os.ReadFile(n.config(t, daemonproc.FreeAddr(t)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(n.dir, "native.yaml")
	write(t, cfg, strings.Replace(string(b), "attach: generic", "attach: native", 1))
	want := fmt.Sprintf("port.af_xdp.attach: native: %s's MTU is %s, but native XDP without frags support cannot take frames over MTU %d", n.v.HostIf, mtu, xdp.NativeMaxMTU)
	for _, args := range [][]string{{"check-config", cfg}, {"run", "--config", cfg, "--status=off", "--duration", "5s"}} {
		out, err := exec.Command(n.bin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "set port.af_xdp.attach: generic") {
			t.Errorf("%s: %v, want a refusal with %q:\n%s", args[0], err, want, out)
		}
	}
	if a := n.attached(t); a.ID != 0 {
		t.Errorf("after the refusals: program %d attached", a.ID)
	}
}
