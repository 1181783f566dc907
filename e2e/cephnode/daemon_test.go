package cephnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
)

// buildDaemon builds cephdpdkd for the test to run as a process.
func buildDaemon(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cephdpdkd")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/cephdpdkd").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// daemonProc is a running cephdpdkd (see daemonproc).
type daemonProc = daemonproc.Proc

var (
	startDaemon = daemonproc.Start
	sum         = daemonproc.Sum
	freePort    = daemonproc.FreeAddr
)

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
