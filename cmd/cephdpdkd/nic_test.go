package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind/nicbindtest"
)

// fakeNICs puts a fake kernel behind the NIC commands: a tree with two
// ixgbe ports, node0's (ens1f0) bound to vfio-pci by Bind.
func fakeNICs(t *testing.T) (tr *nicbindtest.Tree, runDir string) {
	t.Helper()
	tr = nicbindtest.New(t)
	tr.AddNIC(t, nicbindtest.NIC{PCI: "0000:3b:00.0", Vendor: "8086", Device: "10fb", Driver: "ixgbe", Interface: "ens1f0", IOMMUGroup: "7"})
	tr.AddNIC(t, nicbindtest.NIC{PCI: "0000:3b:00.1", Vendor: "8086", Device: "10fb", Driver: "ixgbe", Interface: "ens1f1"})
	runDir = t.TempDir()
	old := nicSystem
	t.Cleanup(func() { nicSystem = old })
	nicSystem = func(sysfs, runDir string) *nicbind.System {
		s := tr.System(runDir, nicbind.Activity{})
		s.Sysfs = sysfs
		return s
	}
	if _, err := nicSystem(tr.Root, runDir).Bind("node0", nicbind.Request{Driver: nicbind.VFIO, Interface: "ens1f0"}); err != nil {
		t.Fatal(err)
	}
	return tr, runDir
}

func TestNICStatus(t *testing.T) {
	tr, runDir := fakeNICs(t)
	code, out, errOut := runCLI("nic-status", "--sysfs", tr.Root, "--run-dir", runDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"Network devices using a DPDK driver\n===================================\n0000:3b:00.0 8086:10fb drv=vfio-pci orig=ixgbe(ens1f0) port=node0\n",
		"Network devices using a kernel driver\n",
		"0000:3b:00.1 8086:10fb if=ens1f1 drv=ixgbe\n",
		"Network devices without a driver\n================================\n<none>\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := runCLI("nic-status", "extra"); code != 2 {
		t.Errorf("nic-status extra: exit %d, want 2", code)
	}
}

func TestRestoreNIC(t *testing.T) {
	tr, runDir := fakeNICs(t)
	cfg := filepath.Join(t.TempDir(), "node0.yaml")
	os.WriteFile(cfg, []byte("port:\n  name: node0\n  device: 0000:3b:00.0\n  bind: {driver: vfio-pci, interface: ens1f0}\nservices: [{name: a}]\ndefault_service: a\n"), 0o600)
	tests := []struct {
		name string
		args []string
		code int
		out  string // substring of stdout, or of stderr when code != 0
	}{
		{"restore", []string{"--config", cfg}, 0, "restore-nic: port node0: 0000:3b:00.0 back on ixgbe, interface ens1f0"},
		{"again", []string{"--config", cfg}, 0, "nothing to restore (no state file " + filepath.Join(runDir, "node0.json") + ")"},
		{"no config", nil, 2, "usage: cephdpdkd restore-nic"},
		{"missing config", []string{"--config", cfg + ".missing"}, 1, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"restore-nic", "--sysfs", tr.Root, "--run-dir", runDir}, tt.args...)
			code, out, errOut := runCLI(args...)
			if tt.code != 0 {
				out = errOut
			}
			if code != tt.code || !strings.Contains(out, tt.out) {
				t.Fatalf("exit %d, output %q%s; want exit %d and %q", code, out, errOut, tt.code, tt.out)
			}
		})
	}
	if tr.Driver("0000:3b:00.0") != "ixgbe" || !tr.HasInterface("ens1f0") {
		t.Errorf("after restore-nic: driver %q, interface ens1f0 present: %v", tr.Driver("0000:3b:00.0"), tr.HasInterface("ens1f0"))
	}
}
