//go:build linux

package sysguest

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
)

// NIC models qemu emulates that DPDK has a PMD for.
const (
	E1000  = "e1000"          // 82540EM: e1000 in the kernel, net_e1000_em in DPDK
	E1000E = "e1000e"         // 82574L: e1000e, net_e1000_em
	Virtio = "virtio-net-pci" // virtio_net, net_virtio
)

// NICSlot is the PCI slot of the guest's NIC on bus 0, so its address is
// NICAddr and predictable interface naming calls it ens5.
const (
	NICSlot = 5
	NICAddr = "0000:00:05.0"
)

// Options configure Boot.
type Options struct {
	// NIC is the qemu model of the guest's NIC (default E1000).
	NIC string
	// MAC is the NIC's address (default 52:54:00:00:00:05).
	MAC net.HardwareAddr
	// IOMMU gives the guest an emulated Intel IOMMU (q35 with
	// intel-iommu, intel_iommu=on iommu=pt), so that vfio-pci can bind.
	IOMMU bool
	// MemoryMiB is the guest's memory (default 1536).
	MemoryMiB int
	// Hugepages is the number of 2 MiB pages the kernel reserves at boot.
	Hugepages int
	// Files are put into the root before systemd starts.
	Files []File
	// Reboot lets the guest reboot in place (Guest.Reboot) rather than
	// make qemu exit. The root is in memory: a reboot starts again from
	// the image and Files, and nothing written after boot survives it.
	Reboot bool
	// BoundAtBoot says that a unit in Files takes the NIC for DPDK while
	// the guest boots: Boot does not look for its kernel interface and
	// driver, which Guest.Interface and Guest.Driver leave empty.
	BoundAtBoot bool
}

// Guest is a running qemu guest whose PID 1 is systemd, with an emulated
// PCI NIC at NICAddr on a tap of a qemuvm.Switch.
type Guest struct {
	// Tap is the NIC's tap device in the bridge's namespace.
	Tap string
	// MAC is the NIC's hardware address.
	MAC net.HardwareAddr
	// Interface is the NIC's kernel interface at boot (ens5).
	Interface string
	// Driver is the NIC's kernel driver at boot (e1000).
	Driver string
	// BootTime is the time from starting qemu to systemd's boot being
	// over and the shell answering.
	BootTime time.Duration
	// Ready is the READY line of the control shell: the guest's uptime and
	// the system state (running, or degraded with failed units).
	Ready string

	bridge *qemuvm.Switch
	dir    string // initrd and control socket
	proc   *qemuvm.VM
	ctl    net.Conn
	ctlLog *qemuvm.Console
	sh     *qemuvm.Shell

	reboot bool // Options.Reboot

	closeOnce sync.Once
	closeErr  error
}

const (
	readyMarker = "SYSGUEST-READY"
	// MaxCommandLen bounds what Run types: a tty line holds 4095 bytes.
	MaxCommandLen = 4000
	// ctlTimeout bounds the wait for qemu's control socket.
	ctlTimeout = 10 * time.Second
)

