// Package netcmd runs the few host network commands the test helpers
// need (iproute2's ip, sysctl writes), with errors that carry the
// command's output. It is for tests only, and has no cgo so that helpers
// built on it stay testable under -race.
package netcmd

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
)

// IP runs `ip args...`.
func IP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// WriteSysctl writes a /proc/sys file. Network sysctls resolve against
// the calling thread's namespace. A missing IPv6 sysctl is not an error:
// a kernel without IPv6 has nothing to disable.
func WriteSysctl(path, value string) error {
	err := os.WriteFile(path, []byte(value), 0)
	if errors.Is(err, os.ErrNotExist) && strings.HasPrefix(path, "/proc/sys/net/ipv6/") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sysctl: %w", err)
	}
	return nil
}

// Suffix returns six random hex digits, which make the names of a test's
// namespaces and interfaces its own (with a prefix of up to nine bytes,
// within an interface name's 15).
func Suffix(t harness.TB) string {
	t.Helper()
	var id [3]byte
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatalf("random name: %v", err)
	}
	return hex.EncodeToString(id[:])
}
