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
	if p.MTU == 0 {
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
		orDefault(&r.MaxSessions, DefaultRoCESessions)
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
	if c.Metrics.Listen == "" {
		c.Metrics.Listen = DefaultMetricsListen
	}
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
						if s.Consumer.Type == ConsumerKernel || s.Consumer.Type == ConsumerRoCE || s.Consumer.Type == ConsumerProcess {
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
// each with the line it comes from.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, c.problem(path, fmt.Sprintf(format, args...)))
	}

	lcores, err := ParseLcores(c.EAL.Lcores)
	if err != nil {
		bad("eal.lcores", "%v", err)
	}
	lcoreSet := map[int]bool{}
	for _, l := range lcores {
		lcoreSet[l] = true
		if l >= MaxLcores {
			bad("eal.lcores", "lcore %d: DPDK takes lcores 0..%d (RTE_MAX_LCORE)", l, MaxLcores-1)
		}
	}
	if err == nil && !lcoreSet[c.EAL.MainLcore] {
		bad("eal.main_lcore", "lcore %d is not in eal.lcores %q", c.EAL.MainLcore, c.EAL.Lcores)
	}
	if c.EAL.RuntimeCPUs != "" {
		cpus, err := ParseLcores(c.EAL.RuntimeCPUs)
		if err != nil {
			bad("eal.runtime_cpus", "%v", err)
		}
		for _, cpu := range cpus {
			if cpu >= MaxLcores {
				bad("eal.runtime_cpus", "CPU %d: at most %d", cpu, MaxLcores-1)
			}
		}
	}
	if c.EAL.MemoryMB < 64 {
		bad("eal.memory_mb", "%d MB is too little for DPDK; use at least 64", c.EAL.MemoryMB)
	} else if c.EAL.MemoryMB > MaxMemoryMB {
		bad("eal.memory_mb", "%d MB is more than %d", c.EAL.MemoryMB, MaxMemoryMB)
	}
	c.validateExtraArgs(bad)
	c.validateHugepages(bad)
	if !filePrefixRE.MatchString(strings.ToLower(sanitize(c.EAL.FilePrefix))) || strings.ContainsAny(c.EAL.FilePrefix, "/ ") {
		bad("eal.file_prefix", "%q must be a name of at most 40 characters, starting with a letter, without slashes or spaces", c.EAL.FilePrefix)
	}

	p := c.Port
	portNameOK := c.validatePortName(bad)
	c.validateBind(bad)
	if p.Device == "" {
		bad("port.device", "required: a PCI address or vdev devargs such as net_af_packet0,iface=veth0")
	} else if _, err := devargs.Parse(p.Device); err != nil {
		bad("port.device", "%v", err)
	}
	checkRange := func(path string, v, lo, hi int) {
		if v < lo || v > hi {
			bad(path, "%d is outside %d..%d", v, lo, hi)
		}
	}
	checkRange("port.rx_queues", p.RxQueues, 1, 64)
	checkRange("port.tx_queues", p.TxQueues, 1, 64)
	checkRange("port.rx_descriptors", p.RxDescriptors, 64, 32768)
	checkRange("port.tx_descriptors", p.TxDescriptors, 64, 32768)
	checkRange("port.mtu", p.MTU, 68, 9600)
	checkRange("mempool.cache_size", c.Mempool.CacheSize, 0, 512)
	checkRange("mempool.data_room", c.Mempool.DataRoom, 256, 65535)
	checkRange("mempool.headroom", c.Mempool.Headroom, 0, 1<<24)
	if c.Mempool.Mbufs < 0 || c.Mempool.Mbufs > MaxMbufs {
		bad("mempool.mbufs", "%d is outside 0 (computed)..%d", c.Mempool.Mbufs, MaxMbufs)
	}
	if c.Mempool.DataRoom-128 < p.MTU+18 {
		bad("mempool.data_room", "%d leaves %d bytes after the 128-byte headroom, less than MTU %d plus an 18-byte Ethernet header: frames would span mbufs", c.Mempool.DataRoom, c.Mempool.DataRoom-128, p.MTU)
	}
	checkRange("burst_size", c.Burst, 1, MaxBurst)

	services := map[string]int{}
	if len(c.Services) == 0 {
		bad("services", "at least one service is required")
	}
	if len(c.Services) > 32 {
		bad("services", "%d services; at most 32", len(c.Services))
	}
	for i, s := range c.Services {
		path := fmt.Sprintf("services[%d]", i)
		if !nameRE.MatchString(s.Name) {
			bad(path+".name", "%q: lower-case letters, digits, '-' and '_', starting with a letter, at most 24 characters", s.Name)
		} else if portNameOK {
			c.validateRingName(i, bad)
		}
		if _, dup := services[s.Name]; dup {
			bad(path+".name", "service %q is defined twice", s.Name)
		}
		services[s.Name] = i
		if s.RingSize < 2 || s.RingSize > 1<<24 || s.RingSize&(s.RingSize-1) != 0 {
			bad(path+".ring_size", "%d must be a power of two between 2 and %d", s.RingSize, 1<<24)
		}
		switch s.Consumer.Type {
		case ConsumerCount:
		case ConsumerForward:
			if s.Consumer.TxQueue < 0 || s.Consumer.TxQueue >= p.TxQueues {
				bad(path+".consumer.tx_queue", "tx queue %d does not exist: the port has %d", s.Consumer.TxQueue, p.TxQueues)
			}
		case ConsumerRoCE:
			if c.RoCE == nil || c.RoCE.Service != s.Name {
				bad(path+".consumer.type", "a %q consumer needs a roce section with service: %s", ConsumerRoCE, s.Name)
			}
		case ConsumerKernel: // validateKernel
		case ConsumerProcess:
			c.validateProcess(i, portNameOK, bad)
		default:
			bad(path+".consumer.type", "%q: want %q, %q, %q, %q or %q", s.Consumer.Type, ConsumerCount, ConsumerForward, ConsumerRoCE, ConsumerKernel, ConsumerProcess)
		}
	}
	if _, ok := services[c.DefaultService]; !ok {
		bad("default_service", "%q is not a defined service", c.DefaultService)
	}

	if r := c.RoCE; r != nil {
		c.validateRoCE(r, services, bad)
	}
	if n := len(c.Rules) + len(c.RoCERules()); n > MaxRules {
		bad("rules", "%d rules (with the RoCE endpoint's); at most %d", n, MaxRules)
	}
	for i, r := range c.Rules {
		path := fmt.Sprintf("rules[%d]", i)
		if _, ok := services[r.Service]; !ok {
			bad(path+".service", "%q is not a defined service", r.Service)
		}
		if (len(r.DstPorts) > 0 || len(r.SrcPorts) > 0) && r.Protocol != 6 && r.Protocol != 17 && r.Protocol != 132 && r.Protocol != 0 {
			bad(path+".protocol", "ports need tcp or udp, not protocol %d", r.Protocol)
		}
	}

	if len(c.Pollers) == 0 {
		bad("pollers", "no poll loop: eal.lcores %q has no lcore besides the main lcore %d", c.EAL.Lcores, c.EAL.MainLcore)
	}
	queueOwner := map[int]int{}
	serviceOwner := map[string]int{}
	txOwner := map[int]int{}
	seenLcore := map[int]bool{}
	for i, pl := range c.Pollers {
		path := fmt.Sprintf("pollers[%d]", i)
		if lcores != nil && !lcoreSet[pl.Lcore] {
			bad(path+".lcore", "lcore %d is not in eal.lcores %q", pl.Lcore, c.EAL.Lcores)
		}
		if pl.Lcore == c.EAL.MainLcore {
			bad(path+".lcore", "lcore %d is the main lcore, which runs the Go runtime; pick a worker lcore", pl.Lcore)
		}
		if seenLcore[pl.Lcore] {
			bad(path+".lcore", "lcore %d already has a poll loop", pl.Lcore)
		}
		seenLcore[pl.Lcore] = true
		for j, q := range pl.RxQueues {
			qp := fmt.Sprintf("%s.rx_queues[%d]", path, j)
			if q < 0 || q >= p.RxQueues {
				bad(qp, "rx queue %d does not exist: the port has %d", q, p.RxQueues)
			} else if o, dup := queueOwner[q]; dup {
				bad(qp, "rx queue %d is already polled by pollers[%d]", q, o)
			}
			queueOwner[q] = i
		}
		for j, name := range pl.Services {
			sp := fmt.Sprintf("%s.services[%d]", path, j)
			si, ok := services[name]
			if !ok {
				bad(sp, "%q is not a defined service", name)
				continue
			}
			if o, dup := serviceOwner[name]; dup {
				bad(sp, "service %q is already drained by pollers[%d]", name, o)
			}
			serviceOwner[name] = i
			if q, ok := c.txQueueOf(c.Services[si]); ok {
				if o, used := txOwner[q]; used && o != i {
					bad(sp, "tx queue %d is already used by pollers[%d]; tx queues are not shared between lcores", q, o)
				}
				txOwner[q] = i
			}
		}
	}
	for q := 0; q < p.RxQueues; q++ {
		if _, ok := queueOwner[q]; !ok && len(c.Pollers) > 0 {
			bad("pollers", "rx queue %d is not polled by any poll loop", q)
		}
	}
	for i, s := range c.Services {
		if _, ok := serviceOwner[s.Name]; !ok && len(c.Pollers) > 0 && !c.IsLocal(i) {
			bad("pollers", "service %q is not drained by any poll loop: its ring would fill and drop", s.Name)
		}
	}

	c.validateKernel(bad)
	if k := c.Kernel; k != nil {
		if ks := c.KernelServices(); len(ks) > 0 {
			if o := c.Owner(c.Services[ks[0]].Name); o >= 0 {
				if _, used := txOwner[k.TxQueue]; !used {
					txOwner[k.TxQueue] = o
				}
			}
		}
	}
	c.validateLocalTxQueues(txOwner, bad)

	if c.Metrics.Listen != MetricsOff {
		if _, port, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			bad("metrics.listen", "%q: want host:port or %q", c.Metrics.Listen, MetricsOff)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			bad("metrics.listen", "%q: bad port", c.Metrics.Listen)
		}
	}
	if c.Shutdown.DrainTimeout < 0 || c.Shutdown.DrainTimeout > time.Minute {
		bad("shutdown.drain_timeout", "%v is outside 0..1m", c.Shutdown.DrainTimeout)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q: want text or json", c.Log.Format)
	}
	return errors.Join(errs...)
}

