package daemonproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS returns the resident set size of process pid, in bytes (VmRSS
// in /proc/PID/status).
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("process %d: VmRSS: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("process %d: no VmRSS in /proc/%d/status", pid, pid)
}
