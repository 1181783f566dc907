package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cephdpdkd/cephdpdkd/configs"
	"github.com/cephdpdkd/cephdpdkd/consumer"
	"github.com/cephdpdkd/cephdpdkd/dispatch"
	"github.com/cephdpdkd/cephdpdkd/dispatch/classify"
	"github.com/cephdpdkd/cephdpdkd/dispatch/loop"
	"github.com/cephdpdkd/cephdpdkd/internal/config"
	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
	"github.com/cephdpdkd/cephdpdkd/internal/kernelif"
	"github.com/cephdpdkd/cephdpdkd/internal/kneigh"
	"github.com/cephdpdkd/cephdpdkd/internal/metrics"
	"github.com/cephdpdkd/cephdpdkd/internal/roced"
	"github.com/cephdpdkd/cephdpdkd/mempool"
	"github.com/cephdpdkd/cephdpdkd/pmd"
	"golang.org/x/sys/unix"
)

// SamplePcapToken in port.device expands to the embedded sample capture.
const SamplePcapToken = config.SamplePcapToken

// pcapArgMax is the size of the buffer in which DPDK 22.11's net_pcap
// keeps its arguments for secondary processes (ETH_PCAP_ARG_MAXLEN,
// with the terminating NUL): a secondary re-reads rx_pcap from it, so a
// longer argument string is cut and the secondary fails to probe.
const pcapArgMax = 64

// vdevMaxMTU is the largest MTU DPDK 22.11's net_af_packet and net_memif
// let ethdev set: they report RTE_ETHER_MAX_LEN as their largest frame
// (1518 bytes, less the Ethernet header and CRC), though both carry
// larger frames (see jumboVdev). net_tap reports 1522 bytes but drops
// what exceeds its ethdev MTU on TX: above this MTU the kernel path sets
// that MTU past ethdev (pmd.Port.SetTapTxMTU).
const vdevMaxMTU = 1500

// jumboVdev returns the driver of device if it is one whose frames are
// bounded by something other than ethdev's MTU (see vdevMaxMTU):
// net_af_packet's by its ring's framesz and the kernel interface's MTU,
// net_memif's by nothing, as it chains its buffers.
func jumboVdev(device string) (string, bool) {
	for _, drv := range [...]string{"net_af_packet", "net_memif"} {
		if strings.HasPrefix(device, drv) {
			return drv, true
		}
	}
	return "", false
}

// Daemon is a running data path.
type Daemon struct {
	plan *Plan
	log  *slog.Logger

	eal  *pmd.EAL
	pool *mempool.Pool
	port *pmd.Port
	gate *pmd.Gate // held while the port needs it (pmd.NeedsGate)
	// quiescence lets DPDK's pdump know when a capture callback it
	// removed is out of use (pmd.Quiescence); set while capture is served.
	quiescence *pmd.Quiescence
	sets       []*dispatch.RingSet                       // every ring set made, freed after the consumers
	setsOf     map[*dispatch.Service][]*dispatch.RingSet // the sets each service's consumers drain
	// mu guards what a reload replaces (plan, serviceTable) against
	// readers on other goroutines (Snapshot). Only the goroutine that
	// runs Start, Reload and Stop writes them.
	mu     sync.RWMutex
	manual bool
	serviceTable
	pollers []*dispatch.Poller
	// wakers end the idle sleeps of the poll loops (idle_sleep), indexed
	// as cfg.Pollers; the RoCE bridge wakes its loop's.
	wakers  []*pmd.IdleSleeper
	exited  chan loopExit // one value per poll loop that returned
	running int
	tmpDir  string
	// repinStop ends repinThreads' goroutine, which closes repinDone.
	repinStop, repinDone chan struct{}
	// runtimeCPUs are where the Go runtime's threads run (runtimeCPUs).
	runtimeCPUs []int
	ownEAL      bool
	// detach is the device to detach from the EAL once its port is
	// closed: one hot-plugged into a shared EAL, or a PCI device, whose
	// vfio or uio file DPDK keeps open until then. Open, it blocks the
	// unbind that gives the NIC back to its kernel driver: vfio-pci
	// waits for the holder to release the device.
	detach string
	roce   *roced.Node
	kernel *kernelPath
	// superviseStop ends the service processes' supervisor, which
	// closes superviseDone.
	superviseStop, superviseDone chan struct{}
	dialer                       *kernelif.Dialer // the RoCE bridge's, in the kernel interface's namespace
	kneigh                       *kneigh.Resolver // the RoCE endpoint's neighbours, in the af_xdp mode
}

