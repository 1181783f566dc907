//go:build linux

package rxeguest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/netcmd"
	"github.com/cephdpdkd/cephdpdkd/internal/testenv/qemuvm"
)

// ErrBootFailed reports that a guest's /init could not set up eth0 or rxe0.
var ErrBootFailed = errors.New("guest init failed")

const (
	readyMarker  = "RXE-READY"
	failedMarker = "RXE-FAILED"
)

// Guest is a running qemu guest with rxe0 on eth0, attached to a Bridge.
type Guest struct {
	// Name is the guest's hostname.
	Name string
	// IP is eth0's address.
	IP netip.Prefix
	// MAC is eth0's hardware address.
	MAC net.HardwareAddr
	// Tap is the tap device in the bridge's namespace the guest uses.
	Tap string
	// BootTime is the time from starting qemu to rxe0 being up.
	BootTime time.Duration

	bridge   *Switch
	shareDir string        // host side of GuestShareDir; "" without WithShare
	qmpPath  string        // qemu's QMP socket (Virtqueues)
	proc     *qemuvm.VM    // nil until started
	sh       *qemuvm.Shell // the console's shell

	xfers atomic.Int64 // numbers the files passed through the share

	closeOnce sync.Once
	closeErr  error
}

// Option changes how Boot starts a guest.
type Option func(*config)

type config struct {
	mac    net.HardwareAddr
	mtu    int
	memMiB int
	ipv6   bool
	accel  []string
	share  bool
	image  variant
}

// WithMAC sets eth0's MAC address. The default is 52:54:00 followed by the
// last three bytes of the guest's address.
func WithMAC(mac net.HardwareAddr) Option { return func(c *config) { c.mac = mac } }

// WithMTU sets the MTU of eth0 and of its tap. Every other port of the
// bridge must allow it too.
func WithMTU(mtu int) Option { return func(c *config) { c.mtu = mtu } }

// WithMemory sets the guest's memory in MiB (default 1024).
func WithMemory(mib int) Option { return func(c *config) { c.memMiB = mib } }

// WithIPv6 keeps IPv6 on eth0. By default it is off, so that the guest
// puts nothing on the bridge but ARP and what its commands send; rxe0 still
// has its default fe80:: GID at index 0, and the IPv4 one at index 1.
func WithIPv6() Option { return func(c *config) { c.ipv6 = true } }

// WithShare gives the guest a directory of the host's, Guest.ShareDir,
// mounted at GuestShareDir over virtio-9p, which WriteFile, CopyIn,
// ReadFile and CopyOut pass files through: the serial console is too slow
// for more than a command line. Without caching in the guest, what either
// side writes there the other sees at once. Boot creates the directory;
// the guest's cleanup removes it.
func WithShare() Option { return func(c *config) { c.share = true } }

// WithCeph boots the Ceph client image (scripts/rxe-guest-ceph-image.sh):
// the base image plus the host's Debian rados (Ceph 16.2) with the shared
// libraries and plugins it needs, for Guest.SetupCeph and Guest.Rados. It
// implies WithShare. CephAvailable says whether it can be built here.
func WithCeph() Option { return func(c *config) { c.image, c.share = cephImage, true } }

// withCephDaemons is WithCeph with ceph-mon and ceph-osd in the image too,
// for a cluster inside a guest.
func withCephDaemons() Option { return func(c *config) { c.image, c.share = cephDaemonsImage, true } }

// WithAccel replaces the default "-accel tcg,thread=multi -cpu max" qemu
// arguments, for instance with "-enable-kvm -cpu host" on a host with real
// hardware virtualisation.
func WithAccel(args ...string) Option { return func(c *config) { c.accel = args } }

