//go:build linux

package systemd

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cephdpdkd/cephdpdkd/internal/metrics"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/sysguest"
)

const (
	unit    = "cephdpdkd@data0"
	cfgPath = "/etc/cephdpdkd/data0.yaml"
	// metricsURL is the daemon's endpoint inside the guest.
	metricsURL = "127.0.0.1:9477"
	// watchdogSec shortens the unit's WatchdogSec (a drop-in, as an
	// operator tunes it), so that the stopped daemon is found out sooner.
	watchdogSec = 5
	// hugepages is what the daemon reserves at start (eal.hugepages, 2
	// MiB each) and gives back at stop: the guest boots without any.
	hugepages = 80
	// cmdTimeout bounds a command in the guest: a systemctl start or stop
	// takes seconds, the watch of a restart a minute at most.
	cmdTimeout = 100 * time.Second
)

var (
	peerAddr  = netip.MustParsePrefix("10.99.0.1/24")
	guestAddr = netip.MustParsePrefix("10.99.0.2/24")
)

// config is the daemon's configuration in the guest: the NIC at
// sysguest.NICAddr, named by its interface, bound to driver at start.
// With a kernel driver, both services hand their packets to an exception
// path of that driver, which has the guest's address.
func config(iface, driver, kernel string) string {
	consumer, section := "", ""
	if kernel != "" {
		consumer = ", consumer: {type: kernel}"
		section = fmt.Sprintf("kernel:\n  driver: %s\n  addresses: [%s]\n", kernel, guestAddr)
	}
	return fmt.Sprintf(`# written by e2e/systemd
eal:
  lcores: "0-1"
  main_lcore: 0
  memory_mb: 128
  hugepages: {pages: %d, size: 2M}
  file_prefix: cephdpdkd-data0
port:
  name: data0
  device: %q
  bind: {driver: %s, interface: %s}
  rx_queues: 1
  tx_queues: 1
  rx_descriptors: 256
  tx_descriptors: 256
mempool:
  data_room: 2176
  cache_size: 32
burst_size: 32
services:
  - {name: osd, ring_size: 1024%[6]s}
  - {name: unclaimed, ring_size: 1024%[6]s}
default_service: unclaimed
rules:
  - {service: osd, protocol: tcp, dst_ports: ["6800-7568"]}
metrics:
  listen: %[5]s
%[7]s`, hugepages, sysguest.NICAddr, driver, iface, metricsURL, consumer, section)
}