// Options are run-time settings that are not part of the configuration.
type Options struct {
	Logger *slog.Logger
	// EAL, when set, is an already running EAL to use instead of starting
	// one (tests start one per process). Stop then leaves it running.
	EAL *pmd.EAL
	// Manual leaves the poll loops unstarted: the caller drives them with
	// Poller.PollOnce from its own goroutine (tests and benchmarks).
	Manual bool
}

// Start builds the data path and starts its poll loops.
func Start(plan *Plan, opts Options) (_ *Daemon, err error) {
	d := &Daemon{plan: plan, log: opts.Logger, setsOf: map[*dispatch.Service][]*dispatch.RingSet{}, manual: opts.Manual}
	if d.log == nil {
		d.log = slog.Default()
	}
	defer func() {
		if err != nil {
			d.teardown()
		}
	}()
	device, err := d.expandDevice(plan.Config.Port.Device)
	if err != nil {
		return nil, err
	}
	if err := d.startEAL(device, opts.EAL); err != nil {
		return nil, err
	}
	if err := d.newPool(); err != nil {
		return nil, err
	}
	info, err := d.openPort(device)
	if err != nil {
		return nil, err
	}
	d.newWakers()
	if err := d.buildServices(); err != nil {
		return nil, err
	}
	if err := d.buildPollers(); err != nil {
		return nil, err
	}
	if err := d.startPort(device, info); err != nil {
		return nil, err
	}
	d.exited = make(chan loopExit, len(d.pollers))
	if !opts.Manual {
		d.runPollers()
	}
	return d, nil
}

// startEAL starts the EAL with the port's device, or, when shared is
// set, probes the device in that running one.
func (d *Daemon) startEAL(device string, shared *pmd.EAL) error {
	cfg := d.plan.Config
	if shared != nil {
		d.eal = shared
		if err := pmd.ProbeDevice(device); err != nil {
			return err
		}
		d.detach = device
	} else if err := d.initEAL(device); err != nil {
		return err
	}
	d.log.Info("EAL up", "lcores", cfg.EAL.Lcores, "hugepages", d.eal.HasHugepages())
	if d.eal.Pdump() {
		d.quiescence = d.eal.Quiescence()
	}
	if d.ownEAL && d.eal.Pdump() {
		d.log.Info("live capture served", "command", "dpdk-dumpcap --file-prefix="+cfg.EAL.FilePrefix+" -i "+devargs.Name(device)+" -w FILE.pcapng")
		if name, args, _ := strings.Cut(device, ","); strings.HasPrefix(name, "net_pcap") && len(args) >= pcapArgMax {
			d.log.Warn("secondaries such as dpdk-dumpcap cannot attach to this port: net_pcap keeps only the first 63 bytes of its arguments for them; use a shorter rx_pcap path",
				"device", name, "args_bytes", len(args))
		}
	}
	return nil
}

// initEAL confines the runtime's threads to eal.runtime_cpus, if set,
// and starts the daemon's own EAL.
func (d *Daemon) initEAL(device string) error {
	cfg := d.plan.Config
	cpus, err := runtimeCPUs(cfg)
	if err != nil {
		return err
	}
	if cpus != nil {
		n, err := pinThreads(cpus, nil)
		if err != nil {
			return err
		}
		d.runtimeCPUs = cpus
		d.log.Info("runtime threads pinned before the EAL starts", "cpus", cpus, "threads", n)
	}
	if d.eal, err = pmd.InitEAL(ealConfig(cfg, device)); err != nil {
		return err
	}
	if devargs.IsPCI(device) {
		d.detach = device
	}
	d.ownEAL = true
	return nil
}

