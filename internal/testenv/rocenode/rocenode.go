//go:build linux

// Package rocenode sets up a whole Ceph node behind cephdpdkd on one
// machine, for the RoCE end-to-end tests and internal/tools/tryceph: a
// real Ceph cluster (mon and memstore OSD, on TCP) in a network namespace
// of its own, where cephdpdkd's kernel exception path puts the node's
// interface, and the daemon's DPDK port (net_af_packet on a veth) on a
// bridge in another namespace, where TCP clients sit (BridgeIP) and
// Soft-RoCE guests attach (BootClient). cephdpdkd terminates the guests'
// RoCE connections to NodeIP and bridges each to the Ceph daemon's TCP
// endpoint at the same address and port.
//
//	bridge namespace (BridgeIP: a TCP client's seat)
//	  ├─ tap ── qemu guest: rxe0, rados in rdma_cm mode (GuestIP)
//	  └─ veth ── root namespace: cephdpdkd's net_af_packet port
//	                             └─ kernel interface ── node namespace (NodeIP): ceph-mon, ceph-osd
//
// StartXDP sets up the same node with the daemon in the af_xdp port
// mode instead: the node's own interface stays the kernel's, and the
// daemon takes only the RoCE to NodeIP off it. Client drives a booted
// guest's rados and reports a failure.
//
// Everything it makes is removed by t's cleanup.
package rocenode

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/cephcluster"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/rxeguest"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

// The node's addresses, on a /24 of their own.
const (
	NodeIP   = "10.78.0.5"  // the Ceph daemons' and the RoCE endpoint's
	GuestIP  = "10.78.0.11" // BootClient's guest
	BridgeIP = "10.78.0.1"  // the bridge namespace: a TCP client's seat
)

// Node is a running node: the daemon in front, the cluster behind.
type Node struct {
	Daemon  *daemonproc.Proc
	Cluster *cephcluster.Cluster
	// Bridge is the network the daemon's port is on; TCP clients run in
	// Bridge.NS (Cluster.Command(ctx, Bridge.NS, ...)).
	Bridge *rxeguest.Switch
	// NS is the node namespace, where the cluster runs and the daemon
	// puts its kernel interface Ifname (StartXDP: where the node's own
	// interface Ifname is).
	NS     *testenv.NetNS
	Ifname string
	// PortIf is the veth end the daemon's net_af_packet port binds
	// (StartXDP: Ifname, whose AF_XDP sockets the daemon opens).
	PortIf string
	// DaemonNS is the namespace the daemon runs in: "" (this process's)
	// for Start, NS.Name for StartXDP.
	DaemonNS string

	// What the daemon was started with, to start it again.
	Bin, ConfigPath, MetricsAddr string
}

// Start starts the daemon (binary bin) and the cluster behind it; logf
// reports each step. It fails t on any error, and skips it when the Ceph
// binaries or root are missing.
func Start(t harness.TB, bin string, logf func(format string, args ...any)) *Node {
	t.Helper()
	// Not rxeguest.NewSwitch: the node works for TCP clients on a machine
	// that cannot run guests.
	br := qemuvm.NewSwitch(t, rxeguest.NSPrefix, rxeguest.VethPrefix, netip.MustParsePrefix(BridgeIP+"/24"))
	hostIf, err := br.AddVeth(t)
	if err != nil {
		t.Fatal(err)
	}
	node := testenv.NewNetNS(t)
	sfx := node.Name[len(node.Name)-6:]
	n := &Node{Bridge: br, NS: node, Ifname: "cddr" + sfx, PortIf: hostIf, Bin: bin,
		MetricsAddr: daemonproc.FreeAddr(t), ConfigPath: filepath.Join(t.TempDir(), "roce-node.yaml")}
	n.writeConfig(t, sfx, fmt.Sprintf(`port:
  name: rnode
  device: "net_af_packet1,iface=%[1]s,blocksz=4096,framesz=2048,framecnt=2048"
services:
  - {name: mon, ring_size: 1024, priority: 200, consumer: {type: kernel}}
  - {name: osd, ring_size: 2048, priority: 100, consumer: {type: kernel}}
  - {name: roce, ring_size: 4096, consumer: {type: roce}}
  - {name: other, ring_size: 1024, priority: 150, consumer: {type: kernel}}
%[5]s
kernel: {interface: %[2]s, netns: %[3]s, addresses: [%[4]s/24]}`, hostIf, n.Ifname, node.Name, NodeIP, cephcluster.ClassifyYAML))
	n.Daemon = daemonproc.Start(t, bin, n.ConfigPath, n.MetricsAddr)
	logf("daemon up: net_af_packet on %s (bridge %s), kernel interface %s in %s", hostIf, br.NS, n.Ifname, node.Name)
	n.startCluster(t, logf)
	return n
}

