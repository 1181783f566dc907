package afxdp

import (
	"errors"
	"golang.org/x/sys/unix"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

func TestCheckKind(t *testing.T) {
	for _, tc := range []struct{ kind, want string }{
		{"device", ""},
		{"veth", ""},
		{"bond", "interface if0 is a bond: AF_XDP binds to one device's queues"},
		{"team", "interface if0 is a team device: AF_XDP binds to one device's queues"},
		{"vlan", "interface if0 is a VLAN sub-interface: name its parent"},
		{"macvlan", "interface if0 is a macvlan: name the NIC it sits on"},
		{"ipvlan", "interface if0 is an ipvlan: name the NIC it sits on"},
		{"bridge", "interface if0 is a bridge: name the NIC enslaved to it"},
		{"tun", `interface if0 is of kind "tun", which is not supported`},
	} {
		err := checkKind("if0", tc.kind)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkKind(%s) = %v, want %q", tc.kind, err, tc.want)
		}
	}
}

func TestRxQueues(t *testing.T) {
	sysfs := t.TempDir()
	mk := func(name string, queues ...string) {
		for _, q := range queues {
			if err := os.MkdirAll(filepath.Join(sysfs, "class/net", name, "queues", q), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("nic4", "rx-0", "rx-1", "rx-2", "rx-3", "tx-0", "tx-1", "tx-2", "tx-3")
	mk("txonly", "tx-0")
	for _, tc := range []struct {
		name string
		want int
		err  bool
	}{{"nic4", 4, false}, {"txonly", 0, true}, {"gone", 0, true}} {
		n, err := rxQueues(sysfs, tc.name)
		if n != tc.want || (err != nil) != tc.err {
			t.Errorf("rxQueues(%s) = %d, %v; want %d", tc.name, n, err, tc.want)
		}
	}
}

func TestInspect(t *testing.T) {
	if _, err := Inspect("cddx-none0"); !errors.Is(err, ErrNoInterface) {
		t.Errorf("Inspect(missing) = %v, want ErrNoInterface", err)
	}
	v := testenv.NewVethNS(t, netip.Prefix{})
	ifc, err := Inspect(v.HostIf)
	if err != nil {
		t.Fatal(err)
	}
	if ifc.Index != v.HostIndex || ifc.Kind != "veth" || ifc.RxQueues < 1 || ifc.MTU != 1500 {
		t.Errorf("Inspect(%s) = %+v", v.HostIf, ifc)
	}
	br := "cddxbr-" + strconv.Itoa(os.Getpid()%100000)
	if err := netcmd.IP("link", "add", br, "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netcmd.IP("link", "del", br) })
	if _, err := Inspect(br); err == nil || !strings.Contains(err.Error(), "a bridge") {
		t.Errorf("Inspect(bridge) = %v, want a refusal", err)
	}
}

func TestTakeReuseRelease(t *testing.T) {
	v := testenv.NewVethNS(t, netip.Prefix{})
	ifc, err := Inspect(v.HostIf)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, reused, err := Take(pmd.LoadXDP, dir, "", ifc, xdp.Generic)
	if err != nil || reused {
		t.Fatalf("first Take: reused %v, %v", reused, err)
	}
	id := p.ID()
	p.Close()
	t.Cleanup(func() { xdp.Detach(ifc.Index, xdp.Generic) })

	// A restart takes the same program back.
	p, reused, err = Take(pmd.LoadXDP, dir, "", ifc, xdp.Generic)
	if err != nil || !reused || p.ID() != id {
		t.Fatalf("second Take: reused %v, id %d (want %d), %v", reused, p.ID(), id, err)
	}
	p.Close()
	// Another mode would mean detaching: refused.
	if _, _, err := Take(pmd.LoadXDP, dir, "", ifc, xdp.Native); err == nil || !strings.Contains(err.Error(), "restore-nic") {
		t.Errorf("Take in native mode = %v, want a refusal pointing at restore-nic", err)
	}
	// Another run directory does not know it: foreign, and kept.
	_, _, err = Take(pmd.LoadXDP, t.TempDir(), "", ifc, xdp.Generic)
	var fe *xdp.ForeignError
	if !errors.As(err, &fe) || fe.ID != id || !fe.Unrecorded || !strings.Contains(err.Error(), "does not record it") {
		t.Errorf("Take from another run directory = %v, want a ForeignError for %d", err, id)
	}
	if released, err := Release(t.TempDir(), ifc.Name); released || err != nil {
		t.Errorf("Release without a record = %v, %v; want nothing done", released, err)
	}
	if a, _ := xdp.Attached(ifc.Index); a.ID != id {
		t.Fatalf("program %d attached, want %d kept", a.ID, id)
	}
	if released, err := Release(dir, ifc.Name); !released || err != nil {
		t.Fatalf("Release = %v, %v", released, err)
	}
	if a, _ := xdp.Attached(ifc.Index); a.ID != 0 {
		t.Errorf("program %d still attached after Release", a.ID)
	}
	if _, err := os.Stat(recordPath(dir, ifc.Name)); !os.IsNotExist(err) {
		t.Errorf("record left after Release: %v", err)
	}
}

// TestTakePinned: under a BPF file system the program is attached
// through a pinned link, which netlink (net_af_xdp's close) cannot
// detach; a restart takes it back, and Release removes the pin, which
// detaches it.
func TestTakePinned(t *testing.T) {
	v := testenv.NewVethNS(t, netip.Prefix{})
	ifc, err := Inspect(v.HostIf)
	if err != nil {
		t.Fatal(err)
	}
	fs := t.TempDir()
	if err := unix.Mount("bpf", fs, "bpf", 0, ""); err != nil {
		t.Fatalf("mount bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(fs, unix.MNT_DETACH) })
	dir := t.TempDir()
	p, reused, err := Take(pmd.LoadXDP, dir, fs, ifc, xdp.Native)
	if err != nil || reused {
		t.Fatalf("first Take: reused %v, %v", reused, err)
	}
	id := p.ID()
	p.Close()
	pin := PinPath(fs, ifc.Name)
	if _, err := os.Stat(pin); err != nil {
		t.Fatalf("no pinned link: %v", err)
	}
	if err := xdp.Detach(ifc.Index, xdp.Native); err == nil {
		t.Fatal("netlink detached the program its pinned link holds")
	}
	p, reused, err = Take(pmd.LoadXDP, dir, fs, ifc, xdp.Native)
	if err != nil || !reused || p.ID() != id {
		t.Fatalf("second Take: reused %v, id %d (want %d), %v", reused, p.ID(), id, err)
	}
	p.Close()
	if released, err := Release(dir, ifc.Name); !released || err != nil {
		t.Fatalf("Release = %v, %v", released, err)
	}
	if a, _ := xdp.Attached(ifc.Index); a.ID != 0 {
		t.Errorf("program %d still attached after Release", a.ID)
	}
	if _, err := os.Stat(pin); !os.IsNotExist(err) {
		t.Errorf("pin left after Release: %v", err)
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	f, err := Lock(dir, "if0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir, "if0"); err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("second Lock = %v, want a refusal naming pid %d", err, os.Getpid())
	}
	if g, err := Lock(dir, "if1"); err != nil {
		t.Errorf("Lock of another interface: %v", err)
	} else {
		g.Close()
	}
	f.Close()
	if g, err := Lock(dir, "if0"); err != nil {
		t.Errorf("Lock after release: %v", err)
	} else {
		g.Close()
	}
}