// ealConfig is the EAL cfg asks for, with the port's device.
func ealConfig(cfg *config.Config, device string) pmd.EALConfig {
	return pmd.EALConfig{
		Lcores: cfg.EAL.Lcores, MainLcore: cfg.EAL.MainLcore, MemoryMB: cfg.EAL.MemoryMB,
		NoHuge: cfg.EAL.NoHuge, HugeDir: cfg.EAL.HugepageDir(), FilePrefix: cfg.EAL.FilePrefix,
		Devices: []string{device}, ExtraArgs: cfg.EAL.ExtraArgs,
		// Pages the daemon reserved (eal.hugepages) must be free
		// again when it gives them back, after a crash too.
		HugeUnlink: cfg.EAL.Hugepages != nil,
	}
}

// newPool creates the mbuf pool the plan sized.
func (d *Daemon) newPool() (err error) {
	plan, cfg := d.plan, d.plan.Config
	d.pool, err = mempool.New(mempool.Config{
		Name: cfg.PoolName(), Size: plan.PoolSize, CacheSize: cfg.Mempool.CacheSize,
		DataRoom: cfg.Mempool.DataRoom, Socket: -1,
	})
	if err != nil {
		return err
	}
	d.log.Info("mbuf pool ready", "mbufs", plan.PoolSize, "demand", plan.Demand.String())
	return nil
}

// openPort opens and configures the port on device, holds the EAL's
// gate if its driver needs it, and creates the kernel interface if one
// is configured.
func (d *Daemon) openPort(device string) (pmd.Info, error) {
	cfg := d.plan.Config
	var err error
	if d.port, err = pmd.OpenPort(pmd.DeviceName(device)); err != nil {
		return pmd.Info{}, err
	}
	pc, jumbo := portConfig(cfg, device)
	if jumbo != "" {
		d.log.Info(jumbo+": port MTU above what DPDK 22.11 lets ethdev set; the driver carries larger frames anyway",
			"mtu", cfg.Port.MTU, "ethdev_max", vdevMaxMTU)
	}
	if err := d.port.Configure(pc, d.pool.C()); err != nil {
		return pmd.Info{}, err
	}
	info, err := d.port.Info()
	if err != nil {
		return pmd.Info{}, err
	}
	if pmd.NeedsGate(info.Driver) {
		// The driver unmaps the queues from the interrupt thread when
		// its peer leaves: the loops step aside for that thread.
		if d.gate, err = d.eal.HoldGate(); err != nil {
			return pmd.Info{}, err
		}
		d.log.Info("poll loops gated against DPDK's interrupt thread", "driver", info.Driver, "period", pmd.GatePeriod)
	}
	if cfg.Kernel != nil {
		if err := d.openKernel(); err != nil {
			return pmd.Info{}, err
		}
	}
	return info, nil
}

// portConfig is the port configuration cfg asks for on device. A jumbo
// MTU on a vdev that carries it anyway is left to the driver (MTU 0):
// jumbo is then the driver's name.
func portConfig(cfg *config.Config, device string) (pc pmd.PortConfig, jumbo string) {
	p := cfg.Port
	pc = pmd.PortConfig{
		RxQueues: uint16(p.RxQueues), TxQueues: uint16(p.TxQueues),
		RxDescriptors: uint16(p.RxDescriptors), TxDescriptors: uint16(p.TxDescriptors),
		MTU: uint16(p.MTU), Promiscuous: *p.Promiscuous,
	}
	if drv, ok := jumboVdev(device); ok && pc.MTU > vdevMaxMTU {
		pc.MTU = 0
		return pc, drv
	}
	return pc, ""
}

// buildServices builds every service's lanes and consumers, and the
// kernel path's consumer over its services.
func (d *Daemon) buildServices() error {
	cfg := d.plan.Config
	for i, s := range cfg.Services {
		b, err := d.newService(cfg, i)
		if err != nil {
			return err
		}
		d.add(b, s.Consumer.Type)
	}
	if d.kernel != nil {
		return d.newKernelConsumer()
	}
	return nil
}

// buildPollers makes the poll loops, unstarted.
func (d *Daemon) buildPollers() error {
	cfg := d.plan.Config
	for pi := range cfg.Pollers {
		pc := d.pollerConfig(cfg, pi, d.plan.Classifier, d.services, true)
		if w := d.wakers[pi]; w != nil {
			pc.Idle.Sleeper = w
		}
		p, err := dispatch.NewPoller(pc)
		if err != nil {
			return err
		}
		d.pollers = append(d.pollers, p)
	}
	return nil
}

