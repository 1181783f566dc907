package pmd

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// lockHelperEnv makes the test binary, run as a child, lock a file the
// way a DPDK primary locks its runtime config, then wait for stdin to
// close. fcntl locks are per process: the holder must be another one.
const lockHelperEnv = "CDD_TEST_LOCK_HOLDER"

func init() {
	path := os.Getenv(lockHelperEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		os.Exit(3)
	}
	// rte_eal_config_create locks the memsegs field only, not the whole file.
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 64, Len: 128}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		os.Exit(4)
	}
	os.Stdout.WriteString("locked\n")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func TestConfigLockHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if _, locked := configLockHolder(path); locked {
		t.Error("a missing file is reported locked")
	}
	if err := os.WriteFile(path, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, locked := configLockHolder(path); locked {
		t.Error("an unlocked file is reported locked")
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "locked\n" {
		t.Fatalf("helper did not lock the file: %q", line)
	}

	pid, locked := configLockHolder(path)
	if !locked || pid != cmd.Process.Pid {
		t.Errorf("configLockHolder = %d, %v; want %d, true", pid, locked, cmd.Process.Pid)
	}
	if c := processCommand(pid); !strings.Contains(c, filepath.Base(os.Args[0])) || !strings.Contains(c, "-test.run=^$") {
		t.Errorf("processCommand(%d) = %q", pid, c)
	}
	msg := (&PrefixInUseError{Prefix: "p", Config: path, PID: pid, Command: "cephdpdkd run"}).Error()
	for _, want := range []string{`prefix "p"`, "pid ", "(cephdpdkd run)", path} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

func TestRuntimeDir(t *testing.T) {
	tests := []struct {
		uid  int
		env  map[string]string
		want string
	}{
		{0, nil, "/var/run/dpdk/p"},
		{0, map[string]string{"XDG_RUNTIME_DIR": "/run/user/0"}, "/var/run/dpdk/p"},
		{1000, map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, "/run/user/1000/dpdk/p"},
		{1000, nil, "/tmp/dpdk/p"},
		{0, map[string]string{"RUNTIME_DIRECTORY": "/run/cephdpdkd"}, "/run/cephdpdkd/dpdk/p"},
	}
	for _, tt := range tests {
		if got := runtimeDir(tt.uid, func(k string) string { return tt.env[k] }, "p"); got != tt.want {
			t.Errorf("runtimeDir(uid %d, %v) = %q, want %q", tt.uid, tt.env, got, tt.want)
		}
	}
}
