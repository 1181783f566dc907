package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cephdpdkd/cephdpdkd/header"
	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/bridge"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/session"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// Defaults for fields left out of the file.
const (
	DefaultBurst         = 32
	DefaultRingSize      = 1024
	DefaultDescriptors   = 1024
	DefaultMTU           = 1500
	DefaultCacheSize     = 256
	DefaultDataRoom      = 2048 + 128 // payload + RTE_PKTMBUF_HEADROOM
	DefaultHeadroomMbufs = 1024
	DefaultMemoryMB      = 512
	DefaultMetricsListen = "127.0.0.1:9477"
	DefaultDrainTimeout  = 2 * time.Second
	MaxRules             = 64
	MetricsOff           = "off"
)

func (c *Config) applyDefaults() {
	if c.EAL.Lcores == "" {
		c.EAL.Lcores = "0-1"
	}
	if c.EAL.MemoryMB == 0 {
		c.EAL.MemoryMB = DefaultMemoryMB
	}
	if c.EAL.FilePrefix == "" {
		c.EAL.FilePrefix = "cephdpdkd-" + sanitize(c.Port.Name)
	}
	c.hugepagesDefaults()
	c.portModeDefaults()
	p := &c.Port
	if p.RxQueues == 0 {
		p.RxQueues = 1
	}
	if p.TxQueues == 0 {
		p.TxQueues = 1
	}
	if p.RxDescriptors == 0 {
		p.RxDescriptors = DefaultDescriptors
	}
	if p.TxDescriptors == 0 {
		p.TxDescriptors = DefaultDescriptors
	}
	if p.MTU == 0 && !p.IsAFXDP() {
		p.MTU = DefaultMTU
	}
	if p.Promiscuous == nil {
		on := true
		p.Promiscuous = &on
	}
	if c.Mempool.CacheSize == 0 {
		c.Mempool.CacheSize = DefaultCacheSize
	}
	if c.Mempool.DataRoom == 0 {
		c.Mempool.DataRoom = DefaultDataRoom
	}
	if c.Mempool.Headroom == 0 {
		c.Mempool.Headroom = DefaultHeadroomMbufs
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	for i := range c.Services {
		s := &c.Services[i]
		if s.RingSize == 0 {
			s.RingSize = DefaultRingSize
		}
		if s.Consumer.Type == "" {
			s.Consumer.Type = ConsumerCount
		}
	}
	if r := c.RoCE; r != nil {
		// Each owner's default: the sessions' sizes, the connection
		// manager's QP settings (an RNR timer of 0 would mean 655 ms).
		orDefault(&r.BufferSize, session.DefaultBufferSize)
		orDefault(&r.SendBuffers, session.DefaultSendBuffers)
		orDefault(&r.RecvBuffers, session.DefaultRecvBuffers)
		orDefault(&r.MTU, cm.DefaultPathMTU)
		orDefault(&r.MemoryMB, DefaultRoCEMemoryMB)
		orDefault(&r.RNRTimer, cm.DefaultMinRNRTimer)
		orDefault(&r.Timeout, cm.DefaultTimeout)
		orDefault(&r.RetryCount, cm.DefaultRetryCount)
		orDefault(&r.RNRRetry, cm.DefaultRNRRetry)
		if r.IdleProbe == nil {
			d := roce.DefaultIdleProbe
			r.IdleProbe = &d
		}
	}
	c.kernelDefaults()
	// After the bridge's pools have theirs (kernelDefaults).
	c.roceSessionsDefault()
	if c.Metrics.Listen == "" {
		c.Metrics.Listen = DefaultMetricsListen
	}
	c.idleSleepDefaults()
	if c.Shutdown.DrainTimeout == 0 {
		c.Shutdown.DrainTimeout = DefaultDrainTimeout
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if len(c.Pollers) == 0 {
		// One poll loop on the first worker lcore receives every queue and
		// owns the services that need one consumer (kernel, roce); count
		// and forward services run where packets arrive, which is there.
		if lcores, err := ParseLcores(c.EAL.Lcores); err == nil {
			for _, l := range lcores {
				if l != c.EAL.MainLcore {
					pl := Poller{Lcore: l}
					for q := 0; q < p.RxQueues; q++ {
						pl.RxQueues = append(pl.RxQueues, q)
					}
					for _, s := range c.Services {
						if s.owned() {
							pl.Services = append(pl.Services, s.Name)
						}
					}
					c.Pollers = []Poller{pl}
					break
				}
			}
		}
	}
}

func sanitize(s string) string {
	if s == "" {
		return "port"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,23}$`)

// filePrefixRE bounds eal.file_prefix, which DPDK puts into unix socket
// paths (108 bytes) under its runtime directory, and which by default is
// "cephdpdkd-" and the port name.
var filePrefixRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)

// Validate checks the whole configuration and reports every problem found,
// each with the line it comes from. Its steps go through the file's
// sections in order; later ones use what earlier ones found (the
// lcores, the services by name, which poll loop uses which queue).
func (c *Config) Validate() error {
	v := &validation{c: c}
	for _, step := range validationSteps {
		step.run(v)
	}
	return errors.Join(v.errs...)
}

// validationSteps are Validate's steps, in order.
var validationSteps = [...]struct {
	name string
	run  func(*validation)
}{
	{"eal", (*validation).eal},
	{"port", (*validation).port},
	{"mempool", (*validation).mempool},
	{"burst", (*validation).burst},
	{"services", (*validation).services},
	{"roce", (*validation).roce},
	{"rules", (*validation).rules},
	{"pollers", (*validation).pollers},
	{"coverage", (*validation).coverage},
	{"kernel", (*validation).kernel},
	{"local tx queues", (*validation).localTxQueues},
	{"metrics", (*validation).metrics},
	{"shutdown", (*validation).shutdown},
	{"idle sleep", (*validation).idleSleep},
	{"logging", (*validation).logging},
}

// validation is one run of Validate: the problems found so far, and
// what the steps hand on to later ones.
type validation struct {
	c    *Config
	errs []error
	// lcores is eal.lcores as a set; nil if it does not parse.
	lcores map[int]bool
	// portNameOK: port.name is valid, so ring names can be checked.
	portNameOK bool
	// byName maps each service's name to its index.
	byName map[string]int
	// queueOwner, serviceOwner and txOwner map RX queues, services and
	// TX queues to the poll loop that uses them.
	queueOwner   map[int]int
	serviceOwner map[string]int
	txOwner      map[int]int
}

// bad records a problem with the setting at path.
func (v *validation) bad(path, format string, args ...any) {
	v.errs = append(v.errs, v.c.problem(path, fmt.Sprintf(format, args...)))
}

// inRange reports an int setting outside lo..hi.
func (v *validation) inRange(path string, val, lo, hi int) {
	if val < lo || val > hi {
		v.bad(path, "%d is outside %d..%d", val, lo, hi)
	}
}

// eal checks the EAL options: the lcores, memory, hugepages and the
// file prefix.
func (v *validation) eal() {
	e := v.c.EAL
	lcores, err := ParseLcores(e.Lcores)
	if err != nil {
		v.bad("eal.lcores", "%v", err)
	} else {
		v.lcores = map[int]bool{}
	}
	for _, l := range lcores {
		v.lcores[l] = true
		if l >= MaxLcores {
			v.bad("eal.lcores", "lcore %d: DPDK takes lcores 0..%d (RTE_MAX_LCORE)", l, MaxLcores-1)
		}
	}
	if v.lcores != nil && !v.lcores[e.MainLcore] {
		v.bad("eal.main_lcore", "lcore %d is not in eal.lcores %q", e.MainLcore, e.Lcores)
	}
	if e.RuntimeCPUs != "" {
		cpus, err := ParseLcores(e.RuntimeCPUs)
		if err != nil {
			v.bad("eal.runtime_cpus", "%v", err)
		}
		for _, cpu := range cpus {
			if cpu >= MaxLcores {
				v.bad("eal.runtime_cpus", "CPU %d: at most %d", cpu, MaxLcores-1)
			}
		}
	}
	if e.MemoryMB < 64 {
		v.bad("eal.memory_mb", "%d MB is too little for DPDK; use at least 64", e.MemoryMB)
	} else if e.MemoryMB > MaxMemoryMB {
		v.bad("eal.memory_mb", "%d MB is more than %d", e.MemoryMB, MaxMemoryMB)
	}
	v.c.validateExtraArgs(v.bad)
	v.c.validateHugepages(v.bad)
	if !filePrefixRE.MatchString(strings.ToLower(sanitize(e.FilePrefix))) || strings.ContainsAny(e.FilePrefix, "/ ") {
		v.bad("eal.file_prefix", "%q must be a name of at most 40 characters, starting with a letter, without slashes or spaces", e.FilePrefix)
	}
}

// port checks the port: its name, binding, device and queues.
func (v *validation) port() {
	p := v.c.Port
	v.portNameOK = v.c.validatePortName(v.bad)
	v.portMode()
	v.c.validateBind(v.bad)
	switch _, err := devargs.Parse(p.Device); {
	case p.Device == "" && p.IsAFXDP():
		// Derived from port.af_xdp.interface, whose absence portMode
		// reports.
	case p.Device == "":
		v.bad("port.device", "required: a PCI address or vdev devargs such as net_af_packet0,iface=veth0")
	case err != nil:
		v.bad("port.device", "%v", err)
	}
	v.inRange("port.rx_queues", p.RxQueues, 1, 64)
	v.inRange("port.tx_queues", p.TxQueues, 1, 64)
	v.inRange("port.rx_descriptors", p.RxDescriptors, 64, 32768)
	v.inRange("port.tx_descriptors", p.TxDescriptors, 64, 32768)
	if !p.IsAFXDP() {
		v.inRange("port.mtu", p.MTU, 68, 9600)
	}
}

// mempool checks the mbuf pool, whose mbufs must hold a whole frame.
func (v *validation) mempool() {
	m, mtu := v.c.Mempool, v.c.Port.MTU
	v.inRange("mempool.cache_size", m.CacheSize, 0, 512)
	v.inRange("mempool.data_room", m.DataRoom, 256, 65535)
	v.inRange("mempool.headroom", m.Headroom, 0, 1<<24)
	if m.Mbufs < 0 || m.Mbufs > MaxMbufs {
		v.bad("mempool.mbufs", "%d is outside 0 (computed)..%d", m.Mbufs, MaxMbufs)
	}
	roomOK := m.DataRoom-128 >= mtu+18
	if !roomOK {
		v.bad("mempool.data_room", "%d leaves %d bytes after the 128-byte headroom, less than MTU %d plus an 18-byte Ethernet header: frames would span mbufs", m.DataRoom, m.DataRoom-128, mtu)
	}
	v.afPacketFrames(roomOK)
}

func (v *validation) burst() { v.inRange("burst_size", v.c.Burst, 1, MaxBurst) }

// services checks each service, its consumer by its kind, and
// default_service.
func (v *validation) services() {
	c := v.c
	v.byName = map[string]int{}
	if len(c.Services) == 0 {
		v.bad("services", "at least one service is required")
	}
	if len(c.Services) > 32 {
		v.bad("services", "%d services; at most 32", len(c.Services))
	}
	for i := range c.Services {
		v.service(i)
	}
	if _, ok := v.byName[c.DefaultService]; !ok {
		v.bad("default_service", "%q is not a defined service", c.DefaultService)
	}
}

// service checks services[i].
func (v *validation) service(i int) {
	s := v.c.Services[i]
	if !nameRE.MatchString(s.Name) {
		v.bad(servicePath(i, "name"), "%q: lower-case letters, digits, '-' and '_', starting with a letter, at most 24 characters", s.Name)
	} else if v.portNameOK {
		v.c.validateRingName(i, v.bad)
	}
	if _, dup := v.byName[s.Name]; dup {
		v.bad(servicePath(i, "name"), "service %q is defined twice", s.Name)
	}
	v.byName[s.Name] = i
	if s.RingSize < 2 || s.RingSize > 1<<24 || s.RingSize&(s.RingSize-1) != 0 {
		v.bad(servicePath(i, "ring_size"), "%d must be a power of two between 2 and %d", s.RingSize, 1<<24)
	}
	if k := s.Kind(); k != nil {
		k.check(v, i)
	} else {
		v.bad(servicePath(i, "consumer.type"), "%q: want %s", s.Consumer.Type, kindNames())
	}
}

// roce checks the roce section.
func (v *validation) roce() {
	if r := v.c.RoCE; r != nil {
		v.c.validateRoCE(r, v.byName, v.bad)
	}
}

// rules checks the classification rules and their number.
func (v *validation) rules() {
	c := v.c
	if n := len(c.Rules) + len(c.RoCERules()); n > MaxRules {
		v.bad("rules", "%d rules (with the RoCE endpoint's); at most %d", n, MaxRules)
	}
	for i, r := range c.Rules {
		path := fmt.Sprintf("rules[%d]", i)
		if _, ok := v.byName[r.Service]; !ok {
			v.bad(path+".service", "%q is not a defined service", r.Service)
		}
		if (len(r.DstPorts) > 0 || len(r.SrcPorts) > 0) && r.Protocol != 6 && r.Protocol != 17 && r.Protocol != 132 && r.Protocol != 0 {
			v.bad(path+".protocol", "ports need tcp or udp, not protocol %d", r.Protocol)
		}
	}
}

// pollers checks each poll loop and records which RX queues, services
// and TX queues it takes.
func (v *validation) pollers() {
	c := v.c
	if len(c.Pollers) == 0 {
		v.bad("pollers", "no poll loop: eal.lcores %q has no lcore besides the main lcore %d", c.EAL.Lcores, c.EAL.MainLcore)
	}
	v.queueOwner, v.serviceOwner, v.txOwner = map[int]int{}, map[string]int{}, map[int]int{}
	seenLcore := map[int]bool{}
	for i, pl := range c.Pollers {
		path := fmt.Sprintf("pollers[%d]", i)
		if v.lcores != nil && !v.lcores[pl.Lcore] {
			v.bad(path+".lcore", "lcore %d is not in eal.lcores %q", pl.Lcore, c.EAL.Lcores)
		}
		if pl.Lcore == c.EAL.MainLcore {
			v.bad(path+".lcore", "lcore %d is the main lcore, which runs the Go runtime; pick a worker lcore", pl.Lcore)
		}
		if seenLcore[pl.Lcore] {
			v.bad(path+".lcore", "lcore %d already has a poll loop", pl.Lcore)
		}
		seenLcore[pl.Lcore] = true
		v.pollerQueues(i)
		v.pollerServices(i)
	}
}

// pollerQueues checks the RX queues pollers[i] polls.
func (v *validation) pollerQueues(i int) {
	for j, q := range v.c.Pollers[i].RxQueues {
		qp := fmt.Sprintf("pollers[%d].rx_queues[%d]", i, j)
		if q < 0 || q >= v.c.Port.RxQueues {
			v.bad(qp, "rx queue %d does not exist: the port has %d", q, v.c.Port.RxQueues)
		} else if o, dup := v.queueOwner[q]; dup {
			v.bad(qp, "rx queue %d is already polled by pollers[%d]", q, o)
		}
		v.queueOwner[q] = i
	}
}

// pollerServices checks the services pollers[i] drains, and the TX
// queues their consumers take.
func (v *validation) pollerServices(i int) {
	for j, name := range v.c.Pollers[i].Services {
		sp := fmt.Sprintf("pollers[%d].services[%d]", i, j)
		si, ok := v.byName[name]
		if !ok {
			v.bad(sp, "%q is not a defined service", name)
			continue
		}
		if o, dup := v.serviceOwner[name]; dup {
			v.bad(sp, "service %q is already drained by pollers[%d]", name, o)
		}
		v.serviceOwner[name] = i
		if q, ok := v.c.txQueueOf(v.c.Services[si]); ok {
			if o, used := v.txOwner[q]; used && o != i {
				v.bad(sp, "tx queue %d is already used by pollers[%d]; tx queues are not shared between lcores", q, o)
			}
			v.txOwner[q] = i
		}
	}
}

// coverage checks that some poll loop polls every RX queue and drains
// every service that is not local.
func (v *validation) coverage() {
	c := v.c
	if len(c.Pollers) == 0 {
		return
	}
	for q := 0; q < c.Port.RxQueues; q++ {
		if _, ok := v.queueOwner[q]; !ok {
			v.bad("pollers", "rx queue %d is not polled by any poll loop", q)
		}
	}
	for i, s := range c.Services {
		if _, ok := v.serviceOwner[s.Name]; !ok && !c.IsLocal(i) {
			v.bad("pollers", "service %q is not drained by any poll loop: its ring would fill and drop", s.Name)
		}
	}
}

// kernel checks the kernel section, and gives kernel.tx_queue to the
// poll loop that drains the kernel services.
func (v *validation) kernel() {
	c := v.c
	c.validateKernel(v.bad)
	k := c.Kernel
	if k == nil {
		return
	}
	if ks := c.KernelServices(); len(ks) > 0 {
		if o := c.Owner(c.Services[ks[0]].Name); o >= 0 {
			if _, used := v.txOwner[k.TxQueue]; !used {
				v.txOwner[k.TxQueue] = o
			}
		}
	}
}

func (v *validation) localTxQueues() { v.c.validateLocalTxQueues(v.txOwner, v.bad) }

// metrics checks the metrics listener's address.
func (v *validation) metrics() {
	l := v.c.Metrics.Listen
	if l == MetricsOff {
		return
	}
	if _, port, err := net.SplitHostPort(l); err != nil {
		v.bad("metrics.listen", "%q: want host:port or %q", l, MetricsOff)
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.bad("metrics.listen", "%q: bad port", l)
	}
}

func (v *validation) shutdown() {
	if d := v.c.Shutdown.DrainTimeout; d < 0 || d > time.Minute {
		v.bad("shutdown.drain_timeout", "%v is outside 0..1m", d)
	}
}

// logging checks the log level and format.
func (v *validation) logging() {
	switch v.c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.bad("log.level", "%q: want debug, info, warn or error", v.c.Log.Level)
	}
	switch v.c.Log.Format {
	case "text", "json":
	default:
		v.bad("log.format", "%q: want text or json", v.c.Log.Format)
	}
}

// txQueueOf returns the TX queue a service's consumer transmits on.
func (c *Config) txQueueOf(s Service) (int, bool) {
	if k := s.Kind(); k != nil {
		return k.TxQueue(c, s)
	}
	return 0, false
}

// orDefault sets *v to def if it is the zero value: the key was left out.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// MaxRoCEWindow bounds roce.window, far inside the PSN space's half.
const MaxRoCEWindow = 1 << 16

// The daemon's own RoCE budget: roce.max_sessions sessions in
// roce.memory_mb of DPDK memory. A session of a built-in service
// (roce.listen, roce.ceph_tcp) registers send_buffers + recv_buffers
// buffers of buffer_size bytes of its own; the bridge's connections share
// its pools, so an idle one registers nothing, and a node's thousands of
// Ceph client connections fit the default. max_sessions also bounds the
// bridge's connections, and the connection manager's table is 4 times
// as large. Beyond registered memory a session costs its QP's state,
// two goroutines and a descriptor for the bridge's TCP side, and an
// entry in a completion queue sized for max_sessions (about 30-40 KiB
// of process memory an idle bridged connection: TestBridgeScaleOverDPDK).
const (
	DefaultRoCESessions = 4096
	MaxRoCESessions     = 65536
	DefaultRoCEMemoryMB = 256
)

// roceSessionsDefault sets roce.max_sessions when the file leaves it out:
// DefaultRoCESessions, unless built-in services give each session buffers
// of its own; then as many sessions as roce.memory_mb holds beside the
// bridge's pools, at least one (validate says when even that does not
// fit). Values out of their ranges leave DefaultRoCESessions, for
// validate to name them.
func (c *Config) roceSessionsDefault() {
	r := c.RoCE
	if r == nil || r.MaxSessions != 0 {
		return
	}
	r.MaxSessions = DefaultRoCESessions
	if len(r.Listen) == 0 && len(r.CephTCP) == 0 {
		return
	}
	if r.MemoryMB < 1 || r.MemoryMB > MaxMemoryMB || r.BufferSize < session.MinBufferSize || r.BufferSize > session.MaxBufferSize ||
		r.SendBuffers < 1 || r.SendBuffers > session.MaxBuffers || r.RecvBuffers < 1 || r.RecvBuffers > session.MaxBuffers {
		return
	}
	room := r.MemoryMB << 20
	if b := r.Bridge; b != nil && b.RecvPool >= 0 && b.RecvPool <= bridge.MaxPool && b.SendPool >= 0 && b.SendPool <= bridge.MaxPool {
		room -= (b.RecvPool + b.SendPool) * r.BufferSize
	}
	r.MaxSessions = max(1, min(DefaultRoCESessions, room/((r.SendBuffers+r.RecvBuffers)*r.BufferSize)))
}

func (c *Config) validateRoCE(r *RoCE, services map[string]int, bad func(string, string, ...any)) {
	if i, ok := services[r.Service]; !ok {
		bad("roce.service", "%q is not a defined service", r.Service)
	} else if c.Services[i].Consumer.Type != ConsumerRoCE {
		bad("roce.service", "service %q must have consumer type %q", r.Service, ConsumerRoCE)
	}
	a := r.Address.Addr()
	switch {
	case !a.IsValid() && c.Port.IsAFXDP():
		// The host check takes the interface's own address: one
		// file serves every node (a DaemonSet's ConfigMap).
	case !a.IsValid() || !a.Is4() || r.Address.Bits() != 32:
		bad("roce.address", "want the endpoint's IPv4 address, e.g. 10.0.0.5")
	}
	if r.MAC != "" {
		if hw, err := net.ParseMAC(r.MAC); err != nil || len(hw) != 6 {
			bad("roce.mac", "%q is not an Ethernet MAC address", r.MAC)
		}
	}
	if r.TxQueue < 0 || r.TxQueue >= c.Port.TxQueues {
		bad("roce.tx_queue", "tx queue %d does not exist: the port has %d", r.TxQueue, c.Port.TxQueues)
	}
	if _, ok := wire.MTUEnum(r.MTU); !ok {
		bad("roce.mtu", "%d: want 256, 512, 1024, 2048 or 4096", r.MTU)
	}
	// In the af_xdp mode the interface keeps its own MTU: the host
	// check holds roce.mtu to it.
	if !c.Port.IsAFXDP() && !roceFits(r.MTU, c.Port.MTU) && r.MTU > 1024 {
		bad("roce.mtu", "path MTU %d does not fit the port MTU %d with RoCEv2 headers", r.MTU, c.Port.MTU)
	}
	if r.Window < 0 || r.Window > MaxRoCEWindow {
		bad("roce.window", "%d packets: want 1..%d (0: rxe's 128)", r.Window, MaxRoCEWindow)
	}
	bufferOK := r.BufferSize >= session.MinBufferSize && r.BufferSize <= session.MaxBufferSize
	if !bufferOK {
		bad("roce.buffer_size", "%d outside %d..%d", r.BufferSize, session.MinBufferSize, session.MaxBufferSize)
	}
	buffersOK := r.SendBuffers >= 1 && r.SendBuffers <= session.MaxBuffers && r.RecvBuffers >= 1 && r.RecvBuffers <= session.MaxBuffers
	if !buffersOK {
		bad("roce", "send_buffers and recv_buffers must be 1..%d", session.MaxBuffers)
	}
	if r.RNRTimer > roce.MaxTimerCode || r.Timeout > roce.MaxTimerCode || r.RetryCount > roce.MaxRetry || r.RNRRetry > roce.MaxRetry {
		bad("roce", "rnr_timer and timeout are 5-bit codes (0..%d), retry_count and rnr_retry 0..%d", roce.MaxTimerCode, roce.MaxRetry)
	}
	if p := r.IdleProbeInterval(); p != 0 && (p < roce.MinIdleProbe || p > roce.MaxIdleProbe) {
		bad("roce.idle_probe", "%v: want 0s (off) or %v..%v", p, roce.MinIdleProbe, roce.MaxIdleProbe)
	}
	sessionsOK := r.MaxSessions >= 1 && r.MaxSessions <= MaxRoCESessions
	if !sessionsOK {
		bad("roce.max_sessions", "%d is outside 1..%d", r.MaxSessions, MaxRoCESessions)
	}
	memoryOK := r.MemoryMB >= 1 && r.MemoryMB <= MaxMemoryMB
	if !memoryOK {
		bad("roce.memory_mb", "%d is outside 1..%d", r.MemoryMB, MaxMemoryMB)
	}
	// With every factor in range the product stays below 2^46.
	if sessionsOK && memoryOK && bufferOK && buffersOK {
		// The built-in services give each session buffers of its own;
		// the bridge's connections share its pools.
		need, what := 0, ""
		if len(r.Listen) > 0 || len(r.CephTCP) > 0 {
			need = r.MaxSessions * (r.SendBuffers + r.RecvBuffers) * r.BufferSize
			what = fmt.Sprintf("%d sessions × %d buffers × %d bytes", r.MaxSessions, r.SendBuffers+r.RecvBuffers, r.BufferSize)
		}
		if b := r.Bridge; b != nil && b.RecvPool <= bridge.MaxPool && b.SendPool <= bridge.MaxPool {
			need += (b.RecvPool + b.SendPool) * r.BufferSize
			if what != "" {
				what += " + "
			}
			what += fmt.Sprintf("the bridge's %d + %d pooled buffers × %d bytes", b.RecvPool, b.SendPool, r.BufferSize)
		}
		if need > r.MemoryMB<<20 {
			bad("roce.memory_mb", "%d MB cannot hold %s (%d MB)", r.MemoryMB, what, (need+(1<<20)-1)>>20)
		}
	}
	ports := map[uint16]bool{}
	for i, l := range r.Listen {
		path := fmt.Sprintf("roce.listen[%d]", i)
		if l.Port == 0 {
			bad(path+".port", "required")
		} else if ports[l.Port] {
			bad(path+".port", "port %d is listed twice", l.Port)
		}
		ports[l.Port] = true
		switch l.App {
		case AppEcho, AppDiscard, AppRPing:
			if l.Count != 0 || l.Size != 0 {
				bad(path, "count and size are for %q listeners", AppTose)
			}
		case AppTose:
			if l.Count < 0 || l.Count > 1<<20 || l.Size < 0 || l.Size > r.BufferSize {
				bad(path, "count %d, size %d: want count ≤ 1048576 and size ≤ roce.buffer_size %d", l.Count, l.Size, r.BufferSize)
			}
		default:
			bad(path+".app", "%q: want %q, %q, %q or %q", l.App, AppEcho, AppDiscard, AppRPing, AppTose)
		}
	}
	listens := map[string]int{}
	for i, l := range r.CephTCP {
		path := fmt.Sprintf("roce.ceph_tcp[%d]", i)
		if _, _, err := net.SplitHostPort(l.Listen); err != nil {
			bad(path+".listen", "%q: want host:port", l.Listen)
		} else if o, dup := listens[l.Listen]; dup {
			bad(path+".listen", "%s is already listened on by roce.ceph_tcp[%d]", l.Listen, o)
		}
		listens[l.Listen] = i
		switch l.App {
		case AppEcho, AppDiscard:
		default:
			bad(path+".app", "%q: want %q or %q", l.App, AppEcho, AppDiscard)
		}
	}
}

// RoCERules are the rules the daemon puts ahead of the configured ones
// when a RoCE endpoint is configured: RoCEv2 to its address, and ARP
// for it, go to its service.
func (c *Config) RoCERules() []Rule {
	r := c.RoCE
	if r == nil {
		return nil
	}
	roce := Rule{Service: r.Service, EtherType: EtherType(header.EtherTypeIPv4), Protocol: Protocol(header.ProtoUDP),
		DstPorts: []PortRange{{wire.UDPPort, wire.UDPPort}}}
	if r.Address.IsValid() {
		roce.DstCIDRs = []Prefix{r.Address}
	}
	rules := []Rule{roce}
	if c.Port.IsAFXDP() {
		// The XDP program hands the daemon RoCEv2 to the address and
		// nothing else: ARP stays with the kernel, which owns the address.
		return rules
	}
	if !c.roceAddressIsKernel() {
		// A shared address is the kernel's to answer ARP for (with the
		// same MAC); the endpoint learns its peers from their frames.
		rules = append(rules, Rule{Service: r.Service, EtherType: EtherType(header.EtherTypeARP), DstCIDRs: []Prefix{r.Address}})
	}
	return rules
}

// ServiceIndex returns the index of the named service, or -1.
func (c *Config) ServiceIndex(name string) int {
	for i, s := range c.Services {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// ParseLcores parses an EAL lcore list such as "0-1" or "0,2-3".
func ParseLcores(s string) ([]int, error) {
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a >= 1024 {
			return nil, fmt.Errorf("lcore list %q: bad lcore %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b >= 1024 {
				return nil, fmt.Errorf("lcore list %q: bad range %q", s, part)
			}
		}
		for l := a; l <= b; l++ {
			seen[l] = true
		}
	}
	out := make([]int, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	sort.Ints(out)
	return out, nil
}
