package nicbind_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind/nicbindtest"
)

const (
	pciA = "0000:3b:00.0"
	pciB = "0000:3b:00.1"
)

// setup is a tree with two ixgbe ports (ens1f0 with an IOMMU group,
// ens1f1 without), a non-network device, and a System over it.
func setup(t *testing.T, activity map[string]nicbind.Activity) (*nicbindtest.Tree, *nicbind.System, *[]string) {
	t.Helper()
	tr := nicbindtest.New(t)
	tr.AddNIC(t, nicbindtest.NIC{PCI: pciA, Vendor: "8086", Device: "10fb", Driver: "ixgbe", Interface: "ens1f0", IOMMUGroup: "42"})
	tr.AddNIC(t, nicbindtest.NIC{PCI: pciB, Vendor: "8086", Device: "10fb", Driver: "ixgbe", Interface: "ens1f1"})
	tr.AddNIC(t, nicbindtest.NIC{PCI: "0000:00:1f.2", Vendor: "8086", Device: "a102", Class: "010601", Driver: "ahci"})
	var linkUp []string
	s := &nicbind.System{
		Sysfs:  tr.Root,
		RunDir: filepath.Join(t.TempDir(), "run"),
		Activity: func(ifname string) (nicbind.Activity, error) {
			return activity[ifname], nil
		},
		LoadModule:    tr.LoadModule,
		SetLinkUp:     func(ifname string) error { linkUp = append(linkUp, ifname); return nil },
		Network:       tr.Network,
		SetNetwork:    tr.SetNetwork,
		WriteFile:     tr.Write,
		Timeout:       time.Second,
		AppearTimeout: 200 * time.Millisecond,
	}
	return tr, s, &linkUp
}

