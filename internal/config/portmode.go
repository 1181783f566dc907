package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cephdpdkd/cephdpdkd/internal/afxdp"
	"github.com/cephdpdkd/cephdpdkd/internal/devargs"
	"github.com/cephdpdkd/cephdpdkd/internal/xdp"
	"github.com/cephdpdkd/cephdpdkd/roce/wire"
)

// Port modes (port.mode).
const (
	// PortRebind: DPDK drives port.device, a NIC rebound to a DPDK
	// driver or a vdev; the node's own traffic crosses the kernel
	// exception path.
	PortRebind = "rebind"
	// PortAFXDP: the kernel keeps the interface and all its traffic but
	// the RoCEv2 addressed to roce.address, which an XDP program
	// redirects to the daemon's AF_XDP sockets (net_af_xdp), one a
	// receive queue.
	PortAFXDP = "af_xdp"
)

// AFXDP configures the af_xdp port mode.
type AFXDP struct {
	// Interface is the kernel interface whose RoCEv2 the daemon takes.
	Interface string `yaml:"interface"`
	// Attach is how the XDP program runs: "native" (in the driver, the
	// default: a NIC keeps GRO after XDP_PASS) or "generic" (on the skb:
	// any interface; on a veth native mode costs the peer's GSO).
	Attach string `yaml:"attach"`
	// BPFFS is the BPF file system the program's link is pinned under
	// (DefaultBPFFS; "off": no link, attached through netlink). A
	// pinned link outlives the daemon and DPDK's close of the port,
	// which detaches a program attached through netlink.
	BPFFS string `yaml:"bpffs"`
}

// PinDir is where the program's link is pinned: "" for none.
func (x *AFXDP) PinDir() string {
	if x.BPFFS == BPFFSOff {
		return ""
	}
	return x.BPFFS
}

// Limits and defaults of the af_xdp mode.
const (
	// DefaultBPFFS is where systemd mounts the BPF file system. Where
	// none is mounted, the daemon attaches through netlink.
	DefaultBPFFS = "/sys/fs/bpf"
	// BPFFSOff turns the pinned link off.
	BPFFSOff = "off"
	// MaxAFXDPRoCEMTU is the largest RoCE path MTU in the af_xdp mode:
	// net_af_xdp's frames live in one page with the mbuf header and the
	// XDP headroom (about 3.5 KB), which 4096 and its headers exceed.
	MaxAFXDPRoCEMTU = 2048
	// DefaultAFXDPDataRoom is the af_xdp mode's mbuf data room: the PMD
	// puts XDP_PACKET_HEADROOM (256) before each frame, so the 2176 of
	// the rebind mode would leave 1792 bytes, less than a 2048-byte RoCE
	// payload with its headers.
	DefaultAFXDPDataRoom = 2560
	// AFXDPFillRing is how many mbufs net_af_xdp (DPDK 22.11) puts in
	// each queue's fill ring at setup and keeps there, refilled as frames
	// arrive (xsk_configure's reserve_size,
	// XSK_RING_PROD__DEFAULT_NUM_DESCS); its close does not give them
	// back.
	AFXDPFillRing = 2048
)

// IsAFXDP reports whether the port is taken in the af_xdp mode.
func (p *Port) IsAFXDP() bool { return p.Mode == PortAFXDP }

// XDPMode is the af_xdp mode's attach mode; valid after Validate.
func (p *Port) XDPMode() xdp.Mode {
	m, _ := xdp.ParseMode(p.AFXDP.Attach)
	return m
}

// portModeDefaults fills in the af_xdp mode's settings before the
// port's own defaults: as many TX as RX queues (DPDK 22.11's net_af_xdp
// pairs them), the data room, and the device, derived from the
// interface: one socket a queue from queue 0, no preferred busy polling
// (the kernel's own TCP on those queues must not wait on the daemon).
func (c *Config) portModeDefaults() {
	p := &c.Port
	if p.Mode == "" {
		p.Mode = PortRebind
	}
	if !p.IsAFXDP() || p.AFXDP == nil {
		return
	}
	orDefault(&p.AFXDP.Attach, xdp.Native.String())
	orDefault(&p.AFXDP.BPFFS, DefaultBPFFS)
	// The interface is the node's: the daemon neither sets its MTU nor
	// makes it promiscuous (net_af_xdp would, through the kernel).
	p.ownMTU, p.MTU = p.MTU, 0
	p.ownPromiscuous = p.Promiscuous
	off := false
	p.Promiscuous = &off
	orDefault(&p.RxQueues, 1)
	orDefault(&p.TxQueues, p.RxQueues)
	orDefault(&c.Mempool.DataRoom, DefaultAFXDPDataRoom)
	if p.Device == "" {
		p.Device = fmt.Sprintf("net_af_xdp0,iface=%s,start_queue=0,queue_count=%d,busy_budget=0", p.AFXDP.Interface, p.RxQueues)
		p.deviceDerived = true
	}
}

