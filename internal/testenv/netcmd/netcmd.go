// Package netcmd runs the few host network commands the test helpers
// need (iproute2's ip, sysctl writes), with errors that carry the
// command's output. It is for tests only, and has no cgo so that helpers
// built on it stay testable under -race.
package netcmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
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