// StartXDP is Start with the daemon in the af_xdp port mode: the node
// namespace's own interface Ifname (= PortIf), with NodeIP, is a veth
// whose other end is on the bridge; the kernel keeps it, and the daemon,
// running in the node namespace (DaemonNS), attaches its XDP program to it
// in generic mode and takes only the RoCEv2 to NodeIP. t's cleanup runs
// restore-nic, which detaches the program.
//
//	bridge namespace (BridgeIP)
//	  ├─ tap ── qemu guest: rxe0, rados in rdma_cm mode (GuestIP)
//	  └─ veth ── node namespace: Ifname (NodeIP), XDP ── cephdpdkd's AF_XDP socket
//	                                              └─ kernel: ceph-mon, ceph-osd
func StartXDP(t harness.TB, bin string, logf func(format string, args ...any)) *Node {
	t.Helper()
	br := qemuvm.NewSwitch(t, rxeguest.NSPrefix, rxeguest.VethPrefix, netip.MustParsePrefix(BridgeIP+"/24"))
	node := testenv.NewNetNS(t)
	sfx := node.Name[len(node.Name)-6:]
	n := &Node{Bridge: br, NS: node, Ifname: "cddx" + sfx, DaemonNS: node.Name, Bin: bin,
		MetricsAddr: daemonproc.FreeAddr(t), ConfigPath: filepath.Join(t.TempDir(), "roce-node.yaml")}
	n.PortIf = n.Ifname
	if err := br.AddNSVeth(node.Name, n.Ifname, netip.MustParsePrefix(NodeIP+"/24")); err != nil {
		t.Fatal(err)
	}
	n.writeConfig(t, sfx, fmt.Sprintf(`port:
  name: rnode
  mode: af_xdp
  af_xdp: {interface: %s, attach: generic}
services:
  - {name: roce, ring_size: 4096, consumer: {type: roce}}
  - {name: other}
default_service: other`, n.Ifname))
	// After the daemon's stop, before the namespace goes: detach the
	// program, as the unit's ExecStopPost does.
	daemonproc.RestoreNICAtEnd(t, node.Name, bin, n.ConfigPath, n.Ifname)
	n.Daemon = daemonproc.StartIn(t, node.Name, bin, n.ConfigPath, n.MetricsAddr)
	logf("daemon up: af_xdp (generic) on %s in %s, bridged to %s", n.Ifname, node.Name, br.NS)
	n.startCluster(t, logf)
	return n
}

// writeConfig writes the daemon's configuration: port, the port's part
// (port, services, classification, kernel), and the rest, common to
// both modes.
func (n *Node) writeConfig(t harness.TB, sfx, port string) {
	t.Helper()
	cfg := fmt.Sprintf(`
eal: {lcores: "0-1", no_huge: true, memory_mb: 1024, file_prefix: cdd-roce-%[1]s}
%[2]s
roce:
  service: roce
  address: %[3]s
  send_buffers: 32
  recv_buffers: 64
  max_sessions: 16
  memory_mb: 256
  bridge: {}
metrics: {listen: "%[4]s"}
shutdown: {drain_timeout: 1s}
`, sfx, port, NodeIP, n.MetricsAddr)
	if err := os.WriteFile(n.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The EAL leaves its runtime directory (12 MiB on /run) behind
	// even after a clean stop: remove it once the daemon is gone, which
	// the daemon's own cleanup, registered later, sees to first.
	t.Cleanup(func() {
		if err := os.RemoveAll("/var/run/dpdk/cdd-roce-" + sfx); err != nil {
			t.Error(err)
		}
	})
}

func (n *Node) startCluster(t harness.TB, logf func(format string, args ...any)) {
	t.Helper()
	n.Cluster = cephcluster.Start(t, cephcluster.Options{NetNS: n.NS.Name, IP: netip.MustParseAddr(NodeIP)})
	logf("cluster up on %s in the node namespace, daemons on TCP", NodeIP)
}

// StartDaemon starts the daemon again with what it was started with, in
// its namespace, as systemd would after it died or was stopped, and sets
// n.Daemon.
func (n *Node) StartDaemon(t harness.TB) *daemonproc.Proc {
	t.Helper()
	n.Daemon = daemonproc.StartIn(t, n.DaemonNS, n.Bin, n.ConfigPath, n.MetricsAddr)
	return n.Daemon
}

// XDPAttached reports the XDP program attached to the daemon's
// interface, which in the af_xdp mode is in the node namespace.
func (n *Node) XDPAttached() (xdp.Attachment, error) { return XDPAttachedIn(n.NS, n.PortIf) }

// XDPAttachedIn reports the XDP program attached to interface ifname in
// namespace ns: where an af_xdp daemon's interface is, the node's own.
func XDPAttachedIn(ns *testenv.NetNS, ifname string) (xdp.Attachment, error) {
	var a xdp.Attachment
	err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		a, err = xdp.Attached(ifc.Index)
		return err
	})
	return a, err
}

// BootClient boots a Soft-RoCE guest named name at GuestIP on the
// node's bridge, with Debian's rados configured as a client of the
// cluster in rdma_cm mode (rxeguest.CephRDMA): its Ceph traffic reaches
// the node only through the daemon's RoCE bridge. Only one guest fits
// at GuestIP. t's cleanup kills it.
func (n *Node) BootClient(ctx context.Context, t harness.TB, name string) (*rxeguest.Guest, error) {
	t.Helper()
	g, err := rxeguest.Boot(ctx, t, n.Bridge, name, netip.MustParsePrefix(GuestIP+"/24"), rxeguest.WithCeph())
	if err != nil {
		return nil, err
	}
	conf, err := rxeguest.CephClientFromFiles(n.Cluster.ConfPath(), n.Cluster.KeyringPath(), rxeguest.CephRDMA)
	if err != nil {
		return nil, err
	}
	if err := g.SetupCeph(ctx, conf); err != nil {
		return nil, err
	}
	return g, nil
}