// TestSystemdNIC runs cephdpdkd@data0 under the guest's systemd on its
// e1000, step by step, each step timed: bound to uio_pci_generic through
// start, traffic, stop, kill -9 and the watchdog; then to vfio-pci, which
// the guest's emulated IOMMU allows, through start, traffic and stop;
// then with an exception path of kernel.driver virtio_user
// (checkVirtioUser) through start, TCP both ways and stop.
func TestSystemdNIC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	steps := newTimeline(t)
	defer steps.report()
	g, peer, _ := bootGuest(ctx, t, steps, "boot (systemd, q35 + intel-iommu)", sysguest.Options{
		IOMMU: true,
		Files: []sysguest.File{
			{Path: "/etc/systemd/system/" + unit + ".service.d/test.conf", Data: fmt.Appendf(nil,
				"[Service]\n# e2e/systemd: a shorter watchdog, so the stopped daemon is found out sooner.\nWatchdogSec=%ds\n", watchdogSec)},
			{Path: xferPath, Mode: 0o755, Data: []byte(xferScript)},
		},
	})
	iface := g.Interface
	if err := g.WriteFile(ctx, cfgPath, []byte(config(iface, "uio_pci_generic", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, g: g, ctx: ctx, unit: unit, driver: "uio_pci_generic"}

	t.Run("kernel path", func(t *testing.T) {
		// The bridge and the peer work before DPDK has the NIC; then the
		// interface goes down without its address, as a NIC the daemon
		// may take is (it refuses one that is up or addressed).
		d.run(t, fmt.Sprintf("ip addr add %s dev %s && ip link set %s up", guestAddr, iface, iface))
		d.run(t, fmt.Sprintf("for i in $(seq 50); do grep -q 1 /sys/class/net/%s/carrier 2>/dev/null && break; sleep 0.1; done; ping -c 2 -i 0.3 -W 2 %s", iface, peerAddr.Addr()))
		d.run(t, fmt.Sprintf("ip addr flush dev %s && ip link set %s down", iface, iface))
	})

	t.Run("uio_pci_generic", func(t *testing.T) {
		if !t.Run("start binds the NIC", func(t *testing.T) { d.start(t, steps, true) }) {
			t.Fatal("the daemon did not start: the steps that need it are left out")
		}
		t.Run("traffic counted", func(t *testing.T) { d.checkTraffic(t, peer) })
		t.Run("status line", func(t *testing.T) { d.checkStatus(t) })
		t.Run("systemctl reload", func(t *testing.T) { d.reload(t, steps, cfgPath) })
		t.Run("stop restores the NIC", func(t *testing.T) {
			d.stop(t, steps)
			// The daemon gave the NIC back itself: ExecStopPost found
			// nothing to do.
			d.checkJournal(t, "NIC restored", "nothing to restore")
		})
		t.Run("kill -9", func(t *testing.T) {
			d.start(t, steps, false)
			done := steps.begin("kill -9 → restore, restart")
			seen := d.killAndWatch(t, "KILL", 30*time.Second)
			done()
			d.checkCycle(t, seen, 1)
			d.checkJournal(t, "status=9/KILL", "restore-nic: port data0: "+sysguest.NICAddr+" back on e1000, interface "+iface)
		})
		t.Run("watchdog", func(t *testing.T) {
			done := steps.begin(fmt.Sprintf("kill -STOP → watchdog (%ds), restart", watchdogSec))
			seen := d.killAndWatch(t, "STOP", time.Duration(watchdogSec)*time.Second+60*time.Second)
			done()
			d.checkCycle(t, seen, 2)
			d.checkJournal(t, "Watchdog timeout", "Failed with result 'watchdog'")
		})
		t.Run("final stop", func(t *testing.T) { d.stop(t, steps) })
	})

	t.Run("vfio-pci", func(t *testing.T) {
		d.driver = "vfio-pci"
		d.run(t, "sed -i 's/driver: uio_pci_generic/driver: vfio-pci/' "+cfgPath+" && grep -q 'driver: vfio-pci' "+cfgPath)
		if !t.Run("start binds the NIC", func(t *testing.T) { d.start(t, steps, true) }) {
			t.Fatal("the daemon did not start on vfio-pci: the steps that need it are left out")
		}
		t.Logf("IOMMU group of %s: %s", sysguest.NICAddr, strings.TrimSpace(d.run(t, "basename $(readlink /sys/bus/pci/devices/"+sysguest.NICAddr+"/iommu_group); ls /dev/vfio | paste -sd' '")))
		t.Logf("EAL: %s", strings.TrimSpace(d.run(t, "journalctl -o cat -u "+d.unit+" | grep 'IOVA mode' | tail -1")))
		t.Run("traffic counted", func(t *testing.T) { d.checkTraffic(t, peer) })
		t.Run("stop restores the NIC", func(t *testing.T) { d.stop(t, steps) })
	})

	t.Run("virtio_user", func(t *testing.T) { d.checkVirtioUser(t, steps, peer) })
}

// bootGuest boots the systemd guest for a test: cephdpdkd built here (bin:
// the same Debian 12 and DPDK as the guest's, so it runs there as it is)
// and installed with the unit (and opts.Files), the NIC on a switch with a
// peer at peerAddr. It skips in -short runs and where no guest can boot.
// The NIC must be the guest's e1000 under a predictable name (enp0s5 on
// q35, ens5 on pc). t's cleanup fails it if a namespace or qemu outlives
// the test.
func bootGuest(ctx context.Context, t *testing.T, steps *timeline, step string, opts sysguest.Options) (g *sysguest.Guest, peer *qemuvm.Peer, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a systemd guest under TCG (one to three minutes)")
	}
	if err := sysguest.Available(); err != nil {
		t.Skip(err)
	}
	// Registered first, so it runs after every other cleanup: nothing the
	// test made may outlive it.
	var (
		made  []string // namespaces
		guest *sysguest.Guest
	)
	t.Cleanup(func() {
		for _, ns := range made {
			if _, err := os.Stat("/run/netns/" + ns); err == nil {
				t.Errorf("namespace %s left behind", ns)
			}
		}
		if guest != nil {
			select {
			case <-guest.Exited():
			default:
				t.Error("qemu still running after the cleanup")
			}
		}
	})

	done := steps.begin("build cephdpdkd")
	bin = daemonproc.BuildDaemon(t)
	done()
	binData, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	unitFile, err := os.ReadFile("../../deploy/cephdpdkd@.service")
	if err != nil {
		t.Fatal(err)
	}
	opts.Files = append(opts.Files,
		sysguest.File{Path: "/usr/bin/cephdpdkd", Mode: 0o755, Data: binData},
		sysguest.File{Path: "/etc/systemd/system/cephdpdkd@.service", Data: unitFile})

	done = steps.begin("guest image")
	im, err := sysguest.Image(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done()
	t.Logf("image %s (script ran %v)", im.Dir, im.Took.Round(time.Millisecond))

	b := qemuvm.NewSwitch(t, "cddsys-", "cddsyv", netip.Prefix{})
	peer, err = b.AddPeer(t, peerAddr)
	if err != nil {
		t.Fatal(err)
	}
	made = append(made, b.NS, peer.NS)
	done = steps.begin(step)
	g, err = sysguest.Boot(ctx, t, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	guest = g
	done()
	if !opts.BoundAtBoot && (g.Driver != "e1000" || g.Interface == "eth0") {
		t.Fatalf("guest NIC %s is %q on %q, want a predictable name on e1000", sysguest.NICAddr, g.Interface, g.Driver)
	}
	if out, err := g.RunOK(ctx, "systemd-analyze time | head -1"); err == nil {
		t.Logf("guest: %s", strings.TrimSpace(out))
	}
	return g, peer, bin
}

// daemon drives the unit in the guest.
type daemon struct {
	t      *testing.T
	g      *sysguest.Guest
	ctx    context.Context
	unit   string // cephdpdkd@NAME
	driver string // the DPDK driver the configuration binds to
	// tapKeepsName: the exception path's interface takes the NIC's name
	// while the daemon runs.
	tapKeepsName bool
}

// run runs cmd in the guest and fails t unless it exits 0.
func (d *daemon) run(t *testing.T, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(d.ctx, cmdTimeout)
	defer cancel()
	out, err := d.g.RunOK(ctx, cmd)
	if err != nil {
		t.Fatalf("%v\n%s", err, d.diagnose(t))
	}
	return out
}

func (d *daemon) prop(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSpace(d.run(t, "systemctl show -p "+name+" --value "+d.unit))
}

// snapshot is what the checks look at, read in one command: a TCG guest
// takes a good part of a second for each.
type snapshot struct {
	driver     string   // the NIC's driver, "" for none
	links      []string // kernel interfaces (ip -br link)
	hugepages  int      // 2 MiB pages reserved (nr_hugepages)
	active     string   // the unit's ActiveState
	restarts   string   // its NRestarts
	stateFiles string   // /run/cephdpdkd/*.json
}

func (d *daemon) snapshot(t *testing.T) snapshot {
	t.Helper()
	out := d.run(t, fmt.Sprintf(`echo "driver=$(basename "$(readlink /sys/bus/pci/devices/%s/driver)" 2>/dev/null)"; `+
		`echo "hugepages=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)"; `+
		`systemctl show -p ActiveState -p NRestarts %s; echo "state=$(ls /run/cephdpdkd/*.json 2>/dev/null | paste -sd' ')"; `+
		`ip -br link | awk '{ print "link=" $1 }'`, sysguest.NICAddr, d.unit))
	var sn snapshot
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
		switch k {
		case "driver":
			if v != "." && v != "driver" {
				sn.driver = v
			}
		case "hugepages":
			sn.hugepages, _ = strconv.Atoi(v)
		case "ActiveState":
			sn.active = v
		case "NRestarts":
			sn.restarts = v
		case "state":
			sn.stateFiles = v
		case "link":
			sn.links = append(sn.links, strings.TrimSuffix(v, "@NONE"))
		}
	}
	return sn
}

// start starts the unit, which returns once the daemon has sent READY=1,
// and checks the NIC is on the DPDK driver; devbind asks dpdk-devbind.py
// too (seconds of Python under TCG).
func (d *daemon) start(t *testing.T, steps *timeline, devbind bool) {
	t.Helper()
	done := steps.begin("systemctl start (" + d.driver + ", READY=1)")
	ctx, cancel := context.WithTimeout(d.ctx, cmdTimeout)
	defer cancel()
	out, code, err := d.g.Run(ctx, "systemctl start "+d.unit)
	done()
	if err != nil || code != 0 {
		t.Fatalf("systemctl start %s: exit %d, %v: %s\n%s", d.unit, code, err, out, d.diagnose(t))
	}
	d.checkBound(t, devbind)
}

// checkBound checks the NIC is on the DPDK driver, its kernel interface
// is gone and the daemon's hugepages are reserved.
func (d *daemon) checkBound(t *testing.T, devbind bool) {
	t.Helper()
	sn := d.snapshot(t)
	if sn.driver != d.driver {
		t.Errorf("%s on %q, want %s", sysguest.NICAddr, sn.driver, d.driver)
	}
	if !d.tapKeepsName && slices.Contains(sn.links, d.g.Interface) {
		t.Errorf("ip link still lists %s: %q", d.g.Interface, sn.links)
	}
	if sn.hugepages != hugepages {
		t.Errorf("%d hugepages reserved while the daemon runs, want the %d of eal.hugepages", sn.hugepages, hugepages)
	}
	if !devbind {
		return
	}
	out := d.run(t, "dpdk-devbind.py --status-dev net")
	line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sysguest.NICAddr) + `.*$`).FindString(out)
	if !strings.Contains(line, "drv="+d.driver) || !strings.Contains(out, "DPDK-compatible driver") {
		t.Errorf("dpdk-devbind.py does not show %s on %s:\n%s", sysguest.NICAddr, d.driver, out)
	}
	t.Logf("dpdk-devbind.py: %s", line)
}

