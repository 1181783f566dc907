package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cephdpdkd/cephdpdkd/header"
	"github.com/cephdpdkd/cephdpdkd/roce"
)

// Config is one cephdpdkd configuration: one NIC and its services.
type Config struct {
	EAL      EAL       `yaml:"eal"`
	Port     Port      `yaml:"port"`
	Mempool  Mempool   `yaml:"mempool"`
	Burst    int       `yaml:"burst_size"`
	Services []Service `yaml:"services"`
	// DefaultService receives every frame no rule claims, and malformed ones.
	DefaultService string   `yaml:"default_service"`
	Rules          []Rule   `yaml:"rules"`
	Pollers        []Poller `yaml:"pollers"`
	RoCE           *RoCE    `yaml:"roce"`
	Kernel         *Kernel  `yaml:"kernel"`
	Metrics        Metrics  `yaml:"metrics"`
	Shutdown       Shutdown `yaml:"shutdown"`
	// IdleSleep is how the poll loops back off when idle; see idle.go.
	IdleSleep *IdleSleep `yaml:"idle_sleep"`
	Log       LogConfig  `yaml:"log"`

	// lines maps a dotted path ("services[1].ring_size") to its source line.
	lines map[string]int
}

// EAL holds the DPDK Environment Abstraction Layer options.
type EAL struct {
	// Lcores is the EAL -l list, e.g. "0-1". The main lcore runs the Go
	// runtime's DPDK calls; every other lcore may own a poll loop.
	Lcores    string `yaml:"lcores"`
	MainLcore int    `yaml:"main_lcore"`
	// RuntimeCPUs confines the Go runtime's threads (the metrics server,
	// the bridge's TCP I/O, GC, and the scheduling the poll loops need)
	// to a CPU list such as "0,4-5". Empty: not confined.
	RuntimeCPUs string   `yaml:"runtime_cpus"`
	MemoryMB    int      `yaml:"memory_mb"`
	NoHuge      bool     `yaml:"no_huge"`
	HugeDir     string   `yaml:"huge_dir"`
	FilePrefix  string   `yaml:"file_prefix"`
	ExtraArgs   []string `yaml:"extra_args"`
	// Hugepages, when set, has the daemon reserve and mount the
	// hugepages the EAL uses, and give them back at stop.
	Hugepages *Hugepages `yaml:"hugepages"`
}

// Port is the one NIC (or vdev) this configuration drives.
type Port struct {
	// Name labels the port in metrics and logs.
	Name string `yaml:"name"`
	// Device is a PCI address (0000:01:00.0) or vdev devargs
	// ("net_af_packet0,iface=veth0"). The token {{sample_pcap}} expands to
	// the sample capture embedded in the binary.
	Device        string `yaml:"device"`
	RxQueues      int    `yaml:"rx_queues"`
	TxQueues      int    `yaml:"tx_queues"`
	RxDescriptors int    `yaml:"rx_descriptors"`
	TxDescriptors int    `yaml:"tx_descriptors"`
	MTU           int    `yaml:"mtu"`
	Promiscuous   *bool  `yaml:"promiscuous"`
	// Bind, when set, moves the PCI device from its kernel driver to a
	// DPDK driver (see bind.go).
	Bind *Bind `yaml:"bind"`
	// Mode is how the daemon takes the port: "rebind" (the default: DPDK
	// drives port.device) or "af_xdp" (the kernel keeps the interface and
	// its traffic; RoCEv2 comes to the daemon through AF_XDP sockets, see
	// portmode.go).
	Mode string `yaml:"mode"`
	// AFXDP configures the af_xdp mode.
	AFXDP *AFXDP `yaml:"af_xdp"`

	// deviceDerived: Device is the af_xdp mode's, not the file's.
	deviceDerived bool
	// ownMTU and ownPromiscuous are the file's port.mtu and
	// port.promiscuous, which the af_xdp mode refuses.
	ownMTU         int
	ownPromiscuous *bool
}

// Mempool sizes the mbuf pool.
type Mempool struct {
	// Mbufs is the pool size; 0 sizes it from the port and rings.
	Mbufs     int `yaml:"mbufs"`
	CacheSize int `yaml:"cache_size"`
	// DataRoom is the mbuf data room including RTE_PKTMBUF_HEADROOM.
	DataRoom int `yaml:"data_room"`
	// Headroom is the count of spare mbufs beyond the computed need,
	// for consumers that hold packets in flight.
	Headroom int `yaml:"headroom"`
}

// Service is a named consumer of classified packets with its own ring.
type Service struct {
	Name     string   `yaml:"name"`
	RingSize int      `yaml:"ring_size"`
	Consumer Consumer `yaml:"consumer"`
	// Priority orders the services that share the kernel exception path:
	// when the kernel cannot take everything, higher priorities are
	// handed over first and the lowest-priority ring fills and drops.
	Priority int `yaml:"priority"`
}

