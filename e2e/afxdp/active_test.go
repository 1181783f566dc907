package afxdp

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
)

// TestActiveRoCEXDP connects out of the af_xdp mode: roce-ping on the
// node's configuration dials an echo listener of a second cephdpdkd in
// the peer namespace. The peer's ARP reply goes to the node's kernel (the
// program passes ARP), so the endpoint must take the peer's MAC address
// from the kernel's neighbour table.
func TestActiveRoCEXDP(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	sfx := n.v.HostIf[len("cddh-"):]
	peerCfg := filepath.Join(n.dir, "peer.yaml")
	peerMetrics := daemonproc.FreeAddr(t)
	write(t, peerCfg, fmt.Sprintf(`
eal: {lcores: "0-1", no_huge: true, memory_mb: 512, file_prefix: cdd-xp-%s}
port: {name: xpeer, device: "net_af_packet8,iface=%s"}
%s
  listen: [{port: 7471, app: echo}]
metrics: {listen: "%s"}
shutdown: {drain_timeout: 1s}
`, sfx, n.v.PeerIf, roceYAML(n.peerIP), peerMetrics))
	peer := daemonproc.StartIn(t, n.v.NS, n.bin, peerCfg, peerMetrics)

	cfg := n.config(t, daemonproc.FreeAddr(t))
	out, err := exec.Command(n.bin, "roce-ping", "--config", cfg, "--run-dir", t.TempDir(),
		"--target", n.peerIP, "--port", "7471", "-n", "50", "-s", "1000", "--timeout", "20s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "50 sent, 50 received") {
		t.Fatalf("roce-ping from the af_xdp node: %v\n%s", err, out)
	}
	t.Logf("%s", out)

	// The node's kernel resolved the peer on the endpoint's behalf.
	neighs, err := netlink.NeighList(n.v.HostIndex, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range neighs {
		if e.IP.Equal(net.ParseIP(n.peerIP)) && e.HardwareAddr.String() == n.v.PeerMAC.String() {
			found = true
		}
	}
	if !found {
		t.Errorf("the node's kernel has no entry for %s (%v): %+v", n.peerIP, n.v.PeerMAC, neighs)
	}
	if log, err := peer.Stop(10 * time.Second); err != nil || !strings.Contains(log, "all mbufs returned") {
		t.Fatalf("peer stop: %v\n%s", err, log)
	}
}