// portMode checks port.mode and what each mode rules out.
func (v *validation) portMode() {
	p := &v.c.Port
	switch p.Mode {
	case PortRebind:
		if p.AFXDP != nil {
			v.bad("port.af_xdp", "only with port.mode: %s", PortAFXDP)
		}
		if d, err := devargs.Parse(p.Device); err == nil && !d.PCI && strings.HasPrefix(d.Name, "net_af_xdp") {
			v.bad("port.device", "%s is the af_xdp mode's device: set port.mode: %s and port.af_xdp.interface instead (the daemon derives the device, attaches its XDP program and covers every receive queue)", devargs.Name(p.Device), PortAFXDP)
		}
	case PortAFXDP:
		v.afxdp()
	default:
		v.bad("port.mode", "%q: want %s or %s", p.Mode, PortRebind, PortAFXDP)
	}
}

// afxdp checks the af_xdp mode's settings. What the interface itself
// must be (there, a NIC, with as many receive queues) the host check
// sees.
func (v *validation) afxdp() {
	c := v.c
	p := &c.Port
	if p.AFXDP == nil || p.AFXDP.Interface == "" {
		v.bad("port.af_xdp.interface", "required with port.mode: %s: the kernel interface whose RoCEv2 the daemon takes", PortAFXDP)
	} else {
		checkIfName(v.bad, "port.af_xdp.interface", p.AFXDP.Interface)
	}
	if p.AFXDP != nil {
		if _, err := xdp.ParseMode(p.AFXDP.Attach); err != nil {
			v.bad("port.af_xdp.attach", "%q: want native or generic", p.AFXDP.Attach)
		}
		if b := p.AFXDP.BPFFS; b != BPFFSOff && !filepath.IsAbs(b) {
			v.bad("port.af_xdp.bpffs", "%q: want an absolute path (a BPF file system) or %q", b, BPFFSOff)
		}
	}
	if p.Device != "" && !p.deviceDerived {
		v.bad("port.device", "not with port.mode: %s: the daemon derives net_af_xdp's device from port.af_xdp.interface", PortAFXDP)
	}
	if p.ownMTU != 0 {
		v.bad("port.mtu", "not with port.mode: %s: the interface keeps the MTU the node gives it", PortAFXDP)
	}
	if p.ownPromiscuous != nil {
		v.bad("port.promiscuous", "not with port.mode: %s: the daemon leaves the interface's flags to the node", PortAFXDP)
	}
	if p.Bind != nil {
		v.bad("port.bind", "not with port.mode: %s: the NIC stays on its kernel driver", PortAFXDP)
	}
	if c.Kernel != nil {
		v.bad("kernel", "not with port.mode: %s: the kernel keeps the interface and all its traffic, so there is no exception path", PortAFXDP)
	}
	if c.RoCE == nil {
		v.bad("roce", "required with port.mode: %s: RoCEv2 to roce.address is all the daemon receives", PortAFXDP)
	} else if c.RoCE.MTU > MaxAFXDPRoCEMTU {
		v.bad("roce.mtu", "%d: at most %d with port.mode: %s (net_af_xdp's frames share a page with the mbuf header and the XDP headroom)", c.RoCE.MTU, MaxAFXDPRoCEMTU, PortAFXDP)
	}
	if p.TxQueues != p.RxQueues {
		v.bad("port.tx_queues", "%d: with port.mode: %s as many as port.rx_queues (%d): DPDK 22.11's net_af_xdp pairs each RX queue's socket with a TX queue", p.TxQueues, PortAFXDP, p.RxQueues)
	}
	if room := c.Mempool.DataRoom - afxdpHeadroom; c.RoCE != nil && room < c.RoCE.MTU+maxRoCEHeaders {
		v.bad("mempool.data_room", "%d leaves %d bytes for a frame after net_af_xdp's headroom (%d), less than roce.mtu %d and its headers (%d)", c.Mempool.DataRoom, room, afxdpHeadroom, c.RoCE.MTU, maxRoCEHeaders)
	}
}

