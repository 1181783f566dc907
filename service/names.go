package service

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// ControlName is the name of the memzone holding a service's control
// block (ctl.h), which a service process looks up by the service's name
// alone: "cdds." and the name (at most 24 characters, within DPDK's 31).
func ControlName(service string) string { return "cdds." + service }

// StartTime returns a process's start time in clock ticks since boot
// (/proc/<pid>/stat, field 22). With the pid it names one process: a
// pid the kernel has given to another process since has another start
// time.
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// or parentheses itself: count fields after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("service: /proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("service: /proc/%d/stat: %d fields after the command", pid, len(f))
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}

// Owner is the session word a process claims: its pid and the low 32
// bits of its start time.
func Owner(pid int, start uint64) uint64 { return uint64(uint32(pid)) | uint64(uint32(start))<<32 }
