//go:build linux

package systemd

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/metrics"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/sysguest"
)

const (
	// nodeUnit is the node's instance, enabled in the image, so that it
	// takes the NIC at every boot.
	nodeUnit = "cephdpdkd@node"
	nodeCfg  = "/etc/cephdpdkd/node.yaml"
	// nodeNIC is the e1000's predictable name at slot 5 of qemu's pc
	// machine; the exception path's tap takes it over, as on a node.
	nodeNIC = "ens5"
	// cephLike stands for a Ceph daemon: ordered as ceph-osd@.service is
	// (After= and Wants=network-online.target), it checks at its start
	// that the node's network is there.
	cephLike = "cdd-ceph-like"
)

var (
	// The gateway is the switch's peer (peerAddr); behind it, in its own
	// namespace, a host with an address in each of two subnets: one
	// reached through the default route, one through a route of its own.
	behindAddr = netip.MustParsePrefix("10.98.0.1/24")
	otherAddr  = netip.MustParsePrefix("10.97.0.1/24")
	nodeAddr6  = netip.MustParsePrefix("fd99::2/64")
)

// nodeConfig is a node's configuration: the NIC bound at start, the
// exception path taking its name with the node's addresses (an IPv6 one
// too, whose duplicate address detection READY=1 waits for) and routes.
func nodeConfig() string {
	return fmt.Sprintf(`# written by e2e/systemd (routes)
eal:
  lcores: "0-1"
  main_lcore: 0
  memory_mb: 128
  hugepages: {pages: %d, size: 2M}
  file_prefix: cephdpdkd-node
port:
  name: node
  device: %q
  bind: {driver: uio_pci_generic, interface: %[3]s}
  rx_queues: 1
  tx_queues: 1
  rx_descriptors: 256
  tx_descriptors: 256
mempool:
  data_room: 2176
  cache_size: 32
burst_size: 32
services:
  - {name: osd, ring_size: 1024, priority: 100, consumer: {type: kernel}}
  - {name: other, ring_size: 1024, priority: 150, consumer: {type: kernel}}
default_service: other
rules:
  - {service: osd, protocol: tcp, dst_ports: ["6800-7568"]}
kernel:
  interface: %[3]s
  addresses: [%[4]s, "%[5]s"]
  routes:
    - {to: default, via: %[6]s}
    - {to: %[7]s, via: %[6]s, metric: 50}
metrics:
  listen: %[8]s
`, hugepages, sysguest.NICAddr, nodeNIC, guestAddr, nodeAddr6, peerAddr.Addr(), otherAddr.Masked(), metricsURL)
}

// cephLikeScript is cephLike's ExecStart: it fails unless the node's
// addresses are on the interface (none tentative), its routes go
// through the gateway, and the gateway answers.
func cephLikeScript() string {
	return fmt.Sprintf(`#!/bin/sh
set -e
ip -br addr show dev %[1]s
ip -br addr show dev %[1]s | grep -q ' %[2]s'
ip -br addr show dev %[1]s | grep -q ' %[3]s'
test -z "$(ip -6 addr show dev %[1]s tentative)"
ip route show default | grep 'via %[4]s dev %[1]s'
ip route get %[5]s | grep 'via %[4]s dev %[1]s'
# The gateway answers (the hosts behind it are set up after the first
# boot). The first frames wait for the NIC's link (autonegotiation,
# under TCG) and the gateway's ARP reply: a Ceph daemon retries too.
for i in $(seq 10); do
	ping -c 1 -W 2 %[4]s && break
	[ $i -lt 10 ] || exit 1
done
echo "cdd-ceph-like: the node's network is up"
`, nodeNIC, guestAddr, nodeAddr6, peerAddr.Addr(), behindAddr.Addr())
}

const cephLikeUnitFile = `[Unit]
Description=Stands for a Ceph daemon, ordered as ceph-osd@.service
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/cdd-ceph-like

[Install]
WantedBy=multi-user.target
`

