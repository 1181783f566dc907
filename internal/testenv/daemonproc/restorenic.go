package daemonproc

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"

	"github.com/cephdpdkd/cephdpdkd/internal/statefile"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
)

// RestoreNICAtEnd has t's cleanup run `bin restore-nic --config cfg` in
// network namespace netns ("" for this process's), as the unit's
// ExecStopPost does, for a daemon in the af_xdp mode on interface iface:
// it detaches the daemon's program and removes its run-directory records.
// The lock file, which the unit leaves for the next daemon on the
// interface, goes too: the test's interface goes with the test. Called
// before the daemon is started, it runs after the daemon's own cleanup
// has stopped it, and before the namespace (made earlier) is removed.
func RestoreNICAtEnd(t harness.TB, netns, bin, cfg, iface string) {
	t.Helper()
	t.Cleanup(func() {
		args := []string{bin, "restore-nic", "--config", cfg}
		if netns != "" {
			args = append([]string{"ip", "netns", "exec", netns}, args...)
		}
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Errorf("restore-nic: %v\n%s", err, out)
		}
		if err := os.Remove(statefile.Path("", iface, "lock")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Error(err)
		}
	})
}