// Consumer says what drains a service ring.
type Consumer struct {
	Type    string `yaml:"type"`
	TxQueue int    `yaml:"tx_queue"`
}

// RoCE configures the userspace RoCEv2 endpoint. Frames for it (UDP 4791
// to Address, and ARP for Address) are claimed for Service by rules the
// daemon puts ahead of the configured ones.
type RoCE struct {
	// Service is the service whose ring the endpoint drains; its
	// consumer type must be "roce".
	Service string `yaml:"service"`
	// Address is the endpoint's IPv4 address. It answers ARP for it.
	Address Prefix `yaml:"address"`
	// MAC is the endpoint's MAC address; the port's MAC when empty.
	MAC     string `yaml:"mac"`
	TxQueue int    `yaml:"tx_queue"`
	// Listen are rdma_cm ports (service ID RDMA_PS_TCP|port) and the
	// built-in service that answers each.
	Listen []RoCEListener `yaml:"listen"`
	// CephTCP are Ceph async+rdma listeners: the 65-byte QP record
	// exchange over a kernel TCP socket, then RC to Address.
	CephTCP []CephTCPListener `yaml:"ceph_tcp"`
	// Bridge relays Ceph's own RoCE clients (async+rdma in rdma_cm mode)
	// to the Ceph daemons' TCP endpoints at the same address.
	Bridge *RoCEBridge `yaml:"bridge"`

	BufferSize  int `yaml:"buffer_size"`  // registered buffer and largest SEND
	SendBuffers int `yaml:"send_buffers"` // per session
	RecvBuffers int `yaml:"recv_buffers"` // per session, all posted
	MTU         int `yaml:"mtu"`          // path MTU 256..4096
	// Window is each requester's window in packets: it sends no PSN this
	// far past the oldest unacknowledged one. 0 takes rxe's 128
	// (RXE_MAX_UNACKED_PSNS); a hardware RNIC allows more, and the bytes
	// in flight (window × mtu) bound a connection's throughput to one
	// window per round trip.
	Window      int   `yaml:"window"`
	RNRTimer    uint8 `yaml:"rnr_timer"`   // RNR NAK timer code we send (IB encoding)
	Timeout     uint8 `yaml:"timeout"`     // local ACK timeout code
	RetryCount  uint8 `yaml:"retry_count"` // 7: unlimited
	RNRRetry    uint8 `yaml:"rnr_retry"`   // 7: unlimited
	MaxSessions int   `yaml:"max_sessions"`
	// MemoryMB bounds the DPDK memory for registered buffers.
	MemoryMB int `yaml:"memory_mb"`
	// IdleProbe is how long a QP with nothing in flight waits without
	// hearing from its peer before it checks the peer is alive
	// (roce.EndpointConfig.IdleProbe); a peer that then answers nothing
	// for the QP's retry budget is taken for dead, and its session
	// (the bridge's TCP connection with it) reaped. Unset:
	// roce.DefaultIdleProbe; 0s disables. Use IdleProbeInterval.
	IdleProbe *time.Duration `yaml:"idle_probe"`
}

// IdleProbeInterval returns roce.idle_probe: roce.DefaultIdleProbe when
// unset, 0 when disabled.
func (r *RoCE) IdleProbeInterval() time.Duration {
	if r.IdleProbe == nil {
		return roce.DefaultIdleProbe
	}
	return *r.IdleProbe
}

// RoCE built-in services.
const (
	AppEcho    = "echo"     // send back what arrives
	AppDiscard = "discard"  // count and drop what arrives
	AppRPing   = "rping"    // rping's server role (SEND + RDMA READ/WRITE)
	AppTose    = "ucmatose" // the server half of librdmacm's ucmatose test
)

// RoCEListener binds a port to a built-in service.
type RoCEListener struct {
	Port uint16 `yaml:"port"`
	App  string `yaml:"app"`
	// Count and Size are ucmatose's -C and -S, which the protocol does not
	// carry: they must match the client's (default 10 and 100).
	Count int `yaml:"count"`
	Size  int `yaml:"size"`
}

// CephTCPListener is a kernel TCP address (host:port) where Ceph
// async+rdma clients exchange QP records, and the service that answers.
type CephTCPListener struct {
	Listen string `yaml:"listen"`
	App    string `yaml:"app"`
}

// Rule claims matching packets for a service. Empty fields match anything;
// the first matching rule in file order wins.
type Rule struct {
	Service   string      `yaml:"service"`
	EtherType EtherType   `yaml:"ethertype"`
	Protocol  Protocol    `yaml:"protocol"`
	DstPorts  []PortRange `yaml:"dst_ports"`
	SrcPorts  []PortRange `yaml:"src_ports"`
	DstCIDRs  []Prefix    `yaml:"dst_cidrs"`
}

