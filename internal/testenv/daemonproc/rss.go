package daemonproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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

// userHZ is the unit of the times in /proc/PID/stat: fixed at 100 in the
// kernel's ABI whatever its internal tick rate.
const userHZ = 100

// CPUTime returns the user and system CPU time process pid has used, all
// its threads together (utime + stime in /proc/PID/stat).
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count the
	// fields after its closing parenthesis, from state (field 3) on.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("process %d: short /proc/%d/stat", pid, pid)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process %d: /proc/%d/stat: %w", pid, pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
