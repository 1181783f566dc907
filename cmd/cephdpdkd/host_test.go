package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
	"github.com/cephdpdkd/cephdpdkd/internal/hugepages/hugepagestest"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind/nicbindtest"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

const (
	hostPCI  = "0000:3b:00.0"
	otherPCI = "0000:3b:00.1"
)

// fakeHost is a host over a fake sysfs with two ixgbe ports, ens1f0
// (hostPCI, in IOMMU group 7) and ens1f1, no hugepages reserved, and
// the log it writes.
func fakeHost(t *testing.T, activity nicbind.Activity) (*host, *nicbindtest.Tree, *bytes.Buffer) {
	h, tr, _, logs := fakeHostHuge(t, activity)
	return h, tr, logs
}

func fakeHostHuge(t *testing.T, activity nicbind.Activity) (*host, *nicbindtest.Tree, *hugepagestest.Kernel, *bytes.Buffer) {
	t.Helper()
	k, huge := hugepagestest.New(t, 0, 0)
	tr := nicbindtest.New(t)
	tr.AddNIC(t, nicbindtest.NIC{PCI: hostPCI, Vendor: "8086", Device: "10fb", Driver: "ixgbe", Interface: "ens1f0", IOMMUGroup: "7"})
	tr.AddNIC(t, nicbindtest.NIC{PCI: otherPCI, Vendor: "8086", Device: "10fb", Driver: "ixgbe", Interface: "ens1f1", IOMMUGroup: "8"})
	var logs bytes.Buffer
	huge.RunDir = filepath.Join(t.TempDir(), "run")
	return &host{
		huge: huge,
		nic:  tr.System(filepath.Join(t.TempDir(), "run"), activity),
		log:  slog.New(slog.NewTextHandler(&logs, nil)),
	}, tr, k, &logs
}

// bindConfig is a configuration whose port.bind section is bind.
func bindConfig(t *testing.T, bind string) *config.Config {
	return hostConfig(t, "", bind)
}

// hostConfig is a configuration with eal.hugepages and port.bind
// sections; "" leaves one out.
func hostConfig(t *testing.T, hugepages, bind string) *config.Config {
	t.Helper()
	y := "port:\n  name: node0\n  device: " + hostPCI + "\n"
	if hugepages != "" {
		y = "eal:\n  memory_mb: 128\n  hugepages: " + hugepages + "\n" + y
	}
	if bind != "" {
		y += "  bind: " + bind + "\n"
	}
	c, err := config.Parse([]byte(y + "services: [{name: a}]\ndefault_service: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The daemon-level sequence: the NIC is on its DPDK driver when the body
// (the EAL's start, the run) begins, and back on its kernel driver, with
// its interface, whichever way the body ends.
func TestHostBindsAroundTheRun(t *testing.T) {
	errStart := errors.New("EAL: cannot init")
	tests := []struct {
		name  string
		body  func() error // runs while bound
		want  error
		panic bool
	}{
		{name: "clean run", body: func() error { return nil }},
		{name: "start fails after the bind", body: func() error { return errStart }, want: errStart},
		{name: "panic", body: func() error { panic("poll loop") }, panic: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, tr, logs := fakeHost(t, nicbind.Activity{})
			cfg := bindConfig(t, "{driver: vfio-pci, interface: ens1f0}")
			state := h.nic.StatePath("node0")
			ran := false
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil && !tt.panic {
						t.Fatalf("panic: %v", r)
					}
				}()
				err = h.with(cfg, func(*xdp.Program) error {
					ran = true
					if d := tr.Driver(hostPCI); d != "vfio-pci" {
						t.Errorf("during the run: driver %q, want vfio-pci", d)
					}
					if tr.HasInterface("ens1f0") {
						t.Error("during the run: ens1f0 still exists")
					}
					if _, err := os.Stat(state); err != nil {
						t.Errorf("during the run: no state file: %v", err)
					}
					return tt.body()
				})
			}()
			if !ran {
				t.Fatal("body did not run")
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("with: %v, want %v", err, tt.want)
			}
			if d := tr.Driver(hostPCI); d != "ixgbe" || !tr.HasInterface("ens1f0") {
				t.Errorf("after the run: driver %q, ens1f0 %v; want ixgbe and the interface back", d, tr.HasInterface("ens1f0"))
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("state file left after restore: %v", err)
			}
			if tr.Driver(otherPCI) != "ixgbe" {
				t.Error("the other port was touched")
			}
			for _, want := range []string{"NIC bound", "NIC restored"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logs)
				}
			}
		})
	}
}