// afxdpHeadroom is what net_af_xdp keeps before a frame in the data
// room: RTE_PKTMBUF_HEADROOM (128) and XDP_PACKET_HEADROOM (256).
const afxdpHeadroom = 128 + 256

// maxRoCEHeaders is the most header bytes around a RoCE payload in a
// frame: Ethernet with two VLAN tags (22), and roceHeaders.
const maxRoCEHeaders = 22 + roceHeaders

// checkAFXDPHost checks the interface the af_xdp mode takes: that it
// exists and is of a kind it can take, that port.rx_queues covers every
// receive queue (RoCE arriving on a queue without a socket goes to the
// kernel, which drops it), that a native attach can take its MTU, and
// that roce.mtu fits its MTU. Whether a
// program attached to it is ours is the run directory's to say: cmd's
// host check.
func (c *Config) checkAFXDPHost(bad func(path, format string, args ...any)) {
	p := c.Port
	ifc, err := afxdp.Inspect(p.AFXDP.Interface)
	if err != nil {
		bad("port.af_xdp.interface", "%v", err)
		return
	}
	if ifc.RxQueues != p.RxQueues {
		bad("port.rx_queues", "%d, but %s has %d receive queues: each needs a socket, or RoCE arriving on the others goes to the kernel; set port.rx_queues: %d (or lower the interface's channels with ethtool -L)",
			p.RxQueues, ifc.Name, ifc.RxQueues, ifc.RxQueues)
	}
	if p.XDPMode() == xdp.Native && ifc.MTU > xdp.NativeMaxMTU {
		bad("port.af_xdp.attach", "native: %s's MTU is %d, but native XDP without frags support cannot take frames over MTU %d (the daemon's program is not frags-aware): set port.af_xdp.attach: generic (a RoCE frame is at most %d bytes and its headers; larger frames pass to the kernel) or lower the MTU to %d",
			ifc.Name, ifc.MTU, xdp.NativeMaxMTU, MaxAFXDPRoCEMTU, xdp.NativeMaxMTU)
	}
	if r := c.RoCE; r != nil && r.MTU+roceHeaders > ifc.MTU {
		bad("roce.mtu", "path MTU %d does not fit %s's MTU %d with RoCEv2 headers (%d)", r.MTU, ifc.Name, ifc.MTU, roceHeaders)
	}
	if r := c.RoCE; r != nil && !r.Address.IsValid() {
		var v4 []netip.Addr
		for _, a := range ifc.Addrs {
			if a.Is4() {
				v4 = append(v4, a)
			}
		}
		if len(v4) != 1 {
			bad("roce.address", "not set, and %s has %d IPv4 addresses %v: set roce.address to the one the Ceph daemons listen on", ifc.Name, len(v4), v4)
			return
		}
		r.Address = Prefix{netip.PrefixFrom(v4[0], 32)}
	}
	if r := c.RoCE; r != nil && !slices.Contains(ifc.Addrs, r.Address.Addr()) {
		bad("roce.address", "%v is not an address of %s (%v): in the af_xdp mode it is the node's own, which the kernel answers ARP for and the Ceph daemons listen on", r.Address.Addr(), ifc.Name, ifc.Addrs)
	}
}

// roceHeaders is what a RoCEv2 packet adds to its path MTU's payload
// within the IP MTU: IPv4 (20), UDP (8), BTH (12), the largest extension
// headers (RETH 16 + ImmDt 4) and the ICRC (4).
const roceHeaders = 20 + 8 + 12 + 20 + 4

// roceFits reports whether RoCE packets of path MTU mtu fit an IP MTU.
func roceFits(mtu, ipMTU int) bool { return mtu+roceHeaders <= ipMTU }

// MaxRoCEPathMTU is the largest RoCE path MTU the port carries, and so
// the largest a client's connection request may ask for: the connection
// manager refuses more (REJ, invalid path MTU), where it would otherwise
// accept a connection whose full-sized packets the port drops. In the
// rebind mode that is the largest that fits port.mtu (roce.mtu at
// least, which validation holds to it); in the af_xdp mode
// MaxAFXDPRoCEMTU.
func (c *Config) MaxRoCEPathMTU() int {
	if c.Port.IsAFXDP() {
		return MaxAFXDPRoCEMTU
	}
	m := wire.MaxMTU
	for m > c.RoCE.MTU && !roceFits(m, c.Port.MTU) {
		m /= 2
	}
	return m
}
