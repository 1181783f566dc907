//go:build linux

package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
)

// NetNS is an empty network namespace (loopback up) for the node side of
// a test: the daemon moves its kernel interface there, and the test runs
// the node's servers in it.
type NetNS struct {
	// Name is the namespace name, as in `ip netns exec Name`.
	Name string
}

// NewNetNS creates a namespace "cddn-XXXXXX" and removes it when the test
// ends. It skips the test when not root.
func NewNetNS(t harness.TB) *NetNS {
	t.Helper()
	RequireRoot(t)
	n := &NetNS{Name: "cddn-" + netcmd.Suffix(t)}
	t.Cleanup(func() {
		if _, err := os.Stat(n.Path()); err == nil {
			if err := netcmd.IP("netns", "del", n.Name); err != nil {
				t.Errorf("testenv: %v", err)
			}
		}
	})
	if err := netcmd.IP("netns", "add", n.Name); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := netcmd.IP("-n", n.Name, "link", "set", "dev", "lo", "up"); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return n
}

// Path is the namespace file.
func (n *NetNS) Path() string { return "/run/netns/" + n.Name }

// Do runs f on an OS thread inside the namespace (see VethNS.Do).
func (n *NetNS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := inNetns(n.Path(), f)
		if restored {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Command returns a command that runs inside the namespace.
func (n *NetNS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Exec runs a command inside the namespace and returns its combined output.
func (n *NetNS) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := n.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("testenv: in %s: %s %s: %w", n.Name, name, strings.Join(args, " "), err)
	}
	return out, nil
}