// stop stops the unit and checks the NIC is back on its kernel driver
// under its name, the hugepages are given back and nothing is left in
// the state directory.
func (d *daemon) stop(t *testing.T, steps *timeline) {
	t.Helper()
	done := steps.begin("systemctl stop (restore)")
	d.run(t, "systemctl stop "+d.unit)
	d.waitInterface(t)
	done()
	sn := d.snapshot(t)
	if sn.driver != d.g.Driver {
		t.Errorf("%s on %q after the stop, want %s back", sysguest.NICAddr, sn.driver, d.g.Driver)
	}
	if sn.active != "inactive" {
		t.Errorf("ActiveState %s after the stop, want inactive", sn.active)
	}
	// The record of what the restore left on the NIC stays, for the
	// next start (nicbind.Restored).
	if left := slices.DeleteFunc(strings.Fields(sn.stateFiles), func(f string) bool { return strings.HasSuffix(f, ".restored.json") }); len(left) > 0 {
		t.Errorf("state files left after the stop: %s", left)
	}
	if sn.hugepages != 0 {
		t.Errorf("%d hugepages still reserved after the stop, want 0 (the guest boots without)", sn.hugepages)
	}
	out := d.run(t, "cephdpdkd nic-status")
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sysguest.NICAddr) + ` .* drv=` + d.g.Driver + `$`).MatchString(out) {
		t.Errorf("nic-status does not show %s on %s alone:\n%s", sysguest.NICAddr, d.g.Driver, out)
	}
}