// TestSystemdRoutes runs a node's cephdpdkd@node, enabled at boot, whose
// exception path takes over the NIC's name with the node's addresses and
// routes: the guest reaches a host behind a gateway through the daemon;
// then, with the NIC's kernel driver, after systemctl stop; through the
// daemon again after a start that finds the NIC as the stop left it,
// after kill -9 and the automatic restart, and after a reboot. At each
// boot a unit ordered like Ceph's starts after the daemon's READY=1 and
// finds the node's network.
func TestSystemdRoutes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	steps := newTimeline(t)
	defer steps.report()
	g, peer, _ := bootGuest(ctx, t, steps, "boot (systemd, pc, the node's unit enabled)", sysguest.Options{
		Reboot:      true,
		BoundAtBoot: true,
		Files: []sysguest.File{
			{Path: nodeCfg, Data: []byte(nodeConfig())},
			{Path: "/etc/systemd/system/multi-user.target.wants/" + nodeUnit + ".service", Link: "/etc/systemd/system/cephdpdkd@.service"},
			{Path: "/etc/systemd/system/" + cephLike + ".service", Data: []byte(cephLikeUnitFile)},
			{Path: "/etc/systemd/system/multi-user.target.wants/" + cephLike + ".service", Link: "/etc/systemd/system/" + cephLike + ".service"},
			{Path: "/usr/local/sbin/" + cephLike, Mode: 0o755, Data: []byte(cephLikeScript())},
		},
	})
	g.Interface, g.Driver = nodeNIC, sysguest.E1000
	addBehind(t, peer)
	d := &daemon{t: t, g: g, ctx: ctx, unit: nodeUnit, driver: "uio_pci_generic", tapKeepsName: true}

	t.Run("boot", func(t *testing.T) { d.checkBoot(t) })
	t.Run("through the daemon", func(t *testing.T) {
		d.checkBound(t, false)
		d.checkRouted(t, true)
	})
	t.Run("stop gives the NIC the node's network", func(t *testing.T) {
		d.stop(t, steps)
		d.checkJournal(t, "NIC restored", "nothing to restore")
		d.run(t, "test -s /run/cephdpdkd/node.restored.json")
		d.checkRouted(t, false)
	})
	t.Run("start takes the restored NIC", func(t *testing.T) {
		d.start(t, steps, false)
		d.checkRouted(t, true)
	})
	t.Run("kill -9", func(t *testing.T) {
		done := steps.begin("kill -9 → restore, restart")
		seen := d.killAndWatch(t, "KILL", 90*time.Second)
		done()
		d.checkCycle(t, seen, 1)
		d.checkJournal(t, "status=9/KILL")
		restored := d.run(t, "journalctl --no-pager -o cat -u "+d.unit+" | grep -E 'restore|NIC bound' || true")
		t.Logf("journal:\n%s", restored)
		if want := fmt.Sprintf("restore-nic: port node: %s back on e1000, interface %s up with addresses [%s %s]",
			sysguest.NICAddr, nodeNIC, guestAddr, nodeAddr6); !strings.Contains(restored, want) {
			t.Errorf("journal lacks %q", want)
		}
		d.checkRouted(t, true)
	})
	t.Run("reboot", func(t *testing.T) {
		done := steps.begin("systemctl reboot → booted")
		took, err := g.Reboot(ctx)
		done()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rebooted in %v (%s)", took.Round(time.Millisecond), g.Ready)
		d.checkBoot(t)
		d.checkBound(t, false)
		d.checkRouted(t, true)
	})
}

