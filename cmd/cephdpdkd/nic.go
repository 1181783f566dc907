package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/hugepages"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
)

// nicSystem returns the sysfs view the NIC commands use; tests replace
// it to put a fake kernel behind the writes.
var nicSystem = func(sysfs, runDir string) *nicbind.System {
	return &nicbind.System{Sysfs: sysfs, RunDir: runDir}
}

// hugeSystem is nicSystem's counterpart for hugepages.
var hugeSystem = func(sysfs, runDir string) *hugepages.System {
	return &hugepages.System{Sysfs: sysfs, RunDir: runDir}
}

// cmdNICStatus lists the network PCI devices and their drivers, like
// dpdk-devbind.py --status. It only reads.
func cmdNICStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("nic-status")
	fs.SetOutput(stderr)
	sysfs := fs.String("sysfs", nicbind.DefaultSysfs, "sysfs mount point")
	runDir := fs.String("run-dir", nicbind.DefaultRunDir, "directory of the state files that record original drivers")
	if err := parseNoArgs(fs, args, stderr); err != nil {
		return err
	}
	devs, err := nicSystem(*sysfs, *runDir).Status()
	if err != nil {
		return fmt.Errorf("nic-status: %w", err)
	}
	var dpdk, kernel, none []string
	for _, d := range devs {
		line := fmt.Sprintf("%s %s:%s", d.PCI, d.Vendor, d.DeviceID)
		if d.Interface != "" {
			line += " if=" + d.Interface
		}
		if d.Driver != "" {
			line += " drv=" + d.Driver
		}
		if d.Override != "" && d.Override != d.Driver {
			line += " override=" + d.Override
		}
		if d.Port != "" {
			orig := orDash(d.OrigDriver)
			if d.OrigInterface != "" {
				orig += "(" + d.OrigInterface + ")"
			}
			line += fmt.Sprintf(" orig=%s port=%s", orig, d.Port)
		}
		switch {
		case d.DPDK():
			dpdk = append(dpdk, line)
		case d.Driver != "":
			kernel = append(kernel, line)
		default:
			none = append(none, line)
		}
	}
	section := func(title string, lines []string) {
		fmt.Fprintf(stdout, "%s\n%s\n", title, strings.Repeat("=", len(title)))
		if len(lines) == 0 {
			fmt.Fprintln(stdout, "<none>")
		}
		for _, l := range lines {
			fmt.Fprintln(stdout, l)
		}
		fmt.Fprintln(stdout)
	}
	section("Network devices using a DPDK driver", dpdk)
	section("Network devices using a kernel driver", kernel)
	section("Network devices without a driver", none)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cmdRestoreNIC gives the configuration's port back to the kernel driver
// its state file records, and the hugepages run reserved for it.
func cmdRestoreNIC(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("restore-nic")
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file whose port to restore (required)")
	sysfs := fs.String("sysfs", nicbind.DefaultSysfs, "sysfs mount point")
	runDir := fs.String("run-dir", nicbind.DefaultRunDir, "directory of the state files")
	keepXDP := fs.Bool("keep-xdp", false, "leave the af_xdp mode's program attached, for the next run to take back without resetting the NIC's rings (a container's restore before each start)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() != 0 || *path == "" {
		fmt.Fprintln(stderr, "usage: cephdpdkd restore-nic --config FILE [--sysfs DIR] [--run-dir DIR] [--keep-xdp]")
		return errUsage
	}
	// No host check: the device is bound to a DPDK driver, not as the
	// configuration's host checks expect a NIC to be.
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	// The NIC first, as the daemon's stop does, then the hugepages;
	// both are tried whatever the other's outcome.
	nicErr := restoreNIC(cfg, nicSystem(*sysfs, *runDir), stdout)
	xdpErr := restoreXDP(cfg, *runDir, *keepXDP, stdout)
	hugeErr := restoreHugepages(cfg, hugeSystem(*sysfs, *runDir), stdout)
	return errors.Join(nicErr, xdpErr, hugeErr)
}

func restoreNIC(cfg *config.Config, sys *nicbind.System, stdout io.Writer) error {
	state := sys.StatePath(cfg.Port.Name)
	st, err := sys.Restore(state)
	if err != nil {
		return err
	}
	if st == nil {
		fmt.Fprintf(stdout, "restore-nic: port %s: nothing to restore (no state file %s)\n", cfg.Port.Name, state)
		return nil
	}
	if st.OrigDriver == "" {
		fmt.Fprintf(stdout, "restore-nic: port %s: %s released from %s; it had no driver before\n", st.Port, st.PCI, st.Driver)
		return nil
	}
	msg := fmt.Sprintf("restore-nic: port %s: %s back on %s", st.Port, st.PCI, st.OrigDriver)
	if st.Interface != "" {
		msg += ", interface " + st.Interface
		switch {
		case !st.Network.Empty():
			msg += fmt.Sprintf(" up with addresses %v and routes %v", st.Network.Addresses, st.Network.Routes)
		case st.Up:
			msg += " (up)"
		}
	}
	fmt.Fprintln(stdout, msg)
	return nil
}

// restoreHugepages gives back the hugepages (and mount) that run
// reserved for the port, as its state file records.
func restoreHugepages(cfg *config.Config, sys *hugepages.System, stdout io.Writer) error {
	st, err := sys.Release(sys.StatePath(cfg.Port.Name))
	if err != nil || st == nil {
		return err
	}
	msg := fmt.Sprintf("restore-nic: port %s: gave back %d hugepages of %d kB", st.Port, st.Added, st.SizeKB)
	if st.Mounted != "" {
		msg += ", released the hugetlbfs mount " + st.Mounted
	}
	fmt.Fprintln(stdout, msg)
	return nil
}
