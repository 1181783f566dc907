//go:build linux

package rxeguest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/cephcluster"
)

// TestCephRDMAGuests checks the rdma_cm client configuration (CephRDMA)
// guest to guest, with no cephdpdkd in between: g1 runs a monitor and a
// memstore OSD over async+rdma, g2 runs rados with the conf CephClient
// writes for CephRDMA. The cluster is bootstrapped over TCP first, because
// its mon commands come from the host's `ceph` (Python, not in the image);
// then both daemons restart over RDMA, the OSD keeping its PGs (memstore
// saves them on a clean stop).
func TestCephRDMAGuests(t *testing.T) {
	start, b := guestTest(t, "boots two qemu guests and a Ceph cluster in one", CephAvailable, "ceph-mon", "ceph-osd", "ceph", "monmaptool", "ceph-authtool")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	gs := bootAll(ctx, t, b,
		guestSpec{"g1", g1Addr, []Option{withCephDaemons(), WithMemory(2048)}},
		guestSpec{"g2", g2Addr, []Option{WithCeph()}})
	g1, g2 := gs[0], gs[1]
	t.Logf("figure: g1 (daemons image) and g2 (client image) up %v after the start (boot %v, %v)",
		time.Since(start).Round(time.Millisecond), g1.BootTime.Round(time.Millisecond), g2.BootTime.Round(time.Millisecond))

	id := newIdentity(t)
	monIP := g1Addr.Addr().String()
	client := CephClient{
		FSID:    id.fsid,
		MonHost: fmt.Sprintf("[v2:%s:3300,v1:%s:6789]", monIP, monIP),
		Keyring: []byte(id.keyring("client.admin")),
	}
	daemons := client
	daemons.Options = map[string]string{
		"public_addr":  monIP,
		"cluster_addr": monIP,
		"mon_data":     GuestCephDir + "/mon/$cluster-$id",
		"osd_data":     GuestCephDir + "/osd/$cluster-$id",
		"mon_cluster_log_file": fmt.Sprintf("default=%s/log/cluster.log cluster=%[1]s/log/cluster.log",
			GuestCephDir),
		"auth_allow_insecure_global_id_reclaim": "false",
		"osd_objectstore":                       "memstore",
		"memstore_device_bytes":                 "536870912",
		// A clean stop saves memstore's objects and PGs to osd_data.
		"osd_fast_shutdown":                  "false",
		"osd_open_classes_on_start":          "false",
		"osd_op_num_shards":                  "1",
		"osd_op_num_threads_per_shard":       "2",
		"osd_pool_default_size":              "1",
		"osd_pool_default_min_size":          "1",
		"osd_pool_default_pg_autoscale_mode": "off",
		"osd_crush_chooseleaf_type":          "0",
		"mon_allow_pool_size_one":            "true",
		"mon_warn_on_pool_no_redundancy":     "false",
		"mon_mgr_mkfs_grace":                 "315360000",
		"mon_data_avail_warn":                "1",
		"mon_data_avail_crit":                "0",
		"paxos_propose_interval":             "0.1",
	}

	// g1: the cluster's files, over TCP first.
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("g1 conf", g1.SetupCeph(ctx, daemons))
	step("g1 mkfs keyring", g1.WriteFile(ctx, GuestCephDir+"/mkfs.keyring",
		[]byte(id.keyring("mon.", "client.admin", "osd.0"))))
	mkfs := fmt.Sprintf("cd %[1]s && rm -rf osd/ceph-0 && mkdir -p mon/ceph-a osd/ceph-0 && "+
		"printf '[osd.0]\\n\\tkey = %[2]s\\n' >osd/ceph-0/keyring && "+
		"monmaptool --create --fsid %[3]s --addv a '%[4]s' monmap >/dev/null && "+
		"ceph-mon --mkfs -i a --monmap monmap --keyring mkfs.keyring && "+
		"ceph-osd -i 0 --mkfs --no-mon-config --osd-uuid %[5]s --keyring osd/ceph-0/keyring 2>&1",
		GuestCephDir, id.keys["osd.0"], id.fsid, client.MonHost, id.osdUUID)
	t0 := time.Now()
	if out, code, err := g1.Run(ctx, mkfs); err != nil || code != 0 {
		t.Fatalf("g1 mkfs: exit %d, %v\n%s", code, err, out)
	}
	t.Logf("figure: g1 mon and osd mkfs: %v", time.Since(t0).Round(time.Millisecond))

	hostConf, hostKeyring := writeHostConf(t, client)
	ceph := func(ctx context.Context, args ...string) (string, error) {
		argv := append([]string{"netns", "exec", b.NS, "ceph", "--conf", hostConf, "--keyring", hostKeyring}, args...)
		cmd := exec.CommandContext(ctx, "ip", argv...)
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("ceph %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	monCmd := "ceph-mon -f -i a --keyring " + GuestCephDir + "/mon/ceph-a/keyring"
	osdCmd := "ceph-osd -f -i 0 --keyring " + GuestCephDir + "/osd/ceph-0/keyring"

	t0 = time.Now()
	if _, err := g1.Start(monCmd); err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer tcancel()
	if out, err := ceph(tctx, "osd", "new", id.osdUUID, "0"); err != nil || strings.TrimSpace(out) != "0" {
		t.Fatalf("osd new = %q, %v\n%s", out, err, g1Logs(ctx, g1))
	}
	if _, err := g1.Start(osdCmd); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"osd", "pool", "create", "test", "8", "8", "replicated"},
		{"osd", "pool", "application", "enable", "test", "rados"},
	} {
		if _, err := ceph(tctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	// A write from the host: the PGs exist and are active.
	probe := exec.CommandContext(tctx, "ip", "netns", "exec", b.NS, "rados", "--conf", hostConf,
		"--keyring", hostKeyring, "-p", "test", "put", "probe", "-")
	probe.Stdin = strings.NewReader("probe\n")
	probe.WaitDelay = 5 * time.Second
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("probe write over TCP: %v: %s\n%s", err, out, g1Logs(ctx, g1))
	}
	t.Logf("figure: g1 cluster over TCP up, pool written: %v", time.Since(t0).Round(time.Millisecond))

	// Both daemons again, over RDMA.
	t0 = time.Now()
	stop := "for p in ceph-osd ceph-mon; do kill -TERM $(pidof $p); i=0; " +
		"while pidof $p >/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; done; ! pidof ceph-osd ceph-mon"
	if out, code, err := g1.Run(ctx, stop); err != nil || code != 0 {
		t.Fatalf("stopping g1's daemons: exit %d, %v\n%s", code, err, out)
	}
	daemons.Transport = CephRDMA
	client.Transport = CephRDMA
	step("g1 RDMA conf", g1.SetupCeph(ctx, daemons))
	step("g2 RDMA conf", g2.SetupCeph(ctx, client))
	if _, err := g1.Start(monCmd); err != nil {
		t.Fatal(err)
	}
	// The monitor listens with rdma_cm on its msgr2 port: async+rdma is
	// in rdma_cm mode, not on TCP.
	lctx, lcancel := context.WithTimeout(ctx, time.Minute)
	defer lcancel()
	if err := g1.WaitListen(lctx, 3300); err != nil {
		t.Fatalf("%v\n%s", err, g1Logs(ctx, g1))
	}
	if _, err := g1.Start(osdCmd); err != nil {
		t.Fatal(err)
	}
	t.Logf("figure: g1 daemons restarted over RDMA, mon listening: %v", time.Since(t0).Round(time.Millisecond))

	rados := func(timeout time.Duration, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		t0 := time.Now()
		out, code, err := g2.Rados(ctx, args...)
		if err != nil || code != 0 {
			logs, _, _ := g2.Run(ctx, "tail -n 30 "+GuestCephDir+"/log/*.log")
			t.Fatalf("g2: rados %s: exit %d, %v\n%s\ng2 client logs:\n%s\n%s", strings.Join(args, " "),
				code, err, out, logs, g1Logs(ctx, g1))
		}
		t.Logf("figure: rados %s (RDMA, rdma_cm): %v", strings.Join(args, " "), time.Since(t0).Round(time.Millisecond))
		return out
	}
	if out := rados(90*time.Second, "lspools"); !strings.Contains(out, "test") {
		t.Errorf("rados lspools over RDMA = %q; want pool test", out)
	}
	data := make([]byte, 4<<20)
	rand.Read(data)
	sum := sha256.Sum256(data)
	step("g2 object", g2.WriteFile(ctx, "/tmp/obj.in", data))
	// The first op waits for the OSD to boot and its PGs to peer.
	sent := rxeCounter(ctx, t, g2, "sent_pkts")
	rados(3*time.Minute, "-p", "test", "put", "obj4m", "/tmp/obj.in")
	rcvd := rxeCounter(ctx, t, g2, "rcvd_pkts")
	rados(90*time.Second, "-p", "test", "get", "obj4m", "/tmp/obj.out")
	if got, err := g2.SHA256(ctx, "/tmp/obj.out"); err != nil || got != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 of the object read back over RDMA = %s, %v; want %x", got, err, sum)
	}
	// The 4 MiB went through rxe0 both ways, in packets of at most the
	// 1024-byte path MTU.
	const minPkts = 4 << 20 / 1024
	sent = rxeCounter(ctx, t, g2, "sent_pkts") - sent
	rcvd = rxeCounter(ctx, t, g2, "rcvd_pkts") - rcvd
	if sent < minPkts || rcvd < minPkts {
		t.Errorf("g2's rxe0 sent %d RoCE packets from before the put, received %d from before the get; want at least %d each",
			sent, rcvd, minPkts)
	}
	t.Logf("figure: g2's rxe0: %d RoCE packets sent from before the put, %d received from before the get", sent, rcvd)
	if out, _, err := g2.Run(ctx, "netstat -tn | grep -c "+monIP); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("g2 has TCP connections to g1: %q, %v", out, err)
	}
	t.Logf("figure: TestCephRDMAGuests end to end: %v", time.Since(start).Round(time.Millisecond))
}