// newWakers makes the sleeper of each poll loop that sleeps when idle,
// which the loop's consumers' other goroutines wake.
func (d *Daemon) newWakers() {
	cfg := d.plan.Config
	d.wakers = make([]*pmd.IdleSleeper, len(cfg.Pollers))
	if cfg.IdleSleep.Max == 0 {
		return
	}
	for pi := range d.wakers {
		d.wakers[pi] = pmd.NewIdleSleeper()
	}
}

// wakerOf is the sleeper of the poll loop that owns service, or nil.
func (d *Daemon) wakerOf(service string) *pmd.IdleSleeper {
	if o := d.plan.Config.Owner(service); o >= 0 && o < len(d.wakers) {
		return d.wakers[o]
	}
	return nil
}

// startPort starts the port, then the kernel interface.
func (d *Daemon) startPort(device string, info pmd.Info) error {
	cfg := d.plan.Config
	if err := d.port.Start(); err != nil {
		return err
	}
	if d.tmpDir != "" {
		// net_pcap has opened the sample capture (and with infinite_rx
		// read it): nothing is left for a forced exit to leave behind.
		os.RemoveAll(d.tmpDir)
		d.tmpDir = ""
	}
	if d.kernel != nil {
		if err := d.startKernel(); err != nil {
			return err
		}
	}
	link, _ := d.port.Link()
	d.log.Info("port started", "port", cfg.Port.Name, "device", pmd.DeviceName(device), "driver", info.Driver,
		"mac", info.MAC.String(), "link", link.String(), "rx_queues", cfg.Port.RxQueues, "tx_queues", cfg.Port.TxQueues)
	return nil
}

// runPollers runs each poll loop on its lcore, keeps the runtime's
// threads off their CPUs and supervises the service processes.
func (d *Daemon) runPollers() {
	loopTids := make(chan int, len(d.pollers))
	for _, p := range d.pollers {
		done := d.eal.RunOnLcore(p.Lcore(), func() {
			loopTids <- unix.Gettid()
			p.Run()
		})
		go func() { d.exited <- loopExit{lcore: p.Lcore(), err: <-done} }()
		d.running++
		d.log.Info("poll loop started", "lcore", p.Lcore(), "rx_queues", len(p.Queues()), "services", len(p.Owned()))
	}
	if d.ownEAL && d.runtimeCPUs != nil {
		d.repinThreads(loopTids)
	}
	d.superviseProcesses()
}

// repinEvery is how often threads that landed on a poll loop's CPU are
// moved back to the runtime's CPUs.
const repinEvery = time.Second

// repinThreads keeps the Go runtime's threads off the poll loops' CPUs.
// A thread the runtime starts from a worker lcore's thread (while it
// waits for its loop, or when the loop's thread gives up its P in a cgo
// call) inherits that CPU and would share it with the loop: every
// repinEvery, until Stop, such threads go back to the runtime's CPUs. The
// loops' own threads, whose ids arrive on tids, stay.
func (d *Daemon) repinThreads(tids <-chan int) {
	loops := map[int]bool{}
	timeout := time.After(5 * time.Second)
	for len(loops) < len(d.pollers) {
		select {
		case tid := <-tids:
			loops[tid] = true
		case <-timeout:
			d.log.Warn("poll loops did not start within 5s: threads left where they are")
			return
		}
	}
	cpus := d.runtimeCPUs
	d.repinStop, d.repinDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(d.repinDone)
		t := time.NewTicker(repinEvery)
		defer t.Stop()
		for {
			if _, err := pinThreads(cpus, loops); err != nil {
				d.log.Warn("threads not moved off the poll loops' CPUs", "err", err)
				return
			}
			select {
			case <-d.repinStop:
				return
			case <-t.C:
			}
		}
	}()
}

// loopExit reports a poll loop's return: nil, or its panic.
type loopExit struct {
	lcore uint
	err   error
}

// expandDevice replaces SamplePcapToken by a file holding the embedded
// capture, written to a private temporary directory.
func (d *Daemon) expandDevice(dev string) (string, error) {
	if !strings.Contains(dev, SamplePcapToken) {
		return dev, nil
	}
	dir, err := os.MkdirTemp("", "cephdpdkd-")
	if err != nil {
		return "", fmt.Errorf("daemon: sample capture: %w", err)
	}
	d.tmpDir = dir
	path := filepath.Join(dir, "ceph-node.pcap")
	if err := os.WriteFile(path, configs.SamplePcap, 0o600); err != nil {
		return "", fmt.Errorf("daemon: sample capture: %w", err)
	}
	return strings.ReplaceAll(dev, SamplePcapToken, path), nil
}

