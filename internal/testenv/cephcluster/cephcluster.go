//go:build linux

// Package cephcluster runs a throw-away single-node Ceph 16.2 cluster for
// tests: one monitor, one memstore OSD, optionally one manager, cephx on,
// one pool of size 1, everything bound to one IPv4 address inside a
// network namespace. It uses the Debian packages' binaries (ceph-mon,
// ceph-osd, ceph-mgr, ceph, rados, monmaptool) and nothing of the host's
// Ceph setup: every file lives under the cluster's directory, and every
// daemon is killed when the test ends.
//
// Without a manager the cluster still reports HEALTH_OK (the monitor is
// told not to expect one), but `ceph -s` shows no pool or PG statistics:
// those come from the manager.
package cephcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cephdpdkd/cephdpdkd/internal/testenv/harness"
)

// The monitor's ports: msgr2 and the legacy msgr1.
const (
	MonV2Port = 3300
	MonV1Port = 6789
)

// ClassifyYAML is the part of a cephdpdkd configuration, at its top
// level, that sorts a Ceph node's traffic as these daemons use the
// network: the monitor's ports (MonV2Port, MonV1Port) to service mon, the
// OSDs' port range (Ceph's default ms_bind_port_min-max) to osd, both
// ways, everything else to other. The configuration declares the three
// services.
const ClassifyYAML = `default_service: other
rules:
  - {service: mon, protocol: tcp, dst_ports: [3300, 6789]}
  - {service: mon, protocol: tcp, src_ports: [3300, 6789]}
  - {service: osd, protocol: tcp, dst_ports: ["6800-7568"]}
  - {service: osd, protocol: tcp, src_ports: ["6800-7568"]}`

// KernelServicesYAML declares, in a cephdpdkd configuration's services
// section, the three services ClassifyYAML sorts into, each handed to the
// kernel path, mon first and OSD last when they compete.
const KernelServicesYAML = `services:
  - {name: mon, ring_size: 1024, priority: 200, consumer: {type: kernel}}
  - {name: osd, ring_size: 2048, priority: 100, consumer: {type: kernel}}
  - {name: other, ring_size: 1024, priority: 150, consumer: {type: kernel}}`

// Options configure a cluster. Only IP is required.
type Options struct {
	// NetNS is the network namespace the daemons run in, as in
	// `ip netns exec NetNS`; "" runs them in the test's own namespace.
	NetNS string
	// IP is the IPv4 address, already up in NetNS, that the monitor, the
	// OSD and the manager bind and advertise. Nothing listens elsewhere.
	IP netip.Addr
	// Dir holds every file of the cluster: conf, keyrings, mon store,
	// OSD data, logs, pid files, admin sockets. Admin socket paths must
	// fit in 108 bytes, so it should be short. Default: a new directory
	// under os.TempDir, removed when the test ends; set Dir to keep the
	// files.
	Dir string
	// Pool is the pool Start creates (replicated, size 1, application
	// "rados"). Default "test".
	Pool string
	// PGNum is the pool's number of placement groups. Default 8.
	PGNum int
	// WithMgr also runs a manager (ceph-mgr, mgr.x), for `ceph -s`
	// statistics and mgr commands. It is not needed for HEALTH_OK, and
	// costs RSS and start time.
	WithMgr bool
	// MemstoreBytes is the capacity the OSD reports. The objects live in
	// the OSD's RAM, and the OSD may overshoot before the monitor marks
	// it full (at 95%), after which writes block (see Command). A 4 MiB
	// `rados bench` fills 2 GiB in seconds. Default 2 GiB.
	MemstoreBytes int64
	// Timeout bounds Start, StartOSD and WaitHealthOK. Default 60s.
	Timeout time.Duration
}

// clientTimeout bounds how long a client keeps trying to reach the
// monitor (client_mount_timeout), and is the default bound of the
// cluster's own commands.
const clientTimeout = 30 * time.Second

// Cluster is a running cluster. Its methods may be called from any
// goroutine, one at a time.
type Cluster struct {
	opts    Options
	dir     string
	ownDir  bool
	conf    string
	keyring string
	fsid    string
	osdUUID string
	osdKey  string
	launch  *launcher

	mu  sync.Mutex // serializes the methods that start and stop daemons
	mon *daemon
	mgr *daemon
	osd *daemon
}

