//go:build linux

package systemd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/sysguest"
)

const (
	// xdpMetricsPort is where the af_xdp daemon serves its metrics, on
	// the guest's address: the peer scrapes them over TCP through the
	// guest's kernel, which the program passes TCP to.
	xdpMetricsPort = 9477
	// echoPort is the daemon's RoCE echo listener.
	echoPort = 7471
	// rocePings is how many echoes roce-ping sends after the start.
	rocePings = 50
	// xdpHugepages is what the daemon reserves (2 MiB each) for the EAL
	// (memory_mb 192) and gives back at stop.
	xdpHugepages = 96
)

// xdpConfig is the af_xdp daemon's configuration in the guest: the NIC's
// interface in generic mode (e1000 has no native XDP), a RoCE echo on the
// guest's address and the metrics there too.
func xdpConfig(iface string) string {
	return fmt.Sprintf(`# written by e2e/systemd
eal:
  lcores: "0-1"
  main_lcore: 0
  memory_mb: 192
  hugepages: {pages: %d, size: 2M}
  file_prefix: cephdpdkd-%s
port:
  name: %s
  mode: af_xdp
  af_xdp: {interface: %s, attach: generic}
  rx_queues: 1
services:
  - {name: roce, ring_size: 1024, consumer: {type: roce}}
  - {name: other, ring_size: 256}
default_service: other
roce:
  service: roce
  address: %s
  memory_mb: 64
  max_sessions: 2
  listen: [{port: %d, app: echo}]
metrics:
  listen: %s:%d
shutdown: {drain_timeout: 1s}
`, xdpHugepages, iface, iface, iface, guestAddr.Addr(), echoPort, guestAddr.Addr(), xdpMetricsPort)
}