// Poller is one poll loop pinned to an EAL lcore.
type Poller struct {
	Lcore    int      `yaml:"lcore"`
	RxQueues []int    `yaml:"rx_queues"`
	Services []string `yaml:"services"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	Listen string `yaml:"listen"`
}

// Shutdown bounds how long stopping may take.
type Shutdown struct {
	DrainTimeout time.Duration `yaml:"drain_timeout"`
}

// LogConfig selects log level and format.
type LogConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// PortRange is an inclusive L4 port range, written as 6789 or "6800-7568".
type PortRange struct{ Lo, Hi uint16 }

func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// UnmarshalYAML accepts a port number or a "lo-hi" string.
func (r *PortRange) UnmarshalYAML(n *yaml.Node) error {
	lo, hi, found := strings.Cut(n.Value, "-")
	a, err := parsePort(lo)
	if err != nil {
		return fmt.Errorf("line %d: port range %q: %w", n.Line, n.Value, err)
	}
	b := a
	if found {
		if b, err = parsePort(hi); err != nil {
			return fmt.Errorf("line %d: port range %q: %w", n.Line, n.Value, err)
		}
	}
	if a > b {
		return fmt.Errorf("line %d: port range %q: low end above high end", n.Line, n.Value)
	}
	*r = PortRange{a, b}
	return nil
}

func parsePort(s string) (uint16, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil {
		return 0, errors.New("not a port number 0-65535")
	}
	return uint16(v), nil
}

// Protocol is an IP protocol: tcp, udp, icmp, icmpv6, or a number. Zero means any.
type Protocol uint8

var protocolNames = map[string]Protocol{
	"tcp": Protocol(header.ProtoTCP), "udp": Protocol(header.ProtoUDP), "icmp": Protocol(header.ProtoICMP),
	"icmpv6": Protocol(header.ProtoICMPv6), "any": 0, "": 0,
}

// UnmarshalYAML accepts a name or a number.
func (p *Protocol) UnmarshalYAML(n *yaml.Node) error {
	return unmarshalNamed(n, p, protocolNames, 8, "protocol", "tcp, udp, icmp, icmpv6 or a number 0-255")
}

// EtherType is an Ethernet type: ipv4, ipv6, arp, or a number. Zero means any.
type EtherType uint16

var etherTypeNames = map[string]EtherType{
	"ipv4": EtherType(header.EtherTypeIPv4), "ipv6": EtherType(header.EtherTypeIPv6), "arp": EtherType(header.EtherTypeARP),
	"any": 0, "": 0,
}

// UnmarshalYAML accepts a name or a number such as 0x88cc.
func (e *EtherType) UnmarshalYAML(n *yaml.Node) error {
	return unmarshalNamed(n, e, etherTypeNames, 16, "ethertype", "ipv4, ipv6, arp or a number")
}

// unmarshalNamed decodes a name from names (in any case) or a number of
// at most bits bits into *v; what and want word the error.
func unmarshalNamed[T ~uint8 | ~uint16](n *yaml.Node, v *T, names map[string]T, bits int, what, want string) error {
	if x, ok := names[strings.ToLower(n.Value)]; ok {
		*v = x
		return nil
	}
	x, err := strconv.ParseUint(n.Value, 0, bits)
	if err != nil {
		return fmt.Errorf("line %d: %s %q: want %s", n.Line, what, n.Value, want)
	}
	*v = T(x)
	return nil
}

// Prefix is an IP prefix; a bare address means a host prefix.
type Prefix struct{ netip.Prefix }

// UnmarshalYAML accepts "10.0.0.0/8" or "10.0.0.1".
func (p *Prefix) UnmarshalYAML(n *yaml.Node) error {
	if pfx, err := netip.ParsePrefix(n.Value); err == nil {
		p.Prefix = pfx.Masked()
		return nil
	}
	a, err := netip.ParseAddr(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not an IP prefix or address", n.Line, n.Value)
	}
	p.Prefix = netip.PrefixFrom(a, a.BitLen())
	return nil
}

// Load reads and validates the configuration file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML strictly, applies defaults and validates the result.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty configuration")
		}
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, err
	}
	c.lines = map[string]int{}
	indexLines(&root, "", c.lines)
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// indexLines records the line of every mapping key and sequence item.
func indexLines(n *yaml.Node, path string, out map[string]int) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			indexLines(c, path, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			out[p] = n.Content[i].Line
			indexLines(n.Content[i+1], p, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			out[p] = c.Line
			indexLines(c, p, out)
		}
	}
}

// Line returns the source line of a dotted path, or of its nearest
// ancestor present in the file; 0 if unknown.
func (c *Config) Line(path string) int {
	for path != "" {
		if l, ok := c.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}