// serviceTable is what the daemon runs per service, indexed as the
// configuration's services; a reload replaces it whole.
type serviceTable struct {
	services []*dispatch.Service
	counts   [][]*consumer.Counts // its consumers' (one per lane if local)
	owned    []*dispatch.RingSet  // all its lanes, if one consumer drains them
	kinds    []string             // consumer.type
	procs    []*consumer.Process  // the daemon's side of a service process, or nil
}

// add appends a service newService built, of the named kind.
func (t *serviceTable) add(b builtService, kind string) {
	t.services = append(t.services, b.svc)
	t.counts = append(t.counts, b.counts)
	t.owned = append(t.owned, b.owned)
	t.kinds = append(t.kinds, kind)
	t.procs = append(t.procs, b.proc)
}

// builtService is what newService built for one service.
type builtService struct {
	svc    *dispatch.Service
	counts []*consumer.Counts // its consumers' (kernel services: set by newKernelConsumer)
	owned  *dispatch.RingSet  // all its lanes, if one consumer drains them
	proc   *consumer.Process  // the daemon's side of a service process
}

// newService builds service i of cfg: its lanes and, by its kind, its
// consumers. On error it frees what it built.
func (d *Daemon) newService(cfg *config.Config, i int) (_ builtService, err error) {
	s := cfg.Services[i]
	svc := &dispatch.Service{Name: s.Name}
	b := builtService{svc: svc}
	firstSet := len(d.sets)
	defer func() {
		if err != nil {
			d.closeService(svc, d.sets[firstSet:])
			d.sets = d.sets[:firstSet]
		} else {
			d.setsOf[svc] = slices.Clone(d.sets[firstSet:])
		}
	}()
	for k := range cfg.Lanes() {
		r, err := dispatch.NewRing(cfg.RingName(s.Name, k), s.RingSize, -1)
		if err != nil {
			return b, err
		}
		svc.Rings = append(svc.Rings, r)
	}
	kind := kindOf(s)
	if cfg.IsLocal(i) {
		// A consumer per lane, run by the loop that fills it.
		for k, r := range svc.Rings {
			set, err := d.ringSet(r)
			if err != nil {
				return b, err
			}
			c, err := kind.drain(d, cfg, s, set, config.LocalTxQueue(s, k))
			if err != nil {
				return b, err
			}
			svc.Local = append(svc.Local, c.consumer)
			b.counts = append(b.counts, c.counts)
		}
		return b, nil
	}
	// One consumer, run by the loop that owns the service, drains
	// every lane.
	set, err := d.ringSet(svc.Rings...)
	if err != nil {
		return b, err
	}
	b.owned = set
	c, err := kind.drain(d, cfg, s, set, s.Consumer.TxQueue)
	if err != nil {
		return b, err
	}
	svc.Consumer, b.proc = c.consumer, c.proc
	if c.counts != nil {
		b.counts = []*consumer.Counts{c.counts}
	}
	return b, nil
}

// closeService frees a service that no poll loop runs any more: what its
// consumers hold, the packets left in its lanes, the lanes and their
// ring sets. It returns the packets freed from the lanes.
func (d *Daemon) closeService(svc *dispatch.Service, sets []*dispatch.RingSet) int {
	if svc.Consumer != nil {
		svc.Consumer.Close()
	}
	for _, c := range svc.Local {
		c.Close()
	}
	freed := 0
	for _, r := range svc.Rings {
		freed += r.Close()
	}
	for _, set := range sets {
		set.Free()
	}
	return freed
}