// Start creates and starts a cluster and waits until it reports
// HEALTH_OK, the pool's PGs are active and the pool takes a write. It
// fails the test if that takes longer than Options.Timeout, and skips it
// when the Ceph binaries (or, with a NetNS, root) are missing. When the
// test ends every daemon is stopped (SIGTERM, then SIGKILL), any other
// process that names the cluster's directory (a client the test left
// running) is killed and fails the test, and a directory Start made is
// removed. On failure the ends of the logs go to the test log.
func Start(t harness.TB, o Options) *Cluster {
	t.Helper()
	requireTools(t, o)
	if !o.IP.Is4() {
		t.Fatalf("cephcluster: Options.IP %v: need an IPv4 address", o.IP)
	}
	if o.Pool == "" {
		o.Pool = "test"
	}
	if o.PGNum == 0 {
		o.PGNum = 8
	}
	if o.MemstoreBytes == 0 {
		o.MemstoreBytes = 2 << 30
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	c := &Cluster{opts: o, dir: filepath.Clean(o.Dir), launch: newLauncher()}
	// Registered before anything exists, so that a failure half way
	// still stops and removes what did get made.
	t.Cleanup(func() { c.shutdown(t) })
	if o.Dir == "" {
		// Not t.TempDir: its path carries the test's name, and admin
		// socket paths (sun_path) are limited to 107 bytes.
		d, err := os.MkdirTemp("", "ceph")
		if err != nil {
			t.Fatalf("cephcluster: %v", err)
		}
		c.dir, c.ownDir = d, true
	}
	if !filepath.IsAbs(c.dir) {
		t.Fatalf("cephcluster: Options.Dir %q: need an absolute path", c.dir)
	}
	const longestSocket = "/run/client.admin.4194304.asok"
	if len(c.dir)+len(longestSocket) > 107 {
		t.Fatalf("cephcluster: directory %q is too long for admin socket paths", c.dir)
	}
	c.conf = filepath.Join(c.dir, "ceph.conf")
	c.keyring = filepath.Join(c.dir, "client.admin.keyring")

	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	t0 := time.Now()
	if err := c.bootstrap(ctx); err != nil {
		t.Fatalf("cephcluster: %v", err)
	}
	t.Logf("cephcluster: %s on %s (netns %q): HEALTH_OK after %v",
		c.fsid, o.IP, o.NetNS, time.Since(t0).Round(time.Millisecond))
	return c
}

func requireTools(t harness.TB, o Options) {
	t.Helper()
	tools := []string{"ceph-mon", "ceph-osd", "ceph", "rados", "monmaptool"}
	if o.WithMgr {
		tools = append(tools, "ceph-mgr")
	}
	if o.NetNS != "" {
		if os.Geteuid() != 0 {
			t.Skip("cephcluster: needs root for network namespaces")
		}
		tools = append(tools, "ip")
	}
	harness.RequireCommands(t, "cephcluster: Debian's ceph-mon ceph-osd ceph-common, ceph-mgr for WithMgr", tools...)
}

func (c *Cluster) bootstrap(ctx context.Context) error {
	o := c.opts
	for _, d := range []string{"run", "log", "crash", "mon/a", "osd/0", "mgr/x"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return err
		}
	}
	var err error
	if c.fsid, err = NewUUID(); err != nil {
		return err
	}
	if c.osdUUID, err = NewUUID(); err != nil {
		return err
	}
	var monKey, adminKey, mgrKey string
	for _, k := range []*string{&monKey, &adminKey, &mgrKey, &c.osdKey} {
		if *k, err = NewKey(); err != nil {
			return err
		}
	}
	if err := writeConf(c.conf, confParams{
		FSID:          c.fsid,
		MonHost:       c.MonHost(),
		IP:            o.IP.String(),
		Dir:           c.dir,
		PGNum:         o.PGNum,
		WithMgr:       o.WithMgr,
		MountTimeout:  int(clientTimeout / time.Second),
		MemstoreBytes: o.MemstoreBytes,
	}); err != nil {
		return err
	}

	// The monitor's mkfs imports every key of this keyring, with its
	// caps, into the auth database: no `ceph auth` round trips later.
	admin := entity{"client.admin", adminKey, [][2]string{
		{"mds", "allow *"}, {"mgr", "allow *"}, {"mon", "allow *"}, {"osd", "allow *"}}}
	osd := c.osdEntity()
	mgr := entity{"mgr.x", mgrKey, [][2]string{
		{"mds", "allow *"}, {"mon", "allow profile mgr"}, {"osd", "allow *"}}}
	mkfsKeyring := filepath.Join(c.dir, "mkfs.keyring")
	for _, k := range []struct {
		path string
		ents []entity
	}{
		{c.keyring, []entity{admin}},
		{mkfsKeyring, []entity{{"mon.", monKey, [][2]string{{"mon", "allow *"}}}, admin, osd, mgr}},
		{filepath.Join(c.dir, "mgr/x/keyring"), []entity{mgr}},
	} {
		if err := writeKeyring(k.path, k.ents...); err != nil {
			return err
		}
	}

	monmap := filepath.Join(c.dir, "monmap")
	if _, err := c.run(ctx, "monmaptool", "--create", "--fsid", c.fsid, "--addv", "a", c.MonHost(), monmap); err != nil {
		return err
	}
	if _, err := c.run(ctx, "ceph-mon", "-c", c.conf, "--mkfs", "-i", "a", "--monmap", monmap, "--keyring", mkfsKeyring); err != nil {
		return err
	}
	if err := c.mkfsOSD(ctx); err != nil {
		return err
	}

	if c.mon, err = c.startDaemon("mon.a", "ceph-mon", "-i", "a"); err != nil {
		return err
	}
	if err := c.waitAsok(ctx, c.mon, "mon_status", "leader"); err != nil {
		return err
	}
	if o.WithMgr {
		// devicehealth creates a pool of its own as soon as it sees an
		// OSD, at a moment of its choosing, and a PG still being created
		// when a test kills the OSD never comes back. There are no
		// devices to watch here anyway. Module options live in the
		// monitor's config database only (ceph.conf has no say), must be
		// there before the module loads, and are unknown to the monitor
		// until a mgr has reported them: hence --force.
		if _, err := c.run(ctx, "ceph", "config", "set", "mgr", "mgr/devicehealth/enable_monitoring", "false", "--force"); err != nil {
			return err
		}
		if c.mgr, err = c.startDaemon("mgr.x", "ceph-mgr", "-i", "x"); err != nil {
			return err
		}
	}
	// Register the OSD (its key is in the auth database already), boot
	// it, and create the pool while it boots.
	out, err := c.run(ctx, "ceph", "osd", "new", c.osdUUID, "0")
	if err != nil {
		return err
	}
	if id := strings.TrimSpace(string(out)); id != "0" {
		return fmt.Errorf("ceph osd new: got osd id %q, want 0", id)
	}
	if c.osd, err = c.startDaemon("osd.0", "ceph-osd", "-i", "0"); err != nil {
		return err
	}
	if _, err := c.run(ctx, "ceph", "osd", "pool", "create", o.Pool,
		strconv.Itoa(o.PGNum), strconv.Itoa(o.PGNum), "replicated"); err != nil {
		return err
	}
	if _, err := c.run(ctx, "ceph", "osd", "pool", "application", "enable", o.Pool, "rados"); err != nil {
		return err
	}
	if err := c.waitAsok(ctx, c.osd, "status", "active"); err != nil {
		return err
	}
	if err := c.waitPGs(ctx, o.PGNum); err != nil {
		return err
	}
	// Stop and start the OSD once, so that its memstore, which it saves
	// only on a clean stop, holds the pool's PGs: an OSD that comes back
	// from a crash without them never gets them again (the monitor
	// creates a PG once), and its pool stays dead.
	if err := c.osd.stopClean(30 * time.Second); err != nil {
		return err
	}
	if err := c.startOSD(ctx); err != nil {
		return err
	}
	if o.WithMgr {
		if err := c.waitMgr(ctx); err != nil {
			return err
		}
	}
	return c.WaitHealthOK(ctx)
}