// checkStatus finds the daemon's STATUS= line in systemctl status.
func (d *daemon) checkStatus(t *testing.T) {
	t.Helper()
	out := d.run(t, "systemctl status --no-pager --lines=0 "+d.unit)
	m := regexp.MustCompile(`(?m)^\s*Status: "(.+)"$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no Status: line in systemctl status:\n%s", out)
	}
	t.Logf("systemctl status: Status: %q", m[1])
}

// waitInterface waits for the kernel interface to be back under its name
// (udev renames eth0 a moment after the driver's probe).
func (d *daemon) waitInterface(t *testing.T) {
	t.Helper()
	cmd := fmt.Sprintf("for i in $(seq 100); do [ -e /sys/class/net/%s ] && exit 0; sleep 0.1; done; exit 1", d.g.Interface)
	ctx, cancel := context.WithTimeout(d.ctx, cmdTimeout)
	defer cancel()
	if out, code, err := d.g.Run(ctx, cmd); err != nil || code != 0 {
		t.Errorf("interface %s not back within 10 s (exit %d, %v): %s\n%s", d.g.Interface, code, err, out, d.diagnose(t))
	}
}

// checkTraffic sends frames from the peer to the guest's NIC and finds
// them in the daemon's counters: ICMP echo requests (the default service)
// and a TCP SYN to an OSD port (service osd). The daemon answers neither,
// so the peer gets a static neighbour entry for the guest's address.
func (d *daemon) checkTraffic(t *testing.T, peer *qemuvm.Peer) {
	t.Helper()
	before := d.scrape(t)
	ip := guestAddr.Addr().String()
	if _, err := peer.Exec(d.ctx, "ip", "neigh", "replace", ip, "lladdr", d.g.MAC.String(), "dev", peer.If, "nud", "permanent"); err != nil {
		t.Fatal(err)
	}
	const pings = 20
	// No replies: ping's exit status is 1, its count of sent requests
	// is what matters.
	out, _ := peer.Exec(d.ctx, "ping", "-c", strconv.Itoa(pings), "-i", "0.05", "-W", "1", ip)
	if !strings.Contains(string(out), fmt.Sprintf("%d packets transmitted", pings)) {
		t.Fatalf("peer ping: %s", out)
	}
	// One SYN, and a retransmission a second later.
	peer.Exec(d.ctx, "timeout", "1.5", "bash", "-c", "exec 3<>/dev/tcp/"+ip+"/6800")

	var after metrics.Status
	deadline := time.Now().Add(10 * time.Second)
	for {
		after = d.scrape(t)
		if after.RxPackets-before.RxPackets >= pings+1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	rx := after.RxPackets - before.RxPackets
	icmp := after.Services["unclaimed"].Packets - before.Services["unclaimed"].Packets
	syn := after.Services["osd"].Packets - before.Services["osd"].Packets
	t.Logf("daemon counted rx %d frames: unclaimed +%d (ICMP), osd +%d (TCP SYN to 6800); drops osd %d unclaimed %d",
		rx, icmp, syn, after.Services["osd"].Drops, after.Services["unclaimed"].Drops)
	if icmp < pings {
		t.Errorf("unclaimed service counted %d frames, want the %d echo requests", icmp, pings)
	}
	if syn < 1 {
		t.Errorf("osd service counted %d frames, want the SYN to port 6800", syn)
	}
	if rx < icmp+syn {
		t.Errorf("port counted %d frames, fewer than its services (%d)", rx, icmp+syn)
	}
}

// reload changes the configuration live through the unit's ExecReload=
// (cephdpdkd reload): a new service and rule are taken without a
// restart; a file with an error is refused (systemctl reload fails) and
// the daemon keeps running on what it had. The file is put back after.
func (d *daemon) reload(t *testing.T, steps *timeline, cfgPath string) {
	t.Helper()
	pid := d.prop(t, "MainPID")
	d.run(t, "cp "+cfgPath+" "+cfgPath+".orig")
	defer d.run(t, "mv "+cfgPath+".orig "+cfgPath)
	d.run(t, `sed -i 's/^  - {name: unclaimed, ring_size: 1024}/  - {name: mon, ring_size: 64}\n&/; s/^rules:/&\n  - {service: mon, protocol: tcp, dst_ports: [3300, 6789]}/' `+cfgPath)
	done := steps.begin("systemctl reload (a service and a rule added)")
	d.run(t, "systemctl reload "+d.unit)
	done()
	if got := d.prop(t, "MainPID"); got != pid {
		t.Fatalf("main PID %s after the reload, was %s: restarted, not reloaded", got, pid)
	}
	d.checkJournal(t, "configuration reloaded")
	m := d.metrics(t, "cephdpdkd_(config_reloads_total|service_packets_total)")
	for _, want := range []string{`cephdpdkd_config_reloads_total{result="ok"} 1`, `service="mon"`} {
		if !strings.Contains(m, want) {
			t.Errorf("after the reload, the metrics lack %s:\n%s", want, m)
		}
	}

	d.run(t, "echo 'rules: [{service: nosuch}]' >>"+cfgPath)
	ctx, cancel := context.WithTimeout(d.ctx, cmdTimeout)
	defer cancel()
	out, code, err := d.g.Run(ctx, "systemctl reload "+d.unit)
	if err != nil {
		t.Fatal(err)
	}
	if code == 0 {
		t.Errorf("systemctl reload of an invalid file succeeded:\n%s", out)
	}
	if got, state := d.prop(t, "MainPID"), d.prop(t, "ActiveState"); got != pid || state != "active" {
		t.Errorf("after a refused reload: main PID %s (was %s), %s", got, pid, state)
	}
	// cephdpdkd reload checks the file first: the daemon is not signalled.
	d.checkJournal(t, "already defined at line", "Reload failed for")
}

// families reads the daemon's metric families whose names match pattern,
// parsed.
func (d *daemon) families(t *testing.T, pattern string) map[string]*dto.MetricFamily {
	t.Helper()
	out := d.metrics(t, pattern)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(out))
	if err != nil {
		t.Fatalf("metrics: %v\n%s", err, out)
	}
	return fams
}

// scrape reads the daemon's metrics in the guest (bash's /dev/tcp: no
// HTTP client needed there).
func (d *daemon) scrape(t *testing.T) metrics.Status {
	t.Helper()
	fams := d.families(t, "cephdpdkd_(queue_rx_packets_total|service_packets_total|service_drops_total)")
	list := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		list = append(list, f)
	}
	return metrics.StatusFromFamilies(time.Now(), list)
}

// metrics returns the lines of the daemon's metrics that match the
// extended regular expression re.
func (d *daemon) metrics(t *testing.T, re string) string {
	t.Helper()
	host, port, _ := strings.Cut(metricsURL, ":")
	return d.run(t, fmt.Sprintf(`exec 3<>/dev/tcp/%s/%s && printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' >&3 && `+
		`sed '1,/^\r*$/d' <&3 | grep -E '%s'`, host, port, metricsURL, re))
}