func TestBind(t *testing.T) {
	busy := map[string]nicbind.Activity{
		"ens1f0": {Addresses: []string{"10.0.0.5/24"}, Routes: []string{"10.0.0.0/24"}},
	}
	tests := []struct {
		name     string
		activity map[string]nicbind.Activity
		up       bool // ens1f0 up
		noiommu  bool // vfio's no-IOMMU mode on
		req      nicbind.Request
		want     string // error substring; "" for success
	}{
		{name: "vfio by interface", req: nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"}},
		{name: "vfio by pci, short form", req: nicbind.Request{Driver: nicbind.VFIO, PCI: "3B:00.0"}},
		{name: "uio without iommu", req: nicbind.Request{Driver: nicbind.UIO, Interface: "ens1f1"}},
		{name: "vfio no-IOMMU mode", noiommu: true, req: nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f1"}},
		{name: "vfio without iommu", req: nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f1"},
			want: "0000:3b:00.1 has no IOMMU group"},
		{name: "up", up: true, req: nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"},
			want: "interface ens1f0 is active: it is up"},
		{name: "addresses and routes", activity: busy, req: nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"},
			want: "it has addresses 10.0.0.5/24, routes 10.0.0.0/24"},
		{name: "force", up: true, activity: busy, req: nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0", Force: true}},
		{name: "unknown interface", req: nicbind.Request{Driver: nicbind.VFIO, Interface: "eth9"}, want: "eth9: no such interface"},
		{name: "unknown pci", req: nicbind.Request{Driver: nicbind.VFIO, PCI: "0000:99:00.0"}, want: "PCI device 0000:99:00.0"},
		{name: "bad driver", req: nicbind.Request{Driver: "igb_uio", Interface: "ens1f0"}, want: `driver "igb_uio"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, s, _ := setup(t, tt.activity)
			if tt.up {
				os.WriteFile(filepath.Join(tr.Root, "class/net/ens1f0/flags"), []byte("0x1003\n"), 0o644)
				os.WriteFile(filepath.Join(tr.Root, "class/net/ens1f0/operstate"), []byte("up\n"), 0o644)
			}
			if tt.noiommu {
				tr.SetNoIOMMU(t, true)
			}
			st, err := s.Bind("node0", tt.req)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Bind: %v; want an error with %q", err, tt.want)
				}
				if len(tr.Writes) != 0 {
					t.Errorf("refused, yet wrote %q", tr.Writes)
				}
				if _, err := os.Stat(s.StatePath("node0")); err == nil {
					t.Error("refused, yet wrote a state file")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tr.Driver(st.PCI); got != tt.req.Driver {
				t.Errorf("driver %q, want %q", got, tt.req.Driver)
			}
			if st.OrigDriver != "ixgbe" || st.Interface == "" || tr.HasInterface(st.Interface) {
				t.Errorf("state %+v; interface present: %v", st, tr.HasInterface(st.Interface))
			}
			if st.Up != tt.up {
				t.Errorf("state up %v, want %v", st.Up, tt.up)
			}
			want := []string{
				"bus/pci/devices/" + st.PCI + "/driver/unbind " + st.PCI,
				"bus/pci/devices/" + st.PCI + "/driver_override " + tt.req.Driver,
				"bus/pci/drivers_probe " + st.PCI,
			}
			if strings.Join(tr.Writes, "\n") != strings.Join(want, "\n") {
				t.Errorf("writes\n%s\nwant\n%s", strings.Join(tr.Writes, "\n"), strings.Join(want, "\n"))
			}
			// Binding again changes nothing.
			tr.Writes = nil
			if _, err := s.Bind("node0", tt.req); err != nil || len(tr.Writes) != 0 {
				t.Errorf("second Bind: %v, writes %q", err, tr.Writes)
			}
		})
	}
}

func TestRestore(t *testing.T) {
	tests := []struct {
		name   string
		driver string
		up     bool
	}{
		{"vfio", nicbind.VFIO, false},
		{"uio", nicbind.UIO, false},
		{"was up", nicbind.VFIO, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, s, linkUp := setup(t, nil)
			if tt.up {
				os.WriteFile(filepath.Join(tr.Root, "class/net/ens1f0/flags"), []byte("0x1003\n"), 0o644)
			}
			if _, err := s.Bind("node0", nicbind.Request{Driver: tt.driver, Interface: "ens1f0", Force: tt.up}); err != nil {
				t.Fatal(err)
			}
			st, err := s.Restore(s.StatePath("node0"))
			if err != nil {
				t.Fatal(err)
			}
			if st == nil || tr.Driver(pciA) != "ixgbe" || !tr.HasInterface("ens1f0") {
				t.Fatalf("after Restore: state %+v, driver %q, interface %v", st, tr.Driver(pciA), tr.HasInterface("ens1f0"))
			}
			if b, _ := os.ReadFile(filepath.Join(tr.Root, "bus/pci/devices", pciA, "driver_override")); string(b) != "(null)\n" {
				t.Errorf("driver_override %q after Restore", b)
			}
			if _, err := os.Stat(s.StatePath("node0")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state file left: %v", err)
			}
			if want := map[bool]string{true: "ens1f0", false: ""}[tt.up]; strings.Join(*linkUp, ",") != want {
				t.Errorf("set up %q, want %q", *linkUp, want)
			}
			// Idempotent: a second Restore does nothing.
			tr.Writes = nil
			if st, err := s.Restore(s.StatePath("node0")); st != nil || err != nil || len(tr.Writes) != 0 {
				t.Errorf("second Restore: %+v, %v, writes %q", st, err, tr.Writes)
			}
		})
	}
}

func TestRestoreNoState(t *testing.T) {
	tr, s, _ := setup(t, nil)
	st, err := s.Restore(s.StatePath("node0"))
	if st != nil || err != nil || len(tr.Writes) != 0 {
		t.Fatalf("Restore without a state file: %+v, %v, writes %q", st, err, tr.Writes)
	}
}

// TestCrashAfterUnbind stops a bind after the unbind: the state file,
// written first, still lets Restore bring the device back, and a new
// Bind keeps the original driver it recorded.
func TestCrashAfterUnbind(t *testing.T) {
	for _, failOn := range []string{"driver_override", "drivers_probe"} {
		t.Run(failOn, func(t *testing.T) {
			tr, s, _ := setup(t, nil)
			var statePresent bool
			tr.FailWrite = func(rel string) error {
				if strings.HasSuffix(rel, "unbind") {
					_, err := os.Stat(s.StatePath("node0"))
					statePresent = err == nil
				}
				if strings.HasSuffix(rel, failOn) {
					return errors.New("injected failure")
				}
				return nil
			}
			_, err := s.Bind("node0", nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"})
			if err == nil || !strings.Contains(err.Error(), "restore-nic") {
				t.Fatalf("Bind: %v; want the injected failure and a pointer to restore-nic", err)
			}
			if !statePresent {
				t.Error("the state file did not exist at the first sysfs write")
			}
			if tr.Driver(pciA) != "" || tr.HasInterface("ens1f0") {
				t.Fatalf("driver %q after the failed bind; want none", tr.Driver(pciA))
			}
			tr.FailWrite = nil

			// A retry binds, and remembers ixgbe, not "no driver".
			st, err := s.Bind("node0", nicbind.Request{Driver: nicbind.VFIO, PCI: pciA})
			if err != nil {
				t.Fatal(err)
			}
			if st.OrigDriver != "ixgbe" || st.Interface != "ens1f0" {
				t.Errorf("retry state %+v", st)
			}
			if _, err := s.Restore(s.StatePath("node0")); err != nil {
				t.Fatal(err)
			}
			if tr.Driver(pciA) != "ixgbe" || !tr.HasInterface("ens1f0") {
				t.Fatalf("after Restore: driver %q, interface %v", tr.Driver(pciA), tr.HasInterface("ens1f0"))
			}
		})
	}
}

func TestRestoreAfterCrashDirectly(t *testing.T) {
	tr, s, _ := setup(t, nil)
	tr.FailWrite = func(rel string) error {
		if strings.HasSuffix(rel, "drivers_probe") {
			return errors.New("injected failure")
		}
		return nil
	}
	if _, err := s.Bind("node0", nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"}); err == nil {
		t.Fatal("Bind succeeded")
	}
	tr.FailWrite = nil
	if _, err := s.Restore(s.StatePath("node0")); err != nil {
		t.Fatal(err)
	}
	if tr.Driver(pciA) != "ixgbe" || !tr.HasInterface("ens1f0") {
		t.Fatalf("after Restore: driver %q, interface %v", tr.Driver(pciA), tr.HasInterface("ens1f0"))
	}
}

func TestRestoreInterfaceDoesNotReappear(t *testing.T) {
	tr, s, _ := setup(t, nil)
	s.Timeout = 100 * time.Millisecond
	if _, err := s.Bind("node0", nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"}); err != nil {
		t.Fatal(err)
	}
	tr.NoReappear = true
	_, err := s.Restore(s.StatePath("node0"))
	if err == nil || !strings.Contains(err.Error(), "interface ens1f0 did not reappear") {
		t.Fatalf("Restore: %v", err)
	}
	if _, err := os.Stat(s.StatePath("node0")); err != nil {
		t.Errorf("state file removed after a failed restore: %v", err)
	}
}

// TestVirtio binds and restores a virtio-net device, whose interface
// hangs off virtioN under the PCI device.
func TestVirtio(t *testing.T) {
	tr, s, _ := setup(t, nil)
	const addr = "0000:00:03.0"
	tr.AddNIC(t, nicbindtest.NIC{PCI: addr, Vendor: "1af4", Device: "1041", Driver: "virtio-pci", Interface: "eth0", Sub: "virtio2"})
	if got, err := s.PCIOf("eth0"); got != addr || err != nil {
		t.Fatalf("PCIOf(eth0) = %q, %v", got, err)
	}
	if _, err := s.Bind("node0", nicbind.Request{Driver: nicbind.UIO, Interface: "eth0"}); err != nil {
		t.Fatal(err)
	}
	if tr.Driver(addr) != nicbind.UIO || tr.HasInterface("eth0") {
		t.Fatalf("after Bind: driver %q", tr.Driver(addr))
	}
	if _, err := s.Restore(s.StatePath("node0")); err != nil {
		t.Fatal(err)
	}
	if tr.Driver(addr) != "virtio-pci" || !tr.HasInterface("eth0") || strings.Join(s.Interfaces(addr), ",") != "eth0" {
		t.Fatalf("after Restore: driver %q, interfaces %q", tr.Driver(addr), s.Interfaces(addr))
	}
}

func TestStateForAnotherDevice(t *testing.T) {
	_, s, _ := setup(t, nil)
	if _, err := s.Bind("node0", nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Bind("node0", nicbind.Request{Driver: nicbind.UIO, Interface: "ens1f1"})
	if err == nil || !strings.Contains(err.Error(), "is for 0000:3b:00.0") {
		t.Fatalf("Bind: %v", err)
	}
}

func TestStatus(t *testing.T) {
	_, s, _ := setup(t, nil)
	if _, err := s.Bind("node0", nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"}); err != nil {
		t.Fatal(err)
	}
	devs, err := s.Status()
	if err != nil {
		t.Fatal(err)
	}
	want := []nicbind.Device{
		{PCI: pciA, Vendor: "8086", DeviceID: "10fb", Class: "020000", Driver: "vfio-pci", Override: "vfio-pci", OrigDriver: "ixgbe", OrigInterface: "ens1f0", Port: "node0"},
		{PCI: pciB, Vendor: "8086", DeviceID: "10fb", Class: "020000", Driver: "ixgbe", Interface: "ens1f1"},
	}
	if len(devs) != len(want) {
		t.Fatalf("Status: %+v", devs)
	}
	for i := range want {
		if devs[i] != want[i] {
			t.Errorf("device %d: %+v\nwant %+v", i, devs[i], want[i])
		}
	}
	if !devs[0].DPDK() || devs[1].DPDK() {
		t.Error("DPDK() wrong")
	}
}

// TestRestoreOldStateFile: restore-nic after a crash reads the state
// file an earlier release wrote (testdata/node0.json: the record of
// ens1f0 bound to vfio-pci, as written before package statefile), and
// what Bind writes now is that record.
func TestRestoreOldStateFile(t *testing.T) {
	old, err := os.ReadFile("testdata/node0.json")
	if err != nil {
		t.Fatal(err)
	}
	tr, s, _ := setup(t, nil)
	st, err := s.Bind("node0", nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"})
	if err != nil {
		t.Fatal(err)
	}
	wrote, err := s.ReadState(s.StatePath("node0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.StatePath("node0"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadState(s.StatePath("node0"))
	if err != nil || got == nil {
		t.Fatalf("ReadState of the old file: %+v, %v", got, err)
	}
	if got.Time.IsZero() {
		t.Error("old file's time not read")
	}
	got.Time, wrote.Time, st.Time = time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, wrote) || !reflect.DeepEqual(got, st) {
		t.Errorf("old record %+v; Bind wrote %+v and returned %+v", *got, *wrote, *st)
	}
	if _, err := s.Restore(s.StatePath("node0")); err != nil {
		t.Fatal(err)
	}
	if tr.Driver(pciA) != "ixgbe" || !tr.HasInterface("ens1f0") {
		t.Fatalf("after Restore: driver %q, interface %v", tr.Driver(pciA), tr.HasInterface("ens1f0"))
	}
	if _, err := os.Stat(s.StatePath("node0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left: %v", err)
	}
}

// TestRestoreNetwork covers the node's network across a bind and a
// restore: Restore puts back what the NIC had and what the daemon owned
// (Request.Network), and the next Bind takes a NIC that carries only
// what Restore left on it (a restart after a crash), but not more.
func TestRestoreNetwork(t *testing.T) {
	pfx := netip.MustParsePrefix
	node := kernelif.Network{
		Addresses: []netip.Prefix{pfx("10.0.0.5/24"), pfx("fd00::5/64")},
		Routes: []kernelif.Route{
			{To: pfx("0.0.0.0/0"), Via: netip.MustParseAddr("10.0.0.1")},
			{To: pfx("10.9.0.0/16"), Via: netip.MustParseAddr("10.0.0.254"), Metric: 100},
			{To: pfx("::/0"), Via: netip.MustParseAddr("fd00::1"), Metric: 1024},
		},
	}
	own := kernelif.Network{Addresses: []netip.Prefix{pfx("192.168.7.5/24")},
		Routes: []kernelif.Route{{To: pfx("192.168.8.0/24"), Via: netip.MustParseAddr("192.168.7.1")}}}
	tests := []struct {
		name    string
		own     kernelif.Network // on the NIC before the first bind (which then needs force)
		after   kernelif.Network // added to the NIC after the restore
		forget  bool             // the Restored record is gone (a reboot clears /run)
		want    kernelif.Network // what the restore put back
		wantErr string           // the second bind's error; "" for none
	}{
		{name: "restart after a restore", want: node},
		{name: "own network kept", own: own, want: own.Merge(node)},
		{name: "foreign address", after: kernelif.Network{Addresses: []netip.Prefix{pfx("10.0.0.77/24")}}, want: node,
			wantErr: "it has addresses 10.0.0.77/24, which restore-nic did not put there"},
		{name: "foreign route", after: kernelif.Network{Routes: []kernelif.Route{{To: pfx("10.8.0.0/16"), Via: netip.MustParseAddr("10.0.0.2")}}}, want: node,
			wantErr: "routes 10.8.0.0/16 via 10.0.0.2, which restore-nic did not put there"},
		{name: "no record", forget: true, want: node, wantErr: "interface ens1f0 is active: it is up, it has addresses 10.0.0.5/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, s, _ := setup(t, nil)
			s.Activity = tr.Activity
			req := nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0", Network: node}
			if !tt.own.Empty() {
				if err := tr.SetNetwork("ens1f0", tt.own); err != nil {
					t.Fatal(err)
				}
				req.Force = true
			}
			st, err := s.Bind("node0", req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(st.Network, tt.want) {
				t.Errorf("state network %+v, want %+v", st.Network, tt.want)
			}
			// The state file holds the same, through JSON.
			if rec, err := s.ReadState(s.StatePath("node0")); err != nil || rec == nil || !reflect.DeepEqual(rec.Network, st.Network) {
				t.Errorf("state file network %+v (%v), Bind returned %+v", rec, err, st.Network)
			}
			if _, err := s.Restore(s.StatePath("node0")); err != nil {
				t.Fatal(err)
			}
			if got, _ := tr.Network("ens1f0"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("after Restore the NIC has %+v, want %+v", got, tt.want)
			}
			if _, err := os.Stat(s.RestoredPath("node0")); err != nil {
				t.Errorf("no Restored record: %v", err)
			}
			if !tt.after.Empty() {
				if err := tr.SetNetwork("ens1f0", tt.after); err != nil {
					t.Fatal(err)
				}
			}
			if tt.forget {
				os.Remove(s.RestoredPath("node0"))
			}
			req.Force = false
			tr.Writes = nil
			st, err = s.Bind("node0", req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("second Bind: %v; want an error with %q", err, tt.wantErr)
				}
				if len(tr.Writes) != 0 {
					t.Errorf("refused, yet wrote %q", tr.Writes)
				}
				return
			}
			if err != nil {
				t.Fatalf("second Bind, on what Restore left: %v", err)
			}
			if !reflect.DeepEqual(st.Network, tt.want) {
				t.Errorf("second state network %+v, want %+v", st.Network, tt.want)
			}
			if _, err := os.Stat(s.RestoredPath("node0")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the Restored record outlived the bind that used it: %v", err)
			}
		})
	}
}

// TestBindWaitsForTheInterface: at boot the unit may start before udev
// has named the NIC; Bind waits for the interface, within AppearTimeout.
func TestBindWaitsForTheInterface(t *testing.T) {
	tr, s, _ := setup(t, nil)
	s.AppearTimeout = 10 * time.Second
	const delay = 300 * time.Millisecond
	added := make(chan struct{})
	go func() {
		defer close(added)
		time.Sleep(delay)
		tr.AddNIC(t, nicbindtest.NIC{PCI: "0000:3c:00.0", Vendor: "8086", Device: "10fb", Driver: "ixgbe", Interface: "ens9", IOMMUGroup: "43"})
	}()
	start := time.Now()
	st, err := s.Bind("node9", nicbind.Request{Driver: nicbind.VFIO, Interface: "ens9"})
	<-added
	if err != nil {
		t.Fatalf("Bind of an interface that appears after %v: %v", delay, err)
	}
	if took := time.Since(start); took < delay || st.PCI != "0000:3c:00.0" {
		t.Errorf("bound %s after %v; want 0000:3c:00.0 after at least %v", st.PCI, took, delay)
	}
}
