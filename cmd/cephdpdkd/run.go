package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cephdpdkd/cephdpdkd/configs"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/daemon"
	"github.com/cephdpdkd/cephdpdkd/internal/metrics"
	"github.com/cephdpdkd/cephdpdkd/internal/nicbind"
	"github.com/cephdpdkd/cephdpdkd/internal/sdnotify"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
)

// loadConfig reads and validates a configuration, the embedded default
// when path is empty, and unless offline checks it against this machine.
// run, roce-ping and check-config share it: what check-config accepts,
// run does not refuse later.
func loadConfig(path string, offline bool) (*config.Config, error) {
	c, _, err := loadConfigHash(path, offline)
	return c, err
}

// loadConfigHash is loadConfig, also returning the SHA-256 of the file
// (hex, as sha256sum prints it) for the config_info metric.
func loadConfigHash(path string, offline bool) (*config.Config, string, error) {
	b := configs.Default
	if path != "" {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, "", fmt.Errorf("config: %w", err)
		}
	}
	c, err := config.Parse(b)
	if err != nil {
		return nil, "", fmt.Errorf("config %s: %w", cmp.Or(path, "(embedded default)"), err)
	}
	if !offline {
		if err := c.CheckHost(); err != nil {
			return nil, "", fmt.Errorf("config %s: %w", cmp.Or(path, "(embedded default)"), err)
		}
	}
	sum := sha256.Sum256(b)
	return c, hex.EncodeToString(sum[:]), nil
}

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run")
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file (default: the embedded sample configuration)")
	status := fs.String("status", "auto", "live status line on stdout: auto (when a terminal), on, off")
	duration := fs.Duration("duration", 0, "stop after this long (0: run until SIGINT/SIGTERM)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the whole run (poll loops included) to this file")
	runDir := fs.String("run-dir", nicbind.DefaultRunDir, "directory of the state files recording what port.bind and eal.hugepages changed (restore-nic reads them)")
	if err := parseNoArgs(fs, args, stderr); err != nil {
		return err
	}
	if *duration < 0 {
		fmt.Fprintf(stderr, "run: --duration %v: want 0 (until SIGINT/SIGTERM) or a positive duration\n", *duration)
		return errUsage
	}
	cfg, hash, err := loadConfigHash(*path, false)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	plan, err := daemon.NewPlan(cfg)
	if err != nil {
		return err
	}
	// Under systemd (Type=notify): READY=1, STATUS=, the watchdog.
	notifier, watchdog, err := sdnotify.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	ctx, shuttingDown, reload, stopSignals := daemonSignals(log)
	defer stopSignals()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	h := &host{
		nic:    nicSystem(nicbind.DefaultSysfs, *runDir),
		huge:   hugeSystem(nicbind.DefaultSysfs, *runDir),
		runDir: *runDir,
		log:    log,
	}
	return h.with(cfg, func(prog *xdp.Program) error {
		return runDaemon(ctx, shuttingDown, cfg, plan, runOptions{
			stdout: stdout, cpuProfile: *cpuProfile, status: *status,
			notifier: notifier, watchdog: watchdog, log: log,
			configPath: *path, configHash: hash, reload: reload, xdp: prog,
		})
	})
}

// foreignEvery is how often the exception path is checked for addresses
// and routes that are not the kernel section's.
const foreignEvery = 10 * time.Second

// watchForeign logs, each time it changes, what a network manager (or an
// operator) added to the exception path's interface: the daemon owns its
// addresses and routes (docs/operator/cutover.md), and a manager that
// adopted the interface, which has the NIC's name and MAC, fights it.
func watchForeign(ctx context.Context, d *daemon.Daemon, log *slog.Logger) {
	t := time.NewTicker(foreignEvery)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f, err := d.ForeignKernelConfig()
		if err != nil {
			log.Debug("kernel interface: addresses and routes", "err", err)
			continue
		}
		if now := fmt.Sprint(f); now != last {
			last = now
			if f.Empty() {
				log.Info("kernel interface: only the kernel section's addresses and routes again")
			} else {
				log.Warn("kernel interface: addresses and routes the kernel section did not put there: is a network manager configuring it? (docs/operator/cutover.md)",
					"addresses", f.Addresses, "routes", f.Routes)
			}
		}
	}
}

// runOptions are cmdRun's settings for runDaemon.
type runOptions struct {
	stdout     io.Writer
	cpuProfile string
	status     string
	notifier   sdnotify.Notifier
	watchdog   time.Duration
	log        *slog.Logger
	// configPath is reread on a reload ("": the embedded default);
	// configHash is the running file's SHA-256.
	configPath string
	configHash string
	reload     <-chan struct{}
	// xdp is the af_xdp mode's program, for its counters.
	xdp *xdp.Program
}