func (c *Cluster) osdEntity() entity {
	return entity{"osd.0", c.osdKey, [][2]string{
		{"mgr", "allow profile osd"}, {"mon", "allow profile osd"}, {"osd", "allow *"}}}
}

// mkfsOSD makes an empty memstore in osd/0.
func (c *Cluster) mkfsOSD(ctx context.Context) error {
	if err := writeKeyring(filepath.Join(c.dir, "osd/0/keyring"), c.osdEntity()); err != nil {
		return err
	}
	// --no-mon-config: mkfs needs nothing from the monitor, which may not
	// be running yet.
	_, err := c.run(ctx, "ceph-osd", "-c", c.conf, "-i", "0", "--mkfs", "--osd-uuid", c.osdUUID, "--no-mon-config")
	return err
}

// startDaemon runs a daemon in the foreground in the cluster's namespace.
func (c *Cluster) startDaemon(name, bin string, args ...string) (*daemon, error) {
	var argv []string
	if c.opts.NetNS != "" {
		// ip execs the daemon itself: the pid stays the daemon's.
		argv = append(argv, "ip", "netns", "exec", c.opts.NetNS)
	}
	argv = append(argv, bin, "-f", "-c", c.conf)
	argv = append(argv, args...)
	return c.launch.startDaemon(name, filepath.Join(c.dir, "log", name+".out"),
		filepath.Join(c.dir, "log", name+".log"), argv)
}

