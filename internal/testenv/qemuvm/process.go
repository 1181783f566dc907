//go:build linux

package qemuvm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/logbuf"
)

// Binary is the qemu system emulator the guests run in.
const Binary = "qemu-system-x86_64"

// KillTimeout bounds the wait for qemu to exit after SIGKILL.
const KillTimeout = 10 * time.Second

// CheckHost reports why this machine cannot run test guests, or nil: the
// process must be root (network namespaces, taps, the image scripts'
// apt-get), with ip(8) and /dev/net/tun.
func CheckHost() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, taps, apt-get)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("needs the ip command (iproute2): %w", err)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("needs tap devices: %w", err)
	}
	return nil
}

// VM is a running qemu whose standard input and output (the guest's
// first serial port, with -serial stdio) are pipes: Console collects what
// the guest writes there, Stdin types to it.
type VM struct {
	// Console is what qemu's standard output carries: with -serial stdio,
	// the guest's first serial port.
	Console *Console
	// Stdin is the write end of qemu's standard input.
	Stdin *os.File
	// Pid is that of `ip netns exec`, which execs qemu: the same process,
	// and the leader of its process group.
	Pid int

	stderr logbuf.Buffer // qemu's own messages
	exited chan struct{}

	killOnce sync.Once
	killErr  error
}

// Start runs qemu with args inside network namespace ns (through `ip netns
// exec`, so that it opens its taps there). qemu gets a process group of its
// own, so that Kill ends whatever it started, and SIGKILL when the test
// binary dies first.
func Start(ns string, args []string) (*VM, error) {
	qemu, err := exec.LookPath(Binary)
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	p := &VM{Console: NewConsole(), exited: make(chan struct{})}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, qemu}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked qemu exits, not the
		// process: keep this thread, locked, for qemu's whole life.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(p.exited)
	}()
	err = <-started
	// The child has its own copies; the console must see EOF when qemu
	// exits, which needs the parent's write end closed.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	p.Pid = cmd.Process.Pid
	p.Stdin = inW
	go func() {
		p.Console.Collect(outR)
		outR.Close()
	}()
	return p, nil
}

// Kill sends SIGKILL to qemu's process group (there is nothing in a test
// guest to save), waits for qemu to exit and closes Stdin. Later calls
// return the first's result.
func (p *VM) Kill() error {
	p.killOnce.Do(func() {
		// Negative pid: the whole process group.
		if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			p.killErr = fmt.Errorf("kill qemu: %w", err)
		}
		select {
		case <-p.exited:
		case <-time.After(KillTimeout):
			p.killErr = errors.Join(p.killErr, fmt.Errorf("qemu (pid %d) still running %v after SIGKILL", p.Pid, KillTimeout))
		}
		p.Stdin.Close()
	})
	return p.killErr
}

// Exited is closed when qemu has exited.
func (p *VM) Exited() <-chan struct{} { return p.exited }

// Stderr returns what qemu itself printed so far.
func (p *VM) Stderr() string { return p.stderr.String() }
