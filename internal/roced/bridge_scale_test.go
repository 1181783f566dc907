package roced_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/roced"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/daemonproc"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
)

// TestBridgeScaleOverDPDK measures the bridge as an OSD node sees it:
// 10, 100 and 1000 concurrent rdma_cm connections through the daemon's
// DPDK port (net_af_packet on a veth pair whose other end is a second
// port of this process, where the test's rdma_cm clients run) bridged to a TCP listener in the kernel
// interface's namespace that accepts and holds them. At each level it
// logs the registered memory per idle connection, the process RSS, and
// the rate of connection setup and teardown. The 1000 level is skipped
// under -short.
func TestBridgeScaleOverDPDK(t *testing.T) {
	testenv.RequireRoot(t)
	levels := []int{10, 100, 1000}
	if testing.Short() {
		levels = levels[:2]
	}
	raiseNoFile(t, uint64(4*levels[len(levels)-1]+1024))
	const holdPort = 6800
	// The bridge's buffers are shared (512 receive, 256 send of
	// buffer_size: 96 MiB); a connection holds at most 2 of each.
	rig := newBridgeRig(t, bridgeConfig{net: 87, vdev: 72, ifPrefix: "cdds", sendBuffers: 2, recvBuffers: 2,
		memoryMB: 512, maxSessions: 1024, ports: fmt.Sprint(holdPort)})

	// The Ceph daemons' stand-in: accepts and holds every connection.
	var ln net.Listener
	if err := rig.node.Do(func() (err error) { ln, err = net.Listen("tcp", fmt.Sprintf(":%d", holdPort)); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	dropHeld := func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		held = nil
		mu.Unlock()
	}
	defer dropHeld()

	// Only warnings: a thousand connections' info lines are noise.
	logger := slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The node dials each connection's TCP side through its namespace's
	// one dialer thread, so a storm of REQs waits in line: retransmit no
	// sooner than rdma_cm would, and often enough not to give up.
	rig.start(t, logger, cm.Config{Timeout: 14, RetryCount: 7, MaxConns: 4 * levels[len(levels)-1],
		RetransmitTimeout: time.Second, MaxRetries: 10, TimeWait: 10 * time.Millisecond})
	d, stopDaemon, ep, mgr := rig.d, rig.stopDaemon, rig.ep, rig.mgr
	pd := ep.NewPD()
	// The clients' own buffers are tiny: the node is what is measured,
	// though the RSS is the whole process's, clients included.
	sc := session.DefaultConfig()
	sc.BufferSize, sc.SendBuffers, sc.RecvBuffers = 4096, 1, 1
	// The clients share this process's Go scheduler with the node: an
	// idle turn yields, as the node's dial goroutines need a P (in the
	// daemon they have one of their own).
	poll := func() {
		now := time.Now()
		if ep.Poll(now)+mgr.Poll(now) == 0 {
			runtime.Gosched()
		}
	}
	status := func() roced.Status {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := d.RoCE().Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	base := status()
	baseRSS := vmRSS(t)
	t.Logf("FIGURES bridge scale: idle daemon: %d bytes registered (the shared pools), RSS %.1f MiB",
		base.MemoryInUse, float64(baseRSS)/(1<<20))
	for _, level := range levels {
		cs := make([]*bridgeClient, level)
		start := time.Now()
		for i := range cs {
			c := rig.dial(t, pd, sc, holdPort)
			cs[i] = c
			if i%32 == 31 {
				poll()
			}
		}
		for end := time.Now().Add(30 * time.Second); ; poll() {
			n := 0
			for _, c := range cs {
				if c.connected {
					n++
				}
			}
			if n == level {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%d connections: %d answered in 30 s", level, n)
			}
		}
		setup := time.Since(start)
		failed := 0
		for _, c := range cs {
			if c.err != nil {
				if failed == 0 {
					t.Errorf("%d connections: %v", level, c.err)
				}
				failed++
			}
		}
		if failed > 0 {
			t.Fatalf("%d connections: %d failed", level, failed)
		}
		// Idle: let the kernel listener catch up, then measure.
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); poll() {
			mu.Lock()
			n := len(held)
			mu.Unlock()
			if n >= level {
				break
			}
		}
		st := status()
		rss := vmRSS(t)
		perConn := float64(st.MemoryInUse-base.MemoryInUse) / float64(level)

		start = time.Now()
		for i, c := range cs {
			if err := mgr.Disconnect(c.conn); err != nil {
				t.Fatal(err)
			}
			if i%32 == 31 {
				poll() // a storm, but one the TX ring can carry
			}
		}
		var clientsDown time.Duration
		for end := time.Now().Add(30 * time.Second); ; poll() {
			n := 0
			for _, c := range cs {
				if c.down {
					n++
				}
			}
			if n == level && clientsDown == 0 {
				clientsDown = time.Since(start)
			}
			if n == level && status().QPs == base.QPs {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%d connections: %d down in 30 s, node QPs %d", level, n, status().QPs)
			}
		}
		teardown := time.Since(start)
		for _, c := range cs {
			c.release()
		}
		dropHeld()
		t.Logf("FIGURES bridge scale: %4d connections: registered %d bytes in all, %.0f bytes more per idle connection "+
			"(per-session buffers at Ceph's defaults would be %d); RSS %.1f MiB (+%.1f KiB per connection, test clients included); "+
			"setup %.0f conn/s (%v), teardown %.0f conn/s (%v; clients down after %v)",
			level, st.MemoryInUse, perConn, (session.DefaultSendBuffers+session.DefaultRecvBuffers)*session.DefaultBufferSize,
			float64(rss)/(1<<20), float64(rss-baseRSS)/1024/float64(level),
			float64(level)/setup.Seconds(), setup.Round(time.Millisecond),
			float64(level)/teardown.Seconds(), teardown.Round(time.Millisecond), clientsDown.Round(time.Millisecond))
		if perConn != 0 {
			t.Errorf("%d idle connections registered %.0f bytes each beyond the shared pools", level, perConn)
		}
	}
	stopDaemon()
}

// raiseNoFile lifts the soft RLIMIT_NOFILE to at least n (up to the hard
// limit): each bridged connection costs the process two descriptors
// here, the bridge's socket and the listener's.
func raiseNoFile(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	lim.Cur = min(max(n, lim.Cur), lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < n {
		t.Skipf("RLIMIT_NOFILE hard limit %d is below the %d descriptors needed", lim.Max, n)
	}
}

// vmRSS returns this process's resident set size in bytes.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	rss, err := daemonproc.RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return rss
}