// When the bind is refused, the body (the EAL) never runs and nothing
// on the machine changed.
func TestHostRefusesBeforeTheRun(t *testing.T) {
	tests := []struct {
		name     string
		bind     string
		activity nicbind.Activity
		want     string
	}{
		{name: "interface in use", bind: "{driver: vfio-pci, interface: ens1f0}",
			activity: nicbind.Activity{Addresses: []string{"10.0.0.5/24"}}, want: "interface ens1f0 is active: it has addresses 10.0.0.5/24"},
		{name: "interface of another device", bind: "{driver: vfio-pci, interface: ens1f1}",
			want: "port.bind.interface ens1f1 is PCI device 0000:3b:00.1, not port.device 0000:3b:00.0"},
		{name: "no such interface", bind: "{driver: vfio-pci, interface: ens9}", want: "ens9: no such interface"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, tr, _ := fakeHost(t, tt.activity)
			err := h.with(bindConfig(t, tt.bind), func(*xdp.Program) error {
				t.Error("body ran")
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("with: %v, want %q", err, tt.want)
			}
			if tr.Driver(hostPCI) != "ixgbe" || tr.Driver(otherPCI) != "ixgbe" || len(tr.Writes) != 0 {
				t.Errorf("the machine changed: drivers %q %q, writes %q", tr.Driver(hostPCI), tr.Driver(otherPCI), tr.Writes)
			}
		})
	}
}

// A bind that fails half-way (the probe write fails) is undone before
// the error returns.
func TestHostUndoesAHalfBind(t *testing.T) {
	h, tr, _ := fakeHost(t, nicbind.Activity{})
	failed := false
	tr.FailWrite = func(rel string) error {
		if rel == "bus/pci/drivers_probe" && !failed { // the bind's probe, not the restore's
			failed = true
			return errors.New("EIO")
		}
		return nil
	}
	err := h.with(bindConfig(t, "{driver: vfio-pci, interface: ens1f0}"), func(*xdp.Program) error {
		t.Error("body ran")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "EIO") {
		t.Fatalf("with: %v, want the probe's EIO", err)
	}
	if d := tr.Driver(hostPCI); d != "ixgbe" || !tr.HasInterface("ens1f0") {
		t.Errorf("after the failed bind: driver %q, ens1f0 %v; want ixgbe and the interface", d, tr.HasInterface("ens1f0"))
	}
	if _, err := os.Stat(h.nic.StatePath("node0")); !os.IsNotExist(err) {
		t.Errorf("state file left: %v", err)
	}
}

// A failed restore at stop is reported with the command that retries
// it, and the state file stays for that command.
func TestHostFailedRestore(t *testing.T) {
	h, tr, _ := fakeHost(t, nicbind.Activity{})
	err := h.with(bindConfig(t, "{driver: vfio-pci, interface: ens1f0}"), func(*xdp.Program) error {
		tr.FailWrite = func(rel string) error {
			if strings.HasSuffix(rel, "/driver/unbind") {
				return errors.New("EBUSY")
			}
			return nil
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "EBUSY") || !strings.Contains(err.Error(), "cephdpdkd restore-nic") {
		t.Errorf("with: %v; want the unbind's EBUSY and the retry command", err)
	}
	if _, err := os.Stat(h.nic.StatePath("node0")); err != nil {
		t.Errorf("state file gone after a failed restore: %v", err)
	}
	// What ExecStopPost does next.
	tr.FailWrite = nil
	if _, err := h.nic.Restore(h.nic.StatePath("node0")); err != nil || tr.Driver(hostPCI) != "ixgbe" {
		t.Errorf("retry: %v, driver %q", err, tr.Driver(hostPCI))
	}
}

// Without port.bind nothing is touched; a device bound before the
// daemon (no state file) stays bound after it.
func TestHostLeavesOthersAlone(t *testing.T) {
	h, tr, logs := fakeHost(t, nicbind.Activity{})
	if err := h.with(bindConfig(t, ""), func(*xdp.Program) error { return nil }); err != nil || len(tr.Writes) != 0 {
		t.Errorf("without port.bind: %v, writes %q", err, tr.Writes)
	}

	// An operator bound it with dpdk-devbind.py: no state file.
	pre := &nicbind.System{Sysfs: tr.Root, RunDir: t.TempDir(), Activity: h.nic.Activity, Network: tr.Network, LoadModule: tr.LoadModule, WriteFile: tr.Write}
	if _, err := pre.Bind("manual", nicbind.Request{Driver: nicbind.VFIO, PCI: hostPCI}); err != nil {
		t.Fatal(err)
	}
	if err := h.with(bindConfig(t, "{driver: vfio-pci}"), func(*xdp.Program) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if d := tr.Driver(hostPCI); d != "vfio-pci" {
		t.Errorf("a device bound before the daemon: driver %q after it, want vfio-pci", d)
	}
	if !strings.Contains(logs.String(), "nothing to restore at stop") {
		t.Errorf("log:\n%s", logs)
	}
}

// Hugepages are ready before the NIC is bound and the body runs, and
// given back after the NIC is restored, on every exit path; a failure
// of either step leaves the machine as it was.
func TestHostHugepagesAndNIC(t *testing.T) {
	errStart := errors.New("EAL: cannot init")
	tests := []struct {
		name      string
		bind      string
		max       int          // pages the kernel can find
		activity  []string     // ens1f0's addresses
		body      func() error // runs with both in place
		want      string       // error substring
		bodyRuns  bool
		mountedBy bool // the mount point is not mounted before
	}{
		{name: "clean run", bind: "{driver: vfio-pci, interface: ens1f0}", body: func() error { return nil }, bodyRuns: true, mountedBy: true},
		{name: "start fails", bind: "{driver: vfio-pci, interface: ens1f0}", body: func() error { return errStart }, want: "EAL: cannot init", bodyRuns: true, mountedBy: true},
		{name: "no bind", body: func() error { return nil }, bodyRuns: true, mountedBy: true},
		{name: "kernel short of pages: NIC untouched", bind: "{driver: vfio-pci, interface: ens1f0}", max: 10,
			want: "the kernel granted 10 of the 64 more asked for"},
		{name: "bind refused: pages given back", bind: "{driver: vfio-pci, interface: ens1f0}", activity: []string{"10.0.0.5/24"},
			want: "interface ens1f0 is active"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, tr, k, logs := fakeHostHuge(t, nicbind.Activity{Addresses: tt.activity})
			if tt.max > 0 {
				k.Max = tt.max
			}
			mnt := filepath.Join(k.Root, "dev", "hugepages")
			cfg := hostConfig(t, "{pages: 64, size: 2M, mount: "+mnt+"}", tt.bind)
			ran := false
			err := h.with(cfg, func(*xdp.Program) error {
				ran = true
				if k.Nr != 64 || !k.Mounted(mnt) {
					t.Errorf("during the run: %d pages, mounted %v; want 64 and the mount", k.Nr, k.Mounted(mnt))
				}
				if tt.bind != "" && tr.Driver(hostPCI) != "vfio-pci" {
					t.Errorf("during the run: driver %q", tr.Driver(hostPCI))
				}
				return tt.body()
			})
			if ran != tt.bodyRuns {
				t.Errorf("body ran %v, want %v", ran, tt.bodyRuns)
			}
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("with: %v, want %q", err, tt.want)
			}
			if k.Nr != 0 || k.Mounted(mnt) {
				t.Errorf("after: %d pages reserved, mounted %v; want all given back", k.Nr, k.Mounted(mnt))
			}
			if tr.Driver(hostPCI) != "ixgbe" || !tr.HasInterface("ens1f0") {
				t.Errorf("after: driver %q, ens1f0 %v", tr.Driver(hostPCI), tr.HasInterface("ens1f0"))
			}
			for _, p := range []string{h.huge.StatePath("node0"), h.nic.StatePath("node0")} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("state file %s left: %v", p, err)
				}
			}
			if tt.bodyRuns {
				for _, want := range []string{"hugepages ready", "hugepages given back"} {
					if !strings.Contains(logs.String(), want) {
						t.Errorf("log lacks %q:\n%s", want, logs)
					}
				}
			}
		})
	}
}

