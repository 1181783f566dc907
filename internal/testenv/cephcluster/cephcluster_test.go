//go:build linux

package cephcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
)

func TestNewKey(t *testing.T) {
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(k)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 28 || binary.LittleEndian.Uint16(b) != 1 || binary.LittleEndian.Uint16(b[10:]) != 16 {
		t.Fatalf("key %s = % x: want type 1, 16-byte secret", k, b)
	}
	// What ceph-authtool --gen-print-key prints starts the same way.
	if !strings.HasPrefix(k, "AQ") {
		t.Errorf("key %s does not start with AQ", k)
	}
	if path, err := exec.LookPath("ceph-authtool"); err == nil {
		kr := filepath.Join(t.TempDir(), "keyring")
		if err := writeKeyring(kr, entity{"client.x", k, [][2]string{{"mon", "allow r"}}}); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(path, "-l", kr).CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte(k)) || !bytes.Contains(out, []byte(`caps mon = "allow r"`)) {
			t.Errorf("ceph-authtool -l: %v\n%s", err, out)
		}
	}
}

// TestCluster brings a cluster up in a namespace of its own, moves a
// 4 MiB object through it, restarts the OSD both ways, and checks that
// nothing is left afterwards.
func TestCluster(t *testing.T) {
	testCluster(t, false)
}

// TestClusterWithMgr does the same with a manager.
func TestClusterWithMgr(t *testing.T) {
	testCluster(t, true)
}

func testCluster(t *testing.T, withMgr bool) {
	if testing.Short() {
		t.Skip("cephcluster: starts Ceph daemons; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("cephcluster: needs root for network namespaces")
	}
	harness.RequireCommands(t, "cephcluster: iproute2", "ip", "ss")
	ip := netip.MustParseAddr("198.18.0.1")
	ns := newNetNS(t, ip)
	testStart := time.Now()

	// Registered before Start, so it runs after the cluster's cleanup.
	var dir string
	t.Cleanup(func() {
		if dir == "" {
			return
		}
		if pids := procsUnder(dir); len(pids) > 0 {
			t.Errorf("processes left under %s after cleanup: %v", dir, pids)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", dir, err)
		}
	})
	c := Start(t, Options{NetNS: ns, IP: ip, WithMgr: withMgr})
	dir = c.Dir()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := c.Command(ctx, ns, name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	if s := run("ceph", "-s"); !strings.Contains(s, "HEALTH_OK") {
		t.Fatalf("ceph -s:\n%s", s)
	}
	checkListeners(t, ns, ip)

	tmp := t.TempDir()
	obj := make([]byte, 4<<20)
	if _, err := rand.Read(obj); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(tmp, "in")
	if err := os.WriteFile(in, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	roundTrip := func(name string) {
		t.Helper()
		run("rados", "-p", c.Pool(), "put", name, in)
		get(t, c, ctx, ns, name, obj)
	}
	roundTrip("obj1")
	// Env alone (CEPH_CONF) is enough for a client.
	if s := run("sh", "-c", "rados -p "+c.Pool()+" ls"); strings.TrimSpace(s) != "obj1" {
		t.Errorf("rados ls with CEPH_CONF only: %q", s)
	}

	// A clean stop keeps the data.
	t0 := time.Now()
	if err := c.StopOSD(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Since(t0)
	if err := c.StartOSD(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("StopOSD %v, StartOSD %v", stopped.Round(time.Millisecond), (time.Since(t0) - stopped).Round(time.Millisecond))
	get(t, c, ctx, ns, "obj1", obj)

	// A crash loses what was written since the last clean stop, but the
	// pool works again.
	roundTrip("unsaved")
	t0 = time.Now()
	oldPid := c.OSDPid()
	if err := c.KillOSD(); err != nil {
		t.Fatal(err)
	}
	killed := time.Since(t0)
	if c.OSDPid() != 0 {
		t.Fatal("OSDPid after KillOSD is not 0")
	}
	if err := c.StartOSD(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("KillOSD %v, StartOSD %v", killed.Round(time.Millisecond), (time.Since(t0) - killed).Round(time.Millisecond))
	if pid := c.OSDPid(); pid == 0 || pid == oldPid {
		t.Fatalf("OSD pid after restart %d (before %d)", pid, oldPid)
	}
	get(t, c, ctx, ns, "obj1", obj)
	if out, err := c.Command(ctx, ns, "rados", "-p", c.Pool(), "stat", "unsaved").CombinedOutput(); err == nil {
		t.Errorf("object written before the crash survived it: %s", out)
	}
	roundTrip("obj2")
	if err := c.WaitHealthOK(ctx); err != nil {
		t.Fatal(err)
	}

	for _, d := range []struct {
		name string
		pid  int
	}{{"mon", c.MonPid()}, {"osd", c.OSDPid()}, {"mgr", c.MgrPid()}} {
		if d.pid != 0 {
			t.Logf("%s RSS %s", d.name, rss(d.pid))
		}
	}
	if withMgr {
		if s := run("ceph", "-s"); !strings.Contains(s, "1 pools, 8 pgs") {
			t.Errorf("ceph -s with a mgr does not show the pool:\n%s", s)
		}
	}

	// Nothing of the host's Ceph setup was touched.
	for _, d := range []string{"/etc/ceph", "/var/lib/ceph", "/var/run/ceph", "/var/log/ceph"} {
		_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if info, err := e.Info(); err == nil && !e.IsDir() && info.ModTime().After(testStart) {
				t.Errorf("%s written during the test", path)
			}
			return nil
		})
	}
}

func get(t *testing.T, c *Cluster, ctx context.Context, ns, name string, want []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	if b, err := c.Command(ctx, ns, "rados", "-p", c.Pool(), "get", name, out).CombinedOutput(); err != nil {
		t.Fatalf("rados get %s: %v\n%s", name, err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatalf("%s: read back %d bytes that differ from the %d written", name, len(got), len(want))
	}
}

// checkListeners fails unless every listening socket in ns is bound to ip.
func checkListeners(t *testing.T, ns string, ip netip.Addr) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "ss", "-Hltun").CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		n++
		if local := f[4]; !strings.HasPrefix(local, ip.String()+":") {
			t.Errorf("listener not on %s: %s", ip, line)
		}
	}
	if n < 3 { // mon v2 + v1, OSD
		t.Errorf("only %d listeners in %s:\n%s", n, ns, out)
	}
}

func rss(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// newNetNS makes a namespace "cdc-XXXXXX" with ip/32 on its loopback,
// removed when the test ends.
func newNetNS(t *testing.T, ip netip.Addr) string {
	t.Helper()
	ns := "cdc-" + netcmd.Suffix(t)
	t.Cleanup(func() {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			if err := netcmd.IP("netns", "del", ns); err != nil {
				t.Errorf("%v", err)
			}
		}
	})
	if err := netcmd.IP("netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	if err := netcmd.IP("-n", ns, "addr", "add", netip.PrefixFrom(ip, 32).String(), "dev", "lo"); err != nil {
		t.Fatal(err)
	}
	if err := netcmd.IP("-n", ns, "link", "set", "dev", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	return ns
}