// addBehind puts a host behind the peer, which becomes a gateway: a
// namespace on a veth pair with the peer, with an address in each of
// behindAddr's and otherAddr's subnets, the gateway's addresses in
// both, and its default route through the gateway.
func addBehind(t *testing.T, gw *qemuvm.Peer) {
	t.Helper()
	ns := gw.NS + "-behind"
	t.Cleanup(func() {
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			return
		}
		if err := netcmd.IP("netns", "del", ns); err != nil {
			t.Errorf("namespace %s: %v", ns, err)
		}
	})
	gw1, gw2 := behindAddr.Masked().Addr().Next().Next(), otherAddr.Masked().Addr().Next().Next()
	for _, c := range [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", gw.NS, "link", "add", "behind0", "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", gw.NS, "addr", "add", netip.PrefixFrom(gw1, behindAddr.Bits()).String(), "dev", "behind0"},
		{"-n", gw.NS, "addr", "add", netip.PrefixFrom(gw2, otherAddr.Bits()).String(), "dev", "behind0"},
		{"-n", gw.NS, "link", "set", "behind0", "up"},
		{"-n", ns, "addr", "add", behindAddr.String(), "dev", "eth0"},
		{"-n", ns, "addr", "add", otherAddr.String(), "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "route", "add", "default", "via", gw1.String()},
		{"netns", "exec", gw.NS, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	} {
		if err := netcmd.IP(c...); err != nil {
			t.Fatal(err)
		}
	}
}

// checkBoot checks the boot's order: the daemon was up (READY=1) before
// network-online.target, and the Ceph-like unit started after both and
// found the node's network.
func (d *daemon) checkBoot(t *testing.T) {
	t.Helper()
	const ts = "ActiveEnterTimestampMonotonic"
	out := d.run(t, fmt.Sprintf("for u in %s network-online.target; do echo \"$u $(systemctl show -p %s --value $u)\"; done; "+
		"echo \"%s $(systemctl show -p InactiveExitTimestampMonotonic --value %s) $(systemctl show -p ActiveState -p Result --value %s | paste -sd' ')\"",
		d.unit, ts, cephLike, cephLike, cephLike))
	at := map[string]int64{}
	var state string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			t.Fatalf("systemctl show: %q", out)
		}
		at[f[0]], _ = strconv.ParseInt(f[1], 10, 64)
		if f[0] == cephLike {
			state = strings.Join(f[2:], " ")
		}
	}
	ready, online, ceph := at[d.unit], at["network-online.target"], at[cephLike]
	t.Logf("boot (monotonic, s): %s up (READY=1) %.2f, network-online.target %.2f, %s started %.2f; %s",
		d.unit, float64(ready)/1e6, float64(online)/1e6, cephLike, float64(ceph)/1e6, state)
	if ready == 0 || online == 0 || ceph == 0 || !(ready <= online && online <= ceph) {
		t.Errorf("boot order: want %s up ≤ network-online.target ≤ %s's start\n%s\n%s", d.unit, cephLike, out,
			d.run(t, "journalctl --no-pager -b -o short-monotonic -u "+d.unit+" -u network.target -u network-online.target | grep -Ev ': EAL|TELEMETRY|tun_alloc|qdisc|rte flow' | head -60"))
	}
	if state != "success active" { // Result, then ActiveState
		t.Errorf("%s is %q, want success active: %s", cephLike, state, d.run(t, "journalctl --no-pager -o cat -b -u "+cephLike))
	}
	t.Logf("%s", strings.TrimSpace(d.run(t, "journalctl --no-pager -o cat -b -u "+cephLike+" | grep -v '^Start\\|^Finish'")))
}

// checkRouted checks the node's network on the interface with the NIC's
// name, the tap while the daemon runs (through) or the NIC itself: the
// addresses and routes, and that both hosts behind the gateway answer.
// Through the daemon, its kernel path must have counted the replies.
func (d *daemon) checkRouted(t *testing.T, through bool) {
	t.Helper()
	out := d.run(t, fmt.Sprintf("ip -br addr show dev %[1]s; ip route show dev %[1]s; cat /sys/class/net/%[1]s/address; ls -l /sys/class/net/%[1]s/device 2>&1 | sed 's/.*-> //'",
		nodeNIC))
	t.Logf("%s:\n%s", nodeNIC, out)
	for _, want := range []string{guestAddr.String(), nodeAddr6.String(), "default via " + peerAddr.Addr().String(),
		otherAddr.Masked().String() + " via " + peerAddr.Addr().String() + " proto static metric 50", d.g.MAC.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q", nodeNIC, want)
		}
	}
	// The tap has no device; the NIC's is the PCI device.
	if isNIC := strings.Contains(out, sysguest.NICAddr); isNIC == through {
		t.Errorf("%s is the PCI NIC: %v; want %v", nodeNIC, isNIC, !through)
	}
	var before metrics.Status
	if through {
		before = d.scrape(t)
	}
	const pings = 3
	for _, a := range []netip.Addr{behindAddr.Addr(), otherAddr.Addr()} {
		route := d.run(t, "ip route get "+a.String())
		if !strings.Contains(route, "via "+peerAddr.Addr().String()+" dev "+nodeNIC) {
			t.Errorf("route to %v: %s", a, route)
		}
		ctx, cancel := context.WithTimeout(d.ctx, cmdTimeout)
		out, code, err := d.g.Run(ctx, fmt.Sprintf("ping -c %d -i 0.3 -W 3 %s", pings, a))
		cancel()
		if err != nil || code != 0 {
			t.Errorf("ping %v behind the gateway (exit %d, %v):\n%s\n%s", a, code, err, out, d.diagnose(t))
		}
	}
	if through {
		// Each host's echo replies, and an ARP reply or none.
		if got := d.scrape(t).Services["other"].Packets - before.Services["other"].Packets; got < 2*pings {
			t.Errorf("the daemon's kernel path counted %d frames to the kernel, want the %d echo replies", got, 2*pings)
		}
	}
}
