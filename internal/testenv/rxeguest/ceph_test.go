//go:build linux

package rxeguest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/cephcluster"
)

func TestCephConf(t *testing.T) {
	dir := t.TempDir()
	confPath := filepath.Join(dir, "ceph.conf")
	keyringPath := filepath.Join(dir, "keyring")
	conf := `# a cluster's conf
[global]
fsid = 0b3c5b3e-5e4e-4f43-9b57-5a3e3c1d7f10
mon host = [v2:10.77.0.1:3300,v1:10.77.0.1:6789]   ; trailing comment
log_file = /somewhere/$name.log
[client]
fsid = not-this-one
`
	keyring := "[client.admin]\n\tkey = AQBm\n"
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyringPath, []byte(keyring), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := CephClientFromFiles(confPath, keyringPath, CephTCP)
	if err != nil {
		t.Fatal(err)
	}
	if c.FSID != "0b3c5b3e-5e4e-4f43-9b57-5a3e3c1d7f10" || c.MonHost != "[v2:10.77.0.1:3300,v1:10.77.0.1:6789]" ||
		string(c.Keyring) != keyring {
		t.Fatalf("CephClientFromFiles = %+v", c)
	}
	if _, err := CephClientFromFiles(keyringPath, keyringPath, CephTCP); err == nil {
		t.Error("a conf without fsid and mon_host was accepted")
	}

	settings := func(conf string) map[string]string { return parseConfSection([]byte(conf), "global") }
	tcp := settings(c.Conf())
	if tcp["ms_type"] != "async+posix" || tcp["fsid"] != c.FSID || tcp["mon_host"] != c.MonHost ||
		tcp["keyring"] != GuestCephKeyring || tcp["ms_async_rdma_cm"] != "" {
		t.Errorf("TCP conf:\n%s", c.Conf())
	}
	if strings.Contains(c.Conf(), "/somewhere") {
		t.Errorf("the cluster's paths leaked into the guest's conf:\n%s", c.Conf())
	}

	c.Transport = CephRDMA
	c.Options = map[string]string{"debug ms": "1/5", "ms_async_rdma_receive_buffers": "512"}
	rdma := settings(c.Conf())
	for _, s := range CephRDMASettings {
		want := s[1]
		if s[0] == "ms_async_rdma_receive_buffers" {
			want = "512"
		}
		if rdma[s[0]] != want {
			t.Errorf("RDMA conf: %s = %q, want %q", s[0], rdma[s[0]], want)
		}
	}
	if rdma["debug_ms"] != "1/5" {
		t.Errorf("RDMA conf: debug_ms = %q", rdma["debug_ms"])
	}
	// Every setting once: Ceph would take only one of two.
	seen := map[string]bool{}
	for _, line := range strings.Split(c.Conf(), "\n") {
		k, _, ok := strings.Cut(line, " = ")
		if ok && seen[k] {
			t.Errorf("%s set twice:\n%s", k, c.Conf())
		}
		seen[k] = true
	}
}