// runDaemon starts the data path, serves its metrics and status, and
// stops it when ctx ends or a poll loop dies.
func runDaemon(ctx context.Context, shuttingDown context.CancelCauseFunc, cfg *config.Config, plan *daemon.Plan, o runOptions) error {
	log := o.log
	// Each poll loop spins in Go code on its lcore's thread and holds a P
	// while it does: with fewer Ps than loops plus one for everything
	// else (a cgroup CPU quota can make Go pick fewer), loops would wait
	// for one another.
	if need := len(cfg.Pollers) + 1; runtime.GOMAXPROCS(0) < need {
		log.Info("raising GOMAXPROCS for the poll loops", "from", runtime.GOMAXPROCS(0), "to", need)
		runtime.GOMAXPROCS(need)
	}
	d, err := daemon.Start(plan, daemon.Options{Logger: log})
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return errors.Join(err, d.Stop(context.Background()))
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return errors.Join(err, d.Stop(context.Background()))
		}
		defer pprof.StopCPUProfile()
	}

	reg := prometheus.NewRegistry()
	reloads := metrics.NewReloads(o.configHash)
	reg.MustRegister(metrics.NewCollector(d.Snapshot), reloads, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if n := d.RoCE(); n != nil {
		reg.MustRegister(n.Collectors()...)
	}
	if o.xdp != nil {
		reg.MustRegister(metrics.NewXDPCollector(cfg.Port.AFXDP.Interface, o.xdp.Stats))
	}
	var srv *http.Server
	if cfg.Metrics.Listen != config.MetricsOff {
		srv, err = serveMetrics(cfg.Metrics.Listen, reg, log)
		if err != nil {
			return errors.Join(err, d.Stop(context.Background()))
		}
	}

	live := o.status == "on" || (o.status == "auto" && isTerminal(o.stdout))
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		if live {
			liveStatus(ctx, o.stdout, reg)
		}
	}()

	agent := newAgent(d, reg, o.notifier, o.watchdog, log)
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		agent.Run(ctx)
	}()
	agent.Ready(fmt.Sprintf("port %s started, %d poll loops", cfg.Port.Name, len(d.Pollers())))
	if cfg.Kernel != nil {
		go watchForeign(ctx, d, log)
	}

	runErr := waitReloading(ctx, d, o, reloads)
	// From here on a signal cuts the shutdown short. This also ends the
	// status line when a poll loop died.
	shuttingDown(cmp.Or(context.Cause(ctx), runErr))
	<-statusDone
	<-agentDone
	log.Info("shutting down", "reason", context.Cause(ctx))
	agent.Stopping(fmt.Sprintf("stopping: %v", context.Cause(ctx)))
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		srv.Shutdown(sctx)
		cancel()
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.Shutdown.DrainTimeout+5*time.Second)
	defer cancel()
	stopErr := d.Stop(stopCtx)
	if err := errors.Join(runErr, stopErr); err != nil {
		return err
	}
	log.Info("stopped cleanly")
	return nil
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(cfg.Log.Level))
	o := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", "http://"+ln.Addr().String()+"/metrics")
	return srv, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// sampleStatus reads the status line's counters from the registry.
func sampleStatus(g prometheus.Gatherer) metrics.Status {
	fams, _ := g.Gather()
	return metrics.StatusFromFamilies(time.Now(), fams)
}

// newAgent sets up the systemd notifications: the status line's rates
// since the previous STATUS=, and a watchdog over every poll loop's
// iteration counter.
func newAgent(d *daemon.Daemon, g prometheus.Gatherer, n sdnotify.Notifier, watchdog time.Duration, log *slog.Logger) *sdnotify.Agent {
	var loops []sdnotify.Loop
	for _, p := range d.Pollers() {
		loops = append(loops, sdnotify.Loop{Name: fmt.Sprintf("lcore %d", p.Lcore()), Progress: p.Iterations})
	}
	if n != nil && watchdog > 0 {
		log.Info("systemd watchdog: pinging while every poll loop progresses", "timeout", watchdog, "loops", len(loops))
	}
	prev := sampleStatus(g)
	return sdnotify.New(sdnotify.Config{
		Notifier: n, Watchdog: watchdog, Loops: loops, Log: log,
		Status: func() string {
			cur := sampleStatus(g)
			line := metrics.FormatStatus(prev, cur)
			prev = cur
			return line
		},
	})
}

// liveStatus redraws one status line every second until ctx ends.
func liveStatus(ctx context.Context, w io.Writer, g prometheus.Gatherer) {
	sample := func() metrics.Status { return sampleStatus(g) }
	prev := sample()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return
		case <-t.C:
			cur := sample()
			fmt.Fprintf(w, "\r\033[K%s", metrics.FormatStatus(prev, cur))
			prev = cur
		}
	}
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status")
	fs.SetOutput(stderr)
	url := fs.String("url", "http://"+config.DefaultMetricsListen+"/metrics", "the daemon's metrics URL")
	interval := fs.Duration("interval", time.Second, "time between the two samples rates are computed from")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	client := &http.Client{Timeout: 5 * time.Second}
	prev, err := metrics.Scrape(client, *url)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(*interval):
	}
	cur, err := metrics.Scrape(client, *url)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, metrics.FormatStatus(prev, cur))
	return nil
}