// Boot starts the guest with its NIC on a new tap of b, and waits until
// systemd has finished booting and the control shell on ttyS1 answers.
// The image comes from scripts/systemd-guest-image.sh, run once per test
// binary (ctx bounds the wait for it too). t's cleanup kills qemu and
// removes the tap and the run's files; qemu also gets SIGKILL if the test
// process dies first. Register the bridge before booting, so that the
// guest is gone before its namespace is deleted.
func Boot(ctx context.Context, t testing.TB, b *qemuvm.Switch, opts Options) (*Guest, error) {
	t.Helper()
	if opts.NIC == "" {
		opts.NIC = E1000
	}
	switch opts.NIC {
	case E1000, E1000E, Virtio:
	default:
		return nil, fmt.Errorf("sysguest: NIC model %q: want %s, %s or %s", opts.NIC, E1000, E1000E, Virtio)
	}
	if opts.MAC == nil {
		opts.MAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, NICSlot}
	}
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = 1536
	}
	im, err := Image(ctx)
	if err != nil {
		return nil, err
	}
	g := &Guest{Tap: b.NewTapName(), MAC: opts.MAC, bridge: b, ctlLog: qemuvm.NewConsole(), reboot: opts.Reboot}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	// Not t.TempDir: a unix socket path must stay under 108 bytes.
	if g.dir, err = os.MkdirTemp("", "sysguest-"); err != nil {
		return nil, fmt.Errorf("sysguest: %w", err)
	}
	initrd := filepath.Join(g.dir, "initrd.img")
	if err := writeInitrd(initrd, im, opts.Files); err != nil {
		return nil, err
	}
	if err := b.AddTap(g.Tap); err != nil {
		return nil, err
	}

	sock := filepath.Join(g.dir, "ctl.sock")
	kargs := []string{"console=ttyS0", "rdinit=/sbin/init", "panic=-1", "quiet", "loglevel=4",
		"systemd.show_status=0", "hugepages=" + strconv.Itoa(opts.Hugepages)}
	var machine []string
	if opts.IOMMU {
		// intel-iommu comes before the devices it translates for;
		// iommu=pt keeps uio_pci_generic usable next to vfio-pci.
		machine = []string{"-machine", "q35", "-device", "intel-iommu"}
		kargs = append(kargs, "intel_iommu=on", "iommu=pt")
	}
	args := []string{"-name", b.NS + "/sysguest", "-nodefaults", "-no-user-config", "-display", "none",
		"-monitor", "none", "-m", strconv.Itoa(opts.MemoryMiB), "-smp", "2",
		"-accel", "tcg,thread=multi", "-cpu", "max",
		"-serial", "stdio",
		"-chardev", "socket,id=ctl,server=on,wait=off,path=" + qemuvm.Escape(sock),
		"-serial", "chardev:ctl"}
	if !opts.Reboot {
		// A reboot (or a panic, with panic=-1) ends qemu.
		args = append(args, "-no-reboot")
	}
	args = append(args, machine...)
	args = append(args,
		"-kernel", im.Kernel(), "-initrd", initrd, "-append", strings.Join(kargs, " "),
		"-netdev", "tap,id=n0,ifname="+g.Tap+",script=no,downscript=no",
		"-device", fmt.Sprintf("%s,netdev=n0,mac=%s,addr=%02x,romfile=", opts.NIC, opts.MAC, NICSlot))

	start := time.Now()
	if g.proc, err = qemuvm.Start(b.NS, args); err != nil {
		return nil, fmt.Errorf("sysguest: %w", err)
	}
	if err := g.connect(ctx, sock); err != nil {
		return nil, fmt.Errorf("sysguest: %w\n%s", err, qemuvm.Tail(g.Log(), 40))
	}
	if err := g.waitReady(ctx, 0); err != nil {
		return nil, fmt.Errorf("sysguest: %w\n%s", err, qemuvm.Tail(g.Log(), 40))
	}
	g.BootTime = time.Since(start)
	if !opts.BoundAtBoot {
		if err := g.findNIC(ctx); err != nil {
			return nil, err
		}
	}
	t.Logf("sysguest: %s up in %v (%s), %s %s at %s (%s); image %s (script ran %v once per test binary)",
		opts.NIC, g.BootTime.Round(time.Millisecond), g.Ready, g.Interface, g.MAC, NICAddr, g.Driver,
		im.Dir, im.Took.Round(time.Millisecond))
	return g, nil
}

