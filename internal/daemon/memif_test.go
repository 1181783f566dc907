package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/logbuf"
	"github.com/cephdpdkd/cephdpdkd/pmd"
)

// memifPeer is a dpdk-testpmd process on the client end of a memif
// socket, generating RoCEv2-port UDP at full speed until it is killed.
type memifPeer struct {
	cmd  *exec.Cmd
	out  logbuf.Buffer
	done chan error
}

// startMemifPeer starts a testpmd generator in a process of its own on
// CPU 0, killed after a minute at the latest. The bounds here are
// generous: on a loaded machine a DPDK process may wait seconds for a
// CPU to start or to exit.
func startMemifPeer(t *testing.T, testpmd, sock, prefix string) *memifPeer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	p := &memifPeer{done: make(chan error, 1)}
	// --stats-period keeps a non-interactive testpmd forwarding until a
	// signal; without it, it waits for a line on stdin.
	p.cmd = exec.CommandContext(ctx, testpmd,
		"--lcores=0@0,1@0", "--no-huge", "-m", "256", "--no-pci",
		"--file-prefix", prefix, "--log-level=*:warning",
		"--vdev=net_memif0,role=client,socket="+sock,
		"--", "--forward-mode=txonly", "--auto-start", "--stats-period=60",
		"--txpkts=128", "--burst=32", "--tx-ip=10.99.0.2,10.99.0.1", "--tx-udp=49152,4791",
		"--total-num-mbufs=4096")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait(); cancel() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		// A killed testpmd leaves its runtime directory behind.
		os.RemoveAll(filepath.Join("/var/run/dpdk", prefix))
	})
	return p
}

// leave ends the peer: gracefully (testpmd closes its port, which sends
// memif's DISCONNECT) or by SIGKILL (the daemon sees the control socket
// close), and waits for the process to be gone.
func (p *memifPeer) leave(t *testing.T, graceful bool) {
	t.Helper()
	sig := syscall.SIGKILL
	if graceful {
		sig = syscall.SIGTERM
	}
	p.cmd.Process.Signal(sig)
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && !graceful) {
			t.Fatalf("testpmd: %v\n%s", err, p.out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("testpmd did not exit on %v\n%s", sig, p.out.String())
	}
}

// A memif peer leaves and comes back 20 times while it floods the daemon:
// the daemon keeps polling through every disconnect (DPDK's interrupt
// thread unmaps the shared rings then), traffic flows again after each
// reconnect, every packet received is counted, and every mbuf is back
// at stop.
func TestMemifPeerLeavesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("20 testpmd processes: not in -short")
	}
	testpmd, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		t.Skip("dpdk-testpmd not installed")
	}
	const rounds = 20
	sock := filepath.Join(t.TempDir(), "memif.sock")
	d := start(t, cephConfig(t, "memifpeer", "net_memif22,role=server,socket="+sock, 4096))
	up := func() bool {
		l, err := d.Port().Link()
		return err == nil && l.Up
	}
	var flowAfter, downAfter time.Duration
	runStart := time.Now()
	for i := range rounds {
		before := received(d)
		t0 := time.Now()
		p := startMemifPeer(t, testpmd, sock, fmt.Sprintf("cdd-memifpeer-%d-%d", os.Getpid(), i))
		t.Cleanup(func() {
			if t.Failed() {
				var st pmd.GateStats
				if g := d.Gate(); g != nil {
					st = g.Stats()
				}
				t.Logf("round %d: gate %+v, loop iterations %d, peer's output:\n%s", i, st, d.Pollers()[0].Iterations(), p.out.String())
			}
		})
		waitFor(t, 20*time.Second, fmt.Sprintf("round %d: memif link up", i), up)
		waitFor(t, 20*time.Second, fmt.Sprintf("round %d: traffic", i), func() bool { return received(d) > before+10000 })
		flow := time.Since(t0)
		flowAfter = max(flowAfter, flow)
		// Under load: the loop is inside rx_burst most of the time.
		time.Sleep(30 * time.Millisecond)
		t1 := time.Now()
		p.leave(t, i%2 == 0)
		waitFor(t, 30*time.Second, fmt.Sprintf("round %d: memif link down", i), func() bool { return !up() })
		down := time.Since(t1)
		downAfter = max(downAfter, down)
		t.Logf("round %d: traffic %v after the peer started, link down %v after it left, %d packets", i, flow.Round(time.Millisecond), down.Round(time.Millisecond), received(d)-before)
	}
	// The loop still runs after the last disconnect.
	it := d.Pollers()[0].Iterations()
	waitFor(t, 5*time.Second, "the poll loop to go on", func() bool { return d.Pollers()[0].Iterations() > it })
	rx := received(d)
	var total uint64
	for _, s := range d.Services() {
		total += s.Stats.Packets.Load() + s.Stats.Drops.Load()
	}
	t.Logf("%d rounds: %d packets received, slowest traffic start %v, slowest link-down %v", rounds, rx, flowAfter, downAfter)
	if g := d.Gate(); g == nil {
		t.Error("net_memif port polled without the interrupt-thread gate")
	} else {
		st := g.Stats()
		run := time.Since(runStart)
		t.Logf("gate: %d windows in %v; loops held %v (%.3f%% of the run, longest %v); waits for their reports %v (longest %v)",
			st.Windows, run.Round(time.Millisecond), st.Held, 100*float64(st.Held)/float64(run), st.MaxHeld, st.Wait, st.MaxWait)
	}
	if rx != total {
		t.Errorf("received %d, dispatched+dropped %d", rx, total)
	}
}