func cmdCheckConfig(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check-config")
	fs.SetOutput(stderr)
	offline := fs.Bool("offline", false, "validate for another machine: skip the checks against this one (CPUs, capture files, interfaces, PCI devices, hugepages)")
	runDir := fs.String("run-dir", nicbind.DefaultRunDir, "directory of run's state files (the af_xdp mode's program record)")
	instances := fs.String("instances", config.InstanceDir, `the machine's instances (DIR/*.yaml), which FILE must not clash with: EAL file prefix, metrics address, NIC, exception-path interface ("": none; --offline: not compared)`)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: cephdpdkd check-config [--offline] [--run-dir DIR] [--instances DIR] FILE")
		return errUsage
	}
	args = fs.Args()
	cfg, err := loadConfig(args[0], *offline)
	if err != nil {
		return err
	}
	plan, err := daemon.NewPlan(cfg)
	if err != nil {
		return fmt.Errorf("config %s: %w", args[0], err)
	}
	if !*offline {
		if err := checkBind(cfg, nicSystem(nicbind.DefaultSysfs, nicbind.DefaultRunDir)); err != nil {
			return fmt.Errorf("config %s: %w", args[0], err)
		}
		if err := checkXDP(cfg, *runDir); err != nil {
			return fmt.Errorf("config %s: %w", args[0], err)
		}
	}
	compared := -1
	if !*offline && *instances != "" {
		if compared, err = checkInstances(args[0], cfg, *instances, stderr); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "%s: ok\n", args[0])
	mtu := strconv.Itoa(cfg.Port.MTU)
	if cfg.Port.IsAFXDP() {
		mtu = "the interface's"
	}
	fmt.Fprintf(stdout, "port %s: %s, %d rx / %d tx queues, MTU %s\n", cfg.Port.Name, cfg.Port.Device,
		cfg.Port.RxQueues, cfg.Port.TxQueues, mtu)
	if x := cfg.Port.AFXDP; cfg.Port.IsAFXDP() {
		addr := "the interface's address"
		if cfg.RoCE.Address.IsValid() {
			addr = cfg.RoCE.Address.Addr().String()
		}
		fmt.Fprintf(stdout, "af_xdp: the kernel keeps %s; RoCEv2 to %s comes to the daemon through an XDP program (%s mode), one AF_XDP socket a receive queue\n",
			x.Interface, addr, x.Attach)
	}
	if b := cfg.Port.Bind; b != nil {
		iface, _ := cfg.Port.BindTarget()
		what := cfg.Port.Device
		if iface != "" {
			what = iface + " (" + cfg.Port.Device + ")"
		}
		fmt.Fprintf(stdout, "bind: %s to %s at start, back to its kernel driver at stop\n", what, b.Driver)
	}
	fmt.Fprintf(stdout, "mbuf pool: %d mbufs (%s)\n", plan.PoolSize, plan.Demand)
	for _, s := range cfg.Services {
		where := "on every receiving poll loop"
		if o := cfg.Owner(s.Name); o >= 0 {
			where = fmt.Sprintf("on lcore %d", cfg.Pollers[o].Lcore)
		}
		consumer := s.Consumer.Type
		if consumer == config.ConsumerCount {
			// Say it plainly: a node whose Ceph traffic lands here is cut off.
			consumer += " (counts and discards every packet)"
		}
		fmt.Fprintf(stdout, "service %s: %d lanes of %d, consumer %s %s\n", s.Name, cfg.Lanes(), s.RingSize, consumer, where)
	}
	fmt.Fprintf(stdout, "%d rules, default service %s\n", len(cfg.Rules), cfg.DefaultService)
	for _, p := range cfg.Pollers {
		fmt.Fprintf(stdout, "poll loop on lcore %d: rx queues %v, services %v\n", p.Lcore, p.RxQueues, p.Services)
	}
	printPaths(stdout, cfg)
	if compared >= 0 {
		fmt.Fprintf(stdout, "instances: no clash with the %d other(s) in %s\n", compared, *instances)
	}
	return nil
}

// printPaths tells where the node's traffic ends up beyond the rings: the
// kernel exception path's interface and the RoCE endpoint with its
// listeners and bridge.
func printPaths(w io.Writer, cfg *config.Config) {
	if k := cfg.Kernel; k != nil {
		ns := "the daemon's namespace"
		if k.NetNS != "" {
			ns = "namespace " + k.NetNS
		}
		fmt.Fprintf(w, "kernel exception path: interface %s (%s) in %s, addresses %v", k.Interface, k.Driver, ns, k.Addresses)
		if n := daemon.KernelNetwork(k); len(n.Routes) > 0 {
			fmt.Fprintf(w, ", routes %v", n.Routes)
		}
		fmt.Fprintln(w)
	}
	r := cfg.RoCE
	if r == nil {
		return
	}
	fmt.Fprintf(w, "roce endpoint: %v on service %s, at most %d sessions\n", r.Address.Addr(), r.Service, r.MaxSessions)
	for _, l := range r.Listen {
		fmt.Fprintf(w, "roce listener: port %d, app %s\n", l.Port, l.App)
	}
	if b := r.Bridge; b != nil {
		fmt.Fprintf(w, "roce bridge: rdma_cm ports %v to kernel TCP on %v\n", b.Ports, r.Address.Addr())
	}
}