// connect opens qemu's control socket (ttyS1), which appears once qemu
// has started.
func (g *Guest) connect(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, ctlTimeout)
	defer cancel()
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", sock)
		if err == nil {
			g.ctl = conn
			g.sh = qemuvm.NewShell(g.ctlLog, conn, "sysguest", MaxCommandLen)
			go g.ctlLog.Collect(conn)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("control socket %s: %w", sock, err)
		case <-g.proc.Exited():
			return errors.New("qemu exited")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitReady waits for the control shell's READY line in what ttyS1 has
// carried from offset from on.
func (g *Guest) waitReady(ctx context.Context, from int) error {
	err := g.ctlLog.WaitFor(ctx, from, func(out []byte) bool {
		i := bytes.Index(out, []byte(readyMarker+" "))
		if i < 0 {
			return false
		}
		j := bytes.IndexByte(out[i:], '\n')
		if j < 0 {
			return false
		}
		g.Ready = string(bytes.TrimSpace(out[i+len(readyMarker) : i+j]))
		return true
	})
	if err != nil {
		return fmt.Errorf("waiting for %s on ttyS1: %w", readyMarker, err)
	}
	return nil
}

// Reboot reboots the guest with systemctl reboot, so that systemd stops
// the units in order as at any reboot, and waits until it has booted
// again and the control shell answers; it returns how long that took.
// The guest must have been booted with Options.Reboot.
func (g *Guest) Reboot(ctx context.Context) (time.Duration, error) {
	if !g.reboot {
		return 0, errors.New("sysguest: Reboot needs Options.Reboot (qemu -no-reboot would exit)")
	}
	from := g.ctlLog.Len()
	start := time.Now()
	// --no-block: the command returns before systemd stops anything.
	if _, err := g.RunOK(ctx, "systemctl reboot --no-block"); err != nil {
		return 0, err
	}
	if err := g.waitReady(ctx, from); err != nil {
		return 0, fmt.Errorf("sysguest: after the reboot: %w\n%s", err, qemuvm.Tail(g.Log(), 40))
	}
	g.BootTime = time.Since(start)
	return g.BootTime, nil
}

// findNIC records the NIC's interface and driver.
func (g *Guest) findNIC(ctx context.Context) error {
	var err error
	if g.Driver, err = g.NICDriver(ctx); err != nil {
		return err
	}
	if g.Interface, err = g.NICInterface(ctx); err != nil {
		return err
	}
	if g.Interface == "" {
		return fmt.Errorf("sysguest: %s (driver %q) has no interface after boot\n%s", NICAddr, g.Driver, qemuvm.Tail(g.Log(), 40))
	}
	return nil
}

// NICDriver returns the driver the NIC is bound to now, "" for none.
func (g *Guest) NICDriver(ctx context.Context) (string, error) {
	out, err := g.RunOK(ctx, "basename \"$(readlink /sys/bus/pci/devices/"+NICAddr+"/driver)\" 2>/dev/null || true")
	if err != nil {
		return "", err
	}
	if d := strings.TrimSpace(out); d != "." && d != "driver" {
		return d, nil
	}
	return "", nil
}

// NICInterface returns the NIC's kernel interface now, "" for none (a
// DPDK driver has it). virtio-net has it one level down, under virtioN.
func (g *Guest) NICInterface(ctx context.Context) (string, error) {
	out, err := g.RunOK(ctx, "ls /sys/bus/pci/devices/"+NICAddr+"/net /sys/bus/pci/devices/"+NICAddr+"/virtio*/net 2>/dev/null || true")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Fields(out) {
		if !strings.HasSuffix(l, ":") {
			return l, nil
		}
	}
	return "", nil
}

// Run runs a shell command (bash) as root in the guest and returns its
// output (standard output and error interleaved) and exit status; see
// qemuvm.Shell.Run.
func (g *Guest) Run(ctx context.Context, cmd string) (out string, exitCode int, err error) {
	return g.sh.Run(ctx, cmd)
}

// RunOK runs cmd and fails unless it exits 0.
func (g *Guest) RunOK(ctx context.Context, cmd string) (string, error) {
	out, code, err := g.Run(ctx, cmd)
	if err != nil {
		return out, err
	}
	if code != 0 {
		return out, fmt.Errorf("sysguest: %s: exit %d: %s", cmd, code, strings.TrimSpace(out))
	}
	return out, nil
}

// WriteFile writes data to file name in the guest (its directory is
// created) through the shell, base64-encoded in pieces that fit a command
// line: for files made after boot, such as configurations that name what
// the guest found. Files known before boot go in Options.Files.
func (g *Guest) WriteFile(ctx context.Context, name string, data []byte, mode os.FileMode) error {
	q := qemuvm.ShellQuote(name)
	tmp := qemuvm.ShellQuote(name + ".sysguest-tmp")
	if _, err := g.RunOK(ctx, fmt.Sprintf("mkdir -p \"$(dirname %s)\" && : >%s", q, tmp)); err != nil {
		return err
	}
	const chunk = 2400 // bytes of data: 3200 of base64 a line
	for off := 0; off < len(data); off += chunk {
		b64 := base64.StdEncoding.EncodeToString(data[off:min(off+chunk, len(data))])
		if _, err := g.RunOK(ctx, fmt.Sprintf("echo %s | base64 -d >>%s", b64, tmp)); err != nil {
			return err
		}
	}
	_, err := g.RunOK(ctx, fmt.Sprintf("chmod %o %s && mv %s %s", mode.Perm(), tmp, tmp, q))
	return err
}

// Log returns what the guest wrote to its console (ttyS0: kernel and
// systemd messages), then to the control shell, then qemu's own messages.
func (g *Guest) Log() string {
	var b strings.Builder
	if g.proc != nil {
		b.WriteString(g.proc.Console.String())
	}
	if s := g.ctlLog.String(); s != "" {
		b.WriteString("\n--- ttyS1 ---\n" + s)
	}
	if g.proc != nil {
		if e := g.proc.Stderr(); e != "" {
			b.WriteString("\n--- qemu stderr ---\n" + e)
		}
	}
	return b.String()
}

// Console returns what the guest wrote to its console (ttyS0) so far.
func (g *Guest) Console() string {
	if g.proc == nil {
		return ""
	}
	return g.proc.Console.String()
}

// Exited is closed when qemu has exited.
func (g *Guest) Exited() <-chan struct{} { return g.proc.Exited() }

// Close kills the guest, removes its tap and the run's files. The test's
// cleanup calls it. Later calls return the first's result.
func (g *Guest) Close() error {
	g.closeOnce.Do(func() {
		var errs []error
		if g.ctl != nil {
			g.ctl.Close()
		}
		if g.proc != nil {
			errs = append(errs, g.proc.Kill())
		}
		errs = append(errs, g.bridge.DelTap(g.Tap))
		if g.dir != "" {
			errs = append(errs, os.RemoveAll(g.dir))
		}
		if err := errors.Join(errs...); err != nil {
			g.closeErr = fmt.Errorf("sysguest: %w", err)
		}
	})
	return g.closeErr
}