// killAndWatch sends sig to the daemon's main process and watches, in the
// guest, the NIC's driver and the unit until systemd has restarted it with
// a new main process. It returns what it saw, one line per change, with
// the seconds since the signal.
func (d *daemon) killAndWatch(t *testing.T, sig string, limit time.Duration) string {
	t.Helper()
	drivers := fmt.Sprintf(`for d in %s uio_pci_generic vfio-pci; do [ -e /sys/bus/pci/drivers/$d/%s ] && { echo driver=$d; return; }; done; echo driver=none`,
		d.g.Driver, sysguest.NICAddr)
	return d.watchRestart(t, "kill -"+sig+" $p", drivers, "driver="+d.driver, limit)
}

// watchRestart runs kill, a shell command in which $p is the daemon's
// main PID, and watches, in the guest, what probe (a shell function's
// body) prints and the unit, until systemd has restarted it with a new
// main process and probe prints want. It returns what it saw, one line
// per change, with the seconds since the kill.
func (d *daemon) watchRestart(t *testing.T, kill, probe, want string, limit time.Duration) string {
	t.Helper()
	pid := d.prop(t, "MainPID")
	if pid == "0" || pid == "" {
		t.Fatalf("no main process: %s", d.diagnose(t))
	}
	// Two loops: the probe's, every 20 ms, so that it sees a short
	// change between the stop and the restart (the kernel driver back
	// for a moment) even when systemctl takes a second to answer; and
	// the unit's, which ends both.
	cmd := fmt.Sprintf(`p=%s; read t0 _ </proc/uptime; el() { read u _ </proc/uptime; echo "+$(( (${u/./}-${t0/./})/100 )).$(( (${u/./}-${t0/./})/10%%10 ))s"; }; `+
		`probe() { %s; }; `+
		`( prev=; while :; do now=$(probe); [ "$now" != "$prev" ] && echo "$(el) $now"; prev=$now; sleep 0.02; done ) & w=$!; `+
		`%s; prev=; ok=1; `+
		`while :; do read u _ </proc/uptime; [ $(( ${u/./}-${t0/./} )) -gt %d ] && break; `+
		`s=$(systemctl show -p ActiveState -p SubState -p MainPID %s | sort | paste -sd' '); `+
		`[ "$s" != "$prev" ] && echo "$(el) $s"; prev=$s; `+
		`np=${s#*MainPID=}; np=${np%%%% *}; `+
		`case "$s" in "ActiveState=active "*"SubState=running") [ "$np" != $p ] && [ "$np" != 0 ] && [ "$(probe)" = %s ] && { ok=0; break; };; esac; `+
		`sleep 0.1; done; sleep 0.1; kill $w; wait $w 2>/dev/null; exit $ok`,
		pid, probe, kill, int(limit/(10*time.Millisecond)), d.unit, qemuvm.ShellQuote(want))
	ctx, cancel := context.WithTimeout(d.ctx, limit+cmdTimeout)
	defer cancel()
	out, code, err := d.g.Run(ctx, cmd)
	t.Logf("%s (main PID %s); what followed:\n%s", strings.ReplaceAll(kill, "$p", pid), pid, out)
	if err != nil || code != 0 {
		t.Fatalf("not restarted within %v (exit %d, %v)\n%s", limit, code, err, d.diagnose(t))
	}
	return out
}