// pollerConfig wires poll loop pi of cfg to services (indexed as cfg's)
// and the classifier. kernelTask false leaves the exception path out,
// for a reload to rewire it.
func (d *Daemon) pollerConfig(cfg *config.Config, pi int, cls *classify.Classifier, services []*dispatch.Service, kernelTask bool) dispatch.PollerConfig {
	pl := cfg.Pollers[pi]
	pcfg := dispatch.PollerConfig{
		Lcore: uint(pl.Lcore), Port: d.port.ID(), Lane: cfg.Lane(pi), BurstSize: cfg.Burst,
		Classifier: cls, Services: services, Gate: d.gate, Quiescence: d.quiescence,
		Idle: loop.IdleSleep{After: cfg.IdleSleep.After, Min: config.MinIdleSleep, Max: cfg.IdleSleep.Max},
	}
	for _, q := range pl.RxQueues {
		pcfg.Queues = append(pcfg.Queues, uint16(q))
	}
	for _, name := range pl.Services {
		i := cfg.ServiceIndex(name)
		pcfg.Owned = append(pcfg.Owned, i)
		if !kernelTask {
			continue
		}
		// A task drains every service of its kind: the loop runs it once.
		if t := kindOf(cfg.Services[i]).task(d); t != nil && !slices.Contains(pcfg.Tasks, t) {
			pcfg.Tasks = append(pcfg.Tasks, t)
		}
	}
	return pcfg
}

// ringSet gathers rings into a set the daemon frees at teardown.
func (d *Daemon) ringSet(rings ...*dispatch.Ring) (*dispatch.RingSet, error) {
	set, err := dispatch.NewRingSet(rings)
	if err != nil {
		return nil, err
	}
	d.sets = append(d.sets, set)
	return set, nil
}

// Stop shuts the data path down: stop receiving, let consumers drain the
// rings (bounded by the drain timeout or ctx), stop the poll loops, free
// what is left, stop and close the port, then check that the pool got
// every mbuf back. A leak is returned as an error wrapping mempool.ErrLeak.
func (d *Daemon) Stop(ctx context.Context) error {
	if d.repinStop != nil {
		close(d.repinStop)
		<-d.repinDone
		d.repinStop = nil
	}
	for _, p := range d.pollers {
		p.StopRx()
	}
	for _, p := range d.procs {
		if p != nil {
			p.SetClosing()
		}
	}
	deadline := time.Now().Add(d.plan.Config.Shutdown.DrainTimeout)
	for (!d.rxDrained() || d.queued() > 0 || d.procsBusy()) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if n := d.queued(); n > 0 {
		d.log.Warn("drain timeout: freeing packets still queued", "packets", n)
	}
	d.stopSupervisor()
	var errs []error
	for _, p := range d.pollers {
		p.Stop()
	}
	for ; d.running > 0; d.running-- {
		if x := <-d.exited; x.err != nil {
			errs = append(errs, fmt.Errorf("daemon: poll loop on lcore %d: %w", x.lcore, x.err))
		}
	}
	errs = append(errs, d.teardown())
	return errors.Join(errs...)
}

// rxDrained reports whether every running loop has dispatched what it
// received before RX stopped.
func (d *Daemon) rxDrained() bool {
	if d.running == 0 {
		return true
	}
	for _, p := range d.pollers {
		if !p.RxDrained() {
			return false
		}
	}
	return true
}

// queued counts the packets waiting in the rings of services someone
// drains: a process service's lanes count only while a process holds it.
func (d *Daemon) queued() int {
	n := 0
	for i, s := range d.services {
		if p := d.procs[i]; p != nil && !p.Busy() {
			continue
		}
		n += s.Queued()
	}
	return n
}