// TestSystemdXDP runs cephdpdkd@NIC under the guest's systemd in the
// af_xdp mode on its e1000, in one boot: the start keeps the NIC on its
// kernel driver with its address, reachable from the peer, and attaches
// the program libxdp adopts (with systemd's bpffs mounted); RoCE from the
// peer reaches the daemon's echo; a reload leaves the program alone;
// systemctl kill -s SIGKILL has systemd restart the daemon, which takes
// the same program back; a clean stop has restore-nic detach it.
func TestSystemdXDP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	steps := newTimeline(t)
	defer steps.report()
	g, peer, bin := bootGuest(ctx, t, steps, "boot (systemd, pc)", sysguest.Options{})
	iface := g.Interface
	d := &daemon{t: t, g: g, ctx: ctx, unit: "cephdpdkd@" + iface}
	x := &xdpNode{daemon: d, peer: peer, iface: iface, bin: bin, dir: t.TempDir()}

	// The NIC is the node's: up, with its address, before the daemon.
	d.run(t, fmt.Sprintf("ip addr add %s dev %s && ip link set %s up && "+
		"for i in $(seq 50); do grep -q 1 /sys/class/net/%s/carrier 2>/dev/null && break; sleep 0.1; done; ping -c 1 -W 2 %s",
		guestAddr, iface, iface, iface, peerAddr.Addr()))
	if err := g.WriteFile(ctx, "/etc/cephdpdkd/"+iface+".yaml", []byte(xdpConfig(iface)), 0o644); err != nil {
		t.Fatal(err)
	}
	// systemd mounts bpffs, where libxdp would pin a dispatcher of its
	// own if it loaded one.
	bpffs := strings.TrimSpace(d.run(t, "echo $(findmnt -n -o FSTYPE /sys/fs/bpf) $(find /sys/fs/bpf -mindepth 1)"))
	t.Logf("bpffs before the start: %q", bpffs)
	if bpffs != "bpf" {
		t.Errorf("/sys/fs/bpf before the start: %q, want systemd's empty bpffs", bpffs)
	}

	var prog string // the program's id, which every step after the start checks
	if !t.Run("start keeps the NIC in the kernel", func(t *testing.T) {
		done := steps.begin("systemctl start (af_xdp, READY=1)")
		d.run(t, "systemctl start "+d.unit)
		done()
		sn := x.snapshot(t)
		t.Logf("after the start: %+v", sn)
		if sn.active != "active" {
			t.Errorf("ActiveState %s, want active", sn.active)
		}
		x.checkKernel(t, sn)
		if sn.prog == "" || sn.mode != "xdpgeneric" || sn.name != "xsk_def_prog" {
			t.Fatalf("ip link: program %q (%s, name %q), want the daemon's xsk_def_prog in generic mode:\n%s", sn.prog, sn.mode, sn.name, sn.link)
		}
		if !strings.Contains(sn.record, `"program_id":`+sn.prog+",") {
			t.Errorf("state file %s.xdp.json does not record program %s: %s", iface, sn.prog, sn.record)
		}
		prog = sn.prog
		// libxdp adopted the program: had it loaded its dispatcher, the
		// interface would show xdp_dispatcher, pinned under /sys/fs/bpf/xdp.
		t.Logf("bpffs with the daemon running: %q", sn.bpffs)
		if strings.Contains(sn.bpffs, "dispatch") {
			t.Errorf("libxdp pinned a dispatcher in bpffs: %s", sn.bpffs)
		}
		t.Logf("libxdp said: %s", strings.TrimSpace(d.run(t, "journalctl -o cat -u "+d.unit+" | grep libxdp || true")))
		d.checkJournal(t, `msg="XDP program attached" interface=`+iface+" program="+prog+" mode=generic")
	}) {
		t.Fatal("the daemon did not start: the steps that need it are left out")
	}

	t.Run("RoCE reaches the daemon", func(t *testing.T) {
		before := x.scrape(t)
		done := steps.begin(fmt.Sprintf("roce-ping from the peer (%d echoes)", rocePings))
		t.Log(x.rocePing(t, rocePings))
		done()
		after := x.scrape(t)
		lbl := "interface=" + iface
		redirected := daemonproc.Sum(after, "cephdpdkd_xdp_redirected_total", lbl) - daemonproc.Sum(before, "cephdpdkd_xdp_redirected_total", lbl)
		roce := daemonproc.Sum(after, "cephdpdkd_service_packets_total", "service=roce") - daemonproc.Sum(before, "cephdpdkd_service_packets_total", "service=roce")
		passed := daemonproc.Sum(after, "cephdpdkd_xdp_passed_total", lbl, "reason=not_roce")
		t.Logf("program redirected +%v, passed not_roce %v; service roce +%v", redirected, passed, roce)
		if redirected < rocePings || roce < rocePings {
			t.Errorf("redirected +%v, service roce +%v: want at least the %d requests", redirected, roce, rocePings)
		}
		// The peer's pings and scrapes (TCP) went to the kernel.
		if passed < 3 {
			t.Errorf("passed not_roce = %v, want the kernel's pings and TCP at least", passed)
		}
		if n := daemonproc.Sum(after, "cephdpdkd_xdp_passed_total", lbl, "reason=no_socket"); n != 0 {
			t.Errorf("passed no_socket = %v while the daemon ran", n)
		}
	})

	t.Run("systemctl reload keeps the program", func(t *testing.T) {
		pid := d.prop(t, "MainPID")
		done := steps.begin("systemctl reload")
		d.run(t, "systemctl reload "+d.unit)
		done()
		sn := x.snapshot(t)
		if got := d.prop(t, "MainPID"); got != pid || sn.prog != prog {
			t.Errorf("after the reload: main PID %s (was %s), program %q (was %s)", got, pid, sn.prog, prog)
		}
	})

	t.Run("SIGKILL restarts on the same program", func(t *testing.T) {
		// The probe lists the program on the interface every 20 ms: it
		// must never be gone between the kill and the restart.
		probe := fmt.Sprintf(`l=$(ip -o link show dev %s); [[ $l =~ prog/xdp\ id\ ([0-9]+) ]] && echo xdp=${BASH_REMATCH[1]} || echo xdp=none`, iface)
		done := steps.begin("systemctl kill -s SIGKILL → restart")
		seen := d.watchRestart(t, "systemctl kill -s SIGKILL "+d.unit, probe, "xdp="+prog, 60*time.Second)
		done()
		for _, l := range strings.Split(strings.TrimSpace(seen), "\n") {
			if _, v, ok := strings.Cut(l, " xdp="); ok && v != prog {
				t.Errorf("program %s seen during the restart, want %s throughout: %q", v, prog, l)
			}
		}
		sn := x.snapshot(t)
		x.checkKernel(t, sn)
		if sn.restarts != "1" {
			t.Errorf("NRestarts %s, want 1", sn.restarts)
		}
		d.checkJournal(t, "status=9/KILL",
			"restore-nic: port "+iface+": XDP program kept on "+iface+": the unit failed (SERVICE_RESULT=signal)",
			`msg="XDP program taken back from the last run" interface=`+iface+" program="+prog)
		done = steps.begin("roce-ping after the restart (5 echoes)")
		x.rocePing(t, 5)
		done()
	})

	t.Run("systemctl stop detaches the program", func(t *testing.T) {
		done := steps.begin("systemctl stop (restore-nic)")
		d.run(t, "systemctl stop "+d.unit)
		done()
		sn := x.snapshot(t)
		t.Logf("after the stop: %+v", sn)
		if sn.active != "inactive" {
			t.Errorf("ActiveState %s after the stop, want inactive", sn.active)
		}
		if sn.prog != "" {
			t.Errorf("program %s still attached after the stop:\n%s", sn.prog, sn.link)
		}
		if sn.record != "" {
			t.Errorf("state file left after the stop: %s", sn.record)
		}
		if sn.hugepages != 0 {
			t.Errorf("%d hugepages still reserved after the stop, want 0", sn.hugepages)
		}
		x.checkKernel(t, sn)
		// systemd mounts /sys/fs/bpf: the program is attached through a
		// link pinned there, which net_af_xdp's close (it detaches the
		// interface's default mode's program, generic on an e1000)
		// cannot detach. restore-nic, run with SERVICE_RESULT=success,
		// removes the pin, which detaches it, and the record.
		d.checkJournal(t, `msg="XDP program left attached: it passes every frame until the next start" interface=`+iface+" program="+prog,
			fmt.Sprintf(`msg="hugepages given back" pages=%d`, xdpHugepages), `msg="stopped cleanly"`,
			"restore-nic: port "+iface+": XDP program detached from "+iface)
	})
}