// checkCycle checks a killAndWatch record: the kernel driver came back
// (ExecStopPost) before the new process bound the NIC again, and systemd
// counted the restart.
func (d *daemon) checkCycle(t *testing.T, seen string, restarts int) {
	t.Helper()
	restored := strings.Index(seen, " driver="+d.g.Driver+"\n")
	rebound := strings.LastIndex(seen, " driver="+d.driver+"\n")
	if restored < 0 || rebound < restored {
		t.Errorf("the NIC was not seen back on %s between the kill and the restart", d.g.Driver)
	}
	// checkBound also finds the hugepages the new process reserved: as
	// many as before, ExecStopPost having given back the dead one's.
	d.checkBound(t, false)
	if n := d.prop(t, "NRestarts"); n != strconv.Itoa(restarts) {
		t.Errorf("NRestarts %s, want %d", n, restarts)
	}
}

// checkJournal checks that the unit's journal holds every one of want.
func (d *daemon) checkJournal(t *testing.T, want ...string) {
	t.Helper()
	out := d.run(t, "journalctl --no-pager -o cat -u "+d.unit)
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("journal of %s lacks %q:\n%s", d.unit, w, qemuvm.Tail(out, 40))
		}
	}
}

// diagnose gathers what says why a step failed: the unit, its journal,
// the kernel's last messages and the NICs' drivers; or, when the guest
// does not answer, the end of its console.
func (d *daemon) diagnose(t *testing.T) string {
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	if d.ctx.Err() != nil { // the test's time is up: a little more for this
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
	}
	out, _, err := d.g.Run(ctx, "systemctl status --no-pager -l "+d.unit+"; journalctl --no-pager -o short-monotonic -u "+d.unit+" | tail -40; "+
		"dmesg | tail -15; dpdk-devbind.py --status-dev net; grep -i huge /proc/meminfo")
	if err != nil {
		return fmt.Sprintf("(the guest does not answer: %v)\n--- console ---\n%s", err, qemuvm.Tail(d.g.Console(), 40))
	}
	return out
}

// timeline logs how long each step took, and all of them at the end.
type timeline struct {
	t     *testing.T
	start time.Time
	lines []string
}

func newTimeline(t *testing.T) *timeline { return &timeline{t: t, start: time.Now()} }

func (tl *timeline) begin(name string) (done func()) {
	s := time.Now()
	return func() {
		l := fmt.Sprintf("%-40s %6.1f s (at %5.1f s)", name, time.Since(s).Seconds(), time.Since(tl.start).Seconds())
		tl.lines = append(tl.lines, l)
		tl.t.Logf("step: %s", l)
	}
}

func (tl *timeline) report() {
	if len(tl.lines) == 0 {
		return
	}
	tl.t.Logf("timings:\n%s\ntotal %.1f s", strings.Join(tl.lines, "\n"), time.Since(tl.start).Seconds())
}