// teardown releases everything Start built, in reverse order.
func (d *Daemon) teardown() error {
	var errs []error
	d.stopSupervisor()
	for _, p := range d.pollers {
		p.Free()
	}
	d.pollers = nil
	freed := 0
	for i, s := range d.services {
		if p := d.procs[i]; p != nil {
			if err := p.Reclaim(); err != nil {
				d.log.Error("service process", "service", s.Name, "err", err)
				errs = append(errs, err)
			}
		}
		if s.Consumer != nil {
			s.Consumer.Close()
		}
		for _, c := range s.Local {
			c.Close()
		}
		for _, r := range s.Rings {
			freed += r.Close()
		}
	}
	if freed > 0 {
		d.log.Info("freed packets left in rings at shutdown", "packets", freed)
	}
	d.services, d.procs = nil, nil
	d.roce = nil
	d.wakers = nil
	if d.dialer != nil {
		d.dialer.Close()
		d.dialer = nil
	}
	if d.kneigh != nil {
		d.kneigh.Close()
		d.kneigh = nil
	}
	if err := d.closeKernel(); err != nil {
		errs = append(errs, err)
	}
	for _, set := range d.sets {
		set.Free()
	}
	d.sets, d.owned = nil, nil
	if d.port != nil {
		if d.plan.Config.Port.IsAFXDP() {
			// net_af_xdp frees sent mbufs when it pulls its completion
			// ring, on the next burst: give them back before the count.
			for q := range d.plan.Config.Port.TxQueues {
				d.port.FlushTx(uint16(q))
			}
		}
		if err := d.port.Stop(); err != nil {
			errs = append(errs, err)
		}
		if err := d.port.Close(); err != nil {
			errs = append(errs, err)
		}
		d.port = nil
	}
	if d.detach != "" {
		if err := pmd.RemoveDevice(d.detach); err != nil {
			errs = append(errs, err)
		}
		d.detach = ""
	}
	if d.quiescence != nil {
		if st := d.quiescence.Stats(); st.Removals > 0 {
			d.log.Info("capture callbacks removed after the poll loops left them", "removals", st.Removals,
				"waited", st.Waited, "timed_out", st.TimedOut)
		}
	}
	if d.gate != nil {
		st := d.gate.Stats()
		d.log.Info("interrupt-thread gate", "windows", st.Windows, "held", st.Held, "max_held", st.MaxHeld,
			"wait", st.Wait, "max_wait", st.MaxWait)
		// After the port: its stop and close then run with the interrupt
		// thread parked, not beside a memif disconnect of its own.
		if err := d.eal.ReleaseGate(); err != nil {
			errs = append(errs, err)
		}
		d.gate = nil
	}
	if d.pool != nil {
		held, who := driverHeld(d.plan.Config)
		if err := d.pool.CloseHeld(held, who); err != nil {
			d.log.Error("MBUF LEAK", "err", err)
			errs = append(errs, err)
		} else {
			d.log.Info("all mbufs returned", "pool", d.pool.Name(), "mbufs", d.pool.Size())
		}
		d.pool = nil
	}
	if d.eal != nil && d.ownEAL {
		if err := d.eal.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	d.eal = nil
	if d.tmpDir != "" {
		os.RemoveAll(d.tmpDir)
		d.tmpDir = ""
	}
	return errors.Join(errs...)
}

// driverHeld is how many mbufs the port's driver keeps for good, and
// whose they are, for the leak check.
func driverHeld(cfg *config.Config) (int, string) {
	if !cfg.Port.IsAFXDP() {
		return 0, ""
	}
	return cfg.Port.RxQueues * config.AFXDPFillRing, "in net_af_xdp's fill rings (DPDK 22.11 does not give them back on close)"
}

// Wait blocks until ctx ends or a poll loop exits on its own, which only
// a panic makes it do; that loop's error is returned.
func (d *Daemon) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case x := <-d.exited:
		d.running--
		return fmt.Errorf("daemon: poll loop on lcore %d exited: %v", x.lcore, x.err)
	}
}

// RoCE returns the RoCE termination, or nil when none is configured.
func (d *Daemon) RoCE() *roced.Node { return d.roce }

// Pollers returns the poll loops.
func (d *Daemon) Pollers() []*dispatch.Poller { return d.pollers }

// Services returns the services in configuration order.
func (d *Daemon) Services() []*dispatch.Service {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.services
}

// ConsumerCounts returns the consumer counters of service i, added up
// over its consumers.
func (d *Daemon) ConsumerCounts(i int) consumer.Total {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.consumerCounts(i)
}

func (d *Daemon) consumerCounts(i int) consumer.Total {
	var t consumer.Total
	for _, c := range d.counts[i] {
		t.Add(c)
	}
	return t
}

// Pool returns the mbuf pool.
func (d *Daemon) Pool() *mempool.Pool { return d.pool }

// Port returns the port.
func (d *Daemon) Port() *pmd.Port { return d.port }

// Gate returns the interrupt-thread gate the poll loops pass, or nil when
// the port's driver needs none.
func (d *Daemon) Gate() *pmd.Gate { return d.gate }