var guestName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,31}$`)

// Boot starts a guest named name (its hostname) on a new tap of b, with
// address addr on eth0, and waits until its init reports rxe0 up. The
// guest image comes from scripts/rxe-guest-image.sh (WithCeph:
// scripts/rxe-guest-ceph-image.sh), run once per test binary (the first
// run on a machine installs qemu and downloads packages, which can take
// minutes; ctx bounds the wait for it too). t's cleanup kills qemu; qemu
// also gets SIGKILL if the test process dies first. Register the bridge
// before booting, so that the guests are gone before its namespace is
// deleted.
func Boot(ctx context.Context, t harness.TB, b *Switch, name string, addr netip.Prefix, opts ...Option) (*Guest, error) {
	t.Helper()
	if !guestName.MatchString(name) {
		return nil, fmt.Errorf("rxeguest: guest name %q: want letters, digits and dashes", name)
	}
	if !addr.IsValid() {
		return nil, fmt.Errorf("rxeguest: guest %s: no address", name)
	}
	cfg := config{memMiB: 1024, accel: []string{"-accel", "tcg,thread=multi", "-cpu", "max"}}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.mac == nil {
		a := addr.Addr().As16()
		cfg.mac = net.HardwareAddr{0x52, 0x54, 0x00, a[13], a[14], a[15]}
	}
	im, err := getImage(ctx, cfg.image)
	if err != nil {
		return nil, err
	}
	g := &Guest{
		Name:   name,
		IP:     addr,
		MAC:    cfg.mac,
		Tap:    b.NewTapName(),
		bridge: b,
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := b.AddTap(g.Tap); err != nil {
		return nil, err
	}
	if cfg.share {
		// Not t.TempDir: qemu's option syntax and the test's name (which
		// t.TempDir's path carries) do not mix; shutdown removes it.
		if g.shareDir, err = os.MkdirTemp("", "cddrxe-share-"); err != nil {
			return nil, fmt.Errorf("rxeguest: guest %s: %w", name, err)
		}
	}
	if cfg.mtu > 0 {
		if err := netcmd.IP("-n", b.NS, "link", "set", "dev", g.Tap, "mtu", strconv.Itoa(cfg.mtu)); err != nil {
			return nil, fmt.Errorf("rxeguest: guest %s: %w", name, err)
		}
	}

	appendArgs := []string{"console=ttyS0", "quiet", "panic=-1",
		"rxe_ip=" + addr.String(), "rxe_name=" + name}
	if cfg.mtu > 0 {
		appendArgs = append(appendArgs, "rxe_mtu="+strconv.Itoa(cfg.mtu))
	}
	if cfg.ipv6 {
		appendArgs = append(appendArgs, "rxe_ipv6=1")
	}
	if cfg.share {
		appendArgs = append(appendArgs, "rxe_share="+shareTag)
	}
	// A QMP socket for failure reports (Virtqueues); qemu removes it when
	// it exits normally, shutdown otherwise.
	g.qmpPath = filepath.Join(os.TempDir(), "cddrxe-"+b.NS+"-"+name+".qmp")
	args := []string{"-name", b.NS + "/" + name, "-nodefaults", "-no-user-config", "-display", "none",
		"-monitor", "none", "-qmp", "unix:" + qemuvm.Escape(g.qmpPath) + ",server=on,wait=off", "-serial", "stdio", "-no-reboot",
		"-m", strconv.Itoa(cfg.memMiB), "-smp", "1"}
	args = append(args, cfg.accel...)
	args = append(args,
		"-kernel", im.Kernel(), "-initrd", im.Initrd(),
		"-append", strings.Join(appendArgs, " "),
		"-netdev", "tap,id=n0,ifname="+g.Tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,id="+nicID+",netdev=n0,mac="+cfg.mac.String()+",romfile=")
	if cfg.share {
		// security_model=none: files are created as qemu's user (root),
		// and the guest's chown and chmod are ignored.
		args = append(args,
			"-fsdev", "local,id=share,security_model=none,path="+qemuvm.Escape(g.shareDir),
			"-device", "virtio-9p-pci,fsdev=share,mount_tag="+shareTag)
	}

	start := time.Now()
	if g.proc, err = qemuvm.Start(b.NS, args); err != nil {
		return nil, fmt.Errorf("rxeguest: guest %s: %w", name, err)
	}
	g.sh = qemuvm.NewShell(g.proc.Console, g.proc.Stdin, "rxeguest: "+name, MaxCommandLen)
	if err := g.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("rxeguest: guest %s: %w\n%s", name, err, qemuvm.Tail(g.Log(), 40))
	}
	g.BootTime = time.Since(start)
	t.Logf("rxeguest: guest %s (%s, %s) up in %v; image %s (script ran %v once per test binary)",
		name, addr, cfg.mac, g.BootTime.Round(time.Millisecond), im.Dir, im.Took.Round(time.Millisecond))
	return g, nil
}

func (g *Guest) waitReady(ctx context.Context) error {
	var failed string
	err := g.proc.Console.WaitFor(ctx, 0, func(out []byte) bool {
		if bytes.Contains(out, []byte(readyMarker)) {
			return true
		}
		if i := bytes.Index(out, []byte(failedMarker+" ")); i >= 0 {
			if j := bytes.IndexByte(out[i:], '\n'); j >= 0 {
				failed = string(out[i+len(failedMarker)+1 : i+j])
				return true
			}
		}
		return false
	})
	switch {
	case err != nil:
		return fmt.Errorf("waiting for %s: %w", readyMarker, err)
	case failed != "":
		return fmt.Errorf("%w: %s", ErrBootFailed, failed)
	}
	return nil
}

// Close kills the guest (qemu and its process group, at once: there is
// nothing in the guest to save), waits for qemu to exit and removes its
// tap. The test's cleanup calls it; calling it earlier makes the peer
// vanish from the bridge mid-test. Later calls return the first's result.
func (g *Guest) Close() error {
	g.closeOnce.Do(func() {
		if err := g.shutdown(); err != nil {
			g.closeErr = fmt.Errorf("rxeguest: guest %s: %w", g.Name, err)
		}
	})
	return g.closeErr
}

func (g *Guest) shutdown() error {
	var errs []error
	if g.proc != nil {
		errs = append(errs, g.proc.Kill())
	}
	if err := g.bridge.DelTap(g.Tap); err != nil {
		errs = append(errs, err)
	}
	if err := os.Remove(g.qmpPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if g.shareDir != "" {
		if err := os.RemoveAll(g.shareDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Exited is closed when qemu has exited.
func (g *Guest) Exited() <-chan struct{} { return g.proc.Exited() }

// Log returns everything the guest wrote to its console so far (carriage
// returns removed), followed by qemu's own messages if it printed any.
func (g *Guest) Log() string {
	s := g.proc.Console.String()
	if e := g.proc.Stderr(); e != "" {
		s += "\n--- qemu stderr ---\n" + e
	}
	return s
}

// Run runs a shell command in the guest and returns its standard output and
// error (interleaved, as the console shows them) and its exit status. The
// command runs in a subshell with standard input from /dev/null, so that
// neither exit nor a tool reading stdin can take the console. err is
// non-nil when the command's completion was not seen: ctx ended (the
// command then gets ^C) or qemu exited; exitCode is then -1.
//
// Commands must be a single line of at most MaxCommandLen bytes (the
// guest's line editor limits what can be typed).
func (g *Guest) Run(ctx context.Context, cmd string) (out string, exitCode int, err error) {
	return g.sh.Run(ctx, cmd)
}

// MaxCommandLen bounds the line Run types on the console, wrapping
// included: busybox ash's line editor keeps at most 1024 bytes.
const MaxCommandLen = 1000

// BackgroundCmd is a command Guest.Start runs in the background, in a
// session of its own, with its output going to a file in the guest.
type BackgroundCmd struct {
	// PID is the process ID in the guest; it also names the command's
	// process group.
	PID int
	// OutFile is the guest path collecting its standard output and error.
	OutFile string

	g      *Guest
	rcFile string
}

// startTimeout bounds the console commands of Start and Kill.
const startTimeout = 30 * time.Second

// Start runs cmd in the background in the guest, typically the server side
// of a tool pair (rdma_server, ucmatose, rping -s, ib_send_bw), and returns
// once it has been started; it may not be listening yet (see
// Guest.WaitListen). The guest's processes end with the guest.
func (g *Guest) Start(cmd string) (*BackgroundCmd, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	n := g.sh.Next()
	bc := &BackgroundCmd{
		OutFile: fmt.Sprintf("/tmp/cdd-bg%d.out", n),
		rcFile:  fmt.Sprintf("/tmp/cdd-bg%d.rc", n),
		g:       g,
	}
	// setsid gives the command its own process group for Kill; the exit
	// status goes to a file, renamed into place so it is never seen half
	// written.
	// The profile gives sh -c the same ip(8) as the console's shell.
	// A subshell, so that exit in cmd still leaves a status behind.
	inner := fmt.Sprintf(". /etc/profile.rxe; ( eval %s ); echo $? >%s.tmp; mv %s.tmp %s",
		qemuvm.ShellQuote(cmd), bc.rcFile, bc.rcFile, bc.rcFile)
	line := fmt.Sprintf("setsid sh -c %s </dev/null >%s 2>&1 & echo $!", qemuvm.ShellQuote(inner), bc.OutFile)
	out, code, err := g.Run(ctx, line)
	if err != nil {
		return nil, err
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(out))
	if code != 0 || perr != nil {
		return nil, fmt.Errorf("rxeguest: %s: start %q: exit %d: %s", g.Name, cmd, code, out)
	}
	bc.PID = pid
	return bc, nil
}

// ErrNoExitStatus reports that a background command is gone without having
// recorded an exit status.
var ErrNoExitStatus = errors.New("background command gone without an exit status")

// Wait waits for the command to exit and returns its exit status (128+N
// when a signal N ended it; Kill makes it 137).
func (bc *BackgroundCmd) Wait(ctx context.Context) (int, error) {
	// Each round blocks the console for at most a second, so that other
	// commands can use it in between.
	poll := fmt.Sprintf(
		"p=%d; i=0; while [ ! -e %s ] && [ -e /proc/$p ] && ! grep -q ') Z' /proc/$p/stat 2>/dev/null && [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done; "+
			"if [ -e %s ]; then cat %s; elif [ ! -e /proc/$p ] || grep -q ') Z' /proc/$p/stat 2>/dev/null; then echo gone; fi",
		bc.PID, bc.rcFile, bc.rcFile, bc.rcFile)
	for {
		out, _, err := bc.g.Run(ctx, poll)
		if err != nil {
			return -1, err
		}
		switch s := strings.TrimSpace(out); s {
		case "":
			continue
		case "gone":
			// The status may have been written just after the check.
			out, _, err := bc.g.Run(ctx, "cat "+bc.rcFile+" 2>/dev/null")
			if err != nil {
				return -1, err
			}
			if c, err := strconv.Atoi(strings.TrimSpace(out)); err == nil {
				return c, nil
			}
			return -1, fmt.Errorf("rxeguest: %s: pid %d: %w", bc.g.Name, bc.PID, ErrNoExitStatus)
		default:
			c, err := strconv.Atoi(s)
			if err != nil {
				return -1, fmt.Errorf("rxeguest: %s: pid %d: exit status %q", bc.g.Name, bc.PID, s)
			}
			return c, nil
		}
	}
}

// Output returns what the command has written so far.
func (bc *BackgroundCmd) Output(ctx context.Context) (string, error) {
	out, code, err := bc.g.Run(ctx, "cat "+bc.OutFile)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("rxeguest: %s: cat %s: exit %d: %s", bc.g.Name, bc.OutFile, code, out)
	}
	return out, nil
}

// Kill sends SIGKILL to the command's process group. A Wait after it
// returns 137 unless the command had exited already.
func (bc *BackgroundCmd) Kill() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, _, err := bc.g.Run(ctx, fmt.Sprintf("kill -KILL -- -%d 2>/dev/null; sleep 0.1; [ -e %s ] || echo 137 >%s",
		bc.PID, bc.rcFile, bc.rcFile))
	return err
}

// WaitListen waits until an rdma_cm ID in the guest listens on port (an
// rdma_cm port, as rdma_server's 7471 or rping's 7174), so that a client
// started next finds its server.
func (g *Guest) WaitListen(ctx context.Context, port int) error {
	// rdma prints listeners as "... state LISTEN ... src-addr 0.0.0.0:7471 ".
	cmd := fmt.Sprintf("rdma resource show cm_id | grep -Eq 'state LISTEN .*src-addr [^ ]+:%d( |$)'", port)
	for {
		_, code, err := g.Run(ctx, cmd)
		if err != nil {
			return err
		}
		if code == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rxeguest: %s: waiting for a listener on port %d: %w", g.Name, port, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
