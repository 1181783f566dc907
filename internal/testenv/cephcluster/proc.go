//go:build linux

package cephcluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A launcher starts every process of a cluster from one OS thread that
// lives until the cluster is torn down. Each process gets Pdeathsig
// SIGKILL, and the kernel sends that signal when the thread that forked
// the process exits, not when the process does: starting from an
// arbitrary Go thread could kill a daemon whenever the runtime retires
// that thread. Pinned this way, the daemons die with the test binary
// even when it is killed or times out and no cleanup runs.
type launcher struct {
	mu     sync.Mutex
	closed bool
	reqs   chan launchReq
}

type launchReq struct {
	cmd  *exec.Cmd
	errc chan error
}

func newLauncher() *launcher {
	l := &launcher{reqs: make(chan launchReq)}
	go func() {
		// Never unlocked: when the channel closes the goroutine returns
		// and its thread exits with it, which SIGKILLs anything it
		// started that is somehow still alive.
		runtime.LockOSThread()
		for r := range l.reqs {
			r.errc <- r.cmd.Start()
		}
	}()
	return l
}

// start starts cmd in a process group of its own, with Pdeathsig.
func (l *launcher) start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("cluster is shut down")
	}
	errc := make(chan error, 1)
	l.reqs <- launchReq{cmd, errc}
	return <-errc
}

func (l *launcher) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.reqs)
	}
}

// A daemon is one running ceph-mon, ceph-mgr or ceph-osd, in the
// foreground (-f) so that its pid is the one we started.
type daemon struct {
	name    string // "osd.0"
	cmd     *exec.Cmd
	logFile string
	done    chan struct{} // closed once the process has been reaped
	err     error         // how it exited; valid after done
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// startDaemon starts argv (which includes the ip netns exec prefix, if
// any) with stdout and stderr appended to outPath.
func (l *launcher) startDaemon(name, outPath, logFile string, argv []string) (*daemon, error) {
	out, err := os.OpenFile(outPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := l.start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

// stop sends sig to the daemon's process group and waits up to grace for
// it to exit, then SIGKILLs the group and waits again. It reports whether
// the daemon was still there when SIGKILL went out.
func (d *daemon) stop(sig syscall.Signal, grace time.Duration) (killed bool, err error) {
	if d.exited() {
		return false, nil
	}
	// Setpgid made the daemon a group leader: -pid is its group.
	_ = syscall.Kill(-d.pid(), sig)
	if sig != syscall.SIGKILL {
		select {
		case <-d.done:
			return false, nil
		case <-time.After(grace):
		}
		killed = true
		_ = syscall.Kill(-d.pid(), syscall.SIGKILL)
	}
	select {
	case <-d.done:
		return killed, nil
	case <-time.After(10 * time.Second):
		return killed, fmt.Errorf("%s (pid %d) survived SIGKILL for 10s", d.name, d.pid())
	}
}

// stopClean stops the daemon with SIGTERM and fails unless it exits by
// itself, with status 0, within grace.
func (d *daemon) stopClean(grace time.Duration) error {
	killed, err := d.stop(syscall.SIGTERM, grace)
	switch {
	case err != nil:
		return err
	case killed:
		return fmt.Errorf("%s did not stop within %v of SIGTERM; killed", d.name, grace)
	case d.err != nil:
		return fmt.Errorf("%s stopped: %w", d.name, d.err)
	}
	return nil
}

// exitError describes a daemon that exited when it should not have, with
// the end of its log.
func (d *daemon) exitError() error {
	return fmt.Errorf("%s exited: %v\n%s", d.name, d.err, tail(d.logFile, 15))
}

// asok sends one command to a Ceph admin socket and returns the reply.
// The protocol is a JSON command ended by NUL, answered by a big-endian
// 32-bit length and that many bytes.
func asok(path string, cmd map[string]any, timeout time.Duration) ([]byte, error) {
	req, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	if _, err := conn.Write(append(req, 0)); err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	var n [4]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 16<<20 {
		return nil, fmt.Errorf("admin socket %s: %d-byte reply", path, size)
	}
	reply := make([]byte, size)
	if _, err := io.ReadFull(conn, reply); err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	return reply, nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- %s (last %d lines)\n%s", path, len(lines), strings.Join(lines, "\n"))
}

// procsUnder returns the pids of processes, other than this one, with an
// argument that is dir or a path inside it.
func procsUnder(dir string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			if a := string(arg); a == dir || strings.HasPrefix(a, dir+"/") {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// procLine describes a process for error messages.
func procLine(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return fmt.Sprintf("pid %d: %s", pid, strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))))
}