// waitAsok polls a daemon's admin socket until cmd reports state want.
func (c *Cluster) waitAsok(ctx context.Context, d *daemon, cmd, want string) error {
	path := filepath.Join(c.dir, "run", d.name+".asok")
	var last string
	for {
		reply, err := asok(path, map[string]any{"prefix": cmd}, 2*time.Second)
		var st struct{ State string }
		switch {
		case err != nil:
			last = err.Error()
		case json.Unmarshal(reply, &st) != nil:
			// The socket answers before the daemon has registered its
			// commands: "ERROR: ... not defined".
			last = strings.TrimSpace(string(reply))
		case st.State == want:
			return nil
		default:
			last = "state " + st.State
		}
		if err := sleep(ctx, d, 100*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for %s to be %s (last: %s): %w", d.name, want, last, err)
		}
	}
}

// sleep waits for dt, or fails early if ctx ends or daemon d exits.
func sleep(ctx context.Context, d *daemon, dt time.Duration) error {
	var exited <-chan struct{}
	if d != nil {
		exited = d.done
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-exited:
		return d.exitError()
	case <-time.After(dt):
		return nil
	}
}

// probe writes, then deletes, an object: the pool's PGs are active.
func (c *Cluster) probe(ctx context.Context) error {
	cmd := c.Command(ctx, c.opts.NetNS, "rados", "-p", c.opts.Pool, "put", "cephcluster.probe", "-")
	cmd.Stdin = strings.NewReader("probe\n")
	if _, err := c.runCmd(cmd); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	_, err := c.run(ctx, "rados", "-p", c.opts.Pool, "rm", "cephcluster.probe")
	return err
}

func (c *Cluster) waitMgr(ctx context.Context) error {
	var last string
	for {
		out, err := c.run(ctx, "ceph", "mgr", "stat", "--format", "json")
		if err != nil {
			return err
		}
		var st struct{ Available bool }
		if err := json.Unmarshal(out, &st); err != nil {
			return fmt.Errorf("ceph mgr stat: %w", err)
		}
		if st.Available {
			return nil
		}
		last = strings.TrimSpace(string(out))
		if err := sleep(ctx, c.mgr, 200*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for mgr.x to be active (last: %s): %w", last, err)
		}
	}
}

// WaitHealthOK polls `ceph health` until it reports HEALTH_OK, for at
// most Options.Timeout; the error lists the health checks last seen.
func (c *Cluster) WaitHealthOK(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var last string
	for {
		out, err := c.run(ctx, "ceph", "health", "--format", "json")
		if err != nil {
			return err
		}
		var h struct {
			Status string
			Checks map[string]struct {
				Summary struct{ Message string }
			}
		}
		if err := json.Unmarshal(out, &h); err != nil {
			return fmt.Errorf("ceph health: %w: %s", err, out)
		}
		if h.Status == "HEALTH_OK" {
			return nil
		}
		var checks []string
		for name, chk := range h.Checks {
			checks = append(checks, name+": "+chk.Summary.Message)
		}
		slices.Sort(checks)
		last = h.Status + " (" + strings.Join(checks, "; ") + ")"
		if err := sleep(ctx, nil, 300*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for HEALTH_OK (last: %s): %w", last, err)
		}
	}
}

// KillOSD kills the OSD with SIGKILL, as a crash would: it tells the
// monitor nothing and saves nothing. A memstore OSD keeps its objects in
// RAM and writes them to Dir only when it stops cleanly, so StartOSD
// brings it back as of the last StopOSD, or of Start: what was written
// since is gone, like a disk that lost its write cache. No real OSD
// comes back like that, and Ceph's space accounting can wrap after it
// (the OSD reports itself past its failsafe ratio and blocks writes), so
// a test that writes on after the restart uses StopOSD. KillOSD waits
// until the process is gone.
func (c *Cluster) KillOSD() error {
	return c.stopOSD(func(d *daemon) error {
		_, err := d.stop(syscall.SIGKILL, 0)
		return err
	})
}