// TestCephClient boots a guest with the Ceph client image next to a
// cluster (mon and memstore OSD) in the bridge's namespace, on the bridge's
// own address, and runs Debian's rados in the guest over TCP against it:
// lspools, a 4 MiB put and get checked by SHA-256 in the guest and on the
// host, and a command the guest's timeout ends. It logs the timings.
func TestCephClient(t *testing.T) {
	start, b := guestTest(t, "boots a qemu guest and a Ceph cluster", CephAvailable, "ceph-mon", "ceph-osd", "ceph", "monmaptool")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// The guest boots while the cluster starts. Start may end the test
	// (Fatal, Skip): the deferred wait keeps Boot from outliving it.
	var (
		g       *Guest
		bootErr error
		booted  = make(chan struct{})
	)
	go func() {
		defer close(booted)
		g, bootErr = Boot(ctx, t, b, "c1", g1Addr, WithCeph())
	}()
	defer func() { <-booted }()
	// A longer bound than the default: the guest boots on the same CPUs.
	c := cephcluster.Start(t, cephcluster.Options{NetNS: b.NS, IP: bridgeAddr.Addr(), Timeout: 2 * time.Minute})
	clusterUp := time.Since(start)
	<-booted
	if bootErr != nil {
		t.Fatal(bootErr)
	}
	t.Logf("figure: cluster up %v, guest with the Ceph image up %v (boot %v) after the start",
		clusterUp.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), g.BootTime.Round(time.Millisecond))

	client, err := CephClientFromFiles(c.ConfPath(), c.KeyringPath(), CephTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetupCeph(ctx, client); err != nil {
		t.Fatal(err)
	}
	rados := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		t0 := time.Now()
		out, code, err := g.Rados(ctx, args...)
		if err != nil || code != 0 {
			logs, _, _ := g.Run(ctx, "tail -n 20 "+GuestCephDir+"/log/*.log")
			t.Fatalf("rados %s: exit %d, %v\n%s\nclient logs:\n%s", strings.Join(args, " "), code, err, out, logs)
		}
		t.Logf("figure: rados %s (TCP): %v", strings.Join(args, " "), time.Since(t0).Round(time.Millisecond))
		return out
	}

	if out := rados("lspools"); !strings.Contains("\n"+out, "\n"+c.Pool()+"\n") {
		t.Errorf("rados lspools = %q; want pool %s", out, c.Pool())
	}

	data := make([]byte, 4<<20)
	rand.Read(data)
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	t0 := time.Now()
	if err := g.WriteFile(ctx, "/tmp/obj.in", data); err != nil {
		t.Fatal(err)
	}
	t.Logf("figure: WriteFile of 4 MiB: %v", time.Since(t0).Round(time.Millisecond))
	rados("-p", c.Pool(), "put", "obj4m", "/tmp/obj.in")
	if out := rados("-p", c.Pool(), "stat", "obj4m"); !strings.Contains(out, "size 4194304") {
		t.Errorf("rados stat = %q; want size 4194304", out)
	}
	rados("-p", c.Pool(), "get", "obj4m", "/tmp/obj.out")
	t0 = time.Now()
	if got, err := g.SHA256(ctx, "/tmp/obj.out"); err != nil || got != want {
		t.Errorf("sha256 of the object read back in the guest = %s, %v; want %s", got, err, want)
	}
	t.Logf("figure: sha256sum of 4 MiB in the guest: %v", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if got, err := g.ReadFile(ctx, "/tmp/obj.out"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadFile of the object read back: %d bytes, %v; want the 4 MiB written", len(got), err)
	}
	t.Logf("figure: ReadFile of 4 MiB: %v", time.Since(t0).Round(time.Millisecond))

	// The object is in the cluster, not only in the guest.
	hctx, hcancel := context.WithTimeout(ctx, 60*time.Second)
	defer hcancel()
	if got, err := c.Command(hctx, b.NS, "rados", "-p", c.Pool(), "get", "obj4m", "-").Output(); err != nil || !bytes.Equal(got, data) {
		t.Errorf("host rados get: %d bytes, %v; want the 4 MiB the guest put", len(got), err)
	}

	// The files through the share both ways, and the conf as installed.
	local := filepath.Join(t.TempDir(), "ceph.conf")
	if err := g.CopyOut(ctx, GuestCephConf, local); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(local); string(got) != client.Conf() {
		t.Errorf("guest's ceph.conf = %q; want %q", got, client.Conf())
	}
	if err := g.CopyIn(ctx, local, "/tmp/in/sub/conf"); err != nil {
		t.Fatal(err)
	}
	if out, code, err := g.Run(ctx, "cmp /tmp/in/sub/conf "+GuestCephConf); err != nil || code != 0 {
		t.Errorf("CopyIn: cmp = %d, %v: %s", code, err, out)
	}
	if left, _ := filepath.Glob(filepath.Join(g.ShareDir(), ".xfer-*")); len(left) != 0 {
		t.Errorf("transfer files left in the share: %v", left)
	}

	// No monitor at that address: the guest's timeout ends rados a second
	// before the deadline, and the console goes on.
	short, scancel := context.WithTimeout(ctx, 4*time.Second)
	defer scancel()
	t0 = time.Now()
	out, code, err := g.Rados(short, "--mon_host", "10.77.0.99", "lspools")
	if err != nil || code != 137 {
		t.Errorf("rados against no monitor = %d, %v; want 137 (killed by timeout)\n%s", code, err, out)
	}
	if d := time.Since(t0); d > 4*time.Second {
		t.Errorf("rados against no monitor returned after %v", d)
	}
	if _, err := g.ReadFile(ctx, "/nonexistent"); err == nil {
		t.Error("ReadFile of a missing file succeeded")
	}
}