// xdpNode is the guest as an af_xdp node: its NIC's interface, and the
// peer that reaches it over the switch.
type xdpNode struct {
	*daemon
	peer  *qemuvm.Peer
	iface string
	bin   string // cephdpdkd here, for roce-ping
	dir   string // roce-ping's configuration, on this side
}

// xdpSnapshot is what the af_xdp checks look at, read in one command.
// xdpSnapshot is the unit's and the NIC's state (snapshot), and the
// interface's program.
type xdpSnapshot struct {
	snapshot
	addr             bool   // the interface has guestAddr
	link             string // ip -o link show
	prog, name, mode string // the attached program's id and name, xdp or xdpgeneric
	record           string // /run/cephdpdkd/IFACE.xdp.json
	bpffs            string // what is in /sys/fs/bpf
}

var (
	progRe = regexp.MustCompile(`prog/xdp id (\d+)(?: name (\S+))?`)
	modeRe = regexp.MustCompile(`\b(xdp|xdpgeneric|xdpoffload)\b`)
)

func (x *xdpNode) snapshot(t *testing.T) xdpSnapshot {
	t.Helper()
	sn := xdpSnapshot{snapshot: x.daemon.snapshot(t)}
	out := x.run(t, fmt.Sprintf(`echo "addr=$(ip -o -4 addr show dev %s | grep -c ' %s ')"; `+
		`echo "link=$(ip -o link show dev %s)"; `+
		`echo "record=$(tr -d ' \n' </run/cephdpdkd/%s.xdp.json 2>/dev/null)"; `+
		`echo "bpffs=$(find /sys/fs/bpf -mindepth 1 | paste -sd' ')"`,
		x.iface, guestAddr, x.iface, x.iface))
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
		switch k {
		case "addr":
			sn.addr = v == "1"
		case "link":
			sn.link = v
			if m := progRe.FindStringSubmatch(v); m != nil {
				sn.prog, sn.name = m[1], m[2]
				sn.mode = modeRe.FindString(v)
			}
		case "record":
			sn.record = v
		case "bpffs":
			sn.bpffs = v
		}
	}
	return sn
}