// After a crash (nothing released), restore-nic gives back both the NIC
// and the hugepages from the state files; a second run finds nothing.
func TestRestoreNICAfterCrash(t *testing.T) {
	h, tr, k, _ := fakeHostHuge(t, nicbind.Activity{})
	h.huge.RunDir = h.nic.RunDir
	mnt := filepath.Join(k.Root, "dev", "hugepages")
	cfg := hostConfig(t, "{pages: 64, size: 2M, mount: "+mnt+"}", "{driver: vfio-pci, interface: ens1f0}")
	if _, err := h.reserveHugepages(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := h.bindNIC(cfg); err != nil {
		t.Fatal(err)
	}
	// The process died: its mount namespace went with it.
	k.Unmount(mnt)

	oldNIC, oldHuge := nicSystem, hugeSystem
	t.Cleanup(func() { nicSystem, hugeSystem = oldNIC, oldHuge })
	nicSystem = func(string, string) *nicbind.System { return h.nic }
	hugeSystem = func(string, string) *hugepages.System { return h.huge }
	path := filepath.Join(t.TempDir(), "node0.yaml")
	os.WriteFile(path, []byte("eal:\n  memory_mb: 128\n  hugepages: {pages: 64, size: 2M, mount: "+mnt+"}\n"+
		"port:\n  name: node0\n  device: "+hostPCI+"\n  bind: {driver: vfio-pci, interface: ens1f0}\n"+
		"services: [{name: a}]\ndefault_service: a\n"), 0o600)
	code, out, errOut := runCLI("restore-nic", "--config", path)
	if code != 0 {
		t.Fatalf("restore-nic: exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"restore-nic: port node0: 0000:3b:00.0 back on ixgbe, interface ens1f0\n",
		"restore-nic: port node0: gave back 64 hugepages of 2048 kB, released the hugetlbfs mount " + mnt + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if k.Nr != 0 || tr.Driver(hostPCI) != "ixgbe" {
		t.Errorf("after restore-nic: %d pages, driver %q", k.Nr, tr.Driver(hostPCI))
	}
	code, out, _ = runCLI("restore-nic", "--config", path)
	if code != 0 || !strings.Contains(out, "nothing to restore") || strings.Contains(out, "hugepages") {
		t.Errorf("second restore-nic: exit %d:\n%s", code, out)
	}
}
