package cephnode

import (
	"os"
	"testing"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
)

// daemonProc is a running cephdpdkd (see daemonproc).
type daemonProc = daemonproc.Proc

var (
	buildDaemon = daemonproc.BuildDaemon
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
