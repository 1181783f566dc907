package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
	"github.com/cephdpdkd/cephdpdkd/roce/ping"
)

// cmdRoCEPing starts the data path of a configuration with a RoCE
// endpoint, connects to a listener the way rdma_cm does, sends messages
// and checks what comes back.
func cmdRoCEPing(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("roce-ping", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration with a roce section (required)")
	target := fs.String("target", "", "IPv4 address of the listener (required)")
	port := fs.Uint("port", 7471, "rdma_cm port of the listener")
	count := fs.Int("n", 10, "messages to send")
	size := fs.Int("s", 64, "bytes per message")
	mode := fs.String("mode", "echo", "echo: each message must come back unchanged (cephdpdkd's echo); reply: each gets a reply of its size (rdma_server: -n 1 -s 16); tose: n messages each way (ucmatose); stream: n×s bytes as one flow-controlled byte stream with the configuration's session buffers, as Ceph sends (a bridged port's sink)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	runDir := fs.String("run-dir", nicbind.DefaultRunDir, "directory of the state files (a port.bind, eal.hugepages or the af_xdp mode's program)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	addr, err := netip.ParseAddr(*target)
	if err != nil || !addr.Is4() || *path == "" || *port == 0 || *port > 65535 {
		fmt.Fprintln(stderr, "roce-ping: need --config FILE and --target IPv4 (and --port 1..65535)")
		return errUsage
	}
	pc := ping.Config{Count: *count, Size: *size, Timeout: *timeout}
	switch *mode {
	case "echo":
		pc.Mode = ping.ModeEcho
	case "tose":
		pc.Mode = ping.ModeTose
	case "reply":
		pc.Mode = ping.ModeReply
	case "stream":
		pc.Mode = ping.ModeStream
	default:
		fmt.Fprintf(stderr, "roce-ping: --mode %q: want echo, reply, tose or stream\n", *mode)
		return errUsage
	}
	cfg, err := loadConfig(*path, false)
	if err != nil {
		return err
	}
	if cfg.RoCE == nil {
		return fmt.Errorf("roce-ping: %s has no roce section", *path)
	}
	cfg.Metrics.Listen = "off"
	plan, err := daemon.NewPlan(cfg)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	// The data path takes the machine as `run` does: in the af_xdp mode
	// without the daemon's program, net_af_xdp would load libxdp's,
	// which hands every frame of the queue to the socket, ARP included.
	h := &host{
		nic:    nicSystem(nicbind.DefaultSysfs, *runDir),
		huge:   hugeSystem(nicbind.DefaultSysfs, *runDir),
		runDir: *runDir,
		log:    log,
	}
	var res ping.Result
	var stopErr error
	err = h.with(cfg, func(*xdp.Program) error {
		d, err := daemon.Start(plan, daemon.Options{Logger: log})
		if err != nil {
			return err
		}
		res, err = runPing(ctx, d, addr, uint16(*port), pc, *timeout)
		stopErr = d.Stop(context.Background())
		return err
	})
	if err != nil {
		return errors.Join(err, stopErr)
	}
	lo, mid, hi := res.RTT()
	fmt.Fprintf(stdout, "roce-ping %v:%d: qp %d → %d, connected in %v\n", addr, *port, res.QPN, res.RemoteQPN, res.Setup.Round(time.Microsecond))
	fmt.Fprintf(stdout, "%d sent, %d received, %d bytes in %v: %.2f MB/s\n", res.Sent, res.Received, res.Bytes,
		res.Elapsed.Round(time.Microsecond), res.Throughput()/1e6)
	if len(res.RTTs) > 0 {
		fmt.Fprintf(stdout, "rtt min/median/max = %v/%v/%v\n", lo.Round(time.Microsecond), mid.Round(time.Microsecond), hi.Round(time.Microsecond))
	}
	if res.Err != nil {
		return errors.Join(res.Err, stopErr)
	}
	return stopErr
}

func runPing(ctx context.Context, d *daemon.Daemon, addr netip.Addr, port uint16, pc ping.Config, timeout time.Duration) (ping.Result, error) {
	node := d.RoCE()
	if node == nil {
		return ping.Result{}, errors.New("roce-ping: the configuration starts no RoCE endpoint")
	}
	results := make(chan ping.Result, 1)
	if err := node.Ping(addr, port, pc, func(r ping.Result) { results <- r }); err != nil {
		return ping.Result{}, err
	}
	select {
	case r := <-results:
		// The result comes before the disconnect ends: let the client
		// free its QP and buffers before the daemon stops.
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if st, err := node.Status(ctx); err != nil || st.Pings == 0 {
				break
			}
		}
		return r, nil
	case <-ctx.Done():
		return ping.Result{}, ctx.Err()
	case <-time.After(timeout + 10*time.Second):
		return ping.Result{}, fmt.Errorf("roce-ping: no result after %v", timeout+10*time.Second)
	}
}