// txQueueOf returns the TX queue a service's consumer transmits on.
func (c *Config) txQueueOf(s Service) (int, bool) {
	switch {
	case s.Consumer.Type == ConsumerForward || s.Consumer.Type == ConsumerProcess:
		return s.Consumer.TxQueue, true
	case s.Consumer.Type == ConsumerRoCE && c.RoCE != nil && c.RoCE.Service == s.Name:
		return c.RoCE.TxQueue, true
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

// The daemon's own RoCE budget: roce.max_sessions sessions (each
// registers send_buffers + recv_buffers buffers of buffer_size bytes) in
// roce.memory_mb of DPDK memory.
const (
	DefaultRoCESessions = 16
	MaxRoCESessions     = 4096
	DefaultRoCEMemoryMB = 256
)

func (c *Config) validateRoCE(r *RoCE, services map[string]int, bad func(string, string, ...any)) {
	if i, ok := services[r.Service]; !ok {
		bad("roce.service", "%q is not a defined service", r.Service)
	} else if c.Services[i].Consumer.Type != ConsumerRoCE {
		bad("roce.service", "service %q must have consumer type %q", r.Service, ConsumerRoCE)
	}
	a := r.Address.Addr()
	if !a.IsValid() || !a.Is4() || r.Address.Bits() != 32 {
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
	if r.MTU+80 > c.Port.MTU+14 && r.MTU > 1024 {
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
	rules := []Rule{
		{Service: r.Service, EtherType: EtherType(header.EtherTypeIPv4), Protocol: Protocol(header.ProtoUDP),
			DstPorts: []PortRange{{wire.UDPPort, wire.UDPPort}}, DstCIDRs: []Prefix{r.Address}},
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