// StopOSD stops the OSD cleanly with SIGTERM: it tells the monitor it is
// going down and saves its objects under Dir, so that StartOSD brings it
// back with its data. It waits until the process is gone, and fails if
// that took SIGKILL.
func (c *Cluster) StopOSD() error {
	return c.stopOSD(func(d *daemon) error { return d.stopClean(30 * time.Second) })
}

func (c *Cluster) stopOSD(stop func(*daemon) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.osd == nil || c.osd.exited() {
		return errors.New("cephcluster: osd.0 is not running")
	}
	if err := stop(c.osd); err != nil {
		return fmt.Errorf("cephcluster: %w", err)
	}
	return nil
}

// StartOSD starts the same OSD again (same id, key and data) after
// KillOSD, StopOSD or a crash, and waits until it is up, its PGs are
// active and the pool takes a write.
func (c *Cluster) StartOSD(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.osd != nil && !c.osd.exited() {
		return errors.New("cephcluster: osd.0 is already running")
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	if err := c.startOSD(ctx); err != nil {
		return fmt.Errorf("cephcluster: %w", err)
	}
	return nil
}

func (c *Cluster) startOSD(ctx context.Context) error {
	var err error
	if c.osd, err = c.startDaemon("osd.0", "ceph-osd", "-i", "0"); err != nil {
		return err
	}
	if err := c.waitAsok(ctx, c.osd, "status", "active"); err != nil {
		return err
	}
	if err := c.waitPGs(ctx, c.opts.PGNum); err != nil {
		return err
	}
	return c.probe(ctx)
}

// waitPGs polls the OSD's admin socket until it holds at least n PGs and
// every one it holds is active. This works without a mgr, which is
// where `ceph pg` gets PG states from.
func (c *Cluster) waitPGs(ctx context.Context, n int) error {
	path := filepath.Join(c.dir, "run", "osd.0.asok")
	var last string
	for {
		reply, err := asok(path, map[string]any{"prefix": "dump_pgstate_history"}, 2*time.Second)
		if err != nil {
			return fmt.Errorf("osd.0 dump_pgstate_history: %w", err)
		}
		var h struct {
			PGs []struct {
				PG        string
				Currently string
			}
		}
		if err := json.Unmarshal(reply, &h); err != nil {
			return fmt.Errorf("osd.0 dump_pgstate_history: %w", err)
		}
		active := 0
		for _, pg := range h.PGs {
			if strings.HasPrefix(pg.Currently, "Started/Primary/Active") {
				active++
			} else {
				last = pg.PG + " " + pg.Currently
			}
		}
		if active >= n && active == len(h.PGs) {
			return nil
		}
		if err := sleep(ctx, c.osd, 100*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for %d active PGs (have %d of %d; last: %s): %w", n, active, len(h.PGs), last, err)
		}
	}
}

// Command returns a command that runs program name as a client of the
// cluster, from network namespace ns ("" for the test's own, which need
// not be the cluster's). ceph, rados and rbd get --conf and --keyring
// before args; every program gets CEPH_CONF (see Env), which librados
// reads. The conf keeps client logs and admin sockets under Dir, bounds
// connecting to the monitor to 30s (client_mount_timeout) and each
// operation to 60s (rados_osd_op_timeout, rados_mon_op_timeout): long
// enough to ride out an OSD restart, short enough that a client of a
// full or vanished cluster ends. Bound the command with ctx as well:
// unlike the daemons, it is not killed if the test binary dies.
func (c *Cluster) Command(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	var argv []string
	if ns != "" {
		argv = append(argv, "ip", "netns", "exec", ns)
	}
	argv = append(argv, name)
	switch filepath.Base(name) {
	case "ceph", "rados", "rbd":
		argv = append(argv, "--conf", c.conf, "--keyring", c.keyring)
	}
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.Env()...)
	// A killed client's pipes are closed soon even if it forked.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs a program to completion in the cluster's namespace and
// returns its standard output. ceph and rados get the cluster's conf (see
// Command). The run is bounded by ctx and by clientTimeout.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	return c.runCmd(c.Command(ctx, c.opts.NetNS, name, args...))
}