// rxeCounter returns one of rxe0's hw_counters in g.
func rxeCounter(ctx context.Context, t *testing.T, g *Guest, name string) int {
	t.Helper()
	out, code, err := g.Run(ctx, "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/"+name)
	n, perr := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || code != 0 || perr != nil {
		t.Fatalf("%s: rxe0 counter %s: %q, exit %d, %v", g.Name, name, out, code, err)
	}
	return n
}

// g1Logs returns the ends of the daemons' logs and outputs in g1.
func g1Logs(ctx context.Context, g *Guest) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, _, _ := g.Run(ctx, "tail -n 15 "+GuestCephDir+"/log/*.log /tmp/cdd-bg*.out 2>&1")
	return "g1 logs:\n" + out
}

// identity is a throw-away cluster's fsid, OSD uuid and cephx keys.
type identity struct {
	fsid, osdUUID string
	keys          map[string]string
}

// newIdentity makes a fresh identity, as cephcluster does its cluster's.
func newIdentity(t *testing.T) identity {
	id := identity{keys: map[string]string{}}
	var err error
	if id.fsid, err = cephcluster.NewUUID(); err != nil {
		t.Fatal(err)
	}
	if id.osdUUID, err = cephcluster.NewUUID(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mon.", "client.admin", "osd.0"} {
		if id.keys[name], err = cephcluster.NewKey(); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

var caps = map[string][][2]string{
	"mon.":         {{"mon", "allow *"}},
	"client.admin": {{"mds", "allow *"}, {"mgr", "allow *"}, {"mon", "allow *"}, {"osd", "allow *"}},
	"osd.0":        {{"mgr", "allow profile osd"}, {"mon", "allow profile osd"}, {"osd", "allow *"}},
}

// keyring returns a keyring file holding the named entities.
func (id identity) keyring(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "[%s]\n\tkey = %s\n", n, id.keys[n])
		for _, c := range caps[n] {
			fmt.Fprintf(&b, "\tcaps %s = %q\n", c[0], c[1])
		}
	}
	return b.String()
}

// writeHostConf writes a TCP client conf and keyring for the host's ceph
// and rados, with every file they make in a temporary directory.
func writeHostConf(t *testing.T, c CephClient) (conf, keyring string) {
	dir := t.TempDir()
	conf, keyring = filepath.Join(dir, "ceph.conf"), filepath.Join(dir, "keyring")
	text := fmt.Sprintf(`[global]
fsid = %s
mon_host = %s
ms_type = async+posix
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
keyring = %s
run_dir = %[4]s
admin_socket = %[4]s/$name.$pid.asok
log_file = %[4]s/$name.$pid.log
client_mount_timeout = 60
`, c.FSID, c.MonHost, keyring, dir)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyring, c.Keyring, 0o600); err != nil {
		t.Fatal(err)
	}
	return conf, keyring
}