// checkKernel checks that the kernel keeps the NIC: its driver, its
// address, and the peer reaching it over ICMP and TCP (a scrape of the
// daemon's metrics, or, with the daemon stopped, a refused connection,
// curl's exit 7: the kernel's RST, not a timeout).
func (x *xdpNode) checkKernel(t *testing.T, sn xdpSnapshot) {
	t.Helper()
	if sn.driver != x.g.Driver || !sn.addr {
		t.Errorf("%s on %q, address %s there: %v; want it kept on %s with its address", x.iface, sn.driver, guestAddr, sn.addr, x.g.Driver)
	}
	if out, err := x.peer.Exec(x.ctx, "ping", "-c", "3", "-i", "0.2", "-W", "2", guestAddr.Addr().String()); err != nil {
		t.Errorf("peer's ping to the guest's kernel: %v\n%s", err, out)
	}
	url := fmt.Sprintf("http://%s:%d/metrics", guestAddr.Addr(), xdpMetricsPort)
	out, err := x.peer.Exec(x.ctx, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", url)
	switch {
	case sn.active == "active" && (err != nil || string(out) != "200"):
		t.Errorf("peer's TCP to the daemon's metrics on the guest: %v: %s", err, out)
	case sn.active != "active" && !strings.Contains(string(out), "curl: (7) Failed to connect"):
		t.Errorf("peer's TCP to the stopped daemon's port: %v: %s; want the guest's kernel to refuse it", err, out)
	}
}

// scrape reads the daemon's metrics from the peer, over TCP through the
// guest's kernel.
func (x *xdpNode) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	url := fmt.Sprintf("http://%s:%d/metrics", guestAddr.Addr(), xdpMetricsPort)
	out, err := x.peer.Exec(x.ctx, "curl", "-sS", "--max-time", "10", url)
	if err != nil {
		t.Fatalf("scrape from the peer: %v", err)
	}
	m, err := daemonproc.ParseMetrics(strings.NewReader(string(out)))
	if err != nil {
		t.Fatalf("scrape from the peer: %v", err)
	}
	return m
}

// rocePing runs roce-ping in the peer's namespace against the daemon's
// echo: a DPDK client on net_af_packet on the peer's interface, which
// resolves the guest through its kernel (ARP passes the program).
func (x *xdpNode) rocePing(t *testing.T, count int) string {
	t.Helper()
	cfg := filepath.Join(x.dir, "ping.yaml")
	err := os.WriteFile(cfg, fmt.Appendf(nil, `
eal: {lcores: "0-1", main_lcore: 1, no_huge: true, memory_mb: 256, file_prefix: cdd-sysxdp-%d}
port: {name: xcli, device: "net_af_packet0,iface=%s"}
services:
  - {name: roce, ring_size: 1024, consumer: {type: roce}}
  - {name: other}
default_service: other
roce: {service: roce, address: %s, max_sessions: 2, memory_mb: 64}
`, os.Getpid(), x.peer.If, peerAddr.Addr()), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(x.ctx, 90*time.Second)
	defer cancel()
	out, err := x.peer.Exec(ctx, x.bin, "roce-ping", "--config", cfg, "--target", guestAddr.Addr().String(),
		"--port", strconv.Itoa(echoPort), "-n", strconv.Itoa(count), "-s", "1000", "--timeout", "60s")
	if err != nil {
		t.Fatalf("roce-ping: %v\n%s", err, x.diagnose(t))
	}
	if want := fmt.Sprintf("%d sent, %d received", count, count); !strings.Contains(string(out), want) {
		t.Fatalf("roce-ping: want %q:\n%s", want, out)
	}
	return string(out)
}