func (c *Cluster) runCmd(cmd *exec.Cmd) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := c.launch.start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// Env is what a client of the cluster needs in its environment:
// CEPH_CONF, the conf that names the monitor and the admin keyring.
func (c *Cluster) Env() []string { return []string{"CEPH_CONF=" + c.conf} }

// ConfPath is the cluster's ceph.conf, for daemons and clients alike.
func (c *Cluster) ConfPath() string { return c.conf }

// KeyringPath is the keyring of client.admin.
func (c *Cluster) KeyringPath() string { return c.keyring }

// Dir is the directory that holds all of the cluster's files.
func (c *Cluster) Dir() string { return c.dir }

// Pool is the name of the cluster's pool.
func (c *Cluster) Pool() string { return c.opts.Pool }

// NetNS is the namespace the daemons run in ("" for the test's own).
func (c *Cluster) NetNS() string { return c.opts.NetNS }

// MonAddrs are the monitor's msgr2 and msgr1 addresses.
func (c *Cluster) MonAddrs() (v2, v1 netip.AddrPort) {
	return netip.AddrPortFrom(c.opts.IP, MonV2Port), netip.AddrPortFrom(c.opts.IP, MonV1Port)
}

// MonHost is the monitor's address vector as mon_host and -m take it:
// "[v2:IP:3300,v1:IP:6789]".
func (c *Cluster) MonHost() string {
	v2, v1 := c.MonAddrs()
	return fmt.Sprintf("[v2:%s,v1:%s]", v2, v1)
}

// MonPid is the monitor's pid.
func (c *Cluster) MonPid() int { return c.pid(func() *daemon { return c.mon }) }

// MgrPid is the manager's pid, 0 without one.
func (c *Cluster) MgrPid() int { return c.pid(func() *daemon { return c.mgr }) }

// OSDPid is the OSD's pid, 0 while it is not running.
func (c *Cluster) OSDPid() int { return c.pid(func() *daemon { return c.osd }) }

func (c *Cluster) pid(which func() *daemon) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := which(); d != nil && !d.exited() {
		return d.pid()
	}
	return 0
}

// shutdown stops every daemon, OSD and manager before the monitor so
// that they can still tell it, kills any other process that names Dir
// (a client the test left running), and removes Dir if Start made it.
func (c *Cluster) shutdown(t harness.TB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.osd != nil && !c.osd.exited() {
		// Nothing it holds is needed any more: make SIGTERM exit at once
		// rather than write the whole memstore out to Dir.
		_, _ = asok(filepath.Join(c.dir, "run", "osd.0.asok"),
			map[string]any{"prefix": "config set", "var": "osd_fast_shutdown", "val": []string{"true"}}, time.Second)
	}
	for _, d := range []*daemon{c.osd, c.mgr, c.mon} {
		if d == nil {
			continue
		}
		if _, err := d.stop(syscall.SIGTERM, 5*time.Second); err != nil {
			t.Errorf("cephcluster: %v", err)
		}
	}
	c.launch.close()
	if c.dir == "." {
		return // nothing was made
	}
	if pids := procsUnder(c.dir); len(pids) > 0 {
		var left []string
		for _, pid := range pids {
			left = append(left, procLine(pid))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("cephcluster: processes left running under %s (now killed):\n%s", c.dir, strings.Join(left, "\n"))
	}
	if t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(c.dir, "log", "*"))
		for _, l := range logs {
			t.Log(tail(l, 20))
		}
	}
	if c.ownDir {
		if err := os.RemoveAll(c.dir); err != nil {
			t.Errorf("cephcluster: %v", err)
		}
	} else if t.Failed() {
		t.Logf("cephcluster: files kept in %s", c.dir)
	}
}

// RestartMon stops the monitor cleanly (SIGTERM) if it runs, starts it
// again with the same store, and waits until it is the leader again. Its
// clients and the OSD see their sessions reset and must find it again.
func (c *Cluster) RestartMon(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mon == nil {
		return errors.New("cephcluster: no mon.a to restart")
	}
	if !c.mon.exited() {
		if err := c.mon.stopClean(30 * time.Second); err != nil {
			return fmt.Errorf("cephcluster: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var err error
	if c.mon, err = c.startDaemon("mon.a", "ceph-mon", "-i", "a"); err != nil {
		return fmt.Errorf("cephcluster: %w", err)
	}
	if err := c.waitAsok(ctx, c.mon, "mon_status", "leader"); err != nil {
		return fmt.Errorf("cephcluster: %w", err)
	}
	return nil
}