// Snapshot reads every counter for metrics and the status line.
func (d *Daemon) Snapshot() metrics.Snapshot {
	d.mu.RLock()
	defer d.mu.RUnlock()
	cfg := d.plan.Config
	var s metrics.Snapshot
	if d.port != nil {
		st, err := d.port.Stats(cfg.Port.RxQueues)
		if err == nil {
			link, _ := d.port.Link()
			s.Ports = append(s.Ports, metrics.Port{
				Name: cfg.Port.Name, Up: link.Up, SpeedMbps: link.SpeedMbps,
				RxPackets: st.RxPackets, RxBytes: st.RxBytes, TxPackets: st.TxPackets, TxBytes: st.TxBytes,
				RxMissed: st.RxMissed, RxErrors: st.RxErrors, TxErrors: st.TxErrors, RxNoMbuf: st.RxNoMbuf,
			})
		}
		for _, p := range d.pollers {
			for i := range p.Queues() {
				q := &p.Queues()[i]
				mq := metrics.Queue{Port: cfg.Port.Name, Queue: int(q.Queue), RxPackets: q.Packets.Load(), RxBytes: q.Bytes.Load()}
				if int(q.Queue) < len(st.Queues) {
					dq := st.Queues[q.Queue]
					mq.TxPackets, mq.TxBytes, mq.Errors = dq.TxPackets, dq.TxBytes, dq.RxErrors
				}
				s.Queues = append(s.Queues, mq)
			}
		}
	}
	for i, svc := range d.services {
		c := d.consumerCounts(i)
		s.Services = append(s.Services, metrics.ServiceSnapshot{
			Name: svc.Name, Packets: svc.Stats.Packets.Load(), Bytes: svc.Stats.Bytes.Load(), Drops: svc.Stats.Drops.Load(),
			RingCount: svc.Queued(), RingCapacity: svc.Capacity(),
			Consumer: d.kinds[i], Consumed: c.Packets, ConsumedBytes: c.Bytes, ConsumerDrops: c.Drops,
		})
	}
	now := time.Now()
	for i, p := range d.procs {
		if p == nil {
			continue
		}
		attached, pid := p.Attached()
		s.Processes = append(s.Processes, metrics.ProcessSnapshot{
			Service: d.services[i].Name, Attached: attached, PID: pid, HeartbeatAge: p.HeartbeatAge(now),
			SentPackets: p.Sent.Packets.Load(), SentBytes: p.Sent.Bytes.Load(), Recovered: p.Recovered.Load(),
		})
	}
	if d.pool != nil {
		s.Pools = append(s.Pools, metrics.Pool{Name: d.pool.Name(), Size: d.pool.Size(), Available: d.pool.Available(), InUse: d.pool.InUse()})
	}
	if d.gate != nil {
		st := d.gate.Stats()
		s.Gate = &metrics.Gate{Windows: st.Windows, Held: st.Held}
	}
	if d.quiescence != nil {
		st := d.quiescence.Stats()
		s.Capture = &metrics.Capture{Removals: st.Removals, TimedOut: st.TimedOut, Waited: st.Waited}
	}
	for r := classify.Reason(1); r < classify.NumReasons; r++ {
		var n uint64
		for _, p := range d.pollers {
			n += p.Malformed(r)
		}
		s.Malformed = append(s.Malformed, metrics.Malformed{Reason: r.String(), Count: n})
	}
	if kp := d.kernel; kp != nil && kp.consumer != nil {
		k := metrics.Kernel{Interface: cfg.Kernel.Interface, FromPackets: kp.consumer.FromKernel.Packets.Load(),
			FromBytes: kp.consumer.FromKernel.Bytes.Load(), FromDrops: kp.consumer.FromKernel.Drops.Load(),
			ForeignAddresses: int(kp.foreignAddrs.Load()), ForeignRoutes: int(kp.foreignRoutes.Load())}
		if st, err := kp.port.Stats(1); err == nil {
			k.IfRxPackets, k.IfTxPackets, k.IfErrors = st.RxPackets, st.TxPackets, st.RxErrors+st.TxErrors
		}
		s.Kernel = append(s.Kernel, k)
	}
	for _, p := range d.pollers {
		busy, total := p.BusyRatio()
		n, slept := p.Sleeps()
		s.Pollers = append(s.Pollers, metrics.Poller{Lcore: p.Lcore(), BusyNanos: busy, TotalNanos: total,
			Sleeps: n, SleepNanos: uint64(slept)})
	}
	return s
}
