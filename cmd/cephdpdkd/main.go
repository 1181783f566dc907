// Command cephdpdkd gives a Ceph node a kernel-bypass network path: it runs
// a DPDK port, classifies every received packet and hands it to the ring of
// the Ceph service that claims it.
//
// Usage:
//
//	cephdpdkd run [--config FILE] [--run-dir DIR]  run the daemon (embedded default config without --config)
//	cephdpdkd check-config [--offline] [--run-dir DIR] [--instances DIR] FILE  validate a configuration and print the plan
//	cephdpdkd status [--url URL]     print a running daemon's status line
//	cephdpdkd reload --config FILE   check FILE, then have the daemon running it reload it (SIGHUP)
//	cephdpdkd pcap-check FILE        verify every RoCEv2 frame of a capture
//	cephdpdkd roce-ping --config FILE --target IP [--port P] [-n N] [-s S] [--run-dir DIR]
//	cephdpdkd nic-status [--sysfs DIR] [--run-dir DIR]
//	cephdpdkd restore-nic --config FILE [--sysfs DIR] [--run-dir DIR] [--keep-xdp]
//	cephdpdkd --version
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
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks a command line mistake: exit status 2.
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "run" {
		// The daemon handles its signals itself (daemonSignals).
		return exitStatus(cmdRun(args[1:], stdout, stderr), stderr)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	var err error
	switch args[0] {
	case "check-config":
		err = cmdCheckConfig(args[1:], stdout, stderr)
	case "status":
		err = cmdStatus(ctx, args[1:], stdout, stderr)
	case "reload":
		err = cmdReload(ctx, args[1:], stdout, stderr)
	case "roce-ping":
		err = cmdRoCEPing(ctx, args[1:], stdout, stderr)
	case "nic-status":
		err = cmdNICStatus(args[1:], stdout, stderr)
	case "restore-nic":
		err = cmdRestoreNIC(args[1:], stdout, stderr)
	case "pcap-check":
		var bad bool
		bad, err = cmdPcapCheck(args[1:], stdout, stderr)
		if err == nil && bad {
			return 1
		}
	case "--version", "-version", "version":
		fmt.Fprintf(stdout, "cephdpdkd %s\n", version)
		return 0
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "cephdpdkd: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return exitStatus(err, stderr)
}

// exitStatus reports err and returns the exit status for it.
func exitStatus(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		return 2
	default:
		fmt.Fprintf(stderr, "cephdpdkd: %v\n", err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  cephdpdkd run [--config FILE] [--status=auto|on|off] [--run-dir DIR]
                                 run the daemon; without --config, the embedded default
                                 (a net_pcap vdev replaying sample Ceph traffic, no NIC needed)
  cephdpdkd check-config [--offline] [--run-dir DIR] [--instances DIR] FILE
                                 validate a configuration against this machine (--offline: for
                                 another one) and the other instances in /etc/cephdpdkd (EAL file
                                 prefix, metrics address, NIC), and print what it will build
  cephdpdkd status [--url URL]   print a running daemon's status from its metrics
  cephdpdkd reload --config FILE [--wait DURATION]
                                 check FILE, then signal the daemon running it (found by its EAL
                                 file prefix's lock) to reload it (SIGHUP), and wait for the result
                                 on its metrics endpoint; rules, services and their consumers and
                                 priorities change live, the port, EAL, lcores and pool do not
  cephdpdkd pcap-check FILE      decode and verify every RoCEv2 frame of a pcap/pcapng
  cephdpdkd roce-ping --config FILE --target IP [--port P] [-n N] [-s S] [--mode echo|reply|tose|stream] [--run-dir DIR]
                                 connect to an rdma_cm listener over the config's RoCE endpoint,
                                 send N messages of S bytes, check them, print latency and throughput
  cephdpdkd nic-status [--sysfs DIR] [--run-dir DIR]
                                 list network PCI devices with their drivers (read-only)
  cephdpdkd restore-nic --config FILE [--sysfs DIR] [--run-dir DIR] [--keep-xdp]
                                 give the config's port back to the kernel driver recorded when
                                 port.bind bound it, and the hugepages eal.hugepages added
                                 (after a crash; a no-op when nothing is recorded)
  cephdpdkd --version
`)
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return fs
}

// parseNoArgs parses the flags of a subcommand that takes nothing else.
func parseNoArgs(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return errUsage
	}
	return nil
}
