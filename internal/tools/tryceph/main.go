//go:build linux

// Command tryceph shows cephdpdkd doing its job on one machine, for a
// newcomer (scripts/try-ceph.sh builds and runs it, as root):
//
//   - a real Ceph cluster (Debian's ceph-mon and a memstore ceph-osd) in a
//     network namespace, listening on the kernel interface that
//     cephdpdkd's exception path gives the node;
//   - cephdpdkd in front of it, its DPDK port (net_af_packet) on a veth
//     into a bridge namespace, with the kernel path and the RoCE bridge on;
//   - Debian's rados over TCP from the bridge namespace, every frame through
//     the daemon's port: objects put, read back and compared by SHA-256,
//     then `rados bench write`;
//   - where the Soft-RoCE guest image can be built (qemu), the same over
//     RoCE: rados in rdma_cm mode in a qemu (TCG) guest on the bridge,
//     whose connections the daemon terminates and bridges to the Ceph
//     daemons' TCP endpoints;
//   - the daemon's live status line during the benches, and a summary:
//     objects read back identical, MB/s over TCP and over RoCE, RoCE
//     sessions bridged, drops.
//
// Everything it makes (namespaces, veths, bridge, qemu, Ceph daemons,
// cephdpdkd) is removed when it ends, and on SIGINT or SIGTERM. It sets up
// with the test suite's own harness (internal/testenv/rocenode), so what
// it shows is what the end-to-end tests check.
//
// Usage:
//
//	tryceph [--daemon bin/cephdpdkd] [--bench 10s] [--roce auto|off] [-v]
//
// It exits 0 when every object read back identical and every step
// worked, 1 when something failed, 130 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line's.
type options struct {
	daemon  string
	bench   time.Duration
	roce    string
	verbose bool
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tryceph", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.daemon, "daemon", "bin/cephdpdkd", "the cephdpdkd binary to run")
	fs.DurationVar(&o.bench, "bench", 10*time.Second, "how long each rados bench writes (whole seconds, at least 1s)")
	fs.StringVar(&o.roce, "roce", "auto", "the RoCE part: auto (when the Soft-RoCE guest can be built here) or off")
	fs.BoolVar(&o.verbose, "v", false, "also print the set-up's own log")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || (o.roce != "auto" && o.roce != "off") || o.bench < time.Second {
		fmt.Fprintln(stderr, "usage: tryceph [--daemon bin/cephdpdkd] [--bench 10s] [--roce auto|off] [-v]")
		return 2
	}
	if err := precheck(o); err != nil {
		fmt.Fprintf(stderr, "tryceph: %v\n", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &runner{out: stdout, verbose: o.verbose}
	t := &tryCeph{r: r, o: o, out: stdout, t0: time.Now()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.run(ctx)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		r.stopping.Store(true)
		fmt.Fprintln(stdout, "\ninterrupted: stopping what runs, then cleaning up")
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			fmt.Fprintln(stdout, "a step did not stop within 30 s; cleaning up under it")
		}
	}
	t.step("cleaning up: guest, Ceph daemons, cephdpdkd, namespaces, veths, bridge")
	r.runCleanups()
	t.checkCleanedUp()
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stdout, "interrupted; everything it made is gone")
		return 130
	case r.Failed():
		fmt.Fprintln(stdout, "FAILED (see the errors above)")
		return 1
	}
	return 0
}

// precheck reports what makes a run impossible before anything is made.
func precheck(o options) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, DPDK); run scripts/try-ceph.sh as root")
	}
	if fi, err := os.Stat(o.daemon); err != nil || fi.IsDir() {
		return fmt.Errorf("no cephdpdkd binary at %s (scripts/try-ceph.sh builds bin/cephdpdkd; or pass --daemon)", o.daemon)
	}
	return nil
}
